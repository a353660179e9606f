package trace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/internal/tracefix"
	"github.com/loupe-dev/loupe/schema"
	"github.com/loupe-dev/loupe/trace"
)

func fixture(t *testing.T, o trace.Options) (*trace.ExecutionContext, []trace.Record) {
	t.Helper()
	o.Now = tracefix.Clock(time.Millisecond)
	tr := trace.New(o)
	ec := tracefix.Record(tr)
	return ec, ec.Records()
}

func TestEveryTypeRecorded(t *testing.T) {
	_, recs := fixture(t, trace.Options{})
	seen := map[trace.Type]bool{}
	for i, r := range recs {
		seen[r.Type] = true
		if r.Seq != uint64(i+1) {
			t.Errorf("record %d has seq %d, want %d", i, r.Seq, i+1)
		}
		if r.V != trace.Version || r.TraceID != recs[0].TraceID || r.SpanID.IsZero() {
			t.Errorf("record %d: bad header %+v", i, r)
		}
	}
	for _, typ := range trace.Types() {
		if !seen[typ] && typ != trace.TypeDropped { // made by the dispatcher, not a run: see dispatch_test.go
			t.Errorf("fixture records no %s record", typ)
		}
	}
}

func TestRecordsValidateAgainstSchema(t *testing.T) {
	var doc jsonschema.Schema
	if err := json.Unmarshal(schema.RecordV1, &doc); err != nil {
		t.Fatal(err)
	}
	sch, err := doc.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	// instance decodes a line as the validator expects: generic JSON values.
	instance := func(line []byte) any {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return v
	}
	_, recs := fixture(t, trace.Options{})
	for _, r := range recs {
		line := r.AppendJSON(nil)
		if err := sch.Validate(instance(line)); err != nil {
			t.Errorf("%s record does not match the schema: %v\n%s", r.Type, err, line)
		}
	}
	// And the schema rejects what DecodeRecord rejects.
	for _, bad := range []string{
		`{"v":1,"trace_id":"00000000000000000000000000000000","span_id":"0102030405060708","seq":1,"time":"2026-01-01T00:00:00Z","type":"custom","name":"x"}`,
		`{"v":1,"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","seq":1,"time":"2026-01-01T00:00:00Z","type":"nope"}`,
		`{"v":1,"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","seq":1,"time":"2026-01-01T00:00:00Z","type":"tool.error","name":"x"}`,
	} {
		if sch.Validate(instance([]byte(bad))) == nil {
			t.Errorf("schema accepts %s", bad)
		}
		if _, err := trace.DecodeRecord([]byte(bad)); err == nil && !strings.Contains(bad, "tool.error") {
			t.Errorf("DecodeRecord accepts %s", bad)
		}
	}
}

func TestEncodingRoundTrip(t *testing.T) {
	_, recs := fixture(t, trace.Options{})
	for _, r := range recs {
		line := r.AppendJSON(nil)
		std, err := json.Marshal(r)
		if err != nil || !bytes.Equal(std, line) {
			t.Errorf("json.Marshal differs from AppendJSON:\n%s\n%s", std, line)
		}
		got, err := trace.DecodeRecord(line)
		if err != nil {
			t.Fatalf("decode %s: %v", line, err)
		}
		if again := got.AppendJSON(nil); !bytes.Equal(again, line) {
			t.Errorf("round trip changed the record:\n%s\n%s", line, again)
		}
		var viaStd trace.Record
		if err := json.Unmarshal(line, &viaStd); err != nil || viaStd.Seq != r.Seq {
			t.Errorf("json.Unmarshal: %v", err)
		}
	}
}

