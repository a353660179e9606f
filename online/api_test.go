package online_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

func do(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const apiRule = `{"name": "no-refunds", "filter": "tool:refund", "sample": 1,
 "assertions": [{"type": "tool-trajectory", "mode": "any_order", "minimums": {"refund": 1}, "negate": true}]}`

// The rules API on a server that requires keys: read keys may list the
// rules, only admin keys add, pause, resume and delete them; a rule made
// through the API is kept in the store, so a second collector on the
// same store runs it and sees it paused; a rule file's rule cannot be
// deleted, a code grader cannot be added, and a bad rule is refused with
// where and what to fix.
func TestRulesAPIScopes(t *testing.T) {
	st := openSQLite(t, dbPath(t))
	sc := scorerFor(st)
	ctx := context.Background()
	read, _, err := server.CreateKey(ctx, st, server.ScopeRead, "reader", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	admin, _, err := server.CreateKey(ctx, st, server.ScopeAdmin, "ops", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ingest, _, err := server.CreateKey(ctx, st, server.ScopeIngest, "agent", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	eng := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, lookupRule)})
	ts := collector(t, st, eng, server.Options{RequireKeys: true})
	u := ts.URL + "/api/v1/rules"

	for _, c := range []struct {
		method, path, key, body string
		code                    int
	}{
		{"GET", "", "", "", 401},
		{"GET", "", ingest, "", 403},
		{"GET", "", read, "", 200},
		{"POST", "", read, apiRule, 403},
		{"POST", "/order-lookup/pause", read, "", 403},
		{"DELETE", "/order-lookup", read, "", 403},
		{"POST", "", admin, apiRule, 201},
		{"POST", "", admin, apiRule, 409}, // the name is taken
		{"POST", "", admin, `{"name": "x", "assertions": [{"type": "code-grader", "command": ["true"]}]}`, 400},
		{"POST", "", admin, `{"name": "x", "filter": "nope:1", "assertions": ["x"]}`, 400},
		{"POST", "/no-refunds/pause", admin, "", 200},
		{"POST", "/nothing/pause", admin, "", 404},
		{"DELETE", "/order-lookup", admin, "", 409}, // a file rule
		{"DELETE", "/nothing", admin, "", 404},
	} {
		code, body := do(t, c.method, u+c.path, c.key, c.body)
		if code != c.code {
			t.Errorf("%s %s (key %v): %d %s, want %d", c.method, c.path, c.key != "", code, body, c.code)
		}
	}
	_, body := do(t, "POST", u, admin, `{"name": "x", "filter": "nope:1", "assertions": ["x"]}`)
	if !strings.Contains(body, `request:1:25`) || !strings.Contains(body, "loupe traces search") {
		t.Errorf("bad filter's error: %s", body)
	}

	// A second collector on the same store sees the rule, paused by ops.
	eng2 := startEngine(t, online.Options{Store: st, Scores: sc})
	rs, err := eng2.Rules(ctx)
	if err != nil || len(rs) != 1 || rs[0].Name != "no-refunds" || rs[0].State != "paused" || !strings.Contains(rs[0].Reason, "ops") || rs[0].Origin != online.OriginAPI {
		t.Fatalf("second engine's rules %+v (%v)", rs, err)
	}
	// Resumed there, it runs on the first collector: a trace that calls
	// refund fails the negated trajectory grader.
	if _, err := eng2.Resume(ctx, "no-refunds"); err != nil {
		t.Fatal(err)
	}
	code, body := do(t, "GET", u, read, "")
	var list struct {
		Enabled bool
		Rules   []online.Status
	}
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || !list.Enabled || len(list.Rules) != 2 || list.Rules[1].State != "active" {
		t.Fatalf("GET /api/v1/rules: %d %s", code, body)
	}
	td := agentTraces(40, 1, func(int) []call { return []call{{"lookup_order", `{"id":17}`}, {"refund", `{"id":17}`}} },
		func(int) string { return "Refunded." })
	postOTLPWith(t, ts.URL, admin, td)
	waitFor(t, "the refund trace scored", func() bool { return len(scoresOf(t, sc, "no-refunds")) == 3 })
	for _, s := range scoresOf(t, sc, "no-refunds") {
		if s.Name == "no-refunds/pass" && s.Value != 0 {
			t.Errorf("a refund passed no-refunds: %+v", s)
		}
	}
	if code, body := do(t, "DELETE", u+"/no-refunds", admin, ""); code != 200 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	settings, _ := st.(store.Settings).Settings(ctx, online.RulePrefix)
	if len(settings) != 0 {
		t.Errorf("rule settings left after delete: %v", settings)
	}
	if rs, _ := eng2.Rules(ctx); len(rs) != 0 {
		t.Errorf("second engine still has %+v", rs)
	}
}

// A trace whose run never ends is evaluated when it goes stale
// (store.StatusIncomplete), by the sweep.
func TestSweepEvaluatesStaleTraces(t *testing.T) {
	st := openSQLite(t, dbPath(t))
	sc := scorerFor(st)
	eng := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, lookupRule), SweepEvery: -1})
	ts := collector(t, st, eng, server.Options{})
	id := trace.TraceID{0x50, 1}
	root, tool := trace.SpanID{1}, trace.SpanID{2}
	old := time.Now().Add(-time.Hour)
	recs := []trace.Record{
		{V: 1, TraceID: id, SpanID: root, Seq: 1, Time: old, Type: trace.TypeRunStart, Name: "support", Input: trace.Text("Where is order 17?")},
		{V: 1, TraceID: id, SpanID: tool, ParentID: root, Seq: 2, Time: old, Type: trace.TypeToolStart, Name: "lookup_order", Input: trace.Raw([]byte(`{"id":17}`))},
		{V: 1, TraceID: id, SpanID: tool, ParentID: root, Seq: 3, Time: old, Type: trace.TypeToolEnd, Name: "lookup_order", Output: trace.Text("shipped")},
	}
	var b bytes.Buffer
	for _, r := range recs {
		line, _ := json.Marshal(r)
		b.Write(line)
		b.WriteByte('\n')
	}
	resp, err := http.Post(ts.URL+"/v1/records", "application/x-ndjson", &b)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("post: %v %v", err, resp)
	}
	resp.Body.Close()
	if eng.Pending() != 0 {
		t.Fatal("a trace without run.end was queued")
	}
	eng.Sweep(context.Background())
	waitFor(t, "the stale trace scored", func() bool { return len(scoresOf(t, sc, "order-lookup")) == 4 })
	eng.Sweep(context.Background()) // seen: not queued again
	if eng.Pending() != 0 {
		t.Error("the stale trace was queued twice")
	}
}

