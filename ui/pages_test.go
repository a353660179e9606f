package ui_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// demoTrace runs the demo agent and stores its trace.
func demoTrace(t *testing.T, e *env) trace.TraceID {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.go"), []byte("// TODO: one\n// TODO: two\n"), 0o644)
	tracer := trace.New(trace.Options{})
	res, err := demo.Run(context.Background(), tracer, dir)
	if err != nil {
		t.Fatal(err)
	}
	e.append(t, res.Records)
	return res.TraceID
}

// The console collector must see errors, or "no console errors" proves
// nothing.
func TestConsoleErrorsAreSeen(t *testing.T) {
	e := newEnv(t)
	tb := newTab(t, 30*time.Second)
	tb.do(t, "load", chromedp.Navigate(e.ts.URL+"/"), waitLoaded("#runs"))
	eval[any](t, tb, `console.error("deliberate"), null`)
	deadline := time.Now().Add(5 * time.Second)
	for len(tb.errors()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if errs := tb.errors(); len(errs) != 1 || !strings.Contains(errs[0], "deliberate") {
		t.Fatalf("console errors = %q, want the deliberate one", errs)
	}
}

func TestRunsPageAndSearch(t *testing.T) {
	e := newEnv(t)
	id := demoTrace(t, e)
	tb := newTab(t, 45*time.Second)
	tb.do(t, "runs page", chromedp.Navigate(e.ts.URL+"/"), waitLoaded(`#runs tr[data-trace="`+id.String()+`"]`))
	row := eval[string](t, tb, `document.querySelector('#runs tbody tr').innerText`)
	if err := hasText(row, "demo", "success"); err != nil {
		t.Errorf("runs row: %v", err)
	}
	cells := eval[[]string](t, tb, `[...document.querySelectorAll('#runs tbody tr td')].map(td => td.innerText)`)
	if len(cells) != 11 || cells[4] != "6" || cells[5] != "5" || cells[8] != "1" {
		t.Errorf("runs row cells = %q, want 6 iterations, 5 tool calls, 1 error", cells)
	}
	tb.screenshot(t, "runs")

	// Search through the form: the hash carries the query (a deep link).
	tb.do(t, "search",
		chromedp.SetValue(chromedp.CSS(`#filters input[name=q]`), "type:tool.error"),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)),
		waitLoaded(`#hits tbody tr`))
	hits := eval[[]string](t, tb, `[...document.querySelectorAll('#hits tbody tr')].map(tr => tr.innerText)`)
	if len(hits) != 1 || !strings.Contains(hits[0], "tool.error") || !strings.Contains(hits[0], "clock") {
		t.Errorf("search hits = %q, want the one failed clock call", hits)
	}
	if h := eval[string](t, tb, `location.hash`); h != "#/runs?q=type%3Atool.error" {
		t.Errorf("hash after search = %q", h)
	}
	tb.screenshot(t, "search")
	// The hit links to its record in the run.
	tb.do(t, "hit link", chromedp.Click(chromedp.CSS(`#hits a.hitlink`)), waitLoaded(`#tree .row.sel`))
	if got := eval[string](t, tb, `document.querySelector('#detail-title').innerText`); !strings.Contains(got, "clock") {
		t.Errorf("selected span after following the hit = %q, want the clock call", got)
	}

	// Filters: the status select and Apply put them in the hash.
	tb.do(t, "filter status=error", chromedp.Navigate(e.ts.URL+"/#/runs"), waitLoaded(`#runs tbody tr`),
		chromedp.SetValue(chromedp.CSS(`#filters select[name=status]`), "error"),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)), waitLoaded(`#empty`))
	if h := eval[string](t, tb, `location.hash`); h != "#/runs?status=error" {
		t.Errorf("hash after filtering = %q", h)
	}
	if got := eval[string](t, tb, `document.querySelector('#empty').innerText`); got != "No runs match these filters." {
		t.Errorf("empty filtered table says %q", got)
	}
	tb.do(t, "filter status=success", chromedp.Navigate(e.ts.URL+"/#/runs?status=success&errors=true"), waitLoaded(`#runs tr[data-trace="`+id.String()+`"]`))
	tb.noConsoleErrors(t)
}

