package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseScoreFilters(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []ScoreCond
	}{
		{"score:helpfulness<0.5", []ScoreCond{{Name: "helpfulness", Op: "<", Value: 0.5}}},
		{"score:helpfulness>=0.8", []ScoreCond{{Name: "helpfulness", Op: ">=", Value: 0.8}}},
		{"score:thumbs=false score:thumbs!=true", []ScoreCond{{Name: "thumbs", Op: "=", Value: 0}, {Name: "thumbs", Op: "!=", Value: 1}}},
		{"score:label=good", []ScoreCond{{Name: "label", Op: "=", Category: "good"}}},
		{`score:"tone=very calm"`, []ScoreCond{{Name: "tone", Op: "=", Category: "very calm"}}},
		{"score:eval.pass=true score:a:b/c-d_e>-3", []ScoreCond{{Name: "eval.pass", Op: "=", Value: 1}, {Name: "a:b/c-d_e", Op: ">", Value: -3}}},
		{"score:x<=1e3 score:y=a=b", []ScoreCond{{Name: "x", Op: "<=", Value: 1000}, {Name: "y", Op: "=", Category: "a=b"}}},
	} {
		q, err := ParseQueryAt(tt.in, qnow)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if !queryEqual(q, Query{Filter: Filter{Scores: tt.want}}) {
			t.Errorf("%s: %+v, want %+v", tt.in, q.Scores, tt.want)
		}
		again, err := ParseQueryAt(q.String(), qnow)
		if err != nil || !queryEqual(again, q) {
			t.Errorf("%s: String() = %q reads back as %+v, %v", tt.in, q.String(), again.Scores, err)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"score:helpfulness", "want NAME<OP>VALUE"},
		{"score:<1", "name is empty"},
		{"score:a b<1", "want NAME<OP>VALUE"},
		{"score:x<", "no value after <"},
		{"score:x<good", `"good" is not a number`},
		{"score:x>NaN", `"NaN" is not a number`},
		{"score:x=1e999", ""}, // a category "1e999" (not a finite number)
		{"score:x!1", `"!" is not an operator`},
		{"score:bad name=1", "want NAME<OP>VALUE"},
		{"score:é=1", "use letters, digits"},
		{"score:x=" + strings.Repeat("a", MaxScoreCategoryBytes+1), "category is not text"},
	} {
		_, err := ParseQueryAt(tt.in, qnow)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.in, err)
			}
			continue
		}
		if !errors.As(err, new(*QueryError)) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want a *QueryError with %q", tt.in, err, tt.want)
		}
	}
}

func TestCriteriaScores(t *testing.T) {
	c := Criteria{Scores: []ScoreCond{{Name: "thumbs", Op: "=", Value: 1}}}
	f, err := c.Filter(time.Now())
	if err != nil || len(f.Scores) != 1 || f.Scores[0].Name != "thumbs" {
		t.Fatalf("Filter = %+v, %v", f.Scores, err)
	}
	q, err := c.Query(Query{Filter: Filter{Scores: []ScoreCond{{Name: "q", Op: "<", Value: 2}}}}, time.Now())
	if err != nil || len(q.Scores) != 2 {
		t.Fatalf("Query = %+v, %v", q.Scores, err)
	}
	for _, bad := range []ScoreCond{{Name: "x", Op: "~"}, {Name: "", Op: "="}, {Name: "x", Op: "<", Category: "a"}} {
		if _, err := (Criteria{Scores: []ScoreCond{bad}}).Filter(time.Now()); !errors.As(err, new(*QueryError)) {
			t.Errorf("%+v: %v, want a *QueryError", bad, err)
		}
	}
	many := Criteria{}
	for range MaxQueryTerms + 1 {
		many.Scores = append(many.Scores, ScoreCond{Name: "x", Op: "=", Value: 1})
	}
	if _, err := many.Filter(time.Now()); !errors.As(err, new(*QueryError)) {
		t.Errorf("%d score conditions: %v, want a *QueryError", len(many.Scores), err)
	}
}

func TestParseScoreValue(t *testing.T) {
	for _, tt := range []struct {
		kind ScoreKind
		in   string
		want Score
		err  bool
	}{
		{"", "true", Score{Kind: ScoreBoolean, Value: 1}, false},
		{"", "0.75", Score{Kind: ScoreNumeric, Value: 0.75}, false},
		{"", "good", Score{Kind: ScoreCategorical, Category: "good"}, false},
		{ScoreBoolean, "-", Score{Kind: ScoreBoolean}, false},
		{ScoreBoolean, "1", Score{Kind: ScoreBoolean, Value: 1}, false},
		{ScoreBoolean, "maybe", Score{}, true},
		{ScoreNumeric, "Inf", Score{}, true},
		{ScoreCategorical, "3", Score{Kind: ScoreCategorical, Category: "3"}, false},
		{ScoreCategorical, "", Score{}, true},
	} {
		var s Score
		err := ParseScoreValue(tt.kind, tt.in, &s)
		if (err != nil) != tt.err || err == nil && (s.Kind != tt.want.Kind || s.Value != tt.want.Value || s.Category != tt.want.Category) {
			t.Errorf("ParseScoreValue(%q, %q) = %+v, %v", tt.kind, tt.in, s, err)
		}
	}
}
