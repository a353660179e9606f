package otlp

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/trace"
)

func decodeFile(t testing.TB, path string) ptrace.Traces {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	td, err := DecodeJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return td
}

// TestGolden maps each OTLP/JSON file in testdata and compares the records
// (JSON lines) and the rejected spans with testdata/NAME.golden.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			res := Map(decodeFile(t, f), nil)
			var b bytes.Buffer
			for _, e := range res.Rejected {
				fmt.Fprintf(&b, "rejected: %v\n", e)
			}
			for i := range res.Records {
				b.Write(res.Records[i].AppendJSON(nil))
				b.WriteByte('\n')
			}
			golden.Check(t, name+".golden", b.Bytes())
			checkWellFormed(t, res.Records)
		})
	}
}

// checkWellFormed checks what a store needs: every record decodes back to
// itself, and (trace id, seq) is unique.
func checkWellFormed(t *testing.T, recs []trace.Record) {
	t.Helper()
	seen := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		line := r.AppendJSON(nil)
		back, err := trace.DecodeRecord(line)
		if err != nil {
			t.Fatalf("record %d does not decode: %v\n%s", i, err, line)
		}
		if !bytes.Equal(back.AppendJSON(nil), line) {
			t.Errorf("record %d changes on a round trip:\n%s\n%s", i, line, back.AppendJSON(nil))
		}
		if r.Seq == 0 || r.Seq > 1<<63-1 || r.SpanID.IsZero() || r.TraceID.IsZero() || r.Time.IsZero() {
			t.Errorf("record %d lacks what a store needs: %s", i, line)
		}
		k := fmt.Sprint(r.TraceID, r.Seq)
		if seen[k] {
			t.Errorf("record %d: seq %d used twice in trace %s", i, r.Seq, r.TraceID)
		}
		seen[k] = true
	}
}

func TestMapping(t *testing.T) {
	res := Map(decodeFile(t, "testdata/genai.json"), nil)
	by := map[trace.Type][]trace.Record{}
	for _, r := range res.Records {
		by[r.Type] = append(by[r.Type], r)
	}
	if len(by[trace.TypeRunStart]) != 1 || by[trace.TypeRunStart][0].Name != "support" {
		t.Fatalf("run.start: %+v", by[trace.TypeRunStart])
	}
	mc := by[trace.TypeModelCall]
	if len(mc) != 2 {
		t.Fatalf("model calls: %d", len(mc))
	}
	want := trace.Usage{Provider: "openai", InputTokens: 812, OutputTokens: 40, CachedTokens: 512}
	if mc[0].Usage != want || mc[0].Name != "gpt-4o-2024-08-06" || mc[0].Status != "tool_calls" || mc[0].Duration != time.Second {
		t.Errorf("first model call: %+v", mc[0])
	}
	if mc[1].Usage.ReasoningTokens != 10 || mc[1].Name != "gpt-4o" {
		t.Errorf("second model call: %+v", mc[1])
	}
	if string(by[trace.TypeToolStart][0].Input) != `{"id":17}` || string(by[trace.TypeToolEnd][0].Output) != `{"status":"shipped"}` {
		t.Errorf("tool call: %+v %+v", by[trace.TypeToolStart][0], by[trace.TypeToolEnd][0])
	}
	if e := by[trace.TypeToolError]; len(e) != 1 || e[0].Error != "PermissionError: refunds need approval" {
		t.Errorf("tool error: %+v", e)
	}
	if e := by[trace.TypeRunEnd]; len(e) != 1 || e[0].Status != "success" || e[0].Duration != 3500*time.Millisecond {
		t.Errorf("run.end: %+v", e)
	}
	st := trace.StatsOf(res.Records)
	if st.ToolCalls != 2 || st.ModelCalls != 2 || st.InputTokens != 1712 || st.Errors != 1 {
		t.Errorf("stats: %+v", st)
	}
	// The tree: the run holds both model calls and both tool calls.
	roots := trace.Tree(res.Records)
	if len(roots) != 1 {
		t.Fatalf("%d roots", len(roots))
	}
	kinds := map[trace.Type]int{}
	for _, c := range roots[0].Children {
		kinds[c.Start.Type]++
	}
	if kinds[trace.TypeModelCall] != 2 || kinds[trace.TypeToolStart] != 2 {
		t.Errorf("children of the run: %v", kinds)
	}
}

