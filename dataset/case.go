// Package dataset keeps evaluation datasets and experiments: named,
// versioned lists of AgentV eval cases, made from recorded runs or
// imported from AgentV eval files, kept in a store (store.Datasets) with
// immutable versions (NAME@VERSION), exported as AgentV eval files that
// the agentv CLI runs; and experiments, the stored outcome of running a
// dataset version against an agent configuration, compared case by case
// (regressions first) for people and for a CI gate.
//
// It is the library behind `loupe dataset`, `loupe eval --dataset`,
// `loupe experiments` and the collector's /api/v1/datasets and
// /api/v1/experiments endpoints. Its functions are safe for concurrent use;
// values it returns belong to the caller.
package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/eval/fromtrace"
	"github.com/loupe-dev/loupe/trace"
)

// Case is one evaluation case of a dataset, in the terms of an AgentV eval
// file's test: what the agent is asked, what a good answer is, the tool
// calls it is expected to make, and the graders. It remembers the trace
// it was made from. Its JSON form is what the store and the API hold.
type Case struct {
	// ID identifies the case within its dataset (letters, digits, '-',
	// '_', '.').
	ID string `json:"id"`
	// Input is the user's request.
	Input string `json:"input"`
	// Criteria is the expected outcome in prose (for a judge).
	Criteria string `json:"criteria,omitempty"`
	// ExpectedOutput is a reference answer (for a judge).
	ExpectedOutput string `json:"expected_output,omitempty"`
	// Trajectory is the expected tool trajectory, graded by a
	// tool-trajectory assertion; nil for none.
	Trajectory *Trajectory `json:"trajectory,omitempty"`
	// Assertions are further AgentV assertions (contains, regex,
	// llm-grader, …) as written in an eval file, each a map with a
	// "type".
	Assertions []map[string]any `json:"assertions,omitempty"`
	// Trace is the hex id of the trace the case was made from, if any.
	Trace string `json:"trace,omitempty"`
}

// Trajectory is an expected tool trajectory: the calls, in order, with
// argument matchers, and how actual calls are compared with them.
type Trajectory struct {
	// Mode is any_order, in_order, exact, subset or superset
	// (eval.SeqMode); "" means in_order.
	Mode string `json:"mode,omitempty"`
	// ArgsMatch is the default argument rule: exact, superset, subset,
	// ignore, or a list of dotted field paths; "" means exact.
	ArgsMatch ArgsMatch `json:"args_match,omitzero"`
	// Expected are the expected calls.
	Expected []ExpectedCall `json:"expected"`
}

// ExpectedCall is one expected tool call.
type ExpectedCall struct {
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// Args are the expected arguments; nil means not checked.
	Args map[string]any `json:"args,omitempty"`
	// ArgsMatch overrides the trajectory's rule for this call.
	ArgsMatch ArgsMatch `json:"args_match,omitzero"`
}

// ArgsMatch is an argument rule as AgentV writes it: a rule name
// ("exact", "superset", "subset", "ignore") or a list of dotted field
// paths compared alone. The zero value means the default.
type ArgsMatch struct {
	Rule   string
	Fields []string
}

// IsZero reports whether m is the default rule.
func (m ArgsMatch) IsZero() bool { return m.Rule == "" && len(m.Fields) == 0 }

// value is m as written in YAML or JSON.
func (m ArgsMatch) value() any {
	if len(m.Fields) > 0 {
		return m.Fields
	}
	return m.Rule
}

// MarshalJSON writes a rule name or a list of fields.
func (m ArgsMatch) MarshalJSON() ([]byte, error) {
	if m.IsZero() {
		return []byte(`""`), nil
	}
	return json.Marshal(m.value())
}

// UnmarshalJSON reads a rule name or a list of fields.
func (m *ArgsMatch) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*m = ArgsMatch{Rule: s}
		return nil
	}
	var f []string
	if err := json.Unmarshal(b, &f); err != nil {
		return errors.New("args_match: want a rule (exact, superset, subset, ignore) or a list of field paths")
	}
	*m = ArgsMatch{Fields: f}
	return nil
}

// Limits on a dataset's content, so that a request or a file cannot make
// one unbounded.
const (
	MaxCases      = 10000
	MaxInputBytes = 256 << 10
)

var caseIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Check reports the first problem with c: an id that is not a plain name,
// an input too long, an unknown trajectory mode or argument rule, an
// assertion without a type. Field names in messages are the JSON ones.
func (c *Case) Check() error {
	if !caseIDRE.MatchString(c.ID) {
		return fmt.Errorf("case id %q: want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", c.ID)
	}
	if len(c.Input) > MaxInputBytes || len(c.Criteria) > MaxInputBytes || len(c.ExpectedOutput) > MaxInputBytes {
		return fmt.Errorf("case %s: input, criteria or expected_output longer than %d bytes", c.ID, MaxInputBytes)
	}
	if t := c.Trajectory; t != nil {
		switch eval.SeqMode(t.Mode) {
		case "", eval.AnyOrder, eval.InOrder, eval.Exact, eval.Subset, eval.Superset:
		default:
			return fmt.Errorf("case %s: trajectory.mode %q: want in_order, exact, any_order, subset or superset", c.ID, t.Mode)
		}
		if err := checkRule(t.ArgsMatch); err != nil {
			return fmt.Errorf("case %s: trajectory.args_match: %w", c.ID, err)
		}
		for i, e := range t.Expected {
			if e.Tool == "" {
				return fmt.Errorf("case %s: trajectory.expected[%d].tool is empty: name the tool", c.ID, i)
			}
			if err := checkRule(e.ArgsMatch); err != nil {
				return fmt.Errorf("case %s: trajectory.expected[%d].args_match: %w", c.ID, i, err)
			}
		}
	}
	for i, a := range c.Assertions {
		if s, _ := a["type"].(string); s == "" {
			return fmt.Errorf("case %s: assertions[%d] has no type: write e.g. {type: contains, value: …}", c.ID, i)
		}
	}
	return nil
}

func checkRule(m ArgsMatch) error {
	switch eval.ArgsRule(m.Rule) {
	case "", eval.ArgsExact, eval.ArgsSuperset, eval.ArgsSubset, eval.ArgsIgnore:
		return nil
	}
	return fmt.Errorf("%q: want exact, superset, subset, ignore or a list of field paths", m.Rule)
}

// CheckCases checks every case and that ids are unique.
func CheckCases(cases []Case) error {
	if len(cases) > MaxCases {
		return fmt.Errorf("%d cases are more than the limit of %d", len(cases), MaxCases)
	}
	seen := map[string]bool{}
	for i := range cases {
		if err := cases[i].Check(); err != nil {
			return err
		}
		if seen[cases[i].ID] {
			return fmt.Errorf("case id %q is used twice: ids are unique within a dataset", cases[i].ID)
		}
		seen[cases[i].ID] = true
	}
	return nil
}

// FromTrace makes a case from one recorded run (its records, nested runs
// included): the input is the root run's input (else the first user
// message), the expected trajectory is the calls the run made, in order,
// with their arguments compared as a superset (extra arguments allowed),
// and Trace is the run's trace id. The id is the run's name and the first
// eight hex digits of its trace id. It is a starting point to edit: for a
// run that went wrong, the expected calls and the criteria are what it
// should have done.
func FromTrace(recs []trace.Record) Case {
	t := fromtrace.Trajectory(recs)
	var c Case
	name := "run"
	for i := range recs {
		r := &recs[i]
		if r.Type == trace.TypeRunStart && r.Depth == 0 {
			name = r.Name
			c.Input = valueText(r.Input)
			c.Trace = r.TraceID.String()
			break
		}
	}
	if c.Trace == "" && len(recs) > 0 {
		c.Trace = recs[0].TraceID.String()
	}
	if c.Input == "" {
		for _, m := range t.Messages {
			if m.Role == "user" {
				c.Input = m.Content
				break
			}
		}
	}
	c.ID = caseID(name, c.Trace)
	tr := &Trajectory{Mode: string(eval.InOrder), ArgsMatch: ArgsMatch{Rule: string(eval.ArgsSuperset)}, Expected: []ExpectedCall{}}
	for _, call := range t.Calls {
		tr.Expected = append(tr.Expected, ExpectedCall{Tool: call.Name, Args: call.Args})
	}
	c.Trajectory = tr
	return c
}

// caseID makes a case id from a run name and a trace id.
func caseID(name, traceID string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 100 {
			break
		}
	}
	id := strings.Trim(b.String(), "-._")
	if id == "" {
		id = "run"
	}
	if len(traceID) >= 8 {
		id += "-" + traceID[:8]
	}
	return id
}

// valueText is a recorded value as text: a JSON string itself, an object's
// "text", "input", "content" or "prompt" string field, else the JSON.
func valueText(v trace.Value) string {
	if len(v) == 0 {
		return ""
	}
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return string(v)
	}
	switch t := x.(type) {
	case string:
		return t
	case map[string]any:
		for _, k := range []string{"text", "input", "content", "prompt"} {
			if s, ok := t[k].(string); ok {
				return s
			}
		}
	}
	return string(v)
}

// merge appends add to cases; a case whose id is taken gets a suffix
// ("-2", "-3", …) so that adding never replaces a case.
func merge(cases, add []Case) []Case {
	out := slices.Clone(cases)
	ids := map[string]bool{}
	for _, c := range out {
		ids[c.ID] = true
	}
	for _, c := range add {
		id := c.ID
		for n := 2; ids[id]; n++ {
			id = fmt.Sprintf("%s-%d", c.ID, n)
		}
		c.ID = id
		ids[id] = true
		out = append(out, c)
	}
	return out
}
