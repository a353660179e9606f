package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/replay"
	"github.com/loupe-dev/loupe/tool"
	"github.com/loupe-dev/loupe/trace"
)

// The script of the scripted runs: parallel tool calls, a tool that
// fails, and an answer.
const script = `
model: scripted-test
turns:
  - thinking: Both sums at once.
    content: Adding.
    tool_calls:
      - {name: add, input: {a: 1, b: 2}}
      - {name: add, input: {a: 3, b: 4}}
      - {name: lookup, input: {key: "missing"}}
    usage: {input_tokens: 100, output_tokens: 20}
  - tool_calls:
      - {name: add, input: {a: 3, b: 7}}
    usage: {input_tokens: 150, output_tokens: 10}
  - answer: The sums are 3 and 7, then 10; the key is missing.
    usage: {input_tokens: 200, output_tokens: 12}
`

type addIn struct {
	A int `json:"a" jsonschema:"the first number"`
	B int `json:"b" jsonschema:"the second number"`
}

type lookupIn struct {
	Key string `json:"key"`
}

func addTool(desc string) agent.Tool {
	return tool.Func("add", desc, func(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil })
}

func lookupTool() agent.Tool {
	return tool.Func("lookup", "Looks a key up.", func(_ context.Context, in lookupIn) (string, error) {
		return "", fmt.Errorf("no key %q", in.Key)
	})
}

const system = "You add numbers."

