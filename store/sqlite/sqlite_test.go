package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/store/storetest"
)

func open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "loupe.db"))
	})
}

func TestOpenChoosesSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.db")
	s, err := store.Open(context.Background(), "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*sqlite.Store); !ok {
		t.Fatalf("store.Open gave %T", s)
	}
}

func TestNewerSchemaIsReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loupe.db")
	s := open(t, path)
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE meta SET value = ? WHERE key = 'schema_version'", sqlite.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	storetest.CheckReadOnly(t, open(t, path), sqlite.SchemaVersion+1, sqlite.SchemaVersion)
}
