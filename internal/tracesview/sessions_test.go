package tracesview

import (
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/trace"
)

func TestValueText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{``, ``},
		{`"hello"`, `hello`},
		{`{"a":1}`, `{"a":1}`},
		{`[{"role":"user","parts":[{"type":"text","content":"Book a table"}]}]`, `Book a table`},
		{`[{"role":"system","content":"Be brief."},{"role":"user","content":"weather?"}]`, `weather?`},
		{`[{"role":"assistant","parts":[{"type":"tool_call","name":"x"}]}]`, `[{"role":"assistant","parts":[{"type":"tool_call","name":"x"}]}]`},
		{`[1,2]`, `[1,2]`},
	} {
		if got := valueText(trace.Value(tt.in)); got != tt.want {
			t.Errorf("valueText(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCell(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"conv-1", "conv-1"},
		{"a\tb", "a\uFFFDb"},
		{strings.Repeat("é", 40), strings.Repeat("é", cellWidth-1) + "…"},
		{strings.Repeat("x", cellWidth), strings.Repeat("x", cellWidth)},
	} {
		if got := cell(tt.in); got != tt.want {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
