package eval

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// judgeSpec reads a judge grader of normalized type t, as AgentV 4.42.4
// reads it (its YAML loader, and its promptfoo importer for llm-rubric,
// g-eval and factuality).
func (p *fileParser) judgeSpec(y *ynode, t string) *JudgeSpec {
	js := &JudgeSpec{Type: t}
	switch t {
	case "rubrics":
		c := y.get("criteria")
		if c == nil || c.kind != yseq || len(c.items) == 0 {
			p.errorf(y.pos, "rubrics grader needs criteria: a non-empty list of strings or {id, outcome, weight, required} items")
			return js
		}
		for i, it := range c.items {
			if s, ok := it.str(); ok {
				js.Rubrics = append(js.Rubrics, RubricItem{ID: fmt.Sprintf("rubric-%d", i+1), Outcome: s, Weight: 1, Required: true})
				continue
			}
			if r, ok := p.rubricItem(it, i); ok {
				js.Rubrics = append(js.Rubrics, r)
			}
		}
	case "rubric":
		js.Rubrics = p.rubricItems(y.get("rubrics"))
		if len(js.Rubrics) == 0 {
			p.errorf(y.pos, "rubric grader needs rubrics: a list of {id, outcome, weight, required} items with at least one outcome")
		}
	case "llm-rubric":
		v, ok := y.get("value").str()
		if !ok || strings.TrimSpace(v) == "" {
			p.errorf(y.pos, "llm-rubric needs value: the rubric text the judge grades against")
		}
		js.Prompt = v
	case "g-eval", "factuality":
		v, _ := y.first("value", "prompt").str()
		js.Prompt = modelGraderPrompt(t, v)
	case "trajectory:goal-success":
		v, ok := y.get("value").str()
		if !ok {
			v, _ = y.get("value").get("goal").str()
		}
		if strings.TrimSpace(v) == "" {
			p.errorf(y.pos, "trajectory:goal-success needs value: the goal (a string, or {goal: …}) the judge checks the run against")
		}
		js.Prompt = v
	default: // llm-grader, llm-judge
		if pr := y.get("prompt"); pr != nil && pr.kind != ynull {
			s, ok := pr.str()
			switch {
			case !ok && pr.kind == ymap:
				p.classErrorf(errNotImplemented, pr.pos, "a prompt: {command: …} script is not supported by Loupe; write the prompt inline or as prompt: file://PATH")
			case !ok:
				p.errorf(pr.pos, "prompt must be a string (the criteria or a template with {{output}}, {{criteria}}, …), got %s", pr.describe())
			case strings.HasPrefix(s, "file://"):
				path := strings.TrimPrefix(s, "file://")
				if !filepath.IsAbs(path) {
					path = filepath.Join(filepath.Dir(p.name), path)
				}
				b, err := os.ReadFile(path)
				if err != nil {
					p.errorf(pr.pos, "prompt file: %v; the path is relative to the eval file", err)
				}
				js.Prompt, js.Template = string(b), true
			default:
				js.Prompt = s
			}
		}
		if r := y.get("rubrics"); r != nil {
			js.Rubrics = p.rubricItems(r)
		}
	}
	return js
}

// rubricItems reads a rubrics: list of items (mappings; AgentV skips
// anything else).
func (p *fileParser) rubricItems(y *ynode) []RubricItem {
	if y == nil || y.kind == ynull {
		return nil
	}
	if y.kind != yseq {
		p.errorf(y.pos, "rubrics must be a list of {id, outcome, weight, required} items, got %s", y.describe())
		return nil
	}
	var out []RubricItem
	for i, it := range y.items {
		if it.kind != ymap {
			p.classErrorf(errLenient, it.pos, "rubric item %d must be a mapping {id, outcome, weight, required}, got %s; AgentV skips it", i+1, it.describe())
			continue
		}
		if r, ok := p.rubricItem(it, i); ok {
			out = append(out, r)
		}
	}
	return out
}

// rubricItem reads one rubric item at index i (AgentV's parseRubricItems):
// id (default rubric-<i+1>), outcome (or criteria), weight (default 1),
// required (default true, for a score-range item false), min_score in
// (0,1] or the older required_min_score 0-10, operator, score_ranges.
func (p *fileParser) rubricItem(y *ynode, i int) (RubricItem, bool) {
	if y.kind != ymap {
		p.classErrorf(errLenient, y.pos, "rubric item %d must be a string or a mapping {id, outcome, weight, required}, got %s; AgentV skips it", i+1, y.describe())
		return RubricItem{}, false
	}
	r := RubricItem{ID: fmt.Sprintf("rubric-%d", i+1), Weight: 1}
	if id, ok := y.get("id").str(); ok {
		r.ID = id
	}
	r.Outcome, _ = y.first("outcome", "criteria").str()
	if w, ok := y.get("weight").num(); ok {
		r.Weight = w
	}
	if op := y.get("operator"); op != nil {
		s, _ := op.str()
		if s == "correctness" || s == "contradiction" {
			r.Operator = s
		} else {
			p.classErrorf(errLenient, op.pos, "rubric %q: operator must be correctness or contradiction, got %s; AgentV ignores it", r.ID, valueText(op))
		}
	}
	if m := y.get("min_score"); m != nil {
		f, ok := m.num()
		if !ok || f <= 0 || f > 1 {
			p.classErrorf(errDropTest, m.pos, "rubric %q: min_score must be in (0, 1], got %s", r.ID, valueText(m))
			return r, false
		}
		r.MinScore = &f
	} else if m := y.get("required_min_score"); m != nil {
		f, ok := m.num()
		if !ok || f != math.Trunc(f) || f < 0 || f > 10 {
			p.classErrorf(errDropTest, m.pos, "rubric %q: required_min_score must be an integer 0-10, got %s (prefer min_score in (0, 1])", r.ID, valueText(m))
			return r, false
		}
		f /= 10
		r.MinScore = &f
	}
	req := y.get("required")
	if sr := y.get("score_ranges"); sr != nil {
		ranges, ok := p.scoreRanges(sr, r.ID)
		if !ok {
			return r, false
		}
		r.ScoreRanges = ranges
		r.Required = req.boolean()
		return r, true
	}
	if r.Outcome == "" {
		p.classErrorf(errLenient, y.pos, "rubric %q has no outcome; AgentV skips it", r.ID)
		return r, false
	}
	r.Required = true
	if b, ok := req.scalarBool(); ok {
		r.Required = b
	}
	return r, true
}

