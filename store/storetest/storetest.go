package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Run runs the conformance suite against the backend newStore opens. Each
// subtest calls newStore once and expects an empty store; newStore should
// register its own cleanup (t.Cleanup) to close it.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"Roundtrip", testRoundtrip},
		{"Idempotent", testIdempotent},
		{"BadInput", testBadInput},
		{"List", testList},
		{"Search", testSearch},
		{"SearchSpans", testSearchSpans},
		{"SearchTokens", testSearchTokens},
		{"Delete", testDelete},
		{"Prune", testPrune},
		{"Aggregate", testAggregate},
		{"Export", testExport},
		{"ConcurrentWriters", testConcurrent},
		{"ManyTracesOneBatch", testManyTraces},
		{"Sink", testSink},
		{"Incomplete", testIncomplete},
		{"UnknownCost", testUnknownCost},
		{"QueryLimits", testQueryLimits},
		{"Resolve", testResolve},
		{"Paging", testPaging},
		{"AgentRuns", testAgentRuns},
		{"RecordPager", testRecordPager},

		{"Sessions", testSessions},

		{"Datasets", testDatasets},

		{"WindowStats", testWindowStats},
		{"Alerts", testAlerts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func mustAppend(t *testing.T, s store.Store, recs []trace.Record) int {
	t.Helper()
	n, err := s.Append(context.Background(), recs)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return n
}

// SameRecords fails t unless got and want hold the same records, compared
// through their canonical encoding (every decoded field).
func SameRecords(t *testing.T, got, want []trace.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i].AppendJSON(nil), want[i].AppendJSON(nil)
		if !bytes.Equal(g, w) {
			t.Fatalf("record %d differs after roundtrip:\n got %s\nwant %s", i, g, w)
		}
	}
}