func TestRunPageDemo(t *testing.T) {
	e := newEnv(t)
	id := demoTrace(t, e)
	tr, err := e.st.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	spans := 0
	var failed *store.Span
	var walk func([]*store.Span)
	walk = func(ss []*store.Span) {
		for _, s := range ss {
			spans++
			if s.Type == trace.TypeToolStart && s.Error != "" {
				failed = s
			}
			walk(s.Children)
		}
	}
	walk(tr.Spans)
	if failed == nil {
		t.Fatal("the demo trace has no failed tool call")
	}

	tb := newTab(t, 45*time.Second)
	tb.do(t, "run page", chromedp.Navigate(e.ts.URL+"/#/run/"+id.String()), waitLoaded(`#tree .row.sel`))
	if n := eval[string](t, tb, `document.querySelector('#tree .rows').dataset.rows`); n != itoa(spans) {
		t.Errorf("tree rows = %s, want %d spans", n, spans)
	}
	// Drawn, not just present: the tree has room and every row is in view.
	if h := eval[int](t, tb, `document.querySelector('#tree').clientHeight`); h < 200 {
		t.Errorf("tree is %d px high", h)
	}
	if n := eval[int](t, tb, `[...document.querySelectorAll('#tree .row')].filter(r => { const b = r.getBoundingClientRect(); return b.height > 0 && b.top < innerHeight; }).length`); n < 20 {
		t.Errorf("%d tree rows on screen, want 20 or more", n)
	}
	// The failing path is marked from the failed call up to the root.
	fp := eval[[]string](t, tb, `[...document.querySelectorAll('#tree .row.failed')].map(r => r.dataset.span)`)
	if !slices.Contains(fp, failed.ID.String()) {
		t.Errorf("failed rows %q do not include the failed clock call %s", fp, failed.ID)
	}
	rootMarked := eval[bool](t, tb, `document.querySelector('#tree .row[data-i="0"]').classList.contains('badpath')`)
	if !rootMarked {
		t.Error("the root row is not marked as on the failing path")
	}
	tb.screenshot(t, "run")

	// Select the failed call by a deep link: details show its error.
	tb.do(t, "deep link to span", chromedp.Navigate(e.ts.URL+"/#/run/"+id.String()+"?span="+failed.ID.String()),
		waitLoaded(`#detail-error`))
	det := eval[string](t, tb, `document.querySelector('#details').innerText`)
	if err := hasText(det, "tool.start", "clock", failed.Error, "input", "zone"); err != nil {
		t.Errorf("details: %v", err)
	}
	tb.screenshot(t, "run-error")

	// A model call shows its tokens and cost.
	tb.do(t, "model call", chromedp.Click(chromedp.CSS(`#tree .row[data-i="0"]`)))
	idx := eval[int](t, tb, `(() => { const r = [...document.querySelectorAll('#tree .row')].find(r => r.querySelector('.type').textContent === 'model.call'); r.click(); return Number(r.dataset.i); })()`)
	det = eval[string](t, tb, `document.querySelector('#details').innerText`)
	if err := hasText(det, "model.call", "input tokens", "output tokens", "cost", "$"); err != nil {
		t.Errorf("model call %d details: %v", idx, err)
	}

	// Keyboard: down moves the selection; left on the root collapses it.
	tb.do(t, "keyboard", chromedp.Navigate(e.ts.URL+"/#/run/"+id.String()[:8]), waitLoaded(`#tree .row.sel[data-i="0"]`),
		chromedp.Focus(chromedp.CSS(`#tree`)),
		chromedp.KeyEvent(kb.ArrowDown))
	if i := eval[string](t, tb, `document.querySelector('#tree .row.sel').dataset.i`); i != "1" {
		t.Errorf("after ArrowDown the selected row is %s, want 1", i)
	}
	tb.do(t, "collapse", chromedp.KeyEvent(kb.ArrowLeft), chromedp.KeyEvent(kb.ArrowLeft)) // to the parent, then collapse it
	if n := eval[string](t, tb, `document.querySelector('#tree .rows').dataset.rows`); n != "1" {
		t.Errorf("after collapsing the root, rows = %s, want 1", n)
	}
	tb.do(t, "expand", chromedp.KeyEvent(kb.ArrowRight))
	if n := eval[string](t, tb, `document.querySelector('#tree .rows').dataset.rows`); n != itoa(spans) {
		t.Errorf("after expanding the root, rows = %s, want %d", n, spans)
	}

	// Stats and memory tabs.
	tb.do(t, "stats tab", chromedp.Click(chromedp.CSS(`#tab-stats`)), waitLoaded(`#pane-stats[data-loaded="true"]`))
	st := eval[string](t, tb, `document.querySelector('#pane-stats').innerText`)
	if err := hasText(st, "demo-model", "demo-summarizer", "calculator", "reasoning tokens"); err != nil {
		t.Errorf("stats: %v", err)
	}
	tb.screenshot(t, "run-stats")
	tb.do(t, "memory tab", chromedp.Click(chromedp.CSS(`#tab-memory`)), waitLoaded(`#pane-memory[data-loaded="true"]`))
	tb.noConsoleErrors(t)
}

