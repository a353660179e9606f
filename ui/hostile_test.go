package ui_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/trace"
)

// hostileTrace stores a trace whose names, errors and values try to run
// script (script tags, onerror handlers, javascript: links) and hold 5 MB
// strings. Each attack sets window.__pwned; the page must never run them.
func hostileTrace(t *testing.T, e *env) (trace.TraceID, trace.SpanID) {
	t.Helper()
	attacks := []string{
		`<script>window.__pwned = 1</script>`,
		`<img src=x onerror="window.__pwned = 2">`,
		`javascript:window.__pwned = 3`,
		`"><svg onload="window.__pwned = 4">`,
		"\xff\xfe invalid UTF-8 \xc3",
	}
	big := strings.Repeat("<b>5MB</b>", 500_000) // 5,000,000 bytes
	b := newBuilder()
	b.t = time.Now().Add(-time.Minute)
	root, tool := trace.NewSpanID(), trace.NewSpanID()
	out, _ := json.Marshal(map[string]any{"html": attacks, "big": big, "link": "javascript:window.__pwned=5"})
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: attacks[0], Run: &trace.RunInfo{Tags: []string{attacks[1]}}})
	b.rec(trace.Record{SpanID: tool, ParentID: root, Type: trace.TypeToolStart, Name: attacks[1] + big, Input: trace.Value(out)})
	b.rec(trace.Record{SpanID: tool, ParentID: root, Type: trace.TypeToolError, Name: attacks[1], Error: attacks[2], Duration: time.Millisecond})
	for i, a := range attacks {
		s := trace.NewSpanID()
		v, _ := json.Marshal(a)
		b.rec(trace.Record{SpanID: s, ParentID: root, Type: trace.TypeMessage, Name: a, Output: trace.Value(v), Iteration: i + 1})
	}
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: attacks[0], Status: "error", Error: attacks[3], Duration: 20 * time.Millisecond})
	e.append(t, b.recs)
	return b.id, tool
}

func TestHostileContent(t *testing.T) {
	e := newEnv(t)
	id, tool := hostileTrace(t, e)
	tb := newTab(t, 90*time.Second)
	var dialogs atomic.Int32
	chromedp.Listen(tb.ctx, func(ev any) {
		if strings.Contains(strings.ToLower(typeName(ev)), "dialog") {
			dialogs.Add(1)
		}
	})
	check := func(page string) {
		t.Helper()
		if v := eval[string](t, tb, `String(window.__pwned)`); v != "undefined" {
			t.Errorf("%s: hostile content ran: window.__pwned = %s", page, v)
		}
		// The only script is the app's; no element came from trace data.
		if n := eval[int](t, tb, `document.querySelectorAll('script, img, svg, iframe, object, embed').length`); n != 1 {
			t.Errorf("%s: %d script/img/svg/iframe elements, want only the app's script", page, n)
		}
		bad := eval[[]string](t, tb, `[...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')).filter(h => !h.startsWith('#') && !(h.startsWith('/') && !h.startsWith('//')))`)
		if len(bad) > 0 {
			t.Errorf("%s: links off the UI: %q", page, bad)
		}
		// Responsive: a trivial script answers at once (the tab's timeout
		// bounds a hung page).
		if eval[int](t, tb, `1 + 1`) != 2 {
			t.Errorf("%s: page does not evaluate", page)
		}
	}

	tb.do(t, "runs page", chromedp.Navigate(e.ts.URL+"/"), waitLoaded(`#runs tr[data-trace="`+id.String()+`"]`))
	if got := eval[string](t, tb, `document.querySelector('#runs a.runlink').textContent`); got != `<script>window.__pwned = 1</script>` {
		t.Errorf("run name shown as %q, want the markup as text", got)
	}
	check("runs")
	tb.screenshot(t, "hostile-runs")

	tb.do(t, "run page", chromedp.Navigate(e.ts.URL+"/#/run/"+id.String()+"?span="+tool.String()), waitLoaded(`#detail-error`))
	check("run")
	// The 5 MB name is clipped in the tree and the details; the 5 MB
	// input string is folded, and unfolds as text, 100,000 chars a click.
	if n := eval[int](t, tb, `document.querySelector('#tree .row.sel .name').textContent.length`); n > 200 {
		t.Errorf("selected row name is %d chars, want it clipped", n)
	}
	longest := `Math.max(...[...document.querySelectorAll('#details .s')].map(s => s.textContent.length))`
	before := eval[int](t, tb, longest)
	tb.do(t, "unfold 5 MB", chromedp.Click(chromedp.CSS(`#details button.unfold`)), chromedp.Click(chromedp.CSS(`#details button.unfold`)))
	if n := eval[int](t, tb, longest); before > 1000 || n != before+200_000 {
		t.Errorf("longest string shown: %d chars folded, %d after two unfolds; want at most 1000, then 200,000 more", before, n)
	}
	if got := eval[string](t, tb, `document.querySelector('#details button.unfold').textContent`); got != "show 100,000 more of 5,000,000 chars" {
		t.Errorf("unfold button says %q", got)
	}
	check("run, unfolded")
	// Every message row in the tree shows its attack as text.
	names := eval[[]string](t, tb, `[...document.querySelectorAll('#tree .row .name')].map(n => n.textContent)`)
	if !strings.Contains(strings.Join(names, "\n"), `<img src=x onerror="window.__pwned = 2">`) {
		t.Errorf("tree names %q do not show the markup as text", names)
	}
	tb.screenshot(t, "hostile-run")
	tb.do(t, "the run compared with itself", chromedp.Navigate(e.ts.URL+"/#/compare/"+id.String()+"/"+id.String()), waitLoaded(`#app[data-loaded="true"] #compare-steps`))
	check("compare")
	tb.do(t, "search the markup", chromedp.Navigate(e.ts.URL+"/#/runs?q=pwned"), waitLoaded(`#hits tbody tr`))
	check("search")
	if n := dialogs.Load(); n > 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
	tb.noConsoleErrors(t)
}

func typeName(v any) string {
	return strings.TrimPrefix(strings.TrimPrefix(fmtType(v), "*"), "page.")
}

func fmtType(v any) string { return reflect.TypeOf(v).String() }
