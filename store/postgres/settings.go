package postgres

import (
	"context"

	"github.com/loupe-dev/loupe/store"
)

// Settings implements store.Settings with the store's meta table.
func (s *Store) Settings(ctx context.Context, prefix string) (map[string]string, error) {
	return s.db.Settings(ctx, prefix)
}

// PutSetting implements store.Settings.
func (s *Store) PutSetting(ctx context.Context, key, value string) error {
	return s.db.PutSetting(ctx, key, value)
}

// DeleteSetting implements store.Settings.
func (s *Store) DeleteSetting(ctx context.Context, key string) (bool, error) {
	return s.db.DeleteSetting(ctx, key)
}

var _ store.Settings = (*Store)(nil)
