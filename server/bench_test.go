package server

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// otlpPayload returns an OTLP protobuf request of 100 spans (the 5 GenAI
// spans of testdata/genai.json, 20 times with fresh trace ids).
func otlpPayload(b *testing.B, salt int) []byte {
	td, _ := otlpFile(b, "genai.json")
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	orig := ptrace.NewSpanSlice()
	spans.CopyTo(orig)
	spans.RemoveIf(func(ptrace.Span) bool { return true })
	for k := range 20 {
		for i := 0; i < orig.Len(); i++ {
			sp := spans.AppendEmpty()
			orig.At(i).CopyTo(sp)
			sp.SetTraceID(pcommon.TraceID{byte(salt >> 16), byte(salt >> 8), byte(salt), byte(k), 1})
		}
	}
	var pm ptrace.ProtoMarshaler
	raw, err := pm.MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkOTLPIngest posts 100-span OTLP/HTTP protobuf requests to the
// collector (SQLite store, loopback) from 1, 8 and 64 concurrent senders
// and reports spans/s and the p99 time to acknowledgement.
func BenchmarkOTLPIngest(b *testing.B) {
	for _, senders := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("senders=%d", senders), func(b *testing.B) {
			e := newEnv(b, Options{})
			const perSender = 10
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
			for n := 0; n < b.N; n++ {
				// Fresh trace ids every iteration keep every span new to the store.
				b.StopTimer()
				payloads := make([][]byte, senders*perSender)
				for i := range payloads {
					payloads[i] = otlpPayload(b, n*senders*perSender+i)
				}
				b.StartTimer()
				var mu sync.Mutex
				var lat []time.Duration
				var wg sync.WaitGroup
				start := time.Now()
				for s := range senders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for k := range perSender {
							body := payloads[s*perSender+k]
							t0 := time.Now()
							resp, err := client.Post(e.ts.URL+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
							if err != nil {
								b.Error(err)
								return
							}
							resp.Body.Close()
							if resp.StatusCode != 200 {
								b.Errorf("status %d", resp.StatusCode)
							}
							mu.Lock()
							lat = append(lat, time.Since(t0))
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				el := time.Since(start)
				slices.Sort(lat)
				b.ReportMetric(float64(senders*perSender*100)/el.Seconds(), "spans/s")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
