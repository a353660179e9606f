package browsertest_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/internal/browsertest"
)

var browser *browsertest.Browser

func TestMain(m *testing.M) {
	browser = browsertest.New()
	code := m.Run()
	browser.Close()
	os.Exit(code)
}

// A tab runs a page's script and collects its console: the errors the
// browser tests check must be seen, or checking them proves nothing.
func TestTab(t *testing.T) {
	tb := browser.Tab(t, 20*time.Second)
	tb.Do(t, "load", chromedp.Navigate(`data:text/html,<title>t</title><script>console.error("deliberate")</script>`))
	if got := browsertest.Eval[int](t, tb, `Promise.resolve(6 * 7)`, chromedp.EvalAwaitPromise); got != 42 {
		t.Errorf("Eval = %d, want 42", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(tb.Errors()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if errs := tb.Errors(); len(errs) != 1 || !strings.Contains(errs[0], "deliberate") {
		t.Errorf("console errors = %q, want the deliberate one", errs)
	}
}

// Start reports the same answer every time, and Close may follow it.
func TestStartTwice(t *testing.T) {
	b := browsertest.New()
	defer b.Close()
	if err, again := b.Start(), b.Start(); err != again {
		t.Errorf("Start = %v, then %v", err, again)
	}
}
