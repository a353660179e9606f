package eval

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Judge is a language model that grades: it is given a prompt and answers
// with text. Package eval writes the prompts (AgentV's) and reads the
// answers; a Judge only carries them to a model and back, so that any
// provider can grade (see evalrun.ModelJudge). Implementations must be safe
// for concurrent use when cases are graded in parallel.
type Judge interface {
	// Judge sends p to the model and returns its answer. On an error
	// (rate limit, network, refusal) the reply's ID, Model and usage
	// fields may still be set, and are kept in the JudgeCall; its Text is
	// ignored.
	Judge(ctx context.Context, p JudgePrompt) (JudgeReply, error)
}

// JudgePrompt is one request to a Judge.
type JudgePrompt struct {
	CaseID  string // the case graded
	Grader  string // the assertion's name
	Attempt int    // 1 for the first call of this grade; AgentV mode retries
	System  string // the output format the judge must answer in
	User    string // the grading prompt: criteria, question, answer, rubric
}

// JudgeReply is a Judge's answer.
type JudgeReply struct {
	// ID identifies the call for the caller (evalrun uses the span id of
	// the model.call record it stores for the call); eval only keeps it.
	ID string
	// Model is the judge model's name; Provider its provider, if known.
	Model, Provider string
	// Text is the model's answer, parsed by eval as JSON.
	Text string
	// Token counts and cost of the call; CostUSD 0 means unknown.
	InputTokens, OutputTokens, CachedTokens, ReasoningTokens int64
	CostUSD                                                  float64
}

// JudgeCall is one call a judge grader made, kept in its AssertionResult
// so that the grade can be inspected: the prompt, the raw answer, the
// usage, and the error when the call failed or its answer could not be
// parsed.
type JudgeCall struct {
	Prompt   JudgePrompt
	Reply    JudgeReply
	Start    time.Time     // when the call was made
	Duration time.Duration // how long it took
	// Err is why the call failed (CallFailed) or why its answer could not
	// be read (ParseError); empty when the answer was used.
	Err string
	// CallFailed is set when the Judge returned an error; ParseError when
	// its answer was not the JSON the grader asked for.
	CallFailed, ParseError bool
}

// RubricItem is one criterion of a rubric grader (rubric, rubrics, bare
// strings, llm-grader with rubrics:), as AgentV reads it.
type RubricItem struct {
	ID       string  // "rubric-N" when not given
	Outcome  string  // what a good answer does
	Weight   float64 // share of the rubric score; 1 when not given
	Required bool    // an unsatisfied required item fails the grader; default true
	// MinScore (0..1) is the bar of a score-range item; nil: none.
	MinScore *float64
	// Operator is "correctness", "contradiction" or "".
	Operator string
	// ScoreRanges, when set, make the item scored 0-10 instead of
	// satisfied or not.
	ScoreRanges []ScoreRange
}

// ScoreRange is one band of an analytic rubric item: scores Min..Max (of
// 0..10) mean Outcome.
type ScoreRange struct {
	Min, Max int
	Outcome  string
}

// AgentV's prompts (packages/core, LlmGrader, AgentV 4.42.4), kept word for
// word so that a judge grades as it does under AgentV.
const defaultGraderTemplate = `You are an expert grader. Your goal is to grade the answer based on how well it achieves the criteria for the original task.

Use the reference_answer as a gold standard for a high-quality response (if provided). The reference_answer may be a simple text response, or it may contain a sequence of expected agent messages including tool calls. When it contains multiple messages, the last message represents the final expected answer. The answer does not need to match it verbatim, but should capture the key points and follow the same spirit.

Be concise and focused in your evaluation. Provide succinct, specific feedback rather than verbose explanations.

[[ ## criteria ## ]]
{{criteria}}

[[ ## question ## ]]
{{input}}

[[ ## reference_answer ## ]]
{{expected_output}}

[[ ## answer ## ]]
{{output}}`

