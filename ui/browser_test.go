package ui_test

// Browser tests: the UI in real headless Chromium (Debian's chromium),
// driven by chromedp. They skip when no chromium is installed, except
// under CI=true, where they fail (scripts/test.sh installs it).

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

// browser is the shared browser (package browsertest).
var browser *browsertest.Browser

func TestMain(m *testing.M) {
	browser = browsertest.New()
	// Start the browser now, bounded, so that a broken install fails
	// fast instead of in every test; newTab reports why there is none.
	_ = browser.Start()
	code := m.Run()
	browser.Close()
	os.Exit(code)
}

// tab is one browser tab with its console collected.
type tab struct {
	*browsertest.Tab
	ctx context.Context // the tab's chromedp context (Tab.Context)
}

// newTab opens a tab bounded by timeout, or skips (fails under CI) when
// there is no browser.
func newTab(t testing.TB, timeout time.Duration) *tab {
	t.Helper()
	bt := browser.Tab(t, timeout)
	return &tab{Tab: bt, ctx: bt.Context()}
}

// errors returns the console errors and exceptions so far.
func (tb *tab) errors() []string { return tb.Errors() }

func (tb *tab) do(t testing.TB, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tb.Do(t, what, steps...)
}

func eval[T any](t testing.TB, tb *tab, js string) T {
	t.Helper()
	return browsertest.Eval[T](t, tb.Tab, js)
}

// noConsoleErrors fails the test if the page logged an error.
func (tb *tab) noConsoleErrors(t testing.TB) {
	t.Helper()
	tb.NoConsoleErrors(t)
}

func (tb *tab) screenshot(t testing.TB, name string) {
	t.Helper()
	tb.Screenshot(t, name)
}

// env is a collector with the UI on a fresh SQLite store.
type env struct {
	st  store.Store
	srv *server.Server
	ts  *httptest.Server
}

func newEnv(t testing.TB) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Store: st, UI: ui.Handler(), MaxValueBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close(); st.Close() })
	return &env{st, srv, ts}
}

// post sends records through the collector's ingest, so that the live
// streams see them.
func (e *env) post(t testing.TB, recs ...trace.Record) {
	t.Helper()
	var b bytes.Buffer
	for i := range recs {
		b.Write(recs[i].AppendJSON(nil))
		b.WriteByte('\n')
	}
	resp, err := http.Post(e.ts.URL+"/v1/records", "application/x-ndjson", &b)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		t.Fatalf("POST /v1/records: %s: %s", resp.Status, body.String())
	}
}

func (e *env) append(t testing.TB, recs []trace.Record) {
	t.Helper()
	for len(recs) > 0 {
		n := min(len(recs), 5000)
		if _, err := e.st.Append(context.Background(), recs[:n]); err != nil {
			t.Fatal(err)
		}
		recs = recs[n:]
	}
}

// builder makes the records of a synthetic trace.
type builder struct {
	id   trace.TraceID
	seq  uint64
	t    time.Time
	recs []trace.Record
}

func newBuilder() *builder {
	return &builder{id: trace.NewTraceID(), t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (b *builder) rec(r trace.Record) trace.Record {
	b.seq++
	b.t = b.t.Add(time.Millisecond)
	r.V, r.TraceID, r.Seq = trace.Version, b.id, b.seq
	if r.Time.IsZero() {
		r.Time = b.t
	}
	b.recs = append(b.recs, r)
	return r
}

func waitLoaded(selector string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(selector))
}

// hasText reports whether s holds every one of subs.
func hasText(s string, subs ...string) error {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return fmt.Errorf("%q not found in %.300q", x, s)
		}
	}
	return nil
}
