package ui_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/alert"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/ui"
)

// TestAlertsPage: a monitor fires on real runs (its webhook first fails,
// then accepts); the alerts page shows the monitor firing with its value,
// the firing with both delivery attempts, and links to the runs of its
// window and filter, and to the runs that caused it.
func TestAlertsPage(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var tries atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tries.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer hook.Close()
	eng, err := alert.New(alert.Options{Store: st, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	// The collector answers from the engine that evaluates.
	srv, err := server.New(server.Options{Store: st, UI: ui.Handler(), Alerts: eng})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer func() { srv.Close(); ts.Close() }()
	e := &env{st, srv, ts}
	m := alert.Monitor{Name: "prod-errors", Metric: alert.ErrorRate, Filter: "tag:env:prod", Window: alert.Duration(10 * time.Minute), Threshold: 0.5,
		Webhooks: []alert.Webhook{{URL: hook.URL + "/services/T0/B0/SECRETTOKEN"}}}
	if err := eng.Put(ctx, m); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var failed []trace.TraceID
	for i, spec := range []struct {
		tag, status string
	}{{"env:prod", "error"}, {"env:prod", "error"}, {"env:prod", "success"}, {"env:dev", "error"}} {
		b := newBuilder()
		b.t = now.Add(-time.Duration(5-i) * time.Minute)
		root := trace.NewSpanID()
		b.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: "agent-" + spec.tag, Run: &trace.RunInfo{Tags: []string{spec.tag}}})
		end := trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: "agent-" + spec.tag, Status: spec.status, Duration: time.Millisecond}
		if spec.status == "error" {
			end.Error = "upstream failed"
			if spec.tag == "env:prod" {
				failed = append(failed, b.id)
			}
		}
		b.rec(end)
		e.append(t, b.recs)
	}
	if err := eng.Evaluate(ctx, now); err != nil {
		t.Fatal(err)
	}
	eng.Wait()

	tb := newTab(t, 45*time.Second)
	tb.do(t, "alerts page", chromedp.Navigate(e.ts.URL+"/#/alerts"), waitLoaded(`#app[data-loaded="true"] #firings tr[data-monitor="prod-errors"]`))
	row := eval[string](t, tb, `document.querySelector('#monitors tr[data-monitor="prod-errors"]').innerText`)
	if err := hasText(row, "prod-errors", "firing", "66.7%", "error_rate", "> 50.0%", "tag:env:prod", "/services/…", "every 1m"); err != nil || strings.Contains(row, "SECRET") {
		t.Errorf("monitor row: %v (%q)", err, row)
	}
	fr := eval[string](t, tb, `document.querySelector('#firings tr[data-monitor="prod-errors"]').innerText`)
	if err := hasText(fr, "firing", "66.7% (threshold 50.0%)", "runs of the 10m window", "failed", "HTTP 503", "busy", "delivered", "HTTP 200"); err != nil {
		t.Errorf("firing row: %v", err)
	}
	if n := eval[int](t, tb, `document.querySelectorAll('#firings .deliveries li').length`); n != 2 {
		t.Errorf("%d deliveries shown, want 2 (the 503, then the 200)", n)
	}
	if eval[string](t, tb, `document.querySelector('#nav-alerts').getAttribute('href')`) != "#/alerts" {
		t.Error("no Alerts entry in the navigation")
	}
	tb.screenshot(t, "alerts")

	// The runs of the window and filter: the three env:prod runs.
	tb.do(t, "runs of the firing", chromedp.Click(chromedp.CSS(`#firings a.runslink`)), waitLoaded(`#runs-body tr`), chromedp.WaitVisible(chromedp.CSS(`#app[data-loaded="true"]`)))
	ids := eval[[]string](t, tb, `[...document.querySelectorAll('#runs-body tr')].map(r => r.dataset.trace)`)
	if len(ids) != 3 {
		t.Errorf("the firing's runs link lists %d runs (%v), want the 3 of env:prod", len(ids), ids)
	}
	for _, id := range failed {
		if !slices.Contains(ids, id.String()) {
			t.Errorf("failed run %s is not in the firing's runs", id)
		}
	}
	if v := eval[string](t, tb, `document.querySelector('#filters [name=tag]').value`); v != "env:prod" {
		t.Errorf("the runs page's tag filter is %q", v)
	}
	// And one of the runs that caused it.
	tb.do(t, "back", chromedp.Navigate(e.ts.URL+"/#/alerts"), waitLoaded(`#app[data-loaded="true"] #firings a.tracelink`))
	href := eval[string](t, tb, `document.querySelector('#firings a.tracelink').getAttribute('href')`)
	if !slices.ContainsFunc(failed, func(id trace.TraceID) bool { return href == "#/run/"+id.String() }) {
		t.Errorf("the firing's first trace link is %q, want one of the failed runs %v", href, failed)
	}
	tb.do(t, "a run that caused it", chromedp.Click(chromedp.CSS(`#firings a.tracelink`)), waitLoaded(`.run-head`))
	tb.noConsoleErrors(t)

	fs, err := eng.Firings(ctx, store.FiringFilter{})
	if err != nil || len(fs) != 1 || len(fs[0].Deliveries) != 2 {
		t.Errorf("stored firings %+v, %v", fs, err)
	}
}
