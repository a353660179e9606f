package store

import (
	"context"
	"iter"

	"github.com/loupe-dev/loupe/trace"
)

// Summaries yields the summaries of the traces q selects, newest first, as
// List returns them, page after page from q's Cursor (or Offset) on, so
// that a caller walks a whole listing without handling cursors. q.Limit
// is the size of the pages it asks for (0 means DefaultLimit). It stops at
// the first error, which it yields with a zero Summary, and when the
// caller stops.
func Summaries(ctx context.Context, st Store, q ListQuery) iter.Seq2[Summary, error] {
	return func(yield func(Summary, error) bool) {
		for {
			page, err := st.List(ctx, q)
			if err != nil {
				yield(Summary{}, err)
				return
			}
			for _, s := range page.Traces {
				if !yield(s, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			q.Cursor = page.Next
		}
	}
}

// TraceHits is one trace that a search selected (SearchTraces): its
// summary and the first of its records that matched.
type TraceHits struct {
	Summary Summary
	Hits    []Hit // in the order Search found them; none when the search has no text or types
}

// The bounds of SearchTraces.
const (
	// searchTracesHits bounds the hits SearchTraces reads, in pages of
	// MaxLimit: they decide which traces match and in what order.
	searchTracesHits = 20 * MaxLimit
	// summaryBatch is how many ids one List of SearchTraces asks for.
	summaryBatch = 500
)

// SearchTraces yields the traces that q selects, each once, with at most
// hitsPerTrace of its hits (0 or less: none kept).
//
// When q has text or record types, the traces are those of its hits
// (Search), in the order of their first hit (most recent first), among
// the first 200,000 hits (20 pages of MaxLimit); a trace deleted since it
// was hit is left out. Otherwise q selects traces, not records: they are
// those List selects with q's Filter, newest first, without hits.
//
// q's Limit and Cursor are not used: SearchTraces starts at the first
// page and reads the pages it needs. It stops at the first error, which
// it yields with a zero TraceHits, and when the caller stops.
func SearchTraces(ctx context.Context, st Store, q Query, hitsPerTrace int) iter.Seq2[TraceHits, error] {
	return func(yield func(TraceHits, error) bool) {
		if !q.HasText() && len(q.Types) == 0 {
			for s, err := range Summaries(ctx, st, ListQuery{Filter: q.Filter, Limit: MaxLimit}) {
				if !yield(TraceHits{Summary: s}, err) || err != nil {
					return
				}
			}
			return
		}
		// The hits, grouped by trace in the order of their first hit.
		var order []trace.TraceID
		hits := map[trace.TraceID][]Hit{}
		sq := q
		sq.Limit, sq.Cursor = MaxLimit, ""
		for read := 0; read < searchTracesHits; read += MaxLimit {
			page, err := st.Search(ctx, sq)
			if err != nil {
				yield(TraceHits{}, err)
				return
			}
			for _, h := range page.Hits {
				hs, seen := hits[h.TraceID]
				if !seen {
					order = append(order, h.TraceID)
				}
				if len(hs) < hitsPerTrace {
					hs = append(hs, h)
				}
				hits[h.TraceID] = hs
			}
			if page.Next == "" {
				break
			}
			sq.Cursor = page.Next
		}
		for len(order) > 0 {
			ids := order[:min(len(order), summaryBatch)]
			order = order[len(ids):]
			page, err := st.List(ctx, ListQuery{Filter: Filter{IDs: ids}, Limit: len(ids)})
			if err != nil {
				yield(TraceHits{}, err)
				return
			}
			byID := make(map[trace.TraceID]*Summary, len(page.Traces))
			for i := range page.Traces {
				byID[page.Traces[i].ID] = &page.Traces[i]
			}
			for _, id := range ids {
				if s := byID[id]; s != nil {
					if !yield(TraceHits{Summary: *s, Hits: hits[id]}, nil) {
						return
					}
				}
			}
		}
	}
}
