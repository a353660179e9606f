package agent_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/tool"
	"github.com/loupe-dev/loupe/trace"
)

// An agent that calls a typed Go function as a tool, traced, with limits.
func ExampleExecutor() {
	script, err := scripted.Parse([]byte(`
model: example-model
turns:
  - tool_calls: [{name: upper, input: {text: "hello"}}]
    usage: {input_tokens: 40, output_tokens: 8}
  - answer: It is HELLO.
    usage: {input_tokens: 60, output_tokens: 5}
`), "example.yaml")
	if err != nil {
		panic(err)
	}
	type upperIn struct {
		Text string `json:"text" jsonschema:"the text to upper-case"`
	}
	upper := tool.Func("upper", "Upper-case a text.", func(_ context.Context, in upperIn) (string, error) {
		return strings.ToUpper(in.Text), nil
	})

	exec := &agent.Executor{
		Tracer: trace.New(trace.Options{}),
		Limits: agent.Limits{MaxIterations: 5, MaxToolCalls: 10},
	}
	res := exec.Run(context.Background(), &agent.ReAct{Model: script.NewModel(), Tools: agent.NewToolbox(upper)}, "Shout hello.")

	fmt.Println(res.Answer)
	fmt.Println(res.Termination, res.Stats.Iterations, "iterations,", res.Stats.ToolCalls, "tool call,", res.Stats.TotalTokens(), "tokens")
	for _, r := range res.Records {
		if r.Type == trace.TypeToolEnd {
			fmt.Println(r.Type, r.Name, r.Output)
		}
	}
	// Output:
	// It is HELLO.
	// success 2 iterations, 1 tool call, 113 tokens
	// tool.end upper "HELLO"
}

// A hook can stop a run; the run ends with hook_abort.
func ExampleHookFunc() {
	script, _ := scripted.Parse([]byte("turns:\n  - answer: secret plans\n"), "s.yaml")
	noSecrets := agent.HookFunc(func(_ context.Context, _ *trace.ExecutionContext, ev *agent.HookEvent) error {
		if ev.Point == agent.AfterModel && strings.Contains(ev.Response.Content, "secret") {
			return fmt.Errorf("the answer mentions a secret")
		}
		return nil
	})
	res := (&agent.Executor{Hooks: []agent.Hook{noSecrets}}).Run(context.Background(), &agent.ReAct{Model: script.NewModel()}, "Tell me.")
	fmt.Println(res.Termination)
	fmt.Println(res.Err)
	// Output:
	// hook_abort
	// hook after_model aborted the run: the answer mentions a secret
}
