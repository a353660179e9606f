package eval

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"
)

// EvaluateFile grades each case of f against the recorded run at the same
// position (AgentV maps transcripts to cases positionally). It is an error
// when the counts differ.
func EvaluateFile(ctx context.Context, f *File, runs []Recorded, opts Options) ([]CaseResult, error) {
	if len(runs) != len(f.Cases) {
		return nil, fmt.Errorf("%s: transcript has %d runs but the eval file defines %d cases; record one run per case, in file order", f.Path, len(runs), len(f.Cases))
	}
	out := make([]CaseResult, len(f.Cases))
	for i, c := range f.Cases {
		out[i] = Evaluate(ctx, c, runs[i].Trajectory, opts)
	}
	return out, nil
}

// Evaluate grades one case. The case score is the weighted mean of the
// scores of its non-skipped assertions (0 when none), or 0 when a required
// assertion is below its bar (or, in ModeAgentV, when an LLM judge grader
// could not run: AgentV makes the test an execution error); the verdict is
// pass when the score reaches the threshold, and never pass when a grader
// could not run. In ModeDefault a case whose assertions were all skipped
// gets the skip verdict. Judge graders call opts.Judge, once per grade in
// ModeDefault, up to four times in ModeAgentV (AgentV's retries).
func Evaluate(ctx context.Context, c Case, t Trajectory, opts Options) CaseResult {
	th := opts.threshold()
	res := CaseResult{CaseID: c.ID, Mode: opts.Mode, Threshold: th}
	if len(c.Problems) > 0 {
		res.Assertions = []AssertionResult{{Name: "test", Pos: c.Pos, Verdict: CouldNotRun, Reason: problemText(c.Problems)}}
		res.Verdict = Fail
		return res
	}
	var sum, weights float64
	scorable, notRun := 0, 0
	judgeFailed := false // AgentV: a judge that failed makes the test an execution error scored 0
	for _, a := range c.Assertions {
		ar := evalAssertion(ctx, c, a, t, opts)
		res.Assertions = append(res.Assertions, ar)
		if res.Metrics == nil && ar.Metrics != nil {
			res.Metrics = ar.Metrics
		}
		if ar.Verdict == CouldNotRun {
			notRun++
			if opts.Mode == ModeAgentV && a.Judge != nil {
				judgeFailed = true
			}
			continue
		}
		if ar.Verdict == Skip {
			continue
		}
		scorable++
		sum += ar.Score * a.Weight
		weights += a.Weight
		if a.Required && res.RequiredFailed == "" {
			bar := th
			if a.MinScore != nil {
				bar = *a.MinScore
			}
			if ar.Score < bar {
				res.RequiredFailed = ar.Name
			}
		}
	}
	switch {
	case res.RequiredFailed != "", judgeFailed:
		res.Score = 0
	case weights > 0:
		res.Score = sum / weights
	}
	res.Verdict = verdictFor(res.Score, th)
	switch {
	case notRun > 0:
		res.Verdict = Fail // a grader that could not run never lets its case pass
	case scorable == 0 && opts.Mode == ModeDefault:
		res.Verdict = Skip
	}
	return res
}

// problemText joins the problems of a case or grader, one per line.
func problemText(probs []*Error) string {
	var b []byte
	for i, e := range probs {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, e.Error()...)
	}
	return string(b)
}

func verdictFor(score, threshold float64) Verdict {
	if score >= threshold {
		return Pass
	}
	return Fail
}

