package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// ScoreKind is the data type of a score. One score name has one kind
// across a store: the first score stored under a name fixes it, and a
// score of another kind under that name is refused with a *ScoreError.
type ScoreKind string

// The kinds of score.
const (
	ScoreNumeric     ScoreKind = "numeric"     // Value holds the number
	ScoreBoolean     ScoreKind = "boolean"     // Value is 1 (true) or 0 (false)
	ScoreCategorical ScoreKind = "categorical" // Category holds the label; Value is 0
)

// ScoreSource says where a score came from.
type ScoreSource string

// The sources of scores.
const (
	SourceHuman  ScoreSource = "human"  // a person, in the web UI or the CLI
	SourceAPI    ScoreSource = "api"    // a program, through the HTTP API or the Go API
	SourceEval   ScoreSource = "eval"   // loupe eval
	SourceOnline ScoreSource = "online" // an online evaluation rule of loupe serve
)

// Limits on a score's text, so that a score is small whatever a client
// sends.
const (
	MaxScoreNameBytes     = 128
	MaxScoreCategoryBytes = 256
	MaxScoreCommentBytes  = 16 << 10
	MaxScoreAuthorBytes   = 256
	// MaxScoreValue bounds the magnitude of a numeric score, so that
	// sums and means over many scores stay finite in every database.
	MaxScoreValue = 1e15
	// MaxScoreBatch bounds the scores of one AddScores call.
	MaxScoreBatch = 1000
)

// A Score is a named value given to a trace, to one span of a trace, or
// to a session: a number, a boolean or a category, with an optional
// comment, where it came from and who gave it.
//
// Exactly one target is set: TraceID (with SpanID zero for the whole
// trace, or a span of it), or Session with TraceID zero.
type Score struct {
	// ID identifies the score in its store. Leave it empty when adding a
	// score: the store assigns one (32 lowercase hex digits). A score
	// added with an ID the store already holds is not added again (the
	// first write wins), which makes retries safe.
	ID string `json:"id,omitempty"`

	TraceID trace.TraceID `json:"trace_id,omitzero"`
	SpanID  trace.SpanID  `json:"span_id,omitzero"`
	Session string        `json:"session,omitempty"`

	Name     string    `json:"name"`
	Kind     ScoreKind `json:"kind"`
	Value    float64   `json:"value"`
	Category string    `json:"category,omitempty"`
	Comment  string    `json:"comment,omitempty"`

	Source ScoreSource `json:"source"`
	// Author is who gave the score: an API key's name, a person, or the
	// grader that produced it.
	Author string `json:"author,omitempty"`
	// Rule is the online evaluation rule that produced the score, if any.
	Rule string `json:"rule,omitempty"`
	// Time is when the score was given; zero means now, when added.
	Time time.Time `json:"time"`
}

// ScoreError rejects a score passed to AddScores.
type ScoreError struct {
	Index int    // position in the batch
	Field string // the field at fault as a score's JSON names it
	Err   error
}

// Error says which score was rejected and why.
func (e *ScoreError) Error() string {
	return fmt.Sprintf("score %d: %v; no score of this batch was stored", e.Index, e.Err)
}

// Unwrap returns the reason.
func (e *ScoreError) Unwrap() error { return e.Err }

// ValidateScore checks a score before it is stored: exactly one target, a
// name of letters, digits and "._-:/" (at most MaxScoreNameBytes), a known
// kind and source, a value that fits the kind (finite; 0 or 1 for a
// boolean; 0 with a category for a categorical score) and text within the
// limits. The error is a *ScoreError whose Field names the field at fault.
// It does not check that the kind agrees with earlier scores of the same
// name: the store does.
func ValidateScore(i int, s *Score) error {
	if field, err := checkScore(s); err != nil {
		return &ScoreError{Index: i, Field: field, Err: err}
	}
	return nil
}

