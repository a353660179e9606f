// Package tracetest asserts agent trajectories in go test, in the spirit of
// net/http/httptest: record a run (or take one already recorded) and check
// which tools it called, in which order, with which arguments, how many
// steps, errors, tokens and dollars it took.
//
//	tr := tracetest.New(t, res.Records)
//	tr.CalledInOrder("search", "summarize").
//		MinCalls("search", 2).
//		Args("search", map[string]any{"q": "go"}, tracetest.Partial).
//		NoErrors().
//		MaxTokens(5000)
//
// Every assertion is graded by package eval with the same semantics as
// `loupe eval` (Loupe's default mode unless WithMode says otherwise), and a
// failing one reports eval's explanation through t.Errorf — the expected and
// actual calls side by side, the argument differences — so a test failure
// reads like an eval failure. Assertions return the *Trajectory so they
// chain; all of them run, and each failure is reported (use Fatal to stop the
// test at the first one).
package tracetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/eval/fromtrace"
	"github.com/loupe-dev/loupe/trace"
)

// Trajectory is a run under test. Make one with New, FromContext,
// FromTrajectory or Run. Its methods are meant for the test's goroutine.
type Trajectory struct {
	tb    testing.TB
	traj  eval.Trajectory
	recs  []trace.Record
	stats *trace.Stats
	opts  eval.Options
	fatal bool
}

// Option configures a Trajectory.
type Option func(*Trajectory)

// WithMode grades with eval's mode m (eval.ModeAgentV reproduces AgentV).
func WithMode(m eval.Mode) Option { return func(t *Trajectory) { t.opts.Mode = m } }

// Fatal makes a failing assertion stop the test (t.Fatalf) instead of
// reporting and continuing (t.Errorf).
func Fatal() Option { return func(t *Trajectory) { t.fatal = true } }

// New returns the trajectory of one run's records (fromtrace.Trajectory
// describes the mapping). recs are not modified.
func New(tb testing.TB, recs []trace.Record, opts ...Option) *Trajectory {
	tb.Helper()
	st := trace.StatsOf(recs)
	t := &Trajectory{tb: tb, traj: fromtrace.Trajectory(recs), recs: recs, stats: &st}
	for _, o := range opts {
		o(t)
	}
	return t
}

// FromContext returns the trajectory of ec's run so far (its nested runs
// included). The run need not have ended.
func FromContext(tb testing.TB, ec *trace.ExecutionContext, opts ...Option) *Trajectory {
	tb.Helper()
	return New(tb, ec.Records(), opts...)
}