func evalAssertion(ctx context.Context, c Case, a Assertion, t Trajectory, opts Options) AssertionResult {
	ar := AssertionResult{Name: a.Name, Kind: a.Kind, Pos: a.Pos, Weight: a.Weight}
	agentv := opts.Mode == ModeAgentV
	switch {
	case len(a.Problems) > 0:
		ar.Verdict, ar.Reason = CouldNotRun, problemText(a.Problems)
		return ar
	case a.Unknown:
		// AgentV 4.42.4's registry throws for the type; the error is the
		// grader's result, scored 0.
		ar.Checks = []Check{{Text: fmt.Sprintf("AgentV 4.42.4 has no %q grader (Unknown grader type); it scores 0", a.Kind)}}
		ar.Score = 0
	case agentv && (a.Kind == KindToolUsed || a.Kind == KindToolSequence || a.Kind == KindToolArgsMatch || a.Kind == KindStepCount || a.Kind == KindExpectedMessages):
		// AgentV 4.42.4 registers no grader for these types: it reports
		// `Unknown grader type` and scores 0.
		ar.Checks = []Check{{Text: fmt.Sprintf("AgentV 4.42.4 has no %q grader (Unknown grader type); it scores 0. Use tool-trajectory, or the default mode", a.Kind)}}
		ar.Score = 0
	case a.Trajectory != nil:
		trajectoryAssertion(&ar, a.Trajectory, t.Calls, agentv)
	case a.ToolUsed != nil:
		toolUsedAssertion(&ar, a.ToolUsed, t.Calls, a.Negate)
	case a.ArgsCheck != nil:
		argsCheckAssertion(&ar, a.ArgsCheck, t.Calls)
	case a.StepCount != nil:
		stepCountAssertion(&ar, a.StepCount, t)
	case a.Text != nil:
		textAssertion(&ar, a, t.Output)
	case a.Limits != nil:
		limitsAssertion(&ar, a.Kind, a.Limits, t, agentv)
	case a.Judge != nil:
		judgeAssertion(ctx, &ar, c, a, t, opts)
	case a.Script != nil:
		scriptAssertion(ctx, &ar, c, a.Script, t, opts)
	default:
		ar.Verdict, ar.Reason = Skip, "assertion has no usable specification"
	}
	if ar.Verdict == "" {
		ar.Verdict = assertionVerdict(ar, agentv)
	}
	if a.Negate && ar.Verdict != Skip && ar.Verdict != CouldNotRun && a.Kind != KindToolUsed {
		ar.Negated = true
		ar.Score = clamp(1 - ar.Score)
		if ar.Verdict == Pass {
			ar.Verdict = Fail
		} else {
			ar.Verdict = Pass
		}
	}
	return ar
}

// assertionVerdict: AgentV passes an assertion whose score reaches 0.8
// (fixed, whatever the case threshold), so 4 of 5 expected calls pass.
// Loupe passes an assertion only when every check passed.
func assertionVerdict(ar AssertionResult, agentv bool) Verdict {
	if agentv {
		return verdictFor(ar.Score, DefaultThreshold)
	}
	for _, c := range ar.Checks {
		if !c.Passed && !c.Skipped {
			return Fail
		}
	}
	if ar.Score < 1 {
		return Fail
	}
	return Pass
}

func clamp(f float64) float64 {
	switch {
	case f != f || f < 0:
		return 0
	case f > 1:
		return 1
	}
	return f
}

func trajectoryAssertion(ar *AssertionResult, s *TrajectorySpec, calls []ToolCall, agentv bool) {
	ar.Spec, ar.Calls = s, calls
	var r *seqResult
	switch {
	case s.Mode == AnyOrder && len(s.Minimums) > 0:
		r = minimumsCheck(s, calls)
	case s.Mode == AnyOrder && agentv:
		ar.Verdict = Skip
		ar.Reason = "AgentV 4.42.4 drops an any_order evaluator without minimums (warning: any_order mode requires minimums)"
		return
	case s.Mode == AnyOrder, s.Mode == Superset && !agentv:
		r = supersetBest(s, calls)
	case s.Mode == Superset:
		r = supersetFirstFit(s, calls)
	case s.Mode == InOrder && agentv:
		r = inOrderAgentV(s, calls)
	case s.Mode == InOrder:
		r = inOrderBest(s, calls)
	case s.Mode == Exact:
		r = exactCompare(s, calls, !agentv)
	case s.Mode == Subset:
		r = subsetCheck(s, calls)
	default:
		ar.Verdict, ar.Reason = Skip, fmt.Sprintf("unknown mode %q", s.Mode)
		return
	}
	ar.Checks = r.checks
	switch {
	case r.total > 0:
		ar.Score = float64(r.hits) / float64(r.total)
	case s.Mode == Subset && len(s.Expected) == 0 && len(calls) > 0:
		ar.Score = 0
	default:
		ar.Score = 1
	}
	if len(s.Expected) > 0 {
		ar.Rows = align(s, calls, r)
		m := callMetrics(s, calls)
		ar.Metrics = &m
	}
}