func checkScore(s *Score) (string, error) {
	switch {
	case s.TraceID.IsZero() && s.Session == "":
		return "trace_id", errors.New("trace_id and session are both empty; a score is given to a trace, a span of a trace or a session")
	case !s.TraceID.IsZero() && s.Session != "":
		return "session", errors.New("both trace_id and session are set; give a score to one of them")
	case s.TraceID.IsZero() && !s.SpanID.IsZero():
		return "span_id", errors.New("span_id is set without trace_id; a span is named by its trace and span ids")
	case len(s.Session) > MaxSessionBytes || !isText(s.Session):
		return "session", fmt.Errorf("session is not valid UTF-8 without NUL bytes of at most %d bytes", MaxSessionBytes)
	}
	if err := checkScoreName(s.Name); err != nil {
		return "name", err
	}
	switch s.Kind {
	case ScoreNumeric:
		if !(s.Value >= -MaxScoreValue && s.Value <= MaxScoreValue) {
			return "value", fmt.Errorf("value %v is not a number from -%g to %g", s.Value, MaxScoreValue, MaxScoreValue)
		}
		if s.Category != "" {
			return "category", errors.New("category is set on a numeric score; use kind categorical")
		}
	case ScoreBoolean:
		if s.Value != 0 && s.Value != 1 {
			return "value", fmt.Errorf("value %v of a boolean score must be 1 (true) or 0 (false)", s.Value)
		}
		if s.Category != "" {
			return "category", errors.New("category is set on a boolean score; use kind categorical")
		}
	case ScoreCategorical:
		if s.Category == "" {
			return "category", errors.New("category is empty; a categorical score's value is its category")
		}
		if s.Value != 0 {
			return "value", errors.New("value is set on a categorical score; put the label in category")
		}
	default:
		return "kind", fmt.Errorf("kind %q is not one of numeric, boolean, categorical", s.Kind)
	}
	switch s.Source {
	case SourceHuman, SourceAPI, SourceEval, SourceOnline:
	default:
		return "source", fmt.Errorf("source %q is not one of human, api, eval, online", s.Source)
	}
	for _, f := range [...]struct {
		name, v string
		max     int
	}{
		{"category", s.Category, MaxScoreCategoryBytes},
		{"comment", s.Comment, MaxScoreCommentBytes},
		{"author", s.Author, MaxScoreAuthorBytes},
		{"rule", s.Rule, MaxScoreNameBytes},
	} {
		if len(f.v) > f.max || !isText(f.v) {
			return f.name, fmt.Errorf("%s is not valid UTF-8 without NUL bytes of at most %d bytes", f.name, f.max)
		}
	}
	if s.ID != "" && !validScoreID(s.ID) {
		return "id", fmt.Errorf("id %q is not 32 lowercase hex digits; leave it empty and the store assigns one", s.ID)
	}
	if !s.Time.IsZero() && (s.Time.Year() < 1678 || s.Time.Year() > 2261) {
		return "time", fmt.Errorf("time %s is outside the years 1678-2261", s.Time.Format(time.RFC3339))
	}
	return "", nil
}

// MaxSessionBytes bounds a session or user id.
const MaxSessionBytes = 256

func checkScoreName(name string) error {
	if name == "" {
		return errors.New("name is empty")
	}
	if len(name) > MaxScoreNameBytes {
		return fmt.Errorf("name is %d bytes; at most %d", len(name), MaxScoreNameBytes)
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-:/", r))
	}); i >= 0 {
		return fmt.Errorf("name %q has %q at byte %d; use letters, digits and . _ - : /", name, name[i], i)
	}
	return nil
}

func validScoreID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ScoreFilter selects scores. Zero fields do not narrow.
type ScoreFilter struct {
	TraceIDs []trace.TraceID // scores of these traces (any span)
	SpanID   trace.SpanID    // with TraceIDs: scores of this span only
	Session  string          // scores given to this session
	Name     string
	Source   ScoreSource
	Rule     string
	Since    time.Time // Time ≥ Since
	Until    time.Time // Time < Until
	Limit    int       // at most this many per page; 0 means 100, at most 1000
	Cursor   string    // from ScorePage.Next
}

// ScorePage is one page of scores, newest first.
type ScorePage struct {
	Scores []Score `json:"scores"`
	// Next is the cursor of the next page; empty on the last page.
	Next string `json:"next,omitempty"`
}

