package server

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// sendLogsJS runs send-logs.mjs (testdata/otel-js) against url in mode
// (proto, json, grpc) and order (logs-first, spans-first) with key.
func sendLogsJS(node, url, mode, order, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "send-logs.mjs", url, mode, order, key)
	cmd.Dir = otelJS
	cmd.Env = append(os.Environ(), "OTEL_LOG_LEVEL=none")
	return cmd.Output()
}

// TestOTelJSSDKLogs sends spans and the log records written in them with
// the OpenTelemetry JS SDK (sdk-logs with the OTLP/HTTP protobuf and JSON
// and the OTLP/gRPC log exporters), logs first and spans first, through
// an API key, and checks that the GenAI events became the chat call's
// messages, the other logs log records under their spans, the log outside
// any trace was refused, and the trace was counted once whatever the
// order.
func TestOTelJSSDKLogs(t *testing.T) {
	node := needOTelJS(t)
	if _, err := os.Stat(filepath.Join(otelJS, "node_modules", "@opentelemetry", "sdk-logs")); err != nil {
		testrepo.Missing(t, "the OpenTelemetry JS logs SDK is not installed (run scripts/otel-js.sh; scripts/test.sh does)")
	}
	st := openStore(t)
	key, _, err := CreateKey(context.Background(), st, ScopeIngest, "js-logs", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g := newGRPCEnv(t, Options{Store: st, RequireKeys: true})
	var shapes []string
	for _, mode := range []string{"proto", "json", "grpc"} {
		for _, order := range []string{"logs-first", "spans-first"} {
			t.Run(mode+"/"+order, func(t *testing.T) {
				url := g.ts.URL
				if mode == "grpc" {
					url = "http://" + g.addr
				}
				out, err := sendLogsJS(node, url, mode, order, key)
				if err != nil {
					t.Fatalf("node send-logs.mjs: %v\n%s", err, stderrOf(err))
				}
				sent, got, bySpan := storedBySpan(t, st, out)
				under := map[string][]string{} // parent span name → "type name: text"
				names := map[string]string{}
				for n, id := range sent.Spans {
					names[id] = n
				}
				for _, r := range got.Records {
					if r.Type != trace.TypeMessage && r.Type != trace.TypeLog {
						continue
					}
					text := r.Output.Text()
					if e, ok := r.Entry(); ok {
						text = r.Status + " " + e.Body.Text() + " " + string(e.Attributes)
					}
					p := names[r.ParentID.String()]
					if r.ParentID.IsZero() {
						p = "(top)"
					}
					under[p] = append(under[p], string(r.Type)+" "+r.Name+": "+strings.TrimSpace(text))
				}
				// Sorted: records of logs written within the same 16 µs
				// sort by a hash, not by the order they were written in.
				for _, l := range under {
					slices.Sort(l)
				}
				want := map[string][]string{
					"chat gpt-4o-mini": {
						"message assistant: Cold: -3C.", "message assistant: Cold: -3C.",
						"message system: Be brief.", "message user: Weather in Oslo?", "message user: Weather in Oslo?",
					},
					"execute_tool forecast": {`log weather.app: INFO fetching forecast {"city":"Oslo","attempt":1}`},
					"invoke_agent weather":  {"log weather.app: ERROR cache unavailable"},
				}
				for p, w := range want {
					if strings.Join(under[p], "\n") != strings.Join(w, "\n") {
						t.Errorf("under %s:\n%s\nwant:\n%s", p, strings.Join(under[p], "\n"), strings.Join(w, "\n"))
					}
				}
				if len(under) != len(want) {
					t.Errorf("logs under %d spans, want %d: %v", len(under), len(want), under)
				}
				if mc := bySpan[sent.Spans["chat gpt-4o-mini"]]; len(mc) != 1 || mc[0].Type != trace.TypeModelCall {
					t.Errorf("chat span: %+v", mc)
				}
				s := got.Summary
				if s.Name != "weather" || s.ModelCalls != 1 || s.ToolCalls != 1 || s.Errors != 0 || s.Records != len(got.Records) || s.Status != "success" {
					t.Errorf("summary: %+v (%d records)", s, len(got.Records))
				}
				ts := types(got.Records)
				slices.Sort(ts)
				shapes = append(shapes, strings.Join(ts, ","))
			})
		}
	}
	for i := 1; i < len(shapes); i++ {
		if shapes[i] != shapes[0] {
			t.Errorf("the stored traces differ by transport or order:\n%s\n%s", shapes[0], shapes[i])
		}
	}
	// Six traces, each counted once.
	page, err := st.List(context.Background(), store.ListQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != 6 {
		t.Errorf("%d traces stored, want 6", len(page.Traces))
	}
}

func types(recs []trace.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Type))
	}
	return out
}

