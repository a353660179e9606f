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
