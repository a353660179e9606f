package online_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/server"
)

// BenchmarkIngestWithRules measures OTLP/HTTP ingest into the real
// collector (SQLite store, loopback, 8 senders, requests of 30 agent runs
// of 3 spans) without online evaluation and with two rules that select
// every run (a tool trajectory with an argument matcher, and text
// checks), whose evaluation reads each trace back from the same store
// while ingest goes on. It reports spans/s, and with rules the traces
// evaluated and dropped during the measured ingest. Scores go to the
// test double of scorerFor until the backends keep scores.
func BenchmarkIngestWithRules(b *testing.B) {
	const rules = `
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
	for _, withRules := range []bool{false, true} {
		b.Run(fmt.Sprintf("rules=%v", withRules), func(b *testing.B) {
			st := openSQLite(b, dbPath(b))
			var eng *online.Engine
			if withRules {
				eng = startEngine(b, online.Options{Store: st, Scores: scorerFor(st), Config: parseRules(b, rules)})
			}
			ts := collector(b, st, eng, server.Options{})
			const senders, perSender = 8, 5
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
			calls := func(i int) []call { return []call{{"lookup_order", `{"id":17}`}, {"notify", `{"to":"customer"}`}} }
			answer := func(i int) string { return fmt.Sprintf("Order %d has shipped.", i) }
			var pm ptrace.ProtoMarshaler
			salt := 0
			var evaluated0 int64
			for n := 0; n < b.N; n++ {
				b.StopTimer()
				payloads := make([][]byte, senders*perSender)
				for i := range payloads {
					salt++
					td := agentTraces(byte(salt), 30, calls, answer)
					// Fresh ids per request: salt wraps at 256, so vary the rest too.
					rs := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
					for k := 0; k < rs.Len(); k++ {
						id := rs.At(k).TraceID()
						id[5], id[6] = byte(salt>>8), byte(salt>>16)
						rs.At(k).SetTraceID(id)
					}
					raw, err := pm.MarshalTraces(td)
					if err != nil {
						b.Fatal(err)
					}
					payloads[i] = raw
				}
				if eng != nil {
					evaluated0 = evaluatedOf(b, eng)
				}
				b.StartTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for s := range senders {
					wg.Go(func() {
						for k := range perSender {
							resp, err := client.Post(ts.URL+"/v1/traces", "application/x-protobuf", bytes.NewReader(payloads[s*perSender+k]))
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
				el := time.Since(start)
				b.ReportMetric(float64(senders*perSender*30*3)/el.Seconds(), "spans/s")
				if eng != nil {
					b.StopTimer()
					b.ReportMetric(float64(evaluatedOf(b, eng)-evaluated0)/float64(senders*perSender*30), "evaluated/run")
					waitFor(b, "the queue to drain", func() bool { return eng.Pending() == 0 })
					b.StartTimer()
				}
			}
			if eng != nil {
				b.ReportMetric(float64(eng.Dropped()), "dropped")
			}
		})
	}
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
