// Package interop holds the code that measures or tests Loupe against
// third-party SDKs: the benchmark that compares Loupe's recorder with the
// OpenTelemetry Go SDK, and the tests in which the OpenTelemetry Go SDK's
// OTLP/HTTP and OTLP/gRPC exporters send spans to Loupe's collector.
//
// It is a module of its own (github.com/loupe-dev/loupe/interop), so that
// those SDKs are requirements of this module only and never of
// github.com/loupe-dev/loupe: a program that imports Loupe does not
// download them. The module uses the Loupe in the directory above it (see
// the replace directive in go.mod). scripts/test.sh runs its tests; run the
// benchmarks from this directory:
//
//	cd interop && go test -run '^$' -bench . -benchmem
package interop
