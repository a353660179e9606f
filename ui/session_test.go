package ui_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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

// keyedEnv is a collector with the UI that requires API keys, and a key
// of each scope.
type keyedEnv struct {
	*env
	keys map[server.Scope]string
}

func newKeyedEnv(t *testing.T) *keyedEnv {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[server.Scope]string{}
	for _, sc := range []server.Scope{server.ScopeIngest, server.ScopeRead, server.ScopeAdmin} {
		tok, _, err := server.CreateKey(context.Background(), st, sc, string(sc)+" key", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keys[sc] = tok
	}
	srv, err := server.New(server.Options{Store: st, UI: ui.Handler(), RequireKeys: true, MaxValueBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close(); st.Close() })
	return &keyedEnv{&env{st, srv, ts}, keys}
}

// ingest posts records with the ingest key, as an SDK would.
func (e *keyedEnv) ingest(t *testing.T, recs ...trace.Record) {
	t.Helper()
	var b bytes.Buffer
	for i := range recs {
		b.Write(recs[i].AppendJSON(nil))
		b.WriteByte('\n')
	}
	req, _ := http.NewRequest("POST", e.ts.URL+"/v1/records", &b)
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Authorization", "Bearer "+e.keys[server.ScopeIngest])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /v1/records with the ingest key: %s", resp.Status)
	}
}

// signIn types key into the sign-in form and sends it.
func signIn(key string) chromedp.Action[chromedp.Void] {
	steps := []chromedp.Action[chromedp.Void]{
		waitLoaded(`#signin`),
		chromedp.SetValue(chromedp.CSS(`#signin-key`), key),
		chromedp.Click(chromedp.CSS(`#signin-submit`)),
	}
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for _, a := range steps {
			if _, err := a(ctx, tg); err != nil {
				return chromedp.Void{}, err
			}
		}
		return chromedp.Void{}, nil
	}
}

type answer struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

