package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loupe-dev/loupe/store/internal/sqlstore"
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