// record runs the scripted agent live and returns its records.
func record(t *testing.T, opts trace.Options) []trace.Record {
	t.Helper()
	s, err := scripted.Parse([]byte(script), "script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exec := &agent.Executor{Name: "adder", Tracer: trace.New(opts)}
	res := exec.Run(context.Background(), &agent.ReAct{Model: s.NewModel(), System: system,
		Tools: agent.NewToolbox(addTool("Adds two numbers."), lookupTool())}, "Add 1+2 and 3+4, then the results.")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return res.Records
}

func load(t *testing.T) *replay.Recording {
	t.Helper()
	rec, err := replay.Load(record(t, trace.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestReplayScripted(t *testing.T) {
	rec := load(t)
	for _, sequential := range []bool{false, true} {
		rp, err := replay.New(rec, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		loop := rp.ReAct()
		loop.Sequential = sequential
		res := (&agent.Executor{Tracer: trace.New(trace.Options{})}).Run(context.Background(), loop, rec.Input)
		if d := rp.Finish(res); d != nil {
			t.Fatalf("sequential=%v: diverged:\n%v", sequential, d)
		}
		if s := rp.Stats(); s.ModelCalls != 3 || s.ToolCalls != 4 {
			t.Errorf("stats %+v", s)
		}
		// The replayed trace holds the recorded failure as a tool error.
		var failed []string
		for _, r := range res.Records {
			if r.Type == trace.TypeToolError {
				failed = append(failed, r.Name+": "+r.Error)
			}
		}
		if len(failed) != 1 || failed[0] != `lookup: no key "missing"` {
			t.Errorf("tool errors %q", failed)
		}
	}
}

// extraTurn is a loop that, once its ReAct answers, asks the model once more.
type extraTurn struct{ *agent.ReAct }

func (l extraTurn) Next(ctx context.Context, ec *trace.ExecutionContext) agent.Step {
	st := l.ReAct.Next(ctx, ec)
	if st.Action == agent.ActionTerminate && st.Err == nil {
		if _, err := agent.Generate(ctx, l.Model, agent.Request{Messages: append(l.Messages(), agent.Message{Role: agent.RoleUser, Content: "Check your answer."})}); err != nil {
			return agent.Fail(err)
		}
	}
	return st
}

func TestDivergences(t *testing.T) {
	rec := load(t)
	hook := func(p agent.HookPoint, f func(ev *agent.HookEvent)) []agent.Hook {
		return []agent.Hook{agent.HookFunc(func(_ context.Context, _ *trace.ExecutionContext, ev *agent.HookEvent) error {
			if ev.Point == p {
				f(ev)
			}
			return nil
		})}
	}
	cases := []struct {
		name  string
		kind  string
		setup func(rp *replay.Replayer) (agent.AgentLoop, *agent.Executor)
	}{
		{"prompt", replay.DivergedMessages, func(rp *replay.Replayer) (agent.AgentLoop, *agent.Executor) {
			l := rp.ReAct()
			l.System = "You add numbers carefully."
			return l, &agent.Executor{}
		}},
		{"tool_input", replay.DivergedToolInput, func(rp *replay.Replayer) (agent.AgentLoop, *agent.Executor) {
			return rp.ReAct(), &agent.Executor{Hooks: hook(agent.BeforeTool, func(ev *agent.HookEvent) {
				if strings.Contains(string(ev.ToolCall.Input), `"a":3,"b":4`) {
					ev.ToolCall.Input = json.RawMessage(`{"a":3,"b":5}`)
				}
			})}
		}},
		{"tool_definitions", replay.DivergedTools, func(rp *replay.Replayer) (agent.AgentLoop, *agent.Executor) {
			l := rp.ReAct()
			l.Tools = rp.Stub(addTool("Adds two integers."), tool.Func("lookup", "Looks a key up.",
				func(context.Context, struct {
					Key  string `json:"key"`
					Fuzz bool   `json:"fuzzy,omitempty"`
				}) (string, error) {
					return "", nil
				}))
			return l, &agent.Executor{}
		}},
		{"more_calls", replay.DivergedExtraCall, func(rp *replay.Replayer) (agent.AgentLoop, *agent.Executor) {
			return extraTurn{rp.ReAct()}, &agent.Executor{}
		}},
		{"fewer_model_calls", replay.DivergedMissing, func(rp *replay.Replayer) (agent.AgentLoop, *agent.Executor) {
			return rp.ReAct(), &agent.Executor{Limits: agent.Limits{MaxIterations: 2}}
		}},
		{"fewer_tool_calls", replay.DivergedMissing, func(rp *replay.Replayer) (agent.AgentLoop, *agent.Executor) {
			return rp.ReAct(), &agent.Executor{Hooks: hook(agent.AfterModel, func(ev *agent.HookEvent) {
				if len(ev.Response.ToolCalls) == 3 {
					ev.Response.ToolCalls = ev.Response.ToolCalls[:2]
				}
			})}
		}},
		{"more_tool_calls", replay.DivergedExtraCall, func(rp *replay.Replayer) (agent.AgentLoop, *agent.Executor) {
			return rp.ReAct(), &agent.Executor{Hooks: hook(agent.AfterModel, func(ev *agent.HookEvent) {
				if len(ev.Response.ToolCalls) == 1 {
					ev.Response.ToolCalls = append(ev.Response.ToolCalls, agent.ToolCall{ID: "x", Name: "add", Input: json.RawMessage(`{"a":0,"b":0}`)})
				}
			})}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rp, err := replay.New(rec, replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			loop, exec := c.setup(rp)
			exec.Tracer = trace.New(trace.Options{})
			res := exec.Run(context.Background(), loop, rec.Input)
			d := rp.Finish(res)
			if d == nil {
				t.Fatal("no divergence reported")
			}
			if d.Kind != c.kind {
				t.Errorf("kind %q, want %q", d.Kind, c.kind)
			}
			if got, ok := replay.IsDivergence(res.Err); ok && got != d {
				t.Errorf("the run ended with divergence %v, Finish reports %v", got, d)
			}
			golden.Check(t, "diverge_"+c.name+".txt", []byte(d.Error()+"\n"))
		})
	}
}

func TestUnreplayable(t *testing.T) {
	rd, err := redact.New(redact.Config{Keys: []string{"key"}}) // the lookup tool's input
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts trace.Options
		want string
	}{
		{"truncated", trace.Options{MaxValueBytes: 60}, "was truncated when recorded"},
		{"metadata", trace.Options{Capture: trace.CaptureMetadata}, "was not recorded (capture policy metadata)"},
		{"none", trace.Options{Capture: trace.CaptureNone}, "has no request"},
		{"redacted", rd.Options(trace.Options{}), "was redacted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs := record(t, c.opts)
			_, err := replay.Load(recs)
			var ue *replay.UnreplayableError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v; want an *UnreplayableError saying %q", err, c.want)
			}
			// A recording read anyway is refused by New, so no replay
			// reports a false success.
			if _, err := replay.New(replay.Read(recs), replay.Options{}); !errors.As(err, &ue) {
				t.Fatalf("New on a damaged recording: %v", err)
			}
		})
	}
	t.Run("unfinished", func(t *testing.T) {
		recs := record(t, trace.Options{})
		_, err := replay.Load(recs[:len(recs)-1])
		if err == nil || !strings.Contains(err.Error(), "has not ended") {
			t.Fatalf("Load of a run without run.end: %v", err)
		}
	})
}

func TestReplayStoppedByLimit(t *testing.T) {
	s, err := scripted.Parse([]byte(script), "script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exec := &agent.Executor{Tracer: trace.New(trace.Options{}), Limits: agent.Limits{MaxToolCalls: 2}}
	res := exec.Run(context.Background(), &agent.ReAct{Model: s.NewModel(), Sequential: true,
		Tools: agent.NewToolbox(addTool("Adds two numbers."), lookupTool())}, "Add.")
	if res.Termination != trace.TerminationLimitExceeded {
		t.Fatalf("the recorded run ended with %s", res.Termination)
	}
	rec, err := replay.Load(res.Records)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Limits.MaxToolCalls != 2 {
		t.Fatalf("limits read from the guardrail: %+v", rec.Limits)
	}
	rep, err := replay.Run(context.Background(), rec, replay.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil || rep.Termination != string(trace.TerminationLimitExceeded) {
		t.Fatalf("replay of a run stopped by a limit: %s, divergence %v", rep.Termination, rep.Divergence)
	}
}

// Two parallel tool calls that both differ: the earliest recorded one is
// reported, whatever order they ran in.
func TestParallelDivergenceDeterministic(t *testing.T) {
	rec := load(t)
	for range 20 {
		rp, err := replay.New(rec, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		exec := &agent.Executor{Hooks: []agent.Hook{agent.HookFunc(func(_ context.Context, _ *trace.ExecutionContext, ev *agent.HookEvent) error {
			if ev.Point == agent.BeforeTool && ev.ToolCall.Name == "add" {
				ev.ToolCall.Input = json.RawMessage(`{"a":0,"b":0}`)
			}
			return nil
		})}}
		d := rp.Finish(exec.Run(context.Background(), rp.ReAct(), rec.Input))
		if d == nil || d.Call != "tool call 1 (add)" {
			t.Fatalf("divergence %v, want tool call 1 (add)", d)
		}
	}
}

// Options.System stands in for the recorded system prompt in what the
// replay expects, also when it adds or removes one.
func TestReplaySystemOption(t *testing.T) {
	rec := load(t)
	for _, system := range []string{"Another prompt.", ""} {
		rp, err := replay.New(rec, replay.Options{System: &system})
		if err != nil {
			t.Fatal(err)
		}
		if d := rp.Finish((&agent.Executor{}).Run(context.Background(), rp.ReAct(), rec.Input)); d != nil {
			t.Errorf("System %q: %v", system, d)
		}
	}
}

// A tool that traces calls of its own: they belong to the tool call the
// replay answers, and are not expected again.
func TestNestedToolCallsNotReplayed(t *testing.T) {
	s, err := scripted.Parse([]byte("model: m\nturns:\n  - tool_calls: [{name: outer, input: {}}]\n  - answer: done\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	outer := tool.Func("outer", "Calls an inner step.", func(ctx context.Context, _ struct{}) (string, error) {
		return trace.Tool(ctx, "inner", "x", func(context.Context) (string, error) { return "inner result", nil })
	})
	res := (&agent.Executor{Tracer: trace.New(trace.Options{})}).Run(context.Background(),
		&agent.ReAct{Model: s.NewModel(), Tools: agent.NewToolbox(outer)}, "go")
	if res.Err != nil || trace.StatsOf(res.Records).ToolCalls != 2 {
		t.Fatalf("recorded run: %v, %d tool calls", res.Err, trace.StatsOf(res.Records).ToolCalls)
	}
	rec, err := replay.Load(res.Records)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Run(context.Background(), rec, replay.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil || rep.Stats.ToolCalls != 1 {
		t.Fatalf("divergence %v, stats %+v", rep.Divergence, rep.Stats)
	}
}
