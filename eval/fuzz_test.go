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
				r := Evaluate(context.Background(), c, Trajectory{Calls: []ToolCall{{Name: "x"}}, Messages: []Message{{Role: "assistant", Content: "y"}}}, Options{Mode: mode})
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
