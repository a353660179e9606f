package sqlite

import (
	"context"

	"github.com/loupe-dev/loupe/store"
)

// AddScores implements store.Scorer, under the store's write lock.
func (s *Store) AddScores(ctx context.Context, scores []store.Score) ([]store.Score, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.db.AddScores(ctx, scores)
}

// Scores implements store.Scorer.
func (s *Store) Scores(ctx context.Context, f store.ScoreFilter) (store.ScorePage, error) {
	return s.db.Scores(ctx, f)
}

// DeleteScores implements store.Scorer, under the store's write lock.
func (s *Store) DeleteScores(ctx context.Context, ids ...string) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.db.DeleteScores(ctx, ids...)
}

// ScoreKinds implements store.Scorer.
func (s *Store) ScoreKinds(ctx context.Context) (map[string]store.ScoreKind, error) {
	return s.db.ScoreKinds(ctx)
}

// ScoreStats implements store.Scorer.
func (s *Store) ScoreStats(ctx context.Context, q store.ScoreStatsQuery) ([]store.ScoreStats, error) {
	return s.db.ScoreStats(ctx, q)
}

var _ store.Scorer = (*Store)(nil)
