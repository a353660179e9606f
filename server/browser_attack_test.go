package server_test

// Adversarial browser tests: what a hostile web page open in the user's
// browser can do to a collector in its default mode (loopback, no API
// keys). Chromium resolves evil.example (and its subdomains) to
// 127.0.0.1, so that pages are served from a hostile-looking origin while
// all traffic stays on this machine. The tests skip when no chromium is
// installed, except under CI=true, where they fail.
//
// Each test checks that its page ran (every attempt reported how it
// ended) and, on the collector's side, that the browser really sent what
// it was asked to, so that it cannot pass because the attack never
// happened.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/ui"
)

// browser is the shared headless Chromium, with evil.example and
// *.evil.example resolving to 127.0.0.1. It starts at the first browser
// test, so that the package's other tests (and fuzzing workers) do not
// start it.
var browser *browsertest.Browser

func TestMain(m *testing.M) {
	browser = browsertest.New(
		chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1, MAP *.evil.example 127.0.0.1"),
	)
	code := m.Run()
	browser.Close()
	os.Exit(code)
}

// Time bounds: a tab lives tabTimeout at most, and a page gets pageTimeout
// to run all its attempts.
const (
	tabTimeout  = 20 * time.Second
	pageTimeout = 10 * time.Second
)

// hit is one request the collector answered.
type hit struct {
	Method, Path, Attack      string // Attack: the query parameter attack
	Host, ContentType, Origin string
	SecFetchSite              string
	Status                    int
}

func (h hit) String() string {
	return fmt.Sprintf("%s %s (Host %q, Content-Type %q, Origin %q, Sec-Fetch-Site %q) → %d",
		h.Method, h.Path, h.Host, h.ContentType, h.Origin, h.SecFetchSite, h.Status)
}

// hits records what the collector answered.
type hits struct {
	mu   sync.Mutex
	list []hit
}

func (l *hits) add(h hit) {
	l.mu.Lock()
	l.list = append(l.list, h)
	l.mu.Unlock()
}

// all returns the requests answered so far.
func (l *hits) all() []hit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// attack returns the requests tagged ?attack=name.
func (l *hits) attack(name string) []hit {
	var out []hit
	for _, h := range l.all() {
		if h.Attack == name {
			out = append(out, h)
		}
	}
	return out
}

