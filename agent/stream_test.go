package agent_test

import (
	"context"
	"sync"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/trace"
)

// TestStreamOnly: with Executor.StreamOnly the run's records reach the
// sinks, Result.Records is nil, and Result.Stats is complete.
func TestStreamOnly(t *testing.T) {
	var mu sync.Mutex
	var sunk []trace.Record
	tr := trace.New(trace.Options{Sinks: []trace.Sink{trace.SinkFunc(func(_ context.Context, rs []trace.Record) error {
		mu.Lock()
		sunk = append(sunk, rs...)
		mu.Unlock()
		return nil
	})}})
	loop := &agent.ReAct{Model: model(t, addScript), Tools: agent.NewToolbox(addTool())}
	res := (&agent.Executor{Tracer: tr, StreamOnly: true}).Run(context.Background(), loop, "What is 2+3?")
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res.Answer != "5" || res.Err != nil || res.Records != nil {
		t.Fatalf("run = %q, %v, %d records; want 5, nil, no records", res.Answer, res.Err, len(res.Records))
	}
	if res.Stats.Records != 13 || len(sunk) != 13 || res.Stats.ToolCalls != 1 {
		t.Errorf("stats count %d records, the sink got %d; want 13 each", res.Stats.Records, len(sunk))
	}
}
