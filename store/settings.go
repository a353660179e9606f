package store

import "context"

// Settings is implemented by backends that keep small named values beside
// the traces, shared by every process that uses the store: the collector
// keeps its API keys (hashed) here, so that several `loupe serve`
// processes on one PostgreSQL accept the same keys and see a revocation at
// once. Keys are namespaced by their users ("apikey:…"). The SQLite and
// PostgreSQL backends implement it with their meta table, so it needs no
// schema change. Methods are safe for concurrent use.
type Settings interface {
	// Settings returns every setting whose key starts with prefix.
	Settings(ctx context.Context, prefix string) (map[string]string, error)
	// PutSetting creates or replaces a setting. A read-only store (see
	// SchemaVersionError) refuses.
	PutSetting(ctx context.Context, key, value string) error
	// DeleteSetting removes a setting and reports whether it existed.
	DeleteSetting(ctx context.Context, key string) (bool, error)
}
