package httpsink

import (
	"context"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// benchRecords returns n records in traces of 1000, shaped like an agent's
// (tool calls with small JSON values).
func benchRecords(n int, salt byte) []trace.Record {
	out := make([]trace.Record, n)
	t0 := time.Now().UTC()
	for i := range out {
		tr := i / 1000
		out[i] = trace.Record{V: 1, TraceID: trace.TraceID{salt, byte(tr >> 16), byte(tr >> 8), byte(tr), 7}, SpanID: trace.SpanID{byte(i), byte(i >> 8), byte(i >> 16), 1},
			Seq: uint64(i%1000 + 1), Time: t0.Add(time.Duration(i)), Type: trace.TypeToolEnd, Name: "lookup_order",
			Input: trace.Value(`{"order_id":12345,"fields":["status","eta"]}`), Output: trace.Value(`{"status":"shipped","eta":"2026-11-25"}`), Duration: time.Millisecond}
	}
	return out
}

// BenchmarkIngest compares, in one run, the store's raw insert rate
// (Append of 1000-record batches into SQLite) with ingest over loopback
// through this sink and `loupe serve` into SQLite. records/s is the
// figure to compare.
func BenchmarkIngest(b *testing.B) {
	const n = 20000
	b.Run("store-append", func(b *testing.B) {
		c := newCollectorB(b)
		for i := 0; i < b.N; i++ {
			recs := benchRecords(n, byte(i))
			start := time.Now()
			for j := 0; j < n; j += 1000 {
				if _, err := c.st.Append(context.Background(), recs[j:j+1000]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
		}
	})
	b.Run("export-http-serve", func(b *testing.B) {
		c := newCollectorB(b)
		for i := 0; i < b.N; i++ {
			recs := benchRecords(n, byte(i))
			sink, _ := New(Options{URL: c.url(), BatchSize: 1000, Linger: time.Millisecond})
			start := time.Now()
			for j := 0; j < n; j += 500 {
				sink.WriteRecords(context.Background(), recs[j:j+500])
			}
			if err := sink.Shutdown(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
		}
	})
}
