package ui_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/trace"
)

// conversationRuns posts n runs of session conv (user ada) through the
// collector, a minute apart from the given time: run i asks "question i" in GenAI messages, calls a tool
// (the last run's fails) and answers "answer i".
func conversationRuns(t *testing.T, e *env, conv string, n int, from time.Time) []trace.TraceID {
	t.Helper()
	var ids []trace.TraceID
	for i := range n {
		b := newBuilder()
		b.t = from.Add(time.Duration(i) * time.Minute)
		root, tool := trace.NewSpanID(), trace.NewSpanID()
		q := `[{"role":"user","parts":[{"type":"text","content":"question ` + strconv.Itoa(i) + `"}]}]`
		b.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: "concierge", Input: trace.Value(q), Run: &trace.RunInfo{Session: conv, User: "ada"}})
		b.rec(trace.Record{SpanID: tool, ParentID: root, Type: trace.TypeToolStart, Name: "lookup", Input: trace.JSON(map[string]int{"step": i})})
		end := trace.Record{SpanID: tool, ParentID: root, Type: trace.TypeToolEnd, Name: "lookup", Output: trace.Text("found " + strconv.Itoa(i)), Duration: time.Millisecond}
		if i == n-1 {
			end.Type, end.Output, end.Error = trace.TypeToolError, nil, "lookup failed"
		}
		b.rec(end)
		b.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: "concierge", Status: "success", Output: trace.Text("answer " + strconv.Itoa(i)), Duration: 5 * time.Millisecond})
		e.post(t, b.recs...)
		ids = append(ids, b.id)
	}
	return ids
}

// TestSessionsPages: the sessions list, a session of several runs read
// as its conversation (in order, tool calls folded, totals on top, links
// into each run), the runs list's link to the session, and a hostile
// session id shown as text.
func TestSessionsPages(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	ids := conversationRuns(t, e, "conv-ui", 3, now.Add(-10*time.Minute))
	const hostile = `<img src=x onerror="window.__pwned=1">`
	conversationRuns(t, e, hostile, 1, now.Add(-time.Minute))
	tb := newTab(t, 60*time.Second)

	tb.do(t, "sessions page", chromedp.Navigate(e.ts.URL+"/#/sessions"), waitLoaded(`#sessions tr[data-session="conv-ui"]`))
	row := eval[[]string](t, tb, `[...document.querySelectorAll('#sessions tr[data-session="conv-ui"] td')].map(td => td.innerText)`)
	if len(row) != 8 || row[0] != "conv-ui" || row[1] != "ada" || row[2] != "3" || row[7] != "1" {
		t.Errorf("session row = %q, want conv-ui of ada, 3 runs, 1 error", row)
	}
	if got := eval[[]string](t, tb, `[...document.querySelectorAll('#sessions tbody tr')].map(tr => tr.dataset.session)`); len(got) != 2 || got[0] != hostile {
		t.Errorf("sessions in order = %q, want the latest (the hostile one) first", got)
	}
	tb.screenshot(t, "sessions")

	tb.do(t, "session page", chromedp.Click(chromedp.CSS(`#sessions tr[data-session="conv-ui"] a.sessionlink`)), waitLoaded(`#conversation article.turn`))
	if h := eval[string](t, tb, `location.hash`); h != "#/session/conv-ui" {
		t.Errorf("hash = %q", h)
	}
	turns := eval[[]string](t, tb, `[...document.querySelectorAll('#conversation article.turn')].map(a => a.dataset.trace)`)
	if len(turns) != 3 {
		t.Fatalf("%d turns, want 3", len(turns))
	}
	for i, id := range ids {
		if turns[i] != id.String() {
			t.Errorf("turn %d is %s, want %s (in the order the runs started)", i, turns[i], id)
		}
	}
	said := eval[[]string](t, tb, `[...document.querySelectorAll('#conversation .said .text')].map(d => d.innerText)`)
	if strings.Join(said, "|") != "question 0|answer 0|question 1|answer 1|question 2|answer 2" {
		t.Errorf("the conversation reads %q", said)
	}
	stats := eval[string](t, tb, `document.querySelector('#session-stats').innerText`)
	if err := hasText(stats, "runs", "3", "errors", "1 in 1 run"); err != nil {
		t.Errorf("stats: %v", err)
	}
	// Tool calls are folded: closed until opened.
	if open := eval[bool](t, tb, `document.querySelector('#conversation details.tools').open`); open {
		t.Error("tool calls are unfolded by default")
	}
	tb.do(t, "unfold the last run's tools", chromedp.Click(chromedp.CSS(`article.turn[data-turn="3"] details.tools > summary`)))
	tools := eval[string](t, tb, `document.querySelector('article.turn[data-turn="3"] details.tools').innerText`)
	if err := hasText(tools, "1 tool call (1 failed)", "lookup", "lookup failed"); err != nil {
		t.Errorf("folded tools: %v", err)
	}
	tb.screenshot(t, "session")

	tb.do(t, "into a run", chromedp.Click(chromedp.CSS(`article.turn[data-turn="2"] a.runlink`)), waitLoaded(`#tree .row`))
	if h := eval[string](t, tb, `location.hash`); !strings.HasPrefix(h, "#/run/"+ids[1].String()) {
		t.Errorf("run link went to %q", h)
	}

	tb.do(t, "runs list", chromedp.Navigate(e.ts.URL+"/#/runs"), waitLoaded(`#runs tr[data-trace="`+ids[0].String()+`"] a.sessionlink`))
	if h := eval[string](t, tb, `document.querySelector('#runs tr[data-trace="`+ids[0].String()+`"] a.sessionlink').getAttribute('href')`); h != "#/session/conv-ui" {
		t.Errorf("runs list links the session to %q", h)
	}
	tb.do(t, "runs of the session", chromedp.Navigate(e.ts.URL+"/#/runs?session=conv-ui"), waitLoaded(`#runs tbody tr`))
	if n := eval[int](t, tb, `document.querySelectorAll('#runs tbody tr').length`); n != 3 {
		t.Errorf("#/runs?session=conv-ui lists %d runs, want 3", n)
	}
	// The filter form shows the session and keeps it when applied.
	if v := eval[string](t, tb, `document.querySelector('#filters input[name=session]').value`); v != "conv-ui" {
		t.Errorf("the session filter shows %q", v)
	}
	tb.do(t, "apply the form", chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)), waitLoaded(`#runs tbody tr`))
	if h := eval[string](t, tb, `location.hash`); h != "#/runs?session=conv-ui" {
		t.Errorf("after Apply the hash is %q, want the session kept", h)
	}

	tb.do(t, "hostile session", chromedp.Navigate(e.ts.URL+"/#/session/"+strings.ReplaceAll(hostile, " ", "%20")), waitLoaded(`#conversation article.turn`))
	if got := eval[string](t, tb, `document.querySelector('.run-head h1').innerText`); got != "Session "+hostile {
		t.Errorf("hostile session title = %q", got)
	}
	if v := eval[string](t, tb, `String(window.__pwned)`); v != "undefined" {
		t.Errorf("a session id ran as HTML: window.__pwned = %s", v)
	}
	tb.noConsoleErrors(t)
}
