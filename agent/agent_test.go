package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/tool"
	"github.com/loupe-dev/loupe/trace"
)

func model(t testing.TB, script string) *scripted.Model {
	t.Helper()
	s, err := scripted.Parse([]byte(script), t.Name()+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s.NewModel()
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

func addTool() agent.Tool {
	return tool.Func("add", "Add two numbers.", func(_ context.Context, in addIn) (float64, error) {
		return in.A + in.B, nil
	})
}

type waitIn struct{}

// waitTool blocks until its context is done: a tool that never finishes
// on its own.
func waitTool() agent.Tool {
	return tool.Func("wait", "Wait until the run ends.", func(ctx context.Context, _ waitIn) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
}

func newTracer() *trace.Tracer { return trace.New(trace.Options{}) }

func types(recs []trace.Record) []trace.Type {
	var ts []trace.Type
	for _, r := range recs {
		ts = append(ts, r.Type)
	}
	return ts
}

func find(recs []trace.Record, typ trace.Type) []trace.Record {
	var out []trace.Record
	for _, r := range recs {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

const addScript = `
model: m1
price: {input_per_mtok: 1, output_per_mtok: 2}
turns:
  - thinking: I add.
    tool_calls:
      - {name: add, input: {a: 2, b: 3}}
    usage: {input_tokens: 100, output_tokens: 10}
  - answer: "5"
    usage: {input_tokens: 120, output_tokens: 5}
`

func TestReActEndToEnd(t *testing.T) {
	loop := &agent.ReAct{Model: model(t, addScript), Tools: agent.NewToolbox(addTool()), System: "Be exact."}
	exec := &agent.Executor{Name: "calc", Tracer: newTracer(), Tags: []string{"test"}}
	res := exec.Run(context.Background(), loop, "What is 2+3?")
	if res.Err != nil || res.Termination != trace.TerminationSuccess || res.Answer != "5" {
		t.Fatalf("run = %q, %s, %v; want 5, success, nil", res.Answer, res.Termination, res.Err)
	}
	want := []trace.Type{
		trace.TypeRunStart, trace.TypeToolDiscovered, trace.TypeMessage, trace.TypeMessage,
		trace.TypeIterationStart, trace.TypeModelCall, trace.TypeToolStart, trace.TypeToolEnd, trace.TypeIterationEnd,
		trace.TypeIterationStart, trace.TypeModelCall, trace.TypeMessage, trace.TypeIterationEnd,
		trace.TypeRunEnd,
	}
	if got := types(res.Records); !slices.Equal(got, want) {
		t.Fatalf("record types:\n got %v\nwant %v", got, want)
	}
	st := res.Stats
	if st.InputTokens != 220 || st.OutputTokens != 15 || st.ToolCalls != 1 || st.Iterations != 2 || st.ModelCalls != 2 {
		t.Errorf("stats = %+v", st)
	}
	if want := (220*1.0 + 15*2.0) / 1e6; fmt.Sprintf("%.9f", st.CostUSD) != fmt.Sprintf("%.9f", want) {
		t.Errorf("cost = %v, want %v", st.CostUSD, want)
	}
	end := res.Records[len(res.Records)-1]
	if end.Status != "success" || end.Output.Text() != "5" {
		t.Errorf("run.end = %s %s", end.Status, end.Output)
	}
	mc := find(res.Records, trace.TypeModelCall)[0]
	if mc.Name != "m1" || mc.Thinking.Text() != "I add." || mc.Status != "tool_calls" || !strings.Contains(mc.Output.String(), `"add"`) {
		t.Errorf("model.call = %+v", mc)
	}
	ts, te := find(res.Records, trace.TypeToolStart)[0], find(res.Records, trace.TypeToolEnd)[0]
	if ts.Name != "add" || string(ts.Input) != `{"a":2,"b":3}` || te.SpanID != ts.SpanID || te.Output.String() != "5" {
		t.Errorf("tool.start = %s %s, tool.end = %s", ts.Name, ts.Input, te.Output)
	}
	if d := find(res.Records, trace.TypeToolDiscovered)[0]; d.Name != "add" || !strings.Contains(d.Input.String(), `"required":["a","b"]`) {
		t.Errorf("tool.discovered = %s %s", d.Name, d.Input)
	}
	msgs := loop.Messages()
	if len(msgs) != 5 || msgs[3].Role != agent.RoleTool || msgs[3].Content != "5" || msgs[4].Content != "5" {
		t.Errorf("messages = %+v", msgs)
	}
	if res.TraceID.IsZero() || res.Duration <= 0 {
		t.Errorf("trace id %v, duration %v", res.TraceID, res.Duration)
	}
}

func TestUntracedRunStillWorks(t *testing.T) {
	loop := &agent.ReAct{Model: model(t, addScript), Tools: agent.NewToolbox(addTool())}
	res := (&agent.Executor{}).Run(context.Background(), loop, "What is 2+3?")
	if res.Answer != "5" || res.Termination != trace.TerminationSuccess || res.Records != nil {
		t.Fatalf("untraced run = %q %s %d records", res.Answer, res.Termination, len(res.Records))
	}
}

// loopScript returns a script of n turns, each calling add twice.
func loopScript(n int, usage string) string {
	var b strings.Builder
	b.WriteString("model: m\nturns:\n")
	for range n {
		fmt.Fprintf(&b, "  - tool_calls: [{name: add, input: {a: 1, b: 1}}, {name: add, input: {a: 2, b: 2}}]\n    usage: %s\n", usage)
	}
	b.WriteString("  - answer: done\n")
	return b.String()
}

func TestLimits(t *testing.T) {
	tests := []struct {
		name   string
		limits agent.Limits
		script string
		tools  []agent.Tool
		cancel bool // a tool cancels the run's context (its wait tool, made in the test)
		reason trace.TerminationReason
		rule   string
		tools0 int // tool.start records expected
	}{
		{"max iterations", agent.Limits{MaxIterations: 2}, loopScript(5, "{input_tokens: 1}"), nil, false, trace.TerminationMaxIterations, "max_iterations", 4},
		{"max tool calls", agent.Limits{MaxToolCalls: 3}, loopScript(5, "{input_tokens: 1}"), nil, false, trace.TerminationLimitExceeded, "max_tool_calls", 3},
		{"max tool calls per tool", agent.Limits{MaxToolCallsPerTool: map[string]int{"add": 1}}, loopScript(5, "{input_tokens: 1}"), nil, false, trace.TerminationLimitExceeded, "max_tool_calls:add", 1},
		{"max tokens", agent.Limits{MaxTokens: 250}, loopScript(5, "{input_tokens: 100, output_tokens: 20}"), nil, false, trace.TerminationLimitExceeded, "max_tokens", 4},
		{"max cost", agent.Limits{MaxCostUSD: 0.0015}, strings.Replace(loopScript(5, "{input_tokens: 100}"), "model: m\n", "model: m\nprice: {input_per_mtok: 10}\n", 1), nil, false, trace.TerminationLimitExceeded, "max_cost_usd", 2},
		// A model with no price: the budget cannot be kept, so the first call stops the run.
		{"max cost, unpriced model", agent.Limits{MaxCostUSD: 1}, loopScript(5, "{input_tokens: 100}"), nil, false, trace.TerminationLimitExceeded, "max_cost_usd", 0},
		{"timeout", agent.Limits{Timeout: 30 * time.Millisecond}, "turns:\n  - tool_calls: [{name: wait}]\n  - answer: never\n", []agent.Tool{waitTool()}, false, trace.TerminationTimeout, "timeout", 1},
		{"context canceled", agent.Limits{}, "turns:\n  - tool_calls: [{name: wait}]\n  - answer: never\n", nil, true, trace.TerminationContextCanceled, "context_canceled", 1},
	}
	for _, tt := range tests {
		for _, traced := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/traced=%v", tt.name, traced), func(t *testing.T) {
				tools := tt.tools
				if tools == nil {
					tools = []agent.Tool{addTool()}
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.cancel {
					// The tool cancels the run once it runs, so that the
					// cancellation comes in the middle of a tool call.
					tools = []agent.Tool{tool.Func("wait", "Cancel the run, then wait until it ends.", func(ctx context.Context, _ waitIn) (string, error) {
						cancel()
						<-ctx.Done()
						return "", ctx.Err()
					})}
				}
				exec := &agent.Executor{Limits: tt.limits}
				if traced {
					exec.Tracer = newTracer()
				}
				loop := &agent.ReAct{Model: model(t, tt.script), Tools: agent.NewToolbox(tools...), Sequential: true}
				res := exec.Run(ctx, loop, "go")
				if res.Termination != tt.reason {
					t.Fatalf("termination = %s (%v), want %s", res.Termination, res.Err, tt.reason)
				}
				var le *agent.LimitError
				if !errors.As(res.Err, &le) || le.Rule != tt.rule || le.Reason != tt.reason {
					t.Fatalf("err = %#v, want a *LimitError for %s", res.Err, tt.rule)
				}
				if !traced {
					return
				}
				g := find(res.Records, trace.TypeGuardrail)
				if len(g) != 1 || g[0].Name != tt.rule || g[0].Status != "abort" || g[0].Error == "" {
					t.Fatalf("guardrail records = %+v, want one for %s", g, tt.rule)
				}
				if n := len(find(res.Records, trace.TypeToolStart)); n != tt.tools0 {
					t.Errorf("%d tool.start records, want %d", n, tt.tools0)
				}
				end := res.Records[len(res.Records)-1]
				if end.Type != trace.TypeRunEnd || end.Status != string(tt.reason) || end.Error != res.Err.Error() {
					t.Errorf("run.end = %s %s %q", end.Type, end.Status, end.Error)
				}
				if res.Stats.Guardrails != 1 {
					t.Errorf("stats.guardrails = %d", res.Stats.Guardrails)
				}
			})
		}
	}
}

func TestHookAbort(t *testing.T) {
	var mu sync.Mutex
	var points []agent.HookPoint
	called := false
	calls := agent.NewToolbox(tool.Func("add", "", func(_ context.Context, in addIn) (float64, error) {
		called = true
		return in.A + in.B, nil
	}))
	record := agent.HookFunc(func(_ context.Context, _ *trace.ExecutionContext, ev *agent.HookEvent) error {
		mu.Lock()
		defer mu.Unlock()
		points = append(points, ev.Point)
		return nil
	})
	deny := agent.HookFunc(func(_ context.Context, _ *trace.ExecutionContext, ev *agent.HookEvent) error {
		if ev.Point == agent.BeforeTool && ev.ToolCall.Name == "add" {
			return errors.New("add is not allowed here")
		}
		return nil
	})
	exec := &agent.Executor{Tracer: newTracer(), Hooks: []agent.Hook{record, deny}}
	res := exec.Run(context.Background(), &agent.ReAct{Model: model(t, addScript), Tools: calls}, "2+3")
	if res.Termination != trace.TerminationHookAbort {
		t.Fatalf("termination = %s (%v), want hook_abort", res.Termination, res.Err)
	}
	var he *agent.HookError
	if !errors.As(res.Err, &he) || he.Point != agent.BeforeTool || !strings.Contains(res.Err.Error(), "add is not allowed here") {
		t.Fatalf("err = %v", res.Err)
	}
	if called {
		t.Error("the tool ran although a before_tool hook aborted")
	}
	herr := find(res.Records, trace.TypeHookError)
	if len(herr) != 1 || herr[0].Name != "before_tool" || herr[0].Error != "add is not allowed here" {
		t.Errorf("hook.error records = %+v", herr)
	}
	want := []agent.HookPoint{agent.BeforeRun, agent.BeforeIteration, agent.BeforeModel, agent.AfterModel, agent.BeforeTool, agent.AfterIteration, agent.AfterRun}
	if !slices.Equal(points, want) {
		t.Errorf("hook points = %v, want %v", points, want)
	}
	// Every hook call is a hook span: start, then end or error.
	starts := len(find(res.Records, trace.TypeHookStart))
	ends := len(find(res.Records, trace.TypeHookEnd)) + len(herr)
	if starts != 2*len(want) || ends != starts {
		t.Errorf("%d hook.start and %d hook.end/error records, want %d each", starts, ends, 2*len(want))
	}
	if len(find(res.Records, trace.TypeToolStart)) != 0 {
		t.Error("a tool.start was recorded for an aborted call")
	}
}

func TestHookCanRewriteToolCall(t *testing.T) {
	fix := agent.HookFunc(func(_ context.Context, _ *trace.ExecutionContext, ev *agent.HookEvent) error {
		if ev.Point == agent.BeforeTool {
			ev.ToolCall.Input = []byte(`{"a":40,"b":2}`)
		}
		return nil
	})
	loop := &agent.ReAct{Model: model(t, addScript), Tools: agent.NewToolbox(addTool())}
	res := (&agent.Executor{Hooks: []agent.Hook{fix}}).Run(context.Background(), loop, "2+3")
	if res.Err != nil || loop.Messages()[2].Content != "42" {
		t.Fatalf("err %v, tool result %q; want 42", res.Err, loop.Messages()[2].Content)
	}
}

func TestParallelToolCalls(t *testing.T) {
	// On synctest's fake clock, so that the calls really finish out of
	// order (3, 2, 1), and a run that is not parallel times out at once.
	synctest.Test(t, testParallelToolCalls)
}

func testParallelToolCalls(t *testing.T) {
	// Each call waits until all three are running: only parallel calls
	// finish before the deadline.
	var started atomic.Int32
	all := make(chan struct{}) // closed by the third call to start
	var mu sync.Mutex
	var finished []int // the calls' n, in the order they finished
	type in struct {
		N int `json:"n"`
	}
	barrier := tool.Func("barrier", "", func(ctx context.Context, in in) (int, error) {
		if started.Add(1) == 3 {
			close(all)
		}
		select {
		case <-all:
			time.Sleep(time.Duration(3-in.N) * time.Millisecond) // finish out of order
			mu.Lock()
			finished = append(finished, in.N)
			mu.Unlock()
			return in.N * 10, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
	script := `
turns:
  - tool_calls:
      - {name: barrier, input: {n: 1}}
      - {name: barrier, input: {n: 2}}
      - {name: barrier, input: {n: 3}}
  - answer: ok
`
	loop := &agent.ReAct{Model: model(t, script), Tools: agent.NewToolbox(barrier)}
	tracer := newTracer()
	defer tracer.Shutdown(context.Background())
	exec := &agent.Executor{Tracer: tracer, Limits: agent.Limits{Timeout: 10 * time.Second}}
	res := exec.Run(context.Background(), loop, "go")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var got []string
	for _, m := range loop.Messages() {
		if m.Role == agent.RoleTool {
			got = append(got, m.ToolCallID+"="+m.Content)
		}
	}
	if !slices.Equal(finished, []int{3, 2, 1}) {
		t.Errorf("the calls finished in the order %v, want 3, 2, 1", finished)
	}
	if want := []string{"call_1_1=10", "call_1_2=20", "call_1_3=30"}; !slices.Equal(got, want) {
		t.Errorf("tool results = %v, want %v (call order)", got, want)
	}
	if n := len(find(res.Records, trace.TypeToolEnd)); n != 3 || res.Stats.ByTool["barrier"].Calls != 3 {
		t.Errorf("%d tool.end records, stats %+v", n, res.Stats.ByTool)
	}
}

func TestSchemaValidationFailureIsAnObservation(t *testing.T) {
	script := `
turns:
  - tool_calls: [{name: add, input: {a: "two", b: 3}}]
  - when: 'field "a"'
    tool_calls: [{name: add, input: {a: 2, b: 3}}]
  - answer: "5"
`
	loop := &agent.ReAct{Model: model(t, script), Tools: agent.NewToolbox(addTool())}
	res := (&agent.Executor{Tracer: newTracer()}).Run(context.Background(), loop, "2+3")
	if res.Err != nil || res.Answer != "5" {
		t.Fatalf("run = %q, %v", res.Answer, res.Err)
	}
	te := find(res.Records, trace.TypeToolError)
	if len(te) != 1 || !strings.Contains(te[0].Error, `invalid input for tool add: field "a"`) || !strings.Contains(te[0].Error, `want "number"`) {
		t.Fatalf("tool.error records = %+v", te)
	}
	obs := loop.Messages()[2]
	if !obs.IsError || !strings.HasPrefix(obs.Content, "error: invalid input for tool add") {
		t.Errorf("the model saw %+v", obs)
	}
	if res.Stats.Errors != 1 || res.Stats.ByTool["add"].Errors != 1 {
		t.Errorf("stats = %+v", res.Stats)
	}
}

const subScript = `
model: small
turns:
  - answer: a short summary
    usage: {input_tokens: 50, output_tokens: 7}
    cost_usd: 0.01
`

func TestSubAgentStatsRollUp(t *testing.T) {
	sub, err := scripted.Parse([]byte(subScript), "sub.yaml")
	if err != nil {
		t.Fatal(err)
	}
	summarize := &agent.SubAgent{ToolName: "summarize", Description: "Summarise.", NewLoop: func() agent.AgentLoop {
		return &agent.ReAct{Model: sub.NewModel(), Tools: agent.NewToolbox(addTool())}
	}}
	script := `
model: big
turns:
  - tool_calls: [{name: summarize, input: {task: "sum it up"}}]
    usage: {input_tokens: 100, output_tokens: 10}
    cost_usd: 0.02
  - answer: done
    usage: {input_tokens: 200, output_tokens: 20}
    cost_usd: 0.03
`
	loop := &agent.ReAct{Model: model(t, script), Tools: agent.NewToolbox(summarize)}
	res := (&agent.Executor{Tracer: newTracer()}).Run(context.Background(), loop, "go")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	st := res.Stats
	if st.InputTokens != 350 || st.OutputTokens != 37 || st.Children != 1 || st.ModelCalls != 3 {
		t.Errorf("stats = %+v", st)
	}
	if fmt.Sprintf("%.4f", st.CostUSD) != "0.0600" {
		t.Errorf("cost = %v, want 0.06", st.CostUSD)
	}
	if st.ByModel["small"].InputTokens != 50 || st.ByModel["big"].InputTokens != 300 {
		t.Errorf("by model = %+v", st.ByModel)
	}
	spawn, end := find(res.Records, trace.TypeChildSpawn), find(res.Records, trace.TypeChildEnd)
	if len(spawn) != 1 || len(end) != 1 || spawn[0].Name != "summarize" || end[0].Status != "success" || end[0].Output.Text() != "a short summary" {
		t.Fatalf("child records: %+v %+v", spawn, end)
	}
	for _, r := range res.Records {
		if r.Name == "small" && (r.Depth != 1 || r.Type != trace.TypeModelCall) {
			t.Errorf("child model call at depth %d", r.Depth)
		}
	}
	if obs := loop.Messages()[2].Content; obs != "a short summary" {
		t.Errorf("the model saw %q", obs)
	}
}

func TestSubAgentSpendCountsAgainstParentBudget(t *testing.T) {
	sub, _ := scripted.Parse([]byte(subScript), "sub.yaml")
	summarize := &agent.SubAgent{ToolName: "summarize", NewLoop: func() agent.AgentLoop { return &agent.ReAct{Model: sub.NewModel()} }}
	script := "turns:\n  - tool_calls: [{name: summarize, input: {task: x}}]\n    cost_usd: 0.001\n  - answer: too late\n"
	exec := &agent.Executor{Tracer: newTracer(), Limits: agent.Limits{MaxCostUSD: 0.005}}
	res := exec.Run(context.Background(), &agent.ReAct{Model: model(t, script), Tools: agent.NewToolbox(summarize)}, "go")
	if res.Termination != trace.TerminationLimitExceeded {
		t.Fatalf("termination = %s (%v), want limit_exceeded from the child's cost", res.Termination, res.Err)
	}
	if g := find(res.Records, trace.TypeGuardrail); len(g) != 1 || g[0].Name != "max_cost_usd" || g[0].Depth != 0 {
		t.Errorf("guardrails = %+v", g)
	}
}

func TestCompaction(t *testing.T) {
	summ, _ := scripted.Parse([]byte("model: summ\nturns:\n  - answer: the adds gave 2 and 4\n    usage: {input_tokens: 30, output_tokens: 6}\n"), "summ.yaml")
	loop := &agent.ReAct{
		Model: model(t, loopScript(2, "{input_tokens: 10}")), Tools: agent.NewToolbox(addTool()), System: "sys",
		Compaction: &agent.Compaction{Model: summ.NewModel(), MaxMessages: 7, Keep: 2},
	}
	res := (&agent.Executor{Tracer: newTracer()}).Run(context.Background(), loop, "go")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	msgs := loop.Messages()
	if msgs[0].Content != "sys" || !strings.HasPrefix(msgs[1].Content, "Summary of the conversation so far:\nthe adds gave 2 and 4") {
		t.Fatalf("messages after compaction: %+v", msgs[:2])
	}
	if len(loop.History()) <= len(msgs) {
		t.Errorf("history %d messages, current %d; history must keep compacted ones", len(loop.History()), len(msgs))
	}
	spawn := find(res.Records, trace.TypeChildSpawn)
	if len(spawn) != 1 || spawn[0].Name != "compaction" {
		t.Fatalf("child.spawn = %+v", spawn)
	}
	if up := find(res.Records, trace.TypeStateUpdate); len(up) != 1 || up[0].Name != "messages" {
		t.Errorf("state.update = %+v", up)
	}
	if res.Stats.ByModel["summ"].Calls != 1 {
		t.Errorf("compaction model calls not rolled up: %+v", res.Stats.ByModel)
	}
	for _, m := range msgs[2:] {
		if m.Role == agent.RoleTool && m.ToolCallID == "" {
			t.Errorf("tool message without its call: %+v", m)
		}
	}
	if msgs[2].Role == agent.RoleTool {
		t.Errorf("the kept messages start with a tool result, split from its call: %+v", msgs[2])
	}
}

func TestModelErrorEndsRun(t *testing.T) {
	res := (&agent.Executor{Tracer: newTracer()}).Run(context.Background(), &agent.ReAct{Model: model(t, "turns:\n  - error: overloaded\n")}, "go")
	if res.Termination != trace.TerminationError || !strings.Contains(res.Err.Error(), "overloaded") {
		t.Fatalf("termination %s err %v", res.Termination, res.Err)
	}
	if mc := find(res.Records, trace.TypeModelCall); len(mc) != 1 || !strings.Contains(mc[0].Error, "overloaded") {
		t.Errorf("model.call = %+v", mc)
	}
}

func TestScriptRunsOut(t *testing.T) {
	res := (&agent.Executor{}).Run(context.Background(), &agent.ReAct{Model: model(t, loopScript(1, "{}")[:strings.LastIndex(loopScript(1, "{}"), "  - answer")]), Tools: agent.NewToolbox(addTool())}, "go")
	if res.Err == nil || !strings.Contains(res.Err.Error(), "call 2 has no turn left") {
		t.Fatalf("err = %v", res.Err)
	}
}

func TestUnknownToolIsAnObservation(t *testing.T) {
	script := "turns:\n  - tool_calls: [{name: mul}]\n  - when: 'the tools are: add'\n    answer: ok\n"
	loop := &agent.ReAct{Model: model(t, script), Tools: agent.NewToolbox(addTool())}
	res := (&agent.Executor{}).Run(context.Background(), loop, "go")
	if res.Err != nil || res.Answer != "ok" {
		t.Fatalf("run = %q %v; the model must see the list of tools", res.Answer, res.Err)
	}
}

func TestStreamedDeltas(t *testing.T) {
	script := "stream: true\nturns:\n  - thinking: hmm\n    answer: one two three\n"
	res := (&agent.Executor{Tracer: newTracer()}).Run(context.Background(), &agent.ReAct{Model: model(t, script)}, "go")
	d := find(res.Records, trace.TypeModelDelta)
	var text strings.Builder
	for _, r := range d[1:] {
		text.WriteString(r.Output.Text())
	}
	if len(d) != 4 || d[0].Status != "thinking" || text.String() != "one two three" {
		t.Errorf("deltas = %d, text %q", len(d), text.String())
	}
	mc := find(res.Records, trace.TypeModelCall)[0]
	if d[0].ParentID != mc.SpanID {
		t.Error("deltas are not children of their model call")
	}
}
