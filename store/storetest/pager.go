package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// testRecordPager checks store.RecordPager where the store implements it:
// pages in seq order that together are the trace, reads by seq, the
// limits and not-found.
func testRecordPager(t *testing.T, s store.Store) {
	p, ok := s.(store.RecordPager)
	if !ok {
		t.Skip("the store does not implement store.RecordPager")
	}
	ctx := context.Background()
	recs := Gen(Spec{Name: "paged", Start: t0, Model: "m", Tool: "search", Child: true, Steps: 40})
	mustAppend(t, s, recs)
	other := Gen(Spec{Name: "other", Start: t0, Steps: 2})
	mustAppend(t, s, other)
	id := recs[0].TraceID

	for _, limit := range []int{1, 7, len(recs) - 1, len(recs), len(recs) + 1, 0} {
		var got []trace.Record
		var after uint64
		pages := 0
		for {
			page, err := p.Records(ctx, id, store.RecordRange{After: after, Limit: limit})
			if err != nil {
				t.Fatalf("limit %d after %d: %v", limit, after, err)
			}
			if limit > 0 && len(page.Records) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page.Records))
			}
			got = append(got, page.Records...)
			pages++
			if page.Next == 0 {
				break
			}
			if page.Next != page.Records[len(page.Records)-1].Seq {
				t.Fatalf("limit %d: next %d is not the page's last seq %d", limit, page.Next, page.Records[len(page.Records)-1].Seq)
			}
			after = page.Next
			if pages > len(recs)+1 {
				t.Fatalf("limit %d: pages do not end", limit)
			}
		}
		SameRecords(t, got, recs)
	}

	// By seq: the ones that exist, in seq order, whatever order asked.
	seqs := []uint64{recs[5].Seq, recs[2].Seq, 1 << 62, recs[len(recs)-1].Seq}
	page, err := p.Records(ctx, id, store.RecordRange{Seqs: seqs})
	if err != nil {
		t.Fatal(err)
	}
	SameRecords(t, page.Records, []trace.Record{recs[2], recs[5], recs[len(recs)-1]})
	if page.Next != 0 {
		t.Errorf("by seq: next %d", page.Next)
	}

	// By span: every record of that span, in seq order, paged too.
	span := recs[len(recs)/2].SpanID
	var want []trace.Record
	for _, r := range recs {
		if r.SpanID == span {
			want = append(want, r)
		}
	}
	page, err = p.Records(ctx, id, store.RecordRange{Span: span})
	if err != nil {
		t.Fatal(err)
	}
	SameRecords(t, page.Records, want)
	if len(want) > 1 {
		first, err := p.Records(ctx, id, store.RecordRange{Span: span, Limit: 1})
		if err != nil || len(first.Records) != 1 || first.Next != want[0].Seq {
			t.Fatalf("by span, limit 1: %d records, next %d, %v", len(first.Records), first.Next, err)
		}
		rest, err := p.Records(ctx, id, store.RecordRange{Span: span, After: first.Next})
		if err != nil {
			t.Fatal(err)
		}
		SameRecords(t, rest.Records, want[1:])
	}

	// Past the end: an empty last page, not an error.
	page, err = p.Records(ctx, id, store.RecordRange{After: recs[len(recs)-1].Seq})
	if err != nil || len(page.Records) != 0 || page.Next != 0 {
		t.Errorf("past the end: %d records, next %d, %v", len(page.Records), page.Next, err)
	}
	if _, err := p.Records(ctx, trace.NewTraceID(), store.RecordRange{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown trace: %v, want ErrNotFound", err)
	}
	for _, bad := range []store.RecordRange{
		{Limit: -1}, {Limit: store.MaxRecordPage + 1}, {Seqs: make([]uint64, store.MaxRecordSeqs+1)},
	} {
		var qe *store.QueryError
		if _, err := p.Records(ctx, id, bad); !errors.As(err, &qe) {
			t.Errorf("range %+v: %v, want a *store.QueryError", bad, err)
		}
	}
}
