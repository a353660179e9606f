package server

// The collector attacked as a web page and a hostile client would:
// rebinding, cross-site writes, hostile content types, slow readers and
// slowloris, oversized echoes and leaked internals. The same attacks from
// a real browser are in browser_attack_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// request sends one request with full control of Host and headers.
func (e *env) request(method, path, host, ctype string, body []byte, hdr ...string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

// seed stores one run and returns its id.
func (e *env) seed(id byte, name string) trace.TraceID {
	e.t.Helper()
	recs := run(id, name)
	if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
		e.t.Fatalf("seeding: %d %s", code, body)
	}
	return recs[0].TraceID
}

// count returns how many traces the store holds.
func count(t testing.TB, st store.Store) int {
	t.Helper()
	page, err := st.List(context.Background(), store.ListQuery{Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Traces)
}

// everyRoute is one request for each route, the UI and /mcp.
func everyRoute(id trace.TraceID, recs []byte) []struct{ method, path, ctype string } {
	return []struct{ method, path, ctype string }{
		{"GET", "/healthz", ""},
		{"GET", "/", ""},
		{"GET", "/api/v1/traces", ""},
		{"GET", "/api/v1/traces/" + id.String(), ""},
		{"GET", "/api/v1/search?q=x", ""},
		{"GET", "/api/v1/aggregates", ""},
		{"GET", "/api/v1/evaluations", ""},
		{"GET", "/api/v1/openapi.json", ""},
		{"GET", "/api/v1/stream", ""},
		{"GET", "/api/v1/traces/" + id.String() + "/stream", ""},
		{"POST", "/v1/records", "application/x-ndjson"},
		{"POST", "/v1/traces", "application/json"},
		{"DELETE", "/api/v1/traces/" + id.String(), ""},
		{"POST", "/mcp", "application/json"},
	}
}

func TestRebindingRefused(t *testing.T) {
	mcp := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "mcp") })
	ui := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ui") })
	e := newEnv(t, Options{UI: ui, MCP: mcp})
	id := e.seed(1, "secret-run")
	recs := ndjson(run(2, "injected"))
	for _, host := range []string{"evil.example", "evil.example:80", "127.0.0.1.evil.example", "localhost.evil.example", "0x7f000001.evil.example", "[::1].evil.example", "10.0.0.1"} {
		for _, rt := range everyRoute(id, recs) {
			var body []byte
			if rt.method == "POST" {
				body = recs
			}
			code, b := e.request(rt.method, rt.path, host, rt.ctype, body)
			if code != http.StatusForbidden || bytes.Contains(b, []byte("secret-run")) || bytes.Contains(b, []byte(id.String()[:8])) && !strings.Contains(rt.path, id.String()) {
				t.Errorf("Host %s: %s %s: %d %.200s, want 403 without data", host, rt.method, rt.path, code, b)
			}
		}
	}
	if n := count(t, e.st); n != 1 {
		t.Errorf("after the rebinding attempts the store holds %d traces, want the 1 seeded", n)
	}
	// The collector's own names still work.
	port := e.ts.Listener.Addr().(*net.TCPAddr).Port
	for _, host := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("localhost:%d", port), "LOCALHOST", fmt.Sprintf("[::1]:%d", port), "127.9.9.9", "ui.localhost", "localhost."} {
		if code, b := e.request("GET", "/api/v1/traces", host, "", nil); code != 200 {
			t.Errorf("Host %s: %d %s, want 200", host, code, b)
		}
	}
}

