package eval

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"syntax", "tests:\n  - id: a\n    assert: [\n", "bad.yaml:"},
		{"unknown type", "tests:\n  - id: a\n    assert:\n      - type: tool-trajectorie\n", "bad.yaml:4:15: unknown assertion type \"tool-trajectorie\""},
		{"bad mode", "tests:\n  - id: a\n    assert:\n      - type: tool-trajectory\n        mode: sometimes\n        expected: [{tool: x}]\n", "bad.yaml:5:15: invalid mode \"sometimes\""},
		{"unknown key", "tests:\n  - id: a\n    assert:\n      - type: tool-trajectory\n        mode: exact\n        expect: [{tool: x}]\n", "bad.yaml:6:9: unknown key \"expect\""},
		{"no id", "tests:\n  - assert: []\n", "bad.yaml:2:5: test case has no id"},
		{"no tests", "description: x\n", "no test cases"},
		{"bad args_match", "tests:\n  - id: a\n    assert:\n      - type: tool-trajectory\n        mode: exact\n        args_match: fuzzy\n        expected: [{tool: x}]\n", "bad.yaml:6:21: invalid args_match \"fuzzy\""},
		{"duplicate id", "tests:\n  - id: a\n    assert: [{type: is-json}]\n  - id: a\n    assert: [{type: is-json}]\n", "duplicate case id \"a\""},
		{"bad regex", "tests:\n  - id: a\n    assert:\n      - type: regex\n        value: \"(?<=x)\"\n", "regex does not compile"},
		{"any_order without minimums", "evalcases:\n  - id: a\n    execution:\n      evaluators:\n        - type: tool_trajectory\n          mode: any_order\n", "any_order mode needs minimums"},
		{"v2 expected_messages without calls", "evalcases:\n  - id: a\n    execution:\n      evaluators:\n        - type: expected_messages\n", "has no expected_messages with tool_calls"},
		{"min above max", "tests:\n  - id: a\n    assert:\n      - type: trajectory:tool-used\n        value: {name: s, min: 3, max: 1}\n", "max (1) is below min (3)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseReportsAllErrors(t *testing.T) {
	src := "tests:\n  - id: a\n    assert:\n      - type: nope\n      - type: contains\n"
	_, err := Parse("f.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "f.yaml:4:") || !strings.Contains(err.Error(), "f.yaml:5:") {
		t.Fatalf("want two located errors, got %v", err)
	}
}

func TestTranscriptErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bad json", "{\"test_id\":\"a\"}\n{nope\n", "t.jsonl:2:1: invalid transcript row"},
		{"no test id", "{\"role\":\"user\"}\n", "t.jsonl:1:1: transcript row has no test_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTranscript("t.jsonl", strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLoadModes(t *testing.T) {
	const src = `tests:
  - id: good
    assertions:
      - type: contains
        value: "42"
  - id: typo
    assertions:
      - type: tool-trajectory
        mode: in-order
        expected: [{tool: a}]
      - type: contains
        value: "42"
  - id: bad-key
    assertions:
      - type: contains
        valeu: "42"
  - id: bad-type
    assertions:
      - type: trajectory:tool-usd
        value: a
  - assertions: [{type: contains, value: x}]
`
	if _, err := Parse("s.yaml", []byte(src)); err == nil {
		t.Fatal("strict parse accepted the file")
	}
	f, err := ParseMode("s.yaml", []byte(src), LoadDefault)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"typo":     `s.yaml:9:15: invalid mode "in-order"; did you mean "in_order"?`,
		"bad-key":  `s.yaml:16:9: unknown key "valeu" for contains assertion; did you mean "value"?`,
		"bad-type": `s.yaml:19:15: unknown assertion type "trajectory:tool-usd"; did you mean "trajectory:tool-used"?`,
		"line-21":  `s.yaml:21:5: test case has no id`,
	}
	if len(f.Cases) != 5 {
		t.Fatalf("%d cases, want 5", len(f.Cases))
	}
	for _, c := range f.Cases {
		r := Evaluate(context.Background(), c, Trajectory{Output: "42"}, Options{})
		w, bad := want[c.ID]
		if !bad {
			if r.Verdict != Pass {
				t.Errorf("%s: %s\n%s", c.ID, r.Verdict, r.Explain())
			}
			continue
		}
		if r.Verdict == Pass {
			t.Errorf("%s passed with a grader that could not run", c.ID)
		}
		found := false
		for _, a := range r.Assertions {
			found = found || (a.Verdict == CouldNotRun && strings.HasPrefix(a.Reason, w))
		}
		if !found {
			t.Errorf("%s: no could-not-run grader with %q\n%s", c.ID, w, r.Explain())
		}
	}
	f, err = ParseMode("s.yaml", []byte(src), LoadAgentV)
	if err != nil {
		t.Fatal(err)
	}
	// typo's trajectory grader is dropped, bad-key's key ignored,
	// bad-type kept (it scores 0), the case without id dropped.
	if len(f.Cases) != 4 || len(f.Cases[1].Assertions) != 1 || !f.Cases[3].Assertions[0].Unknown {
		t.Fatalf("agentv load: %+v", f.Cases)
	}
	if len(f.Warnings) != 5 { // bad-key: the ignored key, and then contains without value is dropped
		t.Errorf("%d warnings, want 5: %v", len(f.Warnings), f.Warnings)
	}
}

