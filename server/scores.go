package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Scores and their configs: POST, GET /api/v1/scores, DELETE
// /api/v1/scores/{id}, GET /api/v1/scores/stats, GET and PUT
// /api/v1/score-configs. The store keeps them (store.Scorer, and
// store.AddScores for the rules every handler shares); the handlers read
// requests strictly and answer.

// maxScoreBody bounds a POST /api/v1/scores or PUT /api/v1/score-configs
// body.
const maxScoreBody = 1 << 20

// ScoreIn is one score of a POST /api/v1/scores body. Value is a number,
// or true or false (a boolean score). Kind may be left out when the name
// has a config or earlier scores; a score with a category is categorical,
// a boolean value boolean, any other numeric. Source defaults to api and
// Author to the API key's name.
type ScoreIn struct {
	ID       string            `json:"id"`
	TraceID  string            `json:"trace_id"`
	SpanID   string            `json:"span_id"`
	Session  string            `json:"session"`
	Name     string            `json:"name"`
	Kind     store.ScoreKind   `json:"kind"`
	Value    json.RawMessage   `json:"value"`
	Category string            `json:"category"`
	Comment  string            `json:"comment"`
	Source   store.ScoreSource `json:"source"`
	Author   string            `json:"author"`
	Rule     string            `json:"rule"`
	Time     *time.Time        `json:"time"`
}

// scoresBody is the body of POST /api/v1/scores.
type scoresBody struct {
	Scores []json.RawMessage `json:"scores"`
}

// fieldError is a request body's fault in one field; Index is the score's
// position, or -1 for the body as a whole.
type fieldError struct {
	Index int
	Field string
	Err   error
}

func (e *fieldError) Error() string {
	if e.Index < 0 {
		return e.Field + ": " + e.Err.Error()
	}
	return fmt.Sprintf("scores[%d].%s: %v", e.Index, e.Field, e.Err)
}

// decodeStrict decodes one JSON value of b into v, refusing unknown
// fields and anything after the value, and names the field at fault.
func decodeStrict(b []byte, v any) (field string, err error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return te.Field, fmt.Errorf("want a JSON %s, not %s", te.Type.Kind(), te.Value)
		case errors.As(err, &se):
			return "", fmt.Errorf("not JSON at byte %d: %v", se.Offset, err)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return f, errors.New("unknown field; see /api/v1/openapi.json for the fields")
		case errors.Is(err, io.EOF):
			return "", errors.New("empty body")
		}
		return "", fmt.Errorf("%v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("more than one JSON value")
	}
	return "", nil
}

// DecodeScores reads a POST /api/v1/scores body, {"scores": [...]}, into
// scores for store.AddScores, strictly: unknown fields, values of the
// wrong type and malformed ids are errors naming the score and its field.
// At most store.MaxScoreBatch scores.
func DecodeScores(b []byte) ([]store.Score, error) {
	var body scoresBody
	if field, err := decodeStrict(b, &body); err != nil {
		if field == "" {
			field = "body"
		}
		return nil, &fieldError{Index: -1, Field: field, Err: err}
	}
	if len(body.Scores) == 0 {
		return nil, &fieldError{Index: -1, Field: "scores", Err: errors.New(`no scores; send {"scores": [{"trace_id": …, "name": …, "value": …}]}`)}
	}
	if len(body.Scores) > store.MaxScoreBatch {
		return nil, &fieldError{Index: -1, Field: "scores", Err: fmt.Errorf("%d scores are more than %d a request", len(body.Scores), store.MaxScoreBatch)}
	}
	out := make([]store.Score, len(body.Scores))
	for i, raw := range body.Scores {
		var in ScoreIn
		if field, err := decodeStrict(raw, &in); err != nil {
			if field == "" {
				field = "(score)"
			}
			return nil, &fieldError{Index: i, Field: field, Err: err}
		}
		s, field, err := in.score()
		if err != nil {
			return nil, &fieldError{Index: i, Field: field, Err: err}
		}
		out[i] = s
	}
	return out, nil
}

