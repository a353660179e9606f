package trace_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/loupe-dev/loupe/trace"
)

// BenchmarkSmallRunAfterLarge measures what a 3-record run allocates
// (B/op) depending on the runs the same Tracer made before it: only small
// runs; one 100,000-record run; two in a row. The large runs are made with
// the timer stopped, so only the small run counts. Run it with
// -benchtime 20x: each op makes one or two large runs.
func BenchmarkSmallRunAfterLarge(b *testing.B) {
	run := func(tr *trace.Tracer, n int) {
		_, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
		for range n - 2 {
			ec.ToolCall("t", nil, nil, 0, nil)
		}
		ec.End(nil, nil)
	}
	for _, c := range []struct {
		name   string
		before []int // the runs made before each small run, timer stopped
	}{
		{"after-small", []int{3, 3}},
		{"after-one-100k", []int{3, 100_000}},
		{"after-two-100k", []int{100_000, 100_000}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr := trace.New(trace.Options{})
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				for _, n := range c.before {
					run(tr, n)
				}
				b.StartTimer()
				run(tr, 3)
			}
		})
	}
}

// BenchmarkRun1M records a run of 1,000,000 tool calls sent to a sink
// through the background dispatcher, keeping the records (the default) or
// not (RunOptions.StreamOnly), and reports the heap the finished run still
// holds (MB-held, measured after a GC while the run is reachable) beside
// what it allocated (B/op). Run it with -benchtime 3x.
func BenchmarkRun1M(b *testing.B) {
	const n = 1_000_000
	discard := trace.SinkFunc(func(context.Context, []trace.Record) error { return nil })
	for _, c := range []struct {
		name   string
		stream bool
		inline bool
	}{
		{"kept", false, false},
		{"stream-only", true, false},
		{"stream-only-inline", true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr := trace.New(trace.Options{Sinks: []trace.Sink{discard}, Dispatch: trace.DispatchOptions{OnFull: trace.Block, Inline: c.inline}})
			defer tr.Shutdown(context.Background())
			in, out := trace.Raw([]byte(`{"expr":"6*7"}`)), trace.Raw([]byte(`42`))
			var held float64
			b.ReportAllocs()
			for range b.N {
				var ms runtime.MemStats
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				base := ms.HeapAlloc
				b.StartTimer()
				_, ec := tr.Start(context.Background(), "big", trace.RunOptions{StreamOnly: c.stream})
				for range n {
					ec.ToolCall("calculator", in, out, 0, nil)
				}
				ec.End(nil, nil)
				if err := tr.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				held += float64(int64(ms.HeapAlloc)-int64(base)) / 1e6
				runtime.KeepAlive(ec)
				b.StartTimer()
			}
			b.ReportMetric(held/float64(b.N), "MB-held")
		})
	}
}