func TestPublicHosts(t *testing.T) {
	st := openStore(t)
	key, _, err := CreateKey(context.Background(), st, ScopeAdmin, "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Keys and no Hosts: any Host (the keys are the wall).
	e := newEnv(t, Options{Store: st, RequireKeys: true})
	if code, b := e.request("GET", "/api/v1/traces", "loupe.corp.example", "", nil, "Authorization", "Bearer "+key); code != 200 {
		t.Errorf("keys, no Hosts: %d %s", code, b)
	}
	// Keys and Hosts: those names and loopback only.
	e = newEnv(t, Options{Store: st, RequireKeys: true, Hosts: []string{"loupe.corp.example"}})
	for host, want := range map[string]int{"loupe.corp.example": 200, "LOUPE.corp.example:443": 200, "127.0.0.1": 200, "evil.example": 403} {
		if code, b := e.request("GET", "/api/v1/traces", host, "", nil, "Authorization", "Bearer "+key); code != want {
			t.Errorf("Hosts set, Host %s: %d %s, want %d", host, code, b, want)
		}
	}
	// Without keys, Hosts widens the loopback mode.
	e = newEnv(t, Options{Hosts: []string{"devbox"}})
	if code, b := e.request("GET", "/api/v1/traces", "devbox:4318", "", nil); code != 200 {
		t.Errorf("no keys, Hosts devbox: %d %s", code, b)
	}
}

func TestCrossSiteWritesRefused(t *testing.T) {
	e := newEnv(t, Options{TrustedOrigins: []string{"https://ui.example.com"}})
	id := e.seed(1, "kept")
	recs := ndjson(run(2, "injected"))
	otlpJSON := []byte(`{"resourceSpans":[]}`)
	for _, tt := range []struct {
		name, method, path, ctype string
		body                      []byte
		hdr                       []string
		want                      int
	}{
		// What a page on another site can send without a preflight.
		{"text/plain cross-site", "POST", "/v1/records", "text/plain;charset=UTF-8", recs, []string{"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"}, 403},
		{"form cross-site", "POST", "/v1/records", "application/x-www-form-urlencoded", recs, []string{"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"}, 403},
		{"multipart same-site", "POST", "/v1/records", "multipart/form-data; boundary=x", recs, []string{"Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:1"}, 403},
		{"no type, old browser", "POST", "/v1/records", "", recs, []string{"Origin", "http://evil.example"}, 403},
		{"ndjson cross-site", "POST", "/v1/records", "application/x-ndjson", recs, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"otlp cross-site", "POST", "/v1/traces", "application/json", otlpJSON, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"delete cross-site", "DELETE", "/api/v1/traces/" + id.String(), "", nil, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"delete null origin", "DELETE", "/api/v1/traces/" + id.String(), "", nil, []string{"Origin", "null"}, 403},
		// Content types a browser sends without asking, from a program.
		{"text/plain", "POST", "/v1/records", "text/plain", recs, nil, 415},
		{"form", "POST", "/v1/records", "application/x-www-form-urlencoded", recs, nil, 415},
		{"multipart", "POST", "/v1/records", "multipart/form-data; boundary=x", recs, nil, 415},
		{"no type", "POST", "/v1/records", "", recs, nil, 415},
		{"otlp text/plain", "POST", "/v1/traces", "text/plain", otlpJSON, nil, 415},
	} {
		code, b := e.request(tt.method, tt.path, "", tt.ctype, tt.body, tt.hdr...)
		if code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, code, b, tt.want)
		}
	}
	if n := count(t, e.st); n != 1 {
		t.Errorf("the store holds %d traces after the refused writes, want 1", n)
	}
	// Programs (no browser headers), the UI's own origin and trusted
	// origins still write.
	for i, hdr := range [][]string{
		nil,
		{"Sec-Fetch-Site", "same-origin", "Origin", e.ts.URL},
		{"Origin", e.ts.URL},
		{"Sec-Fetch-Site", "cross-site", "Origin", "https://ui.example.com"},
	} {
		code, b := e.request("POST", "/v1/records", "", "application/x-ndjson", ndjson(run(byte(10+i), "ok")), hdr...)
		if code != 200 {
			t.Errorf("headers %v: %d %s, want 200", hdr, code, b)
		}
	}
	// Reading cross-site is not a write: the browser keeps the answer
	// from the page (no CORS headers are ever sent).
	code, b := e.request("GET", "/api/v1/traces", "", "", nil, "Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example")
	if code != 200 {
		t.Errorf("cross-site GET: %d %s", code, b)
	}
	if _, b, resp := e.do("GET", "/api/v1/traces", "", nil, "Origin", "http://evil.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS header sent: %s", b)
	}
}

