package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/store/storetest"
)

// TestKillMidIngest kills a writer with SIGKILL in the middle of ingest and
// checks that every batch it saw acknowledged is in the store.
func TestKillMidIngest(t *testing.T) {
	storetest.KillMidIngest(t, "TestKillMidIngest", filepath.Join(t.TempDir(), "loupe.db"),
		func(ctx context.Context, dsn string) (store.Store, error) { return sqlite.Open(ctx, dsn) })
}
