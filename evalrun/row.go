package evalrun

import (
	"bufio"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/trace"
)

// Row is one result line of `loupe eval --out`, compatible with the rows of
// AgentV's results JSONL (index.jsonl): timestamp, test_id, suite, target,
// score, scores (one per grader), assertions and a trace summary use
// AgentV's field names, so tools reading AgentV results read these. Loupe
// adds verdict, threshold, mode, metrics, eval_file, trace_id, error and
// warnings (graders ignored or dropped at load, a command that printed no
// trace); a grader that was skipped or could not run has its verdict
// ("skip", "error") and reason in its scores entry.
//
// Output and Records (the agent's messages with tool inputs and outputs,
// and the full trace) are filled only on request (RowOptions.IncludeTrace):
// traces may hold private data, so rows are summaries by default, as in
// AgentV.
type Row struct {
	Timestamp  time.Time       `json:"timestamp"`
	TestID     string          `json:"test_id"`
	Suite      string          `json:"suite,omitempty"`
	Target     string          `json:"target,omitempty"`
	Score      float64         `json:"score"`
	Verdict    eval.Verdict    `json:"verdict"`
	Threshold  float64         `json:"threshold"`
	Mode       string          `json:"mode"`
	Scores     []GraderScore   `json:"scores,omitempty"`
	Assertions []AssertionRow  `json:"assertions"`
	Metrics    *Metrics        `json:"metrics,omitempty"`
	Trace      *TraceSummary   `json:"trace,omitempty"`
	TraceID    string          `json:"trace_id,omitempty"`
	EvalFile   string          `json:"eval_file,omitempty"`
	Error      string          `json:"error,omitempty"`
	Warnings   []string        `json:"warnings,omitempty"`
	Output     []OutputMessage `json:"output,omitempty"`
	Records    []trace.Record  `json:"records,omitempty"`
}

// GraderScore is one assertion's result, AgentV's "scores" entry. Type is
// spelled as AgentV writes it: built-in types with underscores
// (tool_trajectory, execution_metrics), namespaced ones as they are
// (trajectory:tool-sequence).
type GraderScore struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Score      float64        `json:"score"`
	Verdict    eval.Verdict   `json:"verdict"`
	Weight     float64        `json:"weight"`
	Reason     string         `json:"reason,omitempty"`
	Assertions []AssertionRow `json:"assertions,omitempty"`
	Metrics    *Metrics       `json:"metrics,omitempty"`
	// Reasoning is an LLM judge's overall reasoning; Judge its calls.
	Reasoning string    `json:"reasoning,omitempty"`
	Judge     *JudgeRow `json:"judge,omitempty"`
}

// JudgeRow sums up the LLM judge calls of one grader. The stored
// evaluation holds each call in full (prompt, answer, usage) as the
// model.call record whose span id a call names.
type JudgeRow struct {
	Model        string         `json:"model"`
	InputTokens  int64          `json:"input_tokens"`
	OutputTokens int64          `json:"output_tokens"`
	CostUSD      *float64       `json:"cost_usd,omitempty"` // nil when no call was priced
	Calls        []JudgeCallRow `json:"calls"`
}

// JudgeCallRow is one judge call. Answer is the judge's raw answer, kept
// when it could not be read (the reason is in Error); Prompt, with
// RowOptions.IncludeTrace, is the grading prompt.
type JudgeCallRow struct {
	SpanID     string  `json:"span_id,omitempty"`
	Attempt    int     `json:"attempt"`
	DurationMs float64 `json:"duration_ms"`
	Error      string  `json:"error,omitempty"`
	Answer     string  `json:"answer,omitempty"`
	Prompt     string  `json:"prompt,omitempty"`
}

// AssertionRow is one elementary check, AgentV's {text, passed}.
type AssertionRow struct {
	Text     string `json:"text"`
	Passed   bool   `json:"passed"`
	Skipped  bool   `json:"skipped,omitempty"`
	Evidence string `json:"evidence,omitempty"` // an LLM judge's reason for this check
}

// Metrics are eval.CallMetrics with JSON names.
type Metrics struct {
	Matched   int     `json:"matched"`
	Expected  int     `json:"expected"`
	Actual    int     `json:"actual"`
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
	Order     float64 `json:"order"`
}