const freeformSchema = `You must respond with a single JSON object matching this schema:

{
  "score": <number between 0.0 and 1.0>,
  "assertions": [
    {
      "text": "<brief description of what was checked>",
      "passed": <boolean>,
      "evidence": "<concise evidence, 1-2 sentences, optional>"
    }
  ],
  "details": {<optional object with domain-specific structured metrics>}
}`

const rubricSchema = `You are an expert grader. Evaluate the candidate answer against each rubric item.
You must return a valid JSON object matching this schema:
{
  "checks": [
    {
      "id": "string (rubric id)",
      "satisfied": boolean,
      "reasoning": "string (brief explanation)"
    }
  ],
  "overall_reasoning": "string (summary)"
}`

const scoreRangeSchema = `You are an expert grader. Score the candidate answer on each criterion.
You must return a valid JSON object matching this schema:
{
  "checks": [
    {
      "id": "string (criterion id)",
      "score": integer (0-10),
      "reasoning": "string (brief explanation for score)"
    }
  ],
  "overall_reasoning": "string (summary, optional)"
}

Important: The "score" must be an integer from 0 to 10 that falls within one of the defined score ranges for that criterion.`

var operatorGuidance = map[string]string{
	"correctness":   "Correctness: mark satisfied only when the answer positively supports or fulfills the outcome. Omission or contradiction should not satisfy it.",
	"contradiction": "Contradiction guard: mark satisfied when the answer does not make a claim that contradicts the outcome. Do not require the answer to mention the outcome; mark unsatisfied only for incompatible claims.",
}

// templateVar matches {{ name }} in a grader template.
var templateVar = regexp.MustCompile(`\{\{\s*([a-zA-Z0-9_]+)\s*\}\}`)

// templateVars are the variables a custom grader template may use.
var templateVars = map[string]bool{"expected_output": true, "criteria": true, "metadata": true, "metadata_json": true,
	"rubrics": true, "rubrics_json": true, "input": true, "output": true, "file_changes": true, "tool_calls": true}

// hasTemplateVars reports whether s uses a template variable: AgentV then
// takes an inline prompt as the whole grading prompt rather than as the
// criteria.
func hasTemplateVars(s string) bool {
	for _, m := range templateVar.FindAllStringSubmatch(s, -1) {
		if templateVars[m[1]] {
			return true
		}
	}
	return false
}

func substitute(tmpl string, vars map[string]string) string {
	return templateVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := templateVar.FindStringSubmatch(m)[1]
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}

// modelGraderPrompt is AgentV's buildModelGraderPrompt: the prompt its
// promptfoo importer gives g-eval and factuality.
func modelGraderPrompt(kind, value string) string {
	switch kind {
	case "g-eval":
		if value != "" {
			return "Grade the assistant response using step-by-step reasoning against this rubric:\n" + value
		}
		return "Grade the assistant response using step-by-step reasoning."
	case "factuality":
		if value != "" {
			return "Determine whether the assistant response is factually consistent with these reference facts:\n" + value
		}
		return "Determine whether the assistant response is factually correct."
	}
	if value != "" {
		return value
	}
	return "Grade the response for " + kind + "."
}

// keyInputFields are the arguments AgentV shows for well-known tools in
// the tool_calls section of a judge prompt.
var keyInputFields = map[string][]string{
	"Skill": {"skill"}, "Read": {"file_path"}, "Write": {"file_path"}, "Edit": {"file_path"},
	"Bash": {"command"}, "Grep": {"pattern"}, "Glob": {"pattern"},
}

// formatToolCalls is AgentV's formatToolCalls: "- tool: detail" per call,
// the detail being the tool's key argument or the first short string
// argument. Arguments are looked at in the order the call gave them, as
// AgentV does (Object.values keeps insertion order): ToolCall.ArgsOrder,
// then, for keys it does not list, sorted order.
func formatToolCalls(calls []ToolCall) string {
	trunc := func(s string) string {
		if r := []rune(s); len(r) > 120 {
			return string(r[:120]) + "…"
		}
		return s
	}
	var lines []string
	for _, c := range calls {
		detail := ""
		if c.Args != nil {
			for _, f := range keyInputFields[c.Name] {
				if s, ok := c.Args[f].(string); ok && s != "" {
					detail = trunc(s)
					break
				}
			}
			if detail == "" {
				for _, k := range c.argKeys() {
					if s, ok := c.Args[k].(string); ok && s != "" && len([]rune(s)) <= 120 {
						detail = trunc(s)
						break
					}
				}
			}
		}
		if detail != "" {
			lines = append(lines, "- "+c.Name+": "+detail)
		} else {
			lines = append(lines, "- "+c.Name)
		}
	}
	return strings.Join(lines, "\n")
}

