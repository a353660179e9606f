package ui_test

// Browser tests: the UI in real headless Chromium (Debian's chromium),
// driven by chromedp. They skip when no chromium is installed, except
// under CI=true, where they fail (scripts/test.sh installs it).

import (
	"bytes"
	"context"
	"fmt"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/ui"
)

var (
	browserCtx  context.Context // the shared browser; nil when none was found
	browserErr  string          // why there is no browser
	browserStop func()
)

func TestMain(m *testing.M) {
	path := chromiumPath()
	if path == "" {
		browserErr = "no chromium (set LOUPE_CHROMIUM, or apt-get install chromium; scripts/test.sh does)"
	} else {
		dir, err := os.MkdirTemp("", "loupe-ui-chromium-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(path),
			chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("no-default-browser-check", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1400, 900),
		)
		bctx, cancelBrowser := chromedp.NewContext(alloc)
		// Start the browser now, bounded, so that a broken install fails
		// fast instead of in every test.
		// (A timeout context here would end the browser with it.)
		started := make(chan error, 1)
		go func() { started <- chromedp.Do(bctx) }()
		select {
		case err := <-started:
			if err != nil {
				browserErr = "starting chromium " + path + ": " + err.Error()
			} else {
				browserCtx = bctx
			}
		case <-time.After(60 * time.Second):
			browserErr = "starting chromium " + path + ": no answer in 60s"
		}
		browserStop = func() { cancelBrowser(); cancelAlloc(); os.RemoveAll(dir) }
	}
	code := m.Run()
	if browserStop != nil {
		browserStop()
	}
	os.Exit(code)
}

func chromiumPath() string {
	if p := os.Getenv("LOUPE_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// tab is one browser tab with its console collected.
type tab struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	log []chromedp.ConsoleMessage
}

// newTab opens a tab bounded by timeout, or skips (fails under CI) when
// there is no browser.
func newTab(t testing.TB, timeout time.Duration) *tab {
	t.Helper()
	if browserCtx == nil {
		testrepo.Missing(t, fmt.Sprint("the browser tests need chromium: ", browserErr))
	}
	ctx, cancel := chromedp.NewContext(browserCtx)
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelT(); cancel() })
	tb := &tab{ctx: ctx}
	if tt, ok := t.(*testing.T); ok {
		tb.t = tt
	}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.log = append(tb.log, m)
			tb.mu.Unlock()
		}
	}()
	return tb
}

// errors returns the console errors and exceptions so far.
func (tb *tab) errors() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, m := range tb.log {
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
			out = append(out, m.String()+" ("+m.URL+")")
		}
	}
	return out
}

func (tb *tab) do(t testing.TB, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		t.Fatalf("%s: %v (console: %q)", what, err, tb.errors())
	}
}

func eval[T any](t testing.TB, tb *tab, js string) T {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// noConsoleErrors fails the test if the page logged an error.
func (tb *tab) noConsoleErrors(t testing.TB) {
	t.Helper()
	if errs := tb.errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

func (tb *tab) screenshot(t testing.TB, name string) {
	t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	dir := os.Getenv("LOUPE_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
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
