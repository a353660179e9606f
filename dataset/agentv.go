package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/internal/yamlpos"
)

// TraceMetadataKey is the key of a test's metadata: map under which an
// exported case keeps the id of the trace it came from.
const TraceMetadataKey = "loupe_trace"

// DefaultCriteria is the criteria Export writes for a case without any
// (AgentV asks for one); Import reads it back as none.
const DefaultCriteria = "The agent handles the input as the assertions describe."

// yamlTest is one test of an exported file, keys in AgentV's order.
type yamlTest struct {
	ID             string            `yaml:"id"`
	Input          string            `yaml:"input"`
	Criteria       string            `yaml:"criteria,omitempty"`
	ExpectedOutput string            `yaml:"expected_output,omitempty"`
	Metadata       map[string]string `yaml:"metadata,omitempty"`
	Assertions     []yaml.MapSlice   `yaml:"assertions,omitempty"`
}

type yamlFile struct {
	Description string     `yaml:"description,omitempty"`
	Tests       []yamlTest `yaml:"tests"`
}

// Export writes cases as an AgentV eval file (the current tests: layout)
// that the agentv CLI and `loupe eval` both load: each case is a test with
// its id, input, criteria, expected_output, its trajectory as the first
// assertion (type tool-trajectory) and its other assertions as they are;
// the source trace is kept in metadata.loupe_trace. description heads the
// file. A case without criteria gets one, since AgentV asks for it.
func Export(w io.Writer, description string, cases []Case) error {
	f := yamlFile{Description: description, Tests: []yamlTest{}}
	for _, c := range cases {
		t := yamlTest{ID: c.ID, Input: c.Input, Criteria: c.Criteria, ExpectedOutput: c.ExpectedOutput}
		if t.Criteria == "" {
			t.Criteria = DefaultCriteria
		}
		if c.Trace != "" {
			t.Metadata = map[string]string{TraceMetadataKey: c.Trace}
		}
		if tr := c.Trajectory; tr != nil {
			a := yaml.MapSlice{{Key: "type", Value: string(eval.KindToolTrajectory)}}
			mode := tr.Mode
			if mode == "" {
				mode = string(eval.InOrder)
			}
			a = append(a, yaml.MapItem{Key: "mode", Value: mode})
			if !tr.ArgsMatch.IsZero() {
				a = append(a, yaml.MapItem{Key: "args_match", Value: tr.ArgsMatch.value()})
			}
			var exp []yaml.MapSlice
			for _, e := range tr.Expected {
				m := yaml.MapSlice{{Key: "tool", Value: e.Tool}}
				if e.Args != nil {
					m = append(m, yaml.MapItem{Key: "args", Value: integral(e.Args)})
				}
				if !e.ArgsMatch.IsZero() {
					m = append(m, yaml.MapItem{Key: "args_match", Value: e.ArgsMatch.value()})
				}
				exp = append(exp, m)
			}
			if exp == nil {
				exp = []yaml.MapSlice{}
			}
			a = append(a, yaml.MapItem{Key: "expected", Value: exp})
			t.Assertions = append(t.Assertions, a)
		}
		for _, a := range c.Assertions {
			t.Assertions = append(t.Assertions, typeFirst(a))
		}
		f.Tests = append(f.Tests, t)
	}
	out, err := yaml.MarshalWithOptions(f, yaml.IndentSequence(true), yaml.UseLiteralStyleIfMultiline(true))
	if err != nil {
		return fmt.Errorf("exporting the dataset as YAML: %w", err)
	}
	_, err = w.Write(out)
	return err
}

// typeFirst orders an assertion's keys with type first, the others sorted.
func typeFirst(a map[string]any) yaml.MapSlice {
	m := yaml.MapSlice{{Key: "type", Value: a["type"]}}
	keys := make([]string, 0, len(a))
	for k := range a {
		if k != "type" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		m = append(m, yaml.MapItem{Key: k, Value: a[k]})
	}
	return m
}

// EvalFile is the eval file Export writes for cases, parsed by package eval
// as `loupe eval` parses a file (LoadDefault), named path in messages. So
// a dataset is graded exactly as its exported file is.
func EvalFile(path, description string, cases []Case) (*eval.File, error) {
	var buf bytes.Buffer
	if err := Export(&buf, description, cases); err != nil {
		return nil, err
	}
	return eval.ParseMode(path, buf.Bytes(), eval.LoadDefault)
}

// MaxImportBytes bounds an imported eval file.
const MaxImportBytes = 16 << 20

