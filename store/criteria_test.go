package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// stringPath is how criteria became a query before Criteria.Query: each
// criterion written as a term of a query string, quoted, appended to the
// free-text terms, and the whole parsed back with ParseQueryAt (it was
// tracesview.Criteria.Query). It is kept here only as the reference
// that the typed path is checked against.
func stringPath(c Criteria, terms []string, now time.Time) (Query, error) {
	quote := func(v string) string {
		if v != "" && !strings.ContainsAny(v, " \t\"\\") {
			return v
		}
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
	}
	parts := slices.Clone(terms)
	add := func(key, v string) {
		if v != "" {
			parts = append(parts, key+":"+quote(v))
		}
	}
	add("name", c.Name)
	add("status", c.Status)
	add("since", c.Since)
	add("until", c.Until)
	add("model", c.Model)
	add("tool", c.Tool)
	for _, t := range c.Tags {
		add("tag", t)
	}
	for _, t := range c.Types {
		add("type", string(t))
	}
	if c.Errors {
		add("has", "errors")
	}
	if c.MinDuration > 0 {
		add("min_duration", c.MinDuration.String())
	}
	if c.MaxDuration > 0 {
		add("max_duration", c.MaxDuration.String())
	}
	return ParseQueryAt(strings.Join(parts, " "), now)
}

// stringPathAgentRuns is the string path's AgentRuns (it was
// tracesview.Criteria.AgentRuns).
func stringPathAgentRuns(c Criteria, now time.Time) (Filter, error) {
	q, err := stringPath(c, nil, now)
	f := q.Filter
	if err == nil && !c.Evaluations && !slices.Contains(f.Tags, TagEvaluation) {
		f.WithoutTags = append(f.WithoutTags, TagEvaluation)
	}
	return f, err
}

// typedPath is what callers now do with a query text and criteria: parse
// the text, then narrow it with the criteria.
func typedPath(c Criteria, terms []string, now time.Time) (Query, error) {
	q, err := ParseQueryAt(strings.Join(terms, " "), now)
	if err != nil {
		return Query{}, err
	}
	return c.Query(q, now)
}

