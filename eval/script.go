package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// DefaultGraderTimeout bounds one run of a code-grader command when
// Options.GraderTimeout is 0.
const DefaultGraderTimeout = time.Minute

// maxGraderOutput caps what is kept of a grader's standard output and
// error, so a runaway grader cannot exhaust memory.
const maxGraderOutput = 1 << 20

// scriptPayload is what a code-grader reads on standard input: the fields
// of AgentV 4.42.4's payload, snake_case, in its order. Fields Loupe does
// not record are null or empty, as AgentV sends them for a transcript.
type scriptPayload struct {
	Criteria       string         `json:"criteria"`
	ExpectedOutput []any          `json:"expected_output"`
	Output         string         `json:"output"`
	Messages       []payloadMsg   `json:"messages"`
	InputFiles     []string       `json:"input_files"`
	Input          []payloadMsg   `json:"input"`
	Metadata       any            `json:"metadata"`
	Trace          *payloadTrace  `json:"trace"`
	TraceSummary   *payloadTrace  `json:"trace_summary"`
	TokenUsage     *payloadTokens `json:"token_usage"`
	CostUSD        *float64       `json:"cost_usd"`
	DurationMs     *float64       `json:"duration_ms"`
	StartTime      any            `json:"start_time"`
	EndTime        any            `json:"end_time"`
	FileChanges    any            `json:"file_changes"`
	WorkspacePath  any            `json:"workspace_path"`
	Config         map[string]any `json:"config"`
}

type payloadMsg struct {
	Role      string        `json:"role"`
	Content   string        `json:"content"`
	ToolCalls []payloadCall `json:"tool_calls,omitempty"`
}

type payloadCall struct {
	Tool       string   `json:"tool"`
	Input      any      `json:"input,omitempty"`
	Output     any      `json:"output,omitempty"`
	DurationMs *float64 `json:"duration_ms,omitempty"`
}

type payloadTrace struct {
	EventCount    int                  `json:"event_count"`
	ToolCalls     map[string]int       `json:"tool_calls"`
	ErrorCount    int                  `json:"error_count"`
	LLMCallCount  *int                 `json:"llm_call_count,omitempty"`
	ToolDurations map[string][]float64 `json:"tool_durations"`
	Messages      []payloadMsg         `json:"messages,omitempty"`
	Metadata      map[string]string    `json:"metadata,omitempty"`
}

type payloadTokens struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	Cached int64 `json:"cached,omitempty"`
}

// buildPayload renders what the command of s reads for case c and run t.
func buildPayload(c Case, t Trajectory, s *ScriptSpec) []byte {
	p := scriptPayload{Criteria: c.Criteria, ExpectedOutput: []any{}, Output: t.Output, InputFiles: []string{}, Config: s.Config}
	if c.Input != "" {
		p.Input = []payloadMsg{{Role: "user", Content: c.Input}}
	} else {
		p.Input = []payloadMsg{}
	}
	calls := make([]payloadCall, len(t.Calls))
	counts := map[string]int{}
	durs := map[string][]float64{}
	for i, tc := range t.Calls {
		calls[i] = payloadCall{Tool: tc.Name, Input: tc.input(), Output: tc.Output}
		if tc.Duration != nil {
			ms := msOf(*tc.Duration)
			calls[i].DurationMs = &ms
			durs[tc.Name] = append(durs[tc.Name], ms)
		}
		counts[tc.Name]++
	}
	// Calls go on the messages that made them when the source says
	// which (transcripts do), else all on the first assistant message.
	placed := 0
	for _, m := range t.Messages {
		placed += max(m.Calls, 0)
	}
	grouped := placed == len(calls)
	attached, next := len(calls) == 0, 0
	for _, m := range t.Messages {
		pm := payloadMsg{Role: m.Role, Content: m.Content}
		switch {
		case grouped && m.Calls > 0:
			pm.ToolCalls, next = calls[next:next+m.Calls], next+m.Calls
			attached = true
		case !grouped && !attached && m.Role == "assistant":
			pm.ToolCalls, attached = calls, true
		}
		p.Messages = append(p.Messages, pm)
	}
	if !attached {
		p.Messages = append(p.Messages, payloadMsg{Role: "assistant", ToolCalls: calls})
	}
	if p.Messages == nil {
		p.Messages = []payloadMsg{}
	}
	llm := t.LLMCalls
	if llm == nil { // AgentV counts the assistant messages of a transcript
		n := 0
		for _, m := range t.Messages {
			if m.Role == "assistant" {
				n++
			}
		}
		llm = &n
	}
	summary := payloadTrace{EventCount: t.EventCount, ToolCalls: counts, ErrorCount: t.Errors, LLMCallCount: llm, ToolDurations: durs}
	trace := summary
	trace.Messages = p.Messages
	trace.Metadata = map[string]string{"eval_case_id": c.ID}
	p.Trace, p.TraceSummary = &trace, &summary
	if u := t.Usage; u != nil {
		p.TokenUsage = &payloadTokens{Input: u.Input, Output: u.Output, Cached: u.Cached}
	}
	p.CostUSD = t.CostUSD
	if t.Duration != nil {
		ms := msOf(*t.Duration)
		p.DurationMs = &ms
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil { // only unencodable Config values (NaN) get here
		p.Config = nil
		b, _ = json.MarshalIndent(p, "", "  ")
	}
	return b
}

// cappedBuffer keeps the first maxGraderOutput bytes written to it.
type cappedBuffer struct{ bytes.Buffer }

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := maxGraderOutput - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// scriptAssertion runs a code-grader and scores its result as AgentV
// 4.42.4 does. A grader that cannot be run, exits non-zero with JSON or an
// error message, or (outside ModeAgentV) prints JSON that is not a result
// object is never a pass: in ModeAgentV it scores 0 with AgentV's "Code
// evaluator failed" error; in ModeDefault it could not run.
func scriptAssertion(ctx context.Context, ar *AssertionResult, c Case, s *ScriptSpec, t Trajectory, opts Options) {
	agentv := opts.Mode == ModeAgentV
	fail := func(msg string) {
		if agentv {
			ar.Score = 0
			ar.Checks = []Check{{Text: "Code evaluator failed: " + msg}}
			return
		}
		ar.Verdict, ar.Reason = CouldNotRun, fmt.Sprintf("grader command %s: %s", quoteArgv(s.Command), msg)
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		fail("no command to run; give the grader command: [program, args…]")
		return
	}
	timeout := opts.GraderTimeout
	if timeout <= 0 {
		timeout = DefaultGraderTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Command[0], s.Command[1:]...)
	cmd.Dir = s.Dir
	cmd.Stdin = bytes.NewReader(buildPayload(c, t, s))
	var stdout, stderr cappedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second // a grandchild holding the pipes open must not hang us
	setProcessGroup(cmd)
	err := cmd.Run()
	exit := 0
	var ee *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		fail(fmt.Sprintf("Process timed out after %dms (raise --grader-timeout or make the grader faster)", timeout.Milliseconds()))
		return
	case errors.As(err, &ee) && ee.Exited():
		exit = ee.ExitCode()
	case err != nil:
		fail(fmt.Sprintf("could not start: %v (check the command and cwd %s)", err, s.Dir))
		return
	}
	if msg := graderResult(ar, stdout.String(), stderr.String(), exit, agentv); msg != "" {
		fail(msg)
	}
}

