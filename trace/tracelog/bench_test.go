package tracelog_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/trace/tracelog"
)

// BenchmarkHandler compares slog's JSON handler alone with the same
// handler wrapped by tracelog, without a run in the context (the cost of
// the wrapper) and with one (each line also recorded).
func BenchmarkHandler(b *testing.B) {
	json := slog.NewJSONHandler(io.Discard, nil)
	for _, c := range []struct {
		name string
		h    slog.Handler
		run  bool
	}{
		{"json", json, false},
		{"tracelog/no-run", tracelog.New(json, nil), false},
		{"tracelog/run", tracelog.New(json, nil), true},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			if c.run {
				var ec *trace.ExecutionContext
				ctx, ec = trace.New(trace.Options{}).Start(ctx, "bench", trace.RunOptions{StreamOnly: true})
				defer ec.End(nil, nil)
			}
			l := slog.New(c.h).With("svc", "bench")
			b.ReportAllocs()
			for b.Loop() {
				l.InfoContext(ctx, "fetched", "city", "Lyon", "attempt", 2)
			}
		})
	}
}