// judgeContext is what the prompts are built from.
type judgeContext struct {
	question, criteria, reference, candidate, toolCalls string
	template                                            string // a custom grader template, or ""
	rubrics                                             []RubricItem
}

func newJudgeContext(c Case, js *JudgeSpec, t Trajectory) judgeContext {
	q := c.Question
	if q == "" { // a Case built in Go
		q = c.Input
	}
	jc := judgeContext{question: q, criteria: c.Criteria, reference: c.Reference,
		candidate: t.Output, toolCalls: formatToolCalls(t.Calls), rubrics: js.Rubrics}
	switch {
	case js.Prompt == "":
	case js.Template || hasTemplateVars(js.Prompt):
		jc.template = js.Prompt
	default:
		jc.criteria = js.Prompt // an inline prompt replaces the case's criteria
	}
	return jc
}

func (jc judgeContext) vars() map[string]string {
	rub, rubJSON := "", ""
	if len(jc.rubrics) > 0 {
		rub, rubJSON = rubricsJSON(jc.rubrics, true), rubricsJSON(jc.rubrics, false)
	}
	return map[string]string{
		"input": strings.TrimSpace(jc.question), "output": strings.TrimSpace(jc.candidate),
		"expected_output": strings.TrimSpace(jc.reference), "criteria": strings.TrimSpace(jc.criteria),
		"metadata": "", "metadata_json": "", "rubrics": rub, "rubrics_json": rubJSON,
		"file_changes": "", "tool_calls": jc.toolCalls,
	}
}

// head is the part every rubric prompt starts with.
func (jc judgeContext) head(intro ...string) []string {
	parts := append(intro, "", "[[ ## question ## ]]", jc.question, "", "[[ ## criteria ## ]]", jc.criteria, "")
	if strings.TrimSpace(jc.reference) != "" {
		parts = append(parts, "[[ ## reference_answer ## ]]", jc.reference, "")
	}
	parts = append(parts, "[[ ## answer ## ]]", jc.candidate, "")
	if jc.toolCalls != "" {
		parts = append(parts, "[[ ## tool_calls ## ]]", jc.toolCalls, "")
	}
	return parts
}

func (jc judgeContext) freeformPrompt() string {
	if jc.template != "" {
		return substitute(jc.template, jc.vars())
	}
	p := substitute(defaultGraderTemplate, jc.vars())
	if jc.toolCalls != "" {
		p += "\n\n[[ ## tool_calls ## ]]\n" + jc.toolCalls
	}
	return p
}

func weightLabel(w float64) string {
	if w != 1 {
		return fmt.Sprintf(" (weight: %s)", jsNum(w))
	}
	return ""
}

// jsNum formats a number as JavaScript's String(n) does for the values
// rubric files hold.
func jsNum(f float64) string { return fmt.Sprintf("%g", f) }

func operators(items []RubricItem) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range items {
		if r.Operator != "" && !seen[r.Operator] {
			seen[r.Operator] = true
			out = append(out, operatorGuidance[r.Operator])
		}
	}
	return out
}

func (jc judgeContext) rubricPrompt() string {
	if jc.template != "" {
		return substitute(jc.template, jc.vars())
	}
	parts := jc.head("You are an expert grader. Evaluate the candidate answer against each rubric item below.")
	parts = append(parts, "[[ ## rubrics ## ]]")
	if g := operators(jc.rubrics); len(g) > 0 {
		parts = append(parts, "", "Operator guidance:")
		for _, s := range g {
			parts = append(parts, "- "+s)
		}
		parts = append(parts, "")
	}
	for _, r := range jc.rubrics {
		req, op := "", ""
		if r.Required {
			req = " (REQUIRED)"
		}
		if r.Operator != "" {
			op = " (operator: " + r.Operator + ")"
		}
		parts = append(parts, fmt.Sprintf("- [%s]%s%s%s: %s", r.ID, req, weightLabel(r.Weight), op, r.Outcome))
	}
	parts = append(parts, "", "For each rubric, determine if it is satisfied and provide brief reasoning.")
	return strings.Join(parts, "\n")
}

