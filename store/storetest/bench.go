package storetest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// BenchRecords returns the number of records the big benchmarks use:
// LOUPE_BENCH_RECORDS, or def when it is unset (1000000 for the measured runs).
func BenchRecords(def int) int {
	if n, err := strconv.Atoi(os.Getenv("LOUPE_BENCH_RECORDS")); err == nil && n > 0 {
		return n
	}
	return def
}

// cities make the text of tool outputs vary, so a text search for one city
// matches about 1% of the tool calls.
var cities = func() []string {
	var c []string
	for i := range 100 {
		c = append(c, fmt.Sprintf("city%03d", i))
	}
	return c
}()

// BenchSpec is trace i of the benchmark data set (about 20 records).
func BenchSpec(i int, start time.Time) Spec {
	sp := Spec{
		Name:    []string{"planner", "researcher", "coder", "reviewer"}[i%4],
		Start:   start.Add(time.Duration(i) * time.Second),
		Steps:   3,
		Tags:    []string{[]string{"env:ci", "env:prod", "env:dev"}[i%3]},
		Model:   []string{"gpt-4o", "claude", "gemini"}[i%3],
		Tool:    []string{"search", "calc", "fetch", "shell", "browse"}[i%5],
		ToolOut: "weather report for " + cities[i%len(cities)] + " is sunny",
	}
	if i%20 == 0 {
		sp.ToolErr = "connection reset by peer"
	}
	return sp
}

