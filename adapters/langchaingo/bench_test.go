package lctrace_test

import (
	"context"
	"testing"

	lctrace "github.com/loupe-dev/loupe/adapters/langchaingo"
	"github.com/loupe-dev/loupe/trace"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"
)

// BenchmarkExecutor runs a two-turn functions agent with one calculator
// call, untraced and recorded by a Handler (into a tracer without sinks),
// to show what recording adds to a langchaingo run.
func BenchmarkExecutor(b *testing.B) {
	for _, bc := range []struct {
		name string
		h    func() callbacks.Handler
	}{
		{"untraced", func() callbacks.Handler { return nil }},
		{"traced", func() callbacks.Handler { return lctrace.New(trace.New(trace.Options{}), lctrace.Options{}) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := bc.h()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				model := newScripted(h,
					turn{calls: []llms.ToolCall{funcCall("c1", "calculator", `{"__arg1":"6 * 7"}`)}, info: map[string]any{"PromptTokens": 100, "CompletionTokens": 10}},
					turn{content: "42", info: map[string]any{"PromptTokens": 120, "CompletionTokens": 2}},
				)
				exec := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(model, []tools.Tool{tools.Calculator{CallbacksHandler: h}}, agents.WithCallbacksHandler(h)), agents.WithCallbacksHandler(h))
				if _, err := chains.Run(ctx, exec, "6 * 7?"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