func TestDecodeRecordErrorsNameTheField(t *testing.T) {
	good := `{"v":1,"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","seq":1,"time":"2026-01-01T00:00:00Z","type":"custom","name":"x"}`
	if _, err := trace.DecodeRecord([]byte(good)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, in, field string
	}{
		{"no version", strings.Replace(good, `"v":1,`, ``, 1), "v"},
		{"future version", strings.Replace(good, `"v":1`, `"v":7`, 1), "v"},
		{"short trace id", strings.Replace(good, `0102030405060708090a0b0c0d0e0f10`, `0102`, 1), "trace_id"},
		{"zero trace id", strings.Replace(good, `0102030405060708090a0b0c0d0e0f10`, strings.Repeat("0", 32), 1), "trace_id"},
		{"bad span id", strings.Replace(good, `"span_id":"0102030405060708"`, `"span_id":"zz02030405060708"`, 1), "span_id"},
		{"bad parent", strings.Replace(good, `"seq"`, `"parent_id":"12","seq"`, 1), "parent_id"},
		{"seq is text", strings.Replace(good, `"seq":1`, `"seq":"1"`, 1), "seq"},
		{"bad time", strings.Replace(good, `2026-01-01T00:00:00Z`, `yesterday`, 1), "time"},
		{"unknown type", strings.Replace(good, `"custom"`, `"tool.finish"`, 1), "type"},
		{"negative duration", strings.Replace(good, `"seq":1`, `"seq":1,"duration_ns":-5`, 1), "duration_ns"},
		{"tokens as text", strings.Replace(good, `"seq":1`, `"seq":1,"usage":{"input_tokens":"many"}`, 1), "usage.input_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := trace.DecodeRecord([]byte(tt.in))
			var fe *trace.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FieldError", err)
			}
			if fe.Field != tt.field {
				t.Errorf("error names field %q, want %q (%v)", fe.Field, tt.field, err)
			}
		})
	}
	for _, in := range []string{``, `[]`, `{`, `null`, `"x"`} {
		if _, err := trace.DecodeRecord([]byte(in)); err == nil {
			t.Errorf("DecodeRecord(%q) succeeded", in)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	tr := trace.New(trace.Options{Now: tracefix.Clock(time.Millisecond)})
	for _, r := range tracefix.Record(tr).Records() {
		f.Add(r.AppendJSON(nil))
	}
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := trace.DecodeRecord(b)
		if err != nil {
			return
		}
		// Whatever decodes must encode and decode to the same record.
		again, err := trace.DecodeRecord(r.AppendJSON(nil))
		if err != nil {
			t.Fatalf("re-decoding %s: %v", r.AppendJSON(nil), err)
		}
		if !bytes.Equal(again.AppendJSON(nil), r.AppendJSON(nil)) {
			t.Fatalf("unstable encoding:\n%s\n%s", r.AppendJSON(nil), again.AppendJSON(nil))
		}
	})
}

func TestStats(t *testing.T) {
	ec, recs := fixture(t, trace.Options{})
	st := ec.Stats()
	want := trace.Stats{
		Records: len(recs), Iterations: 3, ModelCalls: 2,
		InputTokens: 170, OutputTokens: 40, CachedTokens: 20, ReasoningTokens: 10, CostUSD: 0.0016,
		ToolCalls: 2, Errors: 3, Children: 1, Guardrails: 1,
	}
	got := st
	got.ByModel, got.ByTool = nil, nil
	got.CostUSD = float64(int(got.CostUSD*1e6+0.5)) / 1e6
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stats\n got %+v\nwant %+v", got, want)
	}
	if m := st.ByModel["gpt-mini"]; m.Calls != 1 || m.InputTokens != 50 {
		t.Errorf("child model not rolled up: %+v", st.ByModel)
	}
	if c := st.ByTool["clock"]; c.Calls != 1 || c.Errors != 1 || c.Total != 2*time.Millisecond {
		t.Errorf("clock stats %+v", c)
	}
	if !reflectEqualStats(st, trace.StatsOf(recs)) {
		t.Errorf("live stats differ from stats rebuilt from records:\n%+v\n%+v", st, trace.StatsOf(recs))
	}
	// The copy is the caller's.
	st.ByTool["clock"] = trace.ToolStats{}
	if ec.Stats().ByTool["clock"].Calls != 1 {
		t.Error("Stats returned a map shared with the context")
	}
}