// waitFor waits up to 5s until every one of names was answered (a beacon
// is sent after the page has moved on) and returns the missing ones.
func (l *hits) waitFor(names []string) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var missing []string
		for _, n := range names {
			if len(l.attack(n)) == 0 {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// statusWriter remembers the status of an answer. It keeps the
// ResponseWriter's Flush and, through Unwrap, its ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// collector is a collector in its default mode (no API keys) with the UI,
// on a fresh SQLite store, served on 127.0.0.1, with every answer
// recorded.
type collector struct {
	st   store.Store
	ts   *httptest.Server
	hits *hits
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{
		Store:  st,
		UI:     ui.Handler(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{st: st, hits: &hits{}}
	c.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		srv.ServeHTTP(sw, r)
		c.hits.add(hit{
			Method: r.Method, Path: r.URL.Path, Attack: r.URL.Query().Get("attack"),
			Host: r.Host, ContentType: r.Header.Get("Content-Type"), Origin: r.Header.Get("Origin"),
			SecFetchSite: r.Header.Get("Sec-Fetch-Site"), Status: sw.status,
		})
	}))
	t.Cleanup(func() { srv.Close(); c.ts.Close(); st.Close() })
	return c
}

// port returns the port the collector listens on.
func (c *collector) port(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(c.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// traces returns the ids of every trace stored.
func (c *collector) traces(t *testing.T) []trace.TraceID {
	t.Helper()
	page, err := c.st.List(context.Background(), store.ListQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var ids []trace.TraceID
	for _, s := range page.Traces {
		ids = append(ids, s.ID)
	}
	return ids
}

// seed stores a trace of three records directly (not through the
// collector) and returns its id and name.
func (c *collector) seed(t *testing.T) (trace.TraceID, string) {
	t.Helper()
	id := trace.NewTraceID()
	root := trace.NewSpanID()
	name := "secret-run-" + root.String()
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	recs := []trace.Record{
		{V: trace.Version, TraceID: id, SpanID: root, Seq: 1, Time: t0, Type: trace.TypeRunStart, Name: name},
		{V: trace.Version, TraceID: id, SpanID: trace.NewSpanID(), ParentID: root, Seq: 2, Time: t0.Add(time.Second), Type: trace.TypeToolEnd, Name: "lookup", Input: trace.Value(`{"q":"secret"}`), Output: trace.Value(`"hidden"`), Duration: time.Second},
		{V: trace.Version, TraceID: id, SpanID: root, Seq: 3, Time: t0.Add(2 * time.Second), Type: trace.TypeRunEnd, Name: name, Status: "success", Duration: 2 * time.Second},
	}
	if _, err := c.st.Append(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	return id, name
}

// records returns how many records of id are stored.
func (c *collector) records(t *testing.T, id trace.TraceID) int {
	t.Helper()
	tr, err := c.st.Trace(context.Background(), id)
	if errors.Is(err, store.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(tr.Records)
}

// evilRecords returns the NDJSON of a one-record trace (a run.start)
// whose name holds "=", as the text/plain form trick needs.
func evilRecords(vector string) (trace.TraceID, string) {
	r := trace.Record{
		V: trace.Version, TraceID: trace.NewTraceID(), SpanID: trace.NewSpanID(), Seq: 1,
		Time: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), Type: trace.TypeRunStart, Name: "evil=" + vector,
	}
	return r.TraceID, string(r.AppendJSON(nil)) + "\n"
}

// evilOTLP returns an OTLP/JSON export of one span whose name holds "=".
func evilOTLP(vector string) (trace.TraceID, string) {
	id := trace.NewTraceID()
	return id, fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"evil"}}]},`+
		`"scopeSpans":[{"scope":{"name":"evil"},"spans":[{"traceId":%q,"spanId":%q,"name":"evil=%s","kind":1,`+
		`"startTimeUnixNano":"1772600767000000000","endTimeUnixNano":"1772600768000000000"}]}]}]}`,
		id.String(), trace.NewSpanID().String(), vector)
}

// bodyCheck is a collector of its own on which a test checks that the
// bodies of its attacks are valid: so that when the browser's copy is
// not stored, that is the attacked collector's protection at work and
// not a bad body.
type bodyCheck struct {
	st  store.Store
	srv *server.Server
}

func newBodyCheck(t *testing.T) *bodyCheck {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "check.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); st.Close() })
	return &bodyCheck{st, srv}
}

// mustStore fails the test unless body, posted to path as a program would
// send it (a JSON Content-Type, no Origin), is stored as the trace id.
func (c *bodyCheck) mustStore(t *testing.T, path, ctype, body string, id trace.TraceID) {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Host = "127.0.0.1"
	req.Header.Set("Content-Type", ctype)
	w := httptest.NewRecorder()
	c.srv.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("the attack's body for %s is not valid: %d %s", path, w.Code, w.Body)
	}
	if _, err := c.st.Trace(context.Background(), id); err != nil {
		t.Fatalf("the attack's body for %s stores no trace %s: %v", path, id, err)
	}
}

// outcome is how one attempt of an attack page ended, as the page
// reports it.
type outcome struct {
	Done   bool   `json:"done"`   // the attempt finished
	Status int    `json:"status"` // the response's status (0 when opaque)
	Type   string `json:"type"`   // the response's type: basic, cors, opaque
	Body   string `json:"body"`   // the response body, when readable
	Error  string `json:"error"`  // why the attempt failed, if it did
	Queued bool   `json:"queued"` // sendBeacon queued the request
	Loaded bool   `json:"loaded"` // the form's answer loaded in its frame
}

// attackJS runs the attempts of cfg.attempts one after the other and
// records each one's outcome in window.results[name]; window.attackDone
// is true once all have ended.
//
// An attempt is {name, kind, url, body, method, headers}. Kinds: "fetch"
// (url, method, headers, body as a string, in cfg.mode), "stream" (a
// fetch whose body is read for 1s at most, for a live stream that does
// not end), "params" (the
// body in URLSearchParams), "formdata" (the body in FormData), "blob" and
// "blobjson" (the body in a Blob of no type, or of type
// application/json), "form" (an HTML form, POST, enctype text/plain,
// into an iframe, its one field splitting the body at the first "="),
// "beacon" and "beaconblob" (navigator.sendBeacon with the body as a
// string, or as a Blob of no type).
const attackJS = `
window.results = {};
const opts = (a, body) => {
  const o = {method: a.method || 'GET', mode: cfg.mode, credentials: 'include'};
  if (a.headers) o.headers = a.headers;
  if (body !== undefined) o.body = body;
  return o;
};
const readResponse = async r => {
  const out = {done: true, status: r.status, type: r.type};
  try { out.body = await r.text(); } catch (e) { out.error = 'reading the body: ' + e; }
  return out;
};
const readSome = async a => {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 1000);
  const r = await fetch(a.url, {...opts(a), signal: ctl.signal});
  const out = {done: true, status: r.status, type: r.type, body: ''};
  const dec = new TextDecoder();
  try {
    for (const rd = r.body.getReader();;) {
      const {value, done} = await rd.read();
      if (done) break;
      out.body += dec.decode(value, {stream: true});
    }
  } catch (e) {
    // Aborted: the stream was still open after 1s.
  }
  clearTimeout(timer);
  return out;
};
const formPost = a => new Promise(resolve => {
  const frame = document.createElement('iframe');
  frame.name = 'sink-' + a.name;
  document.body.appendChild(frame);
  const timer = setTimeout(() => resolve({done: true, error: 'the form answer did not load in 5s'}), 5000);
  frame.addEventListener('load', () => { clearTimeout(timer); resolve({done: true, loaded: true}); });
  const form = document.createElement('form');
  form.method = 'POST';
  form.enctype = 'text/plain';
  form.action = a.url;
  form.target = frame.name;
  const i = a.body.indexOf('=');
  const field = document.createElement('input');
  field.type = 'hidden';
  field.name = a.body.slice(0, i);
  field.value = a.body.slice(i + 1);
  form.appendChild(field);
  document.body.appendChild(form);
  form.submit();
});
const attempt = async a => {
  switch (a.kind) {
  case 'fetch': return readResponse(await fetch(a.url, opts(a, a.body)));
  case 'stream': return readSome(a);
  case 'params': return readResponse(await fetch(a.url, opts(a, new URLSearchParams({records: a.body}))));
  case 'formdata': {
    const fd = new FormData();
    fd.append('records', a.body);
    return readResponse(await fetch(a.url, opts(a, fd)));
  }
  case 'blob': return readResponse(await fetch(a.url, opts(a, new Blob([a.body]))));
  case 'blobjson': return readResponse(await fetch(a.url, opts(a, new Blob([a.body], {type: 'application/json'}))));
  case 'form': return formPost(a);
  case 'beacon': return {done: true, queued: navigator.sendBeacon(a.url, a.body)};
  case 'beaconblob': return {done: true, queued: navigator.sendBeacon(a.url, new Blob([a.body]))};
  }
  throw new Error('unknown kind ' + a.kind);
};
(async () => {
  for (const a of cfg.attempts) {
    try {
      window.results[a.name] = await attempt(a);
    } catch (e) {
      window.results[a.name] = {done: true, error: String(e)};
    }
  }
  window.attackDone = true;
})();
`

// attempt is one request of an attack page (see attackJS).
type attempt struct {
	Name    string            `json:"name"`
	Kind    string            `json:"kind"`
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    *string           `json:"body,omitempty"`
}

// attackPage returns the HTML of a page that runs attempts with fetch in
// mode ("no-cors", "cors" or "same-origin").
func attackPage(t *testing.T, mode string, attempts []attempt) []byte {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{"mode": mode, "attempts": attempts})
	if err != nil {
		t.Fatal(err)
	}
	// json.Marshal escapes <, > and &, so cfg cannot end the script.
	return fmt.Appendf(nil, "<!doctype html><meta charset=utf-8><title>attack</title><body><script>\nconst cfg = %s;\n%s</script>\n", cfg, attackJS)
}

// runAttack opens pageURL in a new tab, waits until the page's attempts
// have all ended and returns their outcomes. It fails the test if the
// page does not finish in time (it did not load, or its script threw) or
// an attempt did not report its end.
func runAttack(t *testing.T, pageURL string, attempts []attempt) map[string]outcome {
	t.Helper()
	tb := browser.Tab(t, tabTimeout)
	tb.Do(t, "running the attack page "+pageURL,
		chromedp.Navigate(pageURL),
		chromedp.Poll[chromedp.Void](`window.attackDone === true`,
			chromedp.WithPollingInterval(20*time.Millisecond),
			chromedp.WithPollingTimeout(pageTimeout)))
	res := browsertest.Eval[map[string]outcome](t, tb, `window.results`)
	for _, a := range attempts {
		if o, ok := res[a.Name]; !ok || !o.Done {
			t.Fatalf("the attack page did not run %s: results %+v (console: %q)", a.Name, res, tb.Errors())
		}
	}
	return res
}

// names returns the names of attempts.
func names(attempts []attempt) []string {
	var out []string
	for _, a := range attempts {
		out = append(out, a.Name)
	}
	return out
}

// evilServer serves page at / on 127.0.0.1 and returns its URL as
// http://evil.example:PORT/, which Chromium resolves to 127.0.0.1.
func evilServer(t *testing.T, page []byte) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	}))
	t.Cleanup(ts.Close)
	u, err := url.Parse(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	return "http://evil.example:" + u.Port() + "/"
}

// refused reports whether status is how the collector refuses a
// cross-origin write: 403 (cross-site request forgery protection, or a
// Host that is not its own) or 415 (a Content-Type it does not read).
func refused(status int) bool {
	return status == http.StatusForbidden || status == http.StatusUnsupportedMediaType
}

// TestBrowserAttackCrossSiteWrites: a page of another site posts a valid
// body to the ingest endpoints in every way a browser sends without a
// CORS preflight (fetch in no-cors mode with text/plain, form and
// multipart bodies and Content-Types, Blobs, an HTML form with
// enctype=text/plain, sendBeacon). The collector must refuse them all
// (403 or 415) and store nothing.
func TestBrowserAttackCrossSiteWrites(t *testing.T) {
	c := newCollector(t)
	str := func(s string) *string { return &s }
	type vector struct {
		kind    string
		headers map[string]string
	}
	// Every body is a valid request to its endpoint (bodyCheck), but for
	// urlencoded-params and multipart-formdata: URLSearchParams and
	// FormData encode it, so that no collector could decode it. They too
	// must be refused by a protection (403 or 415), not by chance (400).
	vectors := map[string]vector{
		"text-plain":             {kind: "fetch"}, // Content-Type: text/plain;charset=UTF-8
		"urlencoded-params":      {kind: "params"},
		"urlencoded-raw":         {kind: "fetch", headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
		"multipart-formdata":     {kind: "formdata"},
		"multipart-raw":          {kind: "fetch", headers: map[string]string{"Content-Type": "multipart/form-data; boundary=x"}},
		"blob-untyped":           {kind: "blob"},
		"blob-json":              {kind: "blobjson"}, // no-cors drops the type
		"form-text-plain":        {kind: "form"},
		"beacon-text":            {kind: "beacon"},
		"beacon-blob-untyped":    {kind: "beaconblob"},
		"text-plain-json-type":   {kind: "fetch", headers: map[string]string{"Content-Type": "application/json"}}, // no-cors drops it
		"text-plain-ndjson-type": {kind: "fetch", headers: map[string]string{"Content-Type": "application/x-ndjson"}},
	}
	check := newBodyCheck(t)
	var attempts []attempt
	vectorOf := map[trace.TraceID]string{}
	for _, ep := range []struct {
		path, ctype string
		body        func(string) (trace.TraceID, string)
	}{
		{"/v1/records", "application/x-ndjson", evilRecords},
		{"/v1/traces", "application/json", evilOTLP},
	} {
		for _, vn := range slices.Sorted(maps.Keys(vectors)) {
			v := vectors[vn]
			name := ep.path + " " + vn
			id, body := ep.body(strings.ReplaceAll(name, "/", ""))
			// What the text/plain form sends: the body with CRLF.
			check.mustStore(t, ep.path, ep.ctype, strings.TrimSuffix(body, "\n")+"\r\n", id)
			vectorOf[id] = name
			attempts = append(attempts, attempt{
				Name: name, Kind: v.kind, Method: "POST", Headers: v.headers, Body: str(body),
				URL: c.ts.URL + ep.path + "?attack=" + url.QueryEscape(name),
			})
		}
	}
	res := runAttack(t, evilServer(t, attackPage(t, "no-cors", attempts)), attempts)
	missing := c.hits.waitFor(names(attempts))
	for _, a := range attempts {
		o := res[a.Name]
		if o.Error != "" {
			t.Errorf("%s: the page's attempt failed: %s", a.Name, o.Error)
		}
		if slices.Contains(missing, a.Name) {
			t.Errorf("%s: the browser never sent it (page: %+v): the test proves nothing about it", a.Name, o)
			continue
		}
		for _, h := range c.hits.attack(a.Name) {
			if !refused(h.Status) {
				t.Errorf("%s: %v; want 403 or 415", a.Name, h)
			} else {
				t.Logf("%s: %v", a.Name, h)
			}
		}
	}
	if ids := c.traces(t); len(ids) > 0 {
		var got []string
		for _, id := range ids {
			got = append(got, vectorOf[id])
		}
		slices.Sort(got)
		t.Errorf("a page of another site stored %d traces, by: %q", len(ids), got)
	}
}

// TestBrowserAttackCrossSiteReadDelete: a page of another site can
// neither read the API (the collector grants no CORS) nor delete a trace
// (DELETE needs a CORS preflight, which the collector does not grant).
func TestBrowserAttackCrossSiteReadDelete(t *testing.T) {
	c := newCollector(t)
	id, name := c.seed(t)
	want := c.records(t, id)
	api := c.ts.URL + "/api/v1/traces"
	attempts := []attempt{
		{Name: "list", Kind: "fetch", URL: api + "?attack=list"},
		{Name: "trace", Kind: "fetch", URL: api + "/" + id.String() + "?attack=trace"},
		{Name: "search", Kind: "fetch", URL: c.ts.URL + "/api/v1/search?attack=search&q=" + url.QueryEscape(name)},
		{Name: "delete", Kind: "fetch", Method: "DELETE", URL: api + "/" + id.String() + "?attack=delete"},
	}
	res := runAttack(t, evilServer(t, attackPage(t, "cors", attempts)), attempts)
	c.hits.waitFor(names(attempts))
	for _, a := range attempts {
		o := res[a.Name]
		if o.Error == "" {
			t.Errorf("%s: a page of another site got an answer: %d %.200q", a.Name, o.Status, o.Body)
		}
		if strings.Contains(o.Body, id.String()) || strings.Contains(o.Body, name) {
			t.Errorf("%s: a page of another site read the trace: %.300q", a.Name, o.Body)
		}
		// The page's request (the preflight, for the DELETE) must have
		// reached the collector, or the failure above is only that of a
		// browser that cannot reach it.
		hs := c.hits.attack(a.Name)
		if len(hs) == 0 {
			t.Errorf("%s: the browser sent nothing to the collector (page: %+v): the test proves nothing about it", a.Name, o)
		}
		for _, h := range hs {
			t.Logf("%s: %v; the page saw %q", a.Name, h, o.Error)
			if h.Method == "DELETE" {
				t.Errorf("%s: the DELETE was sent, after a preflight granted: %v", a.Name, h)
			}
		}
	}
	if got := c.records(t, id); got != want {
		t.Errorf("after the attack the trace has %d records, want %d", got, want)
	}
}

// TestBrowserAttackDNSRebinding models a page whose host name an attacker
// has rebound to 127.0.0.1: its requests reach the collector as the
// page's own origin, with the attacker's name in Host. A reverse proxy on
// 127.0.0.1 that keeps the Host stands for the rebound name: it serves
// the page at /attack.html and passes every other path to the collector.
// The collector must answer every request 403 (its Host is no loopback
// name), reveal nothing of the stored trace, and change nothing.
func TestBrowserAttackDNSRebinding(t *testing.T) {
	c := newCollector(t)
	id, name := c.seed(t)
	want := c.records(t, id)
	newID, body := evilRecords("rebinding")
	newBodyCheck(t).mustStore(t, "/v1/records", "application/x-ndjson", body, newID)

	attempts := []attempt{
		{Name: "list", Kind: "fetch", URL: "/api/v1/traces?attack=list"},
		{Name: "trace", Kind: "fetch", URL: "/api/v1/traces/" + id.String() + "?attack=trace"},
		{Name: "search", Kind: "fetch", URL: "/api/v1/search?attack=search&q=" + url.QueryEscape(name)},
		{Name: "aggregates", Kind: "fetch", URL: "/api/v1/aggregates?attack=aggregates"},
		{Name: "stream", Kind: "stream", URL: "/api/v1/stream?attack=stream"},
		{Name: "trace-stream", Kind: "stream", URL: "/api/v1/traces/" + id.String() + "/stream?attack=trace-stream"},
		{Name: "ui", Kind: "fetch", URL: "/?attack=ui"},
		{Name: "post", Kind: "fetch", Method: "POST", URL: "/v1/records?attack=post",
			Headers: map[string]string{"Content-Type": "application/x-ndjson"}, Body: &body},
		{Name: "delete", Kind: "fetch", Method: "DELETE", URL: "/api/v1/traces/" + id.String() + "?attack=delete"},
	}
	page := attackPage(t, "same-origin", attempts)
	target, err := url.Parse(c.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /attack.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
	mux.Handle("/", &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // what a rebound name sends
	}})
	proxy := httptest.NewServer(mux)
	t.Cleanup(proxy.Close)
	pu, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	evilHost := "evil.example:" + pu.Port()

	res := runAttack(t, "http://"+evilHost+"/attack.html", attempts)
	c.hits.waitFor(names(attempts))
	for _, a := range attempts {
		o := res[a.Name]
		if a.Method == "" {
			a.Method = "GET"
		}
		switch {
		case o.Error != "":
			t.Errorf("%s %s: the page's request failed (%s); want a 403 answer", a.Method, a.URL, o.Error)
		case o.Status != http.StatusForbidden:
			t.Errorf("%s %s: %d %.200q; want 403", a.Method, a.URL, o.Status, o.Body)
		}
		if strings.Contains(o.Body, id.String()) || strings.Contains(o.Body, name) {
			t.Errorf("%s %s: the page read the trace: %.300q", a.Method, a.URL, o.Body)
		}
		hs := c.hits.attack(a.Name)
		if len(hs) == 0 {
			t.Errorf("%s %s: it never reached the collector", a.Method, a.URL)
		}
		for _, h := range hs {
			if h.Host != evilHost {
				t.Errorf("%s %s: the proxy did not keep the page's Host: %v", a.Method, a.URL, h)
			}
		}
	}
	if got := c.records(t, id); got != want {
		t.Errorf("after the attack the seeded trace has %d records, want %d", got, want)
	}
	if got := c.records(t, newID); got != 0 {
		t.Errorf("the rebound page stored its trace (%d records)", got)
	}
	if ids := c.traces(t); len(ids) != 1 || ids[0] != id {
		t.Errorf("after the attack the store holds %v, want only %v", ids, id)
	}
	// The collector still answers its own name: the 403s above are its
	// Host check, not a broken collector.
	if code := get(t, c.ts.URL+"/api/v1/traces"); code != http.StatusOK {
		t.Errorf("GET /api/v1/traces on 127.0.0.1: %d, want 200", code)
	}
}

// get returns the status of a GET of u, bounded in time.
func get(t *testing.T, u string) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBrowserSameOriginUI is the positive control of the attack tests:
// the collector's own UI, loaded from http://127.0.0.1:PORT/ or
// http://localhost:PORT/, still lists the traces, and a script of that
// origin can still read the API and post records as NDJSON.
func TestBrowserSameOriginUI(t *testing.T) {
	c := newCollector(t)
	id, name := c.seed(t)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			origin := "http://" + host + ":" + c.port(t)
			newID, body := evilRecords("same-origin " + host)
			tb := browser.Tab(t, tabTimeout)
			tb.Do(t, "loading the UI from "+origin, chromedp.Navigate(origin+"/"),
				chromedp.WaitVisible(chromedp.CSS(`#runs tr[data-trace="`+id.String()+`"]`)))
			row := browsertest.Eval[string](t, tb, `document.querySelector('#runs tr[data-trace="`+id.String()+`"]').innerText`)
			if !strings.Contains(row, name) {
				t.Errorf("the UI's row of the trace = %q, want its name %q", row, name)
			}

			type answer struct {
				Status int    `json:"status"`
				Body   string `json:"body"`
			}
			list := browsertest.Eval[answer](t, tb, `fetch('/api/v1/traces').then(async r => ({status: r.status, body: await r.text()}))`, chromedp.EvalAwaitPromise)
			if list.Status != http.StatusOK || !strings.Contains(list.Body, id.String()) {
				t.Errorf("GET /api/v1/traces from %s: %d %.200q; want 200 with the trace", origin, list.Status, list.Body)
			}
			js, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			post := browsertest.Eval[answer](t, tb, `fetch('/v1/records', {method: 'POST', headers: {'Content-Type': 'application/x-ndjson'}, body: `+string(js)+`}).then(async r => ({status: r.status, body: await r.text()}))`, chromedp.EvalAwaitPromise)
			if post.Status != http.StatusOK {
				t.Errorf("POST /v1/records from %s: %d %.200q; want 200", origin, post.Status, post.Body)
			}
			if got := c.records(t, newID); got != 1 {
				t.Errorf("the POST from %s stored %d records, want 1", origin, got)
			}
			tb.NoConsoleErrors(t)
		})
	}
}