// A judge rule over its hourly budget pauses itself and says why; the
// traces after that are not judged.
func TestBudgetPausesRule(t *testing.T) {
	t.Setenv("LOUPE_TEST_JUDGE_KEY", "judge-key")
	judge := newJudge(t, 0, nil)
	st := openSQLite(t, dbPath(t))
	sc := scorerFor(st)
	// Each call costs $0.00018 (1000 in, 50 out tokens of gpt-4o-mini).
	eng := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, judgeRules(judge.URL, "budget_usd_per_hour: 0.0003")), Workers: 1})
	ts := collector(t, st, eng, server.Options{})
	postOTLP(t, ts.URL, agentTraces(60, 5, func(int) []call { return nil }, func(i int) string { return "Order has shipped." }))
	waitFor(t, "the queue to drain", func() bool { return eng.Pending() == 0 })
	if n := judge.total.Load(); n != 2 {
		t.Errorf("%d judge calls, want 2 (the second goes over the budget)", n)
	}
	code, body := do(t, "GET", ts.URL+"/api/v1/rules", "", "")
	var list struct{ Rules []online.Status }
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Rules) != 1 {
		t.Fatalf("%d %s", code, body)
	}
	r := list.Rules[0]
	if r.State != "paused" || !strings.Contains(r.Reason, "over the budget of $0.0003") || r.Stats.Evaluated != 2 {
		t.Errorf("rule %+v", r)
	}
}
