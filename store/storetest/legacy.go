package storetest

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Legacy is how CheckLegacyNumbers writes into a backend what versions of
// Loupe before store.ValidateRecord checked numeric ranges could store.
type Legacy struct {
	// Append stores records as the backend's Append does, without
	// validating them.
	Append func(ctx context.Context, recs []trace.Record) (int, error)
	// Exec runs one SQL statement on the store's database.
	Exec func(ctx context.Context, query string) error
	// SQL are statements in the backend's dialect, run with Exec once the
	// records are stored, that leave summary columns as older versions
	// could (a SQLite integer sum that overflowed into a float, a
	// PostgreSQL cost of NaN or Infinity).
	SQL []string
}

// legacyModel and legacyTool are the model and tool of the records
// CheckLegacyNumbers writes; legacyWord is in their text.
const (
	legacyModel = "big-model"
	legacyTool  = "slow-tool"
	legacyWord  = "aardvark"
)

// CheckLegacyNumbers stores two traces whose records have numbers beyond
// today's ranges (token counts of math.MaxInt64, costs of 1e308, tool
// calls of 250 years, a run spanning the years 1678 to 2261), bypassing
// validation with l, then sets summary columns to values older versions
// could leave (sums that wrapped negative, l.SQL), and checks that Trace,
// List, Search, Export and Aggregate still answer, with every sum within 0
// and math.MaxInt64, every cost finite and not negative, every answer
// encodable as JSON, and that Append still adds to such a trace.
func CheckLegacyNumbers(t *testing.T, s store.Store, l Legacy) {
	ctx := context.Background()
	huge := trace.Usage{Provider: "legacy", InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64,
		CachedTokens: math.MaxInt64, ReasoningTokens: math.MaxInt64, CostUSD: 1e308}
	long := 250 * 365 * 24 * time.Hour
	early := time.Date(1678, 6, 1, 0, 0, 0, 0, time.UTC)
	late := time.Date(2261, 6, 1, 0, 0, 0, 0, time.UTC)

	// a spans 1678 to 2261 and never ends; its sums overflow within a
	// batch and across batches.
	a, aRoot := trace.NewTraceID(), trace.NewSpanID()
	rec := func(id trace.TraceID, root trace.SpanID, seq uint64, at time.Time, typ trace.Type, name string) trace.Record {
		r := trace.Record{V: trace.Version, TraceID: id, SpanID: trace.NewSpanID(), ParentID: root, Seq: seq, Time: at, Type: typ, Name: name}
		if seq == 1 {
			r.SpanID, r.ParentID = root, trace.SpanID{}
		}
		return r
	}
	call := func(id trace.TraceID, root trace.SpanID, seq uint64, at time.Time) trace.Record {
		r := rec(id, root, seq, at, trace.TypeModelCall, legacyModel)
		r.Usage, r.Output = huge, trace.Text("an "+legacyWord+" answers")
		return r
	}
	tool := func(id trace.TraceID, root trace.SpanID, seq uint64, at time.Time) trace.Record {
		r := rec(id, root, seq, at, trace.TypeToolEnd, legacyTool)
		r.Duration = long
		return r
	}
	start := rec(a, aRoot, 1, early, trace.TypeRunStart, "legacy-huge")
	start.Input = trace.Text("where is the " + legacyWord)
	dropped := rec(a, aRoot, 6, late.Add(2*time.Second), trace.TypeDropped, trace.DroppedName)
	dropped.Output = trace.JSON(map[string]int64{"count": math.MaxInt64})
	batches := [][]trace.Record{
		{start, call(a, aRoot, 2, early.Add(time.Second)), call(a, aRoot, 3, early.Add(2*time.Second)),
			tool(a, aRoot, 4, late), tool(a, aRoot, 5, late.Add(time.Second)), dropped},
		{call(a, aRoot, 7, late.Add(24*time.Hour)), tool(a, aRoot, 8, late.Add(25*time.Hour))},
	}
	// b ended after math.MaxInt64 nanoseconds (292 years).
	b, bRoot := trace.NewTraceID(), trace.NewSpanID()
	bStart := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	end := rec(b, bRoot, 4, bStart.Add(time.Minute), trace.TypeRunEnd, "legacy-huge-2")
	end.SpanID, end.ParentID, end.Duration, end.Status = bRoot, trace.SpanID{}, math.MaxInt64, string(trace.TerminationSuccess)
	batches = append(batches, []trace.Record{rec(b, bRoot, 1, bStart, trace.TypeRunStart, "legacy-huge-2"),
		call(b, bRoot, 2, bStart.Add(time.Second)), tool(b, bRoot, 3, bStart.Add(2*time.Second)), end})
	var written []trace.Record
	for _, batch := range batches {
		if n, err := l.Append(ctx, batch); err != nil || n != len(batch) {
			t.Fatalf("append without validation = %d, %v; want %d", n, err, len(batch))
		}
		written = append(written, batch...)
	}
	// Sums an older version let wrap below zero, and the backend's own.
	for _, q := range append([]string{
		"UPDATE traces SET lost = 9223372036854775807",
		"UPDATE traces SET output_tokens = -3 WHERE name = 'legacy-huge-2'",
		"UPDATE trace_models SET cached_tokens = -5 WHERE trace_id IN (SELECT trace_id FROM traces WHERE name = 'legacy-huge-2')",
	}, l.SQL...) {
		if err := l.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Today's records still add to the legacy trace.
	more := []trace.Record{rec(a, aRoot, 9, late.Add(26*time.Hour), trace.TypeModelCall, legacyModel), tool(a, aRoot, 10, late.Add(27*time.Hour)),
		rec(a, aRoot, 11, late.Add(28*time.Hour), trace.TypeDropped, trace.DroppedName)}
	more[0].Usage = trace.Usage{InputTokens: 10, OutputTokens: 5, CachedTokens: 1, CostUSD: 0.5}
	more[1].Duration = time.Second
	more[2].Output = trace.JSON(map[string]int{"count": 5})
	if n, err := s.Append(ctx, more); err != nil || n != len(more) {
		t.Fatalf("Append to a legacy trace = %d, %v; want %d", n, err, len(more))
	}
	written = append(written, more...)

	encodes := func(what string, v any) {
		t.Helper()
		if _, err := json.Marshal(v); err != nil {
			t.Errorf("%s does not encode as JSON: %v", what, err)
		}
	}
	page, err := s.List(ctx, store.ListQuery{Limit: 10})
	if err != nil || len(page.Traces) != 2 {
		t.Fatalf("List = %+v, %v; want the 2 traces", page.Traces, err)
	}
	encodes("List", page)
	for _, sum := range page.Traces {
		checkSummary(t, "List", &sum)
		if sum.Duration != math.MaxInt64 || sum.Lost != math.MaxInt64 {
			t.Errorf("List: %s: duration %d lost %d; want both math.MaxInt64", sum.Name, sum.Duration, sum.Lost)
		}
		if sum.Name == "legacy-huge" && (sum.InputTokens != math.MaxInt64 || sum.OutputTokens != math.MaxInt64) {
			t.Errorf("List: %s: tokens %d in, %d out; want math.MaxInt64", sum.Name, sum.InputTokens, sum.OutputTokens)
		}
	}
	for _, f := range []store.Filter{{MinDuration: time.Hour}, {MaxDuration: time.Hour}, {Model: legacyModel, Name: "legacy-huge"}} {
		want := 2
		switch {
		case f.MaxDuration > 0:
			want = 0
		case f.Name != "":
			want = 1
		}
		if page, err := s.List(ctx, store.ListQuery{Filter: f}); err != nil || len(page.Traces) != want {
			t.Errorf("List(%+v) = %d traces, %v; want %d", f, len(page.Traces), err, want)
		}
	}

	tr, err := s.Trace(ctx, a)
	if err != nil {
		t.Fatalf("Trace: %v", err)
	}
	encodes("Trace", tr)
	var wantA []trace.Record
	for _, r := range written {
		if r.TraceID == a {
			wantA = append(wantA, r)
		}
	}
	SameRecords(t, tr.Records, wantA)
	checkSummary(t, "Trace", &tr.Summary)
	st := &tr.Stats
	if st.InputTokens != math.MaxInt64 || st.OutputTokens != math.MaxInt64 || st.CachedTokens != math.MaxInt64 || st.ReasoningTokens != math.MaxInt64 ||
		!finite(st.CostUSD) || st.ByModel[legacyModel].InputTokens != math.MaxInt64 || !finite(st.ByModel[legacyModel].CostUSD) ||
		st.ByTool[legacyTool].Total != math.MaxInt64 || st.TotalTokens() != math.MaxInt64 {
		t.Errorf("Trace: stats %+v; want sums of math.MaxInt64 and finite costs", st)
	}

	agg, err := s.Aggregate(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatalf("Aggregate: %v", err)
	}
	encodes("Aggregate", agg)
	m, o := agg.ByModel[legacyModel], agg.ByTool[legacyTool]
	if agg.Traces != 2 || agg.Lost != math.MaxInt64 || m.Calls != 5 || m.InputTokens != math.MaxInt64 || m.OutputTokens != math.MaxInt64 ||
		m.CachedTokens < 0 || m.ReasoningTokens != math.MaxInt64 || !finite(m.CostUSD) || o.Calls != 5 || o.Total != math.MaxInt64 {
		t.Errorf("Aggregate = %+v; model %+v tool %+v; want sums of math.MaxInt64 and finite costs", agg, m, o)
	}

	q, err := store.ParseQuery(legacyWord + " min_duration:1h")
	if err != nil {
		t.Fatal(err)
	}
	if hits, err := s.Search(ctx, q); err != nil || len(hits.Hits) != 5 { // a's start, a's 3 calls, b's call
		t.Errorf("Search(%s) = %d hits, %v; want 5", q, len(hits.Hits), err)
	}
	n := 0
	for _, err := range s.Export(ctx, store.Filter{}) {
		if err != nil {
			t.Fatalf("Export: %v", err)
		}
		n++
	}
	if n != len(written) {
		t.Errorf("Export gave %d records, want %d", n, len(written))
	}
}

// checkSummary fails t unless sum's counters are within their ranges.
func checkSummary(t *testing.T, what string, sum *store.Summary) {
	t.Helper()
	if sum.InputTokens < 0 || sum.OutputTokens < 0 || sum.Tokens() < 0 || sum.Lost < 0 || sum.Duration < 0 || !finite(sum.CostUSD) {
		t.Errorf("%s: summary %+v has negative or infinite sums", what, sum)
	}
}

// finite reports whether f is a cost JSON can hold: a number, not below 0.
func finite(f float64) bool { return f >= 0 && !math.IsInf(f, 0) }