func TestOlderAndOpenInference(t *testing.T) {
	res := Map(decodeFile(t, "testdata/genai_old.json"), nil)
	var calls []trace.Record
	for _, r := range res.Records {
		if r.Type == trace.TypeModelCall {
			calls = append(calls, r)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("model calls: %d", len(calls))
	}
	if got := string(calls[0].Input); got != `[{"role":"system","content":"You are terse."},{"role":"user","content":"2+2?"}]` {
		t.Errorf("prompt: %s", got)
	}
	if got := string(calls[0].Output); got != `[{"role":"assistant","content":"4","finish_reason":"stop"}]` {
		t.Errorf("completion: %s", got)
	}
	if calls[0].Usage.InputTokens != 21 || calls[0].Usage.OutputTokens != 1 || calls[0].Status != "stop" {
		t.Errorf("usage: %+v", calls[0])
	}
	if string(calls[1].Input) != `[{"role":"user","content":"2+2?"}]` || calls[1].Error != "rate limited" {
		t.Errorf("content events: %+v", calls[1])
	}

	res = Map(decodeFile(t, "testdata/openinference.json"), nil)
	var llm, tool, tend, chain, runEnd trace.Record
	for _, r := range res.Records {
		switch {
		case r.Type == trace.TypeModelCall:
			llm = r
		case r.Type == trace.TypeToolStart && r.Name == "search":
			tool = r
		case r.Type == trace.TypeToolEnd && r.Name == "search":
			tend = r
		case r.Type == trace.TypeNodeEnd:
			chain = r
		case r.Type == trace.TypeRunEnd:
			runEnd = r
		}
	}
	if llm.Name != "gpt-4o-mini" || llm.Usage != (trace.Usage{Provider: "openai", InputTokens: 30, OutputTokens: 12, CachedTokens: 8, CostUSD: 0.00021}) {
		t.Errorf("LLM span: %+v", llm)
	}
	// The output messages as Loupe's recorder writes a model's answer.
	if got := string(llm.Output); got != `{"tool_calls":[{"id":"","name":"search","input":{"q":"capital of France"}}]}` {
		t.Errorf("output messages: %s", got)
	}
	if string(tool.Input) != `{"q":"capital of France"}` || string(tend.Output) != `"Paris is the capital of France."` {
		t.Errorf("tool: %+v %+v", tool, tend)
	}
	if string(chain.Output) != `"Paris"` || string(runEnd.Output) != `"Paris"` {
		t.Errorf("chain %s, run %s", chain.Output, runEnd.Output)
	}
}

// TestRoundTrip: OTLP → records → OTLP gives back the same spans.
func TestRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	var m ptrace.JSONMarshaler
	for _, f := range files {
		td := decodeFile(t, f)
		res := Map(td, nil)
		// The rejected spans are not expected back.
		want := decodeFile(t, f)
		rejected := map[string]bool{}
		for _, e := range res.Rejected {
			rejected[e.Name] = true
		}
		want.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(s ptrace.Span) bool { return rejected[s.Name()] })
		got, err := Traces(res.Records)
		if err != nil {
			t.Fatal(err)
		}
		wb, _ := m.MarshalTraces(want)
		gb, _ := m.MarshalTraces(got)
		if !bytes.Equal(wb, gb) {
			t.Errorf("%s: round trip differs:\nwant %s\ngot  %s", f, wb, gb)
		}
	}
}

