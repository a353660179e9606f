package einotrace_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/cloudwego/eino/compose"

	einotrace "github.com/loupe-dev/loupe/adapters/eino"
	"github.com/loupe-dev/loupe/trace"
)

// A chain of two Lambdas, run with the Handler: the chain is a run, each
// Lambda a node in it.
func Example() {
	ctx := context.Background()
	var recs []trace.Record
	tracer := trace.New(trace.Options{Dispatch: trace.DispatchOptions{Inline: true},
		Sinks: []trace.Sink{trace.SinkFunc(func(_ context.Context, rs []trace.Record) error {
			recs = append(recs, rs...)
			return nil
		})}})

	handler, err := einotrace.New(tracer)
	if err != nil {
		panic(err)
	}
	chain := compose.NewChain[string, string]()
	chain.AppendLambda(compose.InvokableLambda(func(_ context.Context, s string) (string, error) {
		return strings.TrimSpace(s), nil
	}), compose.WithNodeName("trim"))
	chain.AppendLambda(compose.InvokableLambda(func(_ context.Context, s string) (string, error) {
		return strings.ToUpper(s), nil
	}), compose.WithNodeName("upper"))
	r, err := chain.Compile(ctx, compose.WithGraphName("shout"))
	if err != nil {
		panic(err)
	}
	out, err := r.Invoke(ctx, "  hello ", compose.WithCallbacks(handler))
	if err != nil {
		panic(err)
	}
	if err := handler.Wait(ctx); err != nil {
		panic(err)
	}
	fmt.Println(out)
	for _, rec := range recs {
		fmt.Println(rec.Type, rec.Name, rec.Output)
	}
	// Output:
	// HELLO
	// run.start shout null
	// node.start trim null
	// node.end trim "hello"
	// node.start upper null
	// node.end upper "HELLO"
	// run.end shout "HELLO"
}