// Import reads the cases of an AgentV eval file in the current layout
// (tests: with assertions: or assert:). The file is first parsed strictly
// by package eval, so a problem is reported with its file:line:column
// and a suggestion; then each test becomes a case: id, input (the user
// turns' text), criteria, expected_output (the reference answer), the
// first tool-trajectory assertion with expected calls as Trajectory, the
// other assertions as written, and metadata.loupe_trace as Trace. name
// names the file in messages.
func Import(name string, data []byte) ([]Case, error) {
	if len(data) > MaxImportBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than the limit of %d", name, len(data), MaxImportBytes)
	}
	f, err := eval.ParseMode(name, data, eval.LoadStrict)
	if err != nil {
		return nil, err
	}
	if f.Format != eval.FormatCurrent {
		return nil, fmt.Errorf("%s: the file uses AgentV's older evalcases: layout; datasets import the tests: layout (rewrite it with tests:, input: and assertions:)", name)
	}
	var raw struct {
		Tests []map[string]any `yaml:"tests"`
	}
	if err := decodeYAML(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(raw.Tests) != len(f.Cases) {
		return nil, fmt.Errorf("%s: %d tests read but %d parsed; the file is not plain YAML this importer reads", name, len(raw.Tests), len(f.Cases))
	}
	var cases []Case
	for i, pc := range f.Cases {
		rt := raw.Tests[i]
		c := Case{ID: pc.ID, Input: pc.Input, Criteria: pc.Criteria, ExpectedOutput: pc.Reference}
		if c.Criteria == DefaultCriteria {
			c.Criteria = ""
		}
		if md, ok := rt["metadata"].(map[string]any); ok {
			c.Trace, _ = md[TraceMetadataKey].(string)
		}
		list, _ := rt["assertions"].([]any)
		if list == nil {
			list, _ = rt["assert"].([]any)
		}
		for _, x := range list {
			a, ok := x.(map[string]any)
			if !ok {
				if s, ok := x.(string); ok {
					// A bare string is a rubric criterion.
					a = map[string]any{"type": "rubrics", "criteria": []any{s}}
				} else {
					return nil, fmt.Errorf("%s: test %s: an assertion is not a mapping", name, pc.ID)
				}
			}
			if c.Trajectory == nil {
				if tr, ok := trajectoryOf(a); ok {
					c.Trajectory = tr
					continue
				}
			}
			c.Assertions = append(c.Assertions, a)
		}
		cases = append(cases, c)
	}
	if err := CheckCases(cases); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return cases, nil
}

// trajectoryOf reads a tool-trajectory assertion with an expected list and
// nothing else Trajectory cannot hold.
func trajectoryOf(a map[string]any) (*Trajectory, bool) {
	typ, _ := a["type"].(string)
	if strings.ReplaceAll(typ, "_", "-") != string(eval.KindToolTrajectory) {
		return nil, false
	}
	for k := range a {
		switch k {
		case "type", "mode", "args_match", "expected":
		default:
			return nil, false
		}
	}
	t := &Trajectory{Expected: []ExpectedCall{}}
	t.Mode, _ = a["mode"].(string)
	var ok bool
	if t.ArgsMatch, ok = argsMatchOf(a["args_match"]); !ok {
		return nil, false
	}
	list, ok := a["expected"].([]any)
	if !ok {
		return nil, false
	}
	for _, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			return nil, false
		}
		var e ExpectedCall
		for k, v := range m {
			switch k {
			case "tool":
				e.Tool, ok = v.(string)
			case "args":
				e.Args, ok = v.(map[string]any)
			case "args_match":
				e.ArgsMatch, ok = argsMatchOf(v)
			default:
				ok = false
			}
			if !ok {
				return nil, false
			}
		}
		t.Expected = append(t.Expected, e)
	}
	return t, true
}

func argsMatchOf(v any) (ArgsMatch, bool) {
	switch x := v.(type) {
	case nil:
		return ArgsMatch{}, true
	case string:
		return ArgsMatch{Rule: x}, true
	case []any:
		var m ArgsMatch
		for _, f := range x {
			s, ok := f.(string)
			if !ok {
				return ArgsMatch{}, false
			}
			m.Fields = append(m.Fields, s)
		}
		return m, true
	}
	return ArgsMatch{}, false
}

// decodeYAML decodes data into v, turning a panic of the YAML library into
// an error.
func decodeYAML(data []byte, v any) (err error) {
	f, err := yamlpos.Parse(data)
	if err != nil {
		return err
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return errors.New("the file is empty")
	}
	defer func() {
		if p := recover(); p != nil {
			err = &yamlpos.PanicError{Value: p}
		}
	}()
	return yaml.NodeToValue(f.Docs[0].Body, v)
}

// integral returns v with every float64 that holds an integer made an
// int64, so that JSON numbers (always float64 once decoded) are written
// as 5 rather than 5.0.
func integral(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = integral(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = integral(e)
		}
		return out
	}
	return v
}
