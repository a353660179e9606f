package server

import (
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// The JSON API. Filters are the flags of `loupe traces ls` (both build a
// store.Criteria, so both read them alike), search takes the query
// language of `loupe traces search` (store.ParseQuery), and trace ids are
// resolved by store.Resolve: the store's query layer answers which
// traces, the handlers only read parameters and write answers.

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// criteria reads the trace filters of a request's query string.
func criteria(q url.Values) (store.Criteria, error) {
	c := store.Criteria{
		Name: q.Get("name"), Status: q.Get("status"), Since: q.Get("since"), Until: q.Get("until"),
		Model: q.Get("model"), Tool: q.Get("tool"), Tags: q["tag"],
		Session: q.Get("session"), User: q.Get("user"),
	}
	for _, t := range q["type"] {
		c.Types = append(c.Types, trace.Type(t))
	}
	for _, v := range q["score"] {
		sc, err := store.ParseScoreCond(v)
		if err != nil {
			return c, err
		}
		c.Scores = append(c.Scores, sc)
	}
	if v := q.Get("evaluations"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("evaluations=%s: want true or false", clip(v, 40))
		}
		c.Evaluations = b
	}
	if v := q.Get("errors"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("errors=%s: want true or false", clip(v, 40))
		}
		c.Errors = b
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{"min_duration", &c.MinDuration}, {"max_duration", &c.MaxDuration}} {
		if v := q.Get(d.key); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x < 0 {
				return c, fmt.Errorf("%s=%s: want a duration such as 1.5s or 10m", d.key, clip(v, 40))
			}
			*d.dst = x
		}
	}
	return c, nil
}

func pageArgs(q url.Values) (limit int, cursor string, err error) {
	if v := q.Get("limit"); v != "" {
		limit, err = strconv.Atoi(v)
		if err != nil || limit < 1 || limit > store.MaxLimit {
			return 0, "", fmt.Errorf("limit=%s: want 1 to %d", clip(v, 40), store.MaxLimit)
		}
	}
	return limit, q.Get("cursor"), nil
}

