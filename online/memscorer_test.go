package online_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/store"
)

// scorerFor returns the store.Scorer the tests give the engine for st.
//
// TEST DOUBLE: the SQLite and PostgreSQL scorers are being written
// elsewhere; until they exist this returns memScorer, an in-memory
// stand-in that keeps the store.Scorer contract (validation, first write
// wins by ID, one kind per name, newest first). Once st implements
// store.Scorer, this is the one line to change:
//
//	return st.(store.Scorer)
//
// The restart tests pass the same memScorer to both engines, as the
// SQLite file would keep the scores across the restart.
func scorerFor(st store.Store) store.Scorer {
	if sc, ok := st.(store.Scorer); ok {
		return sc
	}
	return newMemScorer()
}

// memScorer is an in-memory store.Scorer for tests (see scorerFor).
type memScorer struct {
	mu     sync.Mutex
	scores []store.Score // in insertion order
	ids    map[string]bool
	kinds  map[string]store.ScoreKind
}

func newMemScorer() *memScorer {
	return &memScorer{ids: map[string]bool{}, kinds: map[string]store.ScoreKind{}}
}

func (m *memScorer) AddScores(_ context.Context, scores []store.Score) ([]store.Score, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kinds := map[string]store.ScoreKind{}
	out := make([]store.Score, 0, len(scores))
	for i, s := range scores {
		if err := store.ValidateScore(i, &s); err != nil {
			return nil, err
		}
		k, ok := m.kinds[s.Name]
		if !ok {
			k, ok = kinds[s.Name]
		}
		if ok && k != s.Kind {
			return nil, &store.ScoreError{Index: i, Field: "kind", Err: errKind}
		}
		kinds[s.Name] = s.Kind
		if s.ID == "" {
			var b [16]byte
			rand.Read(b[:])
			s.ID = hex.EncodeToString(b[:])
		}
		if s.Time.IsZero() {
			s.Time = time.Now()
		}
		out = append(out, s)
	}
	var stored []store.Score
	for _, s := range out {
		if m.ids[s.ID] {
			continue
		}
		m.ids[s.ID] = true
		m.kinds[s.Name] = s.Kind
		m.scores = append(m.scores, s)
		stored = append(stored, s)
	}
	return stored, nil
}

type kindError struct{}

func (kindError) Error() string { return "kind differs from the kind of earlier scores of this name" }

var errKind = kindError{}

func (m *memScorer) Scores(_ context.Context, f store.ScoreFilter) (store.ScorePage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	off := 0
	if f.Cursor != "" {
		n, err := strconv.Atoi(f.Cursor)
		if err != nil || n < 0 {
			return store.ScorePage{}, &store.QueryError{Err: errKind}
		}
		off = n
	}
	var match []store.Score
	for i := len(m.scores) - 1; i >= 0; i-- { // newest first
		s := m.scores[i]
		switch {
		case len(f.TraceIDs) > 0 && !slices.Contains(f.TraceIDs, s.TraceID),
			!f.SpanID.IsZero() && s.SpanID != f.SpanID,
			f.Session != "" && s.Session != f.Session,
			f.Name != "" && s.Name != f.Name,
			f.Source != "" && s.Source != f.Source,
			f.Rule != "" && s.Rule != f.Rule,
			!f.Since.IsZero() && s.Time.Before(f.Since),
			!f.Until.IsZero() && !s.Time.Before(f.Until):
			continue
		}
		match = append(match, s)
	}
	p := store.ScorePage{Scores: []store.Score{}}
	if off < len(match) {
		end := min(off+limit, len(match))
		p.Scores = append(p.Scores, match[off:end]...)
		if end < len(match) {
			p.Next = strconv.Itoa(end)
		}
	}
	return p, nil
}

func (m *memScorer) DeleteScores(_ context.Context, ids ...string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	m.scores = slices.DeleteFunc(m.scores, func(s store.Score) bool {
		if slices.Contains(ids, s.ID) {
			n++
			delete(m.ids, s.ID)
			return true
		}
		return false
	})
	return n, nil
}

func (m *memScorer) ScoreKinds(context.Context) (map[string]store.ScoreKind, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]store.ScoreKind{}
	for k, v := range m.kinds {
		out[k] = v
	}
	return out, nil
}

// reopened returns the Scorer of st, a store reopened on the file whose
// scores prev held: the file's own Scorer once the backends implement
// it; until then the same test double, which stands for the file.
func reopened(prev store.Scorer, st store.Store) store.Scorer {
	if sc, ok := st.(store.Scorer); ok {
		return sc
	}
	return prev
}