func (jc judgeContext) scoreRangePrompt() string {
	if jc.template != "" {
		return substitute(jc.template, jc.vars())
	}
	parts := jc.head("You are an expert grader. Score the candidate answer on each criterion below using the provided score ranges.",
		"For each criterion, output an integer score from 0 to 10 based on which score range best matches the answer.")
	parts = append(parts, "[[ ## scoring_criteria ## ]]")
	for _, r := range jc.rubrics {
		minLabel := ""
		if r.MinScore != nil {
			minLabel = fmt.Sprintf(" [REQUIRED: min score %s]", jsNum(*r.MinScore))
		}
		parts = append(parts, "", fmt.Sprintf("### Criterion: %s%s%s", r.ID, weightLabel(r.Weight), minLabel))
		if r.Operator != "" {
			parts = append(parts, "Operator: "+r.Operator)
		}
		if r.Outcome != "" {
			parts = append(parts, "Description: "+r.Outcome)
		}
		if len(r.ScoreRanges) > 0 {
			parts = append(parts, "Score ranges:")
			for _, sr := range r.ScoreRanges {
				label := fmt.Sprintf("%d-%d", sr.Min, sr.Max)
				if sr.Min == sr.Max {
					label = fmt.Sprint(sr.Min)
				}
				parts = append(parts, fmt.Sprintf("  - Score %s: %s", label, sr.Outcome))
			}
		}
	}
	if g := operators(jc.rubrics); len(g) > 0 {
		parts = append(parts, "")
		parts = append(parts, g...)
	}
	parts = append(parts, "", "For each criterion, provide an integer score 0-10 that matches one of its defined score ranges.")
	return strings.Join(parts, "\n")
}

// structureRepairPrompt is AgentV's buildStructureRepairPrompt, sent once
// after three unreadable answers (ModeAgentV).
func structureRepairPrompt(validationError, invalid string) string {
	return strings.Join([]string{
		"The following evaluation response has useful grading content but invalid JSON structure.",
		"Repair it to satisfy the schema in the system prompt.",
		"Preserve the evaluation meaning, do not re-grade the answer, and return only a single JSON object.",
		"",
		"Validation error:",
		validationError,
		"",
		"Invalid response:",
		invalid,
	}, "\n")
}

func hasScoreRanges(items []RubricItem) bool {
	for _, r := range items {
		if len(r.ScoreRanges) > 0 {
			return true
		}
	}
	return false
}

