// Package tracefix builds a trace that uses every record type, with a fixed
// clock, for tests and golden files across Loupe's packages.
package tracefix

import (
	"context"
	"errors"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// Clock returns a Now function that starts at 2026-01-02T03:04:05Z and
// advances by step on every call. It is not safe for concurrent use.
func Clock(step time.Duration) func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

// Record runs a small scripted "agent" on tr that records every record type
// once at least, and returns its root context after End.
func Record(tr *trace.Tracer) *trace.ExecutionContext {
	ctx, ec := tr.Start(context.Background(), "main", trace.RunOptions{Input: trace.Text("What is 6*7?"), Tags: []string{"env:test"}})
	ec.StateInit(trace.JSON(map[string]any{"messages": 1}))
	ec.MemorySet(trace.ScopeParam, "top_k", trace.JSON(3))
	ec.MemorySet(trace.ScopeGlobal, "user", trace.Text("ada"))
	ec.ToolDiscovered("calculator", trace.Raw([]byte(`{"type":"object","properties":{"expr":{"type":"string"}}}`)))

	ec.StartIteration()
	h := ec.StartSpan(trace.SpanHook, "before_model", nil)
	h.End(nil, nil)
	m := ec.StartSpan(trace.SpanModel, "gpt-test", trace.JSON([]map[string]string{{"role": "user", "content": "What is 6*7?"}}))
	m.Delta("thinking", trace.Text("multiply"))
	m.EndModel(trace.Text(""), trace.Text("I should multiply."), trace.Usage{Provider: "scripted", InputTokens: 120, OutputTokens: 30, CachedTokens: 20, ReasoningTokens: 10, CostUSD: 0.0015}, "tool_calls", nil)
	_, _ = trace.Tool(ctx, "calculator", map[string]string{"expr": "6*7"}, func(context.Context) (float64, error) { return 42, nil })
	ec.ToolCall("clock", trace.JSON(map[string]string{"zone": "Mars/Olympus"}), nil, 2*time.Millisecond, errors.New(`unknown time zone "Mars/Olympus"`))
	ec.MemorySet(trace.ScopeMemory, "answer", trace.JSON(42))
	ec.StateUpdate("messages", trace.JSON(1), trace.JSON(3))
	ec.EndIteration("continue")

	ec.StartIteration()
	_, child := trace.SpawnChild(ctx, "summarizer", nil)
	child.StartIteration()
	child.ModelCall(trace.ModelCall{Model: "gpt-mini", Usage: trace.Usage{InputTokens: 50, OutputTokens: 10, CostUSD: 0.0001}, Output: trace.Text("6*7 = 42"), FinishReason: "stop", Duration: time.Millisecond})
	child.EndIteration("terminate")
	child.End(trace.Text("6*7 = 42"), nil)
	n := ec.StartSpan(trace.SpanNode, "format", trace.Text("42"))
	n.End(trace.Text("The answer is 42."), nil)
	hk := ec.StartSpan(trace.SpanHook, "after_model", nil)
	hk.End(nil, errors.New("hook failed"))
	ec.Guardrail("max_tool_calls", "warn", "2 of 2 tool calls used", trace.JSON(map[string]int{"limit": 2, "value": 2}))
	ec.Message("assistant", trace.Text("The answer is 42."))
	ec.Error(errors.New("transient: retrying"))
	ec.Custom("cache", trace.JSON(map[string]bool{"hit": true}))
	ec.Log(trace.LogEntry{Name: "agent", SeverityNumber: trace.SeverityWarn, Body: trace.Text("cache is cold"), Attributes: trace.JSON(map[string]int{"entries": 0})})
	ec.EndIteration("terminate")
	ec.End(trace.Text("The answer is 42."), nil)
	return ec
}
