package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/ui"
)

// loopRules are the collector's online evaluation rules: a trajectory
// rule for the runs that book (find the restaurant, then book), and an
// LLM judge, an OpenAI-compatible server, for every run of the session.
const loopRules = `
judge:
  model: openai:gpt-4o-mini
  base_url: %s/v1
  api_key_env: LOUPE_LOOP_JUDGE_KEY
  timeout: 60s
  concurrency: 2
rules:
  - name: books-after-lookup
    filter: tool:book
    sample: 1
    assertions:
      - type: tool-trajectory
        mode: in_order
        expected:
          - tool: find_restaurant
          - tool: book
  - name: confirms-time
    filter: session:%s
    sample: 1
    criteria: Confirms the booking with its time.
    assertions:
      - type: llm-grader
`

// TestProductionLoop runs the whole production loop for real: the
// OpenTelemetry JS SDK sends a three-run conversation with session.id
// and user.id over OTLP to a collector that requires keys, each span in
// its own request (its SimpleSpanProcessor), each run's root first; the
// collector's online rules grade each run once it has settled, with the
// spans that came after its root (a tool-trajectory
// grader, and an LLM judge served over HTTP by an OpenAI-compatible
// server); the scores are read and searched through the API; headless
// Chromium, signed in with a read key, shows the session's runs, a run's
// online scores with the graders' explanations, the runs list's score
// columns and filter, and the search by score; and every endpoint of
// sessions, scores, score configs and rules refuses the keys whose scope
// does not allow the request, changing nothing.
func TestProductionLoop(t *testing.T) {
	node, sdk := needOTelJS(t)
	t.Setenv("LOUPE_LOOP_JUDGE_KEY", "judge-secret")
	judge := newVerdictServer(t, "judge-secret")
	const session, user = "table-at-nora", "ada"

	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys := map[server.Scope]string{}
	for _, sc := range []server.Scope{server.ScopeIngest, server.ScopeRead, server.ScopeAdmin} {
		tok, _, err := server.CreateKey(context.Background(), st, sc, string(sc)+" key", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keys[sc] = tok
	}
	ingest, read, admin := keys[server.ScopeIngest], keys[server.ScopeRead], keys[server.ScopeAdmin]
	cfg, err := online.Parse("rules.yaml", fmt.Appendf(nil, loopRules, judge.URL, session))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := online.New(online.Options{Store: st, Scores: st, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	srv, err := server.New(server.Options{Store: st, UI: ui.Handler(), RequireKeys: true, Online: eng})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close() })
	api := &apiClient{t: t, base: ts.URL}

	// The JS SDK sends the conversation with the ingest key.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "conversation.mjs", ts.URL, session, user, ingest)
	cmd.Dir = sdk
	cmd.Env = append(os.Environ(), "OTEL_LOG_LEVEL=none")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node conversation.mjs: %v\n%s", err, stderrOf(err))
	}
	var sent struct {
		Session, User string
		Traces        []string
	}
	if err := json.Unmarshal(out, &sent); err != nil || len(sent.Traces) != 3 {
		t.Fatalf("conversation.mjs printed %q (%v)", out, err)
	}
	runs := sent.Traces

	// They land as one session of three runs, in order, of user ada.
	var view store.SessionView
	waitUntil(t, "the session's three runs", func() bool {
		code, body := api.do("GET", "/api/v1/sessions/"+session, read, "")
		return code == 200 && json.Unmarshal([]byte(body), &view) == nil && len(view.Turns) == 3
	})
	if view.Session.ID != session || view.Session.User != user || view.Session.Runs != 3 || len(view.Turns) != 3 {
		t.Fatalf("session: %+v with %d turns", view.Session, len(view.Turns))
	}
	for i, turn := range view.Turns {
		if turn.Summary.ID.String() != runs[i] || turn.Summary.Session != session {
			t.Errorf("turn %d: trace %s of session %q, want %s", i, turn.Summary.ID, turn.Summary.Session, runs[i])
		}
	}
	if n := len(view.Turns[0].Tools); n != 2 || view.Turns[0].Tools[0].Name != "find_restaurant" || view.Turns[0].Tools[1].Name != "book" {
		t.Errorf("run 1's tools: %+v", view.Turns[0].Tools)
	}
	// Listed as a session; by user, the runs that say who the user is
	// (run 2 gives only its session).
	for _, tc := range []struct {
		query string
		runs  int
	}{{"", 3}, {"?user=" + user, 2}} {
		var sessions store.SessionPage
		api.get("/api/v1/sessions"+tc.query, read, 200, &sessions)
		if len(sessions.Sessions) != 1 || sessions.Sessions[0].ID != session || sessions.Sessions[0].User != user || sessions.Sessions[0].Runs != tc.runs {
			t.Errorf("sessions%s: %+v, want %s of %s with %d runs", tc.query, sessions.Sessions, session, user, tc.runs)
		}
	}

	// The rules grade each run once it settles: runs 1 and 2 book (the
	// trajectory rule's filter), all three are of the session (the
	// judge's). Three scores a rule and run: the grader's, score, pass.
	scored := map[string]map[string]store.Score{} // by trace, by name
	waitUntil(t, "the online scores of both rules", func() bool {
		var page store.ScorePage
		api.get("/api/v1/scores?source=online&limit=100", read, 200, &page)
		clear(scored)
		for _, s := range page.Scores {
			if scored[s.TraceID.String()] == nil {
				scored[s.TraceID.String()] = map[string]store.Score{}
			}
			scored[s.TraceID.String()][s.Name] = s
		}
		return len(page.Scores) >= 15
	})
	want := map[string]map[string]float64{
		runs[0]: {"books-after-lookup/pass": 1, "books-after-lookup/tool-trajectory": 1, "confirms-time/pass": 1, "confirms-time/llm-grader": 1},
		runs[1]: {"books-after-lookup/pass": 0, "confirms-time/pass": 1, "confirms-time/llm-grader": 1},
		runs[2]: {"confirms-time/pass": 0, "confirms-time/llm-grader": 0},
	}
	for i, id := range runs {
		got := scored[id]
		if n := map[int]int{0: 6, 1: 6, 2: 3}[i]; len(got) != n {
			t.Errorf("run %d has %d online scores, want %d: %v", i+1, len(got), n, slices.Sorted(maps.Keys(got)))
		}
		for name, v := range want[id] {
			if s, ok := got[name]; !ok || s.Value != v || s.Source != store.SourceOnline || s.Rule != strings.Split(name, "/")[0] {
				t.Errorf("run %d: %s = %+v, want %v from its rule", i+1, name, s, v)
			}
		}
	}
	if s := scored[runs[1]]["books-after-lookup/tool-trajectory"]; s.Value >= 1 || !strings.Contains(s.Comment, "find_restaurant") {
		t.Errorf("run 2's trajectory score %v does not say find_restaurant is missing: %q", s.Value, s.Comment)
	}
	if c := scored[runs[2]]["confirms-time/llm-grader"].Comment; !strings.Contains(c, "no time given") {
		t.Errorf("run 3's judge score lacks the judge's evidence: %q", c)
	}
	// The judge was called once a run, over HTTP, with the run's
	// question, answer and the rule's criteria.
	prompts := judge.seen()
	if len(prompts) != 3 {
		t.Errorf("%d judge calls, want 3", len(prompts))
	}
	for _, q := range []string{"Book a table for two at Nora tonight", "Make it 20:00 instead", "And send me the address"} {
		if !slices.ContainsFunc(prompts, func(p string) bool {
			return strings.Contains(p, q) && strings.Contains(p, "Confirms the booking with its time.")
		}) {
			t.Errorf("no judge prompt asks about %q with the criteria", q)
		}
	}

	// Searchable through the API: by score, alone and with the session.
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"score:books-after-lookup/pass=false", []string{runs[1]}},
		{"score:books-after-lookup/pass=true", []string{runs[0]}},
		{"score:confirms-time/llm-grader>=1 session:" + session, []string{runs[0], runs[1]}},
		{"score:confirms-time/pass=false user:" + user, []string{runs[2]}},
		{"score:confirms-time/pass=true score:books-after-lookup/pass=true", []string{runs[0]}},
		{"score:confirms-time/pass=true Moved", []string{runs[1]}},
	} {
		var page store.SearchPage
		api.get("/api/v1/search?q="+url.QueryEscape(tc.q), read, 200, &page)
		var got []string
		for _, h := range page.Hits {
			if !slices.Contains(got, h.TraceID.String()) {
				got = append(got, h.TraceID.String())
			}
		}
		slices.Sort(got)
		wantIDs := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, wantIDs) {
			t.Errorf("search %q: traces %v, want %v", tc.q, got, wantIDs)
		}
	}

	// A program (the ingest key) scores the session as a whole.
	var resolved struct{ Scores []store.Score }
	api.send("POST", "/api/v1/scores", ingest, `{"scores": [{"session": "`+session+`", "name": "resolved", "value": true, "comment": "the table is booked"}]}`, 200, &resolved)
	if len(resolved.Scores) != 1 || resolved.Scores[0].Author != "ingest key" || resolved.Scores[0].Session != session {
		t.Fatalf("the session's score: %+v", resolved.Scores)
	}

	// The browser, signed in with the read key through the sign-in form
	// from a link to the session.
	tb := newTab(t, 3*time.Minute)
	tb.do(t, "sign in from the session's link", chromedp.Navigate(ts.URL+"/#/session/"+session), waitLoaded(`#signin`),
		signIn(read), waitLoaded(`#conversation[data-scores="loaded"] article.turn[data-turn="3"]`))
	if got := eval[string](t, tb, `document.querySelector('#who').textContent`); got != "read key (read)" {
		t.Errorf("header says %q, want the read key", got)
	}
	turns := eval[[]string](t, tb, `[...document.querySelectorAll('#conversation article.turn')].map(a => a.dataset.trace)`)
	if !slices.Equal(turns, runs) {
		t.Errorf("the session page's runs are %v, want %v in order", turns, runs)
	}
	said := eval[[]string](t, tb, `[...document.querySelectorAll('#conversation .said .text')].map(d => d.innerText)`)
	if strings.Join(said, "|") != "Book a table for two at Nora tonight|Booked: 19:30 at Nora.|Make it 20:00 instead|Moved to 20:00.|And send me the address|Nora, 12 Harbour St." {
		t.Errorf("the conversation reads %q", said)
	}
	if err := hasText(eval[string](t, tb, `document.querySelector('.run-head').innerText`), "Session "+session, "user "+user); err != nil {
		t.Errorf("session head: %v", err)
	}
	if got := eval[string](t, tb, `document.querySelector('article.turn[data-turn="1"] details.tools > summary').innerText`); got != "2 tool calls" {
		t.Errorf("run 1's folded tools: %q", got)
	}
	// Each run's online scores, a failed rule in red, with the grader's
	// explanation as the title; the session's own score on top.
	chips := eval[map[string][]string](t, tb, `Object.fromEntries([...document.querySelectorAll('#conversation article.turn')].map(a => [a.dataset.trace, [...a.querySelectorAll('.turn-scores .score-chip')].map(c => c.textContent + (c.classList.contains('bad') ? ' (red)' : ''))]))`)
	for id, want := range map[string][]string{
		runs[0]: {"books-after-lookup/pass true", "books-after-lookup/score 1", "books-after-lookup/tool-trajectory 1", "confirms-time/llm-grader 1", "confirms-time/pass true", "confirms-time/score 1"},
		runs[1]: {"books-after-lookup/pass false (red)", "books-after-lookup/score 0.5", "books-after-lookup/tool-trajectory 0.5", "confirms-time/llm-grader 1", "confirms-time/pass true", "confirms-time/score 1"},
		runs[2]: {"confirms-time/llm-grader 0", "confirms-time/pass false (red)", "confirms-time/score 0"},
	} {
		if !slices.Equal(chips[id], want) {
			t.Errorf("the session page shows run %s's scores as %q, want %q", id, chips[id], want)
		}
	}
	title := eval[string](t, tb, `document.querySelector('article.turn[data-turn="2"] .score-chip[data-name="books-after-lookup/tool-trajectory"]').title`)
	if err := hasText(title, "online · tool-trajectory: ", "find_restaurant"); err != nil {
		t.Errorf("the trajectory chip's title: %v", err)
	}
	if got := eval[string](t, tb, `document.querySelector('#session-scores').innerText`); !strings.Contains(got, "resolved true") {
		t.Errorf("the session's own scores read %q", got)
	}
	tb.screenshot(t, "loop-session")

	// Run 2's page: its online scores, with the graders' explanations.
	tb.do(t, "into run 2", chromedp.Click(chromedp.CSS(`article.turn[data-turn="2"] a.runlink`)),
		waitLoaded(`#annotate[data-loaded="true"] #annotations-body tr[data-name="confirms-time/llm-grader"]`))
	if h := eval[string](t, tb, `location.hash`); !strings.HasPrefix(h, "#/run/"+runs[1]) {
		t.Errorf("the run link went to %q", h)
	}
	rows := eval[map[string][]string](t, tb, `Object.fromEntries([...document.querySelectorAll('#annotations-body tr')].map(tr => [tr.dataset.name, [...tr.cells].map(c => c.innerText)]))`)
	if len(rows) != 6 {
		t.Errorf("run 2 shows %d scores, want its 6 online scores: %v", len(rows), rows)
	}
	for name, v := range map[string]string{"books-after-lookup/pass": "false", "confirms-time/pass": "true", "confirms-time/llm-grader": "1"} {
		r := rows[name]
		if len(r) != 7 || r[1] != v || r[2] != "run" || r[3] != "online" {
			t.Errorf("run 2's %s row: %q, want value %s of the run, source online", name, r, v)
		}
	}
	if r := rows["books-after-lookup/tool-trajectory"]; len(r) != 7 || !strings.Contains(r[5], "find_restaurant") || r[4] != "tool-trajectory" {
		t.Errorf("run 2's trajectory row: %q, want the grader as author and its explanation", r)
	}
	if r := rows["confirms-time/llm-grader"]; len(r) != 7 || !strings.Contains(r[5], "gives the time") {
		t.Errorf("run 2's judge row: %q, want the judge's evidence", r)
	}
	if got := eval[string](t, tb, `document.querySelector('#annotate .annotate-bar').innerText`); !strings.Contains(got, "sign in with an admin key") {
		t.Errorf("a read key is offered annotation: %q", got)
	}
	tb.screenshot(t, "loop-run")

	// The session's runs in the runs list, with two online scores as
	// columns.
	eval[any](t, tb, `localStorage.setItem('loupe-score-columns', 'books-after-lookup/pass, confirms-time/pass'), null`)
	tb.do(t, "the session's runs with score columns", chromedp.Navigate(ts.URL+"/#/runs?session="+session),
		waitLoaded(`#runs[data-scores="filled"] tr[data-trace="`+runs[2]+`"] td.score[data-score="confirms-time/pass"]`))
	cells := eval[map[string]string](t, tb, `Object.fromEntries([...document.querySelectorAll('#runs tbody tr')].map(tr => [tr.dataset.trace, [...tr.querySelectorAll('td.score')].map(c => c.textContent).join('|')]))`)
	if len(cells) != 3 || cells[runs[0]] != "true|true" || cells[runs[1]] != "false|true" || cells[runs[2]] != "|false" {
		t.Errorf("score cells by run %v, want true|true, false|true and |false", cells)
	}
	// Filtered by a score, and searched by one.
	tb.do(t, "the runs that failed the trajectory rule", chromedp.Navigate(ts.URL+"/#/runs?session="+session+"&score="+url.QueryEscape("books-after-lookup/pass=false")),
		waitLoaded(`#runs tr[data-trace="`+runs[1]+`"]`))
	if got := eval[[]string](t, tb, `[...document.querySelectorAll('#runs tbody tr')].map(tr => tr.dataset.trace)`); !slices.Equal(got, runs[1:2]) {
		t.Errorf("score filter lists %v, want run 2 alone", got)
	}
	tb.do(t, "search by the judge's verdict", chromedp.Navigate(ts.URL+"/#/runs?q="+url.QueryEscape("score:confirms-time/pass=false")),
		waitLoaded(`#hits tr[data-trace="`+runs[2]+`"]`))
	if got := eval[[]string](t, tb, `[...new Set([...document.querySelectorAll('#hits tbody tr')].map(tr => tr.dataset.trace))]`); !slices.Equal(got, runs[2:3]) {
		t.Errorf("search by score lists %v, want run 3 alone", got)
	}
	// The rules page shows both rules at work.
	tb.do(t, "rules", chromedp.Navigate(ts.URL+"/#/rules"), waitLoaded(`#rules tr[data-rule="confirms-time"][data-state="active"]`))
	if err := hasText(eval[string](t, tb, `document.querySelector('#rules tr[data-rule="confirms-time"]').innerText`), "llm-grader", "session:"+session); err != nil {
		t.Errorf("judge rule row: %v", err)
	}
	if err := hasText(eval[string](t, tb, `document.querySelector('#rules tr[data-rule="books-after-lookup"]').innerText`), "tool-trajectory", "tool:book", "50.0%"); err != nil {
		t.Errorf("trajectory rule row: %v", err)
	}
	onlyRefusals(t, tb)

	// Every endpoint of sessions, scores, score configs and rules refuses
	// the keys whose scope does not allow the request (401 without a key,
	// 403 with the wrong one), and what it refused did not happen.
	scoreID := scored[runs[0]]["confirms-time/pass"].ID
	scoreBody := `{"scores": [{"trace_id": "` + runs[2] + `", "name": "resolved", "value": true, "comment": "from the CRM"}]}`
	ruleBody := `{"name": "no-double-booking", "filter": "tool:book", "assertions": [{"type": "tool-trajectory", "mode": "any_order", "minimums": {"book": 2}, "negate": true}]}`
	configBody := `{"name": "helpfulness", "kind": "numeric", "min": 0, "max": 1}`
	for _, c := range []struct {
		method, path, body string
		refused            []server.Scope // besides no key at all
	}{
		{"GET", "/api/v1/sessions", "", []server.Scope{server.ScopeIngest}},
		{"GET", "/api/v1/sessions/" + session, "", []server.Scope{server.ScopeIngest}},
		{"POST", "/api/v1/scores", scoreBody, []server.Scope{server.ScopeRead}},
		{"GET", "/api/v1/scores?trace=" + runs[0], "", []server.Scope{server.ScopeIngest}},
		{"GET", "/api/v1/scores/stats", "", []server.Scope{server.ScopeIngest}},
		{"DELETE", "/api/v1/scores/" + scoreID, "", []server.Scope{server.ScopeIngest, server.ScopeRead}},
		{"GET", "/api/v1/score-configs", "", []server.Scope{server.ScopeIngest}},
		{"PUT", "/api/v1/score-configs", configBody, []server.Scope{server.ScopeIngest, server.ScopeRead}},
		{"GET", "/api/v1/rules", "", []server.Scope{server.ScopeIngest}},
		{"POST", "/api/v1/rules", ruleBody, []server.Scope{server.ScopeIngest, server.ScopeRead}},
		{"POST", "/api/v1/rules/confirms-time/pause", "", []server.Scope{server.ScopeIngest, server.ScopeRead}},
		{"POST", "/api/v1/rules/confirms-time/resume", "", []server.Scope{server.ScopeIngest, server.ScopeRead}},
		{"DELETE", "/api/v1/rules/no-double-booking", "", []server.Scope{server.ScopeIngest, server.ScopeRead}},
		{"POST", "/v1/traces", "{}", []server.Scope{server.ScopeRead}},
	} {
		if code, body := api.do(c.method, c.path, "", c.body); code != 401 {
			t.Errorf("%s %s without a key: %d %s, want 401", c.method, c.path, code, body)
		}
		for _, sc := range c.refused {
			code, body := api.do(c.method, c.path, keys[sc], c.body)
			if code != 403 || !strings.Contains(body, "scope "+string(sc)) {
				t.Errorf("%s %s with the %s key: %d %s, want 403 naming the scope", c.method, c.path, sc, code, body)
			}
		}
	}
	var scores store.ScorePage
	api.get("/api/v1/scores?limit=100", admin, 200, &scores)
	if len(scores.Scores) != 16 || !slices.ContainsFunc(scores.Scores, func(s store.Score) bool { return s.ID == scoreID }) {
		t.Errorf("after the refusals there are %d scores (want the 15 online ones and the session's), or the refused delete deleted", len(scores.Scores))
	}
	var configs struct{ Configs []store.ScoreConfig }
	api.get("/api/v1/score-configs", read, 200, &configs)
	if len(configs.Configs) != 0 {
		t.Errorf("a refused PUT stored score configs: %+v", configs.Configs)
	}
	var rules struct{ Rules []online.Status }
	api.get("/api/v1/rules", read, 200, &rules)
	if len(rules.Rules) != 2 || rules.Rules[0].State != "active" || rules.Rules[1].State != "active" {
		t.Errorf("after the refusals the rules are %+v, want the two file rules, active", rules.Rules)
	}

	// The scopes that are allowed do it: ingest adds a score (its author
	// the key's name), admin pauses and resumes a rule, adds one and
	// deletes it, configs a score, deletes a score.
	var added struct{ Scores []store.Score }
	api.send("POST", "/api/v1/scores", ingest, scoreBody, 200, &added)
	if len(added.Scores) != 1 || added.Scores[0].Author != "ingest key" || added.Scores[0].Source != store.SourceAPI {
		t.Errorf("score added with the ingest key: %+v", added.Scores)
	}
	api.send("POST", "/api/v1/rules/confirms-time/pause", admin, "", 200, nil)
	api.get("/api/v1/rules", read, 200, &rules)
	if rules.Rules[1].Name != "confirms-time" || rules.Rules[1].State != "paused" || !strings.Contains(rules.Rules[1].Reason, "admin key") {
		t.Errorf("paused by the admin key: %+v", rules.Rules[1])
	}
	api.send("POST", "/api/v1/rules/confirms-time/resume", admin, "", 200, nil)
	api.send("POST", "/api/v1/rules", admin, ruleBody, 201, nil)
	api.send("DELETE", "/api/v1/rules/no-double-booking", admin, "", 200, nil)
	api.send("PUT", "/api/v1/score-configs", admin, configBody, 200, nil)
	api.send("DELETE", "/api/v1/scores/"+scoreID, admin, "", 200, nil)
	api.get("/api/v1/rules", read, 200, &rules)
	if len(rules.Rules) != 2 || rules.Rules[1].State != "active" {
		t.Errorf("rules at the end: %+v", rules.Rules)
	}
}

