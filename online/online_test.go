package online_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
)

const lookupRule = `
rules:
  - name: order-lookup
    filter: name:support
    sample: 1
    assertions:
      - type: tool-trajectory
        mode: in_order
        expected:
          - tool: lookup_order
            args:
              id: 17
          - tool: notify
      - type: contains
        value: shipped
`

// The real collector ingests OTLP traces; a rule with a tool-trajectory
// grader (in_order, an argument matcher) and a contains grader scores
// each trace when its root run ends: one score per grader, with the
// grader's explanation (which call is missing, which argument differs)
// as the comment, plus the overall score and pass.
func TestToolTrajectoryRuleEndToEnd(t *testing.T) {
	st := openSQLite(t, dbPath(t))
	sc := scorerFor(st)
	eng := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, lookupRule)})
	ts := collector(t, st, eng, server.Options{})

	// Trace 0 calls lookup_order(17) then notify: it passes. Trace 1
	// looks up order 18 and never notifies: it fails, and the comments
	// say why.
	calls := func(i int) []call {
		if i == 0 {
			return []call{{"lookup_order", `{"id":17}`}, {"notify", `{"to":"customer"}`}}
		}
		return []call{{"lookup_order", `{"id":18}`}}
	}
	answer := func(i int) string { return "Order has shipped." }
	postOTLP(t, ts.URL, agentTraces(1, 2, calls, answer))
	waitFor(t, "8 scores", func() bool { return len(scoresOf(t, sc, "order-lookup")) == 8 })

	byTrace := map[string]map[string]store.Score{}
	for _, s := range scoresOf(t, sc, "order-lookup") {
		if byTrace[s.TraceID.String()] == nil {
			byTrace[s.TraceID.String()] = map[string]store.Score{}
		}
		byTrace[s.TraceID.String()][s.Name] = s
		if s.Source != store.SourceOnline || s.Rule != "order-lookup" {
			t.Errorf("score %+v: source or rule", s)
		}
	}
	pass, fail := byTrace[traceID(1, 0).String()], byTrace[traceID(1, 1).String()]
	if pass["order-lookup/pass"].Value != 1 || pass["order-lookup/score"].Value != 1 || pass["order-lookup/tool-trajectory"].Value != 1 {
		t.Errorf("passing trace: %+v", pass)
	}
	if fail["order-lookup/pass"].Value != 0 || fail["order-lookup/tool-trajectory"].Value != 0 || fail["order-lookup/contains-shipped"].Value != 1 {
		t.Errorf("failing trace: %+v", fail)
	}
	c := fail["order-lookup/tool-trajectory"].Comment
	for _, want := range []string{"notify", "id", "18", "17"} {
		if !strings.Contains(c, want) {
			t.Errorf("the trajectory grader's comment does not name %q:\n%s", want, c)
		}
	}
	if a := fail["order-lookup/tool-trajectory"].Author; a != "tool-trajectory" {
		t.Errorf("author %q, want the grader", a)
	}
	if c := fail["order-lookup/pass"].Comment; !strings.Contains(c, "FAIL") || !strings.Contains(c, "tool-trajectory") {
		t.Errorf("overall comment %q", c)
	}
	rs, err := eng.Rules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s := rs[0].Stats
	if s.Matched != 2 || s.Sampled != 2 || s.Evaluated != 2 || s.Dropped != 0 || s.Errors != 0 || s.Scored != 2 || s.MeanScore != 0.5+0.5*0.5 || s.PassRate != 0.5 || len(s.History) != 1 {
		t.Errorf("stats %+v", s)
	}
}

// judgeRules is a rules file whose rule is graded by an LLM judge at url.
func judgeRules(url string, extra string) string {
	return fmt.Sprintf(`
judge:
  model: openai:gpt-4o-mini
  base_url: %s/v1
  api_key_env: LOUPE_TEST_JUDGE_KEY
  timeout: 30s
  concurrency: 2
rules:
  - name: answer-quality
    criteria: Says where the customer's order is.
    %s
    assertions:
      - type: llm-grader
`, url, extra)
}

// A rule with an LLM judge: the judge, an OpenAI-compatible server on
// 127.0.0.1, is called through llm.Open's openai provider once per ended
// trace; its grade becomes the trace's scores, its reasoning the
// comment, and its usage, priced by the price table, the rule's cost.
func TestJudgeRuleEndToEnd(t *testing.T) {
	t.Setenv("LOUPE_TEST_JUDGE_KEY", "judge-key")
	judge := newJudge(t, 0, nil)
	st := openSQLite(t, dbPath(t))
	sc := scorerFor(st)
	eng := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, judgeRules(judge.URL, ""))})
	ts := collector(t, st, eng, server.Options{})
	answer := func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("Order %d has shipped.", i)
		}
		return fmt.Sprintf("Order %d: I do not know.", i)
	}
	postOTLP(t, ts.URL, agentTraces(2, 4, func(int) []call { return nil }, answer))
	waitFor(t, "4 traces scored", func() bool { return len(scoresOf(t, sc, "answer-quality")) == 12 })
	if n := judge.total.Load(); n != 4 {
		t.Errorf("%d judge calls, want 4", n)
	}
	for _, s := range scoresOf(t, sc, "answer-quality") {
		if s.Name != "answer-quality/llm-grader" {
			continue
		}
		i := int(s.TraceID[3])
		if want := float64(1 - i%2); s.Value != want {
			t.Errorf("trace %d: judge score %v, want %v", i, s.Value, want)
		}
		if !strings.Contains(s.Comment, "judge: it has shipped") && !strings.Contains(s.Comment, "judge: no status given") {
			t.Errorf("comment lacks the judge's evidence:\n%s", s.Comment)
		}
	}
	// The judge saw the run's question and its final answer as text.
	for _, p := range judge.prompts {
		if !strings.Contains(p, "[[ ## question ## ]]\nWhere is order") || !strings.Contains(p, "[[ ## criteria ## ]]\nSays where the customer's order is.") {
			t.Errorf("judge prompt:\n%s", p)
		}
	}
	rs, err := eng.Rules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s := rs[0].Stats
	// gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output.
	wantCost := 4 * (1000*0.15 + 50*0.60) / 1e6
	if s.JudgeCalls != 4 || s.UnpricedJudgeCalls != 0 || fmt.Sprintf("%.6f", s.JudgeCostUSDHour) != fmt.Sprintf("%.6f", wantCost) {
		t.Errorf("judge stats: %d calls, $%v this hour (want $%v), %d unpriced", s.JudgeCalls, s.JudgeCostUSDHour, wantCost, s.UnpricedJudgeCalls)
	}
	if s.PassRate != 0.5 || s.Evaluated != 4 {
		t.Errorf("stats %+v", s)
	}
}
