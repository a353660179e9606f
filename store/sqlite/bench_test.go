package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/internal/sqlstore"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// Run with LOUPE_BENCH_RECORDS=1000000 for the numbers in BENCHMARKS.md;
// the default is small so that -bench=. stays quick.
const defaultBenchRecords = 50000

// BenchmarkIngest compares the store sink (tracer → background dispatcher
// with Block → store.Sink → Append, batches of storetest.SinkBatch) with
// SQLite's raw insert rate for the same rows: a plain loop of one prepared
// single-row INSERT per record, one transaction per batch of the same
// size, statements prepared once on one connection.
//
//   - raw-schema inserts into the store's own tables (a store opened and
//     closed first): records with its unique (trace id, seq) and (type, id)
//     indexes, plus one FTS5 row per record with text (as Append does).
//     This is the baseline: what any writer of these rows into this
//     schema pays.
//   - raw inserts into a bare table with the records table's columns and
//     no index, for context.
func BenchmarkIngest(b *testing.B) {
	n := storetest.BenchRecords(defaultBenchRecords)
	for _, bc := range []struct {
		name   string
		schema bool
	}{{"raw", false}, {"raw-schema", true}} {
		b.Run(bc.name, func(b *testing.B) {
			recs := storetest.SinkData(n)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				path := filepath.Join(b.TempDir(), "raw.db")
				if bc.schema {
					open(b, path).Close() // creates the schema
				}
				db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-65536)")
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				rawInsert(b, db, recs, bc.schema)
				b.ReportMetric(float64(len(recs))/time.Since(start).Seconds(), "records/s")
				b.StopTimer()
				db.Close()
				b.StartTimer()
			}
		})
	}
	b.Run("sink", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			s := open(b, filepath.Join(b.TempDir(), "loupe.db"))
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

// rawInsert writes recs with one prepared INSERT per record, committing
// every storetest.SinkBatch records; with fts, each record with text also
// gets its row in the store's text index.
func rawInsert(b *testing.B, db *sql.DB, recs []trace.Record, fts bool) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if !fts {
		if _, err := conn.ExecContext(ctx, "CREATE TABLE records (id INTEGER PRIMARY KEY, trace_id BLOB NOT NULL, seq INTEGER NOT NULL, ts INTEGER NOT NULL, type TEXT NOT NULL, doc BLOB NOT NULL)"); err != nil {
			b.Fatal(err)
		}
	}
	prep := func(q string) *sql.Stmt {
		st, err := conn.PrepareContext(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	begin, commit := prep("BEGIN IMMEDIATE"), prep("COMMIT")
	ins := prep("INSERT INTO records (trace_id, seq, ts, type, doc) VALUES (?, ?, ?, ?, ?)")
	var text *sql.Stmt
	if fts {
		text = prep("INSERT INTO records_fts (rowid, body) VALUES (?, ?)")
	}
	var buf []byte
	for start := 0; start < len(recs); start += storetest.SinkBatch {
		if _, err := begin.ExecContext(ctx); err != nil {
			b.Fatal(err)
		}
		for i := start; i < min(start+storetest.SinkBatch, len(recs)); i++ {
			r := &recs[i]
			buf = r.AppendJSON(buf[:0])
			res, err := ins.ExecContext(ctx, r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), buf)
			if err != nil {
				b.Fatal(err)
			}
			if body := sqlstore.Body(r); fts && body != "" { // as the store: no row for records without text
				id, _ := res.LastInsertId()
				if _, err := text.ExecContext(ctx, id, body); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := commit.ExecContext(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStore returns a store holding the benchmark data set of n records,
// built once per n and kept in the system temp directory between runs.
func benchStore(b *testing.B, n int) store.Store {
	path := filepath.Join(os.TempDir(), "loupe-bench-"+itoa(n)+".db")
	if _, err := os.Stat(path + ".done"); err != nil {
		os.Remove(path)
		os.Remove(path + "-wal")
		s := open(b, path)
		t := time.Now()
		storetest.Fill(b, s, n, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		b.Logf("built %s with %d records in %v", path, n, time.Since(t))
		s.Close()
		os.WriteFile(path+".done", nil, 0o644)
	}
	return open(b, path)
}

func itoa(n int) string { return strconv.Itoa(n) }

// BenchmarkQueries measures p50/p95 latency of the CLI's and the UI's
// common queries (storetest.BenchQueries) on a store of n records (about
// 20 per trace).
func BenchmarkQueries(b *testing.B) {
	n := storetest.BenchRecords(defaultBenchRecords)
	storetest.BenchQueries(b, benchStore(b, n))
}

// BenchmarkExport streams the whole benchmark store and reports the peak
// Go heap in use during the export and the process's peak RSS (VmHWM). Run
// it alone, after the data set is built (a run of BenchmarkQueries builds
// it), so that VmHWM is the export's and not the build's.
func BenchmarkExport(b *testing.B) {
	n := storetest.BenchRecords(defaultBenchRecords)
	s := benchStore(b, n)
	for range b.N {
		start := time.Now()
		got, peak := storetest.ExportPeak(b, s)
		b.ReportMetric(float64(got)/time.Since(start).Seconds(), "records/s")
		b.ReportMetric(peak, "peak-heap-MB")
		b.ReportMetric(float64(got), "records")
		b.ReportMetric(storetest.VmHWM(), "VmHWM-MB")
	}
}
