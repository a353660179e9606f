package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// RecordsJSON is one page of a trace's records as
// GET /api/v1/traces/{id}/records returns it. Summary is set on the first
// page (no after, seq or span), so that a viewer can draw the run's head
// and time axis from one request. Next is the after of the next page, as
// a decimal string (seqs of OTLP traces exceed JavaScript's exact
// integers); absent on the last page.
type RecordsJSON struct {
	Summary *store.Summary `json:"summary,omitempty"`
	Records []trace.Record `json:"records"`
	Next    string         `json:"next,omitempty"`
}

// getRecords is GET /api/v1/traces/{id}/records: a trace's records a
// page at a time (after, limit), some of them by seq (seq=1,2,3) or the
// records of one span (span), with their values or without them
// (values=false: input, output and thinking left out, for drawing a
// tree). Pages are bounded, so it runs in a light slot.
func (s *Server) getRecords(w http.ResponseWriter, r *http.Request) {
	p, ok := s.o.Store.(store.RecordPager)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this store cannot read a trace's records a page at a time; use GET /api/v1/traces/{id}")
		return
	}
	q := r.URL.Query()
	var rr store.RecordRange
	values := true
	var bad string
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			bad = "after=" + clip(v, 40) + ": want a seq (a decimal number)"
		}
		rr.After = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxRecordPage {
			bad = "limit=" + clip(v, 40) + ": want 1 to " + strconv.Itoa(store.MaxRecordPage)
		}
		rr.Limit = n
	}
	if v := q.Get("seq"); v != "" {
		parts := strings.Split(v, ",")
		if len(parts) > store.MaxRecordSeqs {
			bad = "seq: at most " + strconv.Itoa(store.MaxRecordSeqs) + " seqs at a time"
		}
		for _, f := range parts {
			if bad != "" {
				break
			}
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				bad = "seq=" + clip(f, 40) + ": want comma-separated seqs (decimal numbers)"
			}
			rr.Seqs = append(rr.Seqs, n)
		}
	}
	if v := q.Get("span"); v != "" {
		id, err := trace.ParseSpanID(v)
		if err != nil || id.IsZero() {
			bad = "span=" + clip(v, 40) + ": want a span id, 16 hex digits"
		}
		rr.Span = id
	}
	if v := q.Get("values"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad = "values=" + clip(v, 40) + ": want true or false"
		}
		values = b
	}
	if bad != "" {
		writeError(w, http.StatusBadRequest, bad)
		return
	}
	id, ok := s.resolve(w, r)
	if !ok {
		return
	}
	page, err := p.Records(r.Context(), id, rr)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	out := RecordsJSON{Records: page.Records}
	if out.Records == nil {
		out.Records = []trace.Record{}
	}
	if !values {
		for i := range out.Records {
			rec := &out.Records[i]
			rec.Input, rec.Output, rec.Thinking = nil, nil, nil
		}
	}
	if page.Next != 0 {
		out.Next = strconv.FormatUint(page.Next, 10)
	}
	if rr.After == 0 && rr.Seqs == nil && rr.Span.IsZero() {
		lp, err := s.o.Store.List(r.Context(), store.ListQuery{Filter: store.Filter{IDs: []trace.TraceID{id}}, Limit: 1})
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		if len(lp.Traces) == 1 {
			out.Summary = &lp.Traces[0]
		}
	}
	s.writeJSON(w, r, http.StatusOK, out)
}
