// Package pgtest gives tests an empty PostgreSQL schema of their own in
// the test server that scripts/services.sh starts (LOUPE_TEST_POSTGRES),
// so that tests of several packages share one database without seeing
// each other's tables. Without LOUPE_TEST_POSTGRES a test skips, except
// under CI=true, where it fails (testrepo.Missing).
package pgtest

import (
	"database/sql"
	"net/url"
	"os"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/trace"
)

// DSN returns LOUPE_TEST_POSTGRES, or skips t without it (fails under CI).
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("LOUPE_TEST_POSTGRES")
	if dsn == "" {
		testrepo.Missing(t, "LOUPE_TEST_POSTGRES is not set (scripts/services.sh starts PostgreSQL and sets it)")
	}
	return dsn
}

// Schema creates an empty schema in the test database and returns a DSN
// whose search_path selects it; the schema, and the schemas of its
// projects (SCHEMA__PROJECT), are dropped when t ends.
func Schema(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
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
		if db, err := sql.Open("pgx", dsn); err == nil {
			db.Exec("DROP SCHEMA " + schema + " CASCADE")
			// and its projects' schemas (store.ProjectDSN: SCHEMA__PROJECT)
			if rows, err := db.Query(`SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, schema+"__"); err == nil {
				var names []string
				for rows.Next() {
					var n string
					if rows.Scan(&n) == nil {
						names = append(names, n)
					}
				}
				rows.Close()
				for _, n := range names {
					db.Exec(`DROP SCHEMA "` + strings.ReplaceAll(n, `"`, `""`) + `" CASCADE`)
				}
			}
			db.Close()
		}
	})
	return WithSchema(dsn, schema)
}

// WithSchema returns dsn with its search_path set to schema.
func WithSchema(dsn, schema string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + schema
}

// TerminateListeners ends the connections on which the stores of dsn's
// schema listen for each other's commits (store/postgres names them
// "loupe listen"), as a PostgreSQL restart or failover would, and returns
// how many it ended.
func TerminateListeners(t testing.TB, dsn string) int {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'loupe listen' AND query = $1`, `LISTEN "loupe `+u.Query().Get("search_path")+`"`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