// bigTrace stores a run whose JSON is about mb megabytes.
func (e *env) bigTrace(id byte, mb int) trace.TraceID {
	e.t.Helper()
	recs := run(id, "big")
	pad := strings.Repeat("x", 512<<10)
	for i := range mb * 2 {
		r := recs[1]
		r.Seq = uint64(100 + i)
		r.Output = trace.Value(`"` + pad + `"`)
		recs = append(recs, r)
	}
	var b bytes.Buffer
	for i := range recs {
		b.Write(recs[i].AppendJSON(nil))
		b.WriteByte('\n')
	}
	if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", b.Bytes()); code != 200 {
		e.t.Fatalf("storing the big trace: %d %s", code, body)
	}
	return recs[0].TraceID
}

// TestSlowReaders: clients that ask for a large trace and never read
// the answer are cut off after the write timeout, hold at most the
// response budget between them, and do not stop others from being
// answered.
func TestSlowReaders(t *testing.T) {
	e := newEnv(t, Options{WriteTimeout: 300 * time.Millisecond, MaxResponseBytes: 3 << 20, MaxExpensive: 2})
	id := e.bigTrace(1, 2)
	// A second server on the same Server, counting finished requests and
	// closed connections.
	var handled, closed atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.srv.ServeHTTP(w, r)
		if strings.HasPrefix(r.URL.Path, "/api/v1/traces/") {
			handled.Add(1)
		}
	}))
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed.Add(1)
		}
	}
	// Small server-side socket buffers, so that a 2 MiB answer fills them.
	ts.Listener = smallBuffers{ts.Listener.(*net.TCPListener)}
	ts.Start()
	defer ts.Close()
	full := 0
	if code, b, _ := e.do("GET", "/api/v1/traces/"+id.String(), "", nil); code == 200 {
		full = len(b)
	} else {
		t.Fatalf("GET the big trace: %d", code)
	}
	// Meanwhile the byte budget holds (one answer alone may exceed it).
	stop := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var max int64
		for {
			select {
			case <-stop:
				peak <- max
				return
			case <-time.After(5 * time.Millisecond):
			}
			e.srv.budget.mu.Lock()
			max = maxOf(max, e.srv.budget.used)
			e.srv.budget.mu.Unlock()
		}
	}()
	const clients = 6
	var conns []net.Conn
	for range clients {
		c, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// A small receive buffer, so that the server's writes block.
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		fmt.Fprintf(c, "GET /api/v1/traces/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", id)
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Meanwhile a normal client is answered.
	client := &http.Client{Timeout: 5 * time.Second}
	for _, path := range []string{"/healthz", "/api/v1/traces?limit=5"} {
		resp, err := client.Get(ts.URL + path)
		if err != nil {
			t.Fatalf("GET %s while slow readers hold answers: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
	}
	// The server gives up on every slow reader (the handlers return and
	// the connections are closed) without their reading a byte. (The
	// two normal requests closed no connection: they were kept alive.)
	deadline := time.Now().Add(60 * time.Second)
	for handled.Load() < clients || closed.Load() < clients {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s, %d of %d slow readers' requests still in the server, %d connections closed", clients-handled.Load(), clients, closed.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	if p := <-peak; p > 3<<20 {
		t.Errorf("%d bytes of answers in flight at once, over the 3 MiB budget", p)
	}
	if e.srv.budget.used != 0 {
		t.Errorf("%d bytes of the budget still held after every slow reader was ended", e.srv.budget.used)
	}
	// Each got a 200 cut short (the answer, over 2 MiB, is more than
	// the socket buffers hold) or a 503 (no room in the budget).
	if full < 2<<20 {
		t.Fatalf("the big trace is %d bytes, too small to fill the socket buffers", full)
	}
	statuses := map[string]int{}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var head [64]byte
		n, err := io.ReadFull(c, head[:])
		if err != nil {
			t.Errorf("reading a slow reader's answer: %v", err)
		}
		line, _, _ := strings.Cut(string(head[:n]), "\r\n")
		statuses[line]++
		if !strings.Contains(line, " 200 ") && !strings.Contains(line, " 503 ") {
			t.Errorf("slow reader got %q", line)
		}
	}
	t.Logf("slow readers' status lines: %v", statuses)
}

// smallBuffers accepts connections with 64 KiB send buffers.
type smallBuffers struct{ *net.TCPListener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err == nil {
		c.SetWriteBuffer(64 << 10)
	}
	return c, err
}

func maxOf(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// TestSlowloris: connections that send their headers a byte at a time
// are closed after the header timeout, and others are answered
// meanwhile.
func TestSlowloris(t *testing.T) {
	srv, err := New(Options{Store: openStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer("127.0.0.1:0", srv)
	if hs.ReadHeaderTimeout <= 0 || hs.ReadTimeout <= 0 || hs.IdleTimeout <= 0 {
		t.Fatalf("NewHTTPServer sets no read timeouts: %+v", hs)
	}
	hs.ReadHeaderTimeout = 500 * time.Millisecond // the real one is 10 s
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { srv.Close(); hs.Close() })
	var closed sync.WaitGroup
	for range 50 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		closed.Add(1)
		go func() {
			defer closed.Done()
			for _, b := range []byte("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ") {
				if _, err := c.Write([]byte{b}); err != nil {
					return // closed by the server: good
				}
				time.Sleep(100 * time.Millisecond)
			}
			// Still open after all that: wait for the server to close.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadAll(c); err != nil {
				t.Errorf("slowloris connection not closed by the server: %v", err)
			}
		}()
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatalf("a normal request during the slowloris: %v", err)
	}
	resp.Body.Close()
	closed.Wait()
}

// TestEchoesBounded: no answer quotes a huge id, path, query or header
// whole.
func TestEchoesBounded(t *testing.T) {
	e := newEnv(t, Options{})
	huge := strings.Repeat("a", 1<<20)
	for _, tt := range []struct{ method, path, ctype string }{
		{"GET", "/api/v1/traces/" + huge, ""},
		{"GET", "/api/v1/evaluations/" + huge, ""},
		{"DELETE", "/api/v1/traces/" + huge, ""},
		{"GET", "/api/v1/traces?limit=" + huge, ""},
		{"GET", "/api/v1/traces?since=" + huge, ""},
		{"GET", "/api/v1/traces?id_prefix=" + huge, ""},
		{"GET", "/api/v1/search?q=" + huge, ""},
		{"GET", "/api/v1/search?q=name:" + huge, ""},
		{"GET", "/api/v1/search?cursor=" + huge, ""},
		{"GET", "/nope/" + huge, ""},
		{"PUT", "/api/v1/traces", ""},
		{"POST", "/v1/records", "text/" + huge},
		{"POST", "/v1/traces", "text/" + huge},
	} {
		code, b := e.request(tt.method, tt.path, "", tt.ctype, nil)
		if code < 400 || len(b) > 4<<10 {
			t.Errorf("%s %.40s…: %d, %d bytes: %.300s", tt.method, tt.path, code, len(b), b)
		}
	}
}

// TestNoInternalsInAnswers: a store failure or a missing trace never
// shows the store's file, DSN or a stack.
func TestNoInternalsInAnswers(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, Options{Store: failingStore{st}})
	checks := []struct{ method, path, ctype string }{
		{"GET", "/api/v1/traces/0123456789abcdef0123456789abcdef", ""},
		{"GET", "/api/v1/traces/0123", ""},
		{"GET", "/api/v1/evaluations/0123456789abcdef0123456789abcdef", ""},
		{"POST", "/v1/records", "application/x-ndjson"},
	}
	for _, c := range checks {
		var body []byte
		if c.method == "POST" {
			body = ndjson(run(1, "x"))
		}
		code, b := e.request(c.method, c.path, "", c.ctype, body)
		for _, secret := range []string{"secret", ".db", "loupe.db", "postgres://", "goroutine ", ".go:"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s %s: %d %s: shows %q", c.method, c.path, code, b, secret)
			}
		}
	}
}

