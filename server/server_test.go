package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

func openStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type env struct {
	t   testing.TB
	st  store.Store
	srv *Server
	ts  *httptest.Server
	key string // sent as Bearer when set
}

func newEnv(t testing.TB, o Options) *env {
	t.Helper()
	if o.Store == nil {
		o.Store = openStore(t)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close() })
	return &env{t: t, st: o.Store, srv: srv, ts: ts}
}

// do sends a request and returns the status, the body and the response.
func (e *env) do(method, path, ctype string, body []byte, hdr ...string) (int, []byte, *http.Response) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp
}

var t0 = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)

// run returns the records of a small run: run.start, a tool call, a model
// call, run.end.
func run(id byte, name string) []trace.Record {
	tid := trace.TraceID{id, 1}
	root := trace.SpanID{id, 1}
	return []trace.Record{
		{V: 1, TraceID: tid, SpanID: root, Seq: 1, Time: t0, Type: trace.TypeRunStart, Name: name, Run: &trace.RunInfo{Tags: []string{"env:test"}}},
		{V: 1, TraceID: tid, SpanID: trace.SpanID{id, 2}, ParentID: root, Seq: 2, Time: t0.Add(time.Second), Type: trace.TypeToolEnd, Name: "lookup", Input: trace.Value(`{"q":"time zone"}`), Output: trace.Value(`"UTC"`), Duration: time.Second},
		{V: 1, TraceID: tid, SpanID: trace.SpanID{id, 3}, ParentID: root, Seq: 3, Time: t0.Add(2 * time.Second), Type: trace.TypeModelCall, Name: "gpt-4o", Usage: trace.Usage{InputTokens: 10, OutputTokens: 5}},
		{V: 1, TraceID: tid, SpanID: root, Seq: 4, Time: t0.Add(3 * time.Second), Type: trace.TypeRunEnd, Name: name, Status: "success", Duration: 3 * time.Second},
	}
}