// needOTelJS returns node and the directory where scripts/otel-js.sh
// installed the OpenTelemetry JS SDK, or skips the test (fails it under
// CI=true) when either is missing.
func needOTelJS(t *testing.T) (node, dir string) {
	t.Helper()
	dir = filepath.Join(testrepo.Root(t), "server", "testdata", "otel-js")
	node, err := exec.LookPath("node")
	if err != nil {
		testrepo.Missing(t, "node is not installed (scripts/otel-js.sh installs it with the OpenTelemetry JS SDK)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@opentelemetry", "sdk-trace-base")); err != nil {
		testrepo.Missing(t, "the OpenTelemetry JS SDK is not installed (run scripts/otel-js.sh; scripts/test.sh does)")
	}
	return node, dir
}

// stderrOf returns what a failed command wrote to its standard error.
func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// verdictServer is an OpenAI-compatible chat completions server on
// 127.0.0.1 that grades as an AgentV judge answers: a JSON verdict with
// a score and its assertions. An answer that gives a time (19:30) passes.
// It answers streamed requests (what the openai provider sends) with
// server-sent events, and the others with one JSON completion.
type verdictServer struct {
	*httptest.Server
	mu      sync.Mutex
	prompts []string
}

var (
	judgedAnswer = regexp.MustCompile(`(?s)\[\[ ## answer ## \]\]\n(.*?)\n`)
	clockTime    = regexp.MustCompile(`\b\d{1,2}:\d{2}\b`)
)

