package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/trace"
)

// TestTimeoutEndsRunBlockedOnStuckSink is the case: OnFull: Block,
// a sink that never returns, and Limits.Timeout. The recording goroutine
// waits for room in the full queue only until the run's deadline; the run
// then ends with termination timeout, and what could not be queued is
// counted as dropped.
func TestTimeoutEndsRunBlockedOnStuckSink(t *testing.T) {
	for _, child := range []bool{false, true} {
		name := "run"
		if child {
			name = "child"
		}
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			stuck := trace.SinkFunc(func(context.Context, []trace.Record) error { <-release; return nil })
			tr := trace.New(trace.Options{Sinks: []trace.Sink{stuck}, Dispatch: trace.DispatchOptions{
				OnFull: trace.Block, QueueSize: 2, BatchSize: 1, OnError: func(error) {},
			}})
			exec := &agent.Executor{Tracer: tr, Limits: agent.Limits{Timeout: 200 * time.Millisecond}}
			loop := &agent.ReAct{Model: model(t, loopScript(1000, "{input_tokens: 1}")), Tools: agent.NewToolbox(addTool()), Sequential: true}
			done := make(chan agent.Result, 1)
			go func() {
				if !child {
					done <- exec.Run(context.Background(), loop, "go")
					return
				}
				// The parent run has no limits; the child's timeout
				// ends the child's waits.
				ctx, ec := tr.Start(context.Background(), "parent", trace.RunOptions{})
				defer ec.End(nil, nil)
				done <- exec.RunChild(ctx, "sub", loop, "go")
			}()
			var res agent.Result
			select {
			case res = <-done:
			case <-time.After(time.Minute): // a hang, not a timing claim
				t.Fatal("the run is still blocked on the full queue after its timeout")
			}
			if res.Termination != trace.TerminationTimeout {
				t.Fatalf("termination %s (%v), want timeout", res.Termination, res.Err)
			}
			if tr.Dispatcher().Stats().Dropped == 0 {
				t.Fatal("no record counted as dropped")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			err := tr.Shutdown(ctx)
			var de *trace.DropError
			if !errors.As(err, &de) || de.Dropped == 0 {
				t.Fatalf("Shutdown = %v, want a DropError with the drops", err)
			}
		})
	}
}