// TestNumericBoundsAtIngest: token counts and costs that would wrap sums
// or fail JSON are refused with the record and field named, nothing of
// the request is stored, and reading keeps working.
func TestNumericBoundsAtIngest(t *testing.T) {
	e := newEnv(t, Options{})
	e.seed(1, "fine")
	for _, tt := range []struct {
		name  string
		set   func(*trace.Usage)
		field string
	}{
		{"tokens near 2^63", func(u *trace.Usage) { u.InputTokens = 1<<63 - 1 }, "usage.input_tokens"},
		{"negative tokens", func(u *trace.Usage) { u.OutputTokens = -5 }, "usage.output_tokens"},
		{"cached tokens", func(u *trace.Usage) { u.CachedTokens = 1 << 62 }, "usage.cached_tokens"},
		{"reasoning tokens", func(u *trace.Usage) { u.ReasoningTokens = 1 << 62 }, "usage.reasoning_tokens"},
		{"cost near max float", func(u *trace.Usage) { u.CostUSD = 1.7e308 }, "usage.cost_usd"},
		{"negative cost", func(u *trace.Usage) { u.CostUSD = -1 }, "usage.cost_usd"},
	} {
		recs := run(2, "huge")
		tt.set(&recs[2].Usage)
		code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs))
		if code != 400 || !bytes.Contains(b, []byte(`"index":2`)) || !bytes.Contains(b, []byte(`"field":"`+tt.field+`"`)) {
			t.Errorf("%s: %d %s, want 400 naming record 2 and %s", tt.name, code, b, tt.field)
		}
	}
	// Two calls at the bound sum without wrapping.
	recs := run(3, "at the bound")
	recs[2].Usage = trace.Usage{InputTokens: store.MaxTokens, OutputTokens: store.MaxTokens, CostUSD: store.MaxCostUSD}
	second := recs[2]
	second.Seq, second.SpanID = 5, trace.SpanID{3, 9}
	recs = append(recs, second)
	if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
		t.Fatalf("records at the bounds: %d %s", code, b)
	}
	if n := count(t, e.st); n != 2 {
		t.Errorf("the store holds %d traces, want 2 (nothing of the refused requests)", n)
	}
	for _, path := range []string{"/api/v1/traces", "/api/v1/traces/" + recs[0].TraceID.String(), "/api/v1/aggregates", "/api/v1/search?q=bound"} {
		code, b, _ := e.do("GET", path, "", nil)
		if code != 200 || !json.Valid(b) || bytes.Contains(b, []byte(`":-`)) || bytes.Contains(b, []byte("Inf")) {
			t.Errorf("GET %s: %d %.300s", path, code, b)
		}
	}
}

