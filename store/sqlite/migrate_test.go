package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/storetest"
)

// TestMigrateFromV1 builds a store at schema version 1 with records in it,
// opens it with this build and checks the upgrade kept and re-indexed them.
func TestMigrateFromV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)", migrations[0], "INSERT INTO meta VALUES ('schema_version', '1')"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	recs := storetest.Gen(storetest.Spec{ToolOut: "a rare marmoset"})
	for i := range recs {
		r := &recs[i]
		if _, err := db.Exec("INSERT INTO records (trace_id, seq, ts, type, doc) VALUES (?, ?, ?, ?, ?)",
			r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), r.AppendJSON(nil)); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	if err := s.db.SQL.QueryRow("SELECT value FROM meta WHERE key = 'schema_version'").Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", v, err, SchemaVersion)
	}
	// The summary tables were not written by the raw inserts above, so
	// query the text index directly.
	for _, q := range []struct {
		words []string
		want  int
	}{{[]string{"marmoset"}, 2}, {[]string{"weather", "paris"}, 2}, {[]string{"agent"}, 2}} { // run.start and run.end carry the name} {
		var n int
		terms := `"` + strings.Join(q.words, `" AND "`) + `"`
		if err := s.db.SQL.QueryRow("SELECT count(*) FROM records_fts WHERE records_fts MATCH ?", terms).Scan(&n); err != nil || n != q.want {
			t.Errorf("%v: %d matches, %v; want %d", q.words, n, err, q.want)
		}
	}
	// New appends go to the new index.
	if _, err := s.Append(ctx, storetest.Gen(storetest.Spec{ToolOut: "another marmoset"})); err != nil {
		t.Fatal(err)
	}
	page, err := s.Search(ctx, store.Query{Words: []string{"another", "marmoset"}})
	if err != nil || len(page.Hits) != 2 || page.Hits[0].Field != "output" {
		t.Fatalf("search after migration: %+v, %v", page.Hits, err)
	}
}