func reflectEqualStats(a, b trace.Stats) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func TestTermination(t *testing.T) {
	tests := []struct {
		err  error
		want trace.TerminationReason
	}{
		{nil, trace.TerminationSuccess},
		{errors.New("x"), trace.TerminationError},
		{context.Canceled, trace.TerminationContextCanceled},
		{context.DeadlineExceeded, trace.TerminationTimeout},
	}
	for _, tt := range tests {
		if got := trace.ReasonFor(tt.err); got != tt.want {
			t.Errorf("ReasonFor(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
	tr := trace.New(trace.Options{})
	_, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
	ec.SetTermination(trace.TerminationMaxIterations, errors.New("10 iterations"))
	ec.SetTermination(trace.TerminationError, errors.New("later"))
	if reason, _ := ec.Termination(); reason != "" {
		t.Errorf("Termination before End = %q, want empty", reason)
	}
	ec.End(nil, nil)
	ec.End(nil, nil)
	recs := ec.Records()
	last := recs[len(recs)-1]
	if len(recs) != 2 || last.Type != trace.TypeRunEnd || last.Status != "max_iterations" || last.Error != "10 iterations" {
		t.Errorf("run.end = %+v (of %d records)", last, len(recs))
	}
}

func TestConcurrentRecording(t *testing.T) {
	var mu sync.Mutex
	var sunk []trace.Record
	tr := trace.New(trace.Options{Sinks: []trace.Sink{trace.SinkFunc(func(_ context.Context, rs []trace.Record) error {
		mu.Lock()
		sunk = append(sunk, rs...)
		mu.Unlock()
		return nil
	})}, Dispatch: trace.DispatchOptions{OnFull: trace.Block, QueueSize: 64}})
	ctx, ec := tr.Start(context.Background(), "parallel", trace.RunOptions{})
	ec.StartIteration()
	const workers, each = 100, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if w%10 == 0 {
					_, child := trace.SpawnChild(ctx, "sub", nil)
					child.ModelCall(trace.ModelCall{Model: "m", Usage: trace.Usage{InputTokens: 1, OutputTokens: 1}})
					child.End(nil, nil)
					continue
				}
				_, _ = trace.Tool(ctx, "t", i, func(context.Context) (int, error) { return i, nil })
				_ = ec.Stats()
				if i == each/2 {
					_ = ec.Records() // readers run alongside writers
				}
			}
		})
	}
	wg.Wait()
	ec.EndIteration("terminate")
	ec.End(nil, nil)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := ec.Records()
	st := ec.Stats()
	if st.ToolCalls != 90*each || st.ModelCalls != 10*each || st.Children != 10*each {
		t.Errorf("stats after concurrent recording: %d tool calls, %d model calls, %d children", st.ToolCalls, st.ModelCalls, st.Children)
	}
	if len(sunk) != len(recs) || st.Records != len(recs) {
		t.Errorf("sink got %d records, context has %d, stats count %d", len(sunk), len(recs), st.Records)
	}
	for i := range recs {
		if recs[i].Seq != uint64(i+1) {
			t.Fatalf("seq %d at index %d: gaps or duplicates", recs[i].Seq, i)
		}
	}
}

