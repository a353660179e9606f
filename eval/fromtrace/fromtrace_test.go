package fromtrace_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/eval/fromtrace"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

// fixedClock advances one second per call, so durations are exact.
func fixedClock() func() time.Time {
	t := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Second); return t }
}

// record runs fn inside a recorded run and returns its records.
func record(t *testing.T, input string, fn func(ctx context.Context, ec *trace.ExecutionContext)) []trace.Record {
	t.Helper()
	tr := trace.New(trace.Options{Now: fixedClock()})
	ctx, ec := tr.Start(context.Background(), "agent", trace.RunOptions{Input: trace.Text(input)})
	fn(ctx, ec)
	ec.End(nil, nil)
	return ec.Records()
}

func TestTrajectoryFromRecordedRun(t *testing.T) {
	recs := record(t, "find go docs", func(ctx context.Context, ec *trace.ExecutionContext) {
		ec.StartIteration()
		ec.ModelCall(trace.ModelCall{Model: "m", Output: trace.Text("calling search"),
			Usage: trace.Usage{InputTokens: 100, OutputTokens: 20, CachedTokens: 10, CostUSD: 0.01}})
		// Parallel tools: fetch starts first, search ends first.
		fetch := ec.StartSpan(trace.SpanTool, "fetch", trace.JSON(map[string]any{"url": "u"}))
		search := ec.StartSpan(trace.SpanTool, "search", trace.JSON(map[string]any{"q": "go"}))
		search.End(trace.JSON([]string{"r1"}), nil)
		fetch.End(nil, errors.New("404"))
		ec.EndIteration("continue")
		ec.StartIteration()
		ec.ToolCall("summarize", trace.Text("all of it"), trace.Text("done"), 2*time.Second, nil)
		ec.StartSpan(trace.SpanTool, "hang", nil) // never ends
		ec.ModelCall(trace.ModelCall{Model: "m", Output: trace.Text("final"),
			Usage: trace.Usage{InputTokens: 50, OutputTokens: 5}})
		ec.EndIteration("terminate")
		ec.End(trace.JSON(map[string]any{"text": "Go docs are at go.dev"}), nil)
	})
	got := fromtrace.Trajectory(recs)

	var names []string
	for _, c := range got.Calls {
		names = append(names, c.Name)
	}
	if want := []string{"fetch", "search", "summarize", "hang"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("call order = %v, want %v (order of start)", names, want)
	}
	fetch, search, sum, hang := got.Calls[0], got.Calls[1], got.Calls[2], got.Calls[3]
	if fetch.Err != "404" || !reflect.DeepEqual(fetch.Args, map[string]any{"url": "u"}) {
		t.Errorf("fetch = %+v", fetch)
	}
	if search.Err != "" || !reflect.DeepEqual(search.Output, []any{"r1"}) || search.Duration == nil {
		t.Errorf("search = %+v", search)
	}
	if sum.Args != nil || sum.ArgsRaw != "all of it" || sum.Output != "done" || *sum.Duration != 2*time.Second {
		t.Errorf("summarize = %+v", sum)
	}
	if hang.Err != fromtrace.Unfinished {
		t.Errorf("hang.Err = %q", hang.Err)
	}
	if got.Output != "Go docs are at go.dev" {
		t.Errorf("Output = %q", got.Output)
	}
	if got.Usage == nil || *got.Usage != (eval.Usage{Input: 150, Output: 25, Cached: 10}) {
		t.Errorf("Usage = %+v", got.Usage)
	}
	if got.LLMCalls == nil || *got.LLMCalls != 2 || got.CostUSD == nil || *got.CostUSD != 0.01 {
		t.Errorf("LLMCalls/CostUSD = %v/%v", got.LLMCalls, got.CostUSD)
	}
	if got.Duration == nil || *got.Duration <= 0 {
		t.Errorf("Duration = %v", got.Duration)
	}
	if got.Errors != 1 {
		t.Errorf("Errors = %d, want 1 (the tool.error)", got.Errors)
	}
	if got.EventCount != len(recs) {
		t.Errorf("EventCount = %d, want %d", got.EventCount, len(recs))
	}
	wantMsgs := []eval.Message{{Role: "user", Content: "find go docs"}, {Role: "assistant", Content: "Go docs are at go.dev"}}
	if !reflect.DeepEqual(got.Messages, wantMsgs) {
		t.Errorf("Messages = %+v", got.Messages)
	}
}