// graderResult scores what a code grader printed and how it exited, as
// AgentV 4.42.4 does, into ar. It returns a non-empty message when the
// grader failed (the caller reports it); ar is then left unscored.
func graderResult(ar *AssertionResult, stdout, stderr string, exit int, agentv bool) string {
	out := strings.TrimSpace(strings.ReplaceAll(stdout, "\r\n", "\n"))
	errText := strings.TrimSpace(strings.ReplaceAll(stderr, "\r\n", "\n"))
	looksJSON := strings.HasPrefix(out, "{") || strings.HasPrefix(out, "[")
	if exit != 0 && (looksJSON || errText != "") {
		msg := fmt.Sprintf("Code evaluator exited with code %d", exit)
		if errText != "" {
			msg += ": " + tail(errText, 2000)
		}
		return msg
	}
	var parsed map[string]any
	if json.Unmarshal([]byte(out), &parsed) != nil {
		parsed = nil
	}
	if parsed == nil {
		if looksJSON && !agentv {
			return fmt.Sprintf("printed %q, which is not a JSON object like {\"score\": 0.8, \"assertions\": [...]}", tail(out, 200))
		}
		// Not JSON: the exit status is the verdict (AgentV does the same,
		// also for JSON that does not parse).
		text := out
		if text == "" {
			text = fmt.Sprintf("exit %d", exit)
		}
		ar.Checks = []Check{{Text: text, Passed: exit == 0}}
		if exit == 0 {
			ar.Score = 1
		}
		return ""
	}
	var checks []Check
	if raw, ok := parsed["assertions"].([]any); ok {
		for _, x := range raw {
			m, ok := x.(map[string]any)
			if !ok {
				continue
			}
			text, ok := m["text"].(string)
			if !ok {
				continue
			}
			if ev, ok := m["evidence"].(string); ok && ev != "" {
				text += " (" + ev + ")"
			}
			checks = append(checks, Check{Text: text, Passed: truthy(m["passed"])})
		}
	}
	score := 0.0
	switch sc := parsed["score"].(type) {
	case float64:
		score = clamp(sc)
	case nil:
		passed := 0
		for _, ch := range checks {
			if ch.Passed {
				passed++
			}
		}
		if len(checks) > 0 {
			score = float64(passed) / float64(len(checks))
		}
	default:
		if !agentv {
			return fmt.Sprintf("printed score %v, which is not a number in [0,1]", sc)
		}
	}
	if r, ok := parsed["reasoning"].(string); ok && r != "" {
		checks = append(checks, Check{Text: r, Passed: true, Skipped: true})
	}
	ar.Checks, ar.Score = checks, score
	return ""
}

// truthy is JavaScript's Boolean(x) for decoded JSON.
func truthy(x any) bool {
	switch v := x.(type) {
	case nil:
		return false
	case bool:
		return v
	case float64:
		return v != 0 && v == v
	case string:
		return v != ""
	}
	return true
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if strings.ContainsAny(a, " \t\"'") || a == "" {
			a = fmt.Sprintf("%q", a)
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
