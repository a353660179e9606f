package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// withID returns recs moved to the trace id.
func withID(recs []trace.Record, id trace.TraceID) []trace.Record {
	for i := range recs {
		recs[i].TraceID = id
	}
	return recs
}

func mustID(t *testing.T, s string) trace.TraceID {
	t.Helper()
	id, err := trace.ParseTraceID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// testResolve checks store.Resolve against the backend: full ids, unique,
// ambiguous and unknown prefixes, and malformed ids, each error of the
// kind its doc says.
func testResolve(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := mustID(t, "abcd0000000000000000000000000001")
	b := mustID(t, "abcd0000000000000000000000000002")
	c := mustID(t, "abce0000000000000000000000000003")
	for i, id := range []trace.TraceID{a, b, c} {
		mustAppend(t, s, withID(Gen(Spec{Start: t0.Add(time.Duration(i) * time.Minute)}), id))
	}
	isQueryError := func(in string, err error, want string) {
		t.Helper()
		if !errors.As(err, new(*store.QueryError)) || errors.Is(err, store.ErrNotFound) || err.Error() != want {
			t.Errorf("Resolve(%q): error %v (%T), want a *store.QueryError %q", in, err, err, want)
		}
	}
	for _, tt := range []struct {
		in   string
		want trace.TraceID
	}{
		{"abce", c},
		{"ABCE", c},
		{"  abce0  ", c},
		{"abcd0000000000000000000000000002", b},
		{"ABCD0000000000000000000000000001", a},
		{"abce000000000000000000000000000", c}, // 31 digits
		// A full id is taken as it is, stored or not.
		{"ffff0000000000000000000000000000", mustID(t, "ffff0000000000000000000000000000")},
	} {
		if got, err := store.Resolve(ctx, s, tt.in); err != nil || got != tt.want {
			t.Errorf("Resolve(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	_, err := store.Resolve(ctx, s, "abcd")
	isQueryError("abcd", err, "trace id prefix abcd is ambiguous (abcd0000000000000000000000000002, abcd0000000000000000000000000001, …); give more digits")
	_, err = store.Resolve(ctx, s, "abc")
	isQueryError("abc", err, `trace id "abc": want 4 to 32 hex digits`)
	_, err = store.Resolve(ctx, s, "")
	isQueryError("", err, `trace id "": want 4 to 32 hex digits`)
	_, err = store.Resolve(ctx, s, strings.Repeat("a", 33))
	isQueryError("33 digits", err, fmt.Sprintf("trace id %q: want 4 to 32 hex digits", strings.Repeat("a", 33)))
	_, err = store.Resolve(ctx, s, "abzz")
	isQueryError("abzz", err, `trace id prefix "abzz": "z" is not a hex digit`)
	_, err = store.Resolve(ctx, s, "0123")
	if !errors.Is(err, store.ErrNotFound) || errors.As(err, new(*store.QueryError)) || err.Error() != "no trace id starts with 0123: "+store.ErrNotFound.Error() {
		t.Errorf("Resolve(unknown prefix): error %v, want ErrNotFound", err)
	}
}

// testPaging checks the paging of the query layer: ListPage.Next is set
// only when more traces follow, Summaries walks a whole listing from a
// cursor or an offset, and SearchTraces groups hits by trace.
func testPaging(t *testing.T, s store.Store) {
	ctx := context.Background()
	ids := corpus(t, s, 12)
	all := pick(ids, func(int) bool { return true })
	// A full last page has no Next.
	if page, err := s.List(ctx, store.ListQuery{Limit: 12}); err != nil || len(page.Traces) != 12 || page.Next != "" {
		t.Errorf("List of all 12 in a page of 12: %d traces, next %q, %v", len(page.Traces), page.Next, err)
	}
	if page, err := s.List(ctx, store.ListQuery{Limit: 4, Offset: 8}); err != nil || len(page.Traces) != 4 || page.Next != "" {
		t.Errorf("the last 4 at offset 8: %d traces, next %q, %v", len(page.Traces), page.Next, err)
	}
	if page, err := s.List(ctx, store.ListQuery{Limit: 11}); err != nil || page.Next == "" {
		t.Errorf("List of 11 of 12: next %q, %v", page.Next, err)
	}
	summaries := func(q store.ListQuery) []trace.TraceID {
		t.Helper()
		var got []trace.TraceID
		for sum, err := range store.Summaries(ctx, s, q) {
			if err != nil {
				t.Fatalf("Summaries(%+v): %v", q, err)
			}
			got = append(got, sum.ID)
		}
		return got
	}
	for _, limit := range []int{0, 1, 5, 12, 100} {
		if got := summaries(store.ListQuery{Limit: limit}); !slices.Equal(got, all) {
			t.Errorf("Summaries in pages of %d:\n got %v\nwant %v", limit, got, all)
		}
	}
	if got := summaries(store.ListQuery{Limit: 5, Offset: 3}); !slices.Equal(got, all[3:]) {
		t.Errorf("Summaries from offset 3: %v, want %v", got, all[3:])
	}
	first, err := s.List(ctx, store.ListQuery{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := summaries(store.ListQuery{Limit: 3, Cursor: first.Next}); !slices.Equal(got, all[5:]) {
		t.Errorf("Summaries from a cursor: %v, want %v", got, all[5:])
	}
	if got := summaries(store.ListQuery{Filter: store.Filter{Name: "beta"}, Limit: 2}); !slices.Equal(got, pick(ids, func(i int) bool { return i%3 == 1 })) {
		t.Errorf("Summaries of name beta: %v", got)
	}
	n := 0
	for range store.Summaries(ctx, s, store.ListQuery{Limit: 2}) {
		if n++; n == 3 {
			break // stopping early is allowed
		}
	}
	errs := 0
	for sum, err := range store.Summaries(ctx, s, store.ListQuery{Cursor: "garbage!"}) {
		errs++
		if !errors.As(err, new(*store.QueryError)) || sum.ID != (trace.TraceID{}) {
			t.Errorf("Summaries with a bad cursor: %+v, %v", sum, err)
		}
	}
	if errs != 1 {
		t.Errorf("Summaries with a bad cursor yielded %d errors, want 1", errs)
	}

	// SearchTraces: with text, the traces of the hits in the order of
	// their first hit, each once, with at most hitsPerTrace hits.
	search := func(query string, hitsPerTrace int) []store.TraceHits {
		t.Helper()
		q, err := store.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		var got []store.TraceHits
		for th, err := range store.SearchTraces(ctx, s, q, hitsPerTrace) {
			if err != nil {
				t.Fatalf("SearchTraces(%s): %v", query, err)
			}
			got = append(got, th)
		}
		return got
	}
	got := search("weather paris", 1)
	var order []trace.TraceID
	seen := map[trace.TraceID]bool{}
	page, err := s.Search(ctx, store.Query{Words: []string{"weather", "paris"}, Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range page.Hits {
		if !seen[h.TraceID] {
			seen[h.TraceID] = true
			order = append(order, h.TraceID)
		}
	}
	if len(got) != 12 || len(order) != 12 {
		t.Fatalf("SearchTraces(weather paris): %d traces, Search found %d", len(got), len(order))
	}
	for i, th := range got {
		if th.Summary.ID != order[i] || len(th.Hits) != 1 || th.Hits[0].TraceID != order[i] || th.Summary.Records == 0 {
			t.Errorf("trace %d: %v with %d hits, want %v with 1", i, th.Summary.ID, len(th.Hits), order[i])
		}
	}
	if got := search("weather paris", 5); len(got) != 12 || len(got[0].Hits) != 2 {
		t.Errorf("SearchTraces(weather paris) with 5 hits a trace: %d traces, %d hits in the first; want 12, 2", len(got), len(got[0].Hits))
	}
	if got := search("zanzibar", 0); len(got) != 1 || got[0].Summary.ID != ids[4] || got[0].Hits != nil {
		t.Errorf("SearchTraces(zanzibar) without hits: %+v", got)
	}
	if got := search("type:tool.error", 3); len(got) != 3 || got[0].Hits[0].Type != trace.TypeToolError {
		t.Errorf("SearchTraces(type:tool.error): %d traces", len(got))
	}
	// Without text or types: the traces List selects, newest first.
	got = search("tag:env:prod", 3)
	want := pick(ids, func(i int) bool { return i%2 == 1 })
	if len(got) != len(want) {
		t.Fatalf("SearchTraces(tag:env:prod): %d traces, want %d", len(got), len(want))
	}
	for i, th := range got {
		if th.Summary.ID != want[i] || th.Hits != nil {
			t.Errorf("trace %d: %v with %d hits, want %v without", i, th.Summary.ID, len(th.Hits), want[i])
		}
	}
	for th, err := range store.SearchTraces(ctx, s, store.Query{Words: []string{"x"}, Cursor: "garbage!"}, 1) {
		// The query's cursor is not used.
		if err != nil {
			t.Errorf("SearchTraces with a cursor: %+v, %v", th, err)
		}
	}
	for th, err := range store.SearchTraces(ctx, s, store.Query{Filter: store.Filter{Tags: make([]string, store.MaxQueryTerms+1)}}, 1) {
		if !errors.As(err, new(*store.QueryError)) {
			t.Errorf("SearchTraces beyond the limits: %+v, %v", th, err)
		}
	}
}

// testAgentRuns checks the evaluation rule against the backend: a listing
// of agent runs leaves the traces that hold evaluation results out unless
// asked for.
func testAgentRuns(t *testing.T, s store.Store) {
	ctx := context.Background()
	run := Gen(Spec{Name: "run", Start: t0})
	evaluation := Gen(Spec{Name: "eval", Start: t0.Add(time.Minute), Tags: []string{store.TagEvaluation}})
	mustAppend(t, s, append(run, evaluation...))
	now := t0.Add(time.Hour)
	for _, tt := range []struct {
		name string
		c    store.Criteria
		want []trace.TraceID
	}{
		{"default", store.Criteria{}, []trace.TraceID{run[0].TraceID}},
		{"evaluations", store.Criteria{Evaluations: true}, []trace.TraceID{evaluation[0].TraceID, run[0].TraceID}},
		{"the tag", store.Criteria{Tags: []string{store.TagEvaluation}}, []trace.TraceID{evaluation[0].TraceID}},
		{"since", store.Criteria{Since: "2h"}, []trace.TraceID{run[0].TraceID}},
		{"until", store.Criteria{Until: "1h", Evaluations: true}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := tt.c.AgentRuns(now)
			if err != nil {
				t.Fatal(err)
			}
			if got := listIDs(t, s, store.ListQuery{Filter: f}); !slices.Equal(got, tt.want) {
				t.Errorf("AgentRuns listed %v, want %v", got, tt.want)
			}
			q, err := tt.c.AgentRunsQuery(store.Query{Types: []trace.Type{trace.TypeRunStart}}, now)
			if err != nil {
				t.Fatal(err)
			}
			var got []trace.TraceID
			for th, err := range store.SearchTraces(ctx, s, q, 1) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, th.Summary.ID)
			}
			// In the order of the hits, which is the order records were
			// stored in: compared as sets.
			less := func(a, b trace.TraceID) int { return strings.Compare(a.String(), b.String()) }
			slices.SortFunc(got, less)
			if want := slices.SortedFunc(slices.Values(tt.want), less); !slices.Equal(got, want) {
				t.Errorf("AgentRunsQuery found %v, want %v", got, want)
			}
		})
	}
}
