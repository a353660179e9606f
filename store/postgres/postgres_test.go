package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// testDSN returns LOUPE_TEST_POSTGRES. Without it the tests skip, except
// under CI, which must run them (scripts/services.sh starts a server).
func testDSN(t testing.TB) string {
	dsn := os.Getenv("LOUPE_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but LOUPE_TEST_POSTGRES is not: scripts/services.sh should have started PostgreSQL; the postgres tests must run in CI")
		}
		t.Skip("LOUPE_TEST_POSTGRES is not set (scripts/test.sh sets it)")
	}
	return dsn
}

// freshSchema creates an empty schema and returns a DSN whose search_path
// selects it, so each test gets an empty store in the shared database.
func freshSchema(t testing.TB) string {
	dsn := testDSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	schema := "t_" + trace.NewSpanID().String()
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		if err == nil {
			db.Exec("DROP SCHEMA " + schema + " CASCADE")
			db.Close()
		}
	})
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + schema
}

func open(t testing.TB, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, freshSchema(t)) })
}

func TestOpenChoosesPostgres(t *testing.T) {
	dsn := freshSchema(t)
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*postgres.Store); !ok {
		t.Fatalf("store.Open gave %T", s)
	}
}

func TestNewerSchemaIsReadOnly(t *testing.T) {
	dsn := freshSchema(t)
	open(t, dsn).Close()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE meta SET value = $1 WHERE key = 'schema_version'", fmt.Sprint(postgres.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	storetest.CheckReadOnly(t, open(t, dsn), postgres.SchemaVersion+1, postgres.SchemaVersion)
}
