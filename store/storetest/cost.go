package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// testUnknownCost: a trace with model calls of unknown cost keeps them
// apart from the known cost, in its records, its summary (also when the
// calls arrive in separate batches), listings and the aggregates.
func testUnknownCost(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := t0
	clock := func() time.Time { now = now.Add(time.Millisecond); return now }
	tr := trace.New(trace.Options{Now: clock, Dispatch: trace.DispatchOptions{Inline: true}})
	_, ec := tr.Start(ctx, "unpriced", trace.RunOptions{})
	ec.ModelCall(trace.ModelCall{Model: "gpt-4o", Usage: trace.Usage{InputTokens: 100, CostUSD: 0.25}, Duration: time.Millisecond})
	ec.ModelCall(trace.ModelCall{Model: "mystery", Usage: trace.Usage{InputTokens: 100, CostUnknown: true}, Duration: time.Millisecond})
	ec.ModelCall(trace.ModelCall{Model: "mystery", Usage: trace.Usage{InputTokens: 50, CostUnknown: true}, Duration: time.Millisecond})
	ec.End(nil, nil)
	recs := ec.Records()
	// Two batches: the summary rows are added to, not replaced.
	mustAppend(t, s, recs[:3])
	mustAppend(t, s, recs[3:])
	id := recs[0].TraceID

	tr2, err := s.Trace(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	SameRecords(t, tr2.Records, recs)
	check := func(where string, sum store.Summary) {
		t.Helper()
		if sum.CostUSD != 0.25 || sum.UnpricedCalls != 2 || sum.CostKnown() || sum.ModelCalls != 3 {
			t.Errorf("%s: cost %v, %d unpriced of %d calls; want 0.25, 2 unpriced of 3", where, sum.CostUSD, sum.UnpricedCalls, sum.ModelCalls)
		}
	}
	check("Trace", tr2.Summary)
	if tr2.Stats.UnpricedCalls != 2 {
		t.Errorf("Trace.Stats: %d unpriced, want 2", tr2.Stats.UnpricedCalls)
	}
	page, err := s.List(ctx, store.ListQuery{})
	if err != nil || len(page.Traces) != 1 {
		t.Fatalf("List: %+v, %v", page, err)
	}
	check("List", page.Traces[0])
	a, err := s.Aggregate(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if m := a.ByModel["mystery"]; m.Calls != 2 || m.UnpricedCalls != 2 || m.CostUSD != 0 {
		t.Errorf("aggregate mystery = %+v, want 2 calls, 2 unpriced", m)
	}
	if m := a.ByModel["gpt-4o"]; m.Calls != 1 || m.UnpricedCalls != 0 || m.CostUSD != 0.25 {
		t.Errorf("aggregate gpt-4o = %+v", m)
	}
}