func TestTrajectoryOutputFallbacks(t *testing.T) {
	tests := []struct {
		name string
		fn   func(ctx context.Context, ec *trace.ExecutionContext)
		want string
		msgs int
	}{
		{"assistant message", func(_ context.Context, ec *trace.ExecutionContext) {
			ec.Message("user", trace.Text("hi"))
			ec.Message("assistant", trace.Text("hello"))
			ec.ModelCall(trace.ModelCall{Model: "m", Output: trace.Text("ignored")})
		}, "hello", 2},
		{"model output", func(_ context.Context, ec *trace.ExecutionContext) {
			ec.ModelCall(trace.ModelCall{Model: "m", Output: trace.Text("first")})
			ec.ModelCall(trace.ModelCall{Model: "m", Output: trace.JSON(map[string]any{"content": "second"})})
		}, "second", 2},
		{"nothing", func(context.Context, *trace.ExecutionContext) {}, "", 1},
		// A last assistant turn that only calls tools is not the answer.
		{"assistant message with text", func(_ context.Context, ec *trace.ExecutionContext) {
			ec.Message("user", trace.Text("hi"))
			ec.Message("assistant", trace.Text("The answer."))
			ec.Message("assistant", trace.Text(""))
			ec.Message("assistant", trace.JSON(map[string]any{"content": " "}))
		}, "The answer.", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fromtrace.Trajectory(record(t, "q", tt.fn))
			if got.Output != tt.want || len(got.Messages) != tt.msgs {
				t.Errorf("Output = %q, %d messages; want %q, %d", got.Output, len(got.Messages), tt.want, tt.msgs)
			}
		})
	}
}

func TestTrajectoryUnknownsStayNil(t *testing.T) {
	got := fromtrace.Trajectory(record(t, "q", func(_ context.Context, ec *trace.ExecutionContext) {
		ec.ToolCall("a", nil, nil, 0, nil)
	}))
	if got.Usage != nil || got.LLMCalls != nil || got.CostUSD != nil {
		t.Errorf("no model calls, but Usage=%v LLMCalls=%v CostUSD=%v", got.Usage, got.LLMCalls, got.CostUSD)
	}
	if got.Calls[0].Args != nil || got.Calls[0].ArgsRaw != nil || got.Calls[0].Duration != nil {
		t.Errorf("call = %+v; nothing was recorded", got.Calls[0])
	}
	if z := fromtrace.Trajectory(nil); z.EventCount != 0 || z.Duration != nil || len(z.Calls) != 0 {
		t.Errorf("Trajectory(nil) = %+v", z)
	}
}

func TestTrajectoryUnsortedInput(t *testing.T) {
	recs := record(t, "q", func(_ context.Context, ec *trace.ExecutionContext) {
		ec.ToolCall("a", nil, nil, 0, nil)
		ec.ToolCall("b", nil, nil, 0, nil)
	})
	rev := make([]trace.Record, len(recs))
	for i := range recs {
		rev[len(recs)-1-i] = recs[i]
	}
	got := fromtrace.Trajectory(rev)
	if got.Calls[0].Name != "a" || got.Calls[1].Name != "b" {
		t.Errorf("calls = %+v; want a, b (Seq order)", got.Calls)
	}
	if rev[0].Type != trace.TypeRunEnd {
		t.Error("input was reordered")
	}
}