func ndjson(recs []trace.Record) []byte {
	var b []byte
	for i := range recs {
		b = append(recs[i].AppendJSON(b), '\n')
	}
	return b
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func stored(t testing.TB, st store.Store, id trace.TraceID) int {
	t.Helper()
	tr, err := st.Trace(context.Background(), id)
	if errors.Is(err, store.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(tr.Records)
}

func TestPostRecords(t *testing.T) {
	e := newEnv(t, Options{})
	a, b, c := run(1, "a"), run(2, "b"), run(3, "c")
	arr, _ := json.Marshal(b)
	for _, tt := range []struct {
		name, ctype string
		body        []byte
		hdr         []string
		id          trace.TraceID
	}{
		{"ndjson", "application/x-ndjson", ndjson(a), nil, a[0].TraceID},
		{"array", "application/json", arr, nil, b[0].TraceID},
		{"gzip", "application/x-ndjson", gz(ndjson(c)), []string{"Content-Encoding", "gzip"}, c[0].TraceID},
	} {
		code, body, _ := e.do("POST", "/v1/records", tt.ctype, tt.body, tt.hdr...)
		if code != 200 || string(body) != `{"accepted":4,"added":4}`+"\n" {
			t.Errorf("%s: %d %s", tt.name, code, body)
		}
		if n := stored(t, e.st, tt.id); n != 4 {
			t.Errorf("%s: %d records stored", tt.name, n)
		}
	}
	// A resend is acknowledged and stores nothing new.
	if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(a)); code != 200 || string(body) != `{"accepted":4,"added":0}`+"\n" {
		t.Errorf("resend: %d %s", code, body)
	}
}

func TestPostRecordsBad(t *testing.T) {
	e := newEnv(t, Options{})
	good := run(4, "good")
	line := func(i int) string { return string(good[i].AppendJSON(nil)) }
	for _, tt := range []struct {
		name, body string
		index      int // -1: none
		field, msg string
	}{
		{"bad trace id", line(0) + "\n" + line(1) + "\n" + strings.Replace(line(2), `"trace_id":"04`, `"trace_id":"zz`, 1) + "\n", 2, "trace_id", "record 2 (line 3): field trace_id"},
		{"bad type in array", "[" + line(0) + "," + strings.Replace(line(1), `"tool.end"`, `"tool.ended"`, 1) + "]", 1, "type", "record 1: field type: unknown record type"},
		{"seq zero", line(0) + "\n" + strings.Replace(line(1), `"seq":2`, `"seq":0`, 1), 1, "seq", "record 1: seq is zero"},
		{"not json", line(0) + "\n{oops\n", 1, "", "record 1 (line 2): record is not a JSON object"},
		{"empty", "  \n", -1, "", "the body is empty"},
		{"open array", "[" + line(0), -1, "", "not closed"},
	} {
		code, body, _ := e.do("POST", "/v1/records", "application/json", []byte(tt.body))
		var eb struct {
			Error string `json:"error"`
			Index *int   `json:"index"`
			Field string `json:"field"`
		}
		if err := json.Unmarshal(body, &eb); err != nil {
			t.Fatalf("%s: %s", tt.name, body)
		}
		if code != 400 || !strings.Contains(eb.Error, tt.msg) || eb.Field != tt.field ||
			(tt.index < 0) != (eb.Index == nil) || eb.Index != nil && *eb.Index != tt.index {
			t.Errorf("%s: %d %s", tt.name, code, body)
		}
	}
	if n := stored(t, e.st, good[0].TraceID); n != 0 {
		t.Errorf("%d records of rejected requests were stored", n)
	}
}

func TestBodyLimits(t *testing.T) {
	e := newEnv(t, Options{MaxBodyBytes: 4 << 10, MaxDecodedBytes: 64 << 10})
	bomb := gz(bytes.Repeat([]byte(" "), 10<<20)) // 10 MiB of spaces, ~10 KiB gzipped
	if len(bomb) > 4<<10*4 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	small := gz(append(bytes.Repeat([]byte(" "), 1<<20), '\n'))
	for _, tt := range []struct {
		name, path, ctype string
		body              []byte
		hdr               []string
		code              int
	}{
		{"too large", "/v1/records", "application/json", bytes.Repeat([]byte(" "), 5<<10), nil, 413},
		{"gzip bomb", "/v1/records", "application/json", small, []string{"Content-Encoding", "gzip"}, 413},
		{"not gzip", "/v1/records", "application/json", []byte("hello"), []string{"Content-Encoding", "gzip"}, 400},
		{"brotli", "/v1/records", "application/json", []byte("x"), []string{"Content-Encoding", "br"}, 415},
		{"otlp too large", "/v1/traces", "application/x-protobuf", bytes.Repeat([]byte{0}, 5<<10), nil, 413},
		{"otlp gzip bomb", "/v1/traces", "application/json", small, []string{"Content-Encoding", "gzip"}, 413},
		{"otlp content type", "/v1/traces", "text/plain", []byte("x"), nil, 415},
		{"wrong method", "/v1/records", "", nil, nil, 405},
	} {
		method := "POST"
		if tt.code == 405 {
			method = "GET"
		}
		if code, body, _ := e.do(method, tt.path, tt.ctype, tt.body, tt.hdr...); code != tt.code {
			t.Errorf("%s: %d %s, want %d", tt.name, code, body, tt.code)
		}
	}
	// The server is still serving.
	if code, _, _ := e.do("GET", "/healthz", "", nil); code != 200 {
		t.Errorf("healthz after bad requests: %d", code)
	}
}

func otlpFile(t testing.TB, name string) (ptrace.Traces, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "otlp", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	td, err := otlp.DecodeJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return td, b
}

func TestPostOTLP(t *testing.T) {
	e := newEnv(t, Options{})
	td, jsonBody := otlpFile(t, "genai.json")
	var pm ptrace.ProtoMarshaler
	protoBody, err := pm.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	want := otlp.Map(td, nil).Records
	tid := want[0].TraceID

	code, body, resp := e.do("POST", "/v1/traces", "application/x-protobuf", gz(protoBody), "Content-Encoding", "gzip")
	if code != 200 || len(body) != 0 || resp.Header.Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("protobuf: %d %q %s", code, body, resp.Header.Get("Content-Type"))
	}
	tr, err := e.st.Trace(context.Background(), tid)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Records) != len(want) || tr.Summary.Name != "support" || tr.Summary.ToolCalls != 2 || tr.Summary.InputTokens != 1712 {
		t.Errorf("stored: %d records, summary %+v", len(tr.Records), tr.Summary)
	}
	// The same spans as JSON: acknowledged, nothing new.
	if code, body, _ := e.do("POST", "/v1/traces", "application/json", jsonBody); code != 200 || string(body) != "{}\n" {
		t.Errorf("json: %d %s", code, body)
	}
	if n := stored(t, e.st, tid); n != len(want) {
		t.Errorf("after resend: %d records", n)
	}

	// Partial success: the bad spans are counted, the good one stored.
	_, generic := otlpFile(t, "generic.json")
	code, body, _ = e.do("POST", "/v1/traces", "application/json", generic)
	if code != 200 || !strings.Contains(string(body), `"rejectedSpans":"2"`) || !strings.Contains(string(body), "traceId is missing") {
		t.Errorf("partial success: %d %s", code, body)
	}
	if n := stored(t, e.st, trace.TraceID{0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11}); n != 4 {
		t.Errorf("the good span of a partial success: %d records", n)
	}
	gtd, _ := otlpFile(t, "generic.json")
	pb, _ := pm.MarshalTraces(gtd)
	code, body, _ = e.do("POST", "/v1/traces", "application/x-protobuf", pb)
	// partial_success{rejected_spans: 2, …}
	if code != 200 || len(body) < 4 || body[0] != 0x0a || body[2] != 0x08 || body[3] != 2 {
		t.Errorf("protobuf partial success: %d %x", code, body)
	}

	// Bad data: 400 with a google.rpc.Status.
	code, body, _ = e.do("POST", "/v1/traces", "application/json", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"xyz"}]}]}]}`))
	if code != 400 || !strings.Contains(string(body), `"code":3`) {
		t.Errorf("bad json: %d %s", code, body)
	}
	code, body, _ = e.do("POST", "/v1/traces", "application/x-protobuf", []byte{0x0a, 0xff, 0xff, 0xff})
	if code != 400 || len(body) == 0 || body[0] != 0x08 || body[1] != 3 {
		t.Errorf("bad protobuf: %d %x", code, body)
	}
}

// failingStore fails every Append, as a full disk would, with an error
// that names the store's file and DSN, which no answer may show.
type failingStore struct{ store.Store }

const storeSecret = "/secret/dir/loupe.db postgres://loupe:hunter2@db.internal/loupe"

func (failingStore) Append(context.Context, []trace.Record) (int, error) {
	return 0, errors.New("disk full writing " + storeSecret)
}

func TestStoreErrorIs503(t *testing.T) {
	e := newEnv(t, Options{Store: failingStore{openStore(t)}})
	code, body, resp := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(run(5, "x")))
	if code != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "retry later") || strings.Contains(string(body), "secret") {
		t.Errorf("records: %d %s", code, body)
	}
	_, b := otlpFile(t, "genai.json")
	code, body, resp = e.do("POST", "/v1/traces", "application/json", b)
	if code != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":14`) || strings.Contains(string(body), "secret") {
		t.Errorf("otlp: %d %s", code, body)
	}
}

