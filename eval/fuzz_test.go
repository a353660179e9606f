package eval

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(realDir, "*.yaml"))
	paths = append(paths, "testdata/agentv-ref/cases.yaml")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("tests: [{id: a, assert: [{type: tool-trajectory, mode: exact, expected: [{tool: x, args: {a: &x 1, b: *x}}]}]}]"))
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte("tests: [{id: a, assert: [Names Paris., {type: rubric, rubrics: [{id: x, score_ranges: {0: a, 5: b}, min_score: 0.5}]}, {type: llm-grader, prompt: 'x {{output}}', rubrics: [{outcome: y, operator: bogus}]}, {type: g-eval}, {type: rubrics, criteria: [a, {id: b}]}]}]"))
	paths, _ = filepath.Glob("testdata/agentv-ref/*.yaml")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("tests: [{id: a, assert: [{type: trajectory:step-count, value: {pattern: '[', min: 1}}, {type: tool-trajectory, mode: in-order, maximums: 1}]}, {assert: 3}, {id: a}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, load := range []LoadMode{LoadStrict, LoadDefault, LoadAgentV} {
			file, err := ParseMode("fuzz.yaml", data, load)
			if err != nil || file == nil {
				continue
			}
			if load == LoadStrict && len(file.Warnings) > 0 {
				t.Fatalf("strict mode returned warnings: %v", file.Warnings)
			}
			mode := ModeDefault
			if load == LoadAgentV {
				mode = ModeAgentV
			}
			for _, c := range file.Cases {
				// Never run commands a mutated input names: the fuzzer could
				// write any command line. graderResult is fuzzed on its own.
				for i := range c.Assertions {
					c.Assertions[i].Script = nil
				}
				if load != LoadDefault && len(c.Problems) > 0 {
					t.Fatalf("%s mode kept a case with problems", load)
				}
				r := Evaluate(context.Background(), c, Trajectory{Calls: []ToolCall{{Name: "x"}}, Messages: []Message{{Role: "assistant", Content: "y"}}}, Options{Mode: mode,
					Judge: &scriptJudge{answers: []string{`{"score": 0.5, "checks": [{"id": "rubric-1", "satisfied": true, "score": 8, "reasoning": "r"}], "overall_reasoning": "o"}`}}})
				for _, a := range r.Assertions {
					if a.Verdict == CouldNotRun && r.Verdict == Pass {
						t.Fatalf("case %s passed with a grader that could not run", c.ID)
					}
				}
				_ = r.Explain()
			}
		}
	})
}

func FuzzParseTranscript(f *testing.F) {
	if b, err := os.ReadFile("testdata/agentv-ref/transcript.jsonl"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"test_id":"a","message_index":1e309,"tool_calls":[{"tool":"x","input":"s","duration_ms":-1e300}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		runs, err := ParseTranscript("fuzz.jsonl", bytes.NewReader(data))
		if err != nil {
			return
		}
		c := Case{ID: "c", Assertions: []Assertion{{Kind: KindToolTrajectory, Weight: 1, Trajectory: &TrajectorySpec{Mode: InOrder, Expected: []ExpectedCall{{Tool: "x", Args: map[string]any{"a": 1.0}}}}}}}
		for _, r := range runs {
			for _, m := range []Mode{ModeDefault, ModeAgentV} {
				_ = Evaluate(context.Background(), c, r.Trajectory, Options{Mode: m}).Explain()
			}
		}
	})
}

// FuzzGraderResult: whatever a code grader prints, reading it never
// panics, a score stays in [0,1], and a failed grader is not scored.
func FuzzGraderResult(f *testing.F) {
	f.Add(`{"score": 0.7, "assertions": [{"text": "a", "passed": true}]}`, "", 0)
	f.Add(`{"assertions": [{"text": "a", "passed": 1}, {"text": 2}, 3]}`, "", 0)
	f.Add(`{"score": "x"}`, "", 0)
	f.Add(`{"score": 1e309}`, "", 0)
	f.Add("[1,2]", "boom", 1)
	f.Add("plain", "", 3)
	f.Fuzz(func(t *testing.T, stdout, stderr string, exit int) {
		for _, agentv := range []bool{false, true} {
			var ar AssertionResult
			msg := graderResult(&ar, stdout, stderr, exit, agentv)
			if ar.Score < 0 || ar.Score > 1 || ar.Score != ar.Score {
				t.Fatalf("score %v out of [0,1]", ar.Score)
			}
			if msg != "" && (ar.Score != 0 || len(ar.Checks) != 0) {
				t.Fatalf("failed grader was scored: %q %+v", msg, ar)
			}
		}
	})
}

// FuzzJudgeAnswer: whatever a judge answers, reading it never panics, and
// an answer is either rejected (the grader could not run) or gives a score
// in [0,1] with a pass or fail verdict.
func FuzzJudgeAnswer(f *testing.F) {
	f.Add(`{"score": 0.9, "assertions": [{"text": "a", "passed": "yes"}]}`)
	f.Add("```json\n{\"checks\": [{\"id\": \"rubric-1\", \"satisfied\": true, \"reasoning\": \"r\"}], \"overall_reasoning\": \"o\"}\n```")
	f.Add(`{"checks": [{"id": "a", "score": 7}, {"id": "a", "score": 10.5}]}`)
	f.Add(`} {"score": 1} {`)
	f.Add(`{"score": 1e400}`)
	items := []RubricItem{{ID: "rubric-1", Outcome: "x", Weight: 1, Required: true}, {ID: "a", Weight: 0, ScoreRanges: []ScoreRange{{0, 10, "any"}}}}
	f.Fuzz(func(t *testing.T, text string) {
		for _, agentv := range []bool{false, true} {
			for _, read := range []func(*AssertionResult) error{
				func(ar *AssertionResult) error { return freeformGrade(ar, text, agentv) },
				func(ar *AssertionResult) error { return rubricGrade(ar, text, items, agentv) },
				func(ar *AssertionResult) error { return scoreRangeGrade(ar, text, items, agentv) },
			} {
				var ar AssertionResult
				if err := read(&ar); err != nil {
					continue
				}
				if ar.Score < 0 || ar.Score > 1 || ar.Score != ar.Score || (ar.Verdict != Pass && ar.Verdict != Fail) {
					t.Fatalf("answer %q read as score %v verdict %q", text, ar.Score, ar.Verdict)
				}
			}
		}
	})
}
