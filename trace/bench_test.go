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
			ec.End(nil, nil)
			_, ec = tr.Start(context.Background(), "bench", trace.RunOptions{})
			n = 0
		}
	}
}

// BenchmarkIteration records what one iteration of an agent loop records
// (iteration start and end, a model call, a tool call's start and end,
// small values), in runs of 1,000 iterations that are ended and whose
// Records are taken, as agent.Executor does: the tracing cost of one agent
// iteration without the agent.
func BenchmarkIteration(b *testing.B) {
	for _, c := range []struct {
		name  string
		sinks []trace.Sink
	}{
		{"nosink", nil},
		{"nullsink", []trace.Sink{trace.SinkFunc(func(context.Context, []trace.Record) error { return nil })}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr := trace.New(trace.Options{Sinks: c.sinks, Dispatch: trace.DispatchOptions{OnFull: trace.Block}})
			defer tr.Shutdown(context.Background())
			req := trace.Raw([]byte(`{"messages":3,"tools":1,"new":[{"role":"tool","content":"42","tool_call_id":"c1","name":"calculator"}]}`))
			resp := trace.Raw([]byte(`{"tool_calls":[{"id":"c2","name":"calculator","input":{"expr":"6*7"}}]}`))
			in, out := []byte(`{"expr":"6*7"}`), []byte(`42`)
			u := trace.Usage{InputTokens: 100, OutputTokens: 20, CostUSD: 0.0006}
			ctx, ec := tr.Start(context.Background(), "bench", trace.RunOptions{})
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				ec.StartIteration()
				m := ec.StartSpan(trace.SpanModel, "bench-model", req)
				m.EndModel(resp, nil, u, "tool_calls", nil)
				s := ec.StartSpan(trace.SpanTool, "calculator", trace.Raw(in))
				_ = s.Context(ctx)
				s.End(trace.Raw(out), nil)
				ec.EndIteration("continue")
				if n++; n == 1000 {
					ec.End(nil, nil)
					_ = ec.Records()
					_ = tr.Flush(context.Background())
					ctx, ec = tr.Start(context.Background(), "bench", trace.RunOptions{})
					n = 0
				}
			}
		})
	}
}
