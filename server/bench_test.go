package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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

// writerCPU is a GroupAppender that adds up the CPU time its
// AppendGroups calls use on their thread: how long the store's write lock
// is held busy, whatever else the machine runs.
type writerCPU struct {
	store.GroupAppender
	ns atomic.Int64
	ok atomic.Bool
}

func (w *writerCPU) AppendGroups(ctx context.Context, groups []store.Group) ([]int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0, ok0 := threadCPU()
	counts, err := w.GroupAppender.AppendGroups(ctx, groups)
	t1, ok1 := threadCPU()
	w.ns.Add(int64(t1 - t0))
	w.ok.Store(ok0 && ok1)
	return counts, err
}

// BenchmarkGroupCommit measures OTLP/HTTP ingest of 100-span protobuf
// requests from 32 and 64 concurrent senders, with group commit and
// without, against the store's own Append of the same records in
// 1000-record batches, all in one run on fresh SQLite stores. It reports
// records/s, the ratio to Append's rate and the p99 time to
// acknowledgement; and, on Linux, CPU time per record, which a busy
// machine disturbs less than time: of the store's Append (its thread),
// of the group commits (the thread holding the write lock, whose rate
// bounds ingest's) and of the whole process while it ingests.
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
		perRecord := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(len(all)) }
		appendRate := func() (rate, cpu float64) {
			st := openStore(b)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := time.Now()
			t0, ok0 := threadCPU()
			for i := 0; i < len(all); i += 1000 {
				if _, err := st.Append(context.Background(), all[i:min(i+1000, len(all))]); err != nil {
					b.Fatal(err)
				}
			}
			rate = float64(len(all)) / time.Since(start).Seconds()
			if t1, ok1 := threadCPU(); ok0 && ok1 {
				cpu = perRecord(t1 - t0)
			}
			return rate, cpu
		}
		for _, mode := range []string{"group", "solo"} {
			b.Run(fmt.Sprintf("senders=%d/%s", senders, mode), func(b *testing.B) {
				for range b.N {
					ref, refCPU := appendRate()
					st := openStore(b)
					w := &writerCPU{GroupAppender: st.(store.GroupAppender)}
					if mode == "solo" {
						st = soloStore{st}
					} else {
						st = w
					}
					e := newEnv(b, Options{Store: st})
					client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
					p0, ok0 := processCPU()
					start := time.Now()
					lat := postAll(b, client, e.ts.URL, payloads, senders)
					rate := float64(len(all)) / time.Since(start).Seconds()
					p1, ok1 := processCPU()
					b.ReportMetric(rate, "records/s")
					b.ReportMetric(ref, "append-records/s")
					b.ReportMetric(100*rate/ref, "%-of-append")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
					b.ReportMetric(float64(len(all))/float64(len(payloads)), "records/request")
					if refCPU > 0 {
						b.ReportMetric(refCPU, "append-cpu-µs/rec")
					}
					if w.ok.Load() {
						b.ReportMetric(perRecord(time.Duration(w.ns.Load())), "writer-cpu-µs/rec")
					}
					if ok0 && ok1 {
						b.ReportMetric(perRecord(p1-p0), "process-cpu-µs/rec")
					}
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