func testRoundtrip(t *testing.T, s store.Store) {
	ctx := context.Background()
	recs := Gen(Spec{Name: "main", Start: t0, Tags: []string{"env:ci", "team:a"}, Model: "gpt-4o", Tool: "search", Child: true, Steps: 3, ToolErr: "rate limited"})
	if got := mustAppend(t, s, recs); got != len(recs) {
		t.Fatalf("Append added %d, want %d", got, len(recs))
	}
	tr, err := s.Trace(ctx, recs[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	SameRecords(t, tr.Records, recs)
	want := trace.StatsOf(recs)
	if fmt.Sprint(tr.Stats) != fmt.Sprint(want) {
		t.Errorf("Stats = %+v, want %+v", tr.Stats, want)
	}
	sum := tr.Summary
	last := recs[len(recs)-1]
	if sum.ID != recs[0].TraceID || sum.Name != "main" || !sum.Started.Equal(recs[0].Time) ||
		sum.Status != "success" || sum.Duration != last.Duration || sum.Records != len(recs) ||
		sum.Iterations != want.Iterations || sum.ToolCalls != 3 || sum.ModelCalls != 3 ||
		sum.InputTokens != want.InputTokens || sum.OutputTokens != want.OutputTokens || sum.Errors != want.Errors || sum.Errors == 0 {
		t.Errorf("Summary = %+v; stats %+v; last %+v", sum, want, last)
	}
	if !slices.Equal(sum.Tags, []string{"env:ci", "team:a"}) || !slices.Equal(sum.Models, []string{"gpt-4o"}) || !slices.Equal(sum.Tools, []string{"search"}) {
		t.Errorf("facets: tags %v models %v tools %v", sum.Tags, sum.Models, sum.Tools)
	}
	// The span tree: one root (the run), iterations under it, calls under
	// the iterations, the child run under the root.
	if len(tr.Spans) != 1 || tr.Spans[0].Type != trace.TypeRunStart || tr.Spans[0].Name != "main" {
		t.Fatalf("span roots = %+v", tr.Spans)
	}
	var iters, tools, children int
	for _, c := range tr.Spans[0].Children {
		switch c.Type {
		case trace.TypeIterationStart:
			iters++
			for _, g := range c.Children {
				if g.Type == trace.TypeToolEnd || g.Type == trace.TypeToolError {
					tools++
				}
			}
		case trace.TypeChildSpawn:
			children++
			if len(c.Seqs) < 2 || len(c.Children) == 0 {
				t.Errorf("child span %+v: want its spawn, end and a message under it", c)
			}
		}
	}
	if iters != 3 || tools != 3 || children != 1 {
		t.Errorf("span tree: %d iterations, %d tool calls, %d children; want 3, 3, 1", iters, tools, children)
	}
	// The memory pool.
	m := tr.Memory
	if string(m.Params["top_k"]) != "5" || string(m.Globals["lang"]) != `"en"` {
		t.Errorf("memory params %v globals %v", m.Params, m.Globals)
	}
	h := m.History["notes"]
	if len(h) != 3 || h[0].Step != 1 || h[2].Step != 3 || string(h[2].Value) != `"note 3"` {
		t.Errorf("memory history = %+v", h)
	}
	if _, err := s.Trace(ctx, trace.NewTraceID()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Trace(unknown) error = %v, want ErrNotFound", err)
	}
}

func testIdempotent(t *testing.T, s store.Store) {
	ctx := context.Background()
	recs := Gen(Spec{Start: t0})
	half := len(recs) / 2
	if n := mustAppend(t, s, recs[:half]); n != half {
		t.Fatalf("first half: added %d, want %d", n, half)
	}
	if n := mustAppend(t, s, recs); n != len(recs)-half {
		t.Fatalf("overlapping batch: added %d, want %d", n, len(recs)-half)
	}
	if n := mustAppend(t, s, recs); n != 0 {
		t.Fatalf("same batch again: added %d, want 0", n)
	}
	// Same identity, different content: the first write wins.
	changed := slices.Clone(recs[:1])
	changed[0].Name = "renamed"
	if n := mustAppend(t, s, changed); n != 0 {
		t.Fatalf("changed duplicate: added %d, want 0", n)
	}
	tr, err := s.Trace(ctx, recs[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	SameRecords(t, tr.Records, recs)
	if tr.Summary.Records != len(recs) || tr.Summary.ToolCalls != 2 || tr.Summary.InputTokens != 200 {
		t.Errorf("summary counted duplicates: %+v", tr.Summary)
	}
	if n, err := s.Append(ctx, nil); n != 0 || err != nil {
		t.Errorf("Append(nil) = %d, %v", n, err)
	}
	// A batch of new records holding some of them twice: each counts once.
	fresh := Gen(Spec{Name: "twice", Start: t0})
	twice := append(slices.Clone(fresh), fresh[1], fresh[len(fresh)-1], fresh[1])
	if n := mustAppend(t, s, twice); n != len(fresh) {
		t.Fatalf("batch with duplicates inside: added %d, want %d", n, len(fresh))
	}
	tr, err = s.Trace(ctx, fresh[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	SameRecords(t, tr.Records, fresh)
	if tr.Summary.Records != len(fresh) {
		t.Errorf("summary counted in-batch duplicates: %+v", tr.Summary)
	}
}

// testManyTraces appends one batch spanning more traces than one summary
// statement carries, in shuffled order, and checks every trace's summary.
func testManyTraces(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 150
	var batch []trace.Record
	var traces [][]trace.Record
	for i := range n {
		recs := Gen(Spec{Name: fmt.Sprint("t", i), Start: t0.Add(time.Duration(i) * time.Minute), Steps: 1 + i%3,
			Model: fmt.Sprint("m", i%4), Tool: fmt.Sprint("tool", i%5), Tags: []string{fmt.Sprint("k:", i%2), "all"}})
		traces = append(traces, recs)
		batch = append(batch, recs...)
	}
	// Interleave the traces, as concurrent runs reach a sink.
	for i := range batch {
		j := (i * 7919) % len(batch)
		batch[i], batch[j] = batch[j], batch[i]
	}
	if got := mustAppend(t, s, batch); got != len(batch) {
		t.Fatalf("Append added %d, want %d", got, len(batch))
	}
	for i, recs := range traces {
		tr, err := s.Trace(ctx, recs[0].TraceID)
		if err != nil {
			t.Fatal(err)
		}
		SameRecords(t, tr.Records, recs)
		want := trace.StatsOf(recs)
		if fmt.Sprint(tr.Stats) != fmt.Sprint(want) {
			t.Errorf("trace %d: Stats = %+v, want %+v", i, tr.Stats, want)
		}
		sum := tr.Summary
		if sum.Name != fmt.Sprint("t", i) || sum.Records != len(recs) || sum.ToolCalls != want.ToolCalls || sum.ModelCalls != want.ModelCalls ||
			sum.InputTokens != want.InputTokens || sum.Status != "success" || !sum.Started.Equal(recs[0].Time) {
			t.Errorf("trace %d: summary %+v, stats %+v", i, sum, want)
		}
		if !slices.Equal(sum.Tags, []string{"all", fmt.Sprint("k:", i%2)}) || !slices.Equal(sum.Models, []string{fmt.Sprint("m", i%4)}) ||
			!slices.Equal(sum.Tools, []string{fmt.Sprint("tool", i%5)}) {
			t.Errorf("trace %d: facets: tags %v models %v tools %v", i, sum.Tags, sum.Models, sum.Tools)
		}
	}
	agg, err := s.Aggregate(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if agg.Traces != n || agg.Records != len(batch) || len(agg.ByModel) != 4 || len(agg.ByTool) != 5 {
		t.Errorf("Aggregate = %+v; want %d traces, %d records, 4 models, 5 tools", agg, n, len(batch))
	}
}

func testBadInput(t *testing.T, s store.Store) {
	ctx := context.Background()
	good := Gen(Spec{Start: t0})
	for _, tt := range []struct {
		name string
		mod  func(*trace.Record)
		want string
	}{
		{"zero trace id", func(r *trace.Record) { r.TraceID = trace.TraceID{} }, "trace_id is zero"},
		{"zero span id", func(r *trace.Record) { r.SpanID = trace.SpanID{} }, "span_id is zero"},
		{"zero seq", func(r *trace.Record) { r.Seq = 0 }, "seq is zero"},
		{"bad type", func(r *trace.Record) { r.Type = "tool.exploded" }, "unknown record type"},
		{"zero time", func(r *trace.Record) { r.Time = time.Time{} }, "time is zero"},
		{"time in year 9999", func(r *trace.Record) { r.Time = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) }, "outside the years"},
		{"seq 2^64-1", func(r *trace.Record) { r.Seq = math.MaxUint64 }, "too large"},
		{"version 2", func(r *trace.Record) { r.V = trace.Version + 1 }, "v 2 is out of range"},
		{"input tokens 2^63-1", func(r *trace.Record) { r.Usage.InputTokens = math.MaxInt64 }, "usage.input_tokens 9223372036854775807 is out of range (0 to 1099511627776)"},
		{"negative output tokens", func(r *trace.Record) { r.Usage.OutputTokens = -1 }, "usage.output_tokens -1 is out of range"},
		{"cost NaN", func(r *trace.Record) { r.Usage.CostUSD = math.NaN() }, "usage.cost_usd NaN is out of range"},
		{"cost +Inf", func(r *trace.Record) { r.Usage.CostUSD = math.Inf(1) }, "usage.cost_usd +Inf is out of range"},
		{"unknown cost with a cost", func(r *trace.Record) { r.Usage.CostUSD, r.Usage.CostUnknown = 1, true }, "usage.cost_unknown is true"},
		{"duration of 20 years", func(r *trace.Record) { r.Duration = 2 * store.MaxRecordDuration }, "duration_ns 630720000000000000 is out of range"},
		{"negative depth", func(r *trace.Record) { r.Depth = -1 }, "depth -1 is out of range"},
		{"start before 1678", func(r *trace.Record) {
			r.Time, r.Duration = time.Date(1678, 1, 2, 0, 0, 0, 0, time.UTC), 48*time.Hour
		}, "duration_ns 172800000000000 puts the start"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			batch := slices.Clone(good)
			tt.mod(&batch[3])
			_, err := s.Append(ctx, batch)
			var re *store.RecordError
			if !errors.As(err, &re) || re.Index != 3 || re.TraceID != batch[3].TraceID || re.Seq != batch[3].Seq || re.Field == "" ||
				!strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "record 3") {
				t.Fatalf("Append error = %v, want a RecordError for record 3 saying %q", err, tt.want)
			}
			if _, err := s.Trace(ctx, good[0].TraceID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a rejected batch was partly stored: %v", err)
			}
		})
	}
}

// corpusSpec is trace i of corpus.
func corpusSpec(i int) Spec {
	sp := Spec{
		Name:  []string{"alpha", "beta", "gamma"}[i%3],
		Start: t0.Add(time.Duration(i) * time.Minute),
		Step:  time.Duration(1+i%4) * time.Millisecond, // durations differ
		Tags:  []string{fmt.Sprintf("n:%d", i), []string{"env:ci", "env:prod"}[i%2]},
		Model: []string{"gpt-4o", "claude"}[i%2],
		Tool:  []string{"search", "calc", "fetch"}[i%3],
	}
	if i%5 == 0 {
		sp.ToolErr = "upstream timeout"
	}
	if i%7 == 0 {
		sp.Reason = trace.TerminationMaxIterations
	}
	if i == 4 {
		sp.ToolOut = "the zanzibar archipelago"
	}
	return sp
}

// corpusDur is the run duration of corpus trace i.
func corpusDur(i int) time.Duration {
	recs := Gen(corpusSpec(i))
	return recs[len(recs)-1].Duration
}

// count returns how many of the first n corpus traces satisfy keep.
func count(n int, keep func(i int) bool) int {
	c := 0
	for i := range n {
		if keep(i) {
			c++
		}
	}
	return c
}

// corpus stores n traces, one a minute from t0, with varied attributes,
// and returns their ids in start order.
func corpus(t *testing.T, s store.Store, n int) []trace.TraceID {
	t.Helper()
	var ids []trace.TraceID
	var batch []trace.Record
	for i := range n {
		recs := Gen(corpusSpec(i))
		ids = append(ids, recs[0].TraceID)
		batch = append(batch, recs...)
	}
	mustAppend(t, s, batch)
	return ids
}

func listIDs(t *testing.T, s store.Store, q store.ListQuery) []trace.TraceID {
	t.Helper()
	page, err := s.List(context.Background(), q)
	if err != nil {
		t.Fatalf("List(%+v): %v", q, err)
	}
	var ids []trace.TraceID
	for _, x := range page.Traces {
		ids = append(ids, x.ID)
	}
	return ids
}

// pick returns ids[i] for the i (in reverse, newest first) where keep(i).
func pick(ids []trace.TraceID, keep func(i int) bool) []trace.TraceID {
	var out []trace.TraceID
	for i := len(ids) - 1; i >= 0; i-- {
		if keep(i) {
			out = append(out, ids[i])
		}
	}
	return out
}

func testList(t *testing.T, s store.Store) {
	ctx := context.Background()
	ids := corpus(t, s, 30)
	all := pick(ids, func(int) bool { return true })
	if got := listIDs(t, s, store.ListQuery{Limit: 100}); !slices.Equal(got, all) {
		t.Fatalf("List: not newest first:\n got %v\nwant %v", got, all)
	}
	// Cursor pagination covers everything once, in order.
	var paged []trace.TraceID
	q := store.ListQuery{Limit: 7}
	for range 10 {
		page, err := s.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page.Traces {
			paged = append(paged, x.ID)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	if !slices.Equal(paged, all) {
		t.Fatalf("cursor pages:\n got %v\nwant %v", paged, all)
	}
	if got := listIDs(t, s, store.ListQuery{Limit: 5, Offset: 10}); !slices.Equal(got, all[10:15]) {
		t.Errorf("offset page = %v, want %v", got, all[10:15])
	}
	if _, err := s.List(ctx, store.ListQuery{Cursor: "garbage!"}); err == nil || !strings.Contains(err.Error(), "cursor") {
		t.Errorf("bad cursor error = %v", err)
	}
	page, _ := s.List(ctx, store.ListQuery{Limit: 1})
	if x := page.Traces[0]; x.ModelCalls != 2 || x.ToolCalls != 2 || x.Iterations != 2 || x.Tokens() != 220 || x.CostUSD < 0.0019 || x.Duration <= 0 {
		t.Errorf("summary = %+v", x)
	}
	dur := corpusDur
	for _, tt := range []struct {
		name string
		f    store.Filter
		keep func(i int) bool
	}{
		{"name", store.Filter{Name: "beta"}, func(i int) bool { return i%3 == 1 }},
		{"status", store.Filter{Status: "max_iterations"}, func(i int) bool { return i%7 == 0 }},
		{"status success", store.Filter{Status: "success"}, func(i int) bool { return i%7 != 0 }},
		{"since until", store.Filter{Since: t0.Add(10 * time.Minute), Until: t0.Add(20 * time.Minute)}, func(i int) bool { return i >= 10 && i < 20 }},
		{"tag", store.Filter{Tags: []string{"env:prod"}}, func(i int) bool { return i%2 == 1 }},
		{"two tags", store.Filter{Tags: []string{"env:prod", "n:3"}}, func(i int) bool { return i == 3 }},
		{"without tag", store.Filter{WithoutTags: []string{"env:prod"}}, func(i int) bool { return i%2 == 0 }},
		{"tag and without tag", store.Filter{Tags: []string{"env:prod"}, WithoutTags: []string{"n:3"}}, func(i int) bool { return i%2 == 1 && i != 3 }},
		{"model", store.Filter{Model: "claude"}, func(i int) bool { return i%2 == 1 }},
		{"tool", store.Filter{Tool: "calc"}, func(i int) bool { return i%3 == 1 }},
		{"min duration", store.Filter{MinDuration: dur(2)}, func(i int) bool { return dur(i) >= dur(2) }},
		{"max duration", store.Filter{MaxDuration: dur(1)}, func(i int) bool { return dur(i) <= dur(1) }},
		{"has errors", store.Filter{HasErrors: true}, func(i int) bool { return i%5 == 0 }},
		{"ids", store.Filter{IDs: []trace.TraceID{ids[3], ids[9]}}, func(i int) bool { return i == 3 || i == 9 }},
		{"id prefix", store.Filter{IDPrefix: ids[4].String()[:7]}, func(i int) bool { return strings.HasPrefix(ids[i].String(), ids[4].String()[:7]) }},
		{"id prefix upper case, whole id", store.Filter{IDPrefix: strings.ToUpper(ids[5].String())}, func(i int) bool { return i == 5 }},
		{"id prefix one digit", store.Filter{IDPrefix: ids[6].String()[:1]}, func(i int) bool { return ids[i].String()[0] == ids[6].String()[0] }},
		{"id prefix not hex", store.Filter{IDPrefix: "zz"}, func(int) bool { return false }},
		{"combined", store.Filter{Model: "gpt-4o", Tool: "search", HasErrors: true}, func(i int) bool { return i%2 == 0 && i%3 == 0 && i%5 == 0 }},
		{"no match", store.Filter{Name: "nobody"}, func(int) bool { return false }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := pick(ids, tt.keep)
			if got := listIDs(t, s, store.ListQuery{Filter: tt.f, Limit: 100}); !slices.Equal(got, want) {
				t.Errorf("got %d traces %v\nwant %d %v", len(got), got, len(want), want)
			}
		})
	}
}

func hitKeys(t *testing.T, s store.Store, q store.Query) []string {
	t.Helper()
	page, err := s.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("Search(%s): %v", q, err)
	}
	var out []string
	for _, h := range page.Hits {
		out = append(out, fmt.Sprintf("%s/%d", h.TraceID, h.Seq))
	}
	return out
}

func testSearch(t *testing.T, s store.Store) {
	ctx := context.Background()
	ids := corpus(t, s, 12)
	// Text in a tool output.
	page, err := s.Search(ctx, store.Query{Words: []string{"Zanzibar"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Hits) != 2 { // two tool calls in trace 4
		t.Fatalf("zanzibar: %d hits %+v, want 2", len(page.Hits), page.Hits)
	}
	h := page.Hits[0]
	if h.TraceID != ids[4] || h.Type != trace.TypeToolEnd || h.Name != "calc" || h.Field != "output" ||
		!strings.Contains(h.Snippet, "zanzibar archipelago") || h.TraceName != "beta" || !page.Hits[0].Time.After(page.Hits[1].Time) {
		t.Errorf("hit = %+v (want newest first)", page.Hits)
	}
	for _, tt := range []struct {
		q     string
		want  int // hits
		check func(h store.Hit) bool
	}{
		{`"zanzibar archipelago"`, 2, nil},
		{`"archipelago zanzibar"`, 0, nil},
		{`zanzibar missingword`, 0, nil},
		{`weather paris`, 12 * 2, func(h store.Hit) bool { return h.Field == "input" }},
		{`upstream`, 3, func(h store.Hit) bool { return h.Field == "error" && h.Type == trace.TypeToolError }},
		{`type:tool.error`, 3, func(h store.Hit) bool { return h.Type == trace.TypeToolError }},
		{`type:tool.error type:run.end`, 3 + 12, nil},
		{`tool:calc type:tool.end`, 4*2 - 1, func(h store.Hit) bool { return h.Name == "calc" }}, // trace 10 ended with a tool.error
		{`model:claude type:model.call`, 6 * 2, func(h store.Hit) bool { return h.Name == "claude" }},
		{`tag:env:prod type:run.start`, 6, nil},
		{`status:max_iterations type:run.end`, 2, func(h store.Hit) bool { return h.TraceID == ids[0] || h.TraceID == ids[7] }},
		{`has:errors type:run.start`, 3, nil},
		{`name:gamma type:run.start`, 4, nil},
		{`since:` + t0.Add(5*time.Minute).Format(time.RFC3339) + ` until:` + t0.Add(8*time.Minute).Format(time.RFC3339) + ` type:run.start`, 3, nil},
		{`min_duration:` + corpusDur(2).String() + ` type:run.start`, count(12, func(i int) bool { return corpusDur(i) >= corpusDur(2) }), nil},
		{`max_duration:` + corpusDur(1).String() + ` type:run.start`, count(12, func(i int) bool { return corpusDur(i) <= corpusDur(1) }), nil},
		{`question gamma`, 4, func(h store.Hit) bool { return h.Type == trace.TypeRunStart }}, // name and input of one record
		{`'; DROP TABLE records; -- "x' OR 1=1"`, 0, nil},                                     // injection attempts are just text
		{`!!! ???`, 0, nil}, // no searchable token
	} {
		t.Run(tt.q, func(t *testing.T) {
			q, err := store.ParseQuery(tt.q)
			if err != nil {
				t.Fatal(err)
			}
			q.Limit = 1000
			page, err := s.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Hits) != tt.want {
				t.Errorf("%d hits, want %d: %+v", len(page.Hits), tt.want, page.Hits)
			}
			for _, h := range page.Hits {
				if tt.check != nil && !tt.check(h) {
					t.Errorf("unexpected hit %+v", h)
				}
			}
		})
	}
	// Pagination: all hits of a filter query, a few at a time, once each,
	// in the order of one page of them all: by record types (every row
	// a hit), by a record filter (model:, tool:, which skip rows) and by
	// both with trace filters.
	for _, pq := range []struct {
		q     string
		limit int
		want  int
	}{
		{"type:tool.end type:tool.error", 5, 24},
		{"type:tool.end type:tool.error", 1, 24},
		{"tool:calc", 3, 4 * 2},                 // two calls' ends (or errors) in each of 4 traces
		{"model:claude tag:env:prod", 2, 6 * 2}, // two calls in each of the 6 claude traces, all in prod
		{"has:errors type:run.end type:tool.error", 2, 3 + 3},
	} {
		q, err := store.ParseQuery(pq.q)
		if err != nil {
			t.Fatal(err)
		}
		q.Limit = 1000
		all := hitKeys(t, s, q)
		var paged []string
		q.Limit = pq.limit
		for range 100 {
			page, err := s.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Hits) > pq.limit || page.Next != "" && len(page.Hits) != pq.limit {
				t.Errorf("%s: a page of %d hits, limit %d, next %q", pq.q, len(page.Hits), pq.limit, page.Next)
			}
			for _, h := range page.Hits {
				paged = append(paged, fmt.Sprintf("%s/%d", h.TraceID, h.Seq))
			}
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
		if len(all) != pq.want || !slices.Equal(paged, all) {
			t.Errorf("paged search %s by %d: %d hits vs %d in one page, want %d", pq.q, pq.limit, len(paged), len(all), pq.want)
		}
	}
	// The store is intact after the injection attempts.
	if page, err := s.List(ctx, store.ListQuery{Limit: 100}); err != nil || len(page.Traces) != 12 {
		t.Errorf("after search: %d traces, %v", len(page.Traces), err)
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	ids := corpus(t, s, 6)
	n, err := s.Delete(ctx, ids[4], ids[1], trace.NewTraceID())
	if err != nil || n != 2 {
		t.Fatalf("Delete = %d, %v; want 2", n, err)
	}
	for _, id := range []trace.TraceID{ids[4], ids[1]} {
		if _, err := s.Trace(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted trace: %v", err)
		}
	}
	if got := hitKeys(t, s, store.Query{Words: []string{"zanzibar"}}); len(got) != 0 {
		t.Errorf("text of a deleted trace is still found: %v", got)
	}
	if got := listIDs(t, s, store.ListQuery{}); len(got) != 4 {
		t.Errorf("%d traces left, want 4", len(got))
	}
	if got := listIDs(t, s, store.ListQuery{Filter: store.Filter{Tags: []string{"n:1"}}}); len(got) != 0 {
		t.Errorf("tags of a deleted trace remain: %v", got)
	}
	a, _ := s.Aggregate(ctx, time.Time{}, time.Time{})
	if _, ok := a.ByTool["calc"]; a.Traces != 4 || ok { // traces 1 and 4 were the calc ones
		t.Errorf("aggregates after delete = %+v", a)
	}
	if n, err := s.Delete(ctx); n != 0 || err != nil {
		t.Errorf("Delete() = %d, %v", n, err)
	}
}

func testPrune(t *testing.T, s store.Store) {
	ctx := context.Background()
	ids := corpus(t, s, 10) // started t0 .. t0+9m
	perTrace := len(Gen(Spec{}))
	// Limit removes the oldest first, a batch at a time.
	older := store.PrunePolicy{OlderThan: time.Hour, Now: t0.Add(time.Hour + 3*time.Minute + time.Second), Limit: 3}
	res, err := s.Prune(ctx, older)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Traces, ids[:3]) || res.Records < 3*perTrace {
		t.Fatalf("prune older than, limit 3: removed %v (%d records), want %v", res.Traces, res.Records, ids[:3])
	}
	older.Limit = 0
	res, err = s.Prune(ctx, older)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Traces, ids[3:4]) || res.Records < perTrace {
		t.Fatalf("prune older than: removed %v (%d records), want %v", res.Traces, res.Records, ids[3:4])
	}
	if _, err := s.Prune(ctx, store.PrunePolicy{OlderThan: time.Hour, Limit: -1}); err == nil {
		t.Error("a negative Limit was accepted")
	}
	res, err = s.Prune(ctx, store.PrunePolicy{KeepNewest: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Traces, ids[4:8]) {
		t.Fatalf("prune keep 2: removed %v, want %v", res.Traces, ids[4:8])
	}
	if got := listIDs(t, s, store.ListQuery{}); !slices.Equal(got, []trace.TraceID{ids[9], ids[8]}) {
		t.Errorf("left %v", got)
	}
	if res, err := s.Prune(ctx, store.PrunePolicy{}); err != nil || len(res.Traces) != 0 {
		t.Errorf("zero policy removed %v, %v", res, err)
	}
}

func testAggregate(t *testing.T, s store.Store) {
	ctx := context.Background()
	corpus(t, s, 10)
	a, err := s.Aggregate(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	per := len(Gen(Spec{}))
	if a.Traces != 10 || a.Records < 10*per {
		t.Errorf("traces %d records %d", a.Traces, a.Records)
	}
	if m := a.ByModel["gpt-4o"]; m.Calls != 10 || m.InputTokens != 1000 || m.OutputTokens != 100 || m.CostUSD < 0.0099 {
		t.Errorf("gpt-4o = %+v", m)
	}
	if o := a.ByTool["search"]; o.Calls != 8 || o.Errors != 1 || o.Total <= 0 { // traces 0, 3, 6, 9; trace 0's last call failed
		t.Errorf("search = %+v", o)
	}
	// Errors: i%5==0 (0, 5) or max_iterations (0, 7): traces 0, 5, 7.
	if a.ErrorTraces != 3 || a.ErrorRate != 0.3 {
		t.Errorf("error traces %d rate %v, want 3, 0.3", a.ErrorTraces, a.ErrorRate)
	}
	b, err := s.Aggregate(ctx, t0.Add(2*time.Minute), t0.Add(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if b.Traces != 3 || b.ByModel["claude"].Calls+b.ByModel["gpt-4o"].Calls != 6 || b.ErrorTraces != 0 {
		t.Errorf("range aggregates = %+v", b)
	}
}

func testExport(t *testing.T, s store.Store) {
	ctx := context.Background()
	ids := corpus(t, s, 8)
	var got []trace.Record
	for r, err := range s.Export(ctx, store.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	per := len(Gen(Spec{}))
	if len(got) < 8*per {
		t.Fatalf("exported %d records", len(got))
	}
	// Trace by trace, oldest first, seq order within.
	var order []trace.TraceID
	for i, r := range got {
		if i == 0 || r.TraceID != got[i-1].TraceID {
			order = append(order, r.TraceID)
		} else if r.Seq <= got[i-1].Seq {
			t.Fatalf("record %d out of seq order", i)
		}
	}
	if !slices.Equal(order, ids) {
		t.Fatalf("export trace order %v, want %v", order, ids)
	}
	tr, _ := s.Trace(ctx, ids[2])
	var one []trace.Record
	for r, err := range s.Export(ctx, store.Filter{Name: "gamma", Since: t0.Add(2 * time.Minute), Until: t0.Add(3 * time.Minute)}) {
		if err != nil {
			t.Fatal(err)
		}
		one = append(one, r)
	}
	SameRecords(t, one, tr.Records)
	// Stopping early is fine.
	for range s.Export(ctx, store.Filter{}) {
		break
	}
}

func testConcurrent(t *testing.T, s store.Store) {
	ctx := context.Background()
	const writers, batches = 8, 12
	shared := Gen(Spec{Name: "shared", Start: t0, Steps: 20})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	own := make([][]trace.Record, writers)
	for w := range writers {
		own[w] = Gen(Spec{Name: fmt.Sprint("w", w), Start: t0.Add(time.Duration(w+1) * time.Hour), Steps: batches})
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs := own[w]
			per := (len(recs) + batches - 1) / batches
			for b := range batches {
				batch := slices.Clone(recs[min(b*per, len(recs)):min((b+1)*per, len(recs))])
				// Every writer also sends the same slice of the shared trace.
				sp := (len(shared) + batches - 1) / batches
				batch = append(batch, shared[min(b*sp, len(shared)):min((b+1)*sp, len(shared))]...)
				if _, err := s.Append(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, recs := range append(own, shared) {
		tr, err := s.Trace(ctx, recs[0].TraceID)
		if err != nil {
			t.Fatal(err)
		}
		SameRecords(t, tr.Records, recs)
		if tr.Summary.Records != len(recs) || tr.Summary.ToolCalls != trace.StatsOf(recs).ToolCalls {
			t.Errorf("%s: summary %+v for %d records", tr.Summary.Name, tr.Summary, len(recs))
		}
	}
}

func testSink(t *testing.T, s store.Store) {
	ctx := context.Background()
	tr := trace.New(trace.Options{
		Sinks:    []trace.Sink{store.NewSink(s)},
		Dispatch: trace.DispatchOptions{OnFull: trace.Block, BatchSize: 16, QueueSize: 64, OnError: func(err error) { t.Errorf("sink: %v", err) }},
	})
	_, ec := tr.Start(ctx, "sunk", trace.RunOptions{Tags: []string{"via:sink"}})
	for i := range 50 {
		ec.StartIteration()
		ec.ToolCall("echo", trace.JSON(i), trace.JSON(i), time.Millisecond, nil)
		ec.EndIteration("continue")
	}
	ec.End(nil, nil)
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Trace(ctx, ec.TraceID())
	if err != nil {
		t.Fatal(err)
	}
	SameRecords(t, got.Records, ec.Records())
	if got.Summary.ToolCalls != 50 || got.Summary.Status != "success" {
		t.Errorf("summary %+v", got.Summary)
	}
}

// CheckReadOnly checks a store opened on a schema newer than its backend
// knows: writes fail with a *store.SchemaVersionError saying so, reads work.
func CheckReadOnly(t *testing.T, s store.Store, found, known int) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Append(ctx, Gen(Spec{}))
	var se *store.SchemaVersionError
	if !errors.As(err, &se) || se.Found != found || se.Known != known {
		t.Fatalf("Append on a newer schema: error %v, want a SchemaVersionError %d > %d", err, found, known)
	}
	want := fmt.Sprintf("has schema version %d, this loupe knows up to %d; upgrade loupe", found, known)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if _, err := s.Delete(ctx, trace.NewTraceID()); !errors.As(err, &se) {
		t.Errorf("Delete on a newer schema: %v", err)
	}
	if _, err := s.Prune(ctx, store.PrunePolicy{KeepNewest: 1}); !errors.As(err, &se) {
		t.Errorf("Prune on a newer schema: %v", err)
	}
	if _, err := s.List(ctx, store.ListQuery{}); err != nil {
		t.Errorf("List on a newer schema: %v", err)
	}
}
