package interop_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// TestOTelGoSDK sends GenAI-convention and OpenInference spans with the
// OpenTelemetry Go SDK's OTLP/HTTP exporter to Loupe's collector (protobuf, gzip, an API key in
// the headers, as OTEL_EXPORTER_OTLP_HEADERS would set it) and checks what
// was stored, span by span. It lives in this module so that the SDK is never
// a requirement of loupe.
func TestOTelGoSDK(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _, err := server.CreateKey(context.Background(), st, server.ScopeIngest, "otel", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Store: st, RequireKeys: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer func() { ts.Close(); srv.Close() }()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEndpointURL(ts.URL+"/v1/traces"),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "go-agent"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	tr := tp.Tracer("loupe-test")

	ctx, agent := tr.Start(ctx, "invoke_agent planner", oteltrace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "planner")))
	_, chat := tr.Start(ctx, "chat gpt-4o", oteltrace.WithSpanKind(oteltrace.SpanKindClient), oteltrace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.request.model", "gpt-4o"), attribute.Int("gen_ai.usage.input_tokens", 120),
		attribute.Int("gen_ai.usage.output_tokens", 30), attribute.StringSlice("gen_ai.response.finish_reasons", []string{"tool_calls"}),
		attribute.String("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"plan a trip"}]}]`)))
	chat.End()
	_, tool := tr.Start(ctx, "execute_tool search", oteltrace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "search"),
		attribute.String("gen_ai.tool.call.arguments", `{"q":"Lisbon"}`), attribute.String("gen_ai.tool.call.result", `["sunny"]`)))
	tool.End()
	_, bad := tr.Start(ctx, "execute_tool book", oteltrace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "book")))
	bad.RecordError(errBooking{})
	bad.SetStatus(codes.Error, "no seats")
	bad.End()
	_, llm := tr.Start(ctx, "ChatAnthropic", oteltrace.WithAttributes(
		attribute.String("openinference.span.kind", "LLM"), attribute.String("llm.model_name", "claude-sonnet"),
		attribute.Int("llm.token_count.prompt", 50), attribute.Int("llm.token_count.completion", 7),
		attribute.String("llm.input_messages.0.message.role", "user"), attribute.String("llm.input_messages.0.message.content", "hi")))
	llm.End()
	agent.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatalf("exporting to loupe serve: %v", err)
	}

	id := trace.TraceID(agent.SpanContext().TraceID())
	got, err := st.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	bySpan := map[trace.SpanID][]trace.Record{}
	for _, r := range got.Records {
		bySpan[r.SpanID] = append(bySpan[r.SpanID], r)
	}
	check := func(span oteltrace.Span, types ...trace.Type) []trace.Record {
		t.Helper()
		recs := bySpan[trace.SpanID(span.SpanContext().SpanID())]
		if len(recs) != len(types) {
			t.Fatalf("span %s: %d records, want %v", span.SpanContext().SpanID(), len(recs), types)
		}
		for i, ty := range types {
			if recs[i].Type != ty {
				t.Errorf("span %s record %d: %s, want %s", span.SpanContext().SpanID(), i, recs[i].Type, ty)
			}
		}
		return recs
	}
	run := check(agent, trace.TypeRunStart, trace.TypeRunEnd)
	if run[0].Name != "planner" || run[1].Status != "success" {
		t.Errorf("run: %+v", run)
	}
	mc := check(chat, trace.TypeModelCall)[0]
	if mc.Name != "gpt-4o" || mc.Usage != (trace.Usage{Provider: "openai", InputTokens: 120, OutputTokens: 30}) || mc.Status != "tool_calls" ||
		string(mc.Input) != `[{"role":"user","parts":[{"type":"text","content":"plan a trip"}]}]` {
		t.Errorf("chat: %+v", mc)
	}
	tc := check(tool, trace.TypeToolStart, trace.TypeToolEnd)
	if tc[0].Name != "search" || string(tc[0].Input) != `{"q":"Lisbon"}` || string(tc[1].Output) != `["sunny"]` {
		t.Errorf("tool: %+v", tc)
	}
	te := check(bad, trace.TypeToolStart, trace.TypeToolError)
	if te[1].Error != "no seats" {
		t.Errorf("tool error: %+v", te[1])
	}
	lc := check(llm, trace.TypeModelCall)[0]
	if lc.Name != "claude-sonnet" || lc.Usage.InputTokens != 50 || string(lc.Input) != `[{"role":"user","content":"hi"}]` {
		t.Errorf("OpenInference LLM: %+v", lc)
	}
	if got.Summary.ToolCalls != 2 || got.Summary.ModelCalls != 2 || got.Summary.InputTokens != 170 || got.Summary.Errors != 1 ||
		got.Summary.Name != "planner" || len(got.Spans) != 1 {
		t.Errorf("summary: %+v, %d root spans", got.Summary, len(got.Spans))
	}
	// 5 spans: 2+1+2+2+1 typed records, 1 event (the recorded error), 5 companions.
	if len(got.Records) != 8+1+5 {
		t.Errorf("%d records", len(got.Records))
	}
}

type errBooking struct{}

func (errBooking) Error() string { return "booking failed" }