func TestLiveUpdates(t *testing.T) {
	e := newEnv(t)
	tb := newTab(t, 45*time.Second)
	tb.do(t, "empty runs page", chromedp.Navigate(e.ts.URL+"/"), waitLoaded(`#empty`))
	b := newBuilder()
	b.t = time.Now() // a run going on now: recent records are not stale
	root := trace.NewSpanID()
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: "live-run"})
	e.post(t, b.recs...)
	tb.do(t, "new run appears", waitLoaded(`#runs tr[data-trace="`+b.id.String()+`"]`))
	if s := eval[string](t, tb, `document.querySelector('#runs tbody tr [data-status]').dataset.status`); s != store.StatusRunning {
		t.Errorf("status of the new run = %q, want running", s)
	}

	// A second run ends while the table is open: its row updates in place.
	b2 := newBuilder()
	b2.t = time.Now()
	r2 := trace.NewSpanID()
	e.post(t, b2.rec(trace.Record{SpanID: r2, Type: trace.TypeRunStart, Name: "short-run"}))
	tb.do(t, "second run appears", waitLoaded(`#runs tr[data-trace="`+b2.id.String()+`"] [data-status="running"]`))
	e.post(t, b2.rec(trace.Record{SpanID: r2, Type: trace.TypeRunEnd, Name: "short-run", Status: "success", Duration: time.Millisecond}))
	tb.do(t, "second run ends", waitLoaded(`#runs tr[data-trace="`+b2.id.String()+`"] [data-status="success"]`))
	if n := eval[int](t, tb, `document.querySelectorAll('#runs tbody tr').length`); n != 2 {
		t.Errorf("%d rows after live updates, want 2", n)
	}

	tb.do(t, "open the running run", chromedp.Click(chromedp.CSS(`#runs tr[data-trace="`+b.id.String()+`"] a.runlink`)), waitLoaded(`#tree .row.sel`))
	tool := trace.NewSpanID()
	e.post(t,
		b.rec(trace.Record{SpanID: tool, ParentID: root, Type: trace.TypeToolStart, Name: "live-tool", Input: trace.Value(`{"q":1}`)}),
		b.rec(trace.Record{SpanID: tool, ParentID: root, Type: trace.TypeToolError, Name: "live-tool", Error: "boom", Duration: time.Millisecond}))
	tb.do(t, "span arrives", waitLoaded(`#tree .row.failed[data-span="`+tool.String()+`"]`))
	if !eval[bool](t, tb, `document.querySelector('#tree .row[data-i="0"]').classList.contains('badpath')`) {
		t.Error("the live error is not marked up the tree")
	}
	e.post(t, b.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: "live-run", Status: "error", Error: "boom", Duration: 3 * time.Millisecond}))
	tb.do(t, "run ends", waitLoaded(`#run-status [data-status="error"]`))
	tb.screenshot(t, "live")
	tb.noConsoleErrors(t)
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestDashboardAndEvaluations(t *testing.T) {
	e := newEnv(t)
	id := demoTrace(t, e)
	b := newBuilder()
	b.t = time.Now().Add(-time.Minute)
	root := trace.NewSpanID()
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: "recent"})
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: "recent", Status: "error", Error: "x", Duration: time.Millisecond}) // both runs count as failed: the demo has a failed tool call
	e.append(t, b.recs)
	tb := newTab(t, 45*time.Second)
	tb.do(t, "dashboard", chromedp.Navigate(e.ts.URL+"/#/dashboard?range=1h"), waitLoaded(`#app[data-loaded="true"] #charts svg`))
	tot := eval[string](t, tb, `document.querySelector('#totals').innerText`)
	if err := hasText(tot, "2 runs", "error rate 100.0%"); err != nil {
		t.Errorf("dashboard totals: %v", err)
	}
	charts := eval[string](t, tb, `document.querySelector('#charts').textContent`)
	if err := hasText(charts, "demo-model", "clock", "1 of 2 calls"); err != nil {
		t.Errorf("dashboard charts: %v", err)
	}
	if n := eval[int](t, tb, `document.querySelectorAll('#charts .colchart rect.barbad').length`); n != 1 {
		t.Errorf("%d error bars over time, want 1", n)
	}
	tb.screenshot(t, "dashboard")
	// An evaluation run with a failed case: the list links to it, and the
	// case shows the failed check beside the actual calls.
	ev := newBuilder()
	ev.t = time.Now().Add(-time.Minute)
	er := trace.NewSpanID()
	ev.rec(trace.Record{SpanID: er, Type: trace.TypeRunStart, Name: "eval suite", Run: &trace.RunInfo{Tags: []string{evalrun.EvalTag}}})
	rows := []evalrun.Row{
		{TestID: "adds", Verdict: "pass", Score: 1, Threshold: 0.8, Mode: "strict", TraceID: id.String()},
		{TestID: "weather", Verdict: "fail", Score: 0.5, Threshold: 0.8, Mode: "strict", TraceID: id.String(),
			Assertions: []evalrun.AssertionRow{{Text: "call 1 clock: zone expected \"UTC\", got \"Mars/Olympus\"", Passed: false}, {Text: "called clock", Passed: true}},
			Output:     []evalrun.OutputMessage{{Role: "assistant", ToolCalls: []evalrun.OutputCall{{Tool: "clock", Input: map[string]any{"zone": "Mars/Olympus"}, Error: "unknown time zone"}}}}},
	}
	for _, r := range rows {
		v, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		ev.rec(trace.Record{SpanID: er, Type: trace.TypeCustom, Name: evalrun.ResultRecord, Output: trace.Value(v)})
	}
	ev.rec(trace.Record{SpanID: er, Type: trace.TypeRunEnd, Name: "eval suite", Status: "success", Duration: time.Millisecond})
	e.append(t, ev.recs)
	tb.do(t, "evaluations", chromedp.Navigate(e.ts.URL+"/#/evaluations"), waitLoaded(`#evals tr[data-trace="`+ev.id.String()+`"] a`))
	tb.screenshot(t, "evaluations")
	tb.do(t, "evaluation", chromedp.Click(chromedp.CSS(`#evals tr[data-trace="`+ev.id.String()+`"] a`)), waitLoaded(`.case[data-verdict="fail"] .diff`))
	head := eval[string](t, tb, `document.querySelector('.run-head').innerText`)
	if err := hasText(head, "1 of 2 cases pass"); err != nil {
		t.Errorf("evaluation head: %v", err)
	}
	diff := eval[[]string](t, tb, `[...document.querySelectorAll('.case[data-verdict="fail"] .diff > div')].map(d => d.innerText)`)
	if len(diff) != 2 || hasText(diff[0], `zone expected "UTC", got "Mars/Olympus"`) != nil || strings.Contains(diff[0], "called clock") ||
		hasText(diff[1], "clock", "Mars/Olympus", "unknown time zone") != nil {
		t.Errorf("failed case diff = %q", diff)
	}
	if n := eval[int](t, tb, `document.querySelectorAll('.case[data-verdict="pass"] .diff').length`); n != 0 {
		t.Errorf("a passing case shows a diff")
	}
	tb.screenshot(t, "evaluation")
	tb.noConsoleErrors(t)
}

