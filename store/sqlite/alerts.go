package sqlite

import (
	"context"
	"time"

	"github.com/loupe-dev/loupe/store"
)

// WindowStats implements store.WindowStater.
func (s *Store) WindowStats(ctx context.Context, q store.WindowQuery) (store.WindowStats, error) {
	return s.db.WindowStats(ctx, q)
}

// OpenFiring implements store.Alerts.
func (s *Store) OpenFiring(ctx context.Context, f store.Firing) (store.Firing, bool, error) {
	return s.db.OpenFiring(ctx, f)
}

// ResolveFiring implements store.Alerts.
func (s *Store) ResolveFiring(ctx context.Context, id string, at time.Time, value float64) (bool, error) {
	return s.db.ResolveFiring(ctx, id, at, value)
}

// AddDelivery implements store.Alerts.
func (s *Store) AddDelivery(ctx context.Context, d store.Delivery) error {
	return s.db.AddDelivery(ctx, d)
}

// Firings implements store.Alerts.
func (s *Store) Firings(ctx context.Context, f store.FiringFilter) ([]store.Firing, error) {
	return s.db.Firings(ctx, f)
}

var (
	_ store.WindowStater = (*Store)(nil)
	_ store.Alerts       = (*Store)(nil)
)
