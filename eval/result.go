package eval

import "time"

// Mode selects the scoring semantics.
type Mode int

const (
	// ModeDefault is Loupe's semantics (see docs/eval-semantics.md).
	ModeDefault Mode = iota
	// ModeAgentV reproduces AgentV 4.42.4 scores and verdicts exactly.
	ModeAgentV
)

// String returns "default" or "agentv".
func (m Mode) String() string {
	if m == ModeAgentV {
		return "agentv"
	}
	return "default"
}

// DefaultThreshold is the pass mark used when Options.Threshold is 0; it is
// AgentV's default too.
const DefaultThreshold = 0.8

// Options configure evaluation. The zero value is usable: Loupe semantics,
// threshold 0.8, no judge (judge assertions are skipped).
type Options struct {
	// Mode picks the grading semantics; the zero value is ModeDefault.
	Mode Mode
	// Threshold is the case pass mark in (0,1]; 0 means DefaultThreshold.
	Threshold float64
	// Judge grades the assertions that need a language model (llm-grader,
	// rubric(s), bare strings, llm-rubric, g-eval, factuality,
	// trajectory:goal-success); nil skips them with NoJudgeReason.
	Judge Judge
	// GraderTimeout bounds one run of a code-grader command; 0 means
	// DefaultGraderTimeout.
	GraderTimeout time.Duration
}

func (o Options) threshold() float64 {
	if o.Threshold <= 0 || o.Threshold > 1 {
		return DefaultThreshold
	}
	return o.Threshold
}

// Verdict is pass, fail or skip.
type Verdict string

// Verdicts.
const (
	Pass Verdict = "pass"
	Fail Verdict = "fail"
	Skip Verdict = "skip"
	// CouldNotRun marks a grader (or a whole case) that could not be run:
	// a problem in its definition (LoadDefault) or a grader command that
	// failed. It is not counted in the case score, and its case does not
	// pass.
	CouldNotRun Verdict = "error"
)

// Check is one elementary observation inside an assertion.
type Check struct {
	Text    string // what was checked, with the values seen
	Passed  bool   // the observation held
	Skipped bool   // the check could not be made (e.g. no duration recorded)
	// Evidence is a judge's reason for this check (AgentV's "evidence").
	Evidence string
}

// CallMetrics are partial-credit measures of a trajectory against expected
// calls, reported next to the verdict. Calls are paired by a maximum
// matching on name and arguments.
type CallMetrics struct {
	Matched   int     // expected calls paired with an actual call
	Expected  int     // expected calls
	Actual    int     // actual calls
	Precision float64 // Matched/Actual (1 when there are no actual calls)
	Recall    float64 // Matched/Expected (1 when nothing is expected)
	F1        float64 // harmonic mean of Precision and Recall
	// Order is the longest order-preserving matching divided by the
	// longer of the two lists (1 when both are empty).
	Order float64
}

// AssertionResult is the outcome of one assertion.
type AssertionResult struct {
	Name    string   // the assertion's name (its kind when it has none)
	Kind    Kind     // the assertion's kind
	Pos     Position // where the assertion is in its eval file
	Score   float64  // in [0,1], after negation
	Verdict Verdict  // pass, fail, or skip (not counted in the case score)
	Weight  float64  // the assertion's share of the case score
	// Negated is set when the result was inverted by negate / not-.
	Negated bool
	// Reason explains a skip or a could-not-run.
	Reason string
	Checks []Check
	// For trajectory assertions: the spec, the calls, their alignment and
	// partial-credit measures.
	Spec    *TrajectorySpec
	Calls   []ToolCall
	Rows    []Row
	Metrics *CallMetrics
	// For judge assertions: the judge's overall reasoning, and every call
	// made to the judge (prompt, raw answer, usage, error), in order.
	Reasoning  string
	JudgeCalls []JudgeCall
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	CaseID     string            // the case's id
	Mode       Mode              // the semantics it was graded with
	Threshold  float64           // the pass mark Score was held against
	Score      float64           // weighted mean of the scored (not skipped) assertions; 0 when a required one failed
	Verdict    Verdict           // pass when Score reaches Threshold; skip when nothing was scored (ModeDefault)
	Assertions []AssertionResult // in the order of the case's assertions
	// RequiredFailed names a required assertion that zeroed the score.
	RequiredFailed string
	// Metrics are the partial-credit measures of the first assertion with
	// expected calls, or nil.
	Metrics *CallMetrics
}
