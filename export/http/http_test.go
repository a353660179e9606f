package httpsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// collector is a real `loupe serve` handler on a SQLite store, on a fixed
// loopback address that can go down and come back.
type collector struct {
	t    testing.TB
	st   store.Store
	srv  *server.Server
	addr string
	hs   *http.Server
}

func newCollector(t *testing.T) *collector { return newCollectorB(t) }

func newCollectorB(t testing.TB) *collector {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{t: t, st: st, srv: srv}
	c.up()
	t.Cleanup(func() { c.down(); st.Close() })
	return c
}

func (c *collector) up() {
	addr := c.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for range 50 { // the port may linger briefly after down
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	c.addr = ln.Addr().String()
	c.hs = server.NewHTTPServer(c.addr, c.srv)
	go c.hs.Serve(ln)
}

func (c *collector) down() {
	if c.hs != nil {
		c.hs.Close()
		c.hs = nil
	}
}

func (c *collector) url() string { return "http://" + c.addr }

func (c *collector) count(id trace.TraceID) int {
	tr, err := c.st.Trace(context.Background(), id)
	if errors.Is(err, store.ErrNotFound) {
		return 0
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return len(tr.Records)
}

// records returns n tool.end records of one trace.
func records(id byte, n int) []trace.Record {
	out := make([]trace.Record, n)
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	for i := range out {
		out[i] = trace.Record{V: 1, TraceID: trace.TraceID{id, 9}, SpanID: trace.SpanID{id, byte(i), byte(i >> 8), 1}, Seq: uint64(i + 1),
			Time: t0.Add(time.Duration(i) * time.Millisecond), Type: trace.TypeToolEnd, Name: "t", Output: trace.Value(`"ok"`)}
	}
	return out
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestThroughTracer: a traced run reaches the collector through a
// trace.Tracer, and the tracer's Shutdown closes the sink.
func TestThroughTracer(t *testing.T) {
	c := newCollector(t)
	sink, err := New(Options{URL: c.url()})
	if err != nil {
		t.Fatal(err)
	}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}})
	ctx, run := tr.Start(context.Background(), "remote", trace.RunOptions{})
	for i := range 50 {
		trace.Tool(ctx, "echo", i, func(context.Context) (int, error) { return i, nil })
	}
	run.End(nil, nil)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := c.st.Trace(context.Background(), run.TraceID())
	if err != nil {
		t.Fatal(err)
	}
	if st.Summary.ToolCalls != 50 || st.Summary.Name != "remote" || st.Summary.Status != "success" {
		t.Errorf("stored: %+v", st.Summary)
	}
}

