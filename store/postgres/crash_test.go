package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/store/storetest"
)

// TestKillMidIngest kills a writer with SIGKILL in the middle of a COPY
// ingest and checks that every batch it saw acknowledged is in the store.
func TestKillMidIngest(t *testing.T) {
	dsn := os.Getenv(storetest.CrashWriterEnv) // set in the writer process
	if dsn == "" {
		dsn = freshSchema(t)
	}
	storetest.KillMidIngest(t, "TestKillMidIngest", dsn,
		func(ctx context.Context, dsn string) (store.Store, error) { return postgres.Open(ctx, dsn) })
}
