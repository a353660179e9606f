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
// with Block → store.Sink → Append) with the raw insert rate of SQLite: a
// prepared INSERT loop of the same encoded rows in one transaction into a
// plain table with the records table's columns.
func BenchmarkIngest(b *testing.B) {
	n := storetest.BenchRecords(defaultBenchRecords)
	b.Run("raw", func(b *testing.B) {
		var recs []trace.Record
		for i := 0; len(recs) < n; i++ {
			recs = append(recs, storetest.Gen(storetest.BenchSpec(i, time.Unix(0, 0)))...)
		}
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			path := filepath.Join(b.TempDir(), "raw.db")
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := db.Exec("CREATE TABLE records (id INTEGER PRIMARY KEY, trace_id BLOB, seq INTEGER, ts INTEGER, type TEXT, doc BLOB)"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			tx, _ := db.Begin()
			st, err := tx.Prepare("INSERT INTO records (trace_id, seq, ts, type, doc) VALUES (?, ?, ?, ?, ?)")
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			for i := range recs {
				r := &recs[i]
				buf = r.AppendJSON(buf[:0])
				if _, err := st.Exec(r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(recs))/time.Since(start).Seconds(), "records/s")
			b.StopTimer()
			db.Close()
			b.StartTimer()
		}
	})
	// raw-schema: the same plain loop, into the store's own records table
	// (its unique and type indexes) and FTS5 table: what the store must
	// write at least, without the summaries, dispatcher and batching.
	b.Run("raw-schema", func(b *testing.B) {
		var recs []trace.Record
		for i := 0; len(recs) < n; i++ {
			recs = append(recs, storetest.Gen(storetest.BenchSpec(i, time.Unix(0, 0)))...)
		}
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			path := filepath.Join(b.TempDir(), "raw.db")
			open(b, path).Close() // creates the schema
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			tx, _ := db.Begin()
			st, err := tx.Prepare("INSERT INTO records (trace_id, seq, ts, type, doc) VALUES (?, ?, ?, ?, ?)")
			if err != nil {
				b.Fatal(err)
			}
			fts, err := tx.Prepare("INSERT INTO records_fts (rowid, name, error, input, output, thinking) VALUES (?, ?, ?, ?, ?, ?)")
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			for i := range recs {
				r := &recs[i]
				buf = r.AppendJSON(buf[:0])
				res, err := st.Exec(r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), buf)
				if err != nil {
					b.Fatal(err)
				}
				id, _ := res.LastInsertId()
				f := sqlstore.TextFields(r)
				if _, err := fts.Exec(id, f[0].Text, f[1].Text, f[2].Text, f[3].Text, f[4].Text); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(recs))/time.Since(start).Seconds(), "records/s")
			b.StopTimer()
			db.Close()
			b.StartTimer()
		}
	})
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

// BenchmarkQueries measures p50/p95 latency of the CLI's common queries on
// a store of n records (about 20 per trace).
func BenchmarkQueries(b *testing.B) {
	n := storetest.BenchRecords(defaultBenchRecords)
	s := benchStore(b, n)
	ctx := context.Background()
	const reps = 200
	for _, bc := range []struct {
		name string
		fn   func() error
	}{
		{"list-first-page", func() error { _, err := s.List(ctx, store.ListQuery{}); return err }},
		{"list-filtered", func() error {
			_, err := s.List(ctx, store.ListQuery{Filter: store.Filter{Model: "claude", Tags: []string{"env:prod"}, HasErrors: true}})
			return err
		}},
		{"search-filtered", func() error {
			q, err := store.ParseQuery("type:tool.error model:claude tool:calc")
			if err == nil {
				_, err = s.Search(ctx, q)
			}
			return err
		}},
		{"search-text", func() error {
			q, err := store.ParseQuery("city042 sunny")
			if err == nil {
				_, err = s.Search(ctx, q)
			}
			return err
		}},
		{"search-text-filtered", func() error {
			q, err := store.ParseQuery(`"weather report" tool:fetch tag:env:ci`)
			if err == nil {
				_, err = s.Search(ctx, q)
			}
			return err
		}},
		{"get-trace", func() error {
			p, err := s.List(ctx, store.ListQuery{Limit: 1})
			if err == nil {
				_, err = s.Trace(ctx, p.Traces[0].ID)
			}
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				storetest.Percentiles(b, reps, bc.fn)
			}
		})
	}
}

// BenchmarkExport streams the whole benchmark store and reports the peak
// heap in use.
func BenchmarkExport(b *testing.B) {
	n := storetest.BenchRecords(defaultBenchRecords)
	s := benchStore(b, n)
	for range b.N {
		start := time.Now()
		got, peak := storetest.ExportPeak(b, s)
		b.ReportMetric(float64(got)/time.Since(start).Seconds(), "records/s")
		b.ReportMetric(peak, "peak-heap-MB")
		b.ReportMetric(float64(got), "records")
	}
}
