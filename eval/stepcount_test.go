package eval

import (
	"context"
	"strings"
	"testing"
)

// trajectory:step-count and the list form of trajectory:tool-sequence, in
// the default mode, against one run of four calls and two answers.
func TestTrajectoryStepCount(t *testing.T) {
	run := Trajectory{
		Calls: []ToolCall{{Name: "search_web"}, {Name: "search_docs"}, {Name: "fetch"}, {Name: "bash"}},
		Messages: []Message{
			{Role: "user", Content: "q"}, {Role: "assistant", Content: "thinking"}, {Role: "assistant", Content: "done"},
		},
	}
	tests := []struct {
		name, value string
		score       float64
		problem     string // could not run, with this in the reason
	}{
		{"all steps within max", "{max: 6}", 1, ""},
		{"all steps over max", "{max: 5}", 0, ""},
		{"tools only", "{type: tool, min: 4, max: 4}", 1, ""},
		{"messages only", "{type: message, min: 3}", 0, ""},
		{"messages only, 2", "{type: message, min: 2, max: 2}", 1, ""},
		{"glob", "{type: tool, pattern: 'search_*', min: 2, max: 2}", 1, ""},
		{"glob by name key", "{name: 'search_*', max: 1}", 0, ""},
		{"glob no match, min 0", "{pattern: 'nope*', max: 0}", 1, ""},
		{"no bound", "{type: tool}", 0, "needs a minimum or maximum"},
		{"max below min", "{min: 3, max: 1}", 0, "max (1) is below min (3)"},
		{"fractional", "{min: 1.5}", 0, "whole number"},
		{"unrecorded type", "{type: command, min: 1}", 0, `type "command" is not recorded in Loupe traces; use tool`},
		{"type typo", "{type: tools, min: 1}", 0, `did you mean "tool"?`},
		{"bad glob", "{pattern: '[', min: 1}", 0, "glob"},
		{"not a mapping", "3", 0, "needs value"},
		{"unknown key", "{min: 1, maxx: 3}", 0, `did you mean "max"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "tests:\n  - id: c\n    assertions:\n      - type: trajectory:step-count\n        value: " + tt.value + "\n"
			f, err := ParseMode("s.yaml", []byte(src), LoadDefault)
			if err != nil {
				t.Fatal(err)
			}
			r := Evaluate(context.Background(), f.Cases[0], run, Options{})
			a := r.Assertions[0]
			if tt.problem != "" {
				if a.Verdict != CouldNotRun || !strings.Contains(a.Reason, tt.problem) {
					t.Errorf("verdict %s reason %q, want could not run with %q", a.Verdict, a.Reason, tt.problem)
				}
				return
			}
			if a.Verdict == CouldNotRun || a.Score != tt.score {
				t.Errorf("score %v verdict %s, want %v\n%s", a.Score, a.Verdict, tt.score, r.Explain())
			}
			if _, err := Parse("s.yaml", []byte(src)); err != nil {
				t.Errorf("strict parse: %v", err)
			}
		})
	}
	// AgentV 4.42.4 has no such grader: it scores 0.
	f, err := ParseMode("s.yaml", []byte("tests:\n  - id: c\n    assertions:\n      - type: trajectory:step-count\n        value: {max: 9}\n"), LoadAgentV)
	if err != nil {
		t.Fatal(err)
	}
	if r := Evaluate(context.Background(), f.Cases[0], run, Options{Mode: ModeAgentV}); r.Score != 0 {
		t.Errorf("agentv mode scored %v", r.Score)
	}
}

func TestToolSequenceList(t *testing.T) {
	run := Trajectory{Calls: []ToolCall{{Name: "a"}, {Name: "x"}, {Name: "b"}}}
	for value, want := range map[string]float64{"[a, b]": 1, "[b, a]": 0.5, "{mode: exact, steps: [a, x, b]}": 1} {
		f, err := Parse("s.yaml", []byte("tests:\n  - id: c\n    assertions:\n      - type: trajectory:tool-sequence\n        value: "+value+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if r := Evaluate(context.Background(), f.Cases[0], run, Options{}); r.Score != want {
			t.Errorf("%s: score %v, want %v\n%s", value, r.Score, want, r.Explain())
		}
	}
}

func TestToolUsedPattern(t *testing.T) {
	run := Trajectory{Calls: []ToolCall{{Name: "search_web"}, {Name: "search_docs"}, {Name: "fetch"}}}
	for value, want := range map[string]float64{
		"{pattern: 'search_*', min: 2}": 1, "{pattern: 'search_*', max: 1}": 0, "{pattern: 'f*'}": 1, "{pattern: 'x*'}": 0, "{name: fetch, max: 1}": 1,
	} {
		f, err := Parse("s.yaml", []byte("tests:\n  - id: c\n    assertions:\n      - type: trajectory:tool-used\n        value: "+value+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if r := Evaluate(context.Background(), f.Cases[0], run, Options{}); r.Score != want {
			t.Errorf("%s: score %v, want %v\n%s", value, r.Score, want, r.Explain())
		}
	}
	if _, err := Parse("s.yaml", []byte("tests:\n  - id: c\n    assertions:\n      - type: trajectory:tool-used\n        value: {pattern: '['}\n")); err == nil || !strings.Contains(err.Error(), "s.yaml:5:26: trajectory:tool-used pattern must be a glob") {
		t.Errorf("bad glob: %v", err)
	}
}