func TestAPI(t *testing.T) {
	e := newEnv(t, Options{})
	for i := byte(1); i <= 5; i++ {
		recs := run(i, fmt.Sprintf("agent-%d", i%2))
		for j := range recs {
			recs[j].Time = recs[j].Time.Add(time.Duration(i) * time.Minute)
		}
		if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	var page store.ListPage
	code, body, _ := e.do("GET", "/api/v1/traces?name=agent-1&limit=2", "", nil)
	if err := json.Unmarshal(body, &page); code != 200 || err != nil || len(page.Traces) != 2 || page.Next == "" {
		t.Fatalf("list: %d %s", code, body)
	}
	seen := map[trace.TraceID]bool{}
	for _, s := range page.Traces {
		seen[s.ID] = true
	}
	code, body, _ = e.do("GET", "/api/v1/traces?name=agent-1&limit=2&cursor="+page.Next, "", nil)
	page = store.ListPage{}
	if err := json.Unmarshal(body, &page); code != 200 || err != nil || len(page.Traces) != 1 || page.Next != "" || seen[page.Traces[0].ID] {
		t.Fatalf("second page: %d %s", code, body)
	}
	for _, tt := range []struct {
		path string
		code int
		has  string
	}{
		{"/api/v1/traces?tool=lookup&errors=false&since=2026-01-01", 200, `"agent-0"`},
		{"/api/v1/traces?tag=env:nope", 200, `"traces":[]`},
		{"/api/v1/traces?since=yesterdayish", 400, "since"},
		{"/api/v1/traces?limit=0", 400, "limit"},
		{"/api/v1/traces?cursor=garbage", 400, "cursor"},
		{"/api/v1/search?q=tool:lookup+%22time+zone%22", 200, `"field":"input"`},
		{"/api/v1/search?q=bogus:x", 400, "unknown filter"},
		{"/api/v1/traces/0301", 200, `"evaluations":[]`},
		{"/api/v1/traces/03010000000000000000000000000000", 200, `"span_id":"0301000000000000"`},
		{"/api/v1/traces/0001", 404, "no trace id starts with"},
		{"/api/v1/traces/xyz", 400, "trace id"},
		{"/api/v1/aggregates?since=2026-01-01", 200, `"traces":5`},
		{"/api/v1/aggregates?until=soon", 400, "until"},
		{"/api/v1/nothing", 404, "no such endpoint"},
	} {
		code, body, _ := e.do("GET", tt.path, "", nil)
		if code != tt.code || !strings.Contains(string(body), tt.has) {
			t.Errorf("GET %s: %d %.300s", tt.path, code, body)
		}
	}
	var tr TraceJSON
	_, body, _ = e.do("GET", "/api/v1/traces/03010000000000000000000000000000", "", nil)
	if err := json.Unmarshal(body, &tr); err != nil || len(tr.Records) != 4 || len(tr.Spans) != 1 || tr.Stats.ToolCalls != 1 || tr.Summary.Status != "success" {
		t.Errorf("trace: %v %+v", err, tr.Summary)
	}
	if code, body, _ := e.do("DELETE", "/api/v1/traces/03010000000000000000000000000000", "", nil); code != 200 || string(body) != `{"deleted":1}`+"\n" {
		t.Errorf("delete: %d %s", code, body)
	}
	if code, _, _ := e.do("DELETE", "/api/v1/traces/03010000000000000000000000000000", "", nil); code != 404 {
		t.Errorf("delete again: %d", code)
	}
	if code, _, _ := e.do("DELETE", "/api/v1/traces/0301", "", nil); code != 400 {
		t.Errorf("delete by prefix: %d", code)
	}
}

func TestKeys(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	keys := map[Scope]string{}
	for _, sc := range []Scope{ScopeIngest, ScopeRead, ScopeAdmin} {
		tok, k, err := CreateKey(ctx, st, sc, string(sc)+" key", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok, "lk_"+k.ID+"_") || strings.Contains(k.SHA256, tok) {
			t.Fatalf("key %q %+v", tok, k)
		}
		keys[sc] = tok
	}
	// Only hashes are stored.
	all, err := st.(store.Settings).Settings(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range all {
		for _, tok := range keys {
			if strings.Contains(v, tok) || strings.Contains(v, tok[20:]) {
				t.Fatal("a key is stored in clear")
			}
		}
	}
	e := newEnv(t, Options{Store: st, RequireKeys: true})
	recs := ndjson(run(6, "k"))
	id := "06010000000000000000000000000000"
	for _, tt := range []struct {
		key, method, path string
		code              int
	}{
		{"", "POST", "/v1/records", 401},
		{"lk_0000000000000000_nope", "POST", "/v1/records", 401},
		{"Basic abc", "GET", "/api/v1/traces", 401},
		{keys[ScopeRead], "POST", "/v1/records", 403},
		{keys[ScopeIngest], "POST", "/v1/records", 200},
		{keys[ScopeIngest], "GET", "/api/v1/traces", 403},
		{keys[ScopeIngest], "GET", "/api/v1/stream", 403},
		{keys[ScopeRead], "GET", "/api/v1/traces/" + id, 200},
		{keys[ScopeRead], "DELETE", "/api/v1/traces/" + id, 403},
		{keys[ScopeIngest], "DELETE", "/api/v1/traces/" + id, 403},
		{keys[ScopeAdmin], "DELETE", "/api/v1/traces/" + id, 200},
		{keys[ScopeAdmin], "POST", "/v1/records", 200},
		{"", "GET", "/healthz", 200},
	} {
		e.key = tt.key
		var hdr []string
		if strings.HasPrefix(tt.key, "Basic") {
			e.key = ""
			hdr = []string{"Authorization", tt.key}
		}
		var body []byte
		ctype := ""
		if tt.method == "POST" {
			body, ctype = recs, "application/x-ndjson"
		}
		if code, b, _ := e.do(tt.method, tt.path, ctype, body, hdr...); code != tt.code {
			t.Errorf("%.12s %s %s: %d %s, want %d", tt.key, tt.method, tt.path, code, b, tt.code)
		}
	}
	ks, err := Keys(ctx, st)
	if err != nil || len(ks) != 3 {
		t.Fatalf("Keys: %v %v", ks, err)
	}
	if err := RevokeKey(ctx, st, keys[ScopeIngest]); err != nil {
		t.Fatal(err)
	}
	e.key = keys[ScopeIngest]
	if code, _, _ := e.do("POST", "/v1/records", "application/x-ndjson", recs); code != 401 {
		t.Errorf("revoked key: %d", code)
	}
	if kid, _ := keyID(keys[ScopeIngest]); RevokeKey(ctx, st, kid) == nil {
		t.Error("revoking twice succeeded")
	}
	if err := RevokeKey(ctx, st, "0123456789abcdef"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking twice: %v", err)
	}
}

// sseReader reads events from a stream.
type sseReader struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

type sseEvent struct{ id, kind, data string }

func (e *env) stream(t *testing.T, path, last string) *sseReader {
	req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseReader{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

func (r *sseReader) next() sseEvent {
	r.t.Helper()
	var ev sseEvent
	done := make(chan bool, 1)
	timer := time.AfterFunc(10*time.Second, func() { r.resp.Body.Close(); done <- true })
	defer timer.Stop()
	for r.sc.Scan() {
		l := r.sc.Text()
		switch {
		case l == "":
			if ev.kind != "" {
				return ev
			}
		case strings.HasPrefix(l, "id: "):
			ev.id = l[4:]
		case strings.HasPrefix(l, "event: "):
			ev.kind = l[7:]
		case strings.HasPrefix(l, "data: "):
			ev.data = l[6:]
		}
	}
	r.t.Fatalf("stream ended: %v", r.sc.Err())
	return ev
}

func TestStreams(t *testing.T) {
	e := newEnv(t, Options{})
	recs := run(7, "live")
	id := recs[0].TraceID.String()
	// The first two records are stored before anyone watches.
	if code, _, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs[:2])); code != 200 {
		t.Fatal(code)
	}
	all := e.stream(t, "/api/v1/stream", "")
	one := e.stream(t, "/api/v1/traces/"+id+"/stream", "")
	for i := 0; i < 2; i++ { // the backlog from the store
		if ev := one.next(); ev.kind != "record" || !strings.Contains(ev.data, fmt.Sprintf(`"seq":%d`, i+1)) {
			t.Fatalf("backlog %d: %+v", i, ev)
		}
	}
	if code, _, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs[2:3])); code != 200 {
		t.Fatal(code)
	}
	ev := one.next()
	if !strings.Contains(ev.data, `"seq":3`) {
		t.Fatalf("live record: %+v", ev)
	}
	tev := all.next()
	if tev.kind != "trace" || !strings.Contains(tev.data, `"state":"updated"`) || !strings.Contains(tev.data, id) {
		t.Fatalf("trace event: %+v", tev)
	}
	// Disconnect, miss the end, reconnect with Last-Event-ID.
	one.resp.Body.Close()
	if code, _, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs[3:])); code != 200 {
		t.Fatal(code)
	}
	again := e.stream(t, "/api/v1/traces/"+id+"/stream", ev.id)
	if ev := again.next(); !strings.Contains(ev.data, `"seq":4`) {
		t.Fatalf("after reconnect: %+v", ev)
	}
	if tev := all.next(); !strings.Contains(tev.data, `"state":"ended"`) || !strings.Contains(tev.data, `"status":"success"`) {
		t.Fatalf("end event: %+v", tev)
	}
	// An id from another process: the stream starts again from the store.
	fresh := e.stream(t, "/api/v1/traces/"+id+"/stream", "deadbeef.3")
	for i := 0; i < 4; i++ {
		if ev := fresh.next(); !strings.Contains(ev.data, fmt.Sprintf(`"seq":%d`, i+1)) {
			t.Fatalf("restart %d: %+v", i, ev)
		}
	}
	// Close ends the streams.
	e.srv.Close()
	lines := 0
	for all.sc.Scan() {
		if lines++; lines > 10 {
			t.Fatal("stream still open after Close")
		}
	}
}

