package trace_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// printSink prints each record's type and name, for examples.
var printSink = trace.SinkFunc(func(_ context.Context, recs []trace.Record) error {
	for _, r := range recs {
		fmt.Println(strings.TrimSpace(string(r.Type) + " " + r.Name + " " + r.Status + " " + r.Error))
	}
	return nil
})

func Example() {
	tr := trace.New(trace.Options{
		Sinks:    []trace.Sink{printSink},
		Dispatch: trace.DispatchOptions{Inline: true}, // deterministic, for the example
	})
	defer tr.Shutdown(context.Background())

	ctx, run := tr.Start(context.Background(), "support-agent", trace.RunOptions{Input: trace.Text("Where is my order?")})
	run.StartIteration()
	run.ModelCall(trace.ModelCall{Model: "gpt-4o", Usage: trace.Usage{InputTokens: 812, OutputTokens: 40, CostUSD: 0.0024}, FinishReason: "tool_calls"})
	status, _ := trace.Tool(ctx, "lookup_order", map[string]string{"id": "A-17"}, func(ctx context.Context) (string, error) {
		return "shipped", nil
	})
	run.EndIteration("terminate")
	run.End(trace.Text("Your order has "+status+"."), nil)

	st := run.Stats()
	fmt.Printf("%d tokens, $%.4f, %d tool call\n", st.TotalTokens(), st.CostUSD, st.ToolCalls)
	// Output:
	// run.start support-agent
	// iteration.start
	// model.call gpt-4o tool_calls
	// tool.start lookup_order
	// tool.end lookup_order
	// iteration.end  terminate
	// run.end support-agent success
	// 852 tokens, $0.0024, 1 tool call
}

func ExampleTool() {
	tr := trace.New(trace.Options{})
	ctx, run := tr.Start(context.Background(), "r", trace.RunOptions{})
	_, err := trace.Tool(ctx, "divide", []int{1, 0}, func(context.Context) (int, error) {
		return 0, errors.New("division by zero")
	})
	run.End(nil, nil)
	last := run.Records()[2]
	fmt.Println(err, "|", last.Type, last.Name, last.Error)
	// Output: division by zero | tool.error divide division by zero
}

func ExampleSpawnChild() {
	tr := trace.New(trace.Options{})
	ctx, run := tr.Start(context.Background(), "main", trace.RunOptions{})
	func() {
		_, child := trace.SpawnChild(ctx, "compaction", nil)
		defer child.End(nil, nil)
		child.ModelCall(trace.ModelCall{Model: "small", Usage: trace.Usage{InputTokens: 3000, OutputTokens: 500}})
	}()
	run.End(nil, nil)
	// The child's tokens roll up into the parent's stats.
	fmt.Println(run.Stats().ByModel["small"].InputTokens, run.Stats().Children)
	// Output: 3000 1
}

func ExampleOptions_redact() {
	tr := trace.New(trace.Options{
		Redact: func(r *trace.Record, f trace.Field, v trace.Value) trace.Value {
			if strings.Contains(string(v), "sk-") {
				return trace.Text("[redacted]")
			}
			return v
		},
	})
	_, run := tr.Start(context.Background(), "r", trace.RunOptions{})
	run.ToolCall("login", trace.JSON(map[string]string{"key": "sk-123"}), trace.Text("ok"), time.Millisecond, nil)
	run.End(nil, nil)
	fmt.Println(run.Records()[1].Input)
	// Output: "[redacted]"
}

func ExampleRunOptions_streamOnly() {
	var sent int
	tr := trace.New(trace.Options{
		Sinks: []trace.Sink{trace.SinkFunc(func(_ context.Context, recs []trace.Record) error {
			sent += len(recs)
			return nil
		})},
		Dispatch: trace.DispatchOptions{Inline: true},
	})
	_, run := tr.Start(context.Background(), "long-job", trace.RunOptions{StreamOnly: true})
	for range 1000 {
		run.ToolCall("step", nil, nil, time.Millisecond, nil)
	}
	run.End(nil, nil)
	// The sink got every record; the run kept none, only its stats.
	fmt.Println(sent, len(run.Records()), run.Stats().ToolCalls)
	// Output: 1002 0 1000
}
