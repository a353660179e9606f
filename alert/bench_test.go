package alert_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/alert"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// benchStore is a SQLite store of LOUPE_BENCH_RECORDS records (default
// 50,000) in traces of 100 records, one started every 8.64 s over the
// day before benchNow (10,000 traces a day at 1M records), a tenth of them
// failed; built once per process.
var benchStore struct {
	once sync.Once
	path string
	n    int
	err  error
}

var benchNow = time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)

func benchRecords() int {
	if v, err := strconv.Atoi(os.Getenv("LOUPE_BENCH_RECORDS")); err == nil && v > 0 {
		return v
	}
	return 50_000
}

func openBenchStore(b *testing.B) *sqlite.Store {
	b.Helper()
	benchStore.once.Do(func() {
		dir, err := os.MkdirTemp("", "loupe-alert-bench")
		if err != nil {
			benchStore.err = err
			return
		}
		benchStore.path = filepath.Join(dir, "bench.db")
		s, err := sqlite.Open(context.Background(), benchStore.path)
		if err != nil {
			benchStore.err = err
			return
		}
		defer s.Close()
		traces := max(benchRecords()/100, 1)
		step := 24 * time.Hour / time.Duration(traces)
		var batch []trace.Record
		for i := range traces {
			sp := storetest.Spec{Start: benchNow.Add(-24*time.Hour + time.Duration(i)*step), Steps: 19, Tags: []string{"env:prod"}, Model: []string{"gpt-4o", "claude"}[i%2]}
			if i%10 == 0 {
				sp.Reason = trace.TerminationError
			}
			recs := storetest.Gen(sp)
			benchStore.n += len(recs)
			batch = append(batch, recs...)
			if len(batch) >= 10_000 || i == traces-1 {
				if _, err := s.Append(context.Background(), batch); err != nil {
					benchStore.err = err
					return
				}
				batch = batch[:0]
			}
		}
	})
	if benchStore.err != nil {
		b.Fatal(benchStore.err)
	}
	s, err := sqlite.Open(context.Background(), benchStore.path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchStore.path != "" {
		os.RemoveAll(filepath.Dir(benchStore.path))
	}
	os.Exit(code)
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEvaluate measures the CPU time of one evaluation of monitors
// that are due, over the bench store, and what it costs of one core when
// done every 10 s ("%core@10s"). The monitors do not fire: the cost is
// that of reading the metric.
func BenchmarkEvaluate(b *testing.B) {
	s := openBenchStore(b)
	for _, bc := range []struct {
		name     string
		monitors []alert.Monitor
	}{
		{"error_rate/1h", []alert.Monitor{{Metric: alert.ErrorRate, Window: alert.Duration(time.Hour)}}},
		{"error_rate/24h", []alert.Monitor{{Metric: alert.ErrorRate, Window: alert.Duration(24 * time.Hour)}}},
		{"p95_latency/24h", []alert.Monitor{{Metric: alert.P95Latency, Window: alert.Duration(24 * time.Hour)}}},
		{"filtered/24h", []alert.Monitor{{Metric: alert.ErrorRate, Filter: "tag:env:prod model:claude", Window: alert.Duration(24 * time.Hour)}}},
		{"five/1h", []alert.Monitor{
			{Metric: alert.ErrorRate, Window: alert.Duration(time.Hour)}, {Metric: alert.P95Latency, Window: alert.Duration(time.Hour)},
			{Metric: alert.Cost, Window: alert.Duration(time.Hour)}, {Metric: alert.Tokens, Window: alert.Duration(time.Hour)},
			{Metric: alert.RunsPerMinute, Window: alert.Duration(time.Hour)}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			e, err := alert.New(alert.Options{Store: s, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			var set store.Settings = s
			old, _ := set.Settings(ctx, "monitor:")
			for k := range old {
				set.DeleteSetting(ctx, k)
			}
			for i, m := range bc.monitors {
				m.Name = fmt.Sprintf("m%d", i)
				m.Every = alert.Duration(10 * time.Second)
				m.Threshold = 1e12 // never fires
				if err := e.Put(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := range b.N {
				if err := e.Evaluate(ctx, benchNow.Add(time.Duration(i)*10*time.Second)); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuTime() - cpu0
			b.StopTimer()
			perEval := cpu / time.Duration(b.N)
			b.ReportMetric(float64(perEval.Nanoseconds()), "cpu-ns/op")
			b.ReportMetric(100*perEval.Seconds()/10, "%core@10s")
			b.ReportMetric(float64(benchStore.n), "records")
		})
	}
}