// TestProtoEqualsJSON: the protobuf encoding maps to the same records.
func TestProtoEqualsJSON(t *testing.T) {
	td := decodeFile(t, "testdata/openinference.json")
	var pm ptrace.ProtoMarshaler
	pb, err := pm.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	fromProto, err := DecodeProto(pb)
	if err != nil {
		t.Fatal(err)
	}
	a, b := Map(td, nil), Map(fromProto, nil)
	if fmt.Sprint(a.Records) != fmt.Sprint(b.Records) {
		t.Error("protobuf and JSON map to different records")
	}
}

// TestIdempotent: the same span gives the same records, whatever else is
// in the batch, so resends deduplicate in the store.
func TestIdempotent(t *testing.T) {
	all := Map(decodeFile(t, "testdata/genai.json"), nil).Records
	one := decodeFile(t, "testdata/genai.json")
	spans := one.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	spans.RemoveIf(func(s ptrace.Span) bool { return s.Name() != "execute_tool lookup_order" })
	part := Map(one, nil).Records
	if len(part) == 0 {
		t.Fatal("nothing mapped")
	}
	for _, p := range part {
		found := false
		for _, a := range all {
			if a.Seq == p.Seq {
				found = string(a.AppendJSON(nil)) == string(p.AppendJSON(nil))
			}
		}
		if !found {
			t.Errorf("record seq %d differs when mapped alone", p.Seq)
		}
	}
}

func TestLimits(t *testing.T) {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1})
	sp.SetSpanID(pcommon.SpanID{2})
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	sp.Attributes().PutStr("openinference.span.kind", "TOOL")
	sp.Attributes().PutStr("input.value", strings.Repeat("x", 5000))
	v := sp.Attributes().PutEmptyMap("deep")
	for range 40 {
		v = v.PutEmptyMap("d")
	}
	res := Map(td, &Options{MaxValueBytes: 100, MaxDepth: 4})
	checkWellFormed(t, res.Records)
	var in trace.Value
	for _, r := range res.Records {
		if r.Type == trace.TypeToolStart {
			in = r.Input
		}
	}
	if ok, n := in.Truncated(); !ok || n != 5000 {
		t.Errorf("input not truncated with the marker: %.80s (%v %d)", in, ok, n)
	}
	span := res.Records[len(res.Records)-1]
	if !bytes.Contains(span.Output, []byte("nested deeper than 4")) || bytes.Count(span.Output, []byte(`"d"`)) > 6 {
		t.Errorf("deep value not cut: %s", span.Output)
	}
}

func TestSeq(t *testing.T) {
	sid := trace.SpanID{1}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := Seq(t0, sid, "start", 0), Seq(t0.Add(16*time.Microsecond), sid, "start", 0)
	if b <= a {
		t.Errorf("later step sorts first: %d %d", a, b)
	}
	if s := Seq(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), sid, "end", 0); s > 1<<63-1 {
		t.Errorf("seq %d too large", s)
	}
	if s := Seq(time.Unix(0, 0), sid, "x", 0); s == 0 {
		t.Error("zero seq")
	}
	if a < 1<<49 {
		t.Errorf("seq %d is in the recorder's range", a)
	}
}

// TestDeepKey: a flattened key with a million dots neither crashes nor
// nests a million levels.
func TestDeepKey(t *testing.T) {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1})
	sp.SetSpanID(pcommon.SpanID{2})
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	sp.Attributes().PutStr("gen_ai.request.model", "m")
	sp.Attributes().PutStr("gen_ai.prompt.0."+strings.Repeat("a.", 1_000_000)+"b", "deep")
	sp.Attributes().PutStr("gen_ai.prompt.0.role", "user")
	res := Map(td, nil)
	checkWellFormed(t, res.Records)
	for _, r := range res.Records {
		if r.Type == trace.TypeModelCall && string(r.Input) != `[{"role":"user"}]` {
			t.Errorf("input: %.100s", r.Input)
		}
	}
}