func TestCapturePolicy(t *testing.T) {
	big := strings.Repeat("é", 100) // 200 bytes
	tests := []struct {
		name string
		o    trace.Options
		want string
	}{
		{"full", trace.Options{}, `"` + big + `"`},
		{"metadata", trace.Options{Capture: trace.CaptureMetadata}, `{"$loupe":"omitted","bytes":202}`},
		{"none", trace.Options{Capture: trace.CaptureNone}, ``},
		{"truncated", trace.Options{MaxValueBytes: 10}, `{"$loupe":"truncated","bytes":202,"head":"\"éééé"}`},
		{"unlimited", trace.Options{MaxValueBytes: -1}, `"` + big + `"`},
		{"redacted", trace.Options{Redact: func(r *trace.Record, f trace.Field, v trace.Value) trace.Value {
			if r.Name == "login" && f == trace.FieldInput {
				return trace.Text("[redacted]")
			}
			return v
		}}, `"[redacted]"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := trace.New(tt.o)
			_, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
			in := trace.Text(big)
			ec.ToolCall("login", in, trace.Text("ok"), time.Millisecond, nil)
			got := ec.Records()[1]
			if string(got.Input) != tt.want {
				t.Errorf("input recorded as %s, want %s", got.Input, tt.want)
			}
			if tt.name == "truncated" {
				if ok, n := got.Input.Truncated(); !ok || n != 202 {
					t.Errorf("Truncated() = %v, %d", ok, n)
				}
				if !json.Valid(got.Input) {
					t.Error("truncation marker is not JSON")
				}
			}
			// Mutating the caller's buffer afterwards changes nothing recorded.
			before := string(got.Input)
			for i := range in {
				in[i] = 'X'
			}
			if string(ec.Records()[1].Input) != before {
				t.Error("recorded value changed when the caller's buffer did")
			}
		})
	}
}

func TestNilContextIsDisabled(t *testing.T) {
	var tr *trace.Tracer
	ctx, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
	if ec != nil || trace.FromContext(ctx) != nil || ec.Enabled() {
		t.Fatal("nil tracer made a context")
	}
	ec.StartIteration()
	ec.ToolCall("x", nil, nil, 0, nil)
	s := ec.StartSpan(trace.SpanTool, "x", nil)
	s.End(nil, errors.New("e"))
	cctx, c := trace.SpawnChild(ctx, "c", nil)
	if c != nil || cctx != ctx {
		t.Error("SpawnChild in a disabled run made a child")
	}
	c.End(nil, nil)
	ec.End(nil, nil)
	if ec.Records() != nil || ec.Stats().Records != 0 {
		t.Error("disabled context recorded")
	}
	n, err := trace.Tool(ctx, "x", 1, func(context.Context) (int, error) { return 7, nil })
	if n != 7 || err != nil {
		t.Error("Tool without a context did not call through")
	}
}

func TestTree(t *testing.T) {
	_, recs := fixture(t, trace.Options{})
	shuffled := slices.Clone(recs)
	slices.Reverse(shuffled)
	roots := trace.Tree(shuffled)
	if len(roots) != 1 || roots[0].Start.Type != trace.TypeRunStart || roots[0].End == nil {
		t.Fatalf("want one closed run root, got %d roots", len(roots))
	}
	iters := 0
	for _, c := range roots[0].Children {
		if c.Start.Type == trace.TypeIterationStart {
			iters++
			if c.End == nil || c.End.Type != trace.TypeIterationEnd {
				t.Errorf("iteration %d not closed", c.Start.Iteration)
			}
		}
	}
	if iters != 2 {
		t.Errorf("root has %d iterations, want 2", iters)
	}
	// The child run nests its own iteration and model call.
	var child *trace.Node
	var walk func(n *trace.Node)
	walk = func(n *trace.Node) {
		if n.Start.Type == trace.TypeChildSpawn {
			child = n
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(roots[0])
	if child == nil || child.End == nil || len(child.Children) != 1 || len(child.Children[0].Children) != 1 ||
		child.Children[0].Children[0].Start.Name != "gpt-mini" {
		t.Errorf("child subtree wrong: %+v", child)
	}
}

func TestGoldenFixtureJSONL(t *testing.T) {
	_, recs := fixture(t, trace.Options{})
	var b bytes.Buffer
	for _, r := range recs {
		// Ids are random; the golden file pins everything else.
		r.TraceID, r.SpanID, r.ParentID = trace.TraceID{1}, trace.SpanID{1}, trace.SpanID{}
		b.Write(r.AppendJSON(nil))
		b.WriteByte('\n')
	}
	golden.Check(t, "fixture.jsonl", b.Bytes())
}

func TestEncodingKeepsLinesValid(t *testing.T) {
	for _, v := range []trace.Value{trace.Value("not json"), trace.Value("{\n \"a\": 1\n}"), trace.Value("{\"a\":")} {
		r := trace.Record{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Type: trace.TypeCustom, Name: "x", Output: v}
		line := r.AppendJSON(nil)
		if bytes.ContainsAny(line, "\n\r") || !json.Valid(line) {
			t.Errorf("value %q encoded as %s", v, line)
		}
	}
}

func TestSpawnChildUnderSpan(t *testing.T) {
	tr := trace.New(trace.Options{})
	ctx, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
	ec.StartIteration()
	sp := ec.StartSpan(trace.SpanTool, "delegate", nil)
	cctx, child := trace.SpawnChild(sp.Context(ctx), "helper", nil)
	if trace.FromContext(cctx) != child || child.Depth() != 1 {
		t.Fatal("SpawnChild did not return a context carrying the child")
	}
	child.Message("assistant", trace.Text("done"))
	child.End(nil, nil)
	sp.End(nil, nil)
	ec.EndIteration("terminate")
	ec.End(nil, nil)
	roots := trace.Tree(ec.Records())
	tool := roots[0].Children[0].Children[0]
	if tool.Start.Name != "delegate" || len(tool.Children) != 1 || tool.Children[0].Start.Type != trace.TypeChildSpawn ||
		tool.Children[0].End == nil || len(tool.Children[0].Children) != 1 {
		t.Errorf("child run not nested under the tool span: %+v", tool)
	}
	// Without a span in the context, the child hangs under the iteration.
	_, other := trace.SpawnChild(ctx, "x", nil)
	other.End(nil, nil)
	if n := trace.Tree(ec.Records())[0]; len(n.Children) != 2 {
		t.Errorf("want the iteration and the late child under the run, got %d nodes", len(n.Children))
	}
	if _, c := trace.SpawnChild(context.Background(), "none", nil); c != nil {
		t.Error("SpawnChild without a run returned a child")
	}
}

func TestEndWithOutcome(t *testing.T) {
	tr := trace.New(trace.Options{})
	_, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
	ec.End(trace.Text("partial"), context.DeadlineExceeded)
	ec.End(trace.Text("again"), errors.New("after the end")) // does nothing
	recs := ec.Records()
	end := recs[len(recs)-1]
	if len(recs) != 3 || end.Type != trace.TypeRunEnd || end.Status != "timeout" || end.Output.Text() != "partial" || ec.Stats().Errors != 1 {
		t.Errorf("run.end %+v, %d records, %d errors", end, len(recs), ec.Stats().Errors)
	}
	if reason, err := ec.Termination(); reason != trace.TerminationTimeout || err != context.DeadlineExceeded || ec.Result().Text() != "partial" {
		t.Errorf("Termination() = %s, %v; Result() = %s", reason, err, ec.Result())
	}
}

func TestRecordsOfRepeatedRuns(t *testing.T) {
	tr := trace.New(trace.Options{})
	run := func(n int) *trace.ExecutionContext {
		_, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
		for i := range n {
			ec.ToolCall("t", trace.JSON(i), nil, 0, nil)
		}
		return ec
	}
	run(100).End(nil, nil)
	first := run(100)
	first.End(nil, nil)
	// The next run starts with a log the size of the smaller of the last
	// two: its records come back without a copy, and later records do not
	// show through.
	second := run(50)
	before := second.Records()
	second.ToolCall("late", nil, nil, 0, nil)
	second.End(nil, nil)
	after := second.Records()
	if len(before) != 51 || len(after) != 53 || before[50].Name != "t" || after[51].Name != "late" {
		t.Fatalf("before %d records, after %d", len(before), len(after))
	}
	if &before[0] != &after[0] {
		t.Error("records of a run that fits its log were copied")
	}
	// A run that outgrows its log keeps every record, in order.
	third := run(300)
	third.End(nil, nil)
	recs := third.Records()
	if len(recs) != 302 {
		t.Fatalf("got %d records, want 302", len(recs))
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
}

// TestValuesAreCopied mutates the caller's buffers after recording and
// checks that the records did not change, for values that go into the
// run's arena, values too big for it, and truncated ones; and that
// appending to a recorded value cannot overwrite its neighbour in the arena.
func TestValuesAreCopied(t *testing.T) {
	for _, size := range []int{1, 100, 1 << 10, 1<<10 + 1, 5000, 70 << 10} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			tr := trace.New(trace.Options{})
			_, ec := tr.Start(context.Background(), "copy", trace.RunOptions{})
			mk := func(c byte) []byte {
				b := bytes.Repeat([]byte{c}, size)
				b[0], b[len(b)-1] = '"', '"'
				if size == 1 {
					b[0] = '1'
				}
				return b
			}
			in, out, th := mk('a'), mk('b'), mk('c')
			ec.Record(trace.Record{Type: trace.TypeModelCall, Name: "m", Input: in, Output: out, Thinking: th})
			span := ec.StartSpan(trace.SpanTool, "t", in)
			span.End(out, nil)
			recs := ec.Records()
			want := make([]string, 0, 8)
			for _, r := range recs {
				want = append(want, string(r.Input)+"|"+string(r.Output)+"|"+string(r.Thinking))
			}
			for _, b := range [][]byte{in, out, th} {
				for i := range b {
					b[i] = 'X'
				}
			}
			for i, r := range ec.Records() {
				if got := string(r.Input) + "|" + string(r.Output) + "|" + string(r.Thinking); got != want[i] {
					t.Fatalf("record %d (%s) changed when the caller reused its buffers", i, r.Type)
				}
			}
			mc := recs[1]
			_ = append(mc.Input, "overflow"...)
			if string(recs[1].Output) != want[1][len(mc.Input)+1:len(mc.Input)+1+len(mc.Output)] {
				t.Fatal("appending to a recorded value overwrote the next one")
			}
		})
	}
}
