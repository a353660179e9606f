package interop_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// TestOTelGoSDKGRPC sends spans with the OpenTelemetry Go SDK's OTLP/gRPC
// exporter (gzip, an API key in the metadata, as
// OTEL_EXPORTER_OTLP_HEADERS would set it) to Loupe's collector serving
// OTLP/gRPC in-process, and checks what was stored.
func TestOTelGoSDKGRPC(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _, err := server.CreateKey(ctx, st, server.ScopeIngest, "otel-grpc", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Store: st, RequireKeys: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- server.ServeGRPCListener(sctx, ln, srv, nil) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("ServeGRPCListener: %v", err)
		}
	}()

	export := func(key string) (trace.TraceID, error) {
		exp, err := otlptracegrpc.New(ctx,
			otlptracegrpc.WithEndpoint(ln.Addr().String()), otlptracegrpc.WithInsecure(),
			otlptracegrpc.WithCompressor("gzip"), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
			otlptracegrpc.WithHeaders(map[string]string{"authorization": "Bearer " + key}))
		if err != nil {
			t.Fatal(err)
		}
		defer exp.Shutdown(ctx)
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "go-grpc-agent"))))
		tr := tp.Tracer("loupe-test")
		sctx, agent := tr.Start(ctx, "invoke_agent planner", oteltrace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "planner")))
		_, chat := tr.Start(sctx, "chat gpt-4o", oteltrace.WithSpanKind(oteltrace.SpanKindClient), oteltrace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
			attribute.String("gen_ai.request.model", "gpt-4o"), attribute.Int("gen_ai.usage.input_tokens", 120),
			attribute.Int("gen_ai.usage.output_tokens", 30)))
		chat.End()
		_, tool := tr.Start(sctx, "execute_tool search", oteltrace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "search"),
			attribute.String("gen_ai.tool.call.arguments", `{"q":"Lisbon"}`), attribute.String("gen_ai.tool.call.result", `["sunny"]`)))
		tool.End()
		agent.End()
		// Export synchronously, so that the exporter's error is seen.
		ro := []sdktrace.ReadOnlySpan{chat.(sdktrace.ReadOnlySpan), tool.(sdktrace.ReadOnlySpan), agent.(sdktrace.ReadOnlySpan)}
		id, _ := trace.ParseTraceID(agent.SpanContext().TraceID().String())
		return id, exp.ExportSpans(ctx, ro)
	}

	id, err := export(key)
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	got, err := st.Trace(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	s := got.Summary
	if s.Name != "planner" || s.ModelCalls != 1 || s.ToolCalls != 1 || s.InputTokens != 120 || s.OutputTokens != 30 {
		t.Errorf("summary: %+v", s)
	}
	types := map[trace.Type]int{}
	for _, r := range got.Records {
		types[r.Type]++
	}
	if types[trace.TypeRunStart] != 1 || types[trace.TypeModelCall] != 1 || types[trace.TypeToolStart] != 1 || types[trace.TypeToolEnd] != 1 {
		t.Errorf("records: %v", types)
	}

	if _, err := export("lk_0123456789abcdef_wrong"); err == nil {
		t.Error("an export with an unknown key succeeded")
	}
}
