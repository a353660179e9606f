package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// fences drops Markdown code fences, as AgentV's parseJsonFromText does
// (/```json\n?|```/g).
var fences = strings.NewReplacer("```json\n", "", "```json", "", "```", "")

// passedField is AgentV's repairSchemaNearBooleanFields: a "passed" value
// that is a string or a bare word becomes true or false.
var passedField = regexp.MustCompile(`(?i)("passed"\s*:\s*)(?:"([^"]+)"|([A-Za-z_][A-Za-z0-9_-]*))`)

// judgeJSON reads the JSON object in a judge's answer as AgentV does: code
// fences removed, the text from the first "{" to the last "}", "passed"
// values repaired.
func judgeJSON(text string) (map[string]any, error) {
	cleaned := strings.TrimSpace(fences.Replace(text))
	if cleaned == "" {
		return nil, errors.New("the answer is empty")
	}
	blob := cleaned
	if i := strings.Index(cleaned, "{"); i >= 0 {
		if j := strings.LastIndex(cleaned, "}"); j > i {
			blob = cleaned[i : j+1]
		}
	}
	blob = passedField.ReplaceAllStringFunc(blob, func(m string) string {
		sub := passedField.FindStringSubmatch(m)
		v := strings.ToLower(strings.TrimSpace(sub[2] + sub[3]))
		if v == "true" {
			return sub[1] + "true"
		}
		return sub[1] + "false"
	})
	var v any
	dec := json.NewDecoder(strings.NewReader(blob))
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("it is not JSON (%v)", err)
	}
	if dec.More() {
		return nil, errors.New("it holds more than one JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a JSON object, got %s", jsonKind(v))
	}
	return m, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}

// field reads an optional field of type T from m; present reports whether
// it was there (null counts as absent).
func field[T any](m map[string]any, key, where string) (v T, present bool, err error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return v, false, nil
	}
	v, ok = raw.(T)
	if !ok {
		var want T
		return v, true, fmt.Errorf("%s%q must be %s, got %s", where, key, jsonKind(any(want)), jsonKind(raw))
	}
	return v, true, nil
}

// objects reads the array of objects m[key] (required).
func objects(m map[string]any, key string) ([]map[string]any, error) {
	arr, ok, err := field[[]any](m, key, "")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%q is missing", key)
	}
	out := make([]map[string]any, len(arr))
	for i, it := range arr {
		o, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s[%d] must be an object, got %s", key, i, jsonKind(it))
		}
		out[i] = o
	}
	return out, nil
}

// freeformGrade reads a free-form grade {"score", "assertions"}: the score
// (0..1) is the grader's, passing at 0.8 as in AgentV; at most 8 of the
// judge's assertions are kept as checks.
func freeformGrade(ar *AssertionResult, text string, agentv bool) error {
	m, err := judgeJSON(text)
	if err != nil {
		return err
	}
	score, ok, err := field[float64](m, "score", "")
	switch {
	case err != nil:
		return err
	case !ok:
		return errors.New(`"score" is missing`)
	case score < 0 || score > 1 || math.IsNaN(score):
		return fmt.Errorf(`"score" must be between 0.0 and 1.0, got %g`, score)
	}
	var checks []Check
	if _, present := m["assertions"]; present && m["assertions"] != nil {
		items, err := objects(m, "assertions")
		if err != nil {
			return err
		}
		for i, it := range items {
			where := fmt.Sprintf("assertions[%d].", i)
			t, ok, err := field[string](it, "text", where)
			if err == nil && !ok {
				err = fmt.Errorf("%s%q is missing", where, "text")
			}
			if err != nil {
				return err
			}
			p, ok, err := field[bool](it, "passed", where)
			if err == nil && !ok {
				err = fmt.Errorf("%s%q is missing", where, "passed")
			}
			if err != nil {
				return err
			}
			ev, _, err := field[string](it, "evidence", where)
			if err != nil {
				return err
			}
			if len(checks) < 8 {
				checks = append(checks, Check{Text: t, Passed: p, Evidence: ev})
			}
		}
	}
	reasoning, _, _ := field[string](m, "reasoning", "")
	if len(checks) == 0 {
		checks = []Check{{Text: fmt.Sprintf("the judge scored %.2f (a judge grade passes at %.1f)", score, DefaultThreshold), Passed: score >= DefaultThreshold, Evidence: reasoning}}
	}
	ar.Score = clamp(score)
	ar.Checks = checks
	ar.Reasoning = reasoning
	ar.Verdict = verdictFor(ar.Score, DefaultThreshold)
	return nil
}

