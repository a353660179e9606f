package eval

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ArgDiff is one difference between expected and actual arguments.
type ArgDiff struct {
	// Path is the dotted path of the argument, e.g. filter.city or tags[1].
	Path string
	// Problem is "missing" (expected, not in the call), "unexpected" (in
	// the call, not expected) or "changed" (both present, not equal).
	Problem  string
	Expected any
	Actual   any
}

// String renders the difference on one line.
func (d ArgDiff) String() string {
	switch d.Problem {
	case "missing":
		return fmt.Sprintf("%s: missing, expected %s", d.Path, render(d.Expected))
	case "unexpected":
		return fmt.Sprintf("%s: not expected, got %s", d.Path, render(d.Actual))
	}
	return fmt.Sprintf("%s: expected %s, got %s", d.Path, render(d.Expected), render(d.Actual))
}

// rule returns the effective argument rule for e under spec default def.
func (e ExpectedCall) rule(def ArgsMatch) ArgsMatch {
	if e.ArgsMatch != nil {
		return *e.ArgsMatch
	}
	if def.Rule == "" {
		return ArgsMatch{Rule: ArgsExact}
	}
	return def
}

// argsOK reports whether call c satisfies the arguments of e, with AgentV's
// rules (both modes share them): no expected args or `any` or ignore match
// everything; a call without recorded input matches nothing else.
func argsOK(e ExpectedCall, def ArgsMatch, c ToolCall) bool {
	if e.Args == nil || e.AnyArgs {
		return true
	}
	m := e.rule(def)
	if m.Rule == ArgsIgnore {
		return true
	}
	actual := c.input()
	if actual == nil {
		return false
	}
	switch m.Rule {
	case ArgsFields:
		return len(fieldDiffs(e.Args, actual, m.Fields)) == 0
	case ArgsSuperset:
		am, ok := actual.(map[string]any)
		if !ok {
			return false
		}
		for k, ev := range e.Args {
			av, has := am[k]
			if !has || !jsEqual(ev, av) {
				return false
			}
		}
		return true
	case ArgsSubset:
		switch a := actual.(type) {
		case map[string]any:
			for k, av := range a {
				ev, has := e.Args[k]
				if !has || !jsEqual(av, ev) {
					return false
				}
			}
			return true
		case string: // Object.keys of a string are its indices
			return a == ""
		case []any:
			return len(a) == 0
		}
		return true
	}
	return jsEqual(e.Args, actual)
}

// fieldDiffs compares the listed dotted fields of expected and actual, in
// the order given; a field that expected lacks is not checked, and one that
// actual lacks equals null (as in AgentV), so it differs only when null was
// not expected.
func fieldDiffs(expected map[string]any, actual any, fields []string) []ArgDiff {
	var out []ArgDiff
	for _, f := range fields {
		ev, ok := nested(expected, f)
		if !ok {
			continue
		}
		av, has := nested(actual, f)
		switch {
		case jsEqual(ev, av):
		case !has:
			out = append(out, ArgDiff{Path: f, Problem: "missing", Expected: ev})
		default:
			out = append(out, ArgDiff{Path: f, Problem: "changed", Expected: ev, Actual: av})
		}
	}
	return out
}

// nested follows a dotted path through maps.
func nested(v any, path string) (any, bool) {
	cur := v
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// jsEqual is AgentV's deepEqual over decoded JSON: numbers compare by value
// (so 5 equals 5.0), objects by key set and values, arrays element-wise.
func jsEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, has := y[k]
			if !has || !jsEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// argDiffs lists how call c's arguments differ from e under its rule, in
// stable (sorted path) order. It is empty when argsOK holds.
func argDiffs(e ExpectedCall, def ArgsMatch, c ToolCall) []ArgDiff {
	if argsOK(e, def, c) {
		return nil
	}
	actual := c.input()
	if actual == nil {
		return []ArgDiff{{Path: "(input)", Problem: "missing", Expected: e.Args}}
	}
	m := e.rule(def)
	var out []ArgDiff
	switch m.Rule {
	case ArgsFields:
		return fieldDiffs(e.Args, actual, m.Fields)
	case ArgsSuperset:
		diffValue("", e.Args, actual, true, false, &out)
	case ArgsSubset:
		diffValue("", e.Args, actual, false, true, &out)
	default:
		diffValue("", e.Args, actual, true, true, &out)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// diffValue records differences between expected and actual under path.
// missing/unexpected select which one-sided keys are reported at the top
// level; nested values are compared exactly.
func diffValue(path string, exp, act any, missing, unexpected bool, out *[]ArgDiff) {
	em, eok := exp.(map[string]any)
	am, aok := act.(map[string]any)
	if eok && aok {
		for k, ev := range em {
			av, has := am[k]
			p := join(path, k)
			switch {
			case !has && missing:
				*out = append(*out, ArgDiff{Path: p, Problem: "missing", Expected: ev})
			case has:
				diffValue(p, ev, av, true, true, out)
			}
		}
		if unexpected {
			for k, av := range am {
				if _, has := em[k]; !has {
					*out = append(*out, ArgDiff{Path: join(path, k), Problem: "unexpected", Actual: av})
				}
			}
		}
		return
	}
	ea, eok := exp.([]any)
	aa, aok := act.([]any)
	if eok && aok && len(ea) == len(aa) {
		for i := range ea {
			diffValue(path+"["+strconv.Itoa(i)+"]", ea[i], aa[i], true, true, out)
		}
		return
	}
	if !jsEqual(exp, act) {
		if path == "" {
			path = "(input)"
		}
		*out = append(*out, ArgDiff{Path: path, Problem: "changed", Expected: exp, Actual: act})
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