func newVerdictServer(t *testing.T, key string) *verdictServer {
	v := &verdictServer{}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, `{"error": {"message": "no such endpoint"}}`, http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error": {"message": "bad API key"}}`, http.StatusUnauthorized)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error": {"message": "want a chat completion request"}}`, http.StatusBadRequest)
			return
		}
		prompt := req.Messages[len(req.Messages)-1].Content
		v.mu.Lock()
		v.prompts = append(v.prompts, prompt)
		v.mu.Unlock()
		verdict := `{"score": 0, "assertions": [{"text": "confirms the booking time", "passed": false, "evidence": "no time given"}]}`
		if m := judgedAnswer.FindStringSubmatch(prompt + "\n"); m != nil && clockTime.MatchString(m[1]) {
			verdict = `{"score": 1, "assertions": [{"text": "confirms the booking time", "passed": true, "evidence": "it gives the time"}]}`
		}
		content, _ := json.Marshal(verdict)
		const usage = `{"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}`
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id": "chatcmpl-loop", "object": "chat.completion", "created": 1764000000, "model": "gpt-4o-mini-2024-07-18",
 "choices": [{"index": 0, "message": {"role": "assistant", "content": %s}, "finish_reason": "stop"}], "usage": %s}`, content, usage)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		head := `{"id":"chatcmpl-loop","object":"chat.completion.chunk","created":1764000000,"model":"gpt-4o-mini-2024-07-18","choices":`
		fmt.Fprintf(w, "data: %s[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":%s},\"finish_reason\":null}]}\n\n", head, content)
		fmt.Fprintf(w, "data: %s[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", head)
		fmt.Fprintf(w, "data: %s[],\"usage\":%s}\n\ndata: [DONE]\n\n", head, usage)
	}))
	t.Cleanup(v.Close)
	return v
}

// seen returns the prompts the judge was asked to grade.
func (v *verdictServer) seen() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.prompts)
}

// apiClient calls the collector's API with a key, failing its test on
// transport errors.
type apiClient struct {
	t    *testing.T
	base string
}

// do sends a request (with key unless it is "", with a JSON body unless
// body is "") and returns the status and the body.
func (c *apiClient) do(method, path, key, body string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// send makes a request that must answer code, and decodes its JSON into
// out unless out is nil.
func (c *apiClient) send(method, path, key, body string, code int, out any) {
	c.t.Helper()
	got, b := c.do(method, path, key, body)
	if got != code {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, got, b, code)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(b), out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// get is send for a GET.
func (c *apiClient) get(path, key string, code int, out any) {
	c.t.Helper()
	c.send("GET", path, key, "", code, out)
}

// waitUntil polls cond until it holds, for at most two minutes (the
// collector and the engine work in the background: the test waits for
// their result, it does not time them).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
