package interop_test

import (
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/export/jsonl"
	"github.com/loupe-dev/loupe/trace"
)

// The two benchmarks below do the same work: record one tool call (name, a
// small input and output, its duration) and deliver it through a
// background batching pipeline to an exporter writing JSON to io.Discard.
// BENCHMARKS.md compares them.

var (
	benchIn  = trace.Raw([]byte(`{"expr":"6*7"}`))
	benchOut = trace.Raw([]byte(`42`))
)

func BenchmarkToolCall(b *testing.B) {
	b.Run("loupe", func(b *testing.B) {
		tr := trace.New(trace.Options{
			Sinks:    []trace.Sink{jsonl.NewSink(io.Discard)},
			Dispatch: trace.DispatchOptions{OnFull: trace.Block},
		})
		_, ec := tr.Start(context.Background(), "bench", trace.RunOptions{})
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			ec.ToolCall("calculator", benchIn, benchOut, 50*time.Microsecond, nil)
		}
		b.StopTimer()
		if err := tr.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("otel", func(b *testing.B) { benchOTel(b, sdktrace.WithBlocking()) })
	// OTel's default policy drops spans when its queue is full; it shows
	// the producer's own cost when the exporter cannot keep up.
	b.Run("otel-dropping", func(b *testing.B) { benchOTel(b) })
}

func benchOTel(b *testing.B, opts ...sdktrace.BatchSpanProcessorOption) {
	{
		exp, err := stdouttrace.New(stdouttrace.WithWriter(io.Discard))
		if err != nil {
			b.Fatal(err)
		}
		// WithBlocking matches Loupe's Block policy: nothing is dropped.
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, opts...))
		tracer := tp.Tracer("bench")
		ctx := context.Background()
		in, out := string(benchIn), string(benchOut)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			_, span := tracer.Start(ctx, "calculator", oteltrace.WithTimestamp(start))
			span.SetAttributes(
				attribute.String("gen_ai.tool.name", "calculator"),
				attribute.String("gen_ai.tool.call.arguments", in),
				attribute.String("gen_ai.tool.call.result", out),
			)
			span.End(oteltrace.WithTimestamp(start.Add(50 * time.Microsecond)))
		}
		b.StopTimer()
		if err := tp.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDisabled measures a tool call recorded into a disabled (nil)
// context: what instrumented code costs when tracing is off.
func BenchmarkDisabled(b *testing.B) {
	var tr *trace.Tracer
	_, ec := tr.Start(context.Background(), "off", trace.RunOptions{})
	runtime.GC() // do not measure the collection of earlier benchmarks' garbage
	b.ReportAllocs()
	for b.Loop() {
		ec.ToolCall("calculator", benchIn, benchOut, 50*time.Microsecond, nil)
	}
}