// ScoreStats summarizes the scores of one name, for the dashboard.
type ScoreStats struct {
	Name  string    `json:"name"`
	Kind  ScoreKind `json:"kind"`
	Count int64     `json:"count"`
	// Mean of Value (numeric and boolean kinds: a boolean's mean is its
	// share of true).
	Mean float64 `json:"mean"`
	// Categories counts each category of a categorical score, and the
	// "true" and "false" of a boolean one.
	Categories map[string]int64 `json:"categories,omitempty"`
	// Min and Max are the smallest and largest values of a numeric
	// score; Histogram counts its values in ScoreBins equal bins from Min
	// to Max (all in the first when Min equals Max). They are zero for
	// other kinds.
	Min       float64 `json:"min,omitempty"`
	Max       float64 `json:"max,omitempty"`
	Histogram []int64 `json:"histogram,omitempty"`
	// Trend is the mean per time bucket, oldest first, buckets without
	// scores left out; only when ScoreStatsQuery.Bucket is set.
	Trend []ScoreBucket `json:"trend,omitempty"`
}

// ScoreBins is the number of bins of ScoreStats.Histogram.
const ScoreBins = 10

// MaxScoreBuckets bounds the buckets of a trend (ScoreStatsQuery).
const MaxScoreBuckets = 1000

// ScoreStatsQuery selects the scores that ScoreStats summarizes.
type ScoreStatsQuery struct {
	Name  string    // one score name; empty for every name
	Since time.Time // Time ≥ Since; required with Bucket
	Until time.Time // Time < Until; zero means now
	// Bucket is the width of the trend's time buckets; 0 means no trend.
	// At most MaxScoreBuckets buckets may lie between Since and Until.
	Bucket time.Duration
}

// Validate checks q: a valid name if any, and a trend of at most
// MaxScoreBuckets buckets over a bounded range. The error is a
// *QueryError.
func (q *ScoreStatsQuery) Validate(now time.Time) error {
	if q.Name != "" {
		if err := checkScoreName(q.Name); err != nil {
			return &QueryError{Err: fmt.Errorf("score stats: %w", err)}
		}
	}
	if q.Bucket < 0 {
		return queryErrorf("score stats: bucket %s is negative", q.Bucket)
	}
	if q.Bucket == 0 {
		return nil
	}
	if q.Since.IsZero() {
		return queryErrorf("score stats: a trend (bucket %s) needs since", q.Bucket)
	}
	until := q.Until
	if until.IsZero() {
		until = now
	}
	if n := until.Sub(q.Since) / q.Bucket; n >= MaxScoreBuckets {
		return queryErrorf("score stats: %s to %s in buckets of %s are more than %d buckets; widen the bucket", q.Since.Format(time.RFC3339), until.Format(time.RFC3339), q.Bucket, MaxScoreBuckets)
	}
	return nil
}

// A ScoreBucket is one time bucket of a score's trend.
type ScoreBucket struct {
	Start time.Time `json:"start"` // the bucket is [Start, Start+Bucket)
	Count int64     `json:"count"`
	Mean  float64   `json:"mean"` // mean of Value (0 for a categorical score)
}

// A Scorer is a Store that keeps scores beside its traces. The SQLite and
// PostgreSQL backends implement it. Methods are safe for concurrent use.
// Deleting or pruning a trace deletes its scores.
type Scorer interface {
	// AddScores validates (ValidateScore) and stores scores in one
	// transaction, assigning IDs and times where they are empty, and
	// returns the scores it stored, in the order given. A score whose ID
	// is already stored (or given twice in the batch) is skipped and not
	// returned: the first write wins. A score whose kind differs from the kind its name already
	// has is refused with a *ScoreError (Field "kind"); on any error no
	// score of the batch is stored.
	AddScores(ctx context.Context, scores []Score) ([]Score, error)
	// Scores returns the scores matching f, newest first, a page at a
	// time. A bad cursor or limit is a *QueryError.
	Scores(ctx context.Context, f ScoreFilter) (ScorePage, error)
	// DeleteScores removes scores by ID and returns how many existed.
	DeleteScores(ctx context.Context, ids ...string) (int, error)
	// ScoreKinds returns the kind of every score name in the store.
	ScoreKinds(ctx context.Context) (map[string]ScoreKind, error)
	// ScoreStats summarizes the scores of traces and sessions that q
	// selects, per name, sorted by name. A bad q is a *QueryError.
	ScoreStats(ctx context.Context, q ScoreStatsQuery) ([]ScoreStats, error)
}

