package store

import (
	"context"

	"github.com/loupe-dev/loupe/trace"
)

// Limits of a RecordRange.
const (
	// DefaultRecordPage is the page size of a RecordRange without a Limit.
	DefaultRecordPage = 5000
	// MaxRecordPage bounds RecordRange.Limit.
	MaxRecordPage = 50_000
	// MaxRecordSeqs bounds RecordRange.Seqs.
	MaxRecordSeqs = 1000
)

// RecordRange selects records of one trace: either the records after a
// seq, a page at a time, or the records of a list of seqs.
type RecordRange struct {
	After uint64   // records whose seq is greater; 0 for the first page
	Limit int      // at most this many; 0 means DefaultRecordPage, at most MaxRecordPage
	Seqs  []uint64 // if set, exactly these records (those that exist), and After is ignored
	// Span, if not zero, keeps only the records of this span (its start
	// and end, a model call, …). The backends find them by reading the
	// trace's records after After, so it costs a scan of the trace: it
	// is for fetching the values of one selected span, not for paging.
	Span trace.SpanID
}

// Validate refuses a range beyond the limits with a *QueryError.
func (r RecordRange) Validate() error {
	switch {
	case r.Limit < 0 || r.Limit > MaxRecordPage:
		return queryErrorf("limit %d is out of range (0 to %d)", r.Limit, MaxRecordPage)
	case len(r.Seqs) > MaxRecordSeqs:
		return queryErrorf("%d seqs asked for; at most %d at a time", len(r.Seqs), MaxRecordSeqs)
	}
	return nil
}

// RecordPage is one page of a trace's records in seq order. Next is the
// After of the next page, 0 when there are no more records.
type RecordPage struct {
	Records []trace.Record
	Next    uint64
}

// A RecordPager is a Store that reads a trace's records a page at a time,
// by its index on (trace id, seq), without reading the rest of the trace:
// what a viewer of a very large trace needs to draw the first rows at
// once and fetch a span's values when it is selected. The SQLite and
// PostgreSQL backends implement it. Records of a trace that is being
// written may appear between pages; a page never holds a record twice.
type RecordPager interface {
	Store
	// Records returns the records of trace id in r, in seq order. It
	// returns an error wrapping ErrNotFound if the store holds no
	// record of id, and a *QueryError for a range beyond the limits.
	Records(ctx context.Context, id trace.TraceID, r RecordRange) (RecordPage, error)
}
