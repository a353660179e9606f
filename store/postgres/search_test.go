package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// TestMigrateTypeIndex upgrades a populated store of schema version 9
// (records in the default partition and in a day partition, indexed by
// (type, id) alone) to the covering index by type: every partition gets
// it, the old index goes, and searches by filters find what they found
// before, page by page.
func TestMigrateTypeIndex(t *testing.T) {
	ctx := context.Background()
	dsn := freshSchema(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := open(t, dsn)
	now := time.Now().UTC()
	for i := range 12 {
		spec := storetest.Spec{Name: fmt.Sprint("run-", i), Start: now.Add(-time.Duration(i) * time.Minute), Tool: "calc", Model: "claude"}
		if i%3 == 0 {
			spec.Start = now.Add(-8*24*time.Hour - time.Duration(i)*time.Minute) // the default partition
		}
		if i%2 == 0 {
			spec.ToolErr = "upstream down"
			spec.Model = "gpt-4o"
		}
		if i%4 == 1 {
			spec.Tool = "search"
		}
		recs := storetest.Gen(spec)
		if n, err := s.Append(ctx, recs); err != nil || n != len(recs) {
			t.Fatalf("Append = %d, %v", n, err)
		}
	}
	queries := []string{
		"type:tool.error",
		"type:tool.error model:claude",
		"type:tool.error model:gpt-4o tool:calc",
		"type:tool.end type:tool.error tool:calc",
		"tool:calc",
		"has:errors",
		"type:run.start name:run-3",
	}
	// Each query's hits, one page of all and pages of 2.
	hits := func(s store.Store) [][]string {
		var out [][]string
		for _, qs := range queries {
			q, err := store.ParseQuery(qs)
			if err != nil {
				t.Fatal(err)
			}
			for _, limit := range []int{1000, 2} {
				q.Limit, q.Cursor = limit, ""
				var keys []string
				for range 100 {
					page, err := s.Search(ctx, q)
					if err != nil {
						t.Fatalf("Search(%s): %v", qs, err)
					}
					for _, h := range page.Hits {
						keys = append(keys, fmt.Sprintf("%s/%d %s %s %s %s", h.TraceID, h.Seq, h.Type, h.Name, h.TraceName, h.Time.Format(time.RFC3339Nano)))
					}
					if q.Cursor = page.Next; q.Cursor == "" {
						break
					}
				}
				out = append(out, keys)
			}
		}
		return out
	}
	// Back to version 9, as that version built the store.
	for _, q := range []string{
		"DROP INDEX records_type_cover",
		"CREATE INDEX records_type ON records (type, id)",
		"UPDATE meta SET value = '9' WHERE key = 'schema_version'",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	before := hits(s)
	if len(before[0]) != 6 || len(before[2]) != 0 {
		t.Fatalf("before the migration: %d tool errors, %d of gpt-4o's calc runs that call claude; want 6 and 0", len(before[0]), len(before[2]))
	}
	s.Close()

	s = open(t, dsn)
	var v int
	if err := db.QueryRow("SELECT value::integer FROM meta WHERE key = 'schema_version'").Scan(&v); err != nil || v != postgres.SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", v, err, postgres.SchemaVersion)
	}
	// The index of every partition, and no other index by type.
	var parts, covered int
	if err := db.QueryRow("SELECT count(*) FROM pg_inherits WHERE inhparent = 'records'::regclass").Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT count(*) FROM pg_inherits WHERE inhparent = 'records_type_cover'::regclass").Scan(&covered); err != nil {
		t.Fatal(err)
	}
	if parts < 2 || covered != parts {
		t.Errorf("%d of %d partitions have the covering index", covered, parts)
	}
	var old int
	if err := db.QueryRow("SELECT count(*) FROM pg_class WHERE relname = 'records_type' AND relnamespace = current_schema()::regnamespace").Scan(&old); err != nil || old != 0 {
		t.Errorf("records_type is still there (%d, %v)", old, err)
	}
	after := hits(s)
	for i := range before {
		if !slices.Equal(before[i], after[i]) {
			t.Errorf("%s (page %d): after the migration\n%q\nwant\n%q", queries[i/2], []int{1000, 2}[i%2], after[i], before[i])
		}
	}
	// A new day's partition gets the index too.
	if err := postgres.EnsurePartitions(s, ctx, now.Add(5*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var parts2, covered2 int
	if err := db.QueryRow("SELECT count(*) FROM pg_inherits WHERE inhparent = 'records'::regclass").Scan(&parts2); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT count(*) FROM pg_inherits WHERE inhparent = 'records_type_cover'::regclass").Scan(&covered2); err != nil {
		t.Fatal(err)
	}
	if parts2 <= parts || covered2 != parts2 {
		t.Errorf("after new partitions: %d of %d have the covering index (were %d)", covered2, parts2, parts)
	}
	recs := storetest.Gen(storetest.Spec{Name: "later", Start: now.Add(4 * 24 * time.Hour), ToolErr: "late failure"})
	if _, err := s.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	page, err := s.Search(ctx, store.Query{Types: []trace.Type{trace.TypeToolError}, Limit: 1})
	if err != nil || len(page.Hits) != 1 || page.Hits[0].TraceID != recs[0].TraceID || page.Next == "" {
		t.Errorf("newest tool error: %+v, %v; want the later run's, and a next page", page, err)
	}
}