func TestMemoryAndThinking(t *testing.T) {
	e := newEnv(t)
	b := newBuilder()
	root, m1, m2, mc := trace.NewSpanID(), trace.NewSpanID(), trace.NewSpanID(), trace.NewSpanID()
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: "memo"})
	b.rec(trace.Record{SpanID: m1, ParentID: root, Type: trace.TypeMemorySet, Name: "budget", Status: string(trace.ScopeParam), Output: trace.Value(`100`)})
	b.rec(trace.Record{SpanID: m2, ParentID: root, Type: trace.TypeMemorySet, Name: "notes", Status: string(trace.ScopeMemory), Iteration: 1, Output: trace.Value(`"first note"`)})
	b.rec(trace.Record{SpanID: mc, ParentID: root, Type: trace.TypeModelCall, Name: "m1", Iteration: 2, Duration: time.Millisecond,
		Usage:    trace.Usage{InputTokens: 1000, OutputTokens: 50, CachedTokens: 600, ReasoningTokens: 20, CostUSD: 0.0042},
		Thinking: trace.Value(`"let me think about the notes"`), Output: trace.Value(`{"$loupe":"truncated","bytes":99999,"head":"the beginning"}`)})
	b.rec(trace.Record{SpanID: trace.NewSpanID(), ParentID: root, Type: trace.TypeMemorySet, Name: "notes", Status: string(trace.ScopeMemory), Iteration: 3, Output: trace.Value(`"second note"`)})
	it, guard := trace.NewSpanID(), trace.NewSpanID()
	b.rec(trace.Record{SpanID: it, ParentID: root, Type: trace.TypeIterationStart, Iteration: 4})
	b.rec(trace.Record{SpanID: guard, ParentID: it, Type: trace.TypeGuardrail, Name: "max-cost", Status: "stop", Iteration: 4})
	b.rec(trace.Record{SpanID: it, ParentID: root, Type: trace.TypeIterationEnd, Iteration: 4, Status: "stop", Duration: time.Millisecond})
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: "memo", Status: "success", Duration: 10 * time.Millisecond})
	e.append(t, b.recs)

	tb := newTab(t, 30*time.Second)
	tb.do(t, "model call", chromedp.Navigate(e.ts.URL+"/#/run/"+b.id.String()+"?span="+mc.String()), waitLoaded(`#details .trunc`))
	det := eval[string](t, tb, `document.querySelector('#details').innerText`)
	if err := hasText(det, "cached tokens\n600", "reasoning tokens\n20", "$0.00420", "thinking", "let me think about the notes",
		"[truncated: 99999 bytes recorded, head shown]", "the beginning"); err != nil {
		t.Errorf("model call details: %v", err)
	}
	tb.do(t, "memory tab", chromedp.Click(chromedp.CSS(`#tab-memory`)), waitLoaded(`#pane-memory table`))
	mem := eval[string](t, tb, `document.querySelector('#pane-memory').innerText`)
	if err := hasText(mem, "budget", "100", "notes", "first note", "second note"); err != nil {
		t.Errorf("memory: %v", err)
	}
	steps := eval[[]string](t, tb, `[...document.querySelectorAll('#pane-memory tbody tr td:first-child')].map(td => td.innerText)`)
	if strings.Join(steps, ",") != "1,3" {
		t.Errorf("memory history steps = %q, want 1,3", steps)
	}
	tb.screenshot(t, "memory")
	// A write links to the step that made it.
	tb.do(t, "memory write link", chromedp.Click(chromedp.CSS(`#pane-memory a.seqlink`)), waitLoaded(`#tree .row.sel[data-span="`+m2.String()+`"]`))

	// The guardrail stop is marked, and so is its path up to the root.
	tb.do(t, "tree tab", chromedp.Click(chromedp.CSS(`#tab-tree`)))
	marked := eval[[]string](t, tb, `[...document.querySelectorAll('#tree .row.badpath, #tree .row.guard')].map(r => r.dataset.span + (r.classList.contains('guard') ? ':guard' : ''))`)
	if strings.Join(marked, ",") != root.String()+","+it.String()+","+guard.String()+":guard" {
		t.Errorf("marked rows = %q, want the root, the iteration and the guardrail", marked)
	}

	// Light and dark.
	dark := eval[bool](t, tb, `document.documentElement.classList.contains('dark')`)
	tb.do(t, "theme", chromedp.Click(chromedp.CSS(`#theme`)))
	if eval[bool](t, tb, `document.documentElement.classList.contains('dark')`) == dark {
		t.Error("the theme button did not switch light and dark")
	}
	tb.screenshot(t, "theme-switched")
	tb.noConsoleErrors(t)
}

