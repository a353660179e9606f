package eval

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// scriptJudge answers from a list, one answer per call, and keeps the
// prompts it was sent. An answer starting with "error:" is returned as the
// call's error.
type scriptJudge struct {
	mu      sync.Mutex
	answers []string
	prompts []JudgePrompt
}

func (j *scriptJudge) Judge(_ context.Context, p JudgePrompt) (JudgeReply, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.prompts = append(j.prompts, p)
	if len(j.answers) == 0 {
		return JudgeReply{Model: "test-judge"}, errors.New("test judge: no answer left")
	}
	a := j.answers[0]
	if len(j.answers) > 1 { // the last answer repeats (AgentV retries)
		j.answers = j.answers[1:]
	}
	if e, ok := strings.CutPrefix(a, "error:"); ok {
		return JudgeReply{Model: "test-judge"}, errors.New(e)
	}
	return JudgeReply{ID: "span", Model: "test-judge", Text: a, InputTokens: 100, OutputTokens: 20, CostUSD: 0.001}, nil
}

const judgeTrajectoryOutput = "The capital of France is Paris."

func judgeTrajectory() Trajectory {
	return Trajectory{
		Output: judgeTrajectoryOutput,
		Calls:  []ToolCall{{Name: "search", Args: map[string]any{"query": "capital of France"}}},
	}
}