// scalarBool returns y's value when it is a YAML boolean.
func (y *ynode) scalarBool() (bool, bool) {
	if y == nil || y.kind != yscalar {
		return false, false
	}
	b, ok := y.val.(bool)
	return b, ok
}

// scoreRanges reads score_ranges: a list of {score_range: [min, max],
// outcome} or the shorthand {0: outcome, 5: outcome, …}; together they
// must cover 0-10 without overlap (AgentV refuses the test otherwise).
func (p *fileParser) scoreRanges(y *ynode, id string) ([]ScoreRange, bool) {
	var out []ScoreRange
	bad := func(format string, args ...any) ([]ScoreRange, bool) {
		p.classErrorf(errDropTest, y.pos, "rubric %q: score_ranges: "+format, append([]any{id}, args...)...)
		return nil, false
	}
	switch y.kind {
	case ymap:
		var keys []int
		outcome := map[int]string{}
		for i, k := range y.keys {
			n, err := strconv.Atoi(k)
			s, _ := y.vals[i].str()
			if _, dup := outcome[n]; err != nil || dup || n < 0 || n > 10 || s == "" {
				return bad("the shorthand map takes distinct integer keys 0-10 with outcome strings; key %q is not one", k)
			}
			keys = append(keys, n)
			outcome[n] = s
		}
		sort.Ints(keys)
		if len(keys) == 0 || keys[0] != 0 {
			return bad("the shorthand map must start at 0")
		}
		for i, k := range keys {
			hi := 10
			if i+1 < len(keys) {
				hi = keys[i+1] - 1
			}
			out = append(out, ScoreRange{Min: k, Max: hi, Outcome: outcome[k]})
		}
	case yseq:
		for i, it := range y.items {
			rng := it.get("score_range")
			if rng == nil || rng.kind != yseq || len(rng.items) != 2 {
				return bad("entry %d needs score_range: [min, max]", i+1)
			}
			lo, ok1 := rng.items[0].num()
			hi, ok2 := rng.items[1].num()
			if !ok1 || !ok2 || lo != math.Trunc(lo) || hi != math.Trunc(hi) || lo < 0 || hi > 10 || lo > hi {
				return bad("entry %d: score_range must be two integers 0-10, min <= max", i+1)
			}
			s, _ := it.get("outcome").str()
			if s == "" {
				return bad("entry %d has no outcome", i+1)
			}
			out = append(out, ScoreRange{Min: int(lo), Max: int(hi), Outcome: s})
		}
	default:
		return bad("must be a list of {score_range: [min, max], outcome} or a map {0: outcome, …}, got %s", y.describe())
	}
	sorted := append([]ScoreRange(nil), out...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Min < sorted[j].Min })
	covered := 0
	for i, r := range sorted {
		if i > 0 && r.Min <= sorted[i-1].Max {
			return bad("[%d, %d] overlaps [%d, %d]", sorted[i-1].Min, sorted[i-1].Max, r.Min, r.Max)
		}
		covered += r.Max - r.Min + 1
	}
	if covered != 11 {
		return bad("the ranges must cover every score 0-10")
	}
	return out, true
}

// referenceAnswer is AgentV's reference_answer: the last expected_output
// message's content (as JSON when it is not text, or its tool calls), or
// expected_output itself when it is a string.
func referenceAnswer(y *ynode) string {
	if s, ok := y.str(); ok {
		return s
	}
	if y == nil || y.kind != yseq || len(y.items) == 0 {
		return ""
	}
	last := y.items[len(y.items)-1]
	if s, ok := last.str(); ok {
		return s
	}
	c := last.get("content")
	if s, ok := c.str(); ok {
		return s
	}
	v := c
	if v == nil || v.kind == ynull {
		v = last.get("tool_calls")
	}
	if v == nil || v.kind == ynull {
		return ""
	}
	b, err := json.MarshalIndent(v.value(), "", "  ")
	if err != nil {
		return ""
	}
	return string(b)
}
