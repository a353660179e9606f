package evalrun

import (
	"context"
	"fmt"

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
			ec.Terminate(trace.TerminationError, fmt.Errorf("agent panicked: %v", p))
			ec.End()
			run, err = nil, fmt.Errorf("case %s: agent panicked: %v", c.Case.ID, p)
		}
	}()
	answer, aerr := t.Func(ctx, c)
	if aerr != nil {
		ec.Terminate(trace.ReasonFor(aerr), aerr)
	}
	if answer != "" {
		ec.SetResult(trace.Text(answer))
	}
	ec.End()
	return RunFromRecords(ec.Records(), t.Name()), nil
}
