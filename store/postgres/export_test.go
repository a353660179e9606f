package postgres

import (
	"context"
	"time"
)

// Migrations exposes the migrations to the external tests.
var Migrations = migrations

// AppendValid is Append without validation, for the tests that write what
// older versions could store.
var AppendValid = (*Store).appendValid

// EnsurePartitions makes the day partitions around now, as Open does for
// the present day: the tests use it to have partitions of days past.
func EnsurePartitions(s *Store, ctx context.Context, now time.Time) error {
	s.partitionsReady.Store(0)
	return s.ensurePartitions(ctx, now)
}
