package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
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

// TestMigrateFromV3 opens a store written at schema version 3 (before
// unpriced calls were counted): its traces read as fully priced, as they
// did, and calls of unknown cost appended after the upgrade are counted.
func TestMigrateFromV3(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for _, q := range migrations[:3] {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	old := storetest.Gen(storetest.Spec{Name: "old"})
	if _, err := db.Exec("INSERT INTO meta VALUES ('schema_version', '3')"); err != nil {
		t.Fatal(err)
	}
	// A summary row as version 3 wrote it.
	if _, err := db.Exec("INSERT INTO traces (trace_id, name, started, last_time, status, model_calls, cost) VALUES (?, 'old', 1, 2, 'success', 2, 0.002)", old[0].TraceID[:]); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sum, err := s.List(ctx, store.ListQuery{})
	if err != nil || len(sum.Traces) != 1 {
		t.Fatalf("List: %+v, %v", sum, err)
	}
	if x := sum.Traces[0]; x.UnpricedCalls != 0 || !x.CostKnown() || x.CostUSD != 0.002 {
		t.Errorf("old trace after migration: cost %v, %d unpriced; want 0.002, known", x.CostUSD, x.UnpricedCalls)
	}
	recs := storetest.Gen(storetest.Spec{Name: "new"})
	for i := range recs {
		if recs[i].Type == trace.TypeModelCall {
			recs[i].Usage.CostUSD, recs[i].Usage.CostUnknown = 0, true
		}
	}
	if _, err := s.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	tr, err := s.Trace(ctx, recs[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Summary.UnpricedCalls != tr.Summary.ModelCalls || tr.Summary.ModelCalls == 0 {
		t.Errorf("new trace: %d unpriced of %d calls, want all", tr.Summary.UnpricedCalls, tr.Summary.ModelCalls)
	}
}

// TestMigrateSessions opens a populated store at the schema version
// before sessions: traces tagged with a session by OTLP ingest get it.
func TestMigrateSessions(t *testing.T) {
	const before = 4
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v4.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for _, q := range migrations[:before] {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("INSERT INTO meta VALUES ('schema_version', ?)", before); err != nil {
		t.Fatal(err)
	}
	tagged, untagged := storetest.MigratedSessions()
	for _, recs := range [][]trace.Record{tagged, untagged} {
		r := &recs[0]
		// The summary rows as the schema before wrote them.
		if _, err := db.Exec("INSERT INTO traces (trace_id, name, started, last_time, status, records) VALUES (?, ?, ?, ?, 'success', ?)",
			r.TraceID[:], r.Name, r.Time.UnixNano(), recs[len(recs)-1].Time.UnixNano(), len(recs)); err != nil {
			t.Fatal(err)
		}
		for _, tag := range r.Tags() {
			if _, err := db.Exec("INSERT INTO trace_tags (trace_id, tag) VALUES (?, ?)", r.TraceID[:], tag); err != nil {
				t.Fatal(err)
			}
		}
		for i := range recs {
			r := &recs[i]
			if _, err := db.Exec("INSERT INTO records (trace_id, seq, ts, type, doc) VALUES (?, ?, ?, ?, ?)",
				r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), r.AppendJSON(nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	db.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckMigratedSessions(t, s)
}

// TestMigrateScores upgrades a populated store of schema version 5 (the
// one before scores) and checks its traces and the new scores.
func TestMigrateScores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v4.db")
	storetest.CheckScoresMigration(t, func(t *testing.T) store.Store {
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}, func(t *testing.T) {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range storetest.Downgrade(t, migrations, 5, "CREATE TABLE scores") {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	})
}
