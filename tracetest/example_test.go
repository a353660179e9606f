package tracetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/tracetest"
)

// printTB stands in for the *testing.T of a real test so that the examples
// can show what a failure reports. In a test, pass t.
type printTB struct{ testing.TB }

func (printTB) Helper()                           {}
func (printTB) Errorf(format string, args ...any) { fmt.Printf(format+"\n", args...) }
func (printTB) Fatalf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// search is a stand-in tool for the examples.
type search struct{}

func (search) Definition() agent.ToolDef { return agent.ToolDef{Name: "search"} }
func (search) Call(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`["go.dev"]`), nil
}

// Run an agent whose model plays a script, then assert its trajectory.
func Example() {
	t := printTB{} // in a test: func TestAgent(t *testing.T) { … }

	script, err := scripted.Parse([]byte(`
turns:
  - tool_calls: [{name: search, input: {q: go, limit: 3}}]
    usage: {input_tokens: 200, output_tokens: 20}
  - answer: Go lives at go.dev.
    usage: {input_tokens: 300, output_tokens: 10}
`), "script.yaml")
	if err != nil {
		panic(err)
	}
	exec := &agent.Executor{Tracer: trace.New(trace.Options{})}
	res := exec.Run(context.Background(), &agent.ReAct{Model: script.NewModel(), Tools: agent.NewToolbox(search{})}, "Where is Go?")

	tracetest.New(t, res.Records).
		CalledExactly("search").
		Args("search", map[string]any{"q": "go"}, tracetest.Partial).
		NoErrors().
		MaxSteps(2).
		MaxTokens(1000).
		OutputContains("go.dev")
	fmt.Println("all assertions passed")
	// Output:
	// all assertions passed
}

// A failing assertion reports what eval reports for a failed case.
func ExampleTrajectory_CalledInOrder() {
	t := printTB{}
	tr := tracetest.Run(t, "agent", "find and summarize", func(ctx context.Context) (string, error) {
		trace.Tool(ctx, "summarize", map[string]any{"text": "…"}, func(context.Context) (string, error) { return "ok", nil })
		trace.Tool(ctx, "search", map[string]any{"q": "go"}, func(context.Context) (string, error) { return "go.dev", nil })
		return "done", nil
	})
	tr.CalledInOrder("search", "summarize")
	// Output:
	// tracetest: CalledInOrder("search", "summarize") failed
	// case CalledInOrder("search", "summarize"): FAIL score 0.500 (threshold 1.00, mode default)
	//   calls: matched 2 of 2 expected, 2 actual; precision 1.00 recall 1.00 F1 1.00 order 0.50
	//   [FAIL] tool-trajectory (in_order) score 0.500 weight 1
	//       ✗ expected search (item 0): no call in order; call at position 1 matches but is out of order
	//       ✓ found summarize at position 0
	//       #   expected        actual
	//       1   search(any)     —                          ✗ not found; nearest call is #2
	//       2   summarize(any)  #1 summarize({text: "…"})  ok
	//           —               #2 search({q: "go"})       extra call
}

// Arguments can be compared in part, exactly, or on chosen paths.
func ExampleTrajectory_Args() {
	t := printTB{}
	tr := tracetest.Run(t, "agent", "weather", func(ctx context.Context) (string, error) {
		trace.Tool(ctx, "weather", map[string]any{"city": "Paris", "units": "metric", "days": 3}, func(context.Context) (string, error) { return "sunny", nil })
		return "sunny", nil
	})
	tr.Args("weather", map[string]any{"city": "Paris"}, tracetest.Partial)                   // passes
	tr.Args("weather", map[string]any{"city": "Paris", "days": 5}, tracetest.Fields("city")) // passes: only city compared
	tr.Args("weather", map[string]any{"city": "Paris"}, tracetest.Exact)                     // fails: other keys
	// Output:
	// tracetest: Args("weather", {"city":"Paris"}, exact) failed
	// case Args("weather", {"city":"Paris"}, exact): FAIL score 0.000 (threshold 1.00, mode default)
	//   [FAIL] tool-args-match score 0.000 weight 1
	//       ✗ no weather call has the expected arguments (exact)
	//       ✗   position 0: days: not expected, got 3
	//       ✗   position 0: units: not expected, got "metric"
}
