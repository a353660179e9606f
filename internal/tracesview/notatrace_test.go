package tracesview

import (
	"strings"
	"testing"
)

func TestNotATrace(t *testing.T) {
	for _, tc := range []struct {
		head, want string
	}{
		{"# eval\n$schema: agentv-eval-v2\nevalcases:\n  - id: a\n", "AgentV eval file ($schema, evalcases)"},
		{"description: d\nproviders:\n  - x\ntests:\n  - id: a\n", "AgentV eval file (tests, providers)"},
		{"servers:\n  g: builtin\npipeline:\n  - g.a\n", "pipeline definition (servers, pipeline)"},
		{"name: x\nhead:\n  model: m\narms:\n  - t\n", "FrankenAgent blueprint"},
		{"---\nfoo: 1\nbar: 2\n", "YAML file (top-level keys foo, bar)"},
		{`{"version": "v1", "tool_contracts": {}}`, "tool-contracts"},
		{"# Title\n\nSome text.\ntr: x\n", ""}, // Markdown
		{`{"v":1,"trace_id":"00"}`, ""},        // a trace
		{"", ""},
	} {
		got := notATrace([]byte(tc.head))
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("notATrace(%q) = %q, want it to contain %q", tc.head, got, tc.want)
		}
	}
}
