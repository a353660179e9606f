//go:build !unix

package otlp

// cpuTime is unknown here: benchmarks report no cpu-ns/op.
func cpuTime() int64 { return 0 }