// judgeAssertion grades a with opts.Judge. The grade follows AgentV's
// LlmGrader: a free-form score in [0,1] (llm-grader without rubrics,
// llm-rubric, g-eval, factuality, goal-success), a checklist of rubric
// items combined by weight (rubric, rubrics, bare strings), or 0-10 scores
// per item (score_ranges). See docs/eval-semantics.md.
func judgeAssertion(ctx context.Context, ar *AssertionResult, c Case, a Assertion, t Trajectory, opts Options) {
	if opts.Judge == nil {
		ar.Verdict, ar.Reason = Skip, NoJudgeReason
		return
	}
	agentv := opts.Mode == ModeAgentV
	jc := newJudgeContext(c, a.Judge, t)
	var system, user string
	var read func(string) error
	switch {
	case len(a.Judge.Rubrics) > 0 && hasScoreRanges(a.Judge.Rubrics):
		system, user = scoreRangeSchema, jc.scoreRangePrompt()
		read = func(text string) error { return scoreRangeGrade(ar, text, a.Judge.Rubrics, agentv) }
	case len(a.Judge.Rubrics) > 0:
		system, user = rubricSchema, jc.rubricPrompt()
		read = func(text string) error { return rubricGrade(ar, text, a.Judge.Rubrics, agentv) }
	default:
		system, user = freeformSchema, jc.freeformPrompt()
		read = func(text string) error { return freeformGrade(ar, text, agentv) }
	}
	call := func(attempt int, user string) (string, bool) {
		p := JudgePrompt{CaseID: c.ID, Grader: a.Name, Attempt: attempt, System: system, User: user}
		start := time.Now()
		reply, err := opts.Judge.Judge(ctx, p)
		jcall := JudgeCall{Prompt: p, Reply: reply, Start: start, Duration: time.Since(start)}
		if err != nil {
			jcall.CallFailed, jcall.Err = true, err.Error()
			jcall.Reply.Text = ""
		}
		ar.JudgeCalls = append(ar.JudgeCalls, jcall)
		return reply.Text, err == nil
	}
	parsed := func(text string) bool {
		*ar = AssertionResult{Name: ar.Name, Kind: ar.Kind, Pos: ar.Pos, Weight: ar.Weight, JudgeCalls: ar.JudgeCalls}
		if err := read(text); err != nil {
			last := &ar.JudgeCalls[len(ar.JudgeCalls)-1]
			last.ParseError, last.Err = true, err.Error()
			return false
		}
		return true
	}
	if !agentv {
		// One call: an answer that fails or cannot be read is a grading
		// error with the raw answer kept, never a pass and never retried
		// behind the user's back (each call costs).
		text, ok := call(1, user)
		switch {
		case !ok:
			ar.Verdict, ar.Reason = CouldNotRun, fmt.Sprintf("judge call failed: %s", ar.JudgeCalls[0].Err)
		case !parsed(text):
			ar.Verdict = CouldNotRun
			ar.Reason = fmt.Sprintf("the judge's answer could not be read: %s; raw answer: %s", ar.JudgeCalls[0].Err, quoteRaw(text))
		}
		return
	}
	// AgentV 4.42.4 (runWithRetry): three attempts, then one request to
	// repair the last readable-looking answer; then the grader is skipped
	// with score 0.
	var lastErr, lastInvalid string
	for attempt := 1; attempt <= 3; attempt++ {
		text, ok := call(attempt, user)
		if !ok {
			lastErr = ar.JudgeCalls[len(ar.JudgeCalls)-1].Err
			continue
		}
		if parsed(text) {
			return
		}
		lastErr = ar.JudgeCalls[len(ar.JudgeCalls)-1].Err
		lastInvalid = ""
		if strings.TrimSpace(text) != "" {
			lastInvalid = text
		}
	}
	if lastInvalid != "" {
		text, ok := call(4, structureRepairPrompt(lastErr, lastInvalid))
		if ok && parsed(text) {
			return
		}
		lastErr = ar.JudgeCalls[len(ar.JudgeCalls)-1].Err
	}
	// AgentV then gives the grader the skip verdict, and a skipped grader
	// makes its whole test an execution error scored 0 (Evaluate zeroes
	// the case for a judge grader that could not run in ModeAgentV).
	ar.Score, ar.Verdict = 0, CouldNotRun
	msg := "Failed to parse evaluator response after 3 attempts and 1 structure-fix attempt: " + lastErr
	ar.Checks = []Check{{Text: "Grader parse failure after 3 attempts: " + msg}}
	ar.Reason = "the judge failed 3 times (AgentV skips the grader and the test is an execution error scored 0): " + msg
	if lastInvalid != "" {
		ar.Reason += "; raw answer: " + quoteRaw(lastInvalid)
	}
}

// NoJudgeReason is the reason given for a judge grader skipped because no
// Judge is configured. evalrun recognizes it to say how to configure one.
const NoJudgeReason = "needs an LLM judge, and no judge model is configured; this grader is not scored"

// quoteRaw quotes a judge's raw answer for a reason, cut to a readable
// length (the whole answer is kept in the grader's JudgeCalls).
func quoteRaw(s string) string {
	const limit = 500
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit]) + "…"
	}
	return fmt.Sprintf("%q", s)
}
