package ui_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/ui"
)

// otherModel answers the demo's task at once from step 2, where the demo
// asked the clock for Mars's time.
const otherModel = `model: other-model
provider: scripted
price: {input_per_mtok: 1, output_per_mtok: 2}
turns:
  - answer: Branched without the clock.
    usage: {input_tokens: 700, output_tokens: 10}
`

// branchEnv is a collector with the UI that allows one scripted model for
// branches, with the demo agent's run recorded in it; o may ask for keys.
type branchEnv struct {
	*env
	spec  string        // the allowed model
	run   trace.TraceID // the demo's run
	step2 trace.SpanID  // the span of its model call at step 2
}

func newBranchEnv(t *testing.T, requireKeys bool) (*branchEnv, map[server.Scope]string) {
	t.Helper()
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(p, []byte(otherModel), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[server.Scope]string{}
	if requireKeys {
		for _, sc := range []server.Scope{server.ScopeIngest, server.ScopeRead, server.ScopeAdmin} {
			if keys[sc], _, err = server.CreateKey(ctx, st, sc, string(sc)+" key", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	spec := "scripted:" + p
	srv, err := server.New(server.Options{Store: st, UI: ui.Handler(), RequireKeys: requireKeys, MaxValueBytes: -1,
		BranchModels: []string{spec}, BranchMaxCostUSD: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close(); st.Close() })
	res, err := demo.Run(ctx, trace.New(trace.Options{}), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &branchEnv{env: &env{st, srv, ts}, spec: spec, run: res.TraceID}
	for _, r := range res.Records {
		if r.Type == trace.TypeModelCall && r.Iteration == 2 && r.Depth == 0 {
			e.step2 = r.SpanID
		}
	}
	if e.step2.IsZero() {
		t.Fatal("the demo made no model call at step 2")
	}
	if requireKeys {
		(&keyedEnv{e.env, keys}).ingest(t, res.Records...)
	} else {
		e.post(t, res.Records...)
	}
	return e, keys
}

// TestRerunFromHere: on a run page, the span details of the model call at
// step 2 offer "Re-run from here"; re-running it with another model opens
// the compare page with both runs linked and the divergence marked at
// step 2.
func TestRerunFromHere(t *testing.T) {
	e, _ := newBranchEnv(t, false)
	tb := newTab(t, 60*time.Second)
	tb.do(t, "the run, its step-2 model call selected",
		chromedp.Navigate(e.ts.URL+"/#/run/"+e.run.String()+"?span="+e.step2.String()),
		waitLoaded(`#details #branch`))
	if got := eval[string](t, tb, `document.querySelector('#branch-submit').textContent`); got != "Re-run from step 2" {
		t.Errorf("submit button %q", got)
	}
	tb.do(t, "open the form; the allowed models load",
		chromedp.Click(chromedp.CSS(`#branch-open`)),
		waitLoaded(`#branch-submit:enabled`))
	if got := eval[[]string](t, tb, `[...document.querySelectorAll('#branch-model option')].map(o => o.value)`); len(got) != 1 || got[0] != e.spec {
		t.Errorf("model picker %q, want [%s]", got, e.spec)
	}
	if got := eval[string](t, tb, `document.querySelector('#branch-system').value`); !strings.Contains(got, "You are") {
		t.Errorf("system prompt not filled with the recorded one: %q", got)
	}
	// The root run.start span offers no re-run: it is no step.
	tb.screenshot(t, "branch-form")
	tb.do(t, "re-run from step 2, landing on the compare page",
		chromedp.Click(chromedp.CSS(`#branch-submit`)),
		waitLoaded(`#app[data-loaded="true"] #compare-divergence[data-step="2"]`),
		waitLoaded(`#app[data-running="0"]`))
	hash := eval[string](t, tb, `location.hash`)
	parts := strings.Split(strings.TrimPrefix(hash, "#/compare/"), "/")
	if len(parts) != 2 || parts[0] != e.run.String() || len(parts[1]) != 32 || parts[1] == parts[0] {
		t.Fatalf("compare page %q", hash)
	}
	branch := parts[1]
	if got := eval[string](t, tb, `document.querySelector('#compare-a-link').getAttribute('href')`); got != "#/run/"+e.run.String() {
		t.Errorf("A links to %q", got)
	}
	if got := eval[string](t, tb, `document.querySelector('#compare-b-link').getAttribute('href')`); got != "#/run/"+branch {
		t.Errorf("B links to %q", got)
	}
	marked := eval[[]string](t, tb, `[...document.querySelectorAll('#compare-steps tr[data-diverged="true"]')].map(r => r.dataset.step + ' ' + r.textContent)`)
	if len(marked) != 1 || !strings.HasPrefix(marked[0], "2 ") || !strings.Contains(marked[0], "≠") || !strings.Contains(marked[0], "other-model") {
		t.Errorf("rows marked diverged: %q", marked)
	}
	if got := eval[string](t, tb, `document.querySelector('#compare-b').textContent`); !strings.Contains(got, "replay-of:"+e.run.String()) || !strings.Contains(got, "success") {
		t.Errorf("run B: %q", got)
	}
	tb.screenshot(t, "compare")
	// B's link opens the branch's run page.
	tb.do(t, "open the branch", chromedp.Click(chromedp.CSS(`#compare-b-link`)), waitLoaded(`#run-status [data-status="success"]`))
	tb.noConsoleErrors(t)
}

// TestRerunReadOnly: a read session is not offered the re-run, and the
// API refuses it; an admin session is offered it.
func TestRerunReadOnly(t *testing.T) {
	e, keys := newBranchEnv(t, true)
	tb := newTab(t, 60*time.Second)
	link := e.ts.URL + "/#/run/" + e.run.String() + "?span=" + e.step2.String()
	tb.do(t, "the run with a read session", chromedp.Navigate(link), signIn(keys[server.ScopeRead]),
		waitLoaded(`#details #detail-title`))
	if eval[bool](t, tb, `!!document.querySelector('#branch')`) {
		t.Error("a read session is offered the re-run")
	}
	if a := fetchFrom(t, tb, "POST", "/api/v1/traces/"+e.run.String()+"/branch"); a.Status != 403 || !strings.Contains(a.Body, "scope read") {
		t.Errorf("branch with a read session: %d %s", a.Status, a.Body)
	}
	tb.do(t, "sign out, and in with the admin key", chromedp.Click(chromedp.CSS(`#signout`)), signIn(keys[server.ScopeAdmin]),
		waitLoaded(`#details #branch`))
	onlyRefusals(t, tb)
}