func TestRunsPagination(t *testing.T) {
	e := newEnv(t)
	var recs []trace.Record
	for i := range 60 {
		b := newBuilder()
		b.t = b.t.Add(time.Duration(i) * time.Minute)
		s := trace.NewSpanID()
		b.rec(trace.Record{SpanID: s, Type: trace.TypeRunStart, Name: "run-" + strconv.Itoa(i)})
		b.rec(trace.Record{SpanID: s, Type: trace.TypeRunEnd, Name: "run-" + strconv.Itoa(i), Status: "success", Duration: time.Millisecond})
		recs = append(recs, b.recs...)
	}
	e.append(t, recs)
	tb := newTab(t, 30*time.Second)
	tb.do(t, "first page", chromedp.Navigate(e.ts.URL+"/"), waitLoaded(`#more`))
	if n := eval[int](t, tb, `document.querySelectorAll('#runs tbody tr').length`); n != 50 {
		t.Errorf("first page has %d rows, want 50", n)
	}
	tb.do(t, "next page", chromedp.Click(chromedp.CSS(`#more`)), waitLoaded(`#runs tbody tr:nth-child(60)`))
	names := eval[[]string](t, tb, `[...document.querySelectorAll('#runs a.runlink')].map(a => a.textContent)`)
	if len(names) != 60 || names[0] != "run-59" || names[59] != "run-0" {
		t.Errorf("after More: %d rows %q; want 60, run-59 first and run-0 last", len(names), names)
	}
	if eval[bool](t, tb, `!document.querySelector('#more').hidden`) {
		t.Error("More still offered after the last page")
	}
	tb.noConsoleErrors(t)
}

