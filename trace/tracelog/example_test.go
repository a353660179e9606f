package tracelog_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/trace/tracelog"
)

// Logs written with a run's context land in its trace, and still go to
// the JSON handler.
func Example() {
	jsonh := slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a fixed output for the example
			}
			return a
		},
	})
	logger := slog.New(tracelog.New(jsonh, &tracelog.Options{Name: "billing"}))

	ctx, run := trace.New(trace.Options{}).Start(context.Background(), "invoice", trace.RunOptions{})
	logger.InfoContext(ctx, "charging card", "amount", 42)
	run.End(nil, nil)

	for _, r := range run.Records() {
		if r.Type == trace.TypeLog {
			fmt.Println(r.Type, r.Name, r.Status, r.Output)
		}
	}
	// Output:
	// {"level":"INFO","msg":"charging card","amount":42}
	// log billing INFO {"body":"charging card","attributes":{"amount":42},"severity_number":9}
}