// criteriaCases are the inputs on which the typed and the string paths
// must agree: every criterion alone, with text, with the same filter in
// the text, with values that need quoting, and errors.
var criteriaCases = []struct {
	name  string
	c     Criteria
	terms []string
}{
	{"zero", Criteria{}, nil},
	{"zero with words", Criteria{}, []string{"battery", "life"}},
	{"zero with a phrase", Criteria{}, []string{`"long life"`}},
	{"name", Criteria{Name: "agent"}, nil},
	{"name with spaces", Criteria{Name: "my agent v2"}, nil},
	{"name with a tab", Criteria{Name: "a\tb"}, nil},
	{"name with quotes and backslashes", Criteria{Name: `say "hi" \ bye\`}, nil},
	{"name that is a quote", Criteria{Name: `"`}, nil},
	{"name with a colon", Criteria{Name: "ns:agent"}, nil},
	{"name like a filter", Criteria{Name: "tool:search"}, nil},
	{"name of spaces", Criteria{Name: "   "}, nil},
	{"name unicode", Criteria{Name: "agënt 東京"}, nil},
	{"status", Criteria{Status: "error"}, nil},
	{"status running", Criteria{Status: StatusRunning}, nil},
	{"since duration", Criteria{Since: "24h"}, nil},
	{"since days", Criteria{Since: "7d"}, nil},
	{"since minutes", Criteria{Since: "90m"}, nil},
	{"since date", Criteria{Since: "2026-01-02"}, nil},
	{"since RFC 3339", Criteria{Since: "2026-01-02T03:04:05Z"}, nil},
	{"since RFC 3339 nano offset", Criteria{Since: "2026-01-02T03:04:05.123456789+02:00"}, nil},
	{"until", Criteria{Until: "1h"}, nil},
	{"since and until", Criteria{Since: "7d", Until: "2026-11-30"}, nil},
	{"model", Criteria{Model: "gpt-4o"}, nil},
	{"model with a slash and spaces", Criteria{Model: "openai/gpt 4o"}, nil},
	{"tool", Criteria{Tool: "web search"}, nil},
	{"tag", Criteria{Tags: []string{"env:ci"}}, nil},
	{"tags", Criteria{Tags: []string{"env:ci", "team:a b", `q"uote`}}, nil},
	{"empty tags are ignored", Criteria{Tags: []string{"", "env:ci", ""}}, nil},
	{"evaluation tag", Criteria{Tags: []string{TagEvaluation}}, nil},
	{"types", Criteria{Types: []trace.Type{trace.TypeToolError, trace.TypeModelCall}}, nil},
	{"empty type is ignored", Criteria{Types: []trace.Type{""}}, nil},
	{"errors", Criteria{Errors: true}, nil},
	{"min duration", Criteria{MinDuration: 1500 * time.Millisecond}, nil},
	{"max duration", Criteria{MaxDuration: 10 * time.Minute}, nil},
	{"odd durations", Criteria{MinDuration: 1, MaxDuration: 36*time.Hour + 3*time.Nanosecond}, nil},
	{"negative durations are no bound", Criteria{MinDuration: -time.Second, MaxDuration: -1}, nil},
	{"evaluations", Criteria{Evaluations: true}, nil},
	{"evaluations and the tag", Criteria{Evaluations: true, Tags: []string{TagEvaluation}}, nil},
	{"everything", Criteria{Name: "n", Status: "error", Since: "24h", Until: "1h", Model: "m", Tool: "web search",
		Tags: []string{"env:ci"}, Errors: true, MinDuration: time.Second, MaxDuration: time.Hour,
		Types: []trace.Type{trace.TypeToolEnd}}, []string{"battery", `"long life"`}},
	{"text filters and criteria", Criteria{Tool: "calc", Tags: []string{"b"}, Types: []trace.Type{trace.TypeToolEnd}},
		[]string{"tag:a", "type:model.call", "model:gpt-4o", "id:0123456789abcdef0123456789abcdef", "has:errors", "word"}},
	{"the evaluation tag in the text", Criteria{}, []string{"tag:loupe:eval"}},
	{"terms with spaces inside", Criteria{}, []string{"exact phrase", "x"}},
	{"64 tags", Criteria{Tags: many(MaxQueryTerms, "t")}, nil},

	// Errors, the same as the string path's.
	{"bad since", Criteria{Since: "yesterday-ish"}, nil},
	{"bad until", Criteria{Until: "soon"}, nil},
	{"negative since", Criteria{Since: "-24h"}, nil},
	{"since of spaces", Criteria{Since: "  "}, nil},
	{"unknown type", Criteria{Types: []trace.Type{"teleport"}}, nil},
	{"unknown type with a space", Criteria{Types: []trace.Type{"tool end"}}, nil},
	{"name twice", Criteria{Name: "b"}, []string{"name:a"}},
	{"status twice", Criteria{Status: "error"}, []string{"status:success"}},
	{"since twice", Criteria{Since: "24h"}, []string{"since:7d"}},
	{"until twice", Criteria{Until: "1h"}, []string{"until:2026-01-01"}},
	{"model twice", Criteria{Model: "a"}, []string{"model:a"}},
	{"tool twice", Criteria{Tool: "a"}, []string{"tool:b"}},
	{"has twice", Criteria{Errors: true}, []string{"has:errors"}},
	{"min duration twice", Criteria{MinDuration: time.Second}, []string{"min_duration:2s"}},
	{"max duration twice", Criteria{MaxDuration: time.Second}, []string{"max_duration:2s"}},
	{"first error wins", Criteria{Name: "b", Since: "bad", Types: []trace.Type{"teleport"}}, []string{"name:a"}},
	{"text error first", Criteria{Since: "bad"}, []string{"colour:red"}},
	{"invalid UTF-8", Criteria{Name: "a\xffb"}, nil},
	{"NUL", Criteria{Tags: []string{"a\x00b"}}, nil},
	{"65 tags", Criteria{Tags: many(MaxQueryTerms+1, "t")}, nil},
	{"500 tags", Criteria{Tags: many(500, "t")}, nil},
	{"a huge since", Criteria{Since: strings.Repeat("a", 1<<20)}, nil},
}

func many(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// limitErrors are the cases whose error differs in words from the string
// path's: the typed path bounds the criteria, not a query string it
// would have written.
var limitErrors = map[string]string{
	"65 tags":      "more than 64 terms",
	"500 tags":     "more than 64 terms",
	"a huge since": "1048576 bytes long, more than the limit of 4096",
}

// TestCriteriaTypedIsStringPath: for every case, Query, Filter and
// AgentRuns give exactly what the string path gave, or the same error (a
// *QueryError), except for the words of the limit errors.
func TestCriteriaTypedIsStringPath(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	for _, tt := range criteriaCases {
		t.Run(tt.name, func(t *testing.T) {
			want, wantErr := stringPath(tt.c, tt.terms, now)
			got, err := typedPath(tt.c, tt.terms, now)
			sameResult(t, "Query", got, err, want, wantErr, tt.name)
			if len(tt.terms) > 0 {
				return
			}
			f, err := tt.c.Filter(now)
			sameResult(t, "Filter", f, err, want.Filter, wantErr, tt.name)
			wf, wantErr := stringPathAgentRuns(tt.c, now)
			f, err = tt.c.AgentRuns(now)
			sameResult(t, "AgentRuns", f, err, wf, wantErr, tt.name)
		})
	}
}

func sameResult[T any](t *testing.T, what string, got T, err error, want T, wantErr error, name string) {
	t.Helper()
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%s: error %v, the string path's %v", what, err, wantErr)
	}
	if err != nil {
		if !errors.As(err, new(*QueryError)) {
			t.Errorf("%s: error %v is a %T, want a *QueryError", what, err, err)
		}
		if words, ok := limitErrors[name]; ok {
			if !strings.Contains(err.Error(), words) || len(err.Error()) > 200 {
				t.Errorf("%s: error %.300q, want one saying %q", what, err, words)
			}
		} else if err.Error() != wantErr.Error() {
			t.Errorf("%s: error\n %q\nthe string path's\n %q", what, err, wantErr)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// TestCriteriaValuesAreValues: a value is taken whole, whatever it
// holds. The string path did not quote newlines and other Unicode spaces
// than space and tab, so that such a value split into a filter and free
// text (or failed as an unknown filter); the typed path has no string to
// split.
func TestCriteriaValuesAreValues(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, v := range []string{"a\nb", "a\rb", "a\u00a0b", "a\u2003b", "a\nbad:x", `a\"b`, "x:y z"} {
		c := Criteria{Name: v, Model: v, Tool: v, Status: v, Tags: []string{v}}
		q, err := c.Query(Query{}, now)
		if err != nil {
			t.Errorf("%q: %v", v, err)
			continue
		}
		if q.Name != v || q.Model != v || q.Tool != v || q.Status != v || !slices.Equal(q.Tags, []string{v}) || q.HasText() {
			t.Errorf("%q: query %+v", v, q)
		}
	}
}

// TestCriteriaQueryLeavesItsArgumentAlone: narrowing a query appends to
// copies of its lists, never into the caller's arrays.
func TestCriteriaQueryLeavesItsArgumentAlone(t *testing.T) {
	tags := make([]string, 1, 4)
	tags[0] = "a"
	types := make([]trace.Type, 1, 4)
	types[0] = trace.TypeToolEnd
	q := Query{Filter: Filter{Tags: tags}, Types: types}
	got, err := Criteria{Tags: []string{"b"}, Types: []trace.Type{trace.TypeModelCall}}.AgentRunsQuery(q, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tags, []string{"a", "b"}) || !slices.Equal(got.Types, []trace.Type{trace.TypeToolEnd, trace.TypeModelCall}) ||
		!slices.Equal(got.WithoutTags, []string{TagEvaluation}) {
		t.Errorf("query = %+v", got)
	}
	if tags[:2][1] != "" || types[:2][1] != "" || q.WithoutTags != nil {
		t.Errorf("the caller's arrays were written: tags %q types %q without %q", tags[:2], types[:2], q.WithoutTags)
	}
}

// TestEvaluationRule: AgentRuns and AgentRunsQuery leave out the traces
// that hold evaluation results unless asked for, by Evaluations or by the
// tag in the criteria or in the query; Filter and Query never do.
func TestEvaluationRule(t *testing.T) {
	now := time.Now()
	without := []string{TagEvaluation}
	for _, tt := range []struct {
		name    string
		c       Criteria
		q       Query
		without []string
	}{
		{"default", Criteria{}, Query{}, without},
		{"other tags", Criteria{Tags: []string{"env:ci"}}, Query{}, without},
		{"asked with Evaluations", Criteria{Evaluations: true}, Query{}, nil},
		{"asked with the tag", Criteria{Tags: []string{TagEvaluation}}, Query{}, nil},
		{"asked with the tag in the query", Criteria{}, Query{Filter: Filter{Tags: []string{TagEvaluation}}}, nil},
		{"other excluded tags are kept", Criteria{}, Query{Filter: Filter{WithoutTags: []string{"x"}}}, []string{"x", TagEvaluation}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, err := tt.c.AgentRunsQuery(tt.q, now)
			if err != nil || !slices.Equal(q.WithoutTags, tt.without) {
				t.Errorf("AgentRunsQuery: without %q, %v; want %q", q.WithoutTags, err, tt.without)
			}
			if len(tt.q.Tags) == 0 && len(tt.q.WithoutTags) == 0 {
				f, err := tt.c.AgentRuns(now)
				if err != nil || !slices.Equal(f.WithoutTags, tt.without) {
					t.Errorf("AgentRuns: without %q, %v; want %q", f.WithoutTags, err, tt.without)
				}
			}
			if q, _ := tt.c.Query(tt.q, now); !slices.Equal(q.WithoutTags, tt.q.WithoutTags) {
				t.Errorf("Query applied the rule: without %q", q.WithoutTags)
			}
			if f, _ := tt.c.Filter(now); f.WithoutTags != nil {
				t.Errorf("Filter applied the rule: without %q", f.WithoutTags)
			}
		})
	}
}

// TestCriteriaQueryValidates: the result is held to a store's limits
// (Query.Validate), so that criteria and text that together go beyond
// them are refused before a store is asked.
func TestCriteriaQueryValidates(t *testing.T) {
	q, err := ParseQueryAt(strings.Join(many(40, "tag:a"), " "), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Criteria{Tags: many(30, "b")}.Query(q, time.Now())
	if !errors.As(err, new(*QueryError)) || !strings.Contains(err.Error(), "70 tags are more than the limit of 64") {
		t.Errorf("error %v", err)
	}
}

// TestCriteriaTypedIsStringPathRandom compares the two paths on
// thousands of criteria and texts drawn from values that need quoting,
// look like filters, are empty or are wrong, in every combination.
func TestCriteriaTypedIsStringPathRandom(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(vs ...string) string {
		if r.IntN(3) > 0 {
			return "" // most criteria are not given
		}
		return vs[r.IntN(len(vs))]
	}
	texts := []string{"agent", "my agent", `say "hi"`, `back\slash`, "a:b", "tool:x", "\t", "  ", "ünï", `"`, "x\\"}
	whens := []string{"24h", "7d", "90m", "0s", "2026-01-02", "2026-01-02T03:04:05Z", "bad", "-1h", "1.5h", " 24h"}
	types := []string{"tool.end", "model.call", "run.start", "teleport", "Tool.End"}
	words := []string{"battery", `"long life"`, "name:a", "status:error", "since:24h", "until:1h", "model:m", "tool:t",
		"tag:x", "type:tool.error", "has:errors", "min_duration:1s", "max_duration:1h", "colour:red", `"open`, "x:y"}
	durs := []time.Duration{0, -time.Second, 1, time.Second, 1500 * time.Millisecond, 10 * time.Minute}
	for i := range 5000 {
		c := Criteria{
			Name: pick(texts...), Status: pick("error", "success", "running", "my status"),
			Since: pick(whens...), Until: pick(whens...), Model: pick(texts...), Tool: pick(texts...),
			Errors: r.IntN(4) == 0, MinDuration: durs[r.IntN(len(durs))], MaxDuration: durs[r.IntN(len(durs))],
			Evaluations: r.IntN(4) == 0,
		}
		for range r.IntN(3) {
			c.Tags = append(c.Tags, texts[r.IntN(len(texts))])
		}
		if r.IntN(5) == 0 {
			c.Tags = append(c.Tags, TagEvaluation)
		}
		for range r.IntN(3) {
			c.Types = append(c.Types, trace.Type(types[r.IntN(len(types))]))
		}
		var terms []string
		for range r.IntN(4) {
			terms = append(terms, words[r.IntN(len(words))])
		}
		name := fmt.Sprintf("case %d: %+v %q", i, c, terms)
		want, wantErr := stringPath(c, terms, now)
		got, err := typedPath(c, terms, now)
		if _, textErr := ParseQueryAt(strings.Join(terms, " "), now); textErr != nil {
			// A text that does not parse is refused for what is wrong
			// with it. The string path could not tell: an unclosed quote
			// took in the criteria written after it.
			if err == nil || err.Error() != textErr.Error() {
				t.Errorf("%s: error %v, want the text's %v", name, err, textErr)
			}
		} else {
			sameResult(t, name+": Query", got, err, want, wantErr, "")
		}
		wf, wantErr := stringPathAgentRuns(c, now)
		f, err := c.AgentRuns(now)
		sameResult(t, name+": AgentRuns", f, err, wf, wantErr, "")
	}
}
