package mcp

import (
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	long := strings.Repeat("x", stderrTail-2)
	cases := []struct {
		name   string
		writes []string
		want   string
	}{
		{"nothing", nil, ""},
		{"short", []string{"a\n", "b\n"}, "a\nb\n"},
		{"exactly full", []string{long, "ab"}, long + "ab"},
		{"overflow keeps the end", []string{long, "abcd"}, "…" + long[2:] + "abcd"},
		{"one huge write", []string{"head" + long + "tail"}, "…" + ("head" + long + "tail")[6:]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var tl tail
			for _, w := range tc.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := tl.String(); got != tc.want {
				t.Errorf("String() = %d bytes %.20q…, want %d bytes %.20q…", len(got), got, len(tc.want), tc.want)
			}
		})
	}
}
