package genkittrace_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/firebase/genkit/go/genkit"

	genkittrace "github.com/loupe-dev/loupe/adapters/genkit"
	"github.com/loupe-dev/loupe/trace"
)

// A Genkit flow recorded into a Loupe tracer's sink. The three lines
// after the sink are the ones README.md shows.
func Example() {
	ctx := context.Background()
	var recs []trace.Record
	sink := trace.SinkFunc(func(_ context.Context, rs []trace.Record) error {
		recs = append(recs, rs...)
		return nil
	})

	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}})
	defer genkittrace.Register(tr, genkittrace.Options{}).Unregister()
	g := genkit.Init(ctx)

	shout := genkit.DefineFlow(g, "shout", func(ctx context.Context, s string) (string, error) {
		return strings.ToUpper(s) + "!", nil
	})
	if _, err := shout.Run(ctx, "hello"); err != nil {
		fmt.Println(err)
	}
	if err := tr.Shutdown(ctx); err != nil { // delivers what is queued
		fmt.Println(err)
	}
	for _, r := range recs {
		fmt.Println(r.Type, r.Name, string(r.Input)+string(r.Output))
	}
	// Output:
	// run.start shout "hello"
	// run.end shout "HELLO!"
}
