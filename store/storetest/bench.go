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
