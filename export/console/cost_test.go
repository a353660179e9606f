package console_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/export/console"
	"github.com/loupe-dev/loupe/internal/tracefix"
	"github.com/loupe-dev/loupe/trace"
)

// TestTreeUnknownCost: a call whose model has no price shows "cost
// unknown", and the trace's header its known cost "+ ?" (or "unknown"),
// never $0.
func TestTreeUnknownCost(t *testing.T) {
	for _, tt := range []struct {
		name   string
		priced bool
		header string
	}{
		{"some priced", true, "$0.0100 + ?"},
		{"none priced", false, "  unknown  "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := trace.New(trace.Options{Now: tracefix.Clock(time.Millisecond)})
			_, ec := tr.Start(context.Background(), "agent", trace.RunOptions{})
			if tt.priced {
				ec.ModelCall(trace.ModelCall{Model: "gpt-4o", Usage: trace.Usage{InputTokens: 10, CostUSD: 0.01}, Duration: time.Millisecond})
			}
			ec.ModelCall(trace.ModelCall{Model: "mystery", Usage: trace.Usage{InputTokens: 10, CostUnknown: true}, Duration: time.Millisecond})
			ec.End(nil, nil)
			var b bytes.Buffer
			if err := console.Tree(&b, ec.Records(), console.Options{}); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			header, _, _ := strings.Cut(out, "\n")
			if !strings.Contains(header, tt.header) || strings.Contains(header, "$0.0000") {
				t.Errorf("header %q, want it to contain %q", header, tt.header)
			}
			if !strings.Contains(out, "mystery") || !strings.Contains(out, "cost unknown") {
				t.Errorf("tree does not say the call's cost is unknown:\n%s", out)
			}
		})
	}
}
