package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for making a schema

	"github.com/loupe-dev/loupe/internal/pgtest"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// balancer is a round-robin load balancer in front of several collectors,
// as nginx or a cloud load balancer would be: a request goes to the next
// collector, and to the one after it when a collector cannot be reached
// (connection refused: the request was not delivered, so it is safe to
// send again), as nginx's proxy_next_upstream error does.
type balancer struct {
	backends []string
	next     atomic.Uint64
	client   *http.Client
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	start := b.next.Add(1)
	var last error
	for i := range uint64(len(b.backends)) {
		u := b.backends[(start+i)%uint64(len(b.backends))]
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, u+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := b.client.Do(req)
		if err != nil {
			last = err
			if errors.Is(err, syscall.ECONNREFUSED) {
				continue // not delivered: the next collector
			}
			break // delivered, maybe processed: the client decides
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(w, fmt.Sprint("no collector answered: ", last), http.StatusBadGateway)
}

// collectors starts n `loupe serve` processes on one PostgreSQL schema and
// a balancer in front of them; it returns the children, the balancer's
// URL and the DSN.
func collectors(t testing.TB, n int) ([]*exec.Cmd, string, string) {
	cmds, url, dsn, _ := collectorsBehind(t, n)
	return cmds, url, dsn
}

// collectorsBehind is collectors, also returning the collectors' own URLs.
func collectorsBehind(t testing.TB, n int) ([]*exec.Cmd, string, string, []string) {
	t.Helper()
	dsn := pgtest.Schema(t)
	// Migrate once, before the collectors race to.
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	var cmds []*exec.Cmd
	lb := &balancer{client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	for range n {
		cmd, url := startChild(t, "--db", dsn, "serve", "--addr", "127.0.0.1:0", "--grpc-addr", "")
		cmds = append(cmds, cmd)
		lb.backends = append(lb.backends, url)
	}
	ts := httptest.NewServer(lb)
	t.Cleanup(ts.Close)
	return cmds, ts.URL, dsn, lb.backends
}

// loadBatch is one request of the load: a trace of size records.
func loadBatch(w, i, size int) ([]byte, trace.TraceID) {
	tid := trace.TraceID{0x5c, byte(w >> 8), byte(w), byte(i >> 16), byte(i >> 8), byte(i), byte(time.Now().UnixNano())}
	var body []byte
	now := time.Now().UTC()
	for s := 1; s <= size; s++ {
		r := trace.Record{V: 1, TraceID: tid, SpanID: trace.SpanID{1, byte(s >> 8), byte(s)}, Seq: uint64(s), Time: now, Type: trace.TypeCustom, Name: "load", Output: trace.Value(`"payload"`)}
		body = append(r.AppendJSON(body), '\n')
	}
	return body, tid
}

// TestCollectorsKill9: three collectors share one PostgreSQL behind one
// address; one is killed with SIGKILL mid-load. Everything any collector
// acknowledged is stored, and the other two keep ingesting.
func TestCollectorsKill9(t *testing.T) {
	cmds, url, dsn := collectors(t, 3)
	var (
		mu          sync.Mutex
		acked       []trace.TraceID
		afterKill   atomic.Int64
		killed      atomic.Bool
		stop        = make(chan struct{})
		beforeKill  = make(chan struct{}) // closed at the 60th acknowledged batch
		afterEnough = make(chan struct{}) // closed at the 60th acknowledged after the kill
		wg          sync.WaitGroup
	)
	client := &http.Client{Timeout: 30 * time.Second}
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body, tid := loadBatch(w, i, 50)
				resp, err := client.Post(url+"/v1/records", "application/x-ndjson", bytes.NewReader(body))
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					continue // not acknowledged (the killed collector's requests in flight)
				}
				mu.Lock()
				acked = append(acked, tid)
				if len(acked) == 60 {
					close(beforeKill)
				}
				mu.Unlock()
				if killed.Load() && afterKill.Add(1) == 60 {
					close(afterEnough)
				}
			}
		}()
	}
	finish := func() { close(stop); wg.Wait() }
	select {
	case <-beforeKill:
	case <-time.After(90 * time.Second): // a hang, not a timing claim
		finish()
		t.Fatalf("the collectors acknowledged %d batches in 90s, want 60 before the kill", len(acked))
	}
	if err := cmds[1].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed.Store(true)
	select {
	case <-afterEnough:
	case <-time.After(90 * time.Second):
		finish()
		t.Fatalf("after the kill the other collectors acknowledged %d batches in 90s, want 60", afterKill.Load())
	}
	finish()

	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, id := range acked {
		tr, err := st.Trace(context.Background(), id)
		if err != nil || len(tr.Records) != 50 {
			n := 0
			if tr != nil {
				n = len(tr.Records)
			}
			t.Errorf("acknowledged trace %s: %d records, %v", id, n, err)
		}
	}
	t.Logf("%d acknowledged batches checked, %d after the kill", len(acked), afterKill.Load())
}

// TestCollectorsStream: a browser's live stream of the runs list on one
// collector shows the runs that senders post to another.
func TestCollectorsStream(t *testing.T) {
	_, _, _, backends := collectorsBehind(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang, not a timing claim
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", backends[0]+"/api/v1/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, tid := loadBatch(0, 0, 3)
	post, err := http.Post(backends[1]+"/v1/records", "application/x-ndjson", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusOK {
		t.Fatalf("post to the second collector: %s", post.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: ") && strings.Contains(l, tid.String()) {
			if !strings.Contains(l, `"records":3`) {
				t.Errorf("trace event: %s", l)
			}
			return
		}
	}
	t.Fatalf("no event of trace %s on the first collector's stream: %v", tid, sc.Err())
}

// BenchmarkCollectors measures ingest through one address in front of 1,
// 2 and 3 `loupe serve` processes on one PostgreSQL (this machine: the
// collectors, PostgreSQL and the senders share its cores): 32 senders
// post batches of 100 records. records/s is what the store took. Run it
// with: go test -run '^$' -bench Collectors -benchtime 400x ./cmd/loupe
func BenchmarkCollectors(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("collectors=%d", n), func(b *testing.B) {
			_, url, _ := collectors(b, n)
			client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			const senders, size = 32, 100
			var next atomic.Int64
			var wg sync.WaitGroup
			var failed atomic.Int64
			b.ResetTimer()
			for w := range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1))
						if i > b.N {
							return
						}
						body, _ := loadBatch(w, i, size)
						resp, err := client.Post(url+"/v1/records", "application/x-ndjson", bytes.NewReader(body))
						if err != nil {
							failed.Add(1)
							continue
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d batches failed", f)
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
