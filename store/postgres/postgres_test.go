package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/loupe-dev/loupe/internal/pgtest"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// testDSN returns LOUPE_TEST_POSTGRES (see pgtest.DSN).
func testDSN(t testing.TB) string { return pgtest.DSN(t) }

// freshSchema returns a DSN of an empty schema of its own (pgtest.Schema),
// so each test gets an empty store in the shared database.
func freshSchema(t testing.TB) string { return pgtest.Schema(t) }

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

// TestMigrateFromV1 builds a store at schema version 1 holding a trace
// (written as the first schema's Append did), opens it with this build and
// checks the old trace is still found and new appends are indexed.
func TestMigrateFromV1(t *testing.T) {
	ctx := context.Background()
	dsn := freshSchema(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)", postgres.Migrations[0], "INSERT INTO meta VALUES ('schema_version', '1')"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	old := storetest.Gen(storetest.Spec{ToolOut: "a rare marmoset"})
	for i := range old {
		r := &old[i]
		if _, err := db.Exec("INSERT INTO records (trace_id, seq, ts, type, doc, tsv) VALUES ($1, $2, $3, $4, $5, to_tsvector('simple', $6))",
			r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), r.AppendJSON(nil), "a rare marmoset"); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dsn)
	var v int
	if err := db.QueryRow("SELECT value::integer FROM meta WHERE key = 'schema_version'").Scan(&v); err != nil || v != postgres.SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", v, err, postgres.SchemaVersion)
	}
	recs := storetest.Gen(storetest.Spec{ToolOut: "another marmoset"})
	if n, err := s.Append(ctx, recs); err != nil || n != len(recs) {
		t.Fatalf("Append = %d, %v; want %d", n, err, len(recs))
	}
	page, err := s.Search(ctx, store.Query{Words: []string{"another", "marmoset"}})
	if err != nil || len(page.Hits) != 2 || page.Hits[0].Field != "output" {
		t.Fatalf("search after migration: %+v, %v", page.Hits, err)
	}
	// The old records have no summary rows (written raw above), so ask the
	// text index directly.
	var n int
	if err := db.QueryRow("SELECT count(*) FROM records WHERE tsv @@ to_tsquery('simple', 'marmoset')").Scan(&n); err != nil || n != 2+len(old) {
		t.Fatalf("old and new records matching: %d, %v; want %d", n, err, 2+len(old))
	}
	// The body column only feeds the index: nothing is kept in it.
	var bodies int
	if err := db.QueryRow("SELECT count(*) FROM records WHERE body IS NOT NULL").Scan(&bodies); err != nil || bodies != 0 {
		t.Errorf("%d records keep a body, %v; want 0", bodies, err)
	}
}

// TestLegacyNumbers checks that a store holding numbers older versions
// accepted (and sums they let overflow) is still read.
func TestLegacyNumbers(t *testing.T) {
	dsn := freshSchema(t)
	s := open(t, dsn)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.CheckLegacyNumbers(t, s, storetest.Legacy{
		Append: func(ctx context.Context, recs []trace.Record) (int, error) { return postgres.AppendValid(s, ctx, recs) },
		Exec: func(ctx context.Context, q string) error {
			_, err := db.ExecContext(ctx, q)
			return err
		},
		// PostgreSQL keeps the NaN and infinite costs of a Go sum.
		SQL: []string{
			"UPDATE traces SET cost = 'NaN' WHERE name = 'legacy-huge'",
			"UPDATE traces SET cost = 'Infinity' WHERE name = 'legacy-huge-2'",
			"UPDATE trace_models SET cost = 'NaN' WHERE trace_id IN (SELECT trace_id FROM traces WHERE name = 'legacy-huge')",
			"UPDATE trace_models SET cost = 'Infinity' WHERE trace_id IN (SELECT trace_id FROM traces WHERE name = 'legacy-huge-2')",
		},
	})
}

// TestMigrateSessions opens a populated store at the schema version
// before sessions: traces tagged with a session by OTLP ingest get it.
func TestMigrateSessions(t *testing.T) {
	const before = 5
	dsn := freshSchema(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for _, q := range postgres.Migrations[:before] {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("INSERT INTO meta VALUES ('schema_version', $1)", fmt.Sprint(before)); err != nil {
		t.Fatal(err)
	}
	tagged, untagged := storetest.MigratedSessions()
	for _, recs := range [][]trace.Record{tagged, untagged} {
		r := &recs[0]
		if _, err := db.Exec("INSERT INTO traces (trace_id, name, started, last_time, status, records) VALUES ($1, $2, $3, $4, 'success', $5)",
			r.TraceID[:], r.Name, r.Time.UnixNano(), recs[len(recs)-1].Time.UnixNano(), len(recs)); err != nil {
			t.Fatal(err)
		}
		for _, tag := range r.Tags() {
			if _, err := db.Exec("INSERT INTO trace_tags (trace_id, tag) VALUES ($1, $2)", r.TraceID[:], tag); err != nil {
				t.Fatal(err)
			}
		}
		for i := range recs {
			r := &recs[i]
			if _, err := db.Exec("INSERT INTO records (trace_id, seq, ts, type, doc, tsv) VALUES ($1, $2, $3, $4, $5, to_tsvector('simple', ''))",
				r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), r.AppendJSON(nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	storetest.CheckMigratedSessions(t, open(t, dsn))
}

func TestScores(t *testing.T) {
	storetest.CheckScores(t, func(t *testing.T) store.Store { return open(t, freshSchema(t)) })
}

// TestMigrateScores upgrades a populated store of schema version 6 (the
// one before scores) and checks its traces and the new scores.
func TestMigrateScores(t *testing.T) {
	dsn := freshSchema(t)
	storetest.CheckScoresMigration(t, func(t *testing.T) store.Store { return open(t, dsn) }, func(t *testing.T) {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range storetest.Downgrade(t, postgres.Migrations, 6, "CREATE TABLE scores") {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSearchDiacriticsOldVectors: records indexed before the index folded
// diacritics (their tsvector keeps café) are still found by a query with
// them; records indexed since are found with or without them.
func TestSearchDiacriticsOldVectors(t *testing.T) {
	ctx := context.Background()
	dsn := freshSchema(t)
	s := open(t, dsn)
	text := "Café crème, s'il vous plaît"
	now, old := storetest.Gen(storetest.Spec{Name: "now", ToolOut: text}), storetest.Gen(storetest.Spec{Name: "old", ToolOut: text})
	for _, recs := range [][]trace.Record{now, old} {
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE records SET tsv = to_tsvector('simple', $1) WHERE trace_id = $2 AND tsv @@ to_tsquery('simple', 'creme')", text, old[0].TraceID[:]); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		q    string
		want []trace.TraceID
	}{
		{"café", []trace.TraceID{now[0].TraceID, old[0].TraceID}},
		{`"café crème"`, []trace.TraceID{now[0].TraceID, old[0].TraceID}},
		{"cafe", []trace.TraceID{now[0].TraceID}},
		{"PLAIT", []trace.TraceID{now[0].TraceID}},
	} {
		q, err := store.ParseQuery(tt.q)
		if err != nil {
			t.Fatal(err)
		}
		page, err := s.Search(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", tt.q, err)
		}
		got := map[trace.TraceID]bool{}
		for _, h := range page.Hits {
			got[h.TraceID] = true
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: hits in %d traces %v, want %v", tt.q, len(got), got, tt.want)
		}
		for _, id := range tt.want {
			if !got[id] {
				t.Errorf("%s: no hit in trace %s", tt.q, id)
			}
		}
	}
}