// The real AgentV static trace, read by traceio, graded like AgentV does.
func TestTrajectoryRealStaticTrace(t *testing.T) {
	recs, _, err := traceio.ReadFile(testrepo.Real(t, "agentv/static-trace.json"), traceio.FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	got := fromtrace.Trajectory(recs)
	var names []string
	for _, c := range got.Calls {
		names = append(names, c.Name)
	}
	if want := []string{"webSearch", "fetchPage", "webSearch", "summarize"}; !reflect.DeepEqual(names, want) {
		t.Errorf("calls = %v, want %v", names, want)
	}
	if got.Calls[0].Args["num"] != 5.0 || got.Calls[0].Duration == nil || *got.Calls[0].Duration != time.Second {
		t.Errorf("first call = %+v", got.Calls[0])
	}
	if got.Output == "" || got.Output[:14] != "Based on my re" {
		t.Errorf("Output = %q", got.Output)
	}
	c := eval.Case{ID: "static", Assertions: []eval.Assertion{{
		Kind: eval.KindToolTrajectory, Weight: 1,
		Trajectory: &eval.TrajectorySpec{Mode: eval.AnyOrder, Minimums: []eval.Minimum{{Tool: "webSearch", Count: 2}}},
	}}}
	if r := eval.Evaluate(context.Background(), c, got, eval.Options{}); r.Verdict != "pass" {
		t.Errorf("verdict %s:\n%s", r.Verdict, r.Explain())
	}
}

func TestSplit(t *testing.T) {
	a := record(t, "a", func(context.Context, *trace.ExecutionContext) {})
	b := record(t, "b", func(context.Context, *trace.ExecutionContext) {})
	mixed := []trace.Record{a[0], b[0], a[1], b[1]}
	got := fromtrace.Split(mixed)
	if len(got) != 2 || got[0][0].TraceID != a[0].TraceID || len(got[0]) != 2 || got[1][1].TraceID != b[0].TraceID {
		t.Errorf("Split = %v", got)
	}
}

// FuzzTrajectory decodes arbitrary JSON lines as records (as a store or a
// file would hand them over) and maps them: it must never panic, and the
// mapping must keep every tool.end/tool.error.
func FuzzTrajectory(f *testing.F) {
	f.Add([]byte(`{"v":1,"trace_id":"b03402200f97ed69f5207a7bbabd696a","span_id":"ce831a4fecc1d6f9","seq":2,"time":"2024-01-15T09:00:00Z","type":"tool.start","name":"a","input":{"q":1}}
{"v":1,"trace_id":"b03402200f97ed69f5207a7bbabd696a","span_id":"ce831a4fecc1d6f9","seq":3,"time":"2024-01-15T09:00:01Z","type":"tool.end","name":"a","output":[1]}
{"v":1,"trace_id":"b03402200f97ed69f5207a7bbabd696a","span_id":"b02a33239290a234","seq":4,"time":"2024-01-15T09:00:02Z","type":"run.end","status":"success","output":{"text":"x"}}`))
	f.Add([]byte(`{"v":1,"trace_id":"b03402200f97ed69f5207a7bbabd696a","span_id":"ce831a4fecc1d6f9","seq":1,"time":"2024-01-15T09:00:00Z","type":"tool.error","error":"boom"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var recs []trace.Record
		ends := 0
		for _, line := range bytes.Split(data, []byte("\n")) {
			r, err := trace.DecodeRecord(line)
			if err != nil {
				continue
			}
			if r.Type == trace.TypeToolEnd || r.Type == trace.TypeToolError {
				ends++
			}
			recs = append(recs, r)
		}
		got := fromtrace.Trajectory(recs)
		if len(got.Calls) < ends {
			t.Fatalf("%d tool ends but %d calls", ends, len(got.Calls))
		}
		if got.EventCount != len(recs) {
			t.Fatalf("EventCount %d, want %d", got.EventCount, len(recs))
		}
	})
}

// A run with a call of unknown cost has an unknown cost, not the sum of
// the calls that were priced.
func TestTrajectoryUnknownCostStaysNil(t *testing.T) {
	got := fromtrace.Trajectory(record(t, "q", func(_ context.Context, ec *trace.ExecutionContext) {
		ec.ModelCall(trace.ModelCall{Model: "gpt-4o", Usage: trace.Usage{InputTokens: 10, CostUSD: 0.5}})
		ec.ModelCall(trace.ModelCall{Model: "mystery", Usage: trace.Usage{InputTokens: 10, CostUnknown: true}})
	}))
	if got.CostUSD != nil || got.LLMCalls == nil || *got.LLMCalls != 2 {
		t.Errorf("CostUSD=%v LLMCalls=%v, want an unknown cost over 2 calls", got.CostUSD, got.LLMCalls)
	}
}

// TestLogsIgnored: log records, error-level ones too, change nothing of a
// trajectory but the record count.
func TestLogsIgnored(t *testing.T) {
	tr := trace.New(trace.Options{})
	ctx, ec := tr.Start(context.Background(), "main", trace.RunOptions{Input: trace.Text("q")})
	ec.StartIteration()
	trace.Tool(ctx, "search", map[string]string{"q": "x"}, func(ctx context.Context) (string, error) { return "hit", nil })
	ec.Message("assistant", trace.Text("done"))
	ec.EndIteration("terminate")
	ec.End(trace.Text("done"), nil)
	plain := fromtrace.Trajectory(ec.Records())

	var logged []trace.Record
	for i, r := range ec.Records() {
		logged = append(logged, r)
		l := trace.LogEntry{SeverityNumber: trace.SeverityError, Body: trace.Text("log " + strconv.Itoa(i))}.Record()
		l.TraceID, l.SpanID, l.ParentID, l.Seq, l.Time = r.TraceID, trace.NewSpanID(), r.SpanID, r.Seq, r.Time
		logged = append(logged, l)
	}
	got := fromtrace.Trajectory(logged)
	if got.EventCount != 2*plain.EventCount {
		t.Errorf("event count %d, want %d", got.EventCount, 2*plain.EventCount)
	}
	got.EventCount = plain.EventCount
	if !reflect.DeepEqual(got, plain) {
		t.Errorf("with logs:\n%+v\nwithout:\n%+v", got, plain)
	}
}

// A run whose input and output are lists of chat messages (OpenTelemetry
// GenAI spans, OpenAI and Anthropic requests): the output is the last
// assistant message that has text, the input the user messages' text.
func TestTrajectoryChatMessageValues(t *testing.T) {
	tests := []struct {
		name, in, out, wantIn, wantOut string
	}{
		{"genai parts",
			`[{"role":"system","parts":[{"type":"text","content":"Be brief."}]},{"role":"user","parts":[{"type":"text","content":"Where is order 17?"}]}]`,
			`[{"role":"assistant","parts":[{"type":"text","content":"It has shipped."}]},{"role":"assistant","parts":[{"type":"tool_call","name":"notify","arguments":{"id":17}}]}]`,
			"Where is order 17?", "It has shipped."},
		{"openai content",
			`[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b"}]}]`,
			`[{"role":"assistant","content":"first"},{"role":"assistant","content":[{"type":"text","text":"second"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]}]`,
			"a\nb", "second"},
		{"not messages", `[1,2]`, `[{"x":1}]`, `[1,2]`, `[{"x":1}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := trace.New(trace.Options{Now: fixedClock()})
			_, ec := tr.Start(context.Background(), "agent", trace.RunOptions{Input: trace.Raw([]byte(tt.in))})
			ec.End(trace.Raw([]byte(tt.out)), nil)
			got := fromtrace.Trajectory(ec.Records())
			if got.Output != tt.wantOut || len(got.Messages) != 2 || got.Messages[0].Content != tt.wantIn {
				t.Errorf("Output %q, messages %+v; want %q and input %q", got.Output, got.Messages, tt.wantOut, tt.wantIn)
			}
		})
	}
}

// A tool call's arguments keep the order the call wrote them in, which
// judges are shown (a decoded map keeps none).
func TestTrajectoryArgsOrder(t *testing.T) {
	recs := record(t, "q", func(_ context.Context, ec *trace.ExecutionContext) {
		sp := ec.StartSpan(trace.SpanTool, "search", trace.Raw([]byte(`{"query":"q","lang":"fr","query":"again"}`)))
		sp.End(nil, nil)
	})
	got := fromtrace.Trajectory(recs)
	if len(got.Calls) != 1 || !reflect.DeepEqual(got.Calls[0].ArgsOrder, []string{"query", "lang"}) {
		t.Errorf("calls %+v", got.Calls)
	}
}
