package online_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/server"
)

// BenchmarkIngestWithRules measures OTLP/HTTP ingest into the real
// collector (SQLite store, loopback, 8 senders, 40 requests of 30 agent
// runs of 3 spans each per iteration) without online evaluation and with
// two rules that select every run (a tool trajectory with an argument
// matcher, and text checks), whose evaluation reads each trace back from
// the same store while ingest goes on. Each iteration ingests into both
// collectors, one after the other, once the evaluation of the last
// iteration is done (it would otherwise run beside the measurement
// without rules), so that the load of a shared machine falls on both
// alike; it reports both rates, their ratio (with / without), and the
// share of runs evaluated while they were ingested (the rest is
// evaluated once ingest is idle, or dropped when the queue fills), and
// the CPU time the process used while ingesting with rules over that
// without (cpu-with/without), which the load of a shared machine sways
// less than the rates. Scores go to scorerFor's Scorer.
func BenchmarkIngestWithRules(b *testing.B) {
	b.Run("rules", func(b *testing.B) { benchIngest(b, ingestRules, online.Options{}) })
	// The requirement's fault: ingest while a slow judge (200 ms a call,
	// 2 at a time) grades every run besides the two rules, with a queue
	// of 64, so that most runs are dropped and counted: ingest must not
	// wait for the judge.
	b.Run("slow-judge", func(b *testing.B) {
		b.Setenv("LOUPE_TEST_JUDGE_KEY", "judge-key")
		judge := newJudge(b, 200*time.Millisecond, nil)
		rules := judgeRules(judge.URL, "") + strings.TrimPrefix(strings.TrimSpace(ingestRules), "rules:") + "\n"
		benchIngest(b, rules, online.Options{QueueSize: 64})
	})
}

// ingestRules are BenchmarkIngestWithRules's two deterministic rules.
const ingestRules = `
rules:
  - name: order-lookup
    filter: name:support
    assertions:
      - type: tool-trajectory
        mode: in_order
        expected:
          - tool: lookup_order
            args: {id: 17}
          - tool: notify
  - name: tone
    assertions:
      - type: contains
        value: shipped
      - type: regex
        value: "(?i)order \\d+"
`

func benchIngest(b *testing.B, rules string, o online.Options) {
	const senders, perSender, runs = 8, 5, 30
	plainStore := openSQLite(b, dbPath(b))
	plain := collector(b, plainStore, nil, server.Options{})
	st := openSQLite(b, dbPath(b))
	o.Store, o.Scores, o.Config = st, scorerFor(st), parseRules(b, rules)
	eng := startEngine(b, o)
	withRules := collector(b, st, eng, server.Options{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	calls := func(i int) []call { return []call{{"lookup_order", `{"id":17}`}, {"notify", `{"to":"customer"}`}} }
	answer := func(i int) string { return fmt.Sprintf("Order %d has shipped.", i) }
	var pm ptrace.ProtoMarshaler
	salt := 0
	payloads := func() [][]byte {
		out := make([][]byte, senders*perSender)
		for i := range out {
			salt++
			td := agentTraces(byte(salt), runs, calls, answer)
			rs := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
			for k := 0; k < rs.Len(); k++ { // fresh ids: salt wraps at 256
				id := rs.At(k).TraceID()
				id[5], id[6] = byte(salt>>8), byte(salt>>16)
				rs.At(k).SetTraceID(id)
			}
			raw, err := pm.MarshalTraces(td)
			if err != nil {
				b.Fatal(err)
			}
			out[i] = raw
		}
		return out
	}
	var cpuWith, cpuWithout time.Duration
	ingest := func(url string, ps [][]byte) time.Duration {
		c0 := cpuTime(b)
		defer func() {
			if url == plain.URL {
				cpuWithout += cpuTime(b) - c0
			} else {
				cpuWith += cpuTime(b) - c0
			}
		}()
		start := time.Now()
		var wg sync.WaitGroup
		for s := range senders {
			wg.Go(func() {
				for k := range perSender {
					resp, err := client.Post(url+"/v1/traces", "application/x-protobuf", bytes.NewReader(ps[s*perSender+k]))
					if err != nil {
						b.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	spans := float64(senders * perSender * runs * 3)
	var without, with time.Duration
	var evaluated int64
	drain := func() { waitFor(b, "the queue to drain", func() bool { return eng.Pending() == 0 }) }
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		p1, p2 := payloads(), payloads()
		drain() // evaluation left over from the last iteration must not run beside the measurement without rules
		// Which goes first alternates: the second of two ingests in a
		// row pays for the first's garbage and the store's checkpoints.
		withRulesRun := func() {
			ev0 := evaluatedOf(b, eng)
			b.StartTimer()
			with += ingest(withRules.URL, p2)
			b.StopTimer()
			evaluated += evaluatedOf(b, eng) - ev0
		}
		if n%2 == 1 {
			withRulesRun()
			drain()
		}
		b.StartTimer()
		without += ingest(plain.URL, p1)
		b.StopTimer()
		if n%2 == 0 {
			withRulesRun()
		}
		b.StartTimer()
	}
	b.ReportMetric(spans*float64(b.N)/without.Seconds(), "spans/s-without")
	b.ReportMetric(spans*float64(b.N)/with.Seconds(), "spans/s-with")
	b.ReportMetric(without.Seconds()/with.Seconds(), "with/without")
	b.ReportMetric(cpuWith.Seconds()/cpuWithout.Seconds(), "cpu-with/without")
	b.ReportMetric(float64(evaluated)/float64(2*runs*senders*perSender*b.N), "evaluated-during")
	b.ReportMetric(float64(eng.Dropped()), "dropped")
}

// evaluatedOf sums the rules' evaluated counters.
func evaluatedOf(b *testing.B, eng *online.Engine) int64 {
	rs, err := eng.Rules(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, r := range rs {
		n += r.Stats.Evaluated
	}
	return n
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
