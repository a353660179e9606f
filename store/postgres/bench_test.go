package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// BenchmarkIngest compares the store sink (tracer → background dispatcher
// with Block → store.Sink → Append) with PostgreSQL's raw COPY rate: the
// same encoded rows copied in one transaction into a plain table with the
// records table's columns. LOUPE_BENCH_RECORDS sets the size (default 50000).
func BenchmarkIngest(b *testing.B) {
	n := storetest.BenchRecords(50000)
	ctx := context.Background()
	b.Run("raw-copy", func(b *testing.B) {
		dsn := freshSchema(b)
		var recs []trace.Record
		for i := 0; len(recs) < n; i++ {
			recs = append(recs, storetest.Gen(storetest.BenchSpec(i, time.Unix(0, 0)))...)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE TABLE raw (trace_id bytea, seq bigint, ts bigint, type text, doc bytea)"); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			tx, err := conn.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			_, err = tx.CopyFrom(ctx, pgx.Identifier{"raw"}, []string{"trace_id", "seq", "ts", "type", "doc"},
				pgx.CopyFromSlice(len(recs), func(i int) ([]any, error) {
					r := &recs[i]
					buf = r.AppendJSON(buf[:0])
					return []any{r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), buf}, nil
				}))
			if err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(recs))/time.Since(start).Seconds(), "records/s")
		}
	})
	b.Run("sink", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			s := open(b, freshSchema(b))
			b.StartTimer()
			start := time.Now()
			got := storetest.RunSink(b, s, n)
			b.ReportMetric(float64(got)/time.Since(start).Seconds(), "records/s")
		}
	})
}