// rubricGrade reads a checklist grade {"checks": [{id, satisfied,
// reasoning}], "overall_reasoning"}: score = weight of satisfied items /
// weight of answered items; an unsatisfied required item fails the grader
// whatever the score (AgentV's calculateRubricScore). In ModeDefault an
// item the judge did not answer counts as unsatisfied (AgentV leaves it
// out of the score), and reasoning may be omitted.
func rubricGrade(ar *AssertionResult, text string, items []RubricItem, agentv bool) error {
	m, err := judgeJSON(text)
	if err != nil {
		return err
	}
	checks, err := objects(m, "checks")
	if err != nil {
		return err
	}
	overall, ok, err := field[string](m, "overall_reasoning", "")
	if err == nil && !ok && agentv {
		err = errors.New(`"overall_reasoning" is missing`)
	}
	if err != nil {
		return err
	}
	type answer struct {
		satisfied bool
		reasoning string
	}
	var answers []struct {
		id string
		answer
	}
	for i, c := range checks {
		where := fmt.Sprintf("checks[%d].", i)
		id, ok, err := field[string](c, "id", where)
		if err == nil && !ok {
			err = fmt.Errorf("%s%q is missing", where, "id")
		}
		if err != nil {
			return err
		}
		sat, ok, err := field[bool](c, "satisfied", where)
		if err == nil && !ok {
			err = fmt.Errorf("%s%q is missing", where, "satisfied")
		}
		if err != nil {
			return err
		}
		why, ok, err := field[string](c, "reasoning", where)
		if err == nil && !ok && agentv {
			err = fmt.Errorf("%s%q is missing", where, "reasoning")
		}
		if err != nil {
			return err
		}
		answers = append(answers, struct {
			id string
			answer
		}{id, answer{sat, why}})
	}
	var total, earned float64
	failedRequired := false
	var out []Check
	add := func(r RubricItem, a answer) {
		total += r.Weight
		out = append(out, Check{Text: fmt.Sprintf("[%s] %s", r.ID, r.Outcome), Passed: a.satisfied, Evidence: a.reasoning})
		if a.satisfied {
			earned += r.Weight
		} else if r.Required {
			failedRequired = true
		}
	}
	if agentv {
		// In the judge's order; an id given twice counts twice, and the
		// last item with an id is the one it names (a JavaScript Map).
		byID := map[string]RubricItem{}
		for _, r := range items {
			byID[r.ID] = r
		}
		for _, a := range answers {
			if r, ok := byID[a.id]; ok {
				add(r, a.answer)
			}
		}
	} else {
		first := map[string]answer{}
		for _, a := range answers {
			if _, dup := first[a.id]; !dup {
				first[a.id] = a.answer
			}
		}
		for _, r := range items {
			a, ok := first[r.ID]
			if !ok {
				a = answer{reasoning: "the judge gave no verdict for this item"}
			}
			add(r, a)
		}
	}
	ar.Score = 0
	if total > 0 {
		ar.Score = clamp(earned / total)
	}
	ar.Checks, ar.Reasoning = out, overall
	ar.Verdict = verdictFor(ar.Score, DefaultThreshold)
	if failedRequired {
		ar.Verdict = Fail
	}
	return nil
}

