package postgres_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loupe-dev/loupe/internal/pgtest"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/internal/sqlstore"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// BenchmarkIngest compares the store sink (tracer → background dispatcher
// with Block → store.Sink → Append, batches of storetest.SinkBatch) with
// PostgreSQL's raw COPY rate for the same rows: one plain COPY per batch of
// the same size, each in its own transaction.
//
//   - raw-schema copies into the records table of a fresh store: its
//     unique (trace id, seq), (type, id) and GIN text indexes, and the
//     trigger that turns the body column into the tsvector. This is the
//     baseline: what any writer of these rows into this schema pays.
//   - raw-copy copies into a bare table with the records table's columns
//     (no body, no tsvector) and no index, for context.
//
// LOUPE_BENCH_RECORDS sets the size (default 50000).
func BenchmarkIngest(b *testing.B) {
	n := storetest.BenchRecords(50000)
	ctx := context.Background()
	for _, bc := range []struct {
		name   string
		schema bool
	}{{"raw-copy", false}, {"raw-schema", true}} {
		b.Run(bc.name, func(b *testing.B) {
			recs := storetest.SinkData(n)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				dsn := freshSchema(b)
				cols := []string{"trace_id", "seq", "ts", "type", "doc"}
				if bc.schema {
					open(b, dsn).Close() // creates the schema
					cols = append(cols, "body")
				}
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					b.Fatal(err)
				}
				if !bc.schema {
					if _, err := conn.Exec(ctx, "CREATE TABLE records (trace_id bytea, seq bigint, ts bigint, type text, doc bytea)"); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				start := time.Now()
				for lo := 0; lo < len(recs); lo += storetest.SinkBatch {
					part := recs[lo:min(lo+storetest.SinkBatch, len(recs))]
					tx, err := conn.Begin(ctx)
					if err != nil {
						b.Fatal(err)
					}
					var buf []byte
					_, err = tx.CopyFrom(ctx, pgx.Identifier{"records"}, cols,
						pgx.CopyFromSlice(len(part), func(i int) ([]any, error) {
							r := &part[i]
							buf = r.AppendJSON(buf[:0])
							v := []any{r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), buf}
							if bc.schema {
								v = append(v, sqlstore.Body(r))
							}
							return v, nil
						}))
					if err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(recs))/time.Since(start).Seconds(), "records/s")
				b.StopTimer()
				conn.Close(ctx)
				b.StartTimer()
			}
		})
	}
	b.Run("sink", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			s := open(b, freshSchema(b))
			b.StartTimer()
			start := time.Now()
			got := storetest.RunSink(b, s, n)
			b.ReportMetric(float64(got)/time.Since(start).Seconds(), "records/s")
			b.StopTimer()
			s.Close()
			b.StartTimer()
		}
	})
}

