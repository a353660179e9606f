package agent_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/tool"
	"github.com/loupe-dev/loupe/trace"
)

// panicCaseEnv names the case a re-executed test binary runs; see
// TestPanicsAreErrors.
const panicCaseEnv = "LOUPE_AGENT_PANIC_CASE"

// TestPanicsAreErrors runs each case in a subprocess (this test binary,
// re-executed with panicCaseEnv set), so that a panic that escapes the
// runtime fails the case instead of killing the whole test binary.
func TestPanicsAreErrors(t *testing.T) {
	if name := os.Getenv(panicCaseEnv); name != "" {
		f, ok := panicCases()[name]
		if !ok {
			t.Fatalf("no panic case %q", name)
		}
		f(t)
		return
	}
	for name := range panicCases() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestPanicsAreErrors$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), panicCaseEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("case %s failed or crashed (%v):\n%s", name, err, out)
			}
			if !strings.Contains(string(out), "--- PASS: TestPanicsAreErrors") {
				t.Fatalf("case %s did not run:\n%s", name, out)
			}
		})
	}
}

// explode panics: the frame a *trace.PanicError must point at.
func explode(what string) { panic(what) }

// thisFile is the file the panics are raised in.
func thisFile() string {
	_, file, _, _ := runtime.Caller(0)
	return file
}

func panicTool() agent.Tool {
	return tool.Func("explode", "Panic.", func(context.Context, addIn) (float64, error) {
		explode("tool exploded")
		return 0, nil
	})
}

// indexTool panics in the runtime (index out of range), not by calling
// panic.
func indexTool() agent.Tool {
	return tool.Func("index", "Index out of range.", func(_ context.Context, in addIn) (float64, error) {
		var xs []float64
		return xs[int(in.A)], nil
	})
}

// goexitTool calls runtime.Goexit, as t.FailNow does.
func goexitTool() agent.Tool {
	return tool.Func("goexit", "Goexit.", func(context.Context, addIn) (float64, error) {
		runtime.Goexit()
		return 0, nil
	})
}

// checkPanicError checks that err is a *trace.PanicError for value,
// raised by a function of this file.
func checkPanicError(t *testing.T, err error, value string) {
	t.Helper()
	var pe *trace.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want a *trace.PanicError", err, err)
	}
	if !strings.Contains(pe.Error(), value) || !strings.HasPrefix(pe.Where, thisFile()+":") || !strings.Contains(pe.Func, "agent_test.") || len(pe.Stack) == 0 {
		t.Errorf("panic error = %q (func %q, where %q); want the value %q raised in %s", pe.Error(), pe.Func, pe.Where, value, thisFile())
	}
}

// checkEnded checks that the run ended with a run.end record saying why.
func checkEnded(t *testing.T, res agent.Result, want trace.TerminationReason) {
	t.Helper()
	if res.Termination != want {
		t.Errorf("termination = %s (%v), want %s", res.Termination, res.Err, want)
	}
	if len(res.Records) == 0 {
		t.Fatal("no records")
	}
	end := res.Records[len(res.Records)-1]
	if end.Type != trace.TypeRunEnd || end.Status != string(want) {
		t.Errorf("last record = %s %s, want run.end %s", end.Type, end.Status, want)
	}
	// Every span that started ended.
	open := map[trace.SpanID]trace.Type{}
	for _, r := range res.Records {
		switch r.Type {
		case trace.TypeToolStart, trace.TypeHookStart, trace.TypeIterationStart:
			open[r.SpanID] = r.Type
		case trace.TypeToolEnd, trace.TypeToolError, trace.TypeHookEnd, trace.TypeHookError, trace.TypeIterationEnd:
			delete(open, r.SpanID)
		}
	}
	if len(open) > 0 {
		t.Errorf("spans never ended: %v", open)
	}
}

// panicModel panics on its first call.
type panicModel struct{}

func (panicModel) Name() string { return "panicky" }
func (panicModel) Generate(context.Context, agent.Request) (agent.Response, error) {
	explode("model exploded")
	return agent.Response{}, nil
}

// panicLoop panics in Next.
type panicLoop struct{}

func (panicLoop) Next(context.Context, *trace.ExecutionContext) agent.Step {
	explode("loop exploded")
	return agent.Final("")
}

