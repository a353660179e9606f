package server

import (
	"context"
	"encoding/json"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// otelJS is where scripts/otel-js.sh installs the OpenTelemetry JS SDK.
const otelJS = "testdata/otel-js"

// needOTelJS skips the test when node or the SDK is missing, except under
// CI=true, where the test command is expected to have installed them.
func needOTelJS(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	_, serr := os.Stat(filepath.Join(otelJS, "node_modules", "@opentelemetry", "sdk-trace-base"))
	if err == nil && serr == nil {
		return node
	}
	msg := "the OpenTelemetry JS SDK is not installed (run scripts/otel-js.sh; scripts/test.sh does)"
	if err != nil {
		msg = "node is not installed (scripts/otel-js.sh installs it with the SDK)"
	}
	testrepo.Missing(t, msg)
	return ""
}

// TestOTelJSSDK sends GenAI and OpenInference spans with the OpenTelemetry
// JS SDK (@opentelemetry/sdk-trace-base with the OTLP protobuf exporter,
// gzip, and the OTLP/JSON exporter), through an API key, and checks what
// was stored, span by span.
func TestOTelJSSDK(t *testing.T) {
	node := needOTelJS(t)
	st := openStore(t)
	key, _, err := CreateKey(context.Background(), st, ScopeIngest, "js", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Options{Store: st, RequireKeys: true})
	for _, mode := range []string{"proto", "json"} {
		t.Run(mode, func(t *testing.T) {
			out, err := sendJS(node, e.ts.URL, mode, key)
			if err != nil {
				t.Fatalf("node send.mjs %s: %v\n%s", mode, err, stderrOf(err))
			}
			sent, got, bySpan := storedBySpan(t, st, out)
			span := func(name string, types ...trace.Type) []trace.Record {
				t.Helper()
				recs := bySpan[sent.Spans[name]]
				if len(recs) != len(types) {
					t.Fatalf("span %q: %d records, want %v", name, len(recs), types)
				}
				for i, ty := range types {
					if recs[i].Type != ty {
						t.Errorf("span %q record %d: %s, want %s", name, i, recs[i].Type, ty)
					}
				}
				return recs
			}
			run := span("invoke_agent travel", trace.TypeRunStart, trace.TypeRunEnd)
			if run[0].Name != "travel" || run[1].Status != "success" {
				t.Errorf("run: %+v", run)
			}
			mc := span("chat gpt-4o-mini", trace.TypeModelCall)[0]
			if mc.Name != "gpt-4o-mini" || mc.Usage.InputTokens != 200 || mc.Usage.OutputTokens != 20 || mc.Status != "tool_calls" ||
				string(mc.Output) != `[{"role":"assistant","parts":[{"type":"tool_call","name":"weather","arguments":{"city":"Oslo"}}]}]` {
				t.Errorf("chat: %+v", mc)
			}
			tc := span("execute_tool weather", trace.TypeToolStart, trace.TypeToolEnd)
			if tc[0].Name != "weather" || string(tc[0].Input) != `{"city":"Oslo"}` || string(tc[1].Output) != `{"temp":-3}` {
				t.Errorf("tool: %+v", tc)
			}
			if te := span("execute_tool book", trace.TypeToolStart, trace.TypeToolError); te[1].Error != "sold out" {
				t.Errorf("failed tool: %+v", te[1])
			}
			if lc := span("ChatModel", trace.TypeModelCall)[0]; lc.Name != "claude-haiku" || lc.Usage.InputTokens != 11 || string(lc.Input) != `[{"role":"user","content":"weather?"}]` {
				t.Errorf("OpenInference LLM: %+v", lc)
			}
			if oi := span("lookup", trace.TypeToolStart, trace.TypeToolEnd); oi[0].Name != "lookup" || string(oi[0].Input) != `{"id":1}` || string(oi[1].Output) != `"found"` {
				t.Errorf("OpenInference tool: %+v", oi)
			}
			if got.Summary.ToolCalls != 3 || got.Summary.ModelCalls != 2 || got.Summary.Errors != 1 || got.Summary.Name != "travel" ||
				got.Summary.Tags[len(got.Summary.Tags)-1] != "source:otlp" {
				t.Errorf("summary: %+v", got.Summary)
			}
		})
	}
}

// sendJS runs send.mjs (testdata/otel-js) in mode against url with key,
// bounded in time, and returns what it printed.
func sendJS(node, url, mode, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "send.mjs", url, mode, key)
	cmd.Dir = otelJS
	cmd.Env = append(os.Environ(), "OTEL_LOG_LEVEL=none")
	return cmd.Output()
}

// stderrOf returns what a failed command wrote to its standard error.
func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// sentSpans is what send.mjs prints: the trace it sent and its spans'
// ids by name.
type sentSpans struct {
	TraceID string            `json:"trace_id"`
	Spans   map[string]string `json:"spans"`
}

// storedBySpan reads send.mjs's output and returns it with the trace st
// holds and that trace's records by span id.
func storedBySpan(t *testing.T, st store.Store, out []byte) (sentSpans, *store.Trace, map[string][]trace.Record) {
	t.Helper()
	var sent sentSpans
	if err := json.Unmarshal(out, &sent); err != nil {
		t.Fatalf("send.mjs printed %q: %v", out, err)
	}
	id, _ := trace.ParseTraceID(sent.TraceID)
	got, err := st.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	bySpan := map[string][]trace.Record{}
	for _, r := range got.Records {
		bySpan[r.SpanID.String()] = append(bySpan[r.SpanID.String()], r)
	}
	return sent, got, bySpan
}
