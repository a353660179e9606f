package eval

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// TestEvalJudgeMatchesAgentV holds the judge graders to AgentV 4.42.4 run
// for real (scripts/agentv-judge-ref.sh): for the cases of
// testdata/agentv-ref/judge/cases.yaml, graded with the same fixed judge
// answer, Loupe sends the judge the same system and user prompts, byte for
// byte, and gives the same grader scores, verdicts and checks, and the same
// case scores.
func TestEvalJudgeMatchesAgentV(t *testing.T) {
	dir := "testdata/agentv-ref/judge/"
	var ref []struct {
		TestID string  `json:"test_id"`
		Score  float64 `json:"score"`
		Scores []struct {
			Name       string  `json:"name"`
			Score      float64 `json:"score"`
			Verdict    string  `json:"verdict"`
			System     string  `json:"system"`
			User       string  `json:"user"`
			Assertions []struct {
				Text     string `json:"text"`
				Passed   bool   `json:"passed"`
				Evidence string `json:"evidence"`
			} `json:"assertions"`
		} `json:"scores"`
	}
	b, err := os.ReadFile(dir + "reference.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	targets, err := os.ReadFile(dir + "targets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The mock judge's fixed answer, as targets.yaml gives it to AgentV.
	answer := regexp.MustCompile(`(?m)^    response: '(\{.*\})'$`).FindSubmatch(targets)
	if answer == nil {
		t.Fatal("no judge response in targets.yaml")
	}
	f, err := ParseFileMode(dir+"cases.yaml", LoadAgentV)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]Case{}
	for _, c := range f.Cases {
		cases[c.ID] = c
	}
	if len(ref) != len(f.Cases) {
		t.Fatalf("reference has %d tests, cases.yaml %d", len(ref), len(f.Cases))
	}
	for _, want := range ref {
		t.Run(want.TestID, func(t *testing.T) {
			j := &scriptJudge{answers: []string{string(answer[1])}}
			got := Evaluate(context.Background(), cases[want.TestID], Trajectory{Output: "The capital of France is Paris."}, Options{Mode: ModeAgentV, Judge: j})
			if !near(got.Score, want.Score) {
				t.Errorf("case score %v, AgentV %v", got.Score, want.Score)
			}
			if len(got.Assertions) != len(want.Scores) {
				t.Fatalf("%d graders, AgentV %d", len(got.Assertions), len(want.Scores))
			}
			for i, w := range want.Scores {
				a := got.Assertions[i]
				if a.Name != w.Name || !near(a.Score, w.Score) || string(a.Verdict) != w.Verdict {
					t.Errorf("grader %d: %s %v %s, AgentV %s %v %s", i, a.Name, a.Score, a.Verdict, w.Name, w.Score, w.Verdict)
				}
				if w.User == "" {
					continue // not a judge grader
				}
				if len(a.JudgeCalls) != 1 {
					t.Fatalf("grader %s: %d judge calls", a.Name, len(a.JudgeCalls))
				}
				p := a.JudgeCalls[0].Prompt
				if p.User != w.User {
					t.Errorf("grader %s: user prompt\n%q\nAgentV sent\n%q", a.Name, p.User, w.User)
				}
				if p.System != w.System {
					t.Errorf("grader %s: system prompt\n%q\nAgentV sent\n%q", a.Name, p.System, w.System)
				}
				// A free-form grade without assertions has Loupe's one
				// summary check; AgentV lists none.
				if len(w.Assertions) > 0 {
					if len(a.Checks) != len(w.Assertions) {
						t.Fatalf("grader %s: checks %+v, AgentV %+v", a.Name, a.Checks, w.Assertions)
					}
					for k, wa := range w.Assertions {
						c := a.Checks[k]
						if c.Text != wa.Text || c.Passed != wa.Passed || c.Evidence != wa.Evidence {
							t.Errorf("grader %s check %d: %+v, AgentV %+v", a.Name, k, c, wa)
						}
					}
				}
			}
		})
	}
}