// TestTextRepairedAtIngest: invalid UTF-8 from records and OTLP (JSON and
// protobuf) is repaired, huge names are cut, and every answer is valid
// JSON of a bounded size.
func TestTextRepairedAtIngest(t *testing.T) {
	e := newEnv(t, Options{})
	recs := run(1, "bad \xff\xfe name")
	recs[1].Output = trace.Value("\"bad \xc3\x28 output\"")
	recs[1].Error = "bad \xed\xa0\x80 error"
	if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
		t.Fatalf("records with invalid UTF-8: %d %s", code, b)
	}
	long := run(2, strings.Repeat("n", 6<<20))
	if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(long)); code != 200 {
		t.Fatalf("6 MB name: %d %s", code, b)
	}
	// OTLP protobuf with an invalid UTF-8 span name and attribute.
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{9, 9, 9})
	sp.SetSpanID(pcommon.SpanID{9, 1})
	sp.SetName("span \xff name")
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Second)))
	sp.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
	sp.Attributes().PutStr("gen_ai.tool.name", "tool \xc0 name")
	sp.Attributes().PutStr("gen_ai.tool.call.result", "result \xff")
	var pm ptrace.ProtoMarshaler
	pb, err := pm.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	if code, b, _ := e.do("POST", "/v1/traces", "application/x-protobuf", pb); code != 200 {
		t.Fatalf("OTLP protobuf with invalid UTF-8: %d %x", code, b)
	}
	for _, path := range []string{"/api/v1/traces", "/api/v1/traces/" + recs[0].TraceID.String(), "/api/v1/traces/09090900000000000000000000000000", "/api/v1/search?q=bad"} {
		code, b, _ := e.do("GET", path, "", nil)
		if code != 200 || !json.Valid(b) || !utf8.Valid(b) {
			t.Errorf("GET %s: %d, valid JSON %v, valid UTF-8 %v: %.300q", path, code, json.Valid(b), utf8.Valid(b), b)
		}
	}
	if code, b, _ := e.do("GET", "/api/v1/traces", "", nil); code != 200 || len(b) > 64<<10 || !bytes.Contains(b, []byte("truncated")) {
		t.Errorf("the list with a 6 MB name: %d, %d bytes", code, len(b))
	}
}

