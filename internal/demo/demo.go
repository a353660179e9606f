// Package demo builds Loupe's sample agent, which `loupe demo` runs: a
// ReAct loop over a scripted model (embedded, so it runs offline and the
// same way every time) and real tools — a calculator, a file search, a
// clock — with a summariser sub-agent and one tool call that fails and is
// recovered from.
package demo

import (
	"context"
	_ "embed"
	"fmt"
	_ "time/tzdata" // the clock must know IANA zones on any machine

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/trace"
)

//go:embed script.yaml
var mainScript []byte

//go:embed summarizer.yaml
var summarizerScript []byte

// Task is what the demo agent is asked.
const Task = "What is 17% of 2340 plus the square root of 144? How many TODOs are in this project? And what time is it on Olympus Mons?"

// Agent returns the demo agent's loop, searching files under dir, and the
// Executor to run it with tracer (which may be nil).
func Agent(tracer *trace.Tracer, dir string) (*agent.Executor, *agent.ReAct, error) {
	main, err := scripted.Parse(mainScript, "demo/script.yaml")
	if err != nil {
		return nil, nil, err
	}
	sum, err := scripted.Parse(summarizerScript, "demo/summarizer.yaml")
	if err != nil {
		return nil, nil, err
	}
	summarizer := &agent.SubAgent{
		ToolName:    "summarize",
		Description: "Hand a summarising task to a sub-agent and get its summary back.",
		Executor:    &agent.Executor{Limits: agent.Limits{MaxIterations: 3}},
		NewLoop: func() agent.AgentLoop {
			return &agent.ReAct{Model: sum.NewModel(), System: "You summarise tool results in two sentences."}
		},
	}
	tools := agent.NewToolbox(Calculator(), FileSearch(dir), Clock(nil), summarizer)
	exec := &agent.Executor{
		Name:   "demo",
		Tracer: tracer,
		Tags:   []string{"demo"},
		Limits: agent.Limits{MaxIterations: 10, MaxToolCalls: 20, MaxCostUSD: 1},
	}
	loop := &agent.ReAct{
		Model:  main.NewModel(),
		Tools:  tools,
		System: "You are a careful assistant. Use the tools; never guess a number.",
	}
	return exec, loop, nil
}

// Run runs the demo agent on Task, searching files under dir, and returns
// its answer and trace. The error is for a demo that could not be built
// or whose run failed; the Result is complete either way.
func Run(ctx context.Context, tracer *trace.Tracer, dir string) (agent.Result, error) {
	return RunSession(ctx, tracer, dir, "", "")
}

// RunSession is Run with the run recorded as part of session, for user
// (agent.Executor.Session, User); empty strings set neither.
func RunSession(ctx context.Context, tracer *trace.Tracer, dir, session, user string) (agent.Result, error) {
	exec, loop, err := Agent(tracer, dir)
	if err != nil {
		return agent.Result{}, err
	}
	exec.Session, exec.User = session, user
	res := exec.Run(ctx, loop, Task)
	if res.Err != nil {
		return res, fmt.Errorf("demo run ended with %s: %w", res.Termination, res.Err)
	}
	return res, nil
}
