package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
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
				start := time.Now()
				lat := postAll(b, client, e.ts.URL, payloads, senders)
				el := time.Since(start)
				b.ReportMetric(float64(senders*perSender*100)/el.Seconds(), "spans/s")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}

// soloStore hides a store's AppendGroups: every request commits alone
// (the collector before group commit).
type soloStore struct{ store.Store }

// BenchmarkGroupCommit measures OTLP/HTTP ingest of 100-span protobuf
// requests from 32 and 64 concurrent senders, with group commit and
// without, against the store's own Append of the same records in
// 1000-record batches, all in one run on fresh SQLite stores. It reports
// records/s, the ratio to Append's rate and the p99 time to
// acknowledgement.
func BenchmarkGroupCommit(b *testing.B) {
	for _, senders := range []int{32, 64} {
		const perSender = 8
		payloads := make([][]byte, senders*perSender)
		for i := range payloads {
			payloads[i] = otlpPayload(b, 1_000_000+i)
		}
		// The records the collector stores for them.
		var all []trace.Record
		for _, p := range payloads {
			td, err := otlp.DecodeProto(p)
			if err != nil {
				b.Fatal(err)
			}
			all = append(all, otlp.Map(td, nil).Records...)
		}
		appendRate := func() float64 {
			st := openStore(b)
			start := time.Now()
			for i := 0; i < len(all); i += 1000 {
				if _, err := st.Append(context.Background(), all[i:min(i+1000, len(all))]); err != nil {
					b.Fatal(err)
				}
			}
			return float64(len(all)) / time.Since(start).Seconds()
		}
		for _, mode := range []string{"group", "solo"} {
			b.Run(fmt.Sprintf("senders=%d/%s", senders, mode), func(b *testing.B) {
				for range b.N {
					ref := appendRate()
					st := openStore(b)
					if mode == "solo" {
						st = soloStore{st}
					}
					e := newEnv(b, Options{Store: st})
					client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
					start := time.Now()
					lat := postAll(b, client, e.ts.URL, payloads, senders)
					rate := float64(len(all)) / time.Since(start).Seconds()
					b.ReportMetric(rate, "records/s")
					b.ReportMetric(ref, "append-records/s")
					b.ReportMetric(100*rate/ref, "%-of-append")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				}
			})
		}
	}
}

// postAll posts the OTLP protobuf payloads to url's /v1/traces from
// senders concurrent senders, each its share in order, and returns every
// request's time to acknowledgement, sorted.
func postAll(b *testing.B, client *http.Client, url string, payloads [][]byte, senders int) []time.Duration {
	perSender := len(payloads) / senders
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perSender {
				t0 := time.Now()
				resp, err := client.Post(url+"/v1/traces", "application/x-protobuf", bytes.NewReader(payloads[s*perSender+k]))
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
	slices.Sort(lat)
	return lat
}
