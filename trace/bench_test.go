package trace_test

import (
	"context"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/tracefix"
	"github.com/loupe-dev/loupe/trace"
)

// BenchmarkAppendJSON encodes the fixture's records, one of each type.
func BenchmarkAppendJSON(b *testing.B) {
	recs := tracefix.Record(trace.New(trace.Options{Now: tracefix.Clock(time.Millisecond)})).Records()
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		for i := range recs {
			buf = recs[i].AppendJSON(buf[:0])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}

// BenchmarkRecord measures the recording path alone (no sinks) for one
// tool call in a run that is ended and dropped every 1,000 records, as an
// agent's runs are.
func BenchmarkRecord(b *testing.B) {
	tr := trace.New(trace.Options{})
	in, out := trace.Raw([]byte(`{"expr":"6*7"}`)), trace.Raw([]byte(`42`))
	_, ec := tr.Start(context.Background(), "bench", trace.RunOptions{})
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		ec.ToolCall("calculator", in, out, 50*time.Microsecond, nil)
		if n++; n == 1000 {
			ec.End()
			_, ec = tr.Start(context.Background(), "bench", trace.RunOptions{})
			n = 0
		}
	}
}
