package eval

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestEvalJudgeMatchesAgentV holds the judge graders to AgentV 4.42.4 run
// for real (scripts/agentv-judge-ref.sh): for the cases of
// testdata/agentv-ref/judge/cases.yaml, graded with the same fixed judge
// answer, Loupe sends the judge the same system and user prompts, byte for
// byte, and gives the same grader scores, verdicts and checks, and the same
// case scores. With a judge whose answer is not JSON, every judge grader
// fails after AgentV's retries (AgentV's skip, Loupe's could-not-run) and
// the case scores 0, as AgentV's execution error does. A run with tool
// calls (AgentV's cli target printing agent-tools.json) gives the same
// tool_calls section.
func TestEvalJudgeMatchesAgentV(t *testing.T) {
	const dir = "testdata/agentv-ref/judge/"
	answer := Trajectory{Output: "The capital of France is Paris."}
	withTools := agentRun(t, dir+"agent-tools.json")
	withOrder := agentRun(t, dir+"agent-tools-order.json")
	for _, f := range []struct {
		targets, ref, cases string
		run                 Trajectory
	}{
		{"targets.yaml", "reference.json", "cases.yaml", answer},
		{"targets-unreadable.yaml", "reference-unreadable.json", "cases.yaml", answer},
		{"targets.yaml", "reference-tools.json", "tool-cases.yaml", withTools},
		// Arguments shown in the order the call gave them, and the answer
		// the last assistant message with content, not the turn after it
		// that only calls a tool.
		{"targets.yaml", "reference-tools-order.json", "tool-order-cases.yaml", withOrder},
	} {
		t.Run(f.ref, func(t *testing.T) { judgeMatchesAgentV(t, dir, f.targets, f.ref, f.cases, f.run) })
	}
}

// agentRun reads the output of AgentV's cli target (an agent-*.json file:
// messages with content and tool calls) through Loupe's transcript
// reader, as one run: the path a recorded AgentV run takes.
func agentRun(t *testing.T, path string) Trajectory {
	t.Helper()
	var run struct {
		Output []struct {
			Role      string            `json:"role"`
			Content   json.RawMessage   `json:"content"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		} `json:"output"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	var rows strings.Builder
	for i, m := range run.Output {
		row := map[string]any{"test_id": "run", "message_index": i, "role": m.Role, "tool_calls": m.ToolCalls}
		if m.Content != nil {
			row["content"] = m.Content
		}
		line, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		rows.Write(line)
		rows.WriteByte('\n')
	}
	recs, err := ParseTranscript(path, strings.NewReader(rows.String()))
	if err != nil || len(recs) != 1 {
		t.Fatalf("%v, %d runs", err, len(recs))
	}
	return recs[0].Trajectory
}

func judgeMatchesAgentV(t *testing.T, dir, targetsFile, refFile, casesFile string, run Trajectory) {
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
	b, err := os.ReadFile(dir + refFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	targets, err := os.ReadFile(dir + targetsFile)
	if err != nil {
		t.Fatal(err)
	}
	// The mock judge's fixed answer, as targets.yaml gives it to AgentV.
	answer := regexp.MustCompile(`(?m)^    response: '(.*)'$`).FindSubmatch(targets)
	if answer == nil {
		t.Fatal("no judge response in targets.yaml")
	}
	f, err := ParseFileMode(dir+casesFile, LoadAgentV)
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
			got := Evaluate(context.Background(), cases[want.TestID], run, Options{Mode: ModeAgentV, Judge: j})
			if !near(got.Score, want.Score) {
				t.Errorf("case score %v, AgentV %v", got.Score, want.Score)
			}
			if len(got.Assertions) != len(want.Scores) {
				t.Fatalf("%d graders, AgentV %d", len(got.Assertions), len(want.Scores))
			}
			for i, w := range want.Scores {
				a := got.Assertions[i]
				verdict := w.Verdict
				if verdict == "skip" { // a judge that failed: the test is an execution error
					verdict = string(CouldNotRun)
				}
				if a.Name != w.Name || !near(a.Score, w.Score) || string(a.Verdict) != verdict {
					t.Errorf("grader %d: %s %v %s, AgentV %s %v %s", i, a.Name, a.Score, a.Verdict, w.Name, w.Score, w.Verdict)
				}
				if w.User == "" {
					continue // not a judge grader
				}
				if calls := map[bool]int{true: 4, false: 1}[w.Verdict == "skip"]; len(a.JudgeCalls) != calls {
					t.Fatalf("grader %s: %d judge calls, want %d", a.Name, len(a.JudgeCalls), calls)
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
				if w.Verdict == "skip" {
					// The parse error's wording is JavaScript's; the rest is AgentV's.
					const prefix = "Grader parse failure after 3 attempts: Failed to parse evaluator response after 3 attempts and 1 structure-fix attempt: "
					if len(a.Checks) != 1 || !strings.HasPrefix(a.Checks[0].Text, prefix) || !strings.HasPrefix(w.Assertions[0].Text, prefix) {
						t.Errorf("grader %s: checks %+v, AgentV %+v", a.Name, a.Checks, w.Assertions)
					}
					continue
				}
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