// TestLargeRunPages: a run larger than the first page is drawn from its
// first page, then fills in page by page without values; a span from a
// later page, opened by its link, is selected once its page arrives and
// its values are fetched when it is shown.
func TestLargeRunPages(t *testing.T) {
	e := newEnv(t)
	b := newBuilder()
	root := trace.NewSpanID()
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: "large"})
	const tools = 1500 // 3000 records: two pages
	var last trace.SpanID
	for i := range tools {
		last = trace.NewSpanID()
		in := trace.Value(`{"n":` + itoa(i) + `}`)
		b.rec(trace.Record{SpanID: last, ParentID: root, Type: trace.TypeToolStart, Name: "step", Input: in})
		b.rec(trace.Record{SpanID: last, ParentID: root, Type: trace.TypeToolEnd, Name: "step", Output: trace.Value(`"result-` + itoa(i) + `"`)})
	}
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: "large", Status: "success"})
	e.append(t, b.recs)

	tb := newTab(t, 60*time.Second)
	url := e.ts.URL + "/#/run/" + b.id.String() + "?span=" + last.String()
	tb.do(t, "large run", chromedp.Navigate(url), waitLoaded(`#app[data-complete="true"]`))
	if n := eval[string](t, tb, `document.querySelector('#tree .rows').dataset.rows`); n != itoa(tools+1) {
		t.Errorf("rows = %s, want %d", n, tools+1)
	}
	tb.do(t, "the last span selected, its values fetched", waitLoaded(`#tree .row.sel[data-span="`+last.String()+`"]`))
	tb.do(t, "values", chromedp.Poll[chromedp.Void](`!document.querySelector('#details .loading') && document.querySelector('#details').innerText.includes('result-1499')`, chromedp.WithPollingInterval(20*time.Millisecond)))
	if err := hasText(eval[string](t, tb, `document.querySelector('#details').innerText`), "1499", "result-1499"); err != nil {
		t.Errorf("details: %v", err)
	}
	tb.noConsoleErrors(t)
}