// FromTrajectory wraps a trajectory built by other means (an AgentV
// transcript, a hand-written one). MaxSteps falls back to model calls, as
// there are no iteration records.
func FromTrajectory(tb testing.TB, tr eval.Trajectory, opts ...Option) *Trajectory {
	tb.Helper()
	t := &Trajectory{tb: tb, traj: tr}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Run runs fn as an agent inside a recorded run named name with the given
// input, and returns its trajectory: whatever fn records through the
// *trace.ExecutionContext in ctx (trace.FromContext, trace.Tool, an
// agent.Executor's model and tool calls) is graded. fn's answer becomes the
// run's output; its error ends the run with the matching termination reason
// and is recorded, so NoErrors fails.
func Run(tb testing.TB, name, input string, fn func(ctx context.Context) (string, error), opts ...Option) *Trajectory {
	tb.Helper()
	tr := trace.New(trace.Options{})
	ctx, ec := tr.Start(context.Background(), name, trace.RunOptions{Input: trace.Text(input)})
	answer, err := fn(ctx)
	var result trace.Value
	if answer != "" {
		result = trace.Text(answer)
	}
	ec.End(result, err)
	return New(tb, ec.Records(), opts...)
}

// Trajectory returns what is graded.
func (t *Trajectory) Trajectory() eval.Trajectory { return t.traj }

// Records returns the run's records (nil for FromTrajectory).
func (t *Trajectory) Records() []trace.Record { return t.recs }

// Match is how Args compares arguments.
type Match struct{ m eval.ArgsMatch }

// Argument matches.
var (
	// Partial: every expected key is present with an equal value; other
	// keys are allowed.
	Partial = Match{eval.ArgsMatch{Rule: eval.ArgsSuperset}}
	// Exact: the arguments are deeply equal (5 equals 5.0).
	Exact = Match{eval.ArgsMatch{Rule: eval.ArgsExact}}
)

// Fields compares only the listed dotted paths (e.g. "filter.city").
func Fields(paths ...string) Match {
	return Match{eval.ArgsMatch{Rule: eval.ArgsFields, Fields: paths}}
}

// CalledInOrder asserts that the tools were called in this order, other
// calls possibly in between (eval's in_order).
func (t *Trajectory) CalledInOrder(tools ...string) *Trajectory {
	t.tb.Helper()
	return t.sequence("CalledInOrder", eval.InOrder, tools)
}

// CalledExactly asserts that these were all the calls, in this order
// (eval's exact).
func (t *Trajectory) CalledExactly(tools ...string) *Trajectory {
	t.tb.Helper()
	return t.sequence("CalledExactly", eval.Exact, tools)
}

// Called asserts that each tool was called at least once.
func (t *Trajectory) Called(tools ...string) *Trajectory {
	t.tb.Helper()
	return t.check(call("Called", tools), eval.Assertion{Name: "tool-used", Kind: eval.KindToolUsed,
		ToolUsed: &eval.ToolUsedSpec{Tools: tools, Min: 1}})
}

// NotCalled asserts that none of the tools was called.
func (t *Trajectory) NotCalled(tools ...string) *Trajectory {
	t.tb.Helper()
	return t.check(call("NotCalled", tools), eval.Assertion{Name: "tool-used", Kind: eval.KindToolUsed, Negate: true,
		ToolUsed: &eval.ToolUsedSpec{Tools: tools, Min: 1}})
}

// MinCalls asserts that tool was called at least n times.
func (t *Trajectory) MinCalls(tool string, n int) *Trajectory {
	t.tb.Helper()
	return t.check(fmt.Sprintf("MinCalls(%q, %d)", tool, n), eval.Assertion{Name: "tool-used", Kind: eval.KindToolUsed,
		ToolUsed: &eval.ToolUsedSpec{Tools: []string{tool}, Min: float64(n)}})
}

// MaxCalls asserts that tool was called at most n times.
func (t *Trajectory) MaxCalls(tool string, n int) *Trajectory {
	t.tb.Helper()
	mx := float64(n)
	return t.check(fmt.Sprintf("MaxCalls(%q, %d)", tool, n), eval.Assertion{Name: "tool-used", Kind: eval.KindToolUsed,
		ToolUsed: &eval.ToolUsedSpec{Tools: []string{tool}, Min: 0, Max: &mx}})
}

// Args asserts that some call of tool has arguments matching args.
func (t *Trajectory) Args(tool string, args map[string]any, m Match) *Trajectory {
	t.tb.Helper()
	return t.check(fmt.Sprintf("Args(%q, %s, %s)", tool, jsonText(args), m.m.Rule), eval.Assertion{Name: "tool-args-match", Kind: eval.KindToolArgsMatch,
		ArgsCheck: &eval.ArgsCheckSpec{Tool: tool, Args: asJSON(args), Match: m.m}})
}

// Sequence asserts expected calls with eval's full vocabulary: mode
// (eval.InOrder, eval.Exact, eval.AnyOrder, eval.Subset, eval.Superset)
// and per-call arguments and latency bounds.
func (t *Trajectory) Sequence(mode eval.SeqMode, expected ...eval.ExpectedCall) *Trajectory {
	t.tb.Helper()
	var names []string
	expected = slices.Clone(expected)
	for i, e := range expected {
		names = append(names, e.Tool)
		expected[i].Args = asJSON(e.Args)
	}
	return t.check(fmt.Sprintf("Sequence(%s, %s)", mode, strings.Join(names, ", ")), eval.Assertion{Name: "tool-trajectory", Kind: eval.KindToolTrajectory,
		Trajectory: &eval.TrajectorySpec{Mode: mode, Expected: expected, ArgsMatch: eval.ArgsMatch{Rule: eval.ArgsSuperset}}})
}

// MaxToolCalls asserts at most n tool calls in all.
func (t *Trajectory) MaxToolCalls(n int) *Trajectory {
	t.tb.Helper()
	f := float64(n)
	return t.check(fmt.Sprintf("MaxToolCalls(%d)", n), eval.Assertion{Name: "execution-metrics", Kind: eval.KindExecutionMetrics,
		Limits: &eval.LimitSpec{MaxToolCalls: &f}})
}

// MaxLLMCalls asserts at most n model calls.
func (t *Trajectory) MaxLLMCalls(n int) *Trajectory {
	t.tb.Helper()
	f := float64(n)
	return t.check(fmt.Sprintf("MaxLLMCalls(%d)", n), eval.Assertion{Name: "execution-metrics", Kind: eval.KindExecutionMetrics,
		Limits: &eval.LimitSpec{MaxLLMCalls: &f}})
}

// MaxTokens asserts that the run used at most n tokens, input plus output
// (cached tokens are part of input), across its model calls.
func (t *Trajectory) MaxTokens(n int64) *Trajectory {
	t.tb.Helper()
	f := float64(n)
	return t.check(fmt.Sprintf("MaxTokens(%d)", n), eval.Assertion{Name: "token-usage", Kind: eval.KindTokenUsage,
		Limits: &eval.LimitSpec{MaxTotal: &f}})
}

// MaxCost asserts that the run cost at most usd US dollars.
func (t *Trajectory) MaxCost(usd float64) *Trajectory {
	t.tb.Helper()
	return t.check(fmt.Sprintf("MaxCost(%g)", usd), eval.Assertion{Name: "cost", Kind: eval.KindCost,
		Limits: &eval.LimitSpec{MaxCostUSD: &usd}})
}

// MaxDuration asserts that the run took at most d.
func (t *Trajectory) MaxDuration(d time.Duration) *Trajectory {
	t.tb.Helper()
	ms := float64(d) / float64(time.Millisecond)
	return t.check(fmt.Sprintf("MaxDuration(%s)", d), eval.Assertion{Name: "latency", Kind: eval.KindLatency,
		Limits: &eval.LimitSpec{MaxDurationMs: &ms}})
}

// OutputContains asserts that the final answer contains s.
func (t *Trajectory) OutputContains(s string) *Trajectory {
	t.tb.Helper()
	return t.check(fmt.Sprintf("OutputContains(%q)", s), eval.Assertion{Name: "contains", Kind: eval.KindContains,
		Text: &eval.TextSpec{Value: s}})
}

// MaxSteps asserts that the run took at most n steps: loop iterations
// (iteration.start records, nested runs included), or model calls when the
// run recorded no iterations.
func (t *Trajectory) MaxSteps(n int) *Trajectory {
	t.tb.Helper()
	steps, what := 0, "iterations"
	switch {
	case t.stats != nil && t.stats.Iterations > 0:
		steps = t.stats.Iterations
	case t.traj.LLMCalls != nil:
		steps, what = *t.traj.LLMCalls, "model calls"
	}
	ok := steps <= n
	return t.report(fmt.Sprintf("MaxSteps(%d)", n), "max-steps", []eval.Check{{
		Text: fmt.Sprintf("steps %d <= %d max (%s)", steps, n, what), Passed: ok}}, ok)
}

// NoErrors asserts that the run recorded no error: no tool call failed, no
// error record, no failed model call, and it did not end in error.
func (t *Trajectory) NoErrors() *Trajectory {
	t.tb.Helper()
	var checks []eval.Check
	for i, c := range t.traj.Calls {
		if c.Err != "" {
			checks = append(checks, eval.Check{Text: fmt.Sprintf("call #%d %s failed: %s", i+1, c.Name, c.Err)})
		}
	}
	failedCalls := len(checks)
	for i := range t.recs {
		r := &t.recs[i]
		if r.Failed() && r.Type != trace.TypeToolError && r.Type != trace.TypeToolEnd {
			checks = append(checks, eval.Check{Text: fmt.Sprintf("%s %s: %s", r.Type, r.Name, r.Error)})
		}
	}
	if len(checks) == 0 && t.traj.Errors > failedCalls {
		checks = append(checks, eval.Check{Text: fmt.Sprintf("%d errors recorded", t.traj.Errors)})
	}
	ok := len(checks) == 0
	if ok {
		checks = []eval.Check{{Text: "no errors recorded", Passed: true}}
	} else {
		checks = append([]eval.Check{{Text: fmt.Sprintf("%d errors recorded, want none", max(len(checks), t.traj.Errors))}}, checks...)
	}
	return t.report("NoErrors()", "no-errors", checks, ok)
}

// Case grades a whole eval case (for example one parsed from an eval file
// with eval.ParseFile) at its own threshold rules.
func (t *Trajectory) Case(c eval.Case) *Trajectory {
	t.tb.Helper()
	res := eval.Evaluate(context.Background(), c, t.traj, t.opts)
	if res.Verdict == eval.Fail {
		t.fail("Case("+c.ID+")", res)
	}
	return t
}

func (t *Trajectory) sequence(method string, mode eval.SeqMode, tools []string) *Trajectory {
	t.tb.Helper()
	exp := make([]eval.ExpectedCall, len(tools))
	for i, n := range tools {
		exp[i] = eval.ExpectedCall{Tool: n, AnyArgs: true}
	}
	return t.check(call(method, tools), eval.Assertion{Name: "tool-trajectory", Kind: eval.KindToolTrajectory,
		Trajectory: &eval.TrajectorySpec{Mode: mode, Expected: exp}})
}

// check grades one assertion strictly: it passes only when every check in
// it passed (threshold 1).
func (t *Trajectory) check(label string, a eval.Assertion) *Trajectory {
	t.tb.Helper()
	if a.Weight == 0 {
		a.Weight = 1
	}
	opts := t.opts
	opts.Threshold = 1
	res := eval.Evaluate(context.Background(), eval.Case{ID: label, Assertions: []eval.Assertion{a}}, t.traj, opts)
	if res.Verdict == eval.Fail || (len(res.Assertions) > 0 && res.Assertions[0].Verdict == eval.Fail) {
		t.fail(label, res)
	}
	return t
}

// report renders a check eval has no assertion type for in eval's format.
func (t *Trajectory) report(label, name string, checks []eval.Check, ok bool) *Trajectory {
	t.tb.Helper()
	if ok {
		return t
	}
	res := eval.CaseResult{CaseID: label, Mode: t.opts.Mode, Threshold: 1, Verdict: eval.Fail,
		Assertions: []eval.AssertionResult{{Name: name, Kind: eval.Kind(name), Verdict: eval.Fail, Weight: 1, Checks: checks}}}
	t.fail(label, res)
	return t
}

func (t *Trajectory) fail(label string, res eval.CaseResult) {
	t.tb.Helper()
	msg := "tracetest: " + label + " failed\n" + strings.TrimRight(res.Explain(), "\n")
	if t.fatal {
		t.tb.Fatalf("%s", msg)
		return
	}
	t.tb.Errorf("%s", msg)
}

// asJSON returns args as JSON would decode them (numbers as float64, structs
// as maps), the form recorded arguments have, so Go values written in a test
// compare equal to recorded ones.
func asJSON(args map[string]any) map[string]any {
	if args == nil {
		return nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return args
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return args
	}
	return out
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func call(method string, args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return method + "(" + strings.Join(q, ", ") + ")"
}
