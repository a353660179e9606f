package interop_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// TestOTelGoSDKLogs sends spans and the log records written in them with
// the OpenTelemetry Go SDK (sdk/log with the otlploghttp and otlploggrpc
// exporters, beside otlptracehttp and otlptracegrpc) to Loupe's collector
// in-process, logs first and spans first, and checks that the GenAI event
// became the chat call's message and the application log a log record
// under the tool call, whatever the order.
func TestOTelGoSDKLogs(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _, err := server.CreateKey(ctx, st, server.ScopeIngest, "otel-logs", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Store: st, RequireKeys: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
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
	auth := map[string]string{"authorization": "Bearer " + key}

	var shapes []string
	for _, transport := range []string{"http", "grpc"} {
		for _, logsFirst := range []bool{true, false} {
			name := transport + "/spans-first"
			if logsFirst {
				name = transport + "/logs-first"
			}
			t.Run(name, func(t *testing.T) {
				var spanExp sdktrace.SpanExporter
				var logExp sdklog.Exporter
				if transport == "http" {
					spanExp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(ts.URL+"/v1/traces"), otlptracehttp.WithHeaders(auth))
					if err == nil {
						logExp, err = otlploghttp.New(ctx, otlploghttp.WithEndpointURL(ts.URL+"/v1/logs"), otlploghttp.WithHeaders(auth),
							otlploghttp.WithCompression(otlploghttp.GzipCompression))
					}
				} else {
					spanExp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(ln.Addr().String()), otlptracegrpc.WithInsecure(), otlptracegrpc.WithHeaders(auth))
					if err == nil {
						logExp, err = otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(ln.Addr().String()), otlploggrpc.WithInsecure(),
							otlploggrpc.WithHeaders(auth), otlploggrpc.WithCompressor("gzip"), otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}))
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				res := resource.NewSchemaless(attribute.String("service.name", "go-logs-"+transport))
				// Spans are exported as they end; log records as they are
				// emitted (logs first), or held in a batch until the spans
				// are out (spans first).
				tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(spanExp))
				var proc sdklog.Processor = sdklog.NewSimpleProcessor(logExp)
				if !logsFirst {
					proc = sdklog.NewBatchProcessor(logExp, sdklog.WithExportInterval(time.Hour))
				}
				lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(proc))
				tr := tp.Tracer("loupe-test")
				genai := lp.Logger("opentelemetry.instrumentation.genai")
				app := lp.Logger("weather.app")

				actx, agent := tr.Start(ctx, "invoke_agent weather", oteltrace.WithAttributes(
					attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "weather")))
				cctx, chat := tr.Start(actx, "chat gpt-4o", oteltrace.WithSpanKind(oteltrace.SpanKindClient), oteltrace.WithAttributes(
					attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", "gpt-4o")))
				var ev otellog.Record
				ev.SetEventName("gen_ai.user.message")
				ev.SetTimestamp(time.Now())
				ev.SetSeverity(otellog.SeverityInfo)
				ev.SetBody(attribute.MapValue(attribute.String("content", "Weather in Lisbon?")))
				genai.Emit(cctx, ev)
				chat.End()
				tctx, tool := tr.Start(actx, "execute_tool forecast", oteltrace.WithAttributes(
					attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "forecast")))
				var l otellog.Record
				l.SetTimestamp(time.Now())
				l.SetSeverity(otellog.SeverityWarn)
				l.SetSeverityText("WARN")
				l.SetBody(attribute.StringValue("slow upstream"))
				l.AddAttributes(attribute.String("city", "Lisbon"))
				app.Emit(tctx, l)
				tool.End()
				agent.End()
				if err := tp.Shutdown(ctx); err != nil {
					t.Fatalf("span export: %v", err)
				}
				if err := lp.Shutdown(ctx); err != nil {
					t.Fatalf("log export: %v", err)
				}

				id, _ := trace.ParseTraceID(agent.SpanContext().TraceID().String())
				got, err := st.Trace(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				chatID, toolID := chat.SpanContext().SpanID().String(), tool.SpanContext().SpanID().String()
				var msgs, logs int
				var types []string
				for _, r := range got.Records {
					types = append(types, string(r.Type))
					switch r.Type {
					case trace.TypeMessage:
						msgs++
						if r.ParentID.String() != chatID || r.Name != "user" || r.Output.Text() != "Weather in Lisbon?" {
							t.Errorf("message: %s", r.AppendJSON(nil))
						}
					case trace.TypeLog:
						logs++
						if e, _ := r.Entry(); r.ParentID.String() != toolID || r.Status != "WARN" || e.Body.Text() != "slow upstream" || string(e.Attributes) != `{"city":"Lisbon"}` {
							t.Errorf("log: %s", r.AppendJSON(nil))
						}
					}
				}
				if msgs != 1 || logs != 1 {
					t.Errorf("%d messages and %d logs, want 1 and 1: %v", msgs, logs, types)
				}
				if s := got.Summary; s.Name != "weather" || s.ModelCalls != 1 || s.ToolCalls != 1 || s.Records != len(got.Records) {
					t.Errorf("summary: %+v", s)
				}
				slices.Sort(types)
				shapes = append(shapes, strings.Join(types, ","))
			})
		}
	}
	for i := 1; i < len(shapes); i++ {
		if shapes[i] != shapes[0] {
			t.Errorf("the stored traces differ by transport or order:\n%s\n%s", shapes[0], shapes[i])
		}
	}
}
