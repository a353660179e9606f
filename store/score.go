package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

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
	case len(s.Session) > MaxSessionBytes || !utf8.ValidString(s.Session):
		return "session", fmt.Errorf("session is not valid UTF-8 of at most %d bytes", MaxSessionBytes)
	}
	if err := checkScoreName(s.Name); err != nil {
		return "name", err
	}
	switch s.Kind {
	case ScoreNumeric:
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			return "value", fmt.Errorf("value %v is not a finite number", s.Value)
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
		if len(f.v) > f.max || !utf8.ValidString(f.v) {
			return f.name, fmt.Errorf("%s is not valid UTF-8 of at most %d bytes", f.name, f.max)
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
	// Categories counts each category of a categorical score.
	Categories map[string]int64 `json:"categories,omitempty"`
}

// A Scorer is a Store that keeps scores beside its traces. The SQLite and
// PostgreSQL backends implement it. Methods are safe for concurrent use.
type Scorer interface {
	// AddScores validates (ValidateScore) and stores scores in one
	// transaction, assigning IDs and times where they are empty, and
	// returns them as stored. A score whose ID is already stored is
	// skipped. A score whose kind differs from the kind its name already
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
}
