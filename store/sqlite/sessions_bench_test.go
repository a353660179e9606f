package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// BenchmarkSessions measures the session queries on a store of 5000 runs
// (about 100,000 records) in 500 sessions of 10 runs, plus 1000 runs of
// no session: the first page of the session list, the list filtered by
// user, and one session read as its conversation (its 10 traces loaded).
func BenchmarkSessions(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "sessions.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []trace.Record
	for i := range 6000 {
		sp := storetest.Spec{Name: "chat", Start: t0.Add(time.Duration(i) * time.Second), Steps: 1}
		if i < 5000 {
			sp.Session, sp.User = fmt.Sprintf("conv-%03d", i%500), fmt.Sprintf("user-%02d", i%50)
		}
		batch = append(batch, storetest.Gen(sp)...)
		if len(batch) > 20000 {
			if _, err := s.Append(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := s.Append(ctx, batch); err != nil {
		b.Fatal(err)
	}
	const reps = 100
	for _, bc := range []struct {
		name string
		fn   func() error
	}{
		{"list-first-page", func() error { _, err := s.Sessions(ctx, store.SessionQuery{}); return err }},
		{"list-by-user", func() error { _, err := s.Sessions(ctx, store.SessionQuery{User: "user-07"}); return err }},
		{"conversation", func() error {
			_, turns, _, err := store.SessionTurns(ctx, s, "conv-123", 0)
			if err == nil && len(turns) != 10 {
				err = fmt.Errorf("%d turns, want 10", len(turns))
			}
			return err
		}},
		{"traces-of-session", func() error {
			_, err := s.List(ctx, store.ListQuery{Filter: store.Filter{Session: "conv-123"}})
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				storetest.Percentiles(b, reps, bc.fn)
			}
		})
	}
}