// scoreRangeGrade reads an analytic grade {"checks": [{id, score 0-10,
// reasoning}]}: each item's score / 10, combined by weight; an item passes
// at 7 and above its min_score (required: true means min 1.0); an item
// below its min_score fails the grader (AgentV's calculateScoreRangeResult).
func scoreRangeGrade(ar *AssertionResult, text string, items []RubricItem, agentv bool) error {
	m, err := judgeJSON(text)
	if err != nil {
		return err
	}
	checks, err := objects(m, "checks")
	if err != nil {
		return err
	}
	overall, _, err := field[string](m, "overall_reasoning", "")
	if err != nil {
		return err
	}
	type answer struct {
		id        string
		score     float64
		reasoning string
	}
	var answers []answer
	for i, c := range checks {
		where := fmt.Sprintf("checks[%d].", i)
		id, ok, err := field[string](c, "id", where)
		if err == nil && !ok {
			err = fmt.Errorf("%s%q is missing", where, "id")
		}
		if err != nil {
			return err
		}
		s, ok, err := field[float64](c, "score", where)
		if err == nil && !ok {
			err = fmt.Errorf("%s%q is missing", where, "score")
		}
		if err == nil && (s != math.Trunc(s) || s < 0 || s > 10) {
			err = fmt.Errorf("%s%q must be an integer from 0 to 10, got %g", where, "score", s)
		}
		if err != nil {
			return err
		}
		why, _, err := field[string](c, "reasoning", where)
		if err != nil {
			return err
		}
		answers = append(answers, answer{id, s, why})
	}
	var total, sum float64
	failedRequired := false
	var out []Check
	add := func(r RubricItem, a answer, answered bool) {
		norm := a.score / 10
		total += r.Weight
		sum += norm * r.Weight
		var bar *float64
		switch {
		case r.MinScore != nil:
			bar = r.MinScore
		case r.Required:
			one := 1.0
			bar = &one
		}
		below := bar != nil && norm < *bar
		if below {
			failedRequired = true
		}
		desc := ""
		for _, sr := range r.ScoreRanges {
			if a.score >= float64(sr.Min) && a.score <= float64(sr.Max) {
				desc = sr.Outcome
				break
			}
		}
		label := r.Outcome
		if label == "" {
			label = r.ID
		}
		text := fmt.Sprintf("[%s] %s - Score: %g/10 (%s)", r.ID, label, a.score, desc)
		if !answered {
			text = fmt.Sprintf("[%s] %s - no score from the judge", r.ID, label)
		}
		out = append(out, Check{Text: text, Passed: !below && a.score >= 7, Evidence: a.reasoning})
	}
	if agentv {
		byID := map[string]RubricItem{}
		for _, r := range items {
			byID[r.ID] = r
		}
		for _, a := range answers {
			if r, ok := byID[a.id]; ok {
				add(r, a, true)
			}
		}
	} else {
		first := map[string]answer{}
		for _, a := range answers {
			if _, dup := first[a.id]; !dup {
				first[a.id] = a
			}
		}
		for _, r := range items {
			a, ok := first[r.ID]
			if !ok {
				a = answer{id: r.ID, reasoning: "the judge gave no score for this item"}
			}
			add(r, a, ok)
		}
	}
	ar.Score = 0
	if total > 0 {
		ar.Score = clamp(sum / total)
	}
	ar.Checks, ar.Reasoning = out, overall
	ar.Verdict = verdictFor(ar.Score, DefaultThreshold)
	if failedRequired {
		ar.Verdict = Fail
	}
	return nil
}

// rubricsJSON renders the rubric items as AgentV's {{rubrics}} (indented)
// and {{rubrics_json}} template variables do.
func rubricsJSON(items []RubricItem, indent bool) string {
	type rangeJSON struct {
		ScoreRange [2]int `json:"score_range"`
		Outcome    string `json:"outcome"`
	}
	type itemJSON struct {
		ID          string      `json:"id"`
		Outcome     string      `json:"outcome,omitempty"`
		Operator    string      `json:"operator,omitempty"`
		Weight      float64     `json:"weight"`
		Required    bool        `json:"required"`
		MinScore    *float64    `json:"min_score,omitempty"`
		ScoreRanges []rangeJSON `json:"score_ranges,omitempty"`
	}
	out := make([]itemJSON, len(items))
	for i, r := range items {
		out[i] = itemJSON{ID: r.ID, Outcome: r.Outcome, Operator: r.Operator, Weight: r.Weight, Required: r.Required, MinScore: r.MinScore}
		for _, sr := range r.ScoreRanges {
			out[i].ScoreRanges = append(out[i].ScoreRanges, rangeJSON{[2]int{sr.Min, sr.Max}, sr.Outcome})
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(out) // plain structs: cannot fail
	return strings.TrimRight(b.String(), "\n")
}