// score converts in to a store.Score, with the defaults the API gives.
func (in *ScoreIn) score() (store.Score, string, error) {
	s := store.Score{ID: in.ID, Session: in.Session, Name: in.Name, Kind: in.Kind, Category: in.Category,
		Comment: in.Comment, Source: in.Source, Author: in.Author, Rule: in.Rule}
	if in.TraceID != "" {
		id, err := trace.ParseTraceID(in.TraceID)
		if err != nil || id.IsZero() {
			return s, "trace_id", errors.New("want the trace's full id, 32 hex digits")
		}
		s.TraceID = id
	}
	if in.SpanID != "" {
		id, err := trace.ParseSpanID(in.SpanID)
		if err != nil || id.IsZero() {
			return s, "span_id", errors.New("want a span id, 16 hex digits")
		}
		s.SpanID = id
	}
	switch v := strings.TrimSpace(string(in.Value)); v {
	case "", "null":
	case "true", "false":
		if s.Kind == "" {
			s.Kind = store.ScoreBoolean
		}
		if s.Kind != store.ScoreBoolean {
			return s, "value", fmt.Errorf("true or false is the value of a boolean score, not a %s one", s.Kind)
		}
		if v == "true" {
			s.Value = 1
		}
	default:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !json.Valid(in.Value) {
			return s, "value", errors.New("want a number, or true or false; a label goes in category")
		}
		s.Value = f
	}
	if s.Source == "" {
		s.Source = store.SourceAPI
	}
	if in.Time != nil {
		s.Time = *in.Time
	}
	return s, "", nil
}

// scorer returns the store as a store.Scorer, or answers 501.
func (s *Server) scorer(w http.ResponseWriter) (store.Scorer, bool) {
	sc, ok := s.o.Store.(store.Scorer)
	if !ok {
		writeError(w, http.StatusNotImplemented, store.ErrNoScores.Error())
	}
	return sc, ok
}

// readJSONBody reads a JSON request body of at most maxScoreBody bytes,
// answering 415 or 413 itself.
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "send JSON: Content-Type: application/json")
		return nil, false
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxScoreBody))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes; send fewer scores a request", maxScoreBody))
		} else {
			writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		}
		return nil, false
	}
	return b, true
}

// writeFieldError answers 400 naming the score and field at fault.
func writeFieldError(w http.ResponseWriter, index int, field string, err error) {
	body := errorBody{Error: clip(err.Error(), maxErrorText), Field: field}
	if index >= 0 {
		body.Index = &index
	}
	writeJSON(w, http.StatusBadRequest, body)
}

// postScores is POST /api/v1/scores: {"scores": [...]} added to traces,
// spans and sessions. The traces must be stored. It answers the scores
// stored; a score whose id is stored already is skipped.
func (s *Server) postScores(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.scorer(w); !ok {
		return
	}
	b, ok := readJSONBody(w, r)
	if !ok {
		return
	}
	scores, err := DecodeScores(b)
	if err != nil {
		var fe *fieldError
		errors.As(err, &fe)
		writeFieldError(w, fe.Index, fe.Field, fe)
		return
	}
	author := ""
	if id, ok := r.Context().Value(identityKey{}).(identity); ok {
		author = id.key.Name
	}
	var ids []trace.TraceID
	where := map[trace.TraceID]int{}
	for i := range scores {
		if scores[i].Author == "" {
			scores[i].Author = author
		}
		if id := scores[i].TraceID; !id.IsZero() {
			if _, seen := where[id]; !seen {
				where[id] = i
				ids = append(ids, id)
			}
		}
	}
	if len(ids) > 0 {
		page, err := s.o.Store.List(r.Context(), store.ListQuery{Filter: store.Filter{IDs: ids}, Limit: len(ids)})
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		for _, t := range page.Traces {
			delete(where, t.ID)
		}
		for _, id := range ids {
			if i, missing := where[id]; missing {
				writeFieldError(w, i, "trace_id", fmt.Errorf("scores[%d].trace_id: no trace %s is stored", i, id))
				return
			}
		}
	}
	stored, err := store.AddScores(r.Context(), s.o.Store, scores)
	if err != nil {
		if se, ok := errors.AsType[*store.ScoreError](err); ok {
			writeFieldError(w, se.Index, se.Field, fmt.Errorf("scores[%d].%s: %w", se.Index, se.Field, se.Err))
			return
		}
		s.storeError(w, r, err)
		return
	}
	if stored == nil {
		stored = []store.Score{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"scores": stored, "skipped": len(scores) - len(stored)})
}

