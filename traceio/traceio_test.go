package traceio

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/trace"
)

func encode(recs []trace.Record) []byte {
	var b bytes.Buffer
	if err := WriteJSONL(&b, slices.Values(recs)); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// byTrace groups records by trace id, in first-seen order.
func byTrace(recs []trace.Record) (ids []trace.TraceID, m map[trace.TraceID][]trace.Record) {
	m = map[trace.TraceID][]trace.Record{}
	for _, r := range recs {
		if _, ok := m[r.TraceID]; !ok {
			ids = append(ids, r.TraceID)
		}
		m[r.TraceID] = append(m[r.TraceID], r)
	}
	return ids, m
}

func types(recs []trace.Record) string {
	var s []string
	for _, r := range recs {
		s = append(s, string(r.Type))
	}
	return strings.Join(s, " ")
}

// checkWellFormed asserts what every import must give: records that
// round-trip through DecodeRecord, Seq from 1 and strictly increasing per
// trace, a run.start first and a run.end last.
func checkWellFormed(t *testing.T, recs []trace.Record) {
	t.Helper()
	_, traces := byTrace(recs)
	for id, rs := range traces {
		for i, r := range rs {
			if r.Seq != uint64(i+1) {
				t.Errorf("trace %s record %d: seq %d, want %d", id, i, r.Seq, i+1)
			}
			back, err := trace.DecodeRecord(r.AppendJSON(nil))
			if err != nil {
				t.Errorf("trace %s seq %d does not decode: %v", id, r.Seq, err)
			} else if !bytes.Equal(back.AppendJSON(nil), r.AppendJSON(nil)) {
				t.Errorf("trace %s seq %d does not round-trip", id, r.Seq)
			}
		}
		if rs[0].Type != trace.TypeRunStart || rs[len(rs)-1].Type != trace.TypeRunEnd {
			t.Errorf("trace %s: %s; want run.start first and run.end last", id, types(rs))
		}
		if rs[0].SpanID != rs[len(rs)-1].SpanID {
			t.Errorf("trace %s: run.start and run.end have different spans", id)
		}
	}
}

func TestRealFiles(t *testing.T) {
	real := testrepo.Real(t, "")
	tests := []struct {
		file    string
		format  Format
		records int
		traces  int
		check   func(t *testing.T, recs []trace.Record)
	}{
		{"agentv/static-trace.json", FormatAgentV, 10, 1, func(t *testing.T, recs []trace.Record) {
			if got, want := types(recs), "run.start"+strings.Repeat(" tool.start tool.end", 4)+" run.end"; got != want {
				t.Errorf("types = %s, want %s", got, want)
			}
			st := trace.StatsOf(recs)
			if st.ToolCalls != 4 || st.ByTool["webSearch"].Calls != 2 || st.ByTool["fetchPage"].Calls != 1 || st.ByTool["summarize"].Calls != 1 {
				t.Errorf("tool stats = %+v", st.ByTool)
			}
			for _, r := range recs {
				if r.Type == trace.TypeToolEnd && r.Duration != time.Second {
					t.Errorf("%s: duration %v, want 1s (call to result)", r.Name, r.Duration)
				}
			}
			// tool_call and tool_result pair by id: same span.
			if recs[1].SpanID != recs[2].SpanID || recs[1].SpanID == recs[3].SpanID {
				t.Errorf("tool spans do not pair by id")
			}
			end := recs[9]
			if end.Duration != 7*time.Second || !strings.HasPrefix(end.Output.Text(), "Based on my research") || end.Status != "success" {
				t.Errorf("run.end = %s", end.AppendJSON(nil))
			}
			if recs[0].Name != "static-trace" || !recs[0].Time.Equal(time.Date(2024, 1, 15, 9, 0, 0, 0, time.UTC)) {
				t.Errorf("run.start = %s", recs[0].AppendJSON(nil))
			}
		}},
		{"agentv/multi-agent.eval.results.jsonl", FormatAgentVResults, 46, 5, func(t *testing.T, recs []trace.Record) {
			ids, traces := byTrace(recs)
			first := traces[ids[0]]
			st := trace.StatsOf(first)
			if first[0].Name != "research-question" || st.ModelCalls != 4 || st.ToolCalls != 7 ||
				st.InputTokens != 2498+1357+3701+2611 || st.ByModel["gpt-4o"].Calls != 4 || st.ByTool["WebSearch"].Total != 3900*time.Millisecond {
				t.Errorf("research-question stats = %+v", st)
			}
			if !slices.Contains(first[0].Tags(), "suite:multi-agent") || !slices.Contains(first[0].Tags(), "target:gpt-4o") {
				t.Errorf("tags = %v", first[0].Tags())
			}
			last := first[len(first)-1]
			if last.Duration != 15080*time.Millisecond {
				t.Errorf("run.end duration = %v, want the summary's 15.08s", last.Duration)
			}
			// A summary-only row keeps its summary and result, and invents no calls.
			qa := traces[ids[3]]
			if got := types(qa); got != "run.start custom custom run.end" || qa[1].Name != "agentv.trace_summary" || qa[2].Name != "agentv.result" {
				t.Errorf("simple-qa = %s", got)
			}
			if !bytes.Contains(qa[1].Output, []byte(`"llm_call_count":1`)) {
				t.Errorf("summary = %s", qa[1].Output)
			}
		}},
		{"omni/session_failed_run.trace.json", FormatOmni, 12, 1, func(t *testing.T, recs []trace.Record) {
			want := "run.start tool.start memory.set tool.end node.start memory.set node.end model.call tool.start tool.error memory.set run.end"
			if got := types(recs); got != want {
				t.Errorf("types = %s\nwant    %s", got, want)
			}
			end := recs[len(recs)-1]
			if end.Status != "error" || end.Error != "evaluator timed out after 3 retries" || end.Duration != 500*time.Microsecond {
				t.Errorf("run.end = %s", end.AppendJSON(nil))
			}
			if recs[9].Error != "evaluator timed out" || recs[9].Name != "evaluator.evaluate" || recs[9].Duration != 12*time.Microsecond {
				t.Errorf("tool.error = %s", recs[9].AppendJSON(nil))
			}
			// Memory writes hang under the step that wrote them, numbered by step.
			for _, i := range []int{2, 5, 10} {
				m := recs[i]
				if m.Status != "memory" || m.ParentID != recs[i-1].SpanID && m.ParentID != recs[i-2].SpanID {
					t.Errorf("memory.set %d = %s", i, m.AppendJSON(nil))
				}
			}
			if recs[2].Iteration != 1 || recs[5].Iteration != 2 || recs[10].Iteration != 4 {
				t.Errorf("memory steps = %d %d %d, want 1 2 4", recs[2].Iteration, recs[5].Iteration, recs[10].Iteration)
			}
			if !strings.HasPrefix(recs[6].Thinking.Text(), "First, I need") {
				t.Errorf("plan thinking = %s", recs[6].Thinking)
			}
			if !slices.Contains(recs[0].Tags(), "omni.trace:session_failed_run") {
				t.Errorf("tags = %v", recs[0].Tags())
			}
		}},
		{"omni/session_rag_demo.trace.json", FormatOmni, 12, 1, func(t *testing.T, recs []trace.Record) {
			end := recs[len(recs)-1]
			if end.Status != "success" || end.Error != "" {
				t.Errorf("run.end = %s", end.AppendJSON(nil))
			}
			if st := trace.StatsOf(recs); st.Errors != 1 || st.ToolCalls != 2 || st.ModelCalls != 1 {
				t.Errorf("stats = %+v", st)
			}
		}},
		{"fragola/otel-traces.jsonl", FormatOTelJSONL, 27, 4, func(t *testing.T, recs []trace.Record) {
			ids, traces := byTrace(recs)
			wantIDs := []string{"9043174a76301549d5d6f7fd4d61013d", "4cc0e0456e21e1365f36ab37bba3f198", "2ab5072165f3d4a5257538e6e01a101a", "7b069d41e5af04d255944d0908d1ab4c"}
			for i, id := range ids {
				if id.String() != wantIDs[i] {
					t.Errorf("trace %d id = %s, want %s (kept from the file)", i, id, wantIDs[i])
				}
			}
			failed := traces[ids[0]]
			if got := types(failed); got != "run.start model.call run.end" {
				t.Errorf("failed invocation = %s", got)
			}
			mc, end := failed[1], failed[2]
			if failed[0].SpanID.String() != "2b56d8a82f33c551" || mc.ParentID != failed[0].SpanID {
				t.Errorf("span ids: run %s, model parent %s", failed[0].SpanID, mc.ParentID)
			}
			if mc.Name != "anthropic.claude-haiku-4-5" || !strings.HasPrefix(mc.Error, "401 Invalid response") || mc.Duration != 909491514*time.Nanosecond {
				t.Errorf("model.call = %s", mc.AppendJSON(nil))
			}
			if !bytes.Contains(mc.Output, []byte("exception.stacktrace")) {
				t.Errorf("model.call output lost the exception: %s", mc.Output)
			}
			if end.Status != "error" || end.Error == "" || !failed[0].Time.Equal(time.Unix(1765312067, 869000000)) {
				t.Errorf("run.end = %s", end.AppendJSON(nil))
			}
			run := traces[ids[3]]
			st := trace.StatsOf(run)
			if len(run) != 17 || run[0].Name != "assistant" || run[len(run)-1].Duration != 1395851078*time.Nanosecond || st.Errors != 0 {
				t.Errorf("agent run: %d records, %s", len(run), run[len(run)-1].AppendJSON(nil))
			}
			if n := strings.Count(types(run), "state.update"); n != 8 {
				t.Errorf("state updates = %d, want 8", n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(real, tt.file)
			recs, f, err := ReadFile(path, FormatAuto)
			if err != nil {
				t.Fatal(err)
			}
			if f != tt.format {
				t.Errorf("detected %s, want %s", f, tt.format)
			}
			ids, _ := byTrace(recs)
			if len(recs) != tt.records || len(ids) != tt.traces {
				t.Errorf("%d records in %d traces, want %d in %d", len(recs), len(ids), tt.records, tt.traces)
			}
			checkWellFormed(t, recs)
			tt.check(t, recs)

			// Idempotent: the same file, read again (explicit format, other
			// directory), gives the same records.
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			copyPath := filepath.Join(t.TempDir(), filepath.Base(tt.file))
			if err := os.WriteFile(copyPath, data, 0o644); err != nil {
				t.Fatal(err)
			}
			again, _, err := ReadFile(copyPath, tt.format)
			if err != nil {
				t.Fatal(err)
			}
			got := encode(recs)
			if !bytes.Equal(encode(again), got) {
				t.Error("re-importing the same file gave different records")
			}
			golden.Check(t, strings.ReplaceAll(tt.file, "/", "_")+".golden.jsonl", got)

			// Loupe JSONL written from the import reads back the same.
			back, f, err := ReadFile(filepath.Join("testdata", strings.ReplaceAll(tt.file, "/", "_")+".golden.jsonl"), FormatAuto)
			if err != nil || f != FormatLoupe {
				t.Fatalf("golden file: format %s, %v", f, err)
			}
			if !bytes.Equal(encode(back), got) {
				t.Error("the golden JSONL does not read back as the same records")
			}
		})
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		head string
		want Format
		err  string
	}{
		{`{"v":1,"trace_id":"x"}`, FormatLoupe, ""},
		{"\xef\xbb\xbf{\"v\":1,\"trace_id\":\"x\"}", FormatLoupe, ""},
		{`{"name":"a","traceId":"x","spanId":"y"}`, FormatOTelJSONL, ""},
		{"{\n  \"trace_id\": \"s\",\n  \"root_step_id\": \"r\",\n  \"steps\": {", FormatOmni, ""},
		{`{"timestamp":"2026-01-01T00:00:00Z","test_id":"t","trace":{}}`, FormatAgentVResults, ""},
		{"{\n \"text\": \"hi\",\n \"trace\": [", FormatAgentV, ""},
		{`{"text": "a very long value cut off here`, "", "unknown trace format"},
		{`{"foo":1,"bar":2}`, "", "top-level keys are foo, bar"},
		{`[1,2]`, "", "not a JSON trace file"},
		{``, "", "empty file"},
		{`name: yaml`, "", "not a JSON trace file"},
	}
	for _, tt := range tests {
		got, err := Detect([]byte(tt.head))
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("Detect(%q) = %q, %v; want %q, error containing %q", tt.head, got, err, tt.want, tt.err)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, s := range []string{"auto", "", "loupe", "AgentV", "agentv-results", "omni", "otel-jsonl", "fragola", "otlp"} {
		if _, err := ParseFormat(s); err != nil {
			t.Errorf("ParseFormat(%q): %v", s, err)
		}
	}
	// The former name of the OTel span JSONL format still parses, to the new one.
	if f, _ := ParseFormat("fragola"); f != FormatOTelJSONL {
		t.Errorf(`ParseFormat("fragola") = %q, want %q`, f, FormatOTelJSONL)
	}
	// Formats hands out a copy: changing it changes nothing for the package.
	fs := Formats()
	fs[0] = "nonsense"
	if _, err := ParseFormat(string(FormatLoupe)); err != nil || Formats()[0] != FormatLoupe {
		t.Errorf("changing the slice Formats returned changed the package's formats: %v", err)
	}
	if _, err := ParseFormat("jaeger"); err == nil || !strings.Contains(err.Error(), "known: auto, loupe") {
		t.Errorf("ParseFormat(jaeger) = %v", err)
	}
}

// Bad input: an error naming file, line and field; the records before it
// are delivered.
func TestErrors(t *testing.T) {
	const rec1 = `{"v":1,"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","seq":1,"time":"2026-01-01T00:00:00Z","type":"run.start","name":"a"}`
	const span1 = `{"name":"fragola.agent.run","traceId":"9043174a76301549d5d6f7fd4d61013d","spanId":"2b56d8a82f33c551","startTime":[1765312067,869000000],"endTime":[1765312068,0],"status":{"code":0}}`
	tests := []struct {
		name, format, input string
		records             int
		err                 string
	}{
		{"loupe.jsonl", "loupe", rec1 + "\n\n" + `{"v":1,"trace_id":"zz"}`, 1, "loupe.jsonl:3: field trace_id: trace id"},
		{"loupe.jsonl", "loupe", rec1 + "\n" + strings.Replace(rec1, `"run.start"`, `"run.begin"`, 1), 1, `loupe.jsonl:2: field type: unknown record type "run.begin"`},
		{"loupe.jsonl", "loupe", rec1 + "\n" + `{"v":1,`, 1, "loupe.jsonl:2: record is not a JSON object"},
		{"loupe.jsonl", "loupe", strings.Replace(rec1, `"seq":1`, `"seq":0`, 1), 0, "loupe.jsonl:1: field seq: missing or 0"},
		{"spans.jsonl", "fragola", span1 + "\n" + strings.Replace(span1, `"spanId":"2b56d8a82f33c551"`, `"spanId":"xyz"`, 1), 2, "spans.jsonl:2: field spanId"},
		{"spans.jsonl", "fragola", span1 + "\n" + strings.Replace(span1, `[1765312067,869000000]`, `"soon"`, 1), 2, `spans.jsonl:2: field startTime: want an ISO 8601 time, got "soon"`},
		{"spans.jsonl", "fragola", span1 + "\n" + strings.Replace(span1, `"code":0`, `"code":7`, 1), 2, "spans.jsonl:2: field status.code"},
		{"spans.jsonl", "fragola", strings.Replace(span1, `"traceId":"9043174a76301549d5d6f7fd4d61013d"`, `"traceId":1`, 1), 0, "spans.jsonl:1: field traceId: want string, got JSON number"},
		{"t.json", "agentv", "{\n \"text\": \"x\",\n \"trace\": [\n  {\"type\": \"tool_call\", \"id\": \"a\", \"name\": \"n\", \"startTime\": \"2024-01-15T09:00:00Z\"},\n  {\"type\": \"thinking\"}\n ]\n}", 2, `t.json:5: field trace[1].type: unknown AgentV event type "thinking"`},
		{"t.json", "agentv", "{\n \"text\": \"x\",\n \"trace\": [\n  {\"type\": \"tool_call\", \"name\": 5}\n ]\n}", 0, "t.json:4: field trace[0].name: want string, got JSON number"},
		{"t.json", "agentv", "{\n \"text\": \"x\",\n \"trace\": [\n  {\"type\": \"tool_call\", \"startTime\": \"yesterday\"}\n ]\n}", 0, `t.json:4: field trace[0].startTime: want an ISO 8601 time`},
		{"t.json", "agentv", "{\n \"text\": \"x\"\n}", 0, "t.json:1: field trace: missing"},
		{"t.json", "agentv", "{\n \"text\": \"x\",\n \"trace\": [\n", 0, "t.json:4: not valid JSON"},
		{"r.jsonl", "agentv-results", `{"test_id":"a","timestamp":"2026-02-22T10:00:01Z"}` + "\n" + `{"test_id":"b","timestamp":"2026-02-22T10:00:01Z","output":[{"role":"assistant","duration_ms":-5}]}`, 2, "r.jsonl:2: field output[0].duration_ms: duration -5 ms is out of range"},
		{"r.jsonl", "agentv-results", `{"timestamp":"2026-02-22T10:00:01Z"}`, 0, "r.jsonl:1: field test_id: missing"},
		{"r.jsonl", "agentv-results", `{"test_id":"a","timestamp":"2026-02-22T10:00:01Z","trace":{"duration_ms":"long"}}`, 0, "r.jsonl:1: field trace.duration_ms: want float64"},
		{"o.json", "omni", "{\n \"trace_id\": \"s\",\n \"steps\": {\n  \"a\": {\"step_type\": \"node_start\", \"duration_ms\": \"x\"}\n }\n}", 0, "o.json:4: field steps.a.duration_ms: want float64, got JSON string"},
		{"o.json", "omni", "{\n \"steps\": {}\n}", 0, "o.json:1: field trace_id: missing"},
		{"o.json", "omni", "{\n \"trace_id\": \"s\",\n \"memory_pool\": {\"m\": {\"var_name\": \"m\"}}\n}", 0, "o.json:3: field memory_pool.m: want an array, got an object"},
		{"o.json", "omni", "{\"trace_id\": \"s\", \"start_time\": \"noon\"}", 0, `o.json:1: field start_time: want an ISO 8601 time, got "noon"`},
		{"x.json", "auto", `{"foo": 1}`, 0, "x.json: unknown trace format: top-level keys are foo"},
		{"x.json", "csv", `{}`, 0, `x.json: unknown trace format "csv"`},
	}
	for _, tt := range tests {
		t.Run(tt.format+"/"+tt.err, func(t *testing.T) {
			f, err := ParseFormat(tt.format)
			if err != nil {
				f = Format(tt.format)
			}
			var recs []trace.Record
			var got error
			for r, err := range Read(strings.NewReader(tt.input), tt.name, f) {
				if err != nil {
					got = err
					break
				}
				recs = append(recs, r)
			}
			if got == nil || !strings.Contains(got.Error(), tt.err) {
				t.Fatalf("error = %v, want one containing %q", got, tt.err)
			}
			var e *Error
			if !errors.As(got, &e) {
				t.Errorf("error %T is not an *Error", got)
			}
			if len(recs) != tt.records {
				t.Errorf("%d records before the error, want %d", len(recs), tt.records)
			}
		})
	}
}

func TestReadStopsEarly(t *testing.T) {
	path := filepath.Join(testrepo.Real(t, ""), "fragola", "otel-traces.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for _, err := range Read(f, path, FormatAuto) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("read %d records", n)
	}
}

func TestWriteJSONLError(t *testing.T) {
	recs := make([]trace.Record, 2000) // enough to overflow the buffer
	for i := range recs {
		recs[i] = trace.Record{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Seq: uint64(i + 1), Type: trace.TypeCustom, Name: strings.Repeat("x", 100)}
	}
	if err := WriteJSONL(failWriter{}, slices.Values(recs)); err == nil {
		t.Error("WriteJSONL to a failing writer returned nil")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