// TestRedactHook: Options.Redact sees every record before it is stored.
func TestRedactHook(t *testing.T) {
	e := newEnv(t, Options{Redact: func(r *trace.Record) {
		r.Input = trace.Value(`"[redacted]"`)
	}})
	recs := run(8, "secret")
	if code, _, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
		t.Fatal(code)
	}
	tr, err := e.st.Trace(context.Background(), recs[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range tr.Records {
		if string(r.Input) != `"[redacted]"` {
			t.Errorf("record %d not redacted: %s", r.Seq, r.Input)
		}
	}
}

func TestEvaluations(t *testing.T) {
	e := newEnv(t, Options{})
	graded := run(10, "graded")
	tid := trace.TraceID{0xe7, 1}
	root := trace.SpanID{0xe7, 1}
	evalRecs := []trace.Record{
		{V: 1, TraceID: tid, SpanID: root, Seq: 1, Time: t0, Type: trace.TypeRunStart, Name: "loupe eval", Run: &trace.RunInfo{Tags: []string{"loupe:eval", "eval-of:" + graded[0].TraceID.String()}}},
		{V: 1, TraceID: tid, SpanID: trace.SpanID{0xe7, 2}, ParentID: root, Seq: 2, Time: t0, Type: trace.TypeCustom, Name: "eval.result",
			Output: trace.Value(`{"timestamp":"2026-11-23T08:00:00Z","test_id":"case-1","score":1,"verdict":"pass","threshold":0.8,"mode":"loupe","trace_id":"` + graded[0].TraceID.String() + `"}`)},
		{V: 1, TraceID: tid, SpanID: root, Seq: 3, Time: t0.Add(time.Second), Type: trace.TypeRunEnd, Name: "loupe eval", Status: "success", Duration: time.Second},
	}
	for _, recs := range [][]trace.Record{graded, evalRecs} {
		if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	for _, tt := range []struct {
		path string
		code int
		has  string
	}{
		{"/api/v1/evaluations", 200, `"name":"loupe eval"`},
		{"/api/v1/evaluations/" + tid.String(), 200, `"test_id":"case-1"`},
		{"/api/v1/evaluations/" + graded[0].TraceID.String(), 404, "not an evaluation run"},
		{"/api/v1/traces/" + graded[0].TraceID.String(), 200, `"evaluations":[{"eval":"e7010000000000000000000000000000"`},
	} {
		if code, body, _ := e.do("GET", tt.path, "", nil); code != tt.code || !strings.Contains(string(body), tt.has) {
			t.Errorf("GET %s: %d %.400s", tt.path, code, body)
		}
	}
	var list store.ListPage
	_, body, _ := e.do("GET", "/api/v1/evaluations", "", nil)
	if json.Unmarshal(body, &list) != nil || len(list.Traces) != 1 {
		t.Errorf("evaluations: %s", body)
	}
}

func TestValueLimit(t *testing.T) {
	e := newEnv(t, Options{MaxValueBytes: 100})
	recs := run(11, "big")
	recs[1].Output = trace.Text(strings.Repeat("é", 300))
	if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	tr, err := e.st.Trace(context.Background(), recs[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	if ok, n := tr.Records[1].Output.Truncated(); !ok || n != 602 {
		t.Errorf("output not truncated: %.120s", tr.Records[1].Output)
	}
	if string(tr.Records[1].Input) != `{"q":"time zone"}` {
		t.Errorf("small input changed: %s", tr.Records[1].Input)
	}
}

// TestHubGap: events published while nobody listens are not kept, and an
// id from before them is not resumed from (the client restarts).
func TestHubGap(t *testing.T) {
	h := newHub(16)
	s, _, _, first := h.subscribe(trace.TraceID{}, "")
	h.publish(run(1, "a")[:1])
	h.unsubscribe(s)
	h.publish(run(2, "b")) // nobody listens
	if _, missed, found, _ := h.subscribe(trace.TraceID{}, first); found || len(missed) != 0 {
		t.Errorf("resumed across a gap: found %v, %d events", found, len(missed))
	}
	s2, _, _, now := h.subscribe(trace.TraceID{2, 1}, "")
	h.publish(run(2, "b")[:2])
	if _, missed, found, _ := h.subscribe(trace.TraceID{2, 1}, now); !found || len(missed) != 2 {
		t.Errorf("resume after the gap: found %v, %d events", found, len(missed))
	}
	h.unsubscribe(s2)
}

// TestDeepOTLPBody: a small gzip body that decodes to values nested a
// million levels deep is refused with 400, and the server keeps serving.
func TestDeepOTLPBody(t *testing.T) {
	e := newEnv(t, Options{})
	levels := 1_000_000
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":` +
		strings.Repeat(`{"arrayValue":{"values":[`, levels) + `{"stringValue":"x"}` + strings.Repeat(`]}}`, levels) + `}]}}]}`
	code, msg, _ := e.do("POST", "/v1/traces", "application/json", gz([]byte(body)), "Content-Encoding", "gzip")
	if code != 400 || !strings.Contains(string(msg), "nested deeper") {
		t.Errorf("deep body: %d %.200s", code, msg)
	}
	if code, _, _ := e.do("GET", "/healthz", "", nil); code != 200 {
		t.Errorf("healthz: %d", code)
	}
}

// TestHTTPServerLimits: the http.Server loupe serve runs has header and
// idle timeouts and a header size bound, and no write timeout (streams).
func TestHTTPServerLimits(t *testing.T) {
	hs := NewHTTPServer("127.0.0.1:0", http.NotFoundHandler())
	if hs.ReadHeaderTimeout <= 0 || hs.IdleTimeout <= 0 || hs.ReadTimeout <= 0 || hs.MaxHeaderBytes <= 0 || hs.WriteTimeout != 0 {
		t.Errorf("limits: header %v idle %v read %v maxheader %d write %v", hs.ReadHeaderTimeout, hs.IdleTimeout, hs.ReadTimeout, hs.MaxHeaderBytes, hs.WriteTimeout)
	}
	// A client that never finishes its headers is cut off.
	hs.ReadHeaderTimeout = 100 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")) // no blank line: headers never end
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || !strings.Contains(string(b), "408") && len(b) != 0 {
		t.Errorf("slow headers: %q %v", b, err)
	}
}

// TestIngestPricesModelCalls: a model call that arrives with tokens and no
// cost is priced from the table; one with a cost keeps it; an unknown
// model's cost is marked unknown (not free), and the trace's summary
// counts it as unpriced.
func TestIngestPricesModelCalls(t *testing.T) {
	table, err := price.Parse([]byte(`{"models":[{"model":"m-priced","input":2,"output":10,"valid_from":"2025-01-01"}]}`), "test")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Options{Prices: table})
	tid := trace.TraceID{0xc0, 0x57}
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	call := func(seq uint64, model string, cost float64) trace.Record {
		return trace.Record{V: 1, TraceID: tid, SpanID: trace.SpanID{byte(seq)}, ParentID: trace.SpanID{1}, Seq: seq, Time: t0, Type: trace.TypeModelCall,
			Name: model, Usage: trace.Usage{InputTokens: 1_000_000, OutputTokens: 100_000, CostUSD: cost}}
	}
	recs := []trace.Record{
		{V: 1, TraceID: tid, SpanID: trace.SpanID{1}, Seq: 1, Time: t0, Type: trace.TypeRunStart, Name: "agent"},
		call(2, "m-priced", 0), call(3, "m-priced", 0.5), call(4, "m-unknown", 0),
	}
	if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
		t.Fatalf("POST /v1/records: %d %s", code, body)
	}
	got, err := e.st.Trace(context.Background(), tid)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]float64{2: 2 + 1, 3: 0.5, 4: 0}
	for _, r := range got.Records {
		if w, ok := want[r.Seq]; ok && (r.Usage.CostUSD != w || r.Usage.CostUnknown != (r.Seq == 4)) {
			t.Errorf("seq %d (%s): cost %v (unknown %v), want %v (unknown %v)", r.Seq, r.Name, r.Usage.CostUSD, r.Usage.CostUnknown, w, r.Seq == 4)
		}
	}
	if s := got.Summary; s.CostUSD != 3.5 || s.UnpricedCalls != 1 {
		t.Errorf("summary cost %v with %d unpriced calls, want 3.5 with 1", s.CostUSD, s.UnpricedCalls)
	}
	// The API's summaries and aggregates say so too.
	for _, q := range []struct{ path, want string }{
		{"/api/v1/traces", `"cost_usd":3.5,"unpriced_calls":1,`},
		{"/api/v1/traces/" + tid.String(), `"cost_usd":3.5,"unpriced_calls":1,`},
		{"/api/v1/aggregates", `"m-unknown":{"calls":1,"input_tokens":1000000,"output_tokens":100000,"cost_usd":0,"unpriced_calls":1}`},
	} {
		code, body, _ := e.do("GET", q.path, "", nil)
		if code != 200 || !bytes.Contains(body, []byte(q.want)) {
			t.Errorf("GET %s: %d %s\nwant it to contain %s", q.path, code, body, q.want)
		}
	}
}