// toolPanicCase runs a turn of calls (the tools add, explode, index and
// goexit), in parallel or not, and checks that each panic became its
// call's error, shown to the model, while the other calls and the run went
// on.
func toolPanicCase(calls string, parallel bool, failed map[string]string) func(t *testing.T) {
	return func(t *testing.T) {
		script := "turns:\n  - tool_calls: " + calls + "\n  - answer: recovered\n"
		loop := &agent.ReAct{Model: model(t, script), Tools: agent.NewToolbox(addTool(), panicTool(), indexTool(), goexitTool()), Sequential: !parallel}
		res := (&agent.Executor{Tracer: newTracer()}).Run(context.Background(), loop, "go")
		if res.Err != nil || res.Answer != "recovered" {
			t.Fatalf("run = %q, %v; want the run to go on after the panics", res.Answer, res.Err)
		}
		checkEnded(t, res, trace.TerminationSuccess)
		errs := map[string]string{}
		for _, r := range find(res.Records, trace.TypeToolError) {
			errs[r.Name] = r.Error
		}
		for name, want := range failed {
			if !strings.Contains(errs[name], want) {
				t.Errorf("tool.error of %s = %q, want it to contain %q", name, errs[name], want)
			}
			if want != "Goexit" && !strings.Contains(errs[name], thisFile()+":") {
				t.Errorf("tool.error of %s = %q does not say where the panic was raised", name, errs[name])
			}
		}
		if len(errs) != len(failed) {
			t.Errorf("tool.error records = %v, want %d", errs, len(failed))
		}
		for _, m := range loop.Messages() {
			if m.Role == agent.RoleTool && m.Name != "add" && (!m.IsError || !strings.Contains(m.Content, failed[m.Name])) {
				t.Errorf("the model saw %s: %q, want the error", m.Name, m.Content)
			}
			if m.Role == agent.RoleTool && m.Name == "add" && m.Content != "5" {
				t.Errorf("add = %q, want 5", m.Content)
			}
		}
		if res.Stats.ByTool["explode"].Errors != strings.Count(calls, "explode") {
			t.Errorf("stats = %+v", res.Stats.ByTool)
		}
	}
}

// hookPanicCase makes a hook panic at point.
func hookPanicCase(point agent.HookPoint) func(t *testing.T) {
	return func(t *testing.T) {
		h := agent.HookFunc(func(_ context.Context, _ *trace.ExecutionContext, ev *agent.HookEvent) error {
			if ev.Point == point {
				explode("hook exploded")
			}
			return nil
		})
		loop := &agent.ReAct{Model: model(t, addScript), Tools: agent.NewToolbox(addTool())}
		res := (&agent.Executor{Tracer: newTracer(), Hooks: []agent.Hook{h}}).Run(context.Background(), loop, "2+3")
		herr := find(res.Records, trace.TypeHookError)
		if len(herr) != 1 || herr[0].Name != string(point) || !strings.Contains(herr[0].Error, "panic: hook exploded") || !strings.Contains(herr[0].Error, thisFile()+":") {
			t.Fatalf("hook.error records = %+v", herr)
		}
		if point == agent.AfterRun {
			// The run is over: like an error, the panic changes nothing.
			if res.Err != nil || res.Answer != "5" {
				t.Errorf("run = %q %v; an after_run hook cannot change the outcome", res.Answer, res.Err)
			}
			checkEnded(t, res, trace.TerminationSuccess)
			return
		}
		var he *agent.HookError
		if !errors.As(res.Err, &he) || he.Point != point {
			t.Fatalf("err = %v, want a *agent.HookError at %s", res.Err, point)
		}
		checkPanicError(t, res.Err, "hook exploded")
		checkEnded(t, res, trace.TerminationHookAbort)
	}
}

