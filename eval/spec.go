package eval

import "time"

// Format says which AgentV eval-file layout a file uses.
type Format string

// Eval-file layouts.
const (
	// FormatV2 is AgentV's original layout: evalcases, input_messages,
	// expected_messages and execution.evaluators.
	FormatV2 Format = "agentv-v2"
	// FormatCurrent is AgentV's current layout: tests with assert or
	// assertions lists (also used by promptfoo-style suites).
	FormatCurrent Format = "agentv"
)

// Position is a 1-based line and column in an eval file.
type Position struct {
	Line, Column int
}

// File is a parsed eval file.
type File struct {
	// Path is the name the file was parsed under, used in messages.
	Path string
	// Format is the detected layout.
	Format Format
	// Description is the file's description, if any.
	Description string
	// Cases are the test cases in file order. Recorded transcripts map to
	// them positionally, as in AgentV.
	Cases []Case
	// Warnings are the problems that were tolerated in LoadAgentV (keys
	// ignored, graders and tests dropped), each with file:line:column, in
	// file order. Nil for LoadStrict.
	Warnings []*Error
}

// Case is one test case.
type Case struct {
	// ID identifies the case; unique within a file.
	ID string
	// Criteria is the expected outcome in prose (criteria or
	// expected_outcome); it is used only by a Judge.
	Criteria string
	// Input is the text of the user turns, joined by newlines.
	Input string
	// Question is the input as AgentV shows it to a judge: the text of
	// every input message, trimmed, joined by spaces.
	Question string
	// Reference is the reference answer (the last expected_output
	// message, AgentV's reference_answer); it is used only by a Judge.
	Reference string
	// Assertions are evaluated in order; the case score is their weighted
	// mean.
	Assertions []Assertion
	// Pos is where the case starts.
	Pos Position
	// Problems, set only in LoadDefault, are what is wrong with the case
	// outside its graders (no id, a duplicate id, a malformed list). Such
	// a case is not graded: it is reported as could not run.
	Problems []*Error
	// Warnings are the problems with this case's graders that LoadAgentV
	// tolerated (keys ignored, graders dropped), also in File.Warnings.
	Warnings []*Error
}

// Kind names an assertion type, spelled as in the current AgentV format
// (underscores in files are accepted and normalized to hyphens).
type Kind string

// Assertion kinds.
const (
	KindToolTrajectory   Kind = "tool-trajectory"
	KindExpectedMessages Kind = "expected-messages"
	KindToolUsed         Kind = "trajectory:tool-used"
	KindToolSequence     Kind = "trajectory:tool-sequence"
	KindToolArgsMatch    Kind = "trajectory:tool-args-match"
	KindStepCount        Kind = "trajectory:step-count"
	KindContains         Kind = "contains"
	KindIContains        Kind = "icontains"
	KindContainsAny      Kind = "contains-any"
	KindContainsAll      Kind = "contains-all"
	KindIContainsAny     Kind = "icontains-any"
	KindIContainsAll     Kind = "icontains-all"
	KindRegex            Kind = "regex"
	KindEquals           Kind = "equals"
	KindStartsWith       Kind = "starts-with"
	KindEndsWith         Kind = "ends-with"
	KindIsJSON           Kind = "is-json"
	KindLatency          Kind = "latency"
	KindCost             Kind = "cost"
	KindTokenUsage       Kind = "token-usage"
	KindExecutionMetrics Kind = "execution-metrics"
	KindJudge            Kind = "llm-grader"
	KindScript           Kind = "code-grader"
)

// Assertion is one check of a case. Exactly one of the spec pointers
// matching Kind is set.
type Assertion struct {
	// Name labels the assertion in results (name or metric, else derived
	// from the type).
	Name string
	// Kind is the normalized type.
	Kind Kind
	// Negate inverts the result (negate: true, or a "not-" type prefix):
	// score becomes 1-score and pass and fail swap.
	Negate bool
	// Weight is the weight in the case's weighted mean; 1 when not given.
	Weight float64
	// Required makes the whole case score 0 when this assertion scores
	// below MinScore (or the threshold when MinScore is nil).
	Required bool
	// MinScore is the bar for Required; nil means the case threshold.
	MinScore *float64
	// Pos is where the assertion starts in the file.
	Pos Position
	// Problems, set only in LoadDefault, say why the grader cannot run
	// (each with file:line:column and a suggestion). Such a grader is
	// reported as could not run, and its case does not pass.
	Problems []*Error
	// Unknown is set in LoadAgentV for a type AgentV 4.42.4 does not
	// register: like AgentV, the grader scores 0 with an error.
	Unknown bool

	Trajectory *TrajectorySpec // tool-trajectory, expected-messages, trajectory:tool-sequence
	Text       *TextSpec       // contains, icontains, regex, equals, starts-with, ends-with, is-json
	Limits     *LimitSpec      // latency, cost, token-usage, execution-metrics
	ToolUsed   *ToolUsedSpec   // trajectory:tool-used
	ArgsCheck  *ArgsCheckSpec  // trajectory:tool-args-match
	StepCount  *StepCountSpec  // trajectory:step-count
	Judge      *JudgeSpec      // llm-grader, llm-rubric, bare strings
	Script     *ScriptSpec     // code-grader, script
}

// SeqMode is how expected tool calls are compared with actual ones.
type SeqMode string