// TraceSummary is AgentV's trace summary: event count, tool names (unique,
// sorted), calls by tool, error count, and when known token usage, cost,
// duration, model-call count and per-tool durations in milliseconds (in
// call order).
type TraceSummary struct {
	EventCount      int                  `json:"event_count"`
	ToolNames       []string             `json:"tool_names"`
	ToolCallsByName map[string]int       `json:"tool_calls_by_name"`
	ErrorCount      int                  `json:"error_count"`
	TokenUsage      *TokenUsage          `json:"token_usage,omitempty"`
	CostUSD         *float64             `json:"cost_usd,omitempty"`
	DurationMs      *float64             `json:"duration_ms,omitempty"`
	LLMCallCount    *int                 `json:"llm_call_count,omitempty"`
	ToolDurations   map[string][]float64 `json:"tool_durations,omitempty"`
}

// TokenUsage is AgentV's token_usage.
type TokenUsage struct {
	Input     int64 `json:"input"`
	Output    int64 `json:"output"`
	Cached    int64 `json:"cached,omitempty"`
	Reasoning int64 `json:"reasoning,omitempty"`
}

// OutputMessage is one of the agent's messages, AgentV's "output" entry.
type OutputMessage struct {
	Role      string       `json:"role"`
	Content   string       `json:"content"`
	ToolCalls []OutputCall `json:"tool_calls,omitempty"`
}

// OutputCall is one tool call in an OutputMessage.
type OutputCall struct {
	Tool       string   `json:"tool"`
	Input      any      `json:"input,omitempty"`
	Output     any      `json:"output,omitempty"`
	Error      string   `json:"error,omitempty"`
	DurationMs *float64 `json:"duration_ms,omitempty"`
}

// RowOptions configure NewRow.
type RowOptions struct {
	// IncludeTrace adds the agent's messages with tool inputs and outputs
	// (Output) and the run's records (Records) to the row.
	IncludeTrace bool
}

// NewRow renders one result as a Row.
func NewRow(rep *Report, res Result, o RowOptions) Row {
	cr := res.Result
	row := Row{
		Timestamp:  res.Time.UTC(),
		TestID:     res.Case.ID,
		Target:     rep.Target,
		Score:      round(cr.Score),
		Verdict:    cr.Verdict,
		Threshold:  cr.Threshold,
		Mode:       cr.Mode.String(),
		Assertions: []AssertionRow{},
		Metrics:    metrics(cr.Metrics),
	}
	if res.File != nil {
		row.Suite = suiteName(res.File.Path)
		row.EvalFile = res.File.Path
	}
	if res.Err != nil {
		row.Error = res.Err.Error()
	}
	row.Warnings = caseWarnings(res)
	for _, a := range cr.Assertions {
		g := GraderScore{
			Name: a.Name, Type: agentvType(a.Kind), Score: round(a.Score),
			Verdict: a.Verdict, Weight: a.Weight, Reason: a.Reason, Metrics: metrics(a.Metrics),
			Reasoning: a.Reasoning, Judge: judgeRow(a.JudgeCalls, o.IncludeTrace),
		}
		for _, c := range a.Checks {
			ar := AssertionRow{Text: c.Text, Passed: c.Passed, Skipped: c.Skipped, Evidence: c.Evidence}
			g.Assertions = append(g.Assertions, ar)
			row.Assertions = append(row.Assertions, ar)
		}
		row.Scores = append(row.Scores, g)
	}
	if res.Run != nil {
		row.Trace = Summarize(res.Run.Trajectory)
		if !res.Run.TraceID.IsZero() {
			row.TraceID = res.Run.TraceID.String()
		}
		if o.IncludeTrace {
			row.Output = outputMessages(res.Run.Trajectory)
			row.Records = res.Run.Records
		}
	}
	return row
}

