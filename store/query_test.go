package store

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

var qnow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestParseQuery(t *testing.T) {
	id := trace.TraceID{1, 2, 3}
	tests := []struct {
		in   string
		want Query
	}{
		{"", Query{}},
		{"free words", Query{Words: []string{"free", "words"}}},
		{`tool:search type:tool.error status:error model:gpt-4o tag:env:ci since:24h "exact phrase" free words`, Query{
			Filter: Filter{Status: "error", Since: qnow.Add(-24 * time.Hour), Tags: []string{"env:ci"}, Model: "gpt-4o", Tool: "search"},
			Types:  []trace.Type{trace.TypeToolError}, Phrases: []string{"exact phrase"}, Words: []string{"free", "words"},
		}},
		{`tool:"web search" name:main until:2025-01-02 min_duration:2s max_duration:7d has:errors`, Query{Filter: Filter{
			Tool: "web search", Name: "main", Until: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC),
			MinDuration: 2 * time.Second, MaxDuration: 7 * 24 * time.Hour, HasErrors: true}}},
		{"id:" + id.String() + " type:run.start type:run.end", Query{Filter: Filter{IDs: []trace.TraceID{id}}, Types: []trace.Type{trace.TypeRunStart, trace.TypeRunEnd}}},
		{`"a \"quoted\" word" 12:30 http://x`, Query{Phrases: []string{`a "quoted" word`}, Words: []string{"12:30"}}},
	}
	for _, tt := range tests {
		got, err := ParseQueryAt(tt.in, qnow)
		if tt.in == `"a \"quoted\" word" 12:30 http://x` {
			// http: looks like a key: an error, tested below.
			if err == nil {
				t.Errorf("ParseQuery(%q): want error for http:", tt.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseQuery(%q): %v", tt.in, err)
			continue
		}
		if !queryEqual(got, tt.want) {
			t.Errorf("ParseQuery(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseQueryErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"tol:search", `unknown filter "tol:" at column 1`},
		{"type:tool.oops", "unknown record type"},
		{"since:yesterday", "want a duration before now"},
		{"min_duration:-1s", "negative"},
		{"tool:a tool:b", "tool: given twice"},
		{`"open`, "not closed"},
		{"tool:", "has no value"},
		{"has:money", "only has:errors"},
		{"id:xyz", "want 32 hex digits"},
	}
	for _, tt := range tests {
		_, err := ParseQueryAt(tt.in, qnow)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseQuery(%q) error = %v, want it to contain %q", tt.in, err, tt.want)
		}
	}
}

// queryEqual compares queries, times by instant.
func queryEqual(a, b Query) bool {
	if !a.Since.Equal(b.Since) || !a.Until.Equal(b.Until) {
		return false
	}
	a.Since, a.Until, b.Since, b.Until = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		`tool:search type:tool.error status:error model:gpt-4o tag:env:ci since:24h "exact phrase" free words`,
		`tool:"web search" has:errors min_duration:1m30s`, `"a \"b\" c\\"`, "12:30 ü:x", `since:2025-01-02T03:04:05+01:00`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQueryAt(s, qnow)
		if err != nil {
			return
		}
		back, err := ParseQueryAt(q.String(), qnow)
		if err != nil {
			t.Fatalf("ParseQuery(%q).String() = %q does not parse: %v", s, q.String(), err)
		}
		if !queryEqual(q, back) {
			t.Fatalf("roundtrip of %q via %q:\n got %+v\nwant %+v", s, q.String(), back, q)
		}
	})
}
