package postgres_test

import (
	"context"
	"database/sql"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/internal/sqlstore"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/store/storetest"
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

// benchStore returns a store holding the benchmark data set of n records
// (storetest.Fill), in a schema of LOUPE_TEST_POSTGRES named for n that is
// built once and kept between runs (drop it by hand: DROP SCHEMA
// bench_N CASCADE). It reports the bytes the data set takes on disk per
// record: tables, indexes and TOAST, every partition.
func benchStore(b *testing.B, n int) *postgres.Store {
	dsn := testDSN(b)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	schema := "bench_" + strconv.Itoa(n)
	if _, err := db.Exec("CREATE SCHEMA IF NOT EXISTS " + schema); err != nil {
		b.Fatal(err)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	sdsn := dsn + sep + "search_path=" + schema
	s := open(b, sdsn)
	var done bool
	db.QueryRow("SELECT true FROM " + schema + ".meta WHERE key = 'bench_done'").Scan(&done)
	if !done {
		t := time.Now()
		// Records of the last days, so that they fill day partitions.
		storetest.Fill(b, s, n, time.Now().Add(-48*time.Hour))
		if _, err := db.Exec("INSERT INTO " + schema + ".meta VALUES ('bench_done', 'true')"); err != nil {
			b.Fatal(err)
		}
		b.Logf("built schema %s with %d records in %v", schema, n, time.Since(t))
	}
	var bytes int64
	if err := db.QueryRow(`SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
		JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&bytes); err != nil {
		b.Fatal(err)
	}
	b.Logf("schema %s: %d bytes on disk, %.0f bytes per record", schema, bytes, float64(bytes)/float64(n))
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