// Sequence modes.
const (
	AnyOrder SeqMode = "any_order" // counts (minimums), or a multiset of expected calls
	InOrder  SeqMode = "in_order"  // expected calls appear in order; others may be interleaved
	Exact    SeqMode = "exact"     // the same calls in the same order
	Subset   SeqMode = "subset"    // every actual call is allowed by some expected item
	Superset SeqMode = "superset"  // every expected call appears; extra calls allowed
)

// TrajectorySpec is a tool-trajectory check.
type TrajectorySpec struct {
	Mode SeqMode
	// Minimums are per-tool minimum call counts (any_order), in file order.
	Minimums []Minimum
	// Expected are the expected calls, in order.
	Expected []ExpectedCall
	// ArgsMatch is the default argument rule for Expected items.
	ArgsMatch ArgsMatch
}

// Minimum requires Tool to be called at least Count times.
type Minimum struct {
	Tool  string
	Count float64
}

// ExpectedCall is one expected tool call.
type ExpectedCall struct {
	// Tool is the tool name.
	Tool string
	// Args are the expected arguments; nil means not checked.
	Args map[string]any
	// AnyArgs is set by `args: any`: arguments are not checked.
	AnyArgs bool
	// ArgsMatch overrides the spec-wide rule when non-nil.
	ArgsMatch *ArgsMatch
	// MaxDuration, when non-nil, bounds the matched call's duration.
	MaxDuration *time.Duration
	// Pos is where the item is in the file.
	Pos Position
}

// ArgsRule is how expected and actual arguments are compared.
type ArgsRule string

// Argument rules.
const (
	ArgsExact    ArgsRule = "exact"    // deep equality
	ArgsSuperset ArgsRule = "superset" // actual has every expected key with an equal value
	ArgsSubset   ArgsRule = "subset"   // every actual key is expected with an equal value
	ArgsIgnore   ArgsRule = "ignore"   // arguments not compared
	ArgsFields   ArgsRule = "fields"   // only the listed dotted paths are compared
)

// ArgsMatch is an argument rule; Fields is set for ArgsFields. The zero
// value means ArgsExact.
type ArgsMatch struct {
	Rule   ArgsRule
	Fields []string
}

// TextSpec checks the final output text.
type TextSpec struct {
	Value  string
	Values []string // contains-any, contains-all and their i- forms
	Flags  string   // regex flags (i, m, s)
}

// LimitSpec holds budget limits; nil fields are not checked.
type LimitSpec struct {
	MaxDurationMs *float64 // latency threshold, execution-metrics max_duration_ms
	MaxCostUSD    *float64 // cost budget, execution-metrics max_cost_usd
	MaxTotal      *float64 // token-usage max_total
	MaxInput      *float64 // token-usage max_input
	MaxOutput     *float64 // token-usage max_output
	MaxTokens     *float64 // execution-metrics max_tokens
	MaxToolCalls  *float64 // execution-metrics max_tool_calls
	MaxLLMCalls   *float64 // execution-metrics max_llm_calls
}

// ToolUsedSpec checks call counts of named tools.
type ToolUsedSpec struct {
	// Tools are the tools checked; each must be used Min..Max times.
	Tools []string
	// Min is the minimum count per tool (1 when not given).
	Min float64
	// Max is the maximum count per tool; nil means unbounded.
	Max *float64
	// Glob makes Tools globs (path.Match syntax): the count is of every
	// call whose name matches.
	Glob bool
}

// ArgsCheckSpec checks that some call of Tool has matching arguments.
type ArgsCheckSpec struct {
	Tool string
	Args map[string]any
	// Mode is exact or partial (partial = ArgsSuperset).
	Match ArgsMatch
}

// StepCountSpec bounds how many steps of a run match (the
// trajectory:step-count type of promptfoo-style suites). A step is a tool
// call (Type "tool") or an assistant message (Type "message"); with Type
// empty both count.
type StepCountSpec struct {
	// Type is "", "tool" or "message".
	Type string
	// Pattern, when not empty, is a glob (path.Match syntax) the tool name
	// or message text must match.
	Pattern string
	// Min and Max bound the count; nil is unbounded. At least one is set.
	Min, Max *float64
}

// JudgeSpec is an assertion that needs an LLM judge. With Rubrics it is
// graded item by item (a checklist, or 0-10 scores when an item has score
// ranges); without, the judge gives one score in [0,1].
type JudgeSpec struct {
	// Type is the grader type as written, normalized (llm-grader, rubrics,
	// g-eval, …); "rubrics" for bare strings.
	Type string
	// Prompt replaces the case's criteria in AgentV's grading prompt; when
	// it uses template variables ({{output}}, {{criteria}}, …) or Template
	// is set, it is the whole grading prompt instead.
	Prompt string
	// Template is set when Prompt came from a file (prompt: file://…),
	// which AgentV always takes as a whole template.
	Template bool
	// Rubrics are the items of a rubric grader, in file order.
	Rubrics []RubricItem
}

// ScriptSpec is an assertion that runs an external grader command (a
// code-grader), as AgentV 4.42.4 runs it: the command gets AgentV's JSON
// payload on standard input and prints its result as JSON.
type ScriptSpec struct {
	// Command is the program and its arguments; a command written as a
	// string in the file is []string{"sh", "-lc", string}.
	Command []string
	// Dir is the working directory: cwd: resolved against the eval file's
	// directory, which is also the default.
	Dir string
	// Config is passed to the command as the payload's config: the
	// grader's keys that are not its own, merged with its config: map.
	Config map[string]any
}