// judgeRow sums up a grader's judge calls; nil when it made none.
func judgeRow(calls []eval.JudgeCall, prompts bool) *JudgeRow {
	if len(calls) == 0 {
		return nil
	}
	j := &JudgeRow{Model: calls[0].Reply.Model, Calls: []JudgeCallRow{}}
	var cost float64
	for _, c := range calls {
		j.InputTokens += c.Reply.InputTokens
		j.OutputTokens += c.Reply.OutputTokens
		cost += c.Reply.CostUSD
		cr := JudgeCallRow{SpanID: c.Reply.ID, Attempt: c.Prompt.Attempt, DurationMs: ms(c.Duration), Error: c.Err}
		if c.ParseError {
			cr.Answer = c.Reply.Text
		}
		if prompts {
			cr.Prompt = c.Prompt.User
		}
		j.Calls = append(j.Calls, cr)
	}
	if cost > 0 {
		j.CostUSD = &cost
	}
	return j
}

// caseWarnings lists what did not stop a case but changed what was graded:
// graders ignored or dropped at load (--compat agentv) and a run obtained
// oddly (a command that printed no trace).
func caseWarnings(res Result) []string {
	var out []string
	for _, w := range res.Case.Warnings {
		out = append(out, w.Error())
	}
	if res.Run != nil && res.Run.Warning != "" {
		out = append(out, res.Run.Warning)
	}
	return out
}

// Summarize computes AgentV's trace summary of a trajectory.
func Summarize(t eval.Trajectory) *TraceSummary {
	s := &TraceSummary{
		EventCount:      t.EventCount,
		ToolNames:       []string{},
		ToolCallsByName: map[string]int{},
		ErrorCount:      t.Errors,
	}
	for _, c := range t.Calls {
		s.ToolCallsByName[c.Name]++
		if c.Duration != nil {
			if s.ToolDurations == nil {
				s.ToolDurations = map[string][]float64{}
			}
			s.ToolDurations[c.Name] = append(s.ToolDurations[c.Name], ms(*c.Duration))
		}
	}
	s.ToolNames = slices.Sorted(maps.Keys(s.ToolCallsByName))
	if s.ToolNames == nil {
		s.ToolNames = []string{}
	}
	if t.Usage != nil {
		s.TokenUsage = &TokenUsage{Input: t.Usage.Input, Output: t.Usage.Output, Cached: t.Usage.Cached, Reasoning: t.Usage.Reasoning}
	}
	s.CostUSD = t.CostUSD
	if t.Duration != nil {
		d := ms(*t.Duration)
		s.DurationMs = &d
	}
	s.LLMCallCount = t.LLMCalls
	return s
}

// outputMessages renders the conversation in AgentV's "output" shape: the
// messages other than the final answer, then the final answer as an
// assistant message carrying every tool call (a trajectory does not say
// which turn made which call).
func outputMessages(t eval.Trajectory) []OutputMessage {
	var out []OutputMessage
	for _, m := range t.Messages {
		out = append(out, OutputMessage{Role: m.Role, Content: m.Content})
	}
	if n := len(out); n > 0 && out[n-1].Role == "assistant" && out[n-1].Content == t.Output {
		out = out[:n-1]
	}
	final := OutputMessage{Role: "assistant", Content: t.Output}
	for _, c := range t.Calls {
		oc := OutputCall{Tool: c.Name, Output: c.Output, Error: c.Err}
		if c.Args != nil {
			oc.Input = c.Args
		} else {
			oc.Input = c.ArgsRaw
		}
		if c.Duration != nil {
			d := ms(*c.Duration)
			oc.DurationMs = &d
		}
		final.ToolCalls = append(final.ToolCalls, oc)
	}
	return append(out, final)
}

// WriteRows writes one JSON line per result, in report order.
func WriteRows(w io.Writer, rep *Report, o RowOptions) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, res := range rep.Results {
		if err := enc.Encode(NewRow(rep, res, o)); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func metrics(m *eval.CallMetrics) *Metrics {
	if m == nil {
		return nil
	}
	return &Metrics{Matched: m.Matched, Expected: m.Expected, Actual: m.Actual,
		Precision: round(m.Precision), Recall: round(m.Recall), F1: round(m.F1), Order: round(m.Order)}
}

// agentvType spells a kind as AgentV's results do.
func agentvType(k eval.Kind) string {
	if strings.Contains(string(k), ":") {
		return string(k)
	}
	return strings.ReplaceAll(string(k), "-", "_")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// round keeps scores readable in JSON (0.6666666666666666 → 0.6667).
func round(f float64) float64 {
	const k = 10000
	if f < 0 {
		return -round(-f)
	}
	return float64(int64(f*k+0.5)) / k
}