func TestEvalJudgeGraders(t *testing.T) {
	const head = "tests:\n  - id: c\n    criteria: Names the capital of France.\n    input: What is the capital of France?\n    expected_output: Paris\n    assertions:\n"
	rubric2 := `{"checks": [{"id": "rubric-1", "satisfied": true, "reasoning": "says Paris"}, {"id": "rubric-2", "satisfied": %s, "reasoning": "r"}], "overall_reasoning": "overall"}`
	tests := []struct {
		name    string
		grader  string // YAML under assertions:, indented 6
		mode    Mode
		answers []string
		// want
		verdict Verdict
		score   float64
		calls   int
		// every string must appear in the reason, checks and evidence, or
		// (prefixed "prompt:") in the user prompt of the first call, or
		// ("system:") in its system prompt.
		want []string
	}{
		{"llm-grader pass", "      - type: llm-grader\n", ModeDefault,
			[]string{`{"score": 0.9, "assertions": [{"text": "names Paris", "passed": true, "evidence": "it says Paris"}]}`},
			Pass, 0.9, 1, []string{"names Paris", "it says Paris", "prompt:[[ ## criteria ## ]]\nNames the capital of France.",
				"prompt:[[ ## question ## ]]\nWhat is the capital of France?", "prompt:[[ ## reference_answer ## ]]\nParis",
				"prompt:[[ ## answer ## ]]\n" + judgeTrajectoryOutput, "prompt:[[ ## tool_calls ## ]]\n- search: capital of France",
				`system:"score": <number between 0.0 and 1.0>`}},
		{"llm-grader fail", "      - type: llm-grader\n        prompt: Answers in one word.\n", ModeDefault,
			[]string{"```json\n{\"score\": 0.4}\n```"}, Fail, 0.4, 1,
			[]string{"the judge scored 0.40", "prompt:[[ ## criteria ## ]]\nAnswers in one word."}},
		{"llm-grader template prompt", "      - type: llm-grader\n        prompt: \"Is {{ output }} right for {{input}} {{unknown}}\"\n", ModeDefault,
			[]string{`{"score": 1}`}, Pass, 1, 1,
			[]string{"prompt:Is " + judgeTrajectoryOutput + " right for What is the capital of France? {{unknown}}"}},
		{"llm-grader unparseable", "      - type: llm-grader\n", ModeDefault,
			[]string{"Looks good to me!"}, CouldNotRun, 0, 1,
			[]string{"could not be read", `raw answer: "Looks good to me!"`}},
		{"llm-grader score out of range", "      - type: llm-grader\n", ModeDefault,
			[]string{`{"score": 8}`}, CouldNotRun, 0, 1, []string{"between 0.0 and 1.0, got 8"}},
		{"llm-grader judge error", "      - type: llm-grader\n", ModeDefault,
			[]string{"error:429 rate limited"}, CouldNotRun, 0, 1, []string{"judge call failed: 429 rate limited"}},
		{"llm-grader unparseable, agentv", "      - type: llm-grader\n", ModeAgentV,
			[]string{"Looks good to me!"}, CouldNotRun, 0, 4,
			[]string{"Grader parse failure after 3 attempts", "raw answer"}},
		{"llm-grader retried, agentv", "      - type: llm-grader\n", ModeAgentV,
			[]string{"error:503", "no json", `{"score": 0.85}`}, Pass, 0.85, 3, nil},
		{"llm-grader judge error, agentv", "      - type: llm-grader\n", ModeAgentV,
			[]string{"error:network down"}, CouldNotRun, 0, 3, []string{"network down"}},
		{"negated llm-grader", "      - type: llm-grader\n        negate: true\n", ModeDefault,
			[]string{`{"score": 0.1}`}, Pass, 0.9, 1, nil},
		{"bare strings pass", "      - Names Paris.\n      - Is one sentence.\n", ModeDefault,
			[]string{strings.Replace(rubric2, "%s", "true", 1)}, Pass, 1, 1,
			[]string{"[rubric-1] Names Paris.", "says Paris", "system:\"satisfied\": boolean",
				"prompt:[[ ## rubrics ## ]]\n- [rubric-1] (REQUIRED): Names Paris.\n- [rubric-2] (REQUIRED): Is one sentence.\n\nFor each rubric"}},
		{"bare strings, a required item fails", "      - Names Paris.\n      - Is one sentence.\n", ModeDefault,
			[]string{strings.Replace(rubric2, "%s", "false", 1)}, Fail, 0.5, 1, nil},
		{"bare strings, passed repaired", "      - Names Paris.\n", ModeDefault,
			[]string{`{"checks": [{"id": "rubric-1", "satisfied": true, "reasoning": "x", "passed": "yes"}], "overall_reasoning": "ok"}`}, Pass, 1, 1, nil},
		{"rubric weights, optional item", "      - type: rubric\n        rubrics:\n          - {id: tone, outcome: Is polite, weight: 3, required: false}\n          - {id: fact, outcome: Names Paris}\n", ModeDefault,
			[]string{`{"checks": [{"id": "tone", "satisfied": false, "reasoning": "curt"}, {"id": "fact", "satisfied": true, "reasoning": "yes"}], "overall_reasoning": "o"}`},
			Fail, 0.25, 1, []string{"prompt:- [tone] (weight: 3): Is polite", "prompt:- [fact] (REQUIRED): Names Paris"}},
		{"rubric, unanswered item counts as unsatisfied", "      - type: rubrics\n        criteria: [Names Paris, Is short]\n", ModeDefault,
			[]string{`{"checks": [{"id": "rubric-1", "satisfied": true}], "overall_reasoning": "o"}`},
			Fail, 0.5, 1, []string{"the judge gave no verdict for this item"}},
		{"rubric, unanswered item left out, agentv", "      - type: rubrics\n        criteria: [Names Paris, Is short]\n", ModeAgentV,
			[]string{`{"checks": [{"id": "rubric-1", "satisfied": true, "reasoning": "r"}], "overall_reasoning": "o"}`},
			Pass, 1, 1, nil},
		{"rubric, missing reasoning is a parse error, agentv", "      - type: rubrics\n        criteria: [Names Paris]\n", ModeAgentV,
			[]string{`{"checks": [{"id": "rubric-1", "satisfied": true}], "overall_reasoning": "o"}`},
			CouldNotRun, 0, 4, []string{`checks[0]."reasoning" is missing`}},
		{"rubric unparseable", "      - type: rubrics\n        criteria: [Names Paris]\n", ModeDefault,
			[]string{`{"checks": "all good"}`}, CouldNotRun, 0, 1, []string{`"checks" must be an array, got a string`}},
		{"rubric judge error", "      - Names Paris.\n", ModeDefault,
			[]string{"error:context length exceeded"}, CouldNotRun, 0, 1, []string{"context length exceeded"}},
		{"score ranges", "      - type: llm-grader\n        rubrics:\n          - id: accuracy\n            outcome: Correct\n            weight: 2\n            score_ranges: {0: wrong, 5: partly, 8: right}\n          - id: style\n            score_ranges:\n              - {score_range: [0, 6], outcome: poor}\n              - {score_range: [7, 10], outcome: good}\n", ModeDefault,
			[]string{`{"checks": [{"id": "accuracy", "score": 9, "reasoning": "right"}, {"id": "style", "score": 4}]}`},
			Fail, (0.9*2 + 0.4) / 3, 1, []string{"[accuracy] Correct - Score: 9/10 (right)", "[style] style - Score: 4/10 (poor)",
				"prompt:### Criterion: accuracy (weight: 2)\nDescription: Correct\nScore ranges:\n  - Score 0-4: wrong\n  - Score 5-7: partly\n  - Score 8-10: right",
				"system:integer (0-10)"}},
		{"score ranges, below min_score", "      - type: rubric\n        rubrics:\n          - id: accuracy\n            outcome: Correct\n            min_score: 0.9\n            score_ranges: {0: wrong, 8: right}\n", ModeDefault,
			[]string{`{"checks": [{"id": "accuracy", "score": 8}]}`}, Fail, 0.8, 1, []string{"prompt:[REQUIRED: min score 0.9]"}},
		{"score ranges, not an integer", "      - type: rubric\n        rubrics:\n          - id: a\n            score_ranges: {0: wrong, 8: right}\n", ModeDefault,
			[]string{`{"checks": [{"id": "a", "score": 7.5}]}`}, CouldNotRun, 0, 1, []string{"integer from 0 to 10, got 7.5"}},
		{"llm-rubric", "      - type: llm-rubric\n        value: Mentions the Eiffel Tower.\n", ModeDefault,
			[]string{`{"score": 0.2}`}, Fail, 0.2, 1, []string{"prompt:[[ ## criteria ## ]]\nMentions the Eiffel Tower."}},
		{"g-eval", "      - type: g-eval\n        value: Coherence.\n", ModeDefault,
			[]string{`{"score": 0.8}`}, Pass, 0.8, 1, []string{"prompt:Grade the assistant response using step-by-step reasoning against this rubric:\nCoherence."}},
		{"factuality", "      - type: factuality\n        value: Paris is the capital.\n", ModeDefault,
			[]string{`{"score": 1, "reasoning": "consistent"}`}, Pass, 1, 1,
			[]string{"prompt:factually consistent with these reference facts:\nParis is the capital.", "consistent"}},
		{"goal-success", "      - type: trajectory:goal-success\n        value: {goal: Find the capital}\n", ModeDefault,
			[]string{`{"score": 0.95}`}, Pass, 0.95, 1, []string{"prompt:[[ ## criteria ## ]]\nFind the capital"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load := LoadDefault
			if tt.mode == ModeAgentV {
				load = LoadAgentV
			}
			f, err := ParseMode("judge.yaml", []byte(head+tt.grader), load)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Cases) != 1 || len(f.Cases[0].Assertions) != 1 {
				t.Fatalf("parsed %+v", f.Cases)
			}
			j := &scriptJudge{answers: tt.answers}
			r := Evaluate(context.Background(), f.Cases[0], judgeTrajectory(), Options{Mode: tt.mode, Judge: j})
			a := r.Assertions[0]
			if a.Verdict != tt.verdict || !near(a.Score, tt.score) {
				t.Errorf("verdict %s score %v, want %s %v (reason %q, checks %+v)", a.Verdict, a.Score, tt.verdict, tt.score, a.Reason, a.Checks)
			}
			if len(j.prompts) != tt.calls || len(a.JudgeCalls) != tt.calls {
				t.Fatalf("%d judge calls (%d kept), want %d", len(j.prompts), len(a.JudgeCalls), tt.calls)
			}
			text := a.Reason + "\n" + a.Reasoning
			for _, c := range a.Checks {
				text += "\n" + c.Text + "\n" + c.Evidence
			}
			for _, w := range tt.want {
				switch {
				case strings.HasPrefix(w, "prompt:"):
					if !strings.Contains(j.prompts[0].User, w[7:]) {
						t.Errorf("user prompt lacks %q:\n%s", w[7:], j.prompts[0].User)
					}
				case strings.HasPrefix(w, "system:"):
					if !strings.Contains(j.prompts[0].System, w[7:]) {
						t.Errorf("system prompt lacks %q:\n%s", w[7:], j.prompts[0].System)
					}
				case !strings.Contains(text, w):
					t.Errorf("result lacks %q:\n%s", w, text)
				}
			}
			// Every call is kept with its prompt and raw answer.
			for i, c := range a.JudgeCalls {
				if c.Prompt.CaseID != "c" || c.Prompt.Attempt != i+1 || c.Prompt.User == "" {
					t.Errorf("call %d prompt %+v", i, c.Prompt)
				}
				if c.CallFailed == (c.Err == "") && !c.ParseError {
					t.Errorf("call %d: failed %v but err %q", i, c.CallFailed, c.Err)
				}
			}
			if last := a.JudgeCalls[len(a.JudgeCalls)-1]; a.Verdict == CouldNotRun && !last.CallFailed && (!last.ParseError || last.Reply.Text == "") {
				t.Errorf("unreadable answer not kept: %+v", last)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// Without a judge, judge graders are skipped with NoJudgeReason and the
// case is graded on the rest.
func TestEvalJudgeMissing(t *testing.T) {
	src := "tests:\n  - id: c\n    assertions:\n      - Names Paris.\n      - type: contains\n        value: Paris\n"
	f, err := Parse("j.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r := Evaluate(context.Background(), f.Cases[0], judgeTrajectory(), Options{})
	if r.Verdict != Pass || r.Assertions[0].Verdict != Skip || r.Assertions[0].Reason != NoJudgeReason {
		t.Errorf("%s %+v", r.Verdict, r.Assertions[0])
	}
}

// Judge graders that are badly written are reported at load with their
// position, not sent to a judge.
func TestEvalJudgeParseErrors(t *testing.T) {
	tests := []struct{ grader, want string }{
		{"      - type: rubric\n", "rubric grader needs rubrics:"},
		{"      - type: rubrics\n        criteria: []\n", "rubrics grader needs criteria:"},
		{"      - type: llm-rubric\n", "llm-rubric needs value:"},
		{"      - type: llm-grader\n        prompt: file://missing.md\n", "prompt file:"},
		{"      - type: rubric\n        rubrics:\n          - id: a\n            score_ranges: {0: bad, 11: good}\n", "score_ranges"},
		{"      - type: rubric\n        rubrics:\n          - id: a\n            score_ranges: [{score_range: [0, 5], outcome: x}]\n", "cover every score 0-10"},
		{"      - type: rubric\n        rubrics:\n          - {id: a, outcome: x, min_score: 2}\n", "min_score must be in (0, 1]"},
	}
	for _, tt := range tests {
		_, err := ParseMode("j.yaml", []byte("tests:\n  - id: c\n    assertions:\n"+tt.grader), LoadStrict)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "j.yaml:") {
			t.Errorf("%q: err %v, want %q", tt.grader, err, tt.want)
		}
	}
}
