package online_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/internal/browsertest"
	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/ui"
)

// The web UI's rules page, in headless Chromium: a rule's counters, its
// pass rate over the last day as a chart, and pausing and resuming it
// (the reason shown while paused), all from /api/v1/rules.
func TestRulesPage(t *testing.T) {
	b := browsertest.New()
	t.Cleanup(b.Close)
	tab := b.Tab(t, 60*time.Second)

	st := openSQLite(t, dbPath(t))
	sc := scorerFor(st)
	eng := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, lookupRule)})
	ts := collector(t, st, eng, server.Options{UI: ui.Handler()})
	calls := func(i int) []call {
		if i == 0 {
			return []call{{"lookup_order", `{"id":17}`}, {"notify", `{}`}}
		}
		return []call{{"lookup_order", `{"id":18}`}}
	}
	postOTLP(t, ts.URL, agentTraces(70, 2, calls, func(int) string { return "Order <b>17</b> has shipped." }))
	waitFor(t, "2 traces scored", func() bool { return len(scoresOf(t, sc, "order-lookup")) == 8 })

	row := `#rules tr[data-rule="order-lookup"]`
	tab.Do(t, "rules page", chromedp.Navigate(ts.URL+"/#/rules"), chromedp.WaitVisible(chromedp.CSS(row+`[data-state="active"]`)))
	text := browsertest.Eval[string](t, tab, `document.querySelector('`+row+`').innerText`)
	for _, want := range []string{"order-lookup", "file", "tool-trajectory", "active", "name:support", "100.0%", "50.0%", "0.75"} {
		if !strings.Contains(text, want) {
			t.Errorf("rule row lacks %q:\n%s", want, text)
		}
	}
	if n := browsertest.Eval[int](t, tab, `document.querySelectorAll('`+row+` svg rect.barbad').length`); n != 1 {
		t.Errorf("%d bars of the last hour's pass rate (50%%), want 1", n)
	}
	if got := browsertest.Eval[string](t, tab, `document.querySelector('#nav-rules').getAttribute('href')`); got != "#/rules" {
		t.Errorf("nav link %q", got)
	}
	tab.Do(t, "pause", chromedp.Click(chromedp.CSS(row+` button.rule-toggle`)), chromedp.WaitVisible(chromedp.CSS(row+`[data-state="paused"] .reason`)))
	if r := browsertest.Eval[string](t, tab, `document.querySelector('`+row+` .reason').innerText`); !strings.Contains(r, "paused through the API") {
		t.Errorf("reason %q", r)
	}
	tab.Screenshot(t, "rules-paused")
	tab.Do(t, "resume", chromedp.Click(chromedp.CSS(row+` button.rule-toggle`)), chromedp.WaitVisible(chromedp.CSS(row+`[data-state="active"]`)))
	tab.NoConsoleErrors(t)
}