// TestCollectorDownAndBack: records written while the collector is down
// wait in the buffer and all arrive when it comes back.
func TestCollectorDownAndBack(t *testing.T) {
	c := newCollector(t)
	var failures atomic.Int64
	sink, _ := New(Options{URL: c.url(), BatchSize: 100, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		OnError: func(error) { failures.Add(1) }})
	recs := records(1, 1000)
	if err := sink.WriteRecords(context.Background(), recs[:300]); err != nil {
		t.Fatal(err)
	}
	if err := sink.Flush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	c.down()
	for i := 300; i < 1000; i += 50 { // the agent keeps recording
		if err := sink.WriteRecords(context.Background(), recs[i:i+50]); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Flush(ctxTimeout(t, 100*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush while down: %v", err)
	}
	if failures.Load() == 0 {
		t.Error("no failed attempt reported while the collector was down")
	}
	c.up()
	if err := sink.Flush(ctxTimeout(t, 20*time.Second)); err != nil {
		t.Fatalf("Flush after the collector came back: %v", err)
	}
	if n := c.count(recs[0].TraceID); n != 1000 {
		t.Errorf("%d of 1000 records stored", n)
	}
	if err := sink.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestBufferFull: beyond the buffer, records are dropped and counted
// exactly; the others arrive.
func TestBufferFull(t *testing.T) {
	c := newCollector(t)
	c.down()
	sink, _ := New(Options{URL: c.url(), BufferSize: 100, BatchSize: 30, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	recs := records(2, 250)
	for i := 0; i < 250; i += 25 {
		sink.WriteRecords(context.Background(), recs[i:i+25])
	}
	if d := sink.Dropped(); d.BufferFull != 150 || d.Total() != 150 {
		t.Fatalf("dropped %+v, want 150 for a full buffer", d)
	}
	c.up()
	err := sink.Flush(ctxTimeout(t, 20*time.Second))
	var de *DropError
	if !errors.As(err, &de) || de.BufferFull != 150 || de.Total() != 150 || !strings.Contains(err.Error(), "150 because the buffer was full") {
		t.Fatalf("Flush: %v", err)
	}
	if n := c.count(recs[0].TraceID); n != 100 {
		t.Errorf("%d records stored, want the 100 buffered", n)
	}
	sink.Shutdown(context.Background())
}

// scripted answers requests with the given statuses in turn, then 200,
// counting the records it was sent.
type scripted struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	bodies  []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, fmt.Sprint(r.Header.Get("Content-Encoding"), len(b)))
	var a func(http.ResponseWriter)
	if len(s.answers) > 0 {
		a, s.answers = s.answers[0], s.answers[1:]
	}
	s.mu.Unlock()
	if a == nil {
		w.Write([]byte(`{"accepted":1,"added":1}`))
		return
	}
	a(w)
}

func status(code int, hdr, body string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if k, v, ok := strings.Cut(hdr, ": "); ok {
			w.Header().Set(k, v)
		}
		w.WriteHeader(code)
		w.Write([]byte(body))
	}
}

func startScripted(t *testing.T, answers ...func(http.ResponseWriter)) (*scripted, string) {
	s := &scripted{answers: answers}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return s, "http://" + ln.Addr().String()
}

// TestRetryAfterAndBackoff: 429 waits what Retry-After says; 5xx backs off
// with jitter under a doubling ceiling; then the batch is delivered.
func TestRetryAfterAndBackoff(t *testing.T) {
	s, url := startScripted(t, status(429, "Retry-After: 7", ""), status(503, "", "busy"), status(502, "", ""))
	var mu sync.Mutex
	var waits []time.Duration
	o := Options{URL: url, BatchSize: 1, MinBackoff: 100 * time.Millisecond}
	o.after = func(d time.Duration) <-chan time.Time {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
	sink, _ := New(o)
	sink.WriteRecords(context.Background(), records(3, 1))
	if err := sink.Flush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 3 || waits[0] != 7*time.Second || waits[1] <= 0 || waits[1] > 200*time.Millisecond || waits[2] <= 0 || waits[2] > 400*time.Millisecond {
		t.Errorf("waits %v: want 7s (Retry-After), then up to 200ms, then up to 400ms", waits)
	}
	if len(s.bodies) != 4 || !strings.HasPrefix(s.bodies[0], "gzip") {
		t.Errorf("requests: %v", s.bodies)
	}
	sink.Shutdown(context.Background())
}

// TestRejected: a 400 naming one record drops that record only; a 401
// drops the batch; both are counted and reported with the reason.
func TestRejected(t *testing.T) {
	s, url := startScripted(t,
		status(400, "", `{"error":"record 1: field type: unknown record type","index":1,"field":"type"}`),
		status(200, "", "{}"),
		status(401, "", `{"error":"unknown or revoked API key"}`))
	sink, _ := New(Options{URL: url, BatchSize: 3, NoGzip: true})
	sink.WriteRecords(context.Background(), records(4, 3))
	err := sink.Flush(ctxTimeout(t, 10*time.Second))
	var de *DropError
	if !errors.As(err, &de) || de.Rejected != 1 || !strings.Contains(de.LastReason, "unknown record type") {
		t.Fatalf("after one bad record: %v", err)
	}
	sink.WriteRecords(context.Background(), records(5, 3))
	err = sink.Flush(ctxTimeout(t, 10*time.Second))
	if !errors.As(err, &de) || de.Rejected != 4 || !strings.Contains(de.LastReason, "revoked") {
		t.Fatalf("after a 401: %v", err)
	}
	if len(s.bodies) != 3 || s.bodies[0] == s.bodies[1] {
		t.Errorf("requests: %v (the second should be the batch without the bad record)", s.bodies)
	}
	sink.Shutdown(context.Background())
}

// TestShutdownWhileDown: what cannot be sent by Shutdown's deadline is
// counted as unsent; writes after Shutdown are refused and counted.
func TestShutdownWhileDown(t *testing.T) {
	c := newCollector(t)
	c.down()
	sink, _ := New(Options{URL: c.url(), MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	sink.WriteRecords(context.Background(), records(6, 40))
	err := sink.Shutdown(ctxTimeout(t, 100*time.Millisecond))
	var de *DropError
	if !errors.As(err, &de) || de.Unsent != 40 || de.Total() != 40 {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := sink.WriteRecords(context.Background(), records(6, 2)); err == nil {
		t.Error("WriteRecords after Shutdown accepted")
	}
	if d := sink.Dropped(); d.Closed != 2 || d.Total() != 42 {
		t.Errorf("dropped %+v", d)
	}
}

// TestTwentyAgentsCollectorDown: 20 agents record while the collector is
// down; each loses nothing its buffer holds, and the one whose buffer is
// too small counts exactly what it dropped.
func TestTwentyAgentsCollectorDown(t *testing.T) {
	c := newCollector(t)
	c.down()
	const agents, calls = 20, 100 // each run: run.start, 100 tool calls (start and end), run.end
	const perRun = 2*calls + 2
	type agent struct {
		sink *Sink
		tr   *trace.Tracer
		id   trace.TraceID
	}
	all := make([]*agent, agents)
	var wg sync.WaitGroup
	for i := range all {
		buffer := 1000
		if i == 0 {
			buffer = 50 // too small: 152 of its 202 records dropped
		}
		sink, _ := New(Options{URL: c.url(), BufferSize: buffer, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
		a := &agent{sink: sink, tr: trace.New(trace.Options{Sinks: []trace.Sink{sink}, Dispatch: trace.DispatchOptions{Inline: true}})}
		all[i] = a
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, run := a.tr.Start(context.Background(), fmt.Sprintf("agent-%d", i), trace.RunOptions{})
			a.id = run.TraceID()
			for k := range calls {
				trace.Tool(ctx, "step", k, func(context.Context) (int, error) { return k, nil })
			}
			run.End(nil, nil)
		}()
	}
	wg.Wait() // every agent ran to the end while the collector was down
	c.up()
	for i, a := range all {
		err := a.sink.Shutdown(ctxTimeout(t, 30*time.Second))
		n := c.count(a.id)
		if i == 0 {
			var de *DropError
			if !errors.As(err, &de) || de.BufferFull != perRun-50 || de.Total() != de.BufferFull || n != 50 {
				t.Errorf("agent 0 (small buffer): %v, %d stored", err, n)
			}
			continue
		}
		if err != nil || n != perRun {
			t.Errorf("agent %d: %v, %d of %d records stored", i, err, n, perRun)
		}
	}
}

// TestBufferBytes: large values fill the buffer by size before its record
// count is reached.
func TestBufferBytes(t *testing.T) {
	c := newCollector(t)
	c.down()
	sink, _ := New(Options{URL: c.url(), BufferBytes: 10 * (256 + 1000 + 100), MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	recs := records(7, 20)
	for i := range recs {
		recs[i].Output = trace.Text(strings.Repeat("x", 998)) // 1000 bytes with quotes
		recs[i].Name = strings.Repeat("n", 100)
	}
	sink.WriteRecords(context.Background(), recs)
	if d := sink.Dropped(); d.BufferFull != 10 || sink.Buffered() != 10 {
		t.Errorf("dropped %+v, buffered %d; want 10 and 10", d, sink.Buffered())
	}
	c.up()
	if err := sink.Flush(ctxTimeout(t, 20*time.Second)); err == nil {
		t.Error("Flush reported no drops")
	}
	if n := c.count(recs[0].TraceID); n != 10 {
		t.Errorf("%d stored", n)
	}
	// The accounting returns to zero once sent: the buffer takes 10 more.
	more := records(8, 10)
	for i := range more {
		more[i].Output, more[i].Name = recs[0].Output, recs[0].Name
	}
	sink.WriteRecords(context.Background(), more)
	if d := sink.Dropped(); d.BufferFull != 10 {
		t.Errorf("after sending: dropped %+v", d)
	}
	sink.Shutdown(context.Background())
}

// TestCollectorDown30s is the fault scenario at full length: 20
// agents record a tool call every 5 ms for 40 s while the collector is
// down from 5 s to 35 s. Every record within the buffers arrives; the agent
// with a small buffer counts exactly what it dropped. It takes 40 s, so it
// runs only with LOUPE_LONG_FAULTS=1 (see BENCHMARKS.md).
func TestCollectorDown30s(t *testing.T) {
	if os.Getenv("LOUPE_LONG_FAULTS") == "" {
		t.Skip("a 40-second fault test; run with LOUPE_LONG_FAULTS=1")
	}
	c := newCollector(t)
	const agents = 20
	sinks := make([]*Sink, agents)
	ids := make([]trace.TraceID, agents)
	counts := make([]int, agents)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range agents {
		buffer := 100000
		if i == 0 {
			buffer = 1000
		}
		sinks[i], _ = New(Options{URL: c.url(), BufferSize: buffer, MaxBackoff: 2 * time.Second})
		tr := trace.New(trace.Options{Sinks: []trace.Sink{sinks[i]}, Dispatch: trace.DispatchOptions{OnFull: trace.Block}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, run := tr.Start(context.Background(), fmt.Sprintf("agent-%d", i), trace.RunOptions{})
			ids[i] = run.TraceID()
			for k := 0; ; k++ {
				select {
				case <-stop:
					run.End(nil, nil)
					tr.Flush(context.Background())
					counts[i] = 2*k + 2
					return
				case <-time.After(5 * time.Millisecond):
				}
				trace.Tool(ctx, "step", k, func(context.Context) (int, error) { return k, nil })
			}
		}()
	}
	time.Sleep(5 * time.Second)
	c.down()
	time.Sleep(30 * time.Second)
	c.up()
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	for i, s := range sinks {
		err := s.Shutdown(ctxTimeout(t, 60*time.Second))
		n := c.count(ids[i])
		d := s.Dropped()
		t.Logf("agent %d: %d records made, %d stored, dropped %+v", i, counts[i], n, d)
		if int64(n)+d.Total() != int64(counts[i]) || d.Total() != d.BufferFull {
			t.Errorf("agent %d: %d stored + %d dropped != %d made (%v)", i, n, d.Total(), counts[i], err)
		}
		if i > 0 && d.Total() != 0 {
			t.Errorf("agent %d lost records within its buffer: %v", i, err)
		}
		if i == 0 && d.BufferFull == 0 {
			t.Error("agent 0's small buffer dropped nothing: the collector was not down long enough")
		}
	}
}

// TestProject: with Options.Project the records go to that project of the
// collector, and not to the default one.
func TestProject(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "c.db")
	st, err := sqlite.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := server.CreateProject(ctx, st, "team_a", time.Now()); err != nil {
		t.Fatal(err)
	}
	var pst store.Store
	srv, err := server.New(server.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Projects: func(ctx context.Context, name string) (*server.Project, error) {
			pdsn, err := store.ProjectDSN(dsn, name)
			if err != nil {
				return nil, err
			}
			if pst, err = sqlite.Open(ctx, pdsn); err != nil {
				return nil, err
			}
			return &server.Project{Store: pst, Close: pst.Close}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{t: t, st: st, srv: srv}
	c.up()
	defer func() { c.down(); srv.Close() }()
	sink, err := New(Options{URL: c.url(), Project: "team_a"})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(7, 5)
	sink.WriteRecords(ctx, recs)
	if err := sink.Shutdown(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := c.count(recs[0].TraceID); n != 0 {
		t.Errorf("the default project got %d records", n)
	}
	if tr, err := pst.Trace(ctx, recs[0].TraceID); err != nil || len(tr.Records) != 5 {
		t.Errorf("team_a's trace: %v %v", tr, err)
	}
}