// fetchFrom makes the page send a request and returns the answer.
func fetchFrom(t *testing.T, tb *tab, method, path string) answer {
	t.Helper()
	return browsertest.Eval[answer](t, tb.Tab, `fetch(`+quote(path)+`, {method: `+quote(method)+`}).then(async r => ({status: r.status, body: await r.text()}))`, chromedp.EvalAwaitPromise)
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// onlyRefusals fails t if the page logged anything but the refused
// requests the test caused (Chromium logs every 401 and 403 it receives).
func onlyRefusals(t *testing.T, tb *tab) {
	t.Helper()
	for _, e := range tb.errors() {
		if !strings.Contains(e, "status of 401") && !strings.Contains(e, "status of 403") {
			t.Errorf("console error: %s", e)
		}
	}
}

// TestSignIn drives the whole UI against a collector that requires keys:
// the sign-in form, a read key that sees runs, a run page and live
// updates but is offered no deletion, sign-out, and an admin key that
// deletes.
func TestSignIn(t *testing.T) {
	e := newKeyedEnv(t)
	done := newBuilder()
	droot := trace.NewSpanID()
	done.rec(trace.Record{SpanID: droot, Type: trace.TypeRunStart, Name: "finished-run"})
	done.rec(trace.Record{SpanID: droot, Type: trace.TypeRunEnd, Name: "finished-run", Status: "success", Duration: time.Millisecond})
	e.ingest(t, done.recs...)

	tb := newTab(t, 60*time.Second)
	tb.do(t, "the sign-in form", chromedp.Navigate(e.ts.URL+"/"), waitLoaded(`#signin`))
	if eval[bool](t, tb, `!document.querySelector('#signout').hidden || !document.querySelector('#who').hidden || !!document.querySelector('#runs')`) {
		t.Error("signed out, the page shows the sign-out button, a key or the runs")
	}
	tb.screenshot(t, "signin")

	// Refused keys say why, and the form stays.
	for _, tt := range []struct{ key, msg string }{
		{"lk_0000000000000000_nope", "unknown or revoked"},
		{e.keys[server.ScopeIngest], "read or admin"},
	} {
		tb.do(t, "a refused key", signIn(tt.key), chromedp.WaitVisible(chromedp.CSS(`#signin-error`)))
		if got := eval[string](t, tb, `document.querySelector('#signin-error').textContent`); !strings.Contains(got, tt.msg) {
			t.Errorf("sign-in with %.12s: %q, want %q", tt.key, got, tt.msg)
		}
		eval[any](t, tb, `document.querySelector('#signin-error').hidden = true, null`)
	}

	// A read key: the runs list.
	tb.do(t, "sign in with the read key", signIn(e.keys[server.ScopeRead]),
		waitLoaded(`#runs tr[data-trace="`+done.id.String()+`"]`))
	if got := eval[string](t, tb, `document.querySelector('#who').textContent`); got != "read key (read)" {
		t.Errorf("header says %q, want the key's name and scope", got)
	}
	if c := eval[string](t, tb, `document.cookie`); c != "" {
		t.Errorf("the page can read the session cookie: %q", c)
	}
	if eval[string](t, tb, `document.querySelector('#signin-key') ? 'form' : ''`) != "" {
		t.Error("the sign-in form is still there")
	}

	// Live: a run posted with the ingest key appears.
	live := newBuilder()
	live.t = time.Now()
	root := trace.NewSpanID()
	e.ingest(t, live.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: "live-run"}))
	tb.do(t, "a new run appears live", waitLoaded(`#runs tr[data-trace="`+live.id.String()+`"] [data-status="running"]`))
	tb.screenshot(t, "signin-runs")

	// Its run page, updated live over the trace's stream.
	tb.do(t, "open the running run", chromedp.Click(chromedp.CSS(`#runs tr[data-trace="`+live.id.String()+`"] a.runlink`)), waitLoaded(`#tree .row.sel`))
	tool := trace.NewSpanID()
	e.ingest(t,
		live.rec(trace.Record{SpanID: tool, ParentID: root, Type: trace.TypeToolStart, Name: "live-tool"}),
		live.rec(trace.Record{SpanID: tool, ParentID: root, Type: trace.TypeToolEnd, Name: "live-tool", Duration: time.Millisecond}))
	tb.do(t, "a span arrives live", waitLoaded(`#tree .row[data-span="`+tool.String()+`"]`))
	e.ingest(t, live.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: "live-run", Status: "success", Duration: 3 * time.Millisecond}))
	tb.do(t, "the run ends live", waitLoaded(`#run-status [data-status="success"]`))
	if eval[bool](t, tb, `!!document.querySelector('#delete-run')`) {
		t.Error("a read key is offered deletion")
	}
	if got := eval[string](t, tb, `document.querySelector('#annotate .annotate-bar').textContent`); !strings.Contains(got, "sign in with an admin key") {
		t.Errorf("a read key is offered annotation: %q", got)
	}
	// The server refuses it anyway.
	if a := fetchFrom(t, tb, "DELETE", "/api/v1/traces/"+live.id.String()); a.Status != 403 {
		t.Errorf("delete with a read session: %d %s", a.Status, a.Body)
	}
	// The other pages read with the session too.
	tb.do(t, "dashboard", chromedp.Navigate(e.ts.URL+"/#/dashboard"), waitLoaded(`#app[data-loaded="true"] #charts .chart`))
	tb.do(t, "evaluations", chromedp.Navigate(e.ts.URL+"/#/evaluations"), waitLoaded(`#app[data-loaded="true"]`))

	// Sign-out returns to the form, and the session is gone.
	tb.do(t, "sign out", chromedp.Click(chromedp.CSS(`#signout`)), waitLoaded(`#signin`))
	if a := fetchFrom(t, tb, "GET", "/api/v1/traces"); a.Status != 401 {
		t.Errorf("after sign-out: %d %s", a.Status, a.Body)
	}
	tb.do(t, "a deep link while signed out", chromedp.Navigate(e.ts.URL+"/#/run/"+done.id.String()), waitLoaded(`#signin`))

	// An admin key, from the deep link: the run opens and can be deleted.
	tb.do(t, "sign in with the admin key", signIn(e.keys[server.ScopeAdmin]), waitLoaded(`#delete-run`))
	if got := eval[string](t, tb, `document.querySelector('#who').textContent`); got != "admin key (admin)" {
		t.Errorf("header says %q", got)
	}
	tb.do(t, "delete the run (asked, then confirmed)",
		chromedp.Click(chromedp.CSS(`#delete-run`)),
		waitLoaded(`#delete-run[data-armed="true"]`),
		chromedp.Click(chromedp.CSS(`#delete-run`)),
		waitLoaded(`#runs tr[data-trace="`+live.id.String()+`"]`))
	if n := eval[int](t, tb, `document.querySelectorAll('#runs tr[data-trace="`+done.id.String()+`"]').length`); n != 0 {
		t.Error("the deleted run is still listed")
	}
	if _, err := e.st.Trace(context.Background(), done.id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted trace: %v", err)
	}
	onlyRefusals(t, tb)
}

// TestSessionEndsWhileOpen: a session that ends under an open page (signed
// out in another tab) brings the sign-in form back at the next request.
func TestSessionEndsWhileOpen(t *testing.T) {
	e := newKeyedEnv(t)
	tb := newTab(t, 45*time.Second)
	tb.do(t, "sign in", chromedp.Navigate(e.ts.URL+"/"), signIn(e.keys[server.ScopeRead]), waitLoaded(`#app[data-loaded="true"] #runs`))
	if a := fetchFrom(t, tb, "DELETE", "/api/v1/session"); a.Status != 204 {
		t.Fatalf("sign-out: %d %s", a.Status, a.Body)
	}
	tb.do(t, "the next page asks to sign in again", chromedp.Navigate(e.ts.URL+"/#/dashboard"), waitLoaded(`#signin`))
	if got := eval[string](t, tb, `document.querySelector('#signin-error').textContent`); !strings.Contains(got, "sign in again") {
		t.Errorf("sign-in form says %q", got)
	}
	onlyRefusals(t, tb)
}
