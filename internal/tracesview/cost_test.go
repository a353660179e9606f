package tracesview

import (
	"bytes"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// TestTableUnknownCost: `loupe traces ls` shows a trace with calls of
// unknown cost as "$0.0123 + ?" or "unknown", never as $0 or "-".
func TestTableUnknownCost(t *testing.T) {
	sums := []store.Summary{
		{ID: trace.TraceID{1}, Name: "priced", CostUSD: 0.0123},
		{ID: trace.TraceID{2}, Name: "partly", CostUSD: 0.0123, UnpricedCalls: 1},
		{ID: trace.TraceID{3}, Name: "unpriced", UnpricedCalls: 2},
		{ID: trace.TraceID{4}, Name: "free"},
	}
	var b bytes.Buffer
	if err := Table(&b, sums); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"priced": "$0.0123  ", "partly": "$0.0123 + ?", "unpriced": "unknown", "free": " -  "}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
		name := strings.Fields(line)[1]
		if !strings.Contains(line, want[name]) || strings.Contains(line, "$0.0000") {
			t.Errorf("%s: %q, want cost %q", name, line, want[name])
		}
	}
}
