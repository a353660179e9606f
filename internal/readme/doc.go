// Package readme holds the Go snippets of the repository's README.md as
// Example functions, so that `go test` compiles every one of them, and a
// test that fails when README.md and the examples drift apart. It has no
// API.
package readme
