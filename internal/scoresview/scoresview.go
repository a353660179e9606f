// Package scoresview is what `loupe scores` does, apart from flag
// parsing: it adds scores given on the command line (a trace or a span of
// it, or a session; a value as a person types it), lists them as a table
// or JSON, and removes them. The store keeps the scores and their rules
// (store.Scorer, store.AddScores); this package reads arguments and
// writes answers.
//
// Functions take a store.Store opened by the caller and hold no state.
package scoresview

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// AddOptions is one score to add from the command line.
type AddOptions struct {
	// Target is TRACE or TRACE/SPAN: a trace id or a unique prefix of
	// one, and optionally a span's full id. Empty with Session.
	Target  string
	Session string // score the session instead of a trace
	Name    string
	// Value is as a person types it: true/false (also yes/no, +/-), a
	// number, or a category; read by the kind the name has (its config,
	// else its earlier scores), else guessed (store.ParseScoreValue).
	Value   string
	Comment string
	Author  string
	// Source is where the score comes from; empty means human.
	Source store.ScoreSource
}

// Add adds the score o describes to st and returns it as stored.
func Add(ctx context.Context, st store.Store, o AddOptions) (store.Score, error) {
	sc, ok := st.(store.Scorer)
	if !ok {
		return store.Score{}, store.ErrNoScores
	}
	s := store.Score{Name: o.Name, Comment: o.Comment, Author: o.Author, Source: o.Source, Session: o.Session}
	if s.Source == "" {
		s.Source = store.SourceHuman
	}
	switch {
	case o.Session != "" && o.Target != "":
		return s, fmt.Errorf("give a trace or --session, not both: a score belongs to one of them")
	case o.Session == "" && o.Target == "":
		return s, fmt.Errorf("give a trace (TRACE or TRACE/SPAN) or --session")
	case o.Target != "":
		tr, span, _ := strings.Cut(o.Target, "/")
		id, err := store.Resolve(ctx, st, tr)
		if err != nil {
			return s, err
		}
		if _, err := st.Trace(ctx, id); err != nil {
			return s, fmt.Errorf("trace %s: %w", id, err)
		}
		s.TraceID = id
		if span != "" {
			sid, err := trace.ParseSpanID(span)
			if err != nil || sid.IsZero() {
				return s, fmt.Errorf("span %q: want a span's full id, 16 hex digits (loupe traces show %s lists them)", span, id.String()[:12])
			}
			s.SpanID = sid
		}
	}
	kind, err := kindOf(ctx, st, sc, o.Name)
	if err != nil {
		return s, err
	}
	if err := store.ParseScoreValue(kind, o.Value, &s); err != nil {
		return s, err
	}
	got, err := store.AddScores(ctx, st, []store.Score{s})
	if err != nil {
		return s, err
	}
	return got[0], nil
}

// kindOf is the kind a name has: its config's, else its stored scores',
// else "" (to be guessed from the value).
func kindOf(ctx context.Context, st store.Store, sc store.Scorer, name string) (store.ScoreKind, error) {
	if set, ok := st.(store.Settings); ok {
		cs, err := store.ScoreConfigs(ctx, set)
		if err != nil {
			return "", err
		}
		for _, c := range cs {
			if c.Name == name {
				return c.Kind, nil
			}
		}
	}
	kinds, err := sc.ScoreKinds(ctx)
	if err != nil {
		return "", err
	}
	return kinds[name], nil
}

// ListOptions selects scores to list: the trace (an id or unique prefix)
// and the store.ScoreFilter's other fields.
type ListOptions struct {
	Trace  string
	Filter store.ScoreFilter
}

// List returns the page of scores o selects.
func List(ctx context.Context, st store.Store, o ListOptions) (store.ScorePage, error) {
	sc, ok := st.(store.Scorer)
	if !ok {
		return store.ScorePage{}, store.ErrNoScores
	}
	f := o.Filter
	if o.Trace != "" {
		id, err := store.Resolve(ctx, st, o.Trace)
		if err != nil {
			return store.ScorePage{}, err
		}
		f.TraceIDs = []trace.TraceID{id}
	}
	return sc.Scores(ctx, f)
}

// Remove deletes the scores with ids and returns how many there were.
func Remove(ctx context.Context, st store.Store, ids []string) (int, error) {
	sc, ok := st.(store.Scorer)
	if !ok {
		return 0, store.ErrNoScores
	}
	return sc.DeleteScores(ctx, ids...)
}

// Value is a score's value as a person reads it: true or false, the
// number, or the category.
func Value(s *store.Score) string {
	switch s.Kind {
	case store.ScoreBoolean:
		if s.Value != 0 {
			return "true"
		}
		return "false"
	case store.ScoreCategorical:
		return s.Category
	}
	return fmt.Sprint(s.Value)
}

// Target is what a score was given to: the trace's id prefix (and
// "/span"), or "session:ID".
func Target(s *store.Score) string {
	if s.Session != "" {
		return "session:" + s.Session
	}
	t := s.TraceID.String()[:12]
	if !s.SpanID.IsZero() {
		t += "/" + s.SpanID.String()
	}
	return t
}

// Table writes scores as an aligned table, one a line: id, time (UTC),
// target, name, value, source, author and the comment's first line.
func Table(w io.Writer, scores []store.Score) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tTARGET\tNAME\tVALUE\tSOURCE\tAUTHOR\tCOMMENT")
	for i := range scores {
		s := &scores[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Time.UTC().Format("2006-01-02 15:04:05"), Target(s),
			s.Name, oneLine(Value(s), 40), s.Source, orDash(oneLine(s.Author, 24)), oneLine(s.Comment, 60))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine is s's first line, cut to n bytes, with tabs as spaces (they
// would break the table).
func oneLine(s string, n int) string {
	s, _, cut := strings.Cut(s, "\n")
	s = strings.ReplaceAll(s, "\t", " ")
	if len(s) > n {
		s, cut = trace.TruncateUTF8(s, n), true
	}
	if cut {
		s += "…"
	}
	return s
}