// AgentV 4.42.4 skips a whole test whose grader has an invalid weight
// (observed with the real CLI: "Skipping test 'weight-string': Invalid
// weight … must be a number"); a missing value or threshold drops only
// that grader ("Skipping contains evaluator … missing value").
func TestAgentVSkipsTestOnBadWeight(t *testing.T) {
	const src = `tests:
  - id: weight-string
    assertions:
      - type: contains
        value: zebra
        weight: heavy
      - type: contains
        value: "42"
  - id: contains-no-value
    assertions:
      - type: contains
      - type: latency
      - type: contains
        value: "42"
`
	f, err := ParseMode("w.yaml", []byte(src), LoadAgentV)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) != 1 || f.Cases[0].ID != "contains-no-value" || len(f.Cases[0].Assertions) != 1 {
		t.Fatalf("cases %+v", f.Cases)
	}
	if len(f.Warnings) != 3 || !strings.Contains(f.Warnings[0].Error(), "w.yaml:6:17: weight must be a non-negative number, got heavy (test skipped") {
		t.Errorf("warnings %v", f.Warnings)
	}
	f, err = ParseMode("w.yaml", []byte(src), LoadDefault)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) != 2 || len(f.Cases[0].Assertions[0].Problems) != 1 {
		t.Errorf("default mode: %+v", f.Cases)
	}
}

// A grader AgentV 4.42.4 runs but Loupe does not implement cannot give
// AgentV's score: in --compat agentv it could not run (not a silent 0).
func TestAgentVOnlyGraderCouldNotRun(t *testing.T) {
	f, err := ParseMode("c.yaml", []byte("tests:\n  - id: c\n    assertions:\n      - type: field-accuracy\n        fields: [{path: a}]\n      - type: contains\n        value: \"42\"\n"), LoadAgentV)
	if err != nil {
		t.Fatal(err)
	}
	r := Evaluate(context.Background(), f.Cases[0], Trajectory{Output: "42"}, Options{Mode: ModeAgentV})
	if r.Verdict == Pass || r.Assertions[0].Verdict != CouldNotRun || !strings.Contains(r.Assertions[0].Reason, `c.yaml:4:15: Loupe does not implement AgentV's "field-accuracy" grader`) {
		t.Errorf("%s\n%s", r.Verdict, r.Explain())
	}
}

// Aliases share nodes, so a few lines can stand for 2^30 values ("billion
// laughs"); the file is refused at once instead of being expanded.
func TestAliasBombRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("x0: &a0 [1, 2]\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "x%d: &a%d [*a%d, *a%d]\n", i, i, i-1, i-1)
	}
	b.WriteString("tests: [{id: c, assertions: [{type: tool-trajectory, mode: exact, expected: [{tool: x, args: {k: *a29}}]}]}]\n")
	for _, load := range []LoadMode{LoadStrict, LoadDefault, LoadAgentV} {
		_, err := ParseMode("b.yaml", []byte(b.String()), load)
		if err == nil || !strings.Contains(err.Error(), "once its aliases (*name) are expanded") {
			t.Errorf("%s: %v", load, err)
		}
	}
	// Aliases of modest size are fine.
	if _, err := Parse("ok.yaml", []byte("x: &a {q: 1}\ntests: [{id: c, assertions: [{type: tool-trajectory, mode: exact, expected: [{tool: s, args: *a}, {tool: s, args: *a}]}]}]\n")); err != nil {
		t.Error(err)
	}
}