func toolUsedAssertion(ar *AssertionResult, s *ToolUsedSpec, calls []ToolCall, negate bool) {
	counts := map[string]int{}
	for _, c := range calls {
		counts[c.Name]++
	}
	if s.Glob {
		for _, pat := range s.Tools {
			n := 0
			for _, c := range calls {
				if m, _ := path.Match(pat, c.Name); m {
					n++
				}
			}
			counts[pat] = n // a pattern is counted under its own text
		}
	}
	ok := 0
	for _, tool := range s.Tools {
		n := float64(counts[tool])
		used := n >= s.Min && (s.Max == nil || n <= *s.Max)
		bounds := fmt.Sprintf(">= %g", s.Min)
		if s.Max != nil {
			bounds = fmt.Sprintf("%g..%g", s.Min, *s.Max)
		}
		if negate { // not-trajectory:tool-used: each listed tool must be absent
			ar.Checks = append(ar.Checks, Check{Text: fmt.Sprintf("%s: called %d times (must not be used)", tool, counts[tool]), Passed: n == 0})
			if n == 0 {
				ok++
			}
			continue
		}
		ar.Checks = append(ar.Checks, Check{Text: fmt.Sprintf("%s: called %d times (required %s)", tool, counts[tool], bounds), Passed: used})
		if used {
			ok++
		}
	}
	ar.Negated = negate
	ar.Score = 1
	if len(s.Tools) > 0 {
		ar.Score = float64(ok) / float64(len(s.Tools))
	}
}

func argsCheckAssertion(ar *AssertionResult, s *ArgsCheckSpec, calls []ToolCall) {
	e := ExpectedCall{Tool: s.Tool, Args: s.Args}
	var firstNamed = -1
	for j, c := range calls {
		if c.Name != s.Tool {
			continue
		}
		if argsOK(e, s.Match, c) {
			ar.Score = 1
			ar.Checks = []Check{{Text: fmt.Sprintf("%s at position %d has the expected arguments", s.Tool, j), Passed: true}}
			return
		}
		if firstNamed < 0 {
			firstNamed = j
		}
	}
	if firstNamed < 0 {
		ar.Checks = []Check{{Text: fmt.Sprintf("%s was never called", s.Tool)}}
		return
	}
	ar.Checks = []Check{{Text: fmt.Sprintf("no %s call has the expected arguments (%s)", s.Tool, s.Match.Rule)}}
	for _, d := range argDiffs(e, s.Match, calls[firstNamed]) {
		ar.Checks = append(ar.Checks, Check{Text: fmt.Sprintf("  position %d: %s", firstNamed, d)})
	}
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// stepCountAssertion counts the steps matching s: 1 when the count is
// within bounds, else 0.
func stepCountAssertion(ar *AssertionResult, s *StepCountSpec, t Trajectory) {
	n := 0
	var matched []string
	match := func(kind, name string) {
		if s.Type != "" && s.Type != kind {
			return
		}
		if s.Pattern != "" {
			if ok, _ := path.Match(s.Pattern, name); !ok {
				return
			}
		}
		n++
		if len(matched) < 5 {
			matched = append(matched, kind+":"+name)
		}
	}
	for _, c := range t.Calls {
		match("tool", c.Name)
	}
	for _, m := range t.Messages {
		if m.Role == "assistant" {
			match("message", m.Content)
		}
	}
	ok := (s.Min == nil || float64(n) >= *s.Min) && (s.Max == nil || float64(n) <= *s.Max)
	bounds := ""
	switch {
	case s.Min != nil && s.Max != nil:
		bounds = fmt.Sprintf("%g-%g", *s.Min, *s.Max)
	case s.Min != nil:
		bounds = fmt.Sprintf("at least %g", *s.Min)
	default:
		bounds = fmt.Sprintf("at most %g", *s.Max)
	}
	text := fmt.Sprintf("matched %d step(s) (expected %s)", n, bounds)
	if len(matched) > 0 {
		text += ": " + strings.Join(matched, ", ")
	}
	ar.Checks = []Check{{Text: text, Passed: ok}}
	if ok {
		ar.Score = 1
	}
}