// benchStore returns a store holding the benchmark data set of about n
// records (buildBench), in a schema of LOUPE_TEST_POSTGRES named for n
// that is built once and kept between runs, beside the templates it was
// copied from (drop them by hand: DROP SCHEMA bench_N, bench_N_tpl
// CASCADE). It checks that traces of the set read back as the store's own
// Append would have stored them (benchCheck), and reports the bytes the
// data set takes on disk per record: tables, indexes and TOAST, every
// partition.
func benchStore(b *testing.B, n int) *postgres.Store {
	dsn := testDSN(b)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	schema := "bench_" + strconv.Itoa(n)
	sdsn := pgtest.WithSchema(dsn, schema)
	var traces int
	db.QueryRow("SELECT value::integer FROM " + schema + ".meta WHERE key = 'bench_traces'").Scan(&traces)
	if traces == 0 {
		// Nothing, or what a build that did not finish left.
		if _, err := db.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema); err != nil {
			b.Fatal(err)
		}
		t := time.Now()
		s := open(b, sdsn)
		traces = buildBench(b, dsn, schema, n)
		s.Close()
		if _, err := db.Exec("INSERT INTO "+schema+".meta VALUES ('bench_traces', $1)", strconv.Itoa(traces)); err != nil {
			b.Fatal(err)
		}
		b.Logf("built schema %s with %d traces (about %d records) in %v", schema, traces, n, time.Since(t).Round(time.Second))
	}
	s := open(b, sdsn)
	benchCheck(b, s, schema, traces)
	var bytes, records int64
	if err := db.QueryRow(`SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
		JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&bytes); err != nil {
		b.Fatal(err)
	}
	if err := db.QueryRow("SELECT count(*) FROM " + schema + ".records").Scan(&records); err != nil {
		b.Fatal(err)
	}
	b.Logf("schema %s: %d records, %d bytes on disk, %.0f bytes per record", schema, records, bytes, float64(bytes)/float64(records))
	return s
}

// BenchmarkQueries measures p50/p95 latency of the CLI's and the UI's
// common queries (storetest.BenchQueries) on n records (about 20 per
// trace; LOUPE_BENCH_RECORDS, default 50000), in day partitions.
func BenchmarkQueries(b *testing.B) {
	storetest.BenchQueries(b, benchStore(b, storetest.BenchRecords(50000)))
}

// BenchmarkNotify measures what the commit notices (notify.go) cost
// concurrent writers: 32 goroutines appending small batches (one trace of
// 4 records, as small ingest requests are) to one Store, with the notices
// sent ("notify") and without ("silent"), with a watcher listening to
// them. PostgreSQL serializes the commits of the transactions that notify
// until their commit is flushed, so this is where a notice per ingest
// transaction would show; it shows only with fsync on (the test server of
// scripts/services.sh runs with fsync off).
func BenchmarkNotify(b *testing.B) {
	for _, silent := range []bool{false, true} {
		name := "notify"
		if silent {
			name = "silent"
		}
		b.Run(name, func(b *testing.B) {
			dsn := freshSchema(b)
			s, w := open(b, dsn), open(b, dsn)
			if silent {
				postgres.Silence(s)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var seen atomic.Int64
			if err := w.WatchCommits(ctx, store.CommitWatch{Commit: func(store.CommitNotice) { seen.Add(1) }}); err != nil {
				b.Fatal(err)
			}
			var next atomic.Uint64
			b.SetParallelism(32 / runtime.GOMAXPROCS(0))
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					recs := recsOf(1, 1, 2, 3, 4)
					for j := range recs {
						recs[j].TraceID[8] = byte(i >> 24)
						recs[j].TraceID[9] = byte(i >> 16)
						recs[j].TraceID[10] = byte(i >> 8)
						recs[j].TraceID[11] = byte(i)
					}
					if _, err := s.Append(ctx, recs); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(4*b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// benchPeriod is the period of the benchmark traces' shapes: BenchSpec
// varies with i%4, i%3, i%5, i%20 and i%100, so trace i has the shape of
// trace i%300.
const benchPeriod = 300

// The markers the template traces carry where each copy has its own
// session and user.
const (
	sessionMark = "SESSIONMARK"
	userMark    = "USERMARK"
)

// benchSession and benchUser are trace i's session (five consecutive runs
// each) and user (one of 97).
func benchSession(i int) string { return "session-" + strconv.Itoa(i/5) }
func benchUser(i int) string    { return "user-" + strconv.Itoa(i%97) }

// benchTraceID is trace i's id: the MD5 of "loupe-bench-i", which the
// SQL that copies the templates computes too.
func benchTraceID(i int) trace.TraceID {
	return trace.TraceID(md5.Sum([]byte("loupe-bench-" + strconv.Itoa(i))))
}

// benchBase is the start of trace 0: yesterday's UTC midnight, so that the
// data set (a trace a second, 6 days for 10M records) falls in the day
// partitions the store keeps ready (yesterday to a week ahead).
func benchBase() time.Time { return time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour) }

// buildBench fills the empty store of schema (opened at dsn) with about n
// records and returns the number of traces. The data set is that of
// storetest.Fill (trace i is storetest.BenchSpec(i), about 19 records: a
// run of three steps with a model call and a tool call each, one tag,
// one tool error in 20 runs, tool outputs naming one of 100 cities), plus
// a session of five consecutive runs and one of 97 users, one trace a
// second from benchBase.
//
// Appending 10M records takes most of an hour here, so the data is
// copied server-side instead. The store's own Append writes the 300
// distinct shapes (templates) into a schema of their own, schema_tpl,
// which is kept for the checks of benchCheck. Then, chunk by chunk, one
// INSERT … SELECT over generate_series copies every template row of every
// table for each trace i: the records (their JSON with trace i's id, time
// and session substituted, their text index as is) and the summary rows
// (traces, trace_models, trace_tools, trace_tags), with trace i's id,
// times, session and user. What lands in the tables is what Append of
// trace i's records would have written, which benchCheck verifies.
func buildBench(b *testing.B, dsn, schema string, n int) int {
	ctx := context.Background()
	base := benchBase()
	tplSchema := schema + "_tpl"
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DROP SCHEMA IF EXISTS " + tplSchema + " CASCADE; CREATE SCHEMA " + tplSchema); err != nil {
		b.Fatal(err)
	}
	tpl := open(b, pgtest.WithSchema(testDSN(b), tplSchema))
	secs := base.Format("2006-01-02T15:04:05")
	var lens [benchPeriod]int
	for v := range benchPeriod {
		sp := storetest.BenchSpec(v, base)
		sp.Start, sp.Session, sp.User = base, sessionMark, userMark
		recs := storetest.Gen(sp)
		for _, r := range recs {
			// Every record's time is within the trace's first second, so
			// a copy's times differ from the template's in the seconds.
			if r.Time.Before(base) || !r.Time.Before(base.Add(time.Second)) {
				b.Fatalf("template %d: record %d at %v, not in the second from %v", v, r.Seq, r.Time, base)
			}
			if doc := string(r.AppendJSON(nil)); strings.Count(doc, `"time":"`+secs) != 1 || strings.Count(doc, `"time":"`) != 1 {
				b.Fatalf("template %d: record %d's JSON does not hold its time once: %s", v, r.Seq, doc)
			}
		}
		lens[v] = len(recs)
		if _, err := tpl.Append(ctx, recs); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec("CREATE TABLE IF NOT EXISTS " + tplSchema + ".bench_map (v integer PRIMARY KEY, trace_id bytea NOT NULL, hex text NOT NULL)"); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec("INSERT INTO "+tplSchema+".bench_map VALUES ($1, $2, $3)", v, recs[0].TraceID[:], recs[0].TraceID.String()); err != nil {
			b.Fatal(err)
		}
	}
	traces, total := 0, 0
	for total < n {
		total += lens[traces%benchPeriod]
		traces++
	}

	// The statements that copy traces [$1, $2): one per table that has a
	// trace_id column, every column copied from the template except those
	// that hold trace i's own identity and times.
	tables, err := tplTables(db, tplSchema)
	if err != nil {
		b.Fatal(err)
	}
	const (
		gen      = " FROM generate_series($1::bigint, $2::bigint - 1) g(i) JOIN %[1]s.bench_map m ON m.v = g.i %% %[2]d JOIN %[1]s.%[3]s t ON t.trace_id = m.trace_id"
		newID    = "decode(md5('loupe-bench-' || g.i), 'hex')"
		shift    = "g.i * 1000000000"
		newSecs  = `to_char(to_timestamp(%d + g.i) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')`
		newSess  = "'session-' || (g.i / 5)"
		newUser  = "'user-' || (g.i % 97)"
		jsonText = "convert_from(t.doc, 'UTF8')"
	)
	over := map[string]string{
		"trace_id":   newID,
		"ts":         "t.ts + " + shift,
		"started":    "t.started + " + shift,
		"last_time":  "t.last_time + " + shift,
		"session_id": newSess,
		"user_id":    newUser,
		// The JSON of a record with trace i's id, time and session.
		"doc": fmt.Sprintf(`convert_to(replace(replace(replace(replace(%s,
			'"trace_id":"' || m.hex, '"trace_id":"' || encode(%s, 'hex')),
			'"time":"%s', '"time":"' || %s),
			'"session":"%s"', '"session":"' || %s || '"'),
			'"user":"%s"', '"user":"' || %s || '"'), 'UTF8')`,
			jsonText, newID, secs, fmt.Sprintf(newSecs, base.Unix()), sessionMark, newSess, userMark, newUser),
	}
	var stmts []string
	for _, tb := range tables {
		var cols, vals []string
		for _, c := range tb.cols {
			if tb.name == "records" && (c == "id" || c == "body") {
				continue // the sequence numbers rows in insertion order; body is write-only
			}
			cols = append(cols, c)
			if e, ok := over[c]; ok {
				vals = append(vals, e)
			} else {
				vals = append(vals, "t."+c)
			}
		}
		order := ""
		if tb.name == "records" {
			order = " ORDER BY g.i, t.seq" // ids in time order, as Append numbers them
		}
		stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.%s (%s) SELECT %s", schema, tb.name, strings.Join(cols, ", "), strings.Join(vals, ", "))+
			fmt.Sprintf(gen, tplSchema, benchPeriod, tb.name)+order)
	}

	// Two connections copy chunks of benchChunk traces, each in a
	// transaction.
	const chunk = benchChunk
	var next atomic.Int64
	errc := make(chan error, 2)
	start := time.Now()
	for range 2 {
		go func() {
			errc <- func() error {
				for {
					lo := int(next.Add(chunk)) - chunk
					if lo >= traces {
						return nil
					}
					hi := min(lo+chunk, traces)
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					for _, q := range stmts {
						if _, err := tx.ExecContext(ctx, q, lo, hi); err != nil {
							tx.Rollback()
							return fmt.Errorf("copy traces %d-%d: %w\n%s", lo, hi, err, q)
						}
					}
					if err := tx.Commit(); err != nil {
						return err
					}
					if hi%(50*chunk) == 0 {
						b.Logf("%d traces copied in %v", hi, time.Since(start).Round(time.Second))
					}
				}
			}()
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("copied %d traces in %v", traces, time.Since(start).Round(time.Second))
	// What autovacuum would have done by the time a store serves queries.
	t := time.Now()
	if _, err := db.Exec("VACUUM ANALYZE " + schema + ".records, " + schema + ".traces, " + schema + ".trace_models, " + schema + ".trace_tools, " + schema + ".trace_tags"); err != nil {
		b.Fatal(err)
	}
	b.Logf("vacuum analyze in %v", time.Since(t).Round(time.Second))
	return traces
}

// benchChunk is the number of traces buildBench copies per statement.
const benchChunk = 10000

type tplTable struct {
	name string
	cols []string
}

// tplTables returns the tables of schema that hold rows (partitions and
// meta left out), with their columns in order. It fails if one of them has
// no trace_id column: the copy would not know what to do with it.
func tplTables(db *sql.DB, schema string) ([]tplTable, error) {
	rows, err := db.Query(`SELECT c.relname, a.attname FROM pg_class c
		JOIN pg_namespace ns ON ns.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE ns.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname <> 'bench_map'
		ORDER BY c.relname, a.attnum`, schema)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var all []tplTable
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			return nil, err
		}
		if len(all) == 0 || all[len(all)-1].name != t {
			all = append(all, tplTable{name: t})
		}
		all[len(all)-1].cols = append(all[len(all)-1].cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []tplTable
	for _, t := range all {
		if t.name == "meta" {
			continue
		}
		var rows bool
		if err := db.QueryRow("SELECT EXISTS (SELECT 1 FROM " + schema + "." + t.name + ")").Scan(&rows); err != nil {
			return nil, err
		}
		if !rows {
			continue
		}
		if !slices.Contains(t.cols, "trace_id") {
			return nil, fmt.Errorf("table %s of the templates holds rows and has no trace_id column: the copy does not know it", t.name)
		}
		out = append(out, t)
	}
	return out, nil
}

// benchCheck reads traces of the data set back through the store API and
// checks that they are what the store's own Append makes of the same
// records: the templates' records with trace i's id, times, session and
// user, appended to a scratch schema and read back from there.
func benchCheck(b *testing.B, s *postgres.Store, schema string, traces int) {
	ctx := context.Background()
	tpl := open(b, pgtest.WithSchema(testDSN(b), schema+"_tpl"))
	scratch := open(b, freshSchema(b))
	db, err := sql.Open("pgx", testDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, i := range []int{0, 1, 7, benchPeriod - 1, benchPeriod, traces / 2, traces/2 + 13, traces - 1} {
		var tplID []byte
		if err := db.QueryRow("SELECT trace_id FROM "+schema+"_tpl.bench_map WHERE v = $1", i%benchPeriod).Scan(&tplID); err != nil {
			b.Fatal(err)
		}
		tt, err := tpl.Trace(ctx, trace.TraceID(tplID))
		if err != nil {
			b.Fatal(err)
		}
		id := benchTraceID(i)
		recs := tt.Records
		for k := range recs {
			r := &recs[k]
			r.TraceID = id
			r.Time = r.Time.Add(time.Duration(i) * time.Second)
			if r.Session() == sessionMark {
				r.EditRun().Session = benchSession(i)
			}
			if r.User() == userMark {
				r.EditRun().User = benchUser(i)
			}
		}
		if _, err := scratch.Append(ctx, recs); err != nil {
			b.Fatal(err)
		}
		want, err := scratch.Trace(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		got, err := s.Trace(ctx, id)
		if err != nil {
			b.Fatalf("trace %d (%s) of the data set: %v", i, id, err)
		}
		wj, gj := mustJSON(b, want), mustJSON(b, got)
		if !bytes.Equal(wj, gj) {
			b.Fatalf("trace %d of the data set reads back as\n%s\nAppend of its records gives\n%s", i, gj, wj)
		}
		wp, err := scratch.Records(ctx, id, store.RecordRange{Limit: 5})
		if err != nil {
			b.Fatal(err)
		}
		gp, err := s.Records(ctx, id, store.RecordRange{Limit: 5})
		if err != nil {
			b.Fatal(err)
		}
		wj, gj = mustJSON(b, wp), mustJSON(b, gp)
		if !bytes.Equal(wj, gj) {
			b.Fatalf("trace %d of the data set: first records page\n%s\nAppend gives\n%s", i, gj, wj)
		}
	}
	// The text index answers as the store's: the newest hits for one city
	// (in one trace of 100) are in the last traces copied.
	near := map[trace.TraceID]bool{}
	for i := max(traces-3*benchChunk, 0); i < traces; i++ {
		if i%100 == 42 {
			near[benchTraceID(i)] = true
		}
	}
	q, _ := store.ParseQuery("city042 sunny")
	page, err := s.Search(ctx, q)
	if err != nil {
		b.Fatal(err)
	}
	if len(page.Hits) == 0 || !near[page.Hits[0].TraceID] {
		b.Fatalf("search city042: %d hits, the first %v, want one of the last traces", len(page.Hits), page.Hits)
	}
	lp, err := s.List(ctx, store.ListQuery{Limit: 1})
	if err != nil || len(lp.Traces) != 1 || lp.Traces[0].ID != benchTraceID(traces-1) {
		b.Fatalf("newest trace: %v, %v; want trace %d", lp.Traces, err, traces-1)
	}
}

func mustJSON(b *testing.B, v any) []byte {
	j, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return j
}
