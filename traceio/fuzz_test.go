package traceio

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/trace"
)

// fuzzRead reads data in format f and checks what any input must give:
// no panic, records that encode and decode, and errors that are *Errors
// naming the file.
func fuzzRead(t *testing.T, f Format, data []byte) {
	for r, err := range Read(strings.NewReader(string(data)), "fuzz.in", f) {
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != "fuzz.in" {
				t.Fatalf("error %T %v does not name the file", err, err)
			}
			return
		}
		if r.Seq == 0 || r.TraceID.IsZero() || r.SpanID.IsZero() || !r.Type.Valid() {
			t.Fatalf("invalid record %s", r.AppendJSON(nil))
		}
		if _, err := trace.DecodeRecord(r.AppendJSON(nil)); err != nil {
			t.Fatalf("record %s does not decode: %v", r.AppendJSON(nil), err)
		}
	}
}

// seed adds the real files and the golden files to the corpus, cut to
// their first 4 KiB (at a line end where there is one): the fuzzer's
// mutations of long inputs are slow, and the start holds the structure.
func seed(f *testing.F, files ...string) {
	real := testrepo.Real(f, "")
	for _, name := range files {
		for _, dir := range []string{real, "testdata"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				continue
			}
			if len(b) > 4096 {
				b = b[:4096]
				if i := bytes.LastIndexByte(b, '\n'); i > 0 {
					b = b[:i+1]
				}
			}
			f.Add(b)
		}
	}
}

func FuzzLoupe(f *testing.F) {
	seed(f, "omni_session_failed_run.trace.json.golden.jsonl")
	f.Add([]byte(`{"v":1,"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","seq":1,"time":"2026-01-01T00:00:00Z","type":"run.start"}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, FormatLoupe, data) })
}

func FuzzAgentV(f *testing.F) {
	seed(f, "agentv/static-trace.json", "omni/session_rag_demo.trace.json", "agentv/multi-agent.eval.results.jsonl")
	f.Add([]byte(`{"text":"x","trace":[{"type":"model_step","timestamp":"2024-01-01T00:00:00Z","durationMs":5,"metadata":{"model":"m","tokenUsage":{"input":1}}},{"type":"tool_result","id":"z"},{"type":"message","text":"hi"},{"type":"error","error":"bad"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, FormatAgentV, data) })
}

func FuzzAgentVResults(f *testing.F) {
	seed(f, "agentv/static-trace.json", "omni/session_rag_demo.trace.json", "agentv/multi-agent.eval.results.jsonl")
	f.Add([]byte(`{"test_id":"a","timestamp":"2026-02-22T10:00:01Z","trace":[{"type":"tool_call","id":"1","name":"t"}],"output":[{"role":"user","content":"q"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, FormatAgentVResults, data) })
}

func FuzzOmni(f *testing.F) {
	seed(f, "omni/session_failed_run.trace.json", "omni/session_rag_demo.trace.json")
	f.Add([]byte(`{"trace_id":"s","params":{"$q":1},"global_vars":{"g":2},"steps":{"a":{"step_type":"error","timestamp":1700000000},"b":{"step_type":"llm_end","parent_id":"a","status":"failed"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, FormatOmni, data) })
}

func FuzzFragola(f *testing.F) {
	seed(f, "fragola/otel-traces.jsonl")
	f.Add([]byte(`{"name":"tool.call","traceId":"9043174a76301549d5d6f7fd4d61013d","spanId":"2b56d8a82f33c551","parentSpanId":"0102030405060708","startTimeUnixNano":"1765312067869000000","attributes":[{"key":"gen_ai.tool.name","value":{"stringValue":"t"}},{"key":"n","value":{"intValue":"3"}}],"status":{"code":"STATUS_CODE_ERROR"},"events":[{"name":"exception","timeUnixNano":"1765312067869000001","attributes":{"exception.message":"x"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, FormatOTelJSONL, data) })
}

func FuzzDetect(f *testing.F) {
	seed(f, "agentv/static-trace.json", "omni/session_rag_demo.trace.json", "agentv/multi-agent.eval.results.jsonl")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, FormatAuto, data) })
}
