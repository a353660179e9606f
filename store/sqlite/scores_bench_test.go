package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// BenchmarkScores measures scores on a store of about 50,000 records
// (LOUPE_BENCH_RECORDS) with a thumbs score on every other trace: adding
// one score (one transaction), listing a trace's scores, the scores of a
// name of 32 traces, and a page of
// traces filtered by score:thumbs=true (a quarter of the traces match),
// beside a page of traces without the filter.
func BenchmarkScores(b *testing.B) {
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "loupe.db"))
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	storetest.Fill(b, s, storetest.BenchRecords(defaultBenchRecords), start)
	var ids []trace.TraceID
	for q := (store.ListQuery{Limit: store.MaxLimit}); ; {
		p, err := s.List(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range p.Traces {
			ids = append(ids, t.ID)
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	var batch []store.Score
	for i, id := range ids {
		if i%2 == 0 {
			batch = append(batch, store.Score{TraceID: id, Name: "thumbs", Kind: store.ScoreBoolean, Value: float64(i / 2 % 2), Source: store.SourceAPI})
		}
		if len(batch) == store.MaxScoreBatch || i == len(ids)-1 {
			if _, err := s.AddScores(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.Logf("%d traces, %d scored", len(ids), (len(ids)+1)/2)
	b.Run("add", func(b *testing.B) {
		for i := range b.N {
			if _, err := s.AddScores(ctx, []store.Score{{TraceID: ids[i%len(ids)], Name: "helpfulness", Kind: store.ScoreNumeric, Value: 0.5, Source: store.SourceHuman}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("of-trace", func(b *testing.B) {
		for i := range b.N {
			if _, err := s.Scores(ctx, store.ScoreFilter{TraceIDs: ids[i%len(ids) : i%len(ids)+1]}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("of-traces-named", func(b *testing.B) { // what an online rule asks of each batch: which of 32 traces it scored
		for i := range b.N {
			k := i * 32 % (len(ids) - 32)
			if _, err := s.Scores(ctx, store.ScoreFilter{TraceIDs: ids[k : k+32], Name: "thumbs", Source: store.SourceAPI, Limit: store.MaxScoreLimit}); err != nil {
				b.Fatal(err)
			}
		}
	})
	q, err := store.ParseQuery("score:thumbs=true")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("list-unfiltered", func(b *testing.B) { // the baseline of list-filtered
		for range b.N {
			if _, err := s.List(ctx, store.ListQuery{Limit: 50}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list-filtered", func(b *testing.B) {
		for range b.N {
			p, err := s.List(ctx, store.ListQuery{Filter: q.Filter, Limit: 50})
			if err != nil || len(p.Traces) != 50 {
				b.Fatalf("%d traces, %v", len(p.Traces), err)
			}
		}
	})
}
