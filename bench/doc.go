// Package bench holds benchmarks that compare Loupe with other libraries.
//
// It is a module of its own (github.com/loupe-dev/loupe/bench), so that the
// libraries it compares against are requirements of this module only and
// never of github.com/loupe-dev/loupe: a program that imports Loupe does not
// download them. The module uses the Loupe in the directory above it (see
// the replace directive in go.mod). Run the benchmarks from this directory:
//
//	cd bench && go test -run '^$' -bench . -benchmem
package bench
