package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// withoutEnd returns recs without the root run.end: a run whose process
// died before it ended.
func withoutEnd(recs []trace.Record) []trace.Record {
	var out []trace.Record
	for _, r := range recs {
		if r.Type == trace.TypeRunEnd && r.Depth == 0 {
			continue
		}
		out = append(out, r)
	}
	return out
}

// droppedMarker returns a trace.TypeDropped record of recs' trace saying
// count records were lost (count < 0: an Output without a usable count),
// with seq after every record of recs.
func droppedMarker(recs []trace.Record, seq uint64, count int) trace.Record {
	root := recs[0]
	out := trace.JSON(map[string]int{"count": count})
	if count < 0 {
		out = trace.JSON(map[string]string{"count": "many"})
	}
	return trace.Record{V: trace.Version, TraceID: root.TraceID, SpanID: trace.NewSpanID(), ParentID: root.SpanID,
		Seq: seq, Time: recs[len(recs)-1].Time, Type: trace.TypeDropped, Name: "records", Output: out}
}

func summaryOf(t *testing.T, s store.Store, id trace.TraceID) store.Summary {
	t.Helper()
	tr, err := s.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.List(context.Background(), store.ListQuery{Filter: store.Filter{IDs: []trace.TraceID{id}}})
	if err != nil || len(page.Traces) != 1 {
		t.Fatalf("List(%s) = %v, %v", id, page.Traces, err)
	}
	if l := page.Traces[0]; l.Status != tr.Summary.Status || l.Lost != tr.Summary.Lost || l.Incomplete != tr.Summary.Incomplete {
		t.Errorf("List and Trace disagree on %s: %+v vs %+v", id, l, tr.Summary)
	}
	return tr.Summary
}

// testIncomplete checks that lost records (trace.TypeDropped markers) and
// runs that never ended are reported in summaries, filters and aggregates.
func testIncomplete(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)

	// dead: no run.end, last heard of in 2025; live: no run.end, started a
	// minute ago.
	dead := withoutEnd(Gen(Spec{Name: "dead"}))
	live := withoutEnd(Gen(Spec{Name: "live", Start: now.Add(-time.Minute)})) // its records end before now, well within the default stale time
	// lossy: ended, with two markers in two batches (3 and 4 records lost)
	// and one whose count is unreadable (counts 1).
	lossy := Gen(Spec{Name: "lossy", Start: t0})
	n := uint64(len(lossy))
	m1, m2, m3 := droppedMarker(lossy, n+1, 3), droppedMarker(lossy, n+2, 4), droppedMarker(lossy, n+3, -1)
	mustAppend(t, s, append(append([]trace.Record{}, lossy...), m1))
	mustAppend(t, s, []trace.Record{m2, m3})
	mustAppend(t, s, []trace.Record{m1, m2}) // a retried batch is not counted twice
	mustAppend(t, s, dead)
	mustAppend(t, s, live)
	ids := map[string]trace.TraceID{"dead": dead[0].TraceID, "live": live[0].TraceID, "lossy": lossy[0].TraceID}

	type want struct {
		status     string
		lost       int64
		incomplete bool
	}
	for _, tc := range []struct {
		name       string
		staleAfter time.Duration
		want       map[string]want
	}{
		{"default", 0, map[string]want{
			"dead":  {store.StatusIncomplete, 0, true},
			"live":  {store.StatusRunning, 0, false},
			"lossy": {"success", 8, true},
		}},
		{"never stale", -1, map[string]want{
			"dead":  {store.StatusRunning, 0, false},
			"live":  {store.StatusRunning, 0, false},
			"lossy": {"success", 8, true},
		}},
		{"stale after 100 years", 100 * 365 * 24 * time.Hour, map[string]want{
			"dead": {store.StatusRunning, 0, false},
		}},
		{"stale after 1ns", time.Nanosecond, map[string]want{
			"dead": {store.StatusIncomplete, 0, true},
			"live": {store.StatusIncomplete, 0, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := store.Configure(s, store.Options{StaleAfter: tc.staleAfter}); err != nil {
				t.Fatal(err)
			}
			for name, w := range tc.want {
				got := summaryOf(t, s, ids[name])
				if got.Status != w.status || got.Lost != w.lost || got.Incomplete != w.incomplete {
					t.Errorf("%s: status %q lost %d incomplete %v, want %q %d %v", name, got.Status, got.Lost, got.Incomplete, w.status, w.lost, w.incomplete)
				}
			}
		})
	}

	if err := store.Configure(s, store.Options{}); err != nil {
		t.Fatal(err)
	}
	for status, want := range map[string]trace.TraceID{store.StatusIncomplete: ids["dead"], store.StatusRunning: ids["live"]} {
		got := listIDs(t, s, store.ListQuery{Filter: store.Filter{Status: status}})
		if len(got) != 1 || got[0] != want {
			t.Errorf("status:%s lists %v, want [%s]", status, got, want)
		}
	}
	a, err := s.Aggregate(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Traces != 3 || a.Incomplete != 2 || a.Lost != 8 {
		t.Errorf("aggregates: traces %d incomplete %d lost %d, want 3, 2 (dead, lossy), 8", a.Traces, a.Incomplete, a.Lost)
	}
	// A stale trace that ends after all is no longer incomplete.
	end := Gen(Spec{Name: "dead"})
	var runEnd trace.Record
	for _, r := range end {
		if r.Type == trace.TypeRunEnd && r.Depth == 0 {
			runEnd = r
		}
	}
	runEnd.TraceID = ids["dead"]
	runEnd.Seq = uint64(len(dead)) + 1
	mustAppend(t, s, []trace.Record{runEnd})
	if got := summaryOf(t, s, ids["dead"]); got.Status != "success" || got.Incomplete {
		t.Errorf("dead after its run.end: status %q incomplete %v", got.Status, got.Incomplete)
	}
}
