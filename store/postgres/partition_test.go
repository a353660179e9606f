package postgres_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// partitionRows counts the records each partition of records holds.
func partitionRows(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	rows, err := db.Query("SELECT tableoid::regclass::text, count(*) FROM records GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		got[name] = n
	}
	return got
}

// TestMigratePartitionsFromV4: a populated database of schema version 4
// (records in one table, traces from last week and from today) is
// migrated to day partitions: nothing is lost, today's records move out
// of the default partition into today's, the old ones stay in the
// default partition, search and paging still find them, new records get
// ids after the old ones, and retention still removes the old traces.
func TestMigratePartitionsFromV4(t *testing.T) {
	ctx := context.Background()
	dsn := freshSchema(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range append([]string{"CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)"}, postgres.Migrations[:4]...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("INSERT INTO meta VALUES ('schema_version', '4')"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	old := storetest.Gen(storetest.Spec{Name: "last-week", Start: now.Add(-8 * 24 * time.Hour), ToolOut: "an old wombat"})
	fresh := storetest.Gen(storetest.Spec{Name: "today", Start: now.Add(-time.Minute), ToolOut: "a fresh wombat"})
	var maxID int64
	for _, recs := range [][]trace.Record{old, fresh} {
		r0 := recs[0]
		if _, err := db.Exec("INSERT INTO traces (trace_id, name, started, last_time, records) VALUES ($1, $2, $3, $4, $5)",
			r0.TraceID[:], r0.Name, r0.Time.UnixNano(), recs[len(recs)-1].Time.UnixNano(), len(recs)); err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			r := &recs[i]
			// As version 4 stored them: the trigger fills tsv from body.
			if err := db.QueryRow("INSERT INTO records (trace_id, seq, ts, type, doc, body) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
				r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), r.AppendJSON(nil), "wombat "+r.Name).Scan(&maxID); err != nil {
				t.Fatal(err)
			}
		}
	}

	s := open(t, dsn)
	var v int
	if err := db.QueryRow("SELECT value::integer FROM meta WHERE key = 'schema_version'").Scan(&v); err != nil || v != postgres.SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", v, err, postgres.SchemaVersion)
	}
	parts := partitionRows(t, db)
	today := "records_p" + now.Format("20060102")
	if parts["records_default"] != len(old) || parts[today] != len(fresh) {
		t.Errorf("rows per partition %v; want %d in records_default and %d in %s", parts, len(old), len(fresh), today)
	}
	for _, recs := range [][]trace.Record{old, fresh} {
		page, err := s.Records(ctx, recs[0].TraceID, store.RecordRange{})
		if err != nil {
			t.Fatal(err)
		}
		storetest.SameRecords(t, page.Records, recs)
	}
	hits, err := s.Search(ctx, store.Query{Words: []string{"wombat"}, Limit: 1000})
	if err != nil || len(hits.Hits) != len(old)+len(fresh) {
		t.Errorf("search after migration: %d hits, %v; want %d", len(hits.Hits), err, len(old)+len(fresh))
	}
	more := storetest.Gen(storetest.Spec{Name: "after", Start: now})
	if n, err := s.Append(ctx, more); err != nil || n != len(more) {
		t.Fatalf("Append = %d, %v", n, err)
	}
	var minNew int64
	if err := db.QueryRow("SELECT min(id) FROM records WHERE trace_id = $1", more[0].TraceID[:]).Scan(&minNew); err != nil || minNew <= maxID {
		t.Errorf("new records' ids start at %d (%v), not after the old %d", minNew, err, maxID)
	}
	res, err := s.Prune(ctx, store.PrunePolicy{OlderThan: 7 * 24 * time.Hour})
	if err != nil || len(res.Traces) != 1 || res.Traces[0] != old[0].TraceID || res.Records != len(old) {
		t.Errorf("prune: %+v, %v; want the old trace and its %d records", res, err, len(old))
	}
}

// TestRetentionDropsPartitions: with partitions for the days past,
// retention drops the partitions wholly older than its cutoff (the
// tables go) and deletes the rest of the expired traces row by row; a
// trace that crosses the cutoff's day is removed whole, and newer ones
// stay.
func TestRetentionDropsPartitions(t *testing.T) {
	ctx := context.Background()
	dsn := freshSchema(t)
	s := open(t, dsn)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for d := 12; d >= 0; d -= 4 { // partitions from 13 days before now on
		if err := postgres.EnsurePartitions(s, ctx, now.Add(-time.Duration(d)*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	at := func(days float64) time.Time { return now.Add(-time.Duration(days * 24 * float64(time.Hour))) }
	oldest := storetest.Gen(storetest.Spec{Name: "ten-days", Start: at(10)})
	// Starts before the cutoff's day ends and runs into the next day.
	crossing := storetest.Gen(storetest.Spec{Name: "crossing", Start: at(7.6), Step: time.Hour})
	recent := storetest.Gen(storetest.Spec{Name: "two-days", Start: at(2)})
	for _, recs := range [][]trace.Record{oldest, crossing, recent} {
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	before := partitionRows(t, db)
	if before["records_default"] != 0 {
		t.Errorf("records in the default partition: %v", before)
	}
	res, err := s.Prune(ctx, store.PrunePolicy{OlderThan: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Traces) != 2 || res.Records != len(oldest)+len(crossing) {
		t.Errorf("pruned %d traces, %d records; want 2 and %d", len(res.Traces), res.Records, len(oldest)+len(crossing))
	}
	after := partitionRows(t, db)
	cutoff := now.Add(-7 * 24 * time.Hour)
	var tables []string
	if err := func() error {
		rows, err := db.Query("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'records'::regclass")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			rows.Scan(&n)
			tables = append(tables, n)
		}
		return rows.Err()
	}(); err != nil {
		t.Fatal(err)
	}
	for _, n := range tables {
		if d, err := time.Parse("20060102", n[len("records_p"):]); err == nil && !d.Add(24*time.Hour).After(cutoff) {
			t.Errorf("partition %s ends before the cutoff %s and is still there", n, cutoff)
		}
	}
	total := 0
	for _, n := range after {
		total += n
	}
	if total != len(recent) {
		t.Errorf("records left %v, want only the recent trace's %d", after, len(recent))
	}
	if _, err := s.Trace(ctx, recent[0].TraceID); err != nil {
		t.Errorf("recent trace: %v", err)
	}
	for _, id := range []trace.TraceID{oldest[0].TraceID, crossing[0].TraceID} {
		if _, err := s.Trace(ctx, id); err == nil {
			t.Errorf("expired trace %s is still there", id)
		}
	}
}