// testLogs returns one GenAI event and one application log in a span of
// trace tid, and one log record without a trace.
func testLogs(tid [16]byte) plog.Logs {
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	sl.Scope().SetName("app")
	ev := sl.LogRecords().AppendEmpty()
	ev.SetTraceID(tid)
	ev.SetSpanID([8]byte{2})
	ev.SetTimestamp(1_700_000_000_000_000_000)
	ev.SetEventName("gen_ai.user.message")
	ev.Body().SetEmptyMap().PutStr("content", "hello")
	l := sl.LogRecords().AppendEmpty()
	l.SetTraceID(tid)
	l.SetSpanID([8]byte{2})
	l.SetTimestamp(1_700_000_000_100_000_000)
	l.SetSeverityNumber(plog.SeverityNumberWarn)
	l.Body().SetStr("slow")
	orphan := sl.LogRecords().AppendEmpty()
	orphan.SetTimestamp(1_700_000_000_200_000_000)
	orphan.Body().SetStr("no trace")
	return ld
}

// TestOTLPLogsHTTP: POST /v1/logs in protobuf and JSON, the partial
// success for the log record without a trace, a retry that adds nothing,
// keys without the ingest scope refused, and hostile bodies refused with
// 400 before they are decoded.
func TestOTLPLogsHTTP(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	ingest, _, _ := CreateKey(ctx, st, ScopeIngest, "ingest", time.Now())
	read, _, _ := CreateKey(ctx, st, ScopeRead, "read", time.Now())
	e := newEnv(t, Options{Store: st, RequireKeys: true})
	tid := [16]byte{0xab, 1}
	req := plogotlp.NewExportRequestFromLogs(testLogs(tid))
	pb, _ := req.MarshalProto()
	js, _ := req.MarshalJSON()

	e.key = ingest
	for i, c := range []struct {
		ctype string
		body  []byte
	}{{"application/x-protobuf", pb}, {"application/json", js}, {"application/x-protobuf", pb}} {
		code, body, _ := e.do("POST", "/v1/logs", c.ctype, c.body)
		if code != http.StatusOK {
			t.Fatalf("%d: %s: %d %s", i, c.ctype, code, body)
		}
		resp := plogotlp.NewExportResponse()
		if c.ctype == "application/json" {
			err := resp.UnmarshalJSON(body)
			if err != nil || !bytes.Contains(body, []byte(`"rejectedLogRecords":"1"`)) {
				t.Errorf("JSON answer %s: %v", body, err)
			}
		} else if err := resp.UnmarshalProto(body); err != nil {
			t.Errorf("protobuf answer: %v", err)
		}
		if ps := resp.PartialSuccess(); ps.RejectedLogRecords() != 1 || !strings.Contains(ps.ErrorMessage(), "traceId is missing") {
			t.Errorf("%d: partial success %d %q, want 1 log record rejected for its missing trace id", i, ps.RejectedLogRecords(), ps.ErrorMessage())
		}
	}
	got, err := st.Trace(ctx, tid)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 2 || got.Summary.Records != 2 || got.Records[0].Type != trace.TypeMessage || got.Records[1].Type != trace.TypeLog {
		t.Errorf("stored %d records (summary %d), want the message and the log once: %v", len(got.Records), got.Summary.Records, types(got.Records))
	}

	// A read key may not ingest; no key is unauthorized.
	e.key = read
	if code, body, _ := e.do("POST", "/v1/logs", "application/x-protobuf", pb); code != http.StatusForbidden {
		t.Errorf("a read key: %d %s, want 403", code, body)
	}
	e.key = ""
	if code, _, _ := e.do("POST", "/v1/logs", "application/x-protobuf", pb); code != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", code)
	}

	// Hostile bodies: deep nesting, garbage, the wrong content type.
	e.key = ingest
	deep := plog.NewLogs()
	lr := deep.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTraceID(tid)
	v := lr.Body()
	for range 200 {
		v = v.SetEmptySlice().AppendEmpty()
	}
	dreq := plogotlp.NewExportRequestFromLogs(deep)
	dpb, _ := dreq.MarshalProto()
	djs, _ := dreq.MarshalJSON()
	for _, c := range []struct {
		ctype string
		body  []byte
		code  int
		msg   string
	}{
		{"application/x-protobuf", dpb, 400, "nested deeper"},
		{"application/json", djs, 400, "nested deeper"},
		{"application/x-protobuf", []byte{0x0a, 0xff}, 400, "malformed"},
		{"application/json", []byte(`{"resourceLogs":`), 400, ""},
		{"text/plain", []byte("hi"), 415, "not OTLP"},
	} {
		code, body, _ := e.do("POST", "/v1/logs", c.ctype, c.body)
		if code != c.code || !strings.Contains(string(body), c.msg) {
			t.Errorf("%s %.20q: %d %s, want %d with %q", c.ctype, c.body, code, body, c.code, c.msg)
		}
	}
}

