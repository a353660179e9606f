// Package storetest is the conformance suite every store.Store backend
// passes (Run), and the generator of realistic traces it and the
// benchmarks use (Gen).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// Spec describes one generated trace. The zero Spec is a short successful
// run of "agent".
type Spec struct {
	Name     string
	Start    time.Time     // the run's start; zero means 2025-01-01T00:00:00Z
	Step     time.Duration // clock advance per record; zero means 1ms
	Tags     []string
	Model    string // default "gpt-4o"
	Tool     string // default "search"
	ToolOut  string // the tool's output text
	ToolErr  string // non-empty: the tool fails with this error
	Steps    int    // loop iterations; default 2
	Child    bool   // spawn a nested run
	Reason   trace.TerminationReason
	InputTok int64  // per model call; default 100
	Session  string // the run's session (trace.RunOptions.Session)
	User     string // the run's user
}

// Gen records the run s describes with a real tracer and returns its
// records in seq order. It is deterministic except for ids.
func Gen(s Spec) []trace.Record {
	if s.Name == "" {
		s.Name = "agent"
	}
	if s.Start.IsZero() {
		s.Start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if s.Step == 0 {
		s.Step = time.Millisecond
	}
	if s.Model == "" {
		s.Model = "gpt-4o"
	}
	if s.Tool == "" {
		s.Tool = "search"
	}
	if s.Steps == 0 {
		s.Steps = 2
	}
	if s.InputTok == 0 {
		s.InputTok = 100
	}
	var mu sync.Mutex
	now := s.Start
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := now
		now = now.Add(s.Step)
		return t
	}
	tr := trace.New(trace.Options{Now: clock, Dispatch: trace.DispatchOptions{Inline: true}})
	ctx, ec := tr.Start(context.Background(), s.Name, trace.RunOptions{Input: trace.Text("question about " + s.Name), Tags: s.Tags,
		Session: s.Session, User: s.User})
	ec.MemorySet(trace.ScopeParam, "top_k", trace.JSON(5))
	ec.MemorySet(trace.ScopeGlobal, "lang", trace.Text("en"))
	for i := 1; i <= s.Steps; i++ {
		ec.StartIteration()
		ec.ModelCall(trace.ModelCall{
			Model: s.Model, Input: trace.JSON([]map[string]string{{"role": "user", "content": "step " + fmt.Sprint(i)}}),
			Output: trace.Text("thinking about the answer"), FinishReason: "stop", Duration: 2 * s.Step,
			Usage: trace.Usage{Provider: "openai", InputTokens: s.InputTok, OutputTokens: 10, CostUSD: 0.001},
		})
		var err error
		if s.ToolErr != "" && i == s.Steps {
			err = errors.New(s.ToolErr)
		}
		out := s.ToolOut
		if out == "" {
			out = "result " + fmt.Sprint(i)
		}
		ec.ToolCall(s.Tool, trace.JSON(map[string]string{"query": "weather in Paris"}), trace.Text(out), 3*s.Step, err)
		ec.MemorySet(trace.ScopeMemory, "notes", trace.Text(fmt.Sprint("note ", i)))
		ec.EndIteration("continue")
	}
	if s.Child {
		_, c := trace.SpawnChild(ctx, "summarizer", nil)
		c.Message("assistant", trace.Text("summary of the run"))
		c.End(nil, nil)
	}
	if s.Reason != "" && s.Reason != trace.TerminationSuccess {
		var err error
		if s.Reason == trace.TerminationError {
			err = errors.New("run failed")
		}
		ec.SetTermination(s.Reason, err)
	}
	ec.End(trace.Text("final answer"), nil)
	return ec.Records()
}
