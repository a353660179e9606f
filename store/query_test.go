package store

import (
	"errors"
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
		{"name:a\x00b", "query holds a NUL byte"},
		{"\xff", "query is not valid UTF-8"},
	}
	for _, tt := range tests {
		_, err := ParseQueryAt(tt.in, qnow)
		var qe *QueryError
		if !errors.As(err, &qe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseQuery(%q) error = %v, want a *QueryError containing %q", tt.in, err, tt.want)
		}
	}
}

func TestParseQueryLimits(t *testing.T) {
	terms := func(n int, term string) string { return strings.TrimSpace(strings.Repeat(term+" ", n)) }
	for _, tt := range []struct {
		in   string
		want string // "" for no error
	}{
		{terms(MaxQueryTerms, "w"), ""},
		{terms(MaxQueryTerms, "tag:a"), ""},
		{terms(MaxQueryTerms-1, "w") + ` "a phrase"`, ""},
		{strings.Repeat("x", MaxQueryBytes), ""},
		{terms(MaxQueryTerms+1, "w"), "query: has more than 64 terms, the limit; narrow it down"},
		{terms(MaxQueryTerms, "tag:a") + ` ""`, "more than 64 terms"},
		{terms(500, "tag:a"), "more than 64 terms"},
		{strings.Repeat("x", MaxQueryBytes+1), "query: is 4097 bytes long, more than the limit of 4096"},
		{terms(5000, "w"), "bytes long"},
	} {
		q, err := ParseQueryAt(tt.in, qnow)
		if tt.want == "" {
			if err != nil {
				t.Errorf("ParseQuery(%.40q…) = %v, want no error", tt.in, err)
			} else if err := q.Validate(); err != nil {
				t.Errorf("ParseQuery(%.40q…) is beyond the limits: %v", tt.in, err)
			}
			continue
		}
		var qe *QueryError
		if !errors.As(err, &qe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseQuery(%.40q…) error = %v, want a *QueryError containing %q", tt.in, err, tt.want)
		}
	}
}

func TestFilterValidate(t *testing.T) {
	many := make([]string, MaxQueryTerms+1)
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"zero filter", (&Filter{}).Validate(), ""},
		{"tags at the limit", (&Filter{Tags: many[1:], WithoutTags: many[1:]}).Validate(), ""},
		{"tags", (&Filter{Tags: many}).Validate(), "filter: 65 tags are more than the limit of 64"},
		{"excluded tags", (&Filter{WithoutTags: many}).Validate(), "filter: 65 excluded tags are more than the limit of 64"},
		{"ids", (&Filter{IDs: make([]trace.TraceID, MaxFilterIDs+1)}).Validate(), "filter: 10001 trace ids are more than the limit of 10000"},
		{"list offset", (&ListQuery{Offset: -2}).Validate(), "offset -2 is negative"},
		{"list tags", (&ListQuery{Filter: Filter{Tags: many}}).Validate(), "filter: 65 tags are more than the limit of 64"},
		{"query tags", (&Query{Filter: Filter{Tags: many}}).Validate(), "filter: 65 tags are more than the limit of 64"},
		{"words", (&Query{Words: many[1:], Phrases: []string{"x"}}).Validate(), "query: 65 words and phrases are more than the limit of 64"},
		{"types", (&Query{Types: make([]trace.Type, MaxQueryTerms+1)}).Validate(), "query: 65 record types are more than the limit of 64"},
		{"text", (&Query{Words: []string{strings.Repeat("x", MaxQueryBytes)}, Phrases: []string{"y"}}).Validate(), "query: its words and phrases are 4097 bytes long, more than the limit of 4096"},
		{"NUL in a name", (&Filter{Name: "a\x00b"}).Validate(), `filter: name "a\x00b" is not valid UTF-8 text without NUL bytes`},
		{"invalid UTF-8 in a tag", (&Filter{WithoutTags: []string{"ok", "\xff"}}).Validate(), `filter: tag "\xff" is not valid UTF-8 text without NUL bytes`},
		{"query at the limits", (&Query{Words: []string{strings.Repeat("x", MaxQueryBytes)}, Types: make([]trace.Type, MaxQueryTerms)}).Validate(), ""},
	} {
		if tt.want == "" {
			if tt.err != nil {
				t.Errorf("%s: %v, want nil", tt.name, tt.err)
			}
			continue
		}
		var qe *QueryError
		if !errors.As(tt.err, &qe) || tt.err.Error() != tt.want {
			t.Errorf("%s: %v, want a *QueryError %q", tt.name, tt.err, tt.want)
		}
	}
	// Unwrap gives the reason.
	reason := errors.New("why")
	if err := error(&QueryError{Err: reason}); !errors.Is(err, reason) || err.Error() != "why" {
		t.Errorf("QueryError does not wrap its reason: %v", err)
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
		"score:helpfulness<0.5 score:thumbs=false", `score:label=good score:"a:b>=0.8" score:"tone!=very calm"`, "score:x>=1e15 score:y<=-2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQueryAt(s, qnow)
		if err != nil {
			if qe := (*QueryError)(nil); !errors.As(err, &qe) {
				t.Fatalf("ParseQuery(%q) error %v is a %T, not a *QueryError", s, err, err)
			}
			return
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("ParseQuery(%q) gave a query beyond the limits: %v", s, err)
		}
		if len(q.String()) > MaxQueryBytes {
			return // written longer than it was read (quotes, times): too long to read back
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
