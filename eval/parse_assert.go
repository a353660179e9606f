package eval

import (
	"fmt"
	"maps"
	"math"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

func (y *ynode) boolean() bool {
	if y == nil || y.kind != yscalar {
		return false
	}
	b, _ := y.val.(bool)
	return b
}

// commonKeys are accepted on every assertion.
var commonKeys = []string{"name", "metric", "type", "weight", "required", "min_score", "negate"}

// kindKeys lists the extra keys each kind accepts; a key outside the list is
// an error, so a typo is never silently ignored.
var kindKeys = map[Kind][]string{
	KindToolTrajectory:   {"mode", "minimums", "expected", "args_match", "argsMatch"},
	KindExpectedMessages: {},
	KindToolUsed:         {"value"},
	KindToolSequence:     {"value"},
	KindToolArgsMatch:    {"value"},
	KindStepCount:        {"value"},
	KindContains:         {"value"},
	KindIContains:        {"value"},
	KindContainsAny:      {"value"},
	KindContainsAll:      {"value"},
	KindIContainsAny:     {"value"},
	KindIContainsAll:     {"value"},
	KindRegex:            {"value", "flags"},
	KindEquals:           {"value"},
	KindStartsWith:       {"value"},
	KindEndsWith:         {"value"},
	KindIsJSON:           {},
	KindLatency:          {"threshold"},
	KindCost:             {"budget", "threshold"},
	KindTokenUsage:       {"max_total", "max_input", "max_output", "maxTotal", "maxInput", "maxOutput"},
	KindExecutionMetrics: {"max_tool_calls", "max_llm_calls", "max_tokens", "max_cost_usd", "max_duration_ms", "maxToolCalls", "maxLlmCalls", "maxTokens", "maxCostUsd", "maxDurationMs"},
}

// aliases maps accepted type spellings (after "_"→"-") to kinds.
var aliases = map[string]Kind{
	"tool-trajectory": KindToolTrajectory, "expected-messages": KindExpectedMessages,
	"trajectory:tool-used": KindToolUsed, "trajectory:tool-sequence": KindToolSequence,
	"trajectory:tool-args-match": KindToolArgsMatch, "trajectory:step-count": KindStepCount,
	"trajectory:goal-success": KindJudge,
	"contains-any":            KindContainsAny, "contains-all": KindContainsAll, "icontains-any": KindIContainsAny, "icontains-all": KindIContainsAll,
	"contains": KindContains, "icontains": KindIContains, "regex": KindRegex, "equals": KindEquals,
	"starts-with": KindStartsWith, "ends-with": KindEndsWith, "is-json": KindIsJSON,
	"latency": KindLatency, "cost": KindCost, "token-usage": KindTokenUsage, "execution-metrics": KindExecutionMetrics,
	"llm-grader": KindJudge, "llm-judge": KindJudge, "llm-rubric": KindJudge, "rubric": KindJudge, "rubrics": KindJudge,
	"g-eval": KindJudge, "factuality": KindJudge,
	"code-grader": KindScript, "code-judge": KindScript, "script": KindScript, "javascript": KindScript, "python": KindScript,
}

func typeNames() []string { return slices.Sorted(maps.Keys(aliases)) }

func knownTypes() string { return strings.Join(typeNames(), ", ") }

// tolerate decides, outside LoadStrict, what becomes of an assertion whose
// parse recorded probs: kept as could-not-run (LoadDefault); or, in
// LoadAgentV, kept with the bad keys ignored, kept as an unknown type that
// scores 0, or dropped, as AgentV 4.42.4 does. Each tolerated problem is
// a warning.
func (p *fileParser) tolerate(a Assertion, y *ynode, probs []*Error) (Assertion, bool) {
	raw, _ := y.get("type").str()
	if a.Name == "" {
		a.Name, _ = y.first("name", "metric").str()
	}
	if a.Name == "" {
		a.Name = raw
	}
	if a.Kind == "" {
		a.Kind = Kind(raw)
	}
	if w, ok := y.get("weight").num(); ok && w >= 0 && a.Weight == 1 {
		a.Weight = w
	}
	if r := y.get("required"); r != nil && !a.Required {
		if f, ok := r.num(); ok {
			a.Required, a.MinScore = true, &f
		} else {
			a.Required = r.boolean()
		}
	}
	if p.mode == LoadDefault {
		a.Problems = probs
		return a, true
	}
	keep, unknown := true, false
	for _, e := range probs {
		switch e.class {
		case errUnknownKey, errLenient:
		case errUnknownType:
			unknown = true
		case errDropTest:
			p.dropTest = append(p.dropTest, e)
			return a, false
		case errNotImplemented:
			a.Problems = probs
			return a, true
		default:
			keep = false
		}
	}
	switch {
	case unknown:
		for _, e := range probs {
			p.warn(e, "kept: scores 0 as in AgentV 4.42.4")
		}
		return Assertion{Name: a.Name, Kind: a.Kind, Weight: a.Weight, Pos: a.Pos, Unknown: true,
			Required: a.Required, MinScore: a.MinScore}, true
	case keep:
		for _, e := range probs {
			p.warn(e, "ignored, as AgentV 4.42.4 ignores it")
		}
		return a, true
	}
	for _, e := range probs {
		p.warn(e, "grader dropped, as AgentV 4.42.4 drops it")
	}
	return a, false
}

func (p *fileParser) assertionList(list *ynode, caseID string, expectedCalls []ExpectedCall) []Assertion {
	if list == nil || list.kind == ynull {
		return nil
	}
	if list.kind != yseq {
		p.errorf(list.pos, "assertions of case %q must be a list, got %s", caseID, list.describe())
		return nil
	}
	var out []Assertion
	rubric := -1 // bare strings are gathered into one judge assertion, as AgentV does
	for _, it := range list.items {
		if s, ok := it.str(); ok {
			s = strings.TrimSpace(s)
			if s == "" {
				p.errorf(it.pos, "empty criterion string in case %q; remove it or write the criterion", caseID)
				continue
			}
			if rubric < 0 {
				rubric = len(out)
				out = append(out, Assertion{Name: "rubrics", Kind: KindJudge, Weight: 0, Pos: it.pos, Judge: &JudgeSpec{Type: "rubrics"}})
			}
			// AgentV: one rubrics grader of weight = the number of
			// strings, each string a required item of weight 1.
			a := &out[rubric]
			a.Weight++
			a.Judge.Rubrics = append(a.Judge.Rubrics, RubricItem{ID: fmt.Sprintf("rubric-%d", len(a.Judge.Rubrics)+1), Outcome: s, Weight: 1, Required: true})
			continue
		}
		mark := len(p.errs)
		a, ok := p.assertion(it, caseID, expectedCalls)
		if p.mode != LoadStrict && len(p.errs) > mark {
			a, ok = p.tolerate(a, it, p.takeErrs(mark))
		}
		if ok {
			out = append(out, a)
		}
	}
	return out
}

func (p *fileParser) assertion(y *ynode, caseID string, expectedCalls []ExpectedCall) (Assertion, bool) {
	if y.kind != ymap {
		p.errorf(y.pos, "assertion must be a mapping with type:, or a criterion string; got %s", y.describe())
		return Assertion{}, false
	}
	tn := y.get("type")
	raw, ok := tn.str()
	if !ok || raw == "" {
		p.errorf(y.pos, "assertion has no type; add type: (one of %s)", knownTypes())
		return Assertion{}, false
	}
	a := Assertion{Pos: y.pos, Weight: 1}
	if p.mode == LoadAgentV {
		// AgentV normalizes only underscores; "not-" prefixes and Loupe's
		// aliases are types it does not register.
		t := strings.ReplaceAll(raw, "_", "-")
		if t == "code-judge" || t == "llm-judge" {
			p.classErrorf(errDeprecated, tn.pos, "grader type %q is deprecated in AgentV 4.42.4, which skips it; use %q", raw, strings.Replace(t, "-judge", "-grader", 1))
			return a, false
		}
		if agentVOnly[t] {
			p.classErrorf(errNotImplemented, tn.pos, "Loupe does not implement AgentV's %q grader, so it cannot give AgentV's score; remove it or port the check to a code-grader", raw)
			return a, false
		}
		if !agentVKinds[t] {
			p.classErrorf(errUnknownType, tn.pos, "AgentV 4.42.4 has no %q grader (Unknown grader type); it scores 0", raw)
			return a, false
		}
	}
	t := raw
	if strings.HasPrefix(t, "not-") {
		a.Negate, t = true, strings.TrimPrefix(t, "not-")
	}
	kind, ok := aliases[strings.ReplaceAll(t, "_", "-")]
	if !ok {
		p.classErrorf(errUnknownType, tn.pos, "unknown assertion type %q%s; known types: %s", raw, didYouMean(t, typeNames()), knownTypes())
		return a, false
	}
	a.Kind = kind
	a.Name, _ = y.first("name", "metric").str()
	if a.Name == "" && kind == KindJudge {
		a.Name = strings.ReplaceAll(t, "_", "-") // AgentV names a judge by its type: rubric, rubrics, llm-grader
	} else if a.Name == "" {
		a.Name = defaultName(kind, y)
	}
	if y.get("negate").boolean() {
		a.Negate = !a.Negate
	}
	if w := y.get("weight"); w != nil {
		// AgentV 4.42.4 skips the whole test on an invalid weight.
		if f, ok := w.num(); ok && f >= 0 && !math.IsInf(f, 0) {
			a.Weight = f
		} else {
			p.classErrorf(errDropTest, w.pos, "weight must be a non-negative number, got %s", valueText(w))
		}
	}
	if r := y.get("required"); r != nil {
		if f, ok := r.num(); ok {
			a.Required, a.MinScore = true, &f
		} else {
			a.Required = r.boolean()
		}
	}
	if m := y.get("min_score"); m != nil {
		if f, ok := m.num(); ok && f >= 0 && f <= 1 {
			a.MinScore = &f
		} else {
			p.errorf(m.pos, "min_score must be a number in [0,1], got %s", m.describe())
		}
	}
	if keys, checked := kindKeys[kind]; checked {
		p.checkKeys(y, kind, keys)
	}
	n := len(p.errs)
	switch kind {
	case KindToolTrajectory:
		a.Trajectory = p.trajectorySpec(y)
	case KindExpectedMessages:
		if len(expectedCalls) == 0 {
			p.errorf(y.pos, "expected_messages evaluator in case %q, but the case has no expected_messages with tool_calls; add them or remove the evaluator", caseID)
		}
		a.Trajectory = &TrajectorySpec{Mode: Exact, Expected: expectedCalls}
	case KindToolUsed:
		a.ToolUsed = p.toolUsed(y.get("value"), y.pos)
	case KindToolSequence:
		a.Trajectory = p.toolSequence(y.get("value"), y.pos)
	case KindToolArgsMatch:
		a.ArgsCheck = p.argsCheck(y.get("value"), y.pos)
	case KindStepCount:
		a.StepCount = p.stepCount(y.get("value"), y.pos)
	case KindContains, KindIContains, KindRegex, KindEquals, KindStartsWith, KindEndsWith:
		a.Text = p.textSpec(y, kind)
	case KindContainsAny, KindContainsAll, KindIContainsAny, KindIContainsAll:
		a.Text = p.textList(y, kind)
	case KindIsJSON:
		a.Text = &TextSpec{}
	case KindLatency, KindCost, KindTokenUsage, KindExecutionMetrics:
		a.Limits = p.limits(y, kind)
	case KindJudge:
		a.Judge = p.judgeSpec(y, strings.ReplaceAll(t, "_", "-"))
	case KindScript:
		a.Script = p.scriptSpec(y, raw)
	}
	return a, len(p.errs) == n
}

func defaultName(k Kind, y *ynode) string {
	if v, ok := y.get("value").str(); ok && len(v) <= 40 {
		return string(k) + "-" + v
	}
	return string(k)
}

func (p *fileParser) checkKeys(y *ynode, k Kind, extra []string) {
	for i, key := range y.keys {
		if contains(commonKeys, key) || contains(extra, key) {
			continue
		}
		allowed := append(append([]string{}, commonKeys...), extra...)
		p.classErrorf(errUnknownKey, y.kpos[i], "unknown key %q for %s assertion%s; allowed keys: %s", key, k, didYouMean(key, allowed), strings.Join(allowed, ", "))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var seqModes = []SeqMode{AnyOrder, InOrder, Exact, Subset, Superset}

func (p *fileParser) seqMode(y *ynode, def SeqMode) (SeqMode, bool) {
	if y == nil {
		if def == "" {
			return "", false
		}
		return def, true
	}
	s, _ := y.str()
	for _, m := range seqModes {
		if string(m) == s {
			return m, true
		}
	}
	var names []string
	for _, m := range seqModes {
		names = append(names, string(m))
	}
	p.errorf(y.pos, "invalid mode %q%s; use one of any_order, in_order, exact, subset, superset", scalarText(y), didYouMean(scalarText(y), names))
	return "", false
}

func (p *fileParser) trajectorySpec(y *ynode) *TrajectorySpec {
	mode, ok := p.seqMode(y.get("mode"), "")
	if !ok {
		if y.get("mode") == nil {
			p.errorf(y.pos, "tool-trajectory needs mode: (any_order, in_order, exact, subset or superset)")
		}
		return nil
	}
	s := &TrajectorySpec{Mode: mode}
	s.ArgsMatch = p.argsMatch(y.first("args_match", "argsMatch"), ArgsMatch{Rule: ArgsExact})
	if m := y.get("minimums"); m != nil {
		if m.kind != ymap {
			p.errorf(m.pos, "minimums must map tool names to counts, e.g. minimums: {search: 2}; got %s", m.describe())
		} else {
			for i, k := range m.keys {
				f, ok := m.vals[i].num()
				if !ok || f < 0 {
					p.classErrorf(errLenient, m.vals[i].pos, "minimum for %q must be a non-negative number, got %s", k, valueText(m.vals[i]))
					continue
				}
				s.Minimums = append(s.Minimums, Minimum{Tool: k, Count: f})
			}
		}
	}
	if e := y.get("expected"); e != nil {
		s.Expected = p.expectedList(e)
	}
	switch {
	case mode == AnyOrder && y.get("minimums") == nil && p.mode == LoadAgentV:
		p.errorf(y.pos, "any_order mode requires minimums in AgentV 4.42.4; add minimums: (tool: count)")
	case mode == AnyOrder && y.get("minimums") == nil && y.get("expected") == nil:
		p.errorf(y.pos, "any_order mode needs minimums: (tool: count) or expected: (list of {tool})")
	case mode != AnyOrder && y.get("expected") == nil:
		p.errorf(y.pos, "%s mode needs expected: (a list of {tool: name})", mode)
	}
	return s
}

func (p *fileParser) expectedList(e *ynode) []ExpectedCall {
	if e.kind != yseq {
		p.errorf(e.pos, "expected must be a list of {tool: name}, got %s", e.describe())
		return nil
	}
	var out []ExpectedCall
	for _, it := range e.items {
		if it.kind != ymap {
			p.classErrorf(errLenient, it.pos, "expected item must be a mapping like {tool: name}, got %s", it.describe())
			continue
		}
		p.checkItemKeys(it, "tool", "args", "args_match", "argsMatch", "max_duration_ms", "maxDurationMs")
		name, ok := it.get("tool").str()
		if !ok || name == "" {
			p.classErrorf(errLenient, it.pos, "expected item has no tool name; add tool: <name>")
			continue
		}
		ec := ExpectedCall{Tool: name, Pos: it.pos}
		p.expectedArgs(it.get("args"), &ec)
		if am := it.first("args_match", "argsMatch"); am != nil {
			m := p.argsMatch(am, ArgsMatch{Rule: ArgsExact})
			ec.ArgsMatch = &m
		}
		if md := it.first("max_duration_ms", "maxDurationMs"); md != nil {
			if f, ok := md.num(); ok && f >= 0 {
				d := time.Duration(f * float64(time.Millisecond))
				ec.MaxDuration = &d
			} else {
				p.classErrorf(errLenient, md.pos, "max_duration_ms must be a non-negative number of milliseconds, got %s", md.describe())
			}
		}
		out = append(out, ec)
	}
	return out
}

// nonNegative returns v as a number that is not negative, or reports at
// v's position that what must be one.
func (p *fileParser) nonNegative(v *ynode, what string) (float64, bool) {
	f, ok := v.num()
	if !ok || f < 0 {
		p.errorf(v.pos, "%s must be a non-negative number, got %s", what, v.describe())
		return 0, false
	}
	return f, true
}

func (p *fileParser) checkItemKeys(y *ynode, allowed ...string) {
	for i, k := range y.keys {
		if !contains(allowed, k) {
			p.classErrorf(errUnknownKey, y.kpos[i], "unknown key %q%s; allowed keys: %s", k, didYouMean(k, allowed), strings.Join(allowed, ", "))
		}
	}
}

func (p *fileParser) expectedArgs(a *ynode, ec *ExpectedCall) {
	if a == nil || a.kind == ynull {
		return
	}
	if s, ok := a.str(); ok && s == "any" {
		ec.AnyArgs = true
		return
	}
	if a.kind != ymap {
		p.classErrorf(errLenient, a.pos, "args must be a mapping of expected arguments or the word any, got %s", a.describe())
		return
	}
	ec.Args = a.value().(map[string]any)
}

func (p *fileParser) argsMatch(y *ynode, def ArgsMatch) ArgsMatch {
	if y == nil {
		return def
	}
	if y.kind == yseq {
		m := ArgsMatch{Rule: ArgsFields}
		for _, it := range y.items {
			if s, ok := it.str(); ok && s != "" {
				m.Fields = append(m.Fields, s)
			} else {
				p.errorf(it.pos, "args_match field list must hold dotted paths like query or filter.city, got %s", it.describe())
			}
		}
		if len(m.Fields) == 0 {
			p.errorf(y.pos, "args_match field list is empty; list the argument paths to compare")
		}
		return m
	}
	s, _ := y.str()
	switch ArgsRule(s) {
	case ArgsExact, ArgsSuperset, ArgsSubset, ArgsIgnore:
		return ArgsMatch{Rule: ArgsRule(s)}
	}
	p.classErrorf(errLenient, y.pos, "invalid args_match %q%s; use exact, superset, subset, ignore, or a list of argument paths", scalarText(y), didYouMean(scalarText(y), []string{"exact", "superset", "subset", "ignore"}))
	return def
}

func (p *fileParser) toolUsed(v *ynode, at Position) *ToolUsedSpec {
	s := &ToolUsedSpec{Min: 1}
	switch {
	case v == nil:
		p.errorf(at, "trajectory:tool-used needs value: a tool name, a list of names, or {name, min, max}")
		return nil
	case v.kind == yscalar:
		name, ok := v.str()
		if !ok || name == "" {
			p.errorf(v.pos, "tool name must be a string")
			return nil
		}
		s.Tools = []string{name}
	case v.kind == yseq:
		for _, it := range v.items {
			if name, ok := it.str(); ok && name != "" {
				s.Tools = append(s.Tools, name)
			} else {
				p.errorf(it.pos, "tool name must be a string, got %s", it.describe())
			}
		}
	case v.kind == ymap:
		p.checkItemKeys(v, "name", "pattern", "min", "max")
		name, ok := v.get("name").str()
		if pt := v.get("pattern"); pt != nil {
			str, sok := pt.str()
			if _, err := path.Match(str, ""); !sok || str == "" || err != nil {
				p.errorf(pt.pos, "trajectory:tool-used pattern must be a glob like search_*, got %s", valueText(pt))
				return nil
			}
			name, ok, s.Glob = str, true, true
		}
		if !ok || name == "" {
			p.errorf(v.pos, "trajectory:tool-used value needs name: <tool> (or pattern: <glob>)")
			return nil
		}
		s.Tools = []string{name}
		if m := v.get("min"); m != nil {
			s.Min, _ = p.nonNegative(m, "min")
		}
		if m := v.get("max"); m != nil {
			if f, ok := p.nonNegative(m, "max"); ok {
				s.Max = &f
			}
		}
		if s.Max != nil && *s.Max < s.Min {
			p.errorf(v.pos, "max (%v) is below min (%v); raise max or lower min", *s.Max, s.Min)
		}
	default:
		p.errorf(v.pos, "trajectory:tool-used value must be a name, a list or {name, min, max}")
		return nil
	}
	return s
}

// stepTypes are the step types trajectory:step-count can count in a Loupe
// trajectory.
var stepTypes = []string{"tool", "message"}

func (p *fileParser) stepCount(v *ynode, at Position) *StepCountSpec {
	if v == nil || v.kind != ymap {
		p.errorf(at, "trajectory:step-count needs value: {type: tool|message, pattern: <glob>, min: N, max: N}")
		return nil
	}
	p.checkItemKeys(v, "type", "pattern", "name", "min", "max")
	s := &StepCountSpec{}
	if t := v.get("type"); t != nil {
		str, _ := t.str()
		if !contains(stepTypes, str) {
			p.errorf(t.pos, "trajectory:step-count type %q is not recorded in Loupe traces%s; use tool (tool calls) or message (assistant messages), or leave it out to count both", scalarText(t), didYouMean(scalarText(t), stepTypes))
			return nil
		}
		s.Type = str
	}
	if pt := v.first("pattern", "name"); pt != nil {
		str, ok := pt.str()
		if _, err := path.Match(str, ""); !ok || err != nil {
			p.errorf(pt.pos, "trajectory:step-count pattern must be a glob like search_* , got %s", pt.describe())
			return nil
		}
		s.Pattern = str
	}
	for _, b := range []struct {
		key string
		dst **float64
	}{{"min", &s.Min}, {"max", &s.Max}} {
		if n := v.get(b.key); n != nil {
			f, ok := n.num()
			if !ok || f < 0 || f != math.Trunc(f) {
				p.errorf(n.pos, "trajectory:step-count %s must be a whole number of steps, got %s", b.key, n.describe())
				return nil
			}
			*b.dst = &f
		}
	}
	switch {
	case s.Min == nil && s.Max == nil:
		p.errorf(v.pos, "trajectory:step-count needs a minimum or maximum: add min: N or max: N")
		return nil
	case s.Min != nil && s.Max != nil && *s.Max < *s.Min:
		p.errorf(v.pos, "trajectory:step-count max (%v) is below min (%v); raise max or lower min", *s.Max, *s.Min)
		return nil
	}
	return s
}

func (p *fileParser) toolSequence(v *ynode, at Position) *TrajectorySpec {
	if v != nil && v.kind == yseq { // a bare list of steps: in order
		v = &ynode{kind: ymap, pos: v.pos, keys: []string{"steps"}, kpos: []Position{v.pos}, vals: []*ynode{v}}
	}
	if v == nil || v.kind != ymap {
		p.errorf(at, "trajectory:tool-sequence needs value: {mode: in_order|exact, steps: [tool, ...]}")
		return nil
	}
	p.checkItemKeys(v, "mode", "steps", "args_match")
	mode, ok := p.seqMode(v.get("mode"), InOrder)
	if !ok {
		return nil
	}
	s := &TrajectorySpec{Mode: mode, ArgsMatch: p.argsMatch(v.get("args_match"), ArgsMatch{Rule: ArgsExact})}
	steps := v.get("steps")
	if steps == nil || steps.kind != yseq {
		p.errorf(v.pos, "trajectory:tool-sequence needs steps: a list of tool names or {tool, args}")
		return nil
	}
	for _, it := range steps.items {
		if name, ok := it.str(); ok && name != "" {
			s.Expected = append(s.Expected, ExpectedCall{Tool: name, Pos: it.pos})
			continue
		}
		s.Expected = append(s.Expected, p.expectedList(&ynode{kind: yseq, pos: it.pos, items: []*ynode{it}})...)
	}
	return s
}

func (p *fileParser) argsCheck(v *ynode, at Position) *ArgsCheckSpec {
	if v == nil || v.kind != ymap {
		p.errorf(at, "trajectory:tool-args-match needs value: {name, args, mode: partial|exact}")
		return nil
	}
	p.checkItemKeys(v, "name", "args", "mode")
	name, ok := v.get("name").str()
	if !ok || name == "" {
		p.errorf(v.pos, "trajectory:tool-args-match value needs name: <tool>")
		return nil
	}
	s := &ArgsCheckSpec{Tool: name, Match: ArgsMatch{Rule: ArgsExact}}
	args := v.get("args")
	if args == nil || args.kind != ymap {
		p.errorf(v.pos, "trajectory:tool-args-match value needs args: a mapping of expected arguments")
		return nil
	}
	s.Args = args.value().(map[string]any)
	if m := v.get("mode"); m != nil {
		switch str, _ := m.str(); str {
		case "partial":
			s.Match = ArgsMatch{Rule: ArgsSuperset}
		case "exact":
		default:
			p.errorf(m.pos, "invalid mode %q for tool-args-match; use partial or exact", scalarText(m))
		}
	}
	return s
}

func (p *fileParser) textSpec(y *ynode, k Kind) *TextSpec {
	v := y.get("value")
	s, ok := v.str()
	if !ok {
		p.errorf(y.pos, "%s needs value: a string (quote numbers, e.g. value: \"42\")", k)
		return nil
	}
	t := &TextSpec{Value: s}
	if k == KindRegex {
		t.Flags, _ = y.get("flags").str()
		if _, err := compileRegex(s, t.Flags); err != nil {
			p.errorf(v.pos, "regex does not compile: %v; Loupe uses RE2 syntax (no lookarounds or backreferences)", err)
			return nil
		}
	}
	return t
}

// compileRegex compiles pattern with JavaScript-style flags (i, m, s; g and
// u are accepted and ignored).
func compileRegex(pattern, flags string) (*regexp.Regexp, error) {
	prefix := ""
	for _, f := range flags {
		switch f {
		case 'i', 'm', 's':
			prefix += string(f)
		case 'g', 'u', 'y':
		default:
			return nil, fmt.Errorf("unknown regex flag %q", f)
		}
	}
	if prefix != "" {
		pattern = "(?" + prefix + ")" + pattern
	}
	return regexp.Compile(pattern)
}

func (p *fileParser) limits(y *ynode, k Kind) *LimitSpec {
	l := &LimitSpec{}
	num := func(dst **float64, keys ...string) {
		v := y.first(keys...)
		if v == nil {
			return
		}
		if f, ok := p.nonNegative(v, keys[0]); ok {
			*dst = &f
		}
	}
	switch k {
	case KindLatency:
		num(&l.MaxDurationMs, "threshold")
		if l.MaxDurationMs == nil {
			p.errorf(y.pos, "latency needs threshold: <milliseconds>")
		}
	case KindCost:
		num(&l.MaxCostUSD, "budget", "threshold")
		if l.MaxCostUSD == nil {
			p.errorf(y.pos, "cost needs budget: <US dollars>")
		}
	case KindTokenUsage:
		num(&l.MaxTotal, "max_total", "maxTotal")
		num(&l.MaxInput, "max_input", "maxInput")
		num(&l.MaxOutput, "max_output", "maxOutput")
		if l.MaxTotal == nil && l.MaxInput == nil && l.MaxOutput == nil {
			p.errorf(y.pos, "token-usage needs at least one of max_total, max_input, max_output")
		}
	case KindExecutionMetrics:
		num(&l.MaxToolCalls, "max_tool_calls", "maxToolCalls")
		num(&l.MaxLLMCalls, "max_llm_calls", "maxLlmCalls")
		num(&l.MaxTokens, "max_tokens", "maxTokens")
		num(&l.MaxCostUSD, "max_cost_usd", "maxCostUsd")
		num(&l.MaxDurationMs, "max_duration_ms", "maxDurationMs")
		if *l == (LimitSpec{}) {
			p.errorf(y.pos, "execution-metrics needs at least one of max_tool_calls, max_llm_calls, max_tokens, max_cost_usd, max_duration_ms")
		}
	}
	return l
}

// scriptKeys are the keys of a code-grader that are not passed to the
// command in its config (AgentV 4.42.4's list).
var scriptKeys = []string{"name", "type", "command", "script", "cwd", "weight", "target", "config", "preprocessors", "required", "min_score", "negate", "metric"}

// scriptSpec reads a code-grader as AgentV 4.42.4 does: command (or the
// older script) is an argv list, or a string run with sh -lc; cwd is
// relative to the eval file's directory, which is also the default; every
// other key, merged under config:, is passed to the command as config.
func (p *fileParser) scriptSpec(y *ynode, raw string) *ScriptSpec {
	if t := strings.TrimPrefix(raw, "not-"); t == "javascript" || t == "python" {
		p.errorf(y.pos, "%s assertions hold inline code, which Loupe does not run; write the check as a script and use type: code-grader with command: [python3, check.py]", t)
		return nil
	}
	c := y.first("command", "script")
	s := &ScriptSpec{}
	switch {
	case c == nil || c.kind == ynull:
		p.errorf(y.pos, "code-grader needs command: the grader to run, e.g. command: [python3, grader.py]")
		return nil
	case c.kind == yseq:
		for _, it := range c.items {
			str, ok := it.str()
			if !ok || str == "" {
				p.errorf(it.pos, "code-grader command items must be non-empty strings, got %s", it.describe())
				return nil
			}
			s.Command = append(s.Command, str)
		}
		if len(s.Command) == 0 {
			p.errorf(c.pos, "code-grader command is an empty list; give the program and its arguments")
			return nil
		}
	default:
		str, ok := c.str()
		if !ok || strings.TrimSpace(str) == "" {
			p.errorf(c.pos, "code-grader command must be a list of arguments or a shell command string, got %s", c.describe())
			return nil
		}
		s.Command = []string{"sh", "-lc", strings.TrimSpace(str)}
	}
	dir := filepath.Dir(p.name)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	s.Dir = dir
	if cw := y.get("cwd"); cw != nil {
		str, ok := cw.str()
		if !ok || str == "" {
			p.errorf(cw.pos, "code-grader cwd must be a directory path, got %s", cw.describe())
			return nil
		}
		if !filepath.IsAbs(str) {
			str = filepath.Join(dir, str)
		}
		s.Dir = str
	}
	cfg := map[string]any{}
	for i, k := range y.keys {
		if !contains(scriptKeys, k) {
			cfg[k] = y.vals[i].value()
		}
	}
	if m := y.get("config"); m != nil && m.kind == ymap {
		for k, v := range m.value().(map[string]any) {
			cfg[k] = v
		}
	}
	if len(cfg) > 0 {
		s.Config = cfg
	}
	return s
}

// valueText shows a scalar as written, or describes a collection.
func valueText(y *ynode) string {
	if t := scalarText(y); t != "" {
		return t
	}
	return y.describe()
}

// textList reads the value of contains-any / contains-all (and their i-
// forms): a non-empty list of strings, as AgentV 4.42.4 requires.
func (p *fileParser) textList(y *ynode, k Kind) *TextSpec {
	v := y.get("value")
	if v == nil || v.kind != yseq || len(v.items) == 0 {
		p.errorf(y.pos, "%s needs value: a non-empty list of strings, e.g. value: [\"42\", \"forty-two\"]", k)
		return nil
	}
	t := &TextSpec{}
	for _, it := range v.items {
		s, ok := it.str()
		if !ok {
			p.errorf(it.pos, "%s values must be strings (quote numbers), got %s", k, it.describe())
			return nil
		}
		t.Values = append(t.Values, s)
	}
	return t
}
