// Package browsertest runs real headless Chromium for the tests of any
// package, driven by chromedp: one browser per test binary, started once
// and bounded in time, and tabs that end with their test and collect
// their page's console.
//
// A test that asks for a tab when there is no browser (none installed, or
// it does not start) is skipped, except under CI=true, where it fails
// (see testrepo.Missing; scripts/test.sh installs chromium).
//
// A package's TestMain makes the Browser and closes it:
//
//	var browser *browsertest.Browser
//
//	func TestMain(m *testing.M) {
//		browser = browsertest.New()
//		code := m.Run()
//		browser.Close()
//		os.Exit(code)
//	}
//
// and each test opens its tab:
//
//	tb := browser.Tab(t, 30*time.Second)
//	tb.Do(t, "load", chromedp.Navigate(url))
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

// StartTimeout bounds how long Start waits for Chromium to answer.
const StartTimeout = 60 * time.Second

// Path returns the Chromium to run: $LOUPE_CHROMIUM if set, else the
// first of /usr/bin/chromium, chromium, chromium-browser and
// google-chrome found on $PATH, else "".
func Path() string {
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

// Browser is one headless Chromium shared by the tests of a package. Make
// it with New; it is safe for concurrent use.
type Browser struct {
	opts []chromedp.ExecAllocatorOption

	once sync.Once
	ctx  context.Context // the running browser; nil when there is none
	err  error           // why there is none
	stop func()
	mu   sync.Mutex // guards stop against a Close during Start
}

// New returns a Browser that runs Chromium (see Path) headless, without
// sandbox, GPU, first-run or background networking, with a fresh profile
// in a temporary directory and a 1400×900 window, and with opts added
// (for example chromedp.Flag("host-resolver-rules", …)); a later option
// overrides an earlier one of the same flag.
//
// Nothing starts until Start or Tab is first called, so a test binary
// whose browser tests are not run (go test -run, fuzzing workers) does
// not pay for Chromium.
func New(opts ...chromedp.ExecAllocatorOption) *Browser {
	return &Browser{opts: opts}
}

// Start starts Chromium, the first time it is called, and waits for it
// at most StartTimeout, so that a broken install fails once and fast
// instead of in every test. It returns why there is no browser, the same
// error at every call; Tab reports that error through testrepo.Missing.
func (b *Browser) Start() error {
	b.once.Do(b.start)
	return b.err
}

func (b *Browser) start() {
	path := Path()
	if path == "" {
		b.err = errors.New("no chromium (set LOUPE_CHROMIUM, or apt-get install chromium; scripts/test.sh does)")
		return
	}
	dir, err := os.MkdirTemp("", "loupe-chromium-")
	if err != nil {
		b.err = fmt.Errorf("making chromium's profile directory: %w", err)
		return
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1400, 900),
	}
	opts = append(opts, b.opts...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	b.mu.Lock()
	b.stop = func() { cancelBrowser(); cancelAlloc(); os.RemoveAll(dir) }
	b.mu.Unlock()
	// A timeout context here would end the browser with it: wait on a
	// timer instead.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(bctx) }()
	select {
	case err := <-started:
		if err != nil {
			b.err = fmt.Errorf("starting chromium %s: %w", path, err)
		} else {
			b.ctx = bctx
		}
	case <-time.After(StartTimeout):
		b.err = fmt.Errorf("starting chromium %s: no answer in %v", path, StartTimeout)
	}
}

// Close ends Chromium, if it was started, and removes its profile. Tabs
// must not be used after it.
func (b *Browser) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
}

// Tab opens a new tab (starting the browser if need be) that is closed
// when t ends or after timeout, whichever comes first: every action in it
// fails once timeout has passed. When there is no browser it skips t, or
// fails it under CI=true (testrepo.Missing).
func (b *Browser) Tab(t testing.TB, timeout time.Duration) *Tab {
	t.Helper()
	if err := b.Start(); err != nil {
		testrepo.Missing(t, fmt.Sprint("the browser tests need chromium: ", err))
	}
	ctx, cancel := chromedp.NewContext(b.ctx)
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelT(); cancel() })
	tb := &Tab{ctx: ctx}
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

// Tab is one browser tab with its console collected.
type Tab struct {
	ctx context.Context
	mu  sync.Mutex
	log []chromedp.ConsoleMessage
}

// Context returns the tab's chromedp context, for chromedp.Do, Run and
// Listen. It is done when the tab's test ends or its time is up.
func (tb *Tab) Context() context.Context { return tb.ctx }

// Console returns the console messages so far: console API calls,
// uncaught exceptions and entries of the browser's log.
func (tb *Tab) Console() []chromedp.ConsoleMessage {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]chromedp.ConsoleMessage(nil), tb.log...)
}

// Errors returns the console errors and exceptions so far, each with the
// URL it came from.
func (tb *Tab) Errors() []string {
	var out []string
	for _, m := range tb.Console() {
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
			out = append(out, m.String()+" ("+m.URL+")")
		}
	}
	return out
}

// Do runs steps in the tab and fails t, quoting the console errors, if
// one of them fails; what says what the steps do.
func (tb *Tab) Do(t testing.TB, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		t.Fatalf("%s: %v (console: %q)", what, err, tb.Errors())
	}
}

// Eval evaluates the JavaScript expression js in tb's page and returns its
// value decoded as T (see chromedp.Evaluate for opts, for example
// chromedp.EvalAwaitPromise). It fails t if the evaluation fails.
func Eval[T any](t testing.TB, tb *Tab, js string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](js, opts...))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// NoConsoleErrors fails t (without stopping it) if the page logged an
// error or threw an exception nothing caught.
func (tb *Tab) NoConsoleErrors(t testing.TB) {
	t.Helper()
	if errs := tb.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// Screenshot saves a PNG of the tab's viewport as name.png in
// $LOUPE_TEST_ARTIFACTS, or in a directory of t's when that is not set,
// and logs its path. A failed capture fails t without stopping it.
func (tb *Tab) Screenshot(t testing.TB, name string) {
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
