package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// testQueryLimits checks that queries beyond the limits (store.MaxQueryTerms
// and the others) and bad page cursors are refused with a
// *store.QueryError, before the database sees them, and that queries at
// the limits are answered.
func testQueryLimits(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustAppend(t, s, Gen(Spec{Start: t0, Tags: []string{"k:0"}}))
	many := func(n int, prefix string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint(prefix, i)
		}
		return out
	}
	ids := make([]trace.TraceID, store.MaxFilterIDs+1)
	for i := range ids {
		ids[i] = trace.NewTraceID()
	}
	isQueryError := func(what string, err error, want string) {
		t.Helper()
		var qe *store.QueryError
		if !errors.As(err, &qe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v (%T), want a *store.QueryError saying %q", what, err, err, want)
		}
	}
	for _, tt := range []struct {
		name string
		f    store.Filter
		want string
	}{
		{"tags", store.Filter{Tags: many(store.MaxQueryTerms+1, "t")}, "65 tags are more than the limit of 64"},
		{"thousands of tags", store.Filter{Tags: many(5000, "t")}, "limit of 64"},
		{"excluded tags", store.Filter{WithoutTags: many(store.MaxQueryTerms+1, "t")}, "65 excluded tags are more than the limit of 64"},
		{"ids", store.Filter{IDs: ids}, fmt.Sprintf("%d trace ids are more than the limit of %d", len(ids), store.MaxFilterIDs)},
		{"NUL in a name", store.Filter{Name: "a\x00b"}, "not valid UTF-8 text without NUL bytes"},
		{"invalid UTF-8 in a tag", store.Filter{Tags: []string{"k:\xff"}}, "not valid UTF-8 text without NUL bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.List(ctx, store.ListQuery{Filter: tt.f})
			isQueryError("List", err, tt.want)
			_, err = s.Search(ctx, store.Query{Filter: tt.f})
			isQueryError("Search", err, tt.want)
			for _, err := range s.Export(ctx, tt.f) {
				isQueryError("Export", err, tt.want)
				break
			}
		})
	}
	for _, tt := range []struct {
		name string
		q    store.Query
		want string
	}{
		{"words", store.Query{Words: many(store.MaxQueryTerms, "w"), Phrases: []string{"a b"}}, "65 words and phrases are more than the limit of 64"},
		{"thousands of words", store.Query{Words: many(5000, "w")}, "limit of 64"},
		{"types", store.Query{Types: make([]trace.Type, store.MaxQueryTerms+1)}, "65 record types are more than the limit of 64"},
		{"long text", store.Query{Phrases: []string{strings.Repeat("word ", store.MaxQueryBytes/5+1)}}, "more than the limit of 4096"},
		{"cursor", store.Query{Cursor: "not a cursor"}, "invalid page cursor"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Search(ctx, tt.q)
			isQueryError("Search", err, tt.want)
		})
	}
	for _, c := range []string{"not a cursor", "MTox"} { // "1:1": no trace id
		_, err := s.List(ctx, store.ListQuery{Cursor: c})
		isQueryError("List(cursor "+c+")", err, "invalid page cursor")
	}
	_, err := s.List(ctx, store.ListQuery{Offset: -1})
	isQueryError("List(offset -1)", err, "offset -1 is negative")

	// At the limits: answered.
	tags := append(many(store.MaxQueryTerms-1, "t"), "k:0")
	if page, err := s.List(ctx, store.ListQuery{Filter: store.Filter{Tags: tags[:1], WithoutTags: many(store.MaxQueryTerms, "t")}}); err != nil || len(page.Traces) != 0 {
		t.Errorf("List at the limits = %d traces, %v; want 0 (no trace has tag t0)", len(page.Traces), err)
	}
	if page, err := s.List(ctx, store.ListQuery{Filter: store.Filter{Tags: []string{"k:0"}, WithoutTags: many(store.MaxQueryTerms, "t")}}); err != nil || len(page.Traces) != 1 {
		t.Errorf("List at the limits = %d traces, %v; want 1", len(page.Traces), err)
	}
	q := store.Query{Filter: store.Filter{Tags: tags}, Words: many(store.MaxQueryTerms, "w")}
	if page, err := s.Search(ctx, q); err != nil || len(page.Hits) != 0 {
		t.Errorf("Search at the limits = %d hits, %v; want 0", len(page.Hits), err)
	}
	// A query ParseQuery accepts is within the limits.
	parsed, err := store.ParseQuery(strings.TrimSpace(strings.Repeat("tag:k:0 ", store.MaxQueryTerms)))
	if err != nil {
		t.Fatal(err)
	}
	parsed.Types = []trace.Type{trace.TypeRunStart}
	if page, err := s.Search(ctx, parsed); err != nil || len(page.Hits) != 1 {
		t.Errorf("Search(%d tag: terms) = %d hits, %v; want 1", store.MaxQueryTerms, len(page.Hits), err)
	}
}