// DefaultScoreLimit and MaxScoreLimit are the scores one page of Scores
// holds when ScoreFilter.Limit is 0, and at most.
const (
	DefaultScoreLimit = 100
	MaxScoreLimit     = 1000
)

// Validate checks f before a store runs it: at most MaxFilterIDs trace
// ids, SpanID only with TraceIDs, a valid name, source and rule, a limit
// from 0 to MaxScoreLimit. The error is a *QueryError naming the field.
func (f *ScoreFilter) Validate() error {
	switch {
	case len(f.TraceIDs) > MaxFilterIDs:
		return queryErrorf("scores: %d trace ids are more than the limit of %d", len(f.TraceIDs), MaxFilterIDs)
	case !f.SpanID.IsZero() && len(f.TraceIDs) == 0:
		return queryErrorf("scores: a span id is given without its trace id")
	case f.Limit < 0 || f.Limit > MaxScoreLimit:
		return queryErrorf("scores: limit %d is not within 0 and %d", f.Limit, MaxScoreLimit)
	case !isText(f.Session) || len(f.Session) > MaxSessionBytes:
		return queryErrorf("scores: session is not valid UTF-8 text of at most %d bytes", MaxSessionBytes)
	case !isText(f.Rule) || len(f.Rule) > MaxScoreNameBytes:
		return queryErrorf("scores: rule is not valid UTF-8 text of at most %d bytes", MaxScoreNameBytes)
	}
	if f.Name != "" {
		if err := checkScoreName(f.Name); err != nil {
			return &QueryError{Err: fmt.Errorf("scores: %w", err)}
		}
	}
	switch f.Source {
	case "", SourceHuman, SourceAPI, SourceEval, SourceOnline:
	default:
		return queryErrorf("scores: source %q is not one of human, api, eval, online", f.Source)
	}
	return nil
}

// NewScoreID returns a random score id: 32 lowercase hex digits.
func NewScoreID() string {
	id := trace.NewTraceID()
	return id.String()
}

// ParseScoreValue reads a score's value as a person types it (the CLI,
// the search language): for kind boolean, true/false, yes/no, 1/0 or
// +/-; for numeric, a finite number; for categorical, the text itself.
// With kind empty the kind is guessed: true or false is a boolean, a
// number is numeric, anything else a category. It returns the kind and
// sets Value or Category of s accordingly.
func ParseScoreValue(kind ScoreKind, text string, s *Score) error {
	b, isBool := parseBool(text)
	n, err := strconv.ParseFloat(text, 64)
	isNum := err == nil && !math.IsNaN(n) && !math.IsInf(n, 0)
	if kind == "" {
		switch {
		case text == "true" || text == "false":
			kind = ScoreBoolean
		case isNum:
			kind = ScoreNumeric
		default:
			kind = ScoreCategorical
		}
	}
	s.Kind, s.Value, s.Category = kind, 0, ""
	switch kind {
	case ScoreBoolean:
		if !isBool {
			return fmt.Errorf("value %q of boolean score %s: want true or false", text, s.Name)
		}
		if b {
			s.Value = 1
		}
	case ScoreNumeric:
		if !isNum {
			return fmt.Errorf("value %q of numeric score %s: want a finite number", text, s.Name)
		}
		s.Value = n
	case ScoreCategorical:
		if text == "" {
			return fmt.Errorf("value of categorical score %s is empty: want a category", s.Name)
		}
		s.Category = text
	default:
		return fmt.Errorf("kind %q is not one of numeric, boolean, categorical", kind)
	}
	return nil
}

func parseBool(s string) (v, ok bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "1", "+", "up":
		return true, true
	case "false", "no", "0", "-", "down":
		return false, true
	}
	return false, false
}