// writePage answers with the page of summaries that f, and the request's
// limit and cursor, select.
func (s *Server) writePage(w http.ResponseWriter, r *http.Request, f store.Filter) {
	limit, cursor, err := pageArgs(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, err := s.o.Store.List(r.Context(), store.ListQuery{Filter: f, Limit: limit, Cursor: cursor})
	if err != nil {
		s.queryError(w, r, err)
		return
	}
	if page.Traces == nil {
		page.Traces = []store.Summary{}
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// listTraces is GET /api/v1/traces: summaries, newest first, one page at
// a time (next is the cursor of the following page).
func (s *Server) listTraces(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, err := criteria(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(c.Types) > 0 {
		writeError(w, http.StatusBadRequest, "type= is a search filter; use /api/v1/search?q=type:…")
		return
	}
	f, err := c.AgentRuns(time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if p := q.Get("id_prefix"); p != "" {
		if _, _, err := store.PrefixRange(p); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		f.IDPrefix = p
	}
	s.writePage(w, r, f)
}

// queryError answers a failed query: a bad cursor, filter or query
// (*store.QueryError) is the client's fault (400), anything else the
// store's (503).
func (s *Server) queryError(w http.ResponseWriter, r *http.Request, err error) {
	if qe, ok := errors.AsType[*store.QueryError](err); ok {
		writeError(w, http.StatusBadRequest, qe.Error())
		return
	}
	s.storeError(w, r, err)
}

// search is GET /api/v1/search?q=…: records matching the query, as
// `loupe traces search` finds them.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query, err := store.ParseQuery(q.Get("q"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	query.Limit, query.Cursor, err = pageArgs(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, err := s.o.Store.Search(r.Context(), query)
	if err != nil {
		s.queryError(w, r, err)
		return
	}
	if page.Hits == nil {
		page.Hits = []store.Hit{}
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// TraceJSON is one trace as GET /api/v1/traces/{id} returns it: what
// `loupe traces show --json` prints, with the trace's evaluations always
// present (an empty list when it has none).
type TraceJSON struct {
	Summary     store.Summary          `json:"summary"`
	Stats       trace.Stats            `json:"stats"`
	Memory      store.Memory           `json:"memory"`
	Spans       []*store.Span          `json:"spans"`
	Records     []trace.Record         `json:"records"`
	Evaluations []evalrun.StoredResult `json:"evaluations"`
}

// resolve reads the {id} of a path: a full trace id, or a unique prefix of
// at least 4 hex digits (store.Resolve). A malformed id or an ambiguous
// prefix (a *store.QueryError) is the client's mistake (400).
func (s *Server) resolve(w http.ResponseWriter, r *http.Request) (trace.TraceID, bool) {
	id, err := store.Resolve(r.Context(), s.o.Store, r.PathValue("id"))
	if err != nil {
		if isNotFound(err) {
			writeError(w, http.StatusNotFound, err.Error())
		} else {
			s.queryError(w, r, err)
		}
		return id, false
	}
	return id, true
}

// loadTrace resolves the {id} of r's path and loads that trace, or
// answers why it cannot.
func (s *Server) loadTrace(w http.ResponseWriter, r *http.Request) (trace.TraceID, *store.Trace, bool) {
	id, ok := s.resolve(w, r)
	if !ok {
		return id, nil, false
	}
	t, err := s.o.Store.Trace(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return id, nil, false
	}
	return id, t, true
}

// getTrace is GET /api/v1/traces/{id}.
func (s *Server) getTrace(w http.ResponseWriter, r *http.Request) {
	id, t, ok := s.loadTrace(w, r)
	if !ok {
		return
	}
	evals, err := evalrun.ResultsFor(r.Context(), s.o.Store, id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if evals == nil {
		evals = []evalrun.StoredResult{}
	}
	if t.Records == nil {
		t.Records = []trace.Record{}
	}
	if t.Spans == nil {
		t.Spans = []*store.Span{}
	}
	s.writeJSON(w, r, http.StatusOK, TraceJSON{Summary: t.Summary, Stats: t.Stats, Memory: t.Memory, Spans: t.Spans, Records: t.Records, Evaluations: evals})
}

// deleteTrace is DELETE /api/v1/traces/{id} (full id only: deleting by
// prefix is too easy to get wrong).
func (s *Server) deleteTrace(w http.ResponseWriter, r *http.Request) {
	id, err := trace.ParseTraceID(r.PathValue("id"))
	if err != nil || id.IsZero() {
		writeError(w, http.StatusBadRequest, "trace id: want the full id, 32 hex digits")
		return
	}
	n, err := s.o.Store.Delete(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if n == 0 {
		writeError(w, http.StatusNotFound, "no trace "+id.String())
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
}

// aggregates is GET /api/v1/aggregates?since=…&until=…: runs, error
// rate, tokens and cost by model, calls and durations by tool.
func (s *Server) aggregates(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c := store.Criteria{Since: q.Get("since"), Until: q.Get("until")}
	f, err := c.Filter(time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	a, err := s.o.Store.Aggregate(r.Context(), f.Since, f.Until)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, a)
}

// listEvaluations is GET /api/v1/evaluations: the evaluation runs stored
// by loupe eval (traces tagged evalrun.EvalTag), newest first.
func (s *Server) listEvaluations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c := store.Criteria{Since: q.Get("since"), Until: q.Get("until"), Tags: []string{evalrun.EvalTag}}
	f, err := c.Filter(time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.writePage(w, r, f)
}

// EvaluationJSON is one evaluation run: its summary and its case results.
type EvaluationJSON struct {
	Summary store.Summary `json:"summary"`
	Results []evalrun.Row `json:"results"`
}

// getEvaluation is GET /api/v1/evaluations/{id}: an evaluation run's case
// result rows (as loupe eval --out writes them), in case order.
func (s *Server) getEvaluation(w http.ResponseWriter, r *http.Request) {
	id, t, ok := s.loadTrace(w, r)
	if !ok {
		return
	}
	if !slices.Contains(t.Summary.Tags, evalrun.EvalTag) {
		writeError(w, http.StatusNotFound, "trace "+id.String()+" is not an evaluation run (see /api/v1/evaluations)")
		return
	}
	out := EvaluationJSON{Summary: t.Summary, Results: []evalrun.Row{}}
	for i := range t.Records {
		rec := &t.Records[i]
		if rec.Type != trace.TypeCustom || rec.Name != evalrun.ResultRecord {
			continue
		}
		var row evalrun.Row
		if err := rec.Output.Decode(&row); err != nil {
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("evaluation %s record %d: result row: %v", id, rec.Seq, err))
			return
		}
		out.Results = append(out.Results, row)
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3 document of the server's endpoints.
func OpenAPI() []byte { return openAPIDoc }

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDoc)
}
