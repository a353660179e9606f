package postgres_test

import (
	"context"
	"database/sql"
	"net/url"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
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
