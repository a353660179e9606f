package readme_test

// Each Example holds one ```go block of README.md, line for line between
// its "README:" comments (TestREADMESnippets checks), with the
// declarations a reader supplies around it. They are compiled, not run:
// they write to the default store and to the network.

import (
	"context"
	"os"
	"testing"

	httpsink "github.com/loupe-dev/loupe/export/http"
	"github.com/loupe-dev/loupe/export/jsonl"
	"github.com/loupe-dev/loupe/store"
	_ "github.com/loupe-dev/loupe/store/backends" // sqlite and postgres
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/tracetest"
)

func Example_tracing() {
	ctx := context.Background()
	question, id := "Where is my order 42?", "42"
	lookupOrder := func(ctx context.Context, id string) (string, error) { return "shipped", nil }

	// README: tracing
	tr := trace.New(trace.Options{Sinks: []trace.Sink{jsonl.NewSink(os.Stdout)}})
	defer tr.Shutdown(context.Background())

	ctx, run := tr.Start(ctx, "support-agent", trace.RunOptions{Input: trace.Text(question)})
	defer run.End(nil, nil) // or run.End(answer, err): the one way to end a run
	run.StartIteration()
	run.ModelCall(trace.ModelCall{Model: "gpt-4o", Usage: trace.Usage{InputTokens: 812, OutputTokens: 40}})
	status, err := trace.Tool(ctx, "lookup_order", id, func(ctx context.Context) (string, error) {
		return lookupOrder(ctx, id) // one line per tool call: input, output, duration, error
	})
	run.EndIteration("terminate")
	// README: end

	_, _ = status, err
}

func Example_store() {
	ctx := context.Background()

	// README: store
	s, err := store.Open(ctx, "") // the default SQLite file
	tr := trace.New(trace.Options{
		Sinks: []trace.Sink{store.NewSink(s)}, // each batch → one committed Append
		// Large batches: SQLite ingest is faster with fewer, bigger transactions (BENCHMARKS.md).
		Dispatch: trace.DispatchOptions{OnFull: trace.Block, BatchSize: store.SinkBatchSize, QueueSize: 2 * store.SinkBatchSize},
	})
	// README: end

	_, _ = tr, err
}

func Example_httpSink() {
	ctx := context.Background()

	// README: http sink
	sink, _ := httpsink.New(httpsink.Options{URL: "http://127.0.0.1:4318"})
	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}})
	defer tr.Shutdown(ctx) // sends what is buffered; reports drops by reason
	// README: end
}

func Example_tracetest() {
	var t *testing.T // in a test function
	var res struct{ Records []trace.Record }

	// README: tracetest
	tracetest.New(t, res.Records).
		CalledInOrder("search", "summarize").
		MinCalls("search", 2).
		Args("search", map[string]any{"q": "go"}, tracetest.Partial).
		NoErrors().
		MaxTokens(5000)
	// README: end
}