// scoreFilter reads the filters of GET /api/v1/scores.
func scoreFilter(q url.Values) (store.ScoreFilter, error) {
	var f store.ScoreFilter
	for _, v := range q["trace"] {
		id, err := trace.ParseTraceID(v)
		if err != nil || id.IsZero() {
			return f, fmt.Errorf("trace=%s: want a full trace id, 32 hex digits", clip(v, 40))
		}
		f.TraceIDs = append(f.TraceIDs, id)
	}
	if v := q.Get("span"); v != "" {
		id, err := trace.ParseSpanID(v)
		if err != nil {
			return f, fmt.Errorf("span=%s: want a span id, 16 hex digits", clip(v, 40))
		}
		f.SpanID = id
	}
	f.Session, f.Name, f.Source, f.Rule = q.Get("session"), q.Get("name"), store.ScoreSource(q.Get("source")), q.Get("rule")
	c := store.Criteria{Since: q.Get("since"), Until: q.Get("until")}
	tf, err := c.Filter(time.Now())
	if err != nil {
		return f, err
	}
	f.Since, f.Until = tf.Since, tf.Until
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxScoreLimit {
			return f, fmt.Errorf("limit=%s: want 1 to %d", clip(v, 40), store.MaxScoreLimit)
		}
		f.Limit = n
	}
	f.Cursor = q.Get("cursor")
	return f, f.Validate()
}

// listScores is GET /api/v1/scores: scores, newest first, a page at a
// time.
func (s *Server) listScores(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.scorer(w)
	if !ok {
		return
	}
	f, err := scoreFilter(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, err := sc.Scores(r.Context(), f)
	if err != nil {
		s.queryError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// deleteScore is DELETE /api/v1/scores/{id}.
func (s *Server) deleteScore(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.scorer(w)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if err := store.ValidateScore(0, &store.Score{ID: id, TraceID: trace.TraceID{1}, Name: "x", Kind: store.ScoreNumeric, Source: store.SourceAPI}); err != nil {
		writeError(w, http.StatusBadRequest, "score id: want 32 lowercase hex digits")
		return
	}
	n, err := sc.DeleteScores(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if n == 0 {
		writeError(w, http.StatusNotFound, "no score "+id)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
}

// scoreStats is GET /api/v1/scores/stats: per score name, the count,
// mean, categories, histogram and the trend of the mean per bucket, over
// since (default 30d) to until.
func (s *Server) scoreStats(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.scorer(w)
	if !ok {
		return
	}
	q := r.URL.Query()
	now := time.Now()
	since := q.Get("since")
	if since == "" {
		since = "30d"
	}
	f, err := store.Criteria{Since: since, Until: q.Get("until")}.Filter(now)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sq := store.ScoreStatsQuery{Name: q.Get("name"), Since: f.Since, Until: f.Until}
	until := f.Until
	if until.IsZero() {
		until = now
	}
	switch v := q.Get("bucket"); v {
	case "":
		// An hour over up to three days, else whole days, at most 60.
		sq.Bucket = time.Hour
		if span := until.Sub(sq.Since); span > 3*24*time.Hour {
			day := 24 * time.Hour
			sq.Bucket = day * ((span + 60*day - 1) / (60 * day))
		}
	default:
		d, err := store.ParseDuration(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("bucket=%s: %v", clip(v, 40), err))
			return
		}
		sq.Bucket = d
	}
	stats, err := sc.ScoreStats(r.Context(), sq)
	if err != nil {
		s.queryError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, map[string]any{"since": sq.Since.UTC(), "bucket_ns": int64(sq.Bucket), "scores": stats})
}

// getScoreConfigs is GET /api/v1/score-configs.
func (s *Server) getScoreConfigs(w http.ResponseWriter, r *http.Request) {
	cs := []store.ScoreConfig{}
	if set, ok := s.o.Store.(store.Settings); ok {
		var err error
		if cs, err = store.ScoreConfigs(r.Context(), set); err != nil {
			s.storeError(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"configs": cs})
}

// putScoreConfig is PUT /api/v1/score-configs: one config, created or
// replaced by its name.
func (s *Server) putScoreConfig(w http.ResponseWriter, r *http.Request) {
	set, ok := s.o.Store.(store.Settings)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this store cannot keep score configs (it does not implement store.Settings)")
		return
	}
	b, ok := readJSONBody(w, r)
	if !ok {
		return
	}
	var c store.ScoreConfig
	if field, err := decodeStrict(b, &c); err != nil {
		if field == "" {
			field = "body"
		}
		writeFieldError(w, -1, field, &fieldError{Index: -1, Field: field, Err: err})
		return
	}
	if err := store.PutScoreConfig(r.Context(), set, c); err != nil {
		if ce, ok := errors.AsType[*store.ScoreConfigError](err); ok {
			writeFieldError(w, -1, ce.Field, ce)
			return
		}
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}
