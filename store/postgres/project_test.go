package postgres_test

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/trace"
)

// A project's store is a schema of its own in the same database, made on
// first open; what one project stores, the other cannot see.
func TestProjectSchemas(t *testing.T) {
	ctx := context.Background()
	dsn := freshSchema(t)
	pdsn, err := store.ProjectDSN(dsn, "team_a")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(pdsn)
	schema := u.Query().Get("search_path")
	t.Cleanup(func() {
		if db, err := sql.Open("pgx", testDSN(t)); err == nil {
			db.Exec(`DROP SCHEMA IF EXISTS "` + schema + `" CASCADE`)
			db.Close()
		}
	})
	root, proj := open(t, dsn), open(t, pdsn) // the project's schema is made here
	id := trace.NewTraceID()
	recs := []trace.Record{
		{V: 1, TraceID: id, SpanID: trace.NewSpanID(), Seq: 1, Time: time.Now(), Type: trace.TypeRunStart, Name: "in-a"},
	}
	if _, err := proj.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Trace(ctx, id); err == nil {
		t.Fatal("the default project's store sees a project's trace")
	}
	if tr, err := proj.Trace(ctx, id); err != nil || len(tr.Records) != 1 {
		t.Fatalf("the project's trace: %v %v", tr, err)
	}
	// Opening again finds the schema (and its tables) as they are.
	again := open(t, pdsn)
	if _, err := again.Trace(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// Dropping a project drops its schema and nothing else: not the default
// project's, not another project's, whatever name is asked for.
func TestDropProjectSchema(t *testing.T) {
	ctx := context.Background()
	dsn := freshSchema(t)
	schemaOf := func(pdsn string) string {
		u, _ := url.Parse(pdsn)
		return u.Query().Get("search_path")
	}
	db, err := sql.Open("pgx", testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exists := func(schema string) bool {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	stores := map[string]string{}
	for _, p := range []string{"team_a", "team_b"} {
		pdsn, err := store.ProjectDSN(dsn, p)
		if err != nil {
			t.Fatal(err)
		}
		stores[p] = pdsn
		s := schemaOf(pdsn)
		t.Cleanup(func() { db.Exec(`DROP SCHEMA IF EXISTS "` + s + `" CASCADE`) })
		st := open(t, pdsn)
		recs := []trace.Record{{V: 1, TraceID: trace.NewTraceID(), SpanID: trace.NewSpanID(), Seq: 1, Time: time.Now(), Type: trace.TypeRunStart, Name: p}}
		if _, err := st.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	root := open(t, dsn)
	base := schemaOf(dsn)
	// Names that are no project, or name the default store or another
	// project's schema, drop nothing.
	for _, name := range []string{"default", "", "../x", "a;drop", "DEFAULT", "team_a\" CASCADE; --", base, schemaOf(stores["team_b"]), "Team_A"} {
		if err := store.DropProject(ctx, dsn, name); err == nil && name != base && name != schemaOf(stores["team_b"]) {
			t.Errorf("DropProject(%q) = nil", name)
		}
	}
	for _, bad := range []string{
		testDSN(t), // no search_path
		strings.Replace(stores["team_a"], "search_path=", "search_path=public%2C", 1),
		strings.Replace(stores["team_a"], "search_path="+schemaOf(stores["team_a"]), "search_path="+base, 1),
	} {
		if err := postgres.DropSchema(ctx, bad); err == nil || !strings.Contains(err.Error(), "not a project's schema") {
			t.Errorf("DropSchema(%s) = %v", bad, err)
		}
	}
	if !exists(base) || !exists(schemaOf(stores["team_a"])) || !exists(schemaOf(stores["team_b"])) {
		t.Fatal("a refused drop dropped a schema")
	}
	if err := store.DropProject(ctx, dsn, "team_a"); err != nil {
		t.Fatal(err)
	}
	if exists(schemaOf(stores["team_a"])) {
		t.Fatal("team_a's schema is still there")
	}
	if !exists(base) || !exists(schemaOf(stores["team_b"])) {
		t.Fatal("dropping team_a dropped another schema")
	}
	if err := store.DropProject(ctx, dsn, "team_a"); err != nil {
		t.Fatalf("dropping a project that is gone: %v", err)
	}
	if _, err := root.Settings(ctx, ""); err != nil {
		t.Fatalf("the default store after the drop: %v", err)
	}
	// Made again, the project is empty.
	again := open(t, stores["team_a"])
	if ts, err := again.List(ctx, store.ListQuery{}); err != nil || len(ts.Traces) != 0 {
		t.Fatalf("team_a made again: %v %v", ts, err)
	}
}
