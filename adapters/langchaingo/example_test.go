package lctrace_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	lctrace "github.com/loupe-dev/loupe/adapters/langchaingo"
	"github.com/loupe-dev/loupe/trace"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"
)

// A langchaingo agent recorded by Loupe: one Handler given to the model,
// the tools, the agent and the executor. The sink here prints each record;
// a real program sends them to a store or a collector (package export).
func Example() {
	print := trace.SinkFunc(func(_ context.Context, recs []trace.Record) error {
		for _, r := range recs {
			line := []string{string(r.Type), r.Name, r.Status}
			if len(r.Input) > 0 {
				line = append(line, "in="+string(r.Input))
			}
			if len(r.Output) > 0 {
				line = append(line, "out="+string(r.Output))
			}
			fmt.Println(strings.Join(slices.DeleteFunc(line, func(s string) bool { return s == "" }), " "))
		}
		return nil
	})
	tracer := trace.New(trace.Options{Sinks: []trace.Sink{print}, Dispatch: trace.DispatchOptions{Inline: true}})

	h := lctrace.New(tracer, lctrace.Options{Name: "calc"})
	model := newScripted(h, // stands in for openai.New(openai.WithCallback(h)), …
		turn{calls: []llms.ToolCall{funcCall("call_1", "calculator", `{"__arg1":"6 * 7"}`)}},
		turn{content: "6 * 7 is 42."},
	)
	calculator := tools.Calculator{CallbacksHandler: h}
	agent := agents.NewOpenAIFunctionsAgent(model, []tools.Tool{calculator}, agents.WithCallbacksHandler(h))
	executor := agents.NewExecutor(agent, agents.WithCallbacksHandler(h))
	answer, err := chains.Run(context.Background(), executor, "What is 6 * 7?")
	fmt.Println(answer, err)
	// Output:
	// run.start calc in="What is 6 * 7?"
	// message user out="What is 6 * 7?"
	// iteration.start
	// model.call llm tool_calls in={"messages":2,"new":[{"role":"system","content":"You are a helpful AI assistant."},{"role":"user","content":"What is 6 * 7?"}]} out={"tool_calls":[{"id":"call_1","name":"calculator","input":{"__arg1":"6 * 7"}}]}
	// tool.start calculator in="6 * 7"
	// tool.end calculator out="42"
	// iteration.end continue
	// iteration.start
	// model.call llm stop in={"messages":4,"new":[{"role":"tool","content":"42","tool_call_id":"call_1"}]} out="6 * 7 is 42."
	// message assistant out="6 * 7 is 42."
	// iteration.end terminate
	// run.end calc success out="6 * 7 is 42."
	// 6 * 7 is 42. <nil>
}