// TestManyQueryTermsIs400: a query past the store's limits is the
// client's mistake, named as such.
func TestManyQueryTermsIs400(t *testing.T) {
	e := newEnv(t, Options{})
	q := strings.Repeat("w ", 5000)
	code, b, _ := e.do("GET", "/api/v1/search?q="+url.QueryEscape(q), "", nil)
	if code != 400 || !bytes.Contains(b, []byte("limit")) {
		t.Errorf("5000 terms: %d %s", code, b)
	}
	tags := strings.Repeat("&tag=x", 500)
	code, b, _ = e.do("GET", "/api/v1/traces?"+tags[1:], "", nil)
	if code != 400 || !bytes.Contains(b, []byte("limit")) {
		t.Errorf("500 tags: %d %s", code, b)
	}
}

// TestOTLPGroupRefused: a protobuf request that starts with a group (which
// OTLP never uses) is a 400 that says so, deep or shallow, and the server
// keeps answering.
func TestOTLPGroupRefused(t *testing.T) {
	e := newEnv(t, Options{})
	_, real := otlpFile(t, "genai.json")
	td, err := otlp.DecodeJSON(real)
	if err != nil {
		t.Fatal(err)
	}
	var pm ptrace.ProtoMarshaler
	pb, err := pm.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	// An empty group of unknown field 15 (start tag 0x7b, end tag 0x7c)
	// before the real request.
	body := append([]byte{0x7b, 0x7c}, pb...)
	code, msg, _ := e.do("POST", "/v1/traces", "application/x-protobuf", body)
	if code != 400 || !bytes.Contains(msg, []byte("group")) {
		t.Errorf("group-prefixed request: %d %q, want 400 about groups", code, msg)
	}
	if n := count(t, e.st); n != 0 {
		t.Errorf("%d traces stored from a refused request", n)
	}
	if code, _, _ := e.do("POST", "/v1/traces", "application/x-protobuf", pb); code != 200 {
		t.Errorf("the same request without the group: %d", code)
	}
}

// infStore answers aggregates that cannot be encoded as JSON, as an old
// store might hold.
type infStore struct{ store.Store }

func (infStore) Aggregate(context.Context, time.Time, time.Time) (store.Aggregates, error) {
	return store.Aggregates{ErrorRate: math.Inf(1)}, nil
}

// TestUnencodableAnswerIs500: an answer that does not encode is a 500
// with a message, never a 200 with an empty body.
func TestUnencodableAnswerIs500(t *testing.T) {
	e := newEnv(t, Options{Store: infStore{openStore(t)}})
	code, b, _ := e.do("GET", "/api/v1/aggregates", "", nil)
	if code != 500 || !json.Valid(b) || !bytes.Contains(b, []byte("encoded")) {
		t.Errorf("unencodable aggregates: %d %q, want 500 with a JSON error", code, b)
	}
}