// TestOTLPLogsGRPC: LogsService/Export on the gRPC port, with pdata's
// own client: partial success, keys, and a deep message refused with
// InvalidArgument.
func TestOTLPLogsGRPC(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	ingest, _, _ := CreateKey(ctx, st, ScopeIngest, "ingest", time.Now())
	read, _, _ := CreateKey(ctx, st, ScopeRead, "read", time.Now())
	g := newGRPCEnv(t, Options{Store: st, RequireKeys: true})
	client := plogotlp.NewGRPCClient(g.conn)
	with := func(key string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	}
	tid := [16]byte{0xcd, 2}
	resp, err := client.Export(with(ingest), plogotlp.NewExportRequestFromLogs(testLogs(tid)))
	if err != nil {
		t.Fatal(err)
	}
	if ps := resp.PartialSuccess(); ps.RejectedLogRecords() != 1 {
		t.Errorf("partial success %d %q, want 1", ps.RejectedLogRecords(), ps.ErrorMessage())
	}
	if got, err := st.Trace(ctx, tid); err != nil || len(got.Records) != 2 {
		t.Errorf("stored: %v, %v", got, err)
	}
	_, err = client.Export(with(read), plogotlp.NewExportRequestFromLogs(testLogs(tid)))
	wantCode(t, "a read key", err, codes.PermissionDenied, "does not allow OTLP export")
	_, err = client.Export(ctx, plogotlp.NewExportRequestFromLogs(testLogs(tid)))
	wantCode(t, "no key", err, codes.Unauthenticated, "requires an API key")
	// A deep message goes through the raw codec to the guard, never to
	// pdata's decoder: InvalidArgument. It is sent as raw bytes, which
	// pdata's client would not build; nestedRequest's bytes are a logs
	// request too, whose resource's attribute is 200 levels deep.
	in, out := rawMessage(nestedRequest(200)), rawMessage(nil)
	err = g.conn.Invoke(with(ingest), grpcLogsMethod, &in, &out, grpc.ForceCodecV2(rawCodec{}))
	wantCode(t, "a deep message", err, codes.InvalidArgument, "nested deeper")
}