func panicCases() map[string]func(t *testing.T) {
	cases := map[string]func(t *testing.T){
		"tool alone": toolPanicCase(`[{name: explode, input: {a: 1, b: 2}}]`, true,
			map[string]string{"explode": "panic: tool exploded"}),
		"tools sequential": toolPanicCase(`[{name: add, input: {a: 2, b: 3}}, {name: explode, input: {a: 1, b: 2}}, {name: index, input: {a: 3, b: 0}}]`, false,
			map[string]string{"explode": "panic: tool exploded", "index": "index out of range [3] with length 0"}),
		"tools parallel": toolPanicCase(`[{name: explode, input: {a: 1, b: 2}}, {name: add, input: {a: 2, b: 3}}, {name: index, input: {a: 3, b: 0}}]`, true,
			map[string]string{"explode": "panic: tool exploded", "index": "index out of range [3] with length 0"}),
		"tool goexit parallel": toolPanicCase(`[{name: add, input: {a: 2, b: 3}}, {name: goexit, input: {a: 1, b: 2}}]`, true,
			map[string]string{"goexit": "Goexit"}),
		"model": func(t *testing.T) {
			res := (&agent.Executor{Tracer: newTracer()}).Run(context.Background(), &agent.ReAct{Model: panicModel{}}, "go")
			checkPanicError(t, res.Err, "model exploded")
			checkEnded(t, res, trace.TerminationError)
			mc := find(res.Records, trace.TypeModelCall)
			if len(mc) != 1 || !strings.Contains(mc[0].Error, "panic: model exploded") || res.Stats.Errors != 1 {
				t.Errorf("model.call = %+v, stats %+v", mc, res.Stats)
			}
		},
		"loop": func(t *testing.T) {
			res := (&agent.Executor{Tracer: newTracer()}).Run(context.Background(), panicLoop{}, "go")
			checkPanicError(t, res.Err, "loop exploded")
			checkEnded(t, res, trace.TerminationError)
		},
		"untraced tool parallel": func(t *testing.T) {
			script := "turns:\n  - tool_calls: [{name: explode, input: {a: 1, b: 2}}, {name: explode, input: {a: 1, b: 2}}]\n  - answer: recovered\n"
			res := (&agent.Executor{}).Run(context.Background(), &agent.ReAct{Model: model(t, script), Tools: agent.NewToolbox(panicTool())}, "go")
			if res.Err != nil || res.Answer != "recovered" {
				t.Fatalf("run = %q %v", res.Answer, res.Err)
			}
		},
	}
	cases["sub-agent loop"] = func(t *testing.T) {
		sub := &agent.SubAgent{ToolName: "helper", NewLoop: func() agent.AgentLoop { return panicLoop{} }}
		script := "turns:\n  - tool_calls: [{name: helper, input: {task: help}}, {name: add, input: {a: 2, b: 3}}]\n  - answer: recovered\n"
		res := (&agent.Executor{Tracer: newTracer()}).Run(context.Background(), &agent.ReAct{Model: model(t, script), Tools: agent.NewToolbox(sub, addTool())}, "go")
		if res.Err != nil || res.Answer != "recovered" {
			t.Fatalf("run = %q %v", res.Answer, res.Err)
		}
		checkEnded(t, res, trace.TerminationSuccess)
		ce := find(res.Records, trace.TypeChildEnd)
		te := find(res.Records, trace.TypeToolError)
		if len(ce) != 1 || ce[0].Status != string(trace.TerminationError) || !strings.Contains(ce[0].Error, "panic: loop exploded") ||
			len(te) != 1 || te[0].Name != "helper" || !strings.Contains(te[0].Error, "panic: loop exploded") {
			t.Errorf("child.end = %+v\ntool.error = %+v", ce, te)
		}
	}
	cases["recorder"] = func(t *testing.T) {
		// A panic from the recorder itself (here the Redact hook, on the
		// max_iterations guardrail record) still ends the run with its
		// run.end. If the recorder comes to recover Redact's panics on
		// its own, the run ends by its limit instead; either way, Run
		// returns.
		tr := trace.New(trace.Options{Redact: func(r *trace.Record, _ trace.Field, v trace.Value) trace.Value {
			if r.Type == trace.TypeGuardrail {
				explode("redact exploded")
			}
			return v
		}})
		res := (&agent.Executor{Tracer: tr, Limits: agent.Limits{MaxIterations: 1}}).Run(context.Background(), &agent.ReAct{Model: model(t, loopScript(3, "{}")), Tools: agent.NewToolbox(addTool())}, "go")
		t.Logf("termination %s: %v", res.Termination, res.Err)
		if res.Termination == trace.TerminationError {
			checkPanicError(t, res.Err, "redact exploded")
		}
		checkEnded(t, res, res.Termination)
		if res.Termination != trace.TerminationError && res.Termination != trace.TerminationMaxIterations {
			t.Errorf("termination = %s (%v)", res.Termination, res.Err)
		}
	}
	for _, p := range []agent.HookPoint{agent.BeforeTool, agent.AfterTool} {
		// Around parallel calls the tool hooks fire in the caller's
		// goroutine, between the tools' goroutines.
		cases["hook "+string(p)+" parallel"] = func(t *testing.T) {
			h := agent.HookFunc(func(_ context.Context, _ *trace.ExecutionContext, ev *agent.HookEvent) error {
				if ev.Point == p && ev.ToolCall.Input[len(ev.ToolCall.Input)-2] == '2' {
					explode("hook exploded")
				}
				return nil
			})
			script := "turns:\n  - tool_calls: [{name: add, input: {a: 1, b: 1}}, {name: add, input: {a: 1, b: 2}}, {name: add, input: {a: 1, b: 3}}]\n  - answer: never\n"
			res := (&agent.Executor{Tracer: newTracer(), Hooks: []agent.Hook{h}}).Run(context.Background(), &agent.ReAct{Model: model(t, script), Tools: agent.NewToolbox(addTool())}, "go")
			checkPanicError(t, res.Err, "hook exploded")
			checkEnded(t, res, trace.TerminationHookAbort)
		}
	}
	for _, p := range []agent.HookPoint{agent.BeforeRun, agent.AfterRun, agent.BeforeIteration, agent.AfterIteration,
		agent.BeforeModel, agent.AfterModel, agent.BeforeTool, agent.AfterTool} {
		cases["hook "+string(p)] = hookPanicCase(p)
	}
	return cases
}