// TestLogRecords: log records show in the run's tree under the span they
// were written in, as severity, logger and body; an error-level one is
// marked failed, and its details show the attributes.
func TestLogRecords(t *testing.T) {
	e := newEnv(t)
	b := newBuilder()
	root, tool, info, bad := trace.NewSpanID(), trace.NewSpanID(), trace.NewSpanID(), trace.NewSpanID()
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: "logged"})
	b.rec(trace.Record{SpanID: tool, ParentID: root, Type: trace.TypeToolStart, Name: "lookup"})
	l := trace.LogEntry{Name: "weather", SeverityNumber: trace.SeverityInfo, Body: trace.Text("fetching forecast"),
		Attributes: trace.JSON(map[string]string{"city": "Lyon"})}.Record()
	l.SpanID, l.ParentID = info, tool
	b.rec(l)
	l = trace.LogEntry{SeverityNumber: trace.SeverityError, Body: trace.Text("upstream timed out")}.Record()
	l.SpanID, l.ParentID = bad, tool
	b.rec(l)
	b.rec(trace.Record{SpanID: tool, ParentID: root, Type: trace.TypeToolEnd, Name: "lookup", Duration: time.Millisecond})
	b.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: "logged", Status: "success", Duration: 5 * time.Millisecond})
	e.append(t, b.recs)

	tb := newTab(t, 30*time.Second)
	tb.do(t, "run", chromedp.Navigate(e.ts.URL+"/#/run/"+b.id.String()+"?span="+info.String()), waitLoaded(`#details`))
	rows := eval[[]string](t, tb, `[...document.querySelectorAll('#tree .row')].map(r => r.querySelector('.type').innerText + ' ' + r.querySelector('.name').innerText + (r.classList.contains('failed') ? ' [failed]' : ''))`)
	want := []string{"run.start logged", "tool.start lookup", "log INFO weather: fetching forecast", "log ERROR: upstream timed out [failed]"}
	if len(rows) != len(want) {
		t.Fatalf("rows = %q, want %q", rows, want)
	}
	for i, w := range want {
		if rows[i] != w {
			t.Errorf("row %d = %q, want %q", i, rows[i], w)
		}
	}
	det := eval[string](t, tb, `document.querySelector('#details').innerText`)
	if err := hasText(det, "INFO", "fetching forecast", "city", "Lyon", "severity_number"); err != nil {
		t.Errorf("log details: %v", err)
	}
	tb.noConsoleErrors(t)
}
