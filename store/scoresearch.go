package store

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// A ScoreCond selects the traces that have a score of Name whose value
// stands in relation Op to the condition's value: score:NAME<OP>VALUE in
// the search language, Filter.Scores and Criteria.Scores otherwise. Any
// score of the trace (the whole trace's or a span's) may satisfy it.
type ScoreCond struct {
	Name string
	// Op is one of =, !=, <, <=, >, >=. The ordering operators compare
	// numbers (a boolean is 1 or 0) and never match a category.
	Op string
	// Value is the number compared (true is 1, false 0); Category the
	// label matched by = and != when the value is not a number.
	Value    float64
	Category string
}

// scoreOps in the order the parser tries them: the two-byte ones first.
var scoreOps = []string{"<=", ">=", "!=", "<", ">", "="}

// ParseScoreCond parses NAME<OP>VALUE (helpfulness<0.5, thumbs=false,
// label=good, helpfulness>=0.8). VALUE is true or false, a finite number,
// or, with = and !=, a category. The error is a *QueryError that says
// what to write.
func ParseScoreCond(s string) (ScoreCond, error) {
	c, err := parseScoreCond(s)
	if err != nil {
		return ScoreCond{}, &QueryError{Err: fmt.Errorf("query: score:%s: %w", s, err)}
	}
	return c, nil
}

func parseScoreCond(s string) (ScoreCond, error) {
	i := strings.IndexAny(s, "<>=!")
	if i < 0 {
		return ScoreCond{}, fmt.Errorf("want NAME<OP>VALUE with OP one of = != < <= > >= (score:helpfulness>=0.8, score:thumbs=true, score:label=good)")
	}
	var c ScoreCond
	c.Name = s[:i]
	for _, op := range scoreOps {
		if strings.HasPrefix(s[i:], op) {
			c.Op = op
			break
		}
	}
	if c.Op == "" {
		return ScoreCond{}, fmt.Errorf("%q is not an operator; use = != < <= > >=", s[i:i+1])
	}
	if err := checkScoreName(c.Name); err != nil {
		return ScoreCond{}, err
	}
	v := s[i+len(c.Op):]
	if v == "" {
		return ScoreCond{}, fmt.Errorf("no value after %s", c.Op)
	}
	switch v {
	case "true":
		c.Value = 1
		return c, nil
	case "false":
		return c, nil
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(n) && !math.IsInf(n, 0) {
		c.Value = n
		return c, nil
	}
	if c.Op != "=" && c.Op != "!=" {
		return ScoreCond{}, fmt.Errorf("%q is not a number; %s compares numbers (a category takes = or !=)", v, c.Op)
	}
	if len(v) > MaxScoreCategoryBytes || !isText(v) {
		return ScoreCond{}, fmt.Errorf("category is not text of at most %d bytes", MaxScoreCategoryBytes)
	}
	c.Category = v
	return c, nil
}

// String formats c as ParseScoreCond reads it.
func (c ScoreCond) String() string {
	if c.Category != "" {
		return c.Name + c.Op + c.Category
	}
	return c.Name + c.Op + strconv.FormatFloat(c.Value, 'g', -1, 64)
}

// validate checks a ScoreCond built in Go as ParseScoreCond checks one
// parsed: a valid name, a known operator, a finite value, a category of
// text only with = or !=.
func (c ScoreCond) validate() error {
	bad := func(format string, args ...any) error {
		return &QueryError{Err: fmt.Errorf("query: score:%s: "+format, append([]any{c.String()}, args...)...)}
	}
	if err := checkScoreName(c.Name); err != nil {
		return bad("%v", err)
	}
	switch c.Op {
	case "=", "!=":
	case "<", "<=", ">", ">=":
		if c.Category != "" {
			return bad("%s compares numbers; a category takes = or !=", c.Op)
		}
	default:
		return bad("%q is not an operator; use = != < <= > >=", c.Op)
	}
	if math.IsNaN(c.Value) || math.IsInf(c.Value, 0) {
		return bad("the value is not a finite number")
	}
	if len(c.Category) > MaxScoreCategoryBytes || !isText(c.Category) {
		return bad("category is not text of at most %d bytes", MaxScoreCategoryBytes)
	}
	return nil
}
