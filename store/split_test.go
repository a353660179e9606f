package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/store/storetest"
)

// TestSplitGroups splits two SQLite stores (the replica another file,
// opened read-only): the split is a GroupAppender because the primary is,
// and its groups go to the primary. (store/postgres tests the routing of
// every method against a replica that may only read.)
func TestSplitGroups(t *testing.T) {
	ctx := context.Background()
	primary, _, sp := splitSQLite(t)
	ga, ok := sp.(store.GroupAppender)
	if !ok {
		t.Fatalf("the split of a SQLite primary is not a GroupAppender")
	}
	a, b := storetest.Gen(storetest.Spec{Name: "a"}), storetest.Gen(storetest.Spec{Name: "b"})
	ga1, err := ga.PrepareGroup(a)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := ga.PrepareGroup(b)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ga.AppendGroups(ctx, []store.Group{ga1, gb})
	if err != nil || len(n) != 2 || n[0] != len(a) || n[1] != len(b) {
		t.Fatalf("AppendGroups: %v, %v", n, err)
	}
	if _, err := primary.Trace(ctx, b[0].TraceID); err != nil {
		t.Errorf("the group is not on the primary: %v", err)
	}
	if _, err := sp.Trace(ctx, b[0].TraceID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Trace read the primary: %v", err)
	}
}

// TestPrimary: Primary is a split's primary, and any other store itself.
func TestPrimary(t *testing.T) {
	primary, replica, sp := splitSQLite(t)
	if got := store.Primary(sp); got != store.Store(primary) {
		t.Errorf("Primary(split) = %T %p, want the primary %p", got, got, primary)
	}
	if got := store.Primary(replica); got != store.Store(replica) {
		t.Errorf("Primary(a store) = %p, want itself %p", got, replica)
	}
}

// splitSQLite splits two SQLite stores in a temporary folder, the replica
// another file opened read-only; the split is closed when t ends.
func splitSQLite(t *testing.T) (primary *sqlite.Store, replica, sp store.Store) {
	ctx := context.Background()
	dir := t.TempDir()
	primary, err := sqlite.Open(ctx, filepath.Join(dir, "primary.db"))
	if err != nil {
		t.Fatal(err)
	}
	rpath := filepath.Join(dir, "replica.db")
	rw, err := sqlite.Open(ctx, rpath)
	if err != nil {
		t.Fatal(err)
	}
	rw.Close()
	if replica, err = sqlite.OpenReadOnly(ctx, rpath); err != nil {
		t.Fatal(err)
	}
	if sp, err = store.Split(primary, replica); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return primary, replica, sp
}
