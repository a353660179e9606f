package evalrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/trace"
)

// AgentFunc runs an agent on one case's input inside a recorded run: ctx
// carries the run's *trace.ExecutionContext (trace.FromContext), into which
// the agent records its model and tool calls. It returns the final answer,
// or an error when the agent failed. A failed agent run is still graded: its
// trace records the failure (an assertion such as "no errors" sees it).
type AgentFunc func(ctx context.Context, c CaseRef) (answer string, err error)

// AgentTarget is a Target that runs an agent in process, once per case,
// with its full trace recorded. Each run is a root run named after the case
// id and tagged "case:<id>" plus Tags, so it can be graded again later from
// the store (StoreTarget).
type AgentTarget struct {
	// Label is the target's name in results (the model or agent name).
	Label string
	// Func runs the agent.
	Func AgentFunc
	// Tags are added to every run.
	Tags []string
	// Tracer records the runs; nil means a tracer with default options and
	// no sinks (the runner stores the records itself).
	Tracer *trace.Tracer
}

// Name implements Target.
func (t *AgentTarget) Name() string {
	if t.Label == "" {
		return "agent"
	}
	return t.Label
}

// Run implements Target.
func (t *AgentTarget) Run(ctx context.Context, c CaseRef) (run *Run, err error) {
	tr := t.Tracer
	if tr == nil {
		tr = trace.New(trace.Options{})
	}
	tags := append([]string{CaseTag + c.Case.ID}, t.Tags...)
	ctx, ec := tr.Start(ctx, c.Case.ID, trace.RunOptions{Input: trace.Text(c.Case.Input), Tags: tags})
	defer func() {
		if p := recover(); p != nil {
			ec.SetTermination(trace.TerminationError, fmt.Errorf("agent panicked: %v", p))
			ec.End(nil, nil)
			run, err = nil, fmt.Errorf("case %s: agent panicked: %v", c.Case.ID, p)
		}
	}()
	answer, aerr := t.Func(ctx, c)
	var result trace.Value
	if answer != "" {
		result = trace.Text(answer)
	}
	ec.End(result, aerr)
	run = RunFromRecords(ec.Records(), t.Name())
	if aerr != nil {
		run.Failure = aerr
	}
	return run, nil
}

// ExecutorTarget is a Target that runs an agent.Executor loop per case: the
// run is named after the case id, tagged "case:<id>" plus the Executor's
// tags, and recorded in full. A run that fails (a limit, a model error) is
// still graded: its trace says how it ended.
type ExecutorTarget struct {
	// Label is the target's name in results; "" means "agent".
	Label string
	// Executor is the template for each run: its Name and Tags are set per
	// case on a copy; a nil Tracer means a tracer with default options.
	Executor agent.Executor
	// NewLoop returns a fresh loop for one case (a ReAct holds one
	// conversation, so loops are not shared between runs).
	NewLoop func(c CaseRef) (agent.AgentLoop, error)
}

// Name implements Target.
func (t *ExecutorTarget) Name() string {
	if t.Label == "" {
		return "agent"
	}
	return t.Label
}

// Run implements Target.
func (t *ExecutorTarget) Run(ctx context.Context, c CaseRef) (*Run, error) {
	loop, err := t.NewLoop(c)
	if err != nil {
		return nil, err
	}
	e := t.Executor
	e.Name = c.Case.ID
	e.Tags = append([]string{CaseTag + c.Case.ID}, t.Executor.Tags...)
	if e.Tracer == nil {
		e.Tracer = trace.New(trace.Options{})
	}
	res := e.Run(ctx, loop, c.Case.Input)
	if len(res.Records) == 0 {
		return nil, fmt.Errorf("case %s: the agent run recorded nothing (%v)", c.Case.ID, res.Err)
	}
	run := RunFromRecords(res.Records, t.Name())
	if res.Err != nil {
		run.Failure = res.Err
	}
	return run, nil
}

// ScriptTarget runs a ReAct agent whose model plays a script
// (llm/scripted), offline and deterministic. path is a script file, played
// from its start for every case, or a directory holding <case id>.yaml (or
// .yml, .json) per case with default.yaml as the fallback.
//
// The agent's tools are stand-ins that answer any call with
// {"tool": name, "input": input}: a script decides which tools are called
// with which arguments, which is what trajectory assertions grade. Runs are
// limited to 50 iterations.
func ScriptTarget(path string) (*ExecutorTarget, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--script: %w", err)
	}
	load := func(CaseRef) (*scripted.Script, error) { return nil, nil }
	if fi.IsDir() {
		var mu sync.Mutex
		cache := map[string]*scripted.Script{}
		load = func(c CaseRef) (*scripted.Script, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, name := range []string{c.Case.ID, "default"} {
				for _, ext := range []string{".yaml", ".yml", ".json"} {
					p := filepath.Join(path, name+ext)
					if s, ok := cache[p]; ok {
						return s, nil
					}
					if _, err := os.Stat(p); err != nil {
						continue
					}
					s, err := scripted.Load(p)
					if err != nil {
						return nil, err
					}
					cache[p] = s
					return s, nil
				}
			}
			return nil, fmt.Errorf("case %s: no script %s.yaml or default.yaml in %s", c.Case.ID, c.Case.ID, path)
		}
	} else {
		s, err := scripted.Load(path)
		if err != nil {
			return nil, err
		}
		load = func(CaseRef) (*scripted.Script, error) { return s, nil }
	}
	return &ExecutorTarget{
		Label:    "scripted",
		Executor: agent.Executor{Limits: agent.Limits{MaxIterations: 50}},
		NewLoop: func(c CaseRef) (agent.AgentLoop, error) {
			s, err := load(c)
			if err != nil {
				return nil, err
			}
			return &agent.ReAct{Model: s.NewModel(), Tools: echoTools{}}, nil
		},
	}, nil
}

// echoTools answers every tool call with the call itself.
type echoTools struct{}

func (echoTools) Definitions() []agent.ToolDef { return nil }

func (echoTools) Call(_ context.Context, call agent.ToolCall) (json.RawMessage, error) {
	in := call.Input
	if len(in) == 0 || !json.Valid(in) {
		in = json.RawMessage("null")
	}
	return json.Marshal(map[string]any{"tool": call.Name, "input": in})
}

// ModelTarget runs a ReAct agent per case on a model that open returns
// (a fresh one per case, since a scripted model plays its turns once),
// with system as its system prompt and the stand-in tools of
// ScriptTarget: the model decides which tools it calls with which
// arguments, which is what trajectory assertions grade. label names the
// target in results (the model spec). Runs are limited to 50 iterations.
func ModelTarget(label, system string, open func() (agent.Model, error)) *ExecutorTarget {
	return &ExecutorTarget{
		Label:    label,
		Executor: agent.Executor{Limits: agent.Limits{MaxIterations: 50}},
		NewLoop: func(CaseRef) (agent.AgentLoop, error) {
			m, err := open()
			if err != nil {
				return nil, err
			}
			return &agent.ReAct{Model: m, System: system, Tools: echoTools{}}, nil
		},
	}
}
