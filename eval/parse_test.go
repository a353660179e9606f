package eval

import (
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