// Fill appends the benchmark data set of about n records to s in batches
// of about 5000 and returns the number of records stored.
func Fill(tb testing.TB, s store.Store, n int, start time.Time) int {
	ctx := context.Background()
	var batch []trace.Record
	total := 0
	for i := 0; total < n; i++ {
		recs := Gen(BenchSpec(i, start))
		batch = append(batch, recs...)
		total += len(recs)
		if len(batch) >= 5000 || total >= n {
			if _, err := s.Append(ctx, batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return total
}

// RunSink records about n records with real tracers (traces of about 20
// records) through a background dispatcher with the Block policy into a
// store.Sink on s (batches of SinkBatch), waits for Shutdown, and returns
// the number of records.
func RunSink(tb testing.TB, s store.Store, n int) int {
	ctx := context.Background()
	var sinkErr atomic.Value
	tr := trace.New(trace.Options{
		Sinks:    []trace.Sink{store.NewSink(s)},
		Dispatch: trace.DispatchOptions{OnFull: trace.Block, BatchSize: SinkBatch, QueueSize: max(2*SinkBatch, trace.DefaultQueueSize), OnError: func(err error) { sinkErr.Store(err) }},
	})
	total := 0
	for i := 0; total < n; i++ {
		total += len(sinkTrace(tr, i))
	}
	if err := tr.Shutdown(ctx); err != nil {
		tb.Fatal(err)
	}
	if err, _ := sinkErr.Load().(error); err != nil {
		tb.Fatal(err)
	}
	return total
}

// SinkData returns records like those RunSink writes (the same traces,
// with fresh ids and times), about n of them in the order the sink gets
// them: the rows of the raw-insert baselines.
func SinkData(n int) []trace.Record {
	tr := trace.New(trace.Options{Dispatch: trace.DispatchOptions{Inline: true}})
	var recs []trace.Record
	for i := 0; len(recs) < n; i++ {
		recs = append(recs, sinkTrace(tr, i)...)
	}
	return recs
}

// sinkTrace records benchmark trace i with tr and returns its records.
func sinkTrace(tr *trace.Tracer, i int) []trace.Record {
	_, ec := tr.Start(context.Background(), "bench", trace.RunOptions{Input: trace.Text("question"), Tags: []string{"env:bench"}})
	for step := range 3 {
		ec.StartIteration()
		ec.ModelCall(trace.ModelCall{Model: "gpt-4o", Input: trace.Text("prompt"), Output: trace.Text("answer"),
			Usage: trace.Usage{InputTokens: 100, OutputTokens: 10}, Duration: time.Millisecond})
		ec.ToolCall("search", trace.Text("query"), trace.Text("weather report for "+cities[(i+step)%len(cities)]), time.Millisecond, nil)
		ec.MemorySet(trace.ScopeMemory, "notes", trace.Text("note"))
		ec.EndIteration("continue")
	}
	ec.End(nil, nil)
	return ec.Records()
}

// Percentiles runs fn n times and reports its p50 and p95 latency in
// milliseconds as benchmark metrics.
func Percentiles(b *testing.B, n int, fn func() error) {
	ds := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(ds[len(ds)/2]), "p50-ms")
	b.ReportMetric(ms(ds[len(ds)*95/100]), "p95-ms")
}

// ExportPeak exports every record of s, sampling the heap in use, and
// reports the records exported and the peak heap in MB.
func ExportPeak(b *testing.B, s store.Store) (records int, peakMB float64) {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	buf := make([]byte, 0, 4096)
	for r, err := range s.Export(context.Background(), store.Filter{}) {
		if err != nil {
			b.Fatal(err)
		}
		buf = r.AppendJSON(buf[:0]) // what an exporter does with each record
		records++
	}
	close(stop)
	<-done
	return records, float64(peak.Load()) / (1 << 20)
}

// VmHWM returns the process's peak resident set size in MB, from
// /proc/self/status (0 where that is not available). Unlike the Go heap it
// counts memory a driver allocates outside Go, such as SQLite's page cache.
func VmHWM() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

// SinkBatch is the dispatcher batch size RunSink uses, and the batch size
// of the raw baselines: LOUPE_BENCH_BATCH, or store.SinkBatchSize.
var SinkBatch = func() int {
	if n, err := strconv.Atoi(os.Getenv("LOUPE_BENCH_BATCH")); err == nil && n > 0 {
		return n
	}
	return store.SinkBatchSize
}()

// BenchQueries measures p50/p95 latency, 200 runs each, of the queries the
// CLI and the web UI make most on a store filled by Fill: the runs list's
// first page and a filtered one, searches by filters, by text and by
// both, one whole trace, and the first page of a trace's records (what
// the run view draws from) where the store is a store.RecordPager.
func BenchQueries(b *testing.B, s store.Store) {
	ctx := context.Background()
	const reps = 200
	search := func(q string) func() error {
		return func() error {
			pq, err := store.ParseQuery(q)
			if err == nil {
				_, err = s.Search(ctx, pq)
			}
			return err
		}
	}
	newest := func() (trace.TraceID, error) {
		p, err := s.List(ctx, store.ListQuery{Limit: 1})
		if err != nil || len(p.Traces) == 0 {
			return trace.TraceID{}, fmt.Errorf("newest trace: %d traces, %v", len(p.Traces), err)
		}
		return p.Traces[0].ID, nil
	}
	cases := []struct {
		name string
		fn   func() error
	}{
		{"list-first-page", func() error { _, err := s.List(ctx, store.ListQuery{}); return err }},
		{"list-filtered", func() error {
			_, err := s.List(ctx, store.ListQuery{Filter: store.Filter{Model: "claude", Tags: []string{"env:prod"}, HasErrors: true}})
			return err
		}},
		{"search-filtered", search("type:tool.error model:claude tool:calc")},
		{"search-text", search("city042 sunny")},
		{"search-text-filtered", search(`"weather report" tool:fetch tag:env:ci`)},
		{"get-trace", func() error {
			id, err := newest()
			if err == nil {
				_, err = s.Trace(ctx, id)
			}
			return err
		}},
	}
	if p, ok := s.(store.RecordPager); ok {
		cases = append(cases, struct {
			name string
			fn   func() error
		}{"trace-first-page", func() error {
			id, err := newest()
			if err == nil {
				_, err = p.Records(ctx, id, store.RecordRange{Limit: 2000})
			}
			return err
		}})
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				Percentiles(b, reps, bc.fn)
			}
		})
	}
}
