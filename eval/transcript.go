package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// Recorded is one test case's run read from an AgentV transcript.
type Recorded struct {
	// TestID is the test_id shared by the entry's rows.
	TestID string
	// Trajectory is the run.
	Trajectory Trajectory
}

// transcriptRow is one line of an AgentV transcript JSONL file
// (schema_version agentv.transcript.v1): one message of one test's run.
type transcriptRow struct {
	TestID       string          `json:"test_id"`
	MessageIndex float64         `json:"message_index"`
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	ToolCalls    []struct {
		Tool       string          `json:"tool"`
		Input      json.RawMessage `json:"input"`
		Output     json.RawMessage `json:"output"`
		Status     string          `json:"status"`
		DurationMs *float64        `json:"duration_ms"`
	} `json:"tool_calls"`
	TokenUsage *struct {
		Input     float64 `json:"input"`
		Output    float64 `json:"output"`
		Cached    float64 `json:"cached"`
		Reasoning float64 `json:"reasoning"`
	} `json:"transcript_token_usage"`
	DurationMs *float64 `json:"transcript_duration_ms"`
	CostUSD    *float64 `json:"transcript_cost_usd"`
}

// maxLine bounds one JSONL line (16 MiB).
const maxLine = 16 << 20

// ParseTranscript reads an AgentV transcript JSONL stream (the format
// `agentv eval run --transcript` grades): one JSON object per line, one
// line per message, grouped into runs by test_id in order of first
// appearance and ordered by message_index within a run. Blank lines are
// skipped. name is used in error messages, which give the line number.
// Runs map positionally to the cases of an eval file, as in AgentV.
func ParseTranscript(name string, r io.Reader) ([]Recorded, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	type group struct {
		rows []transcriptRow
		line []int
	}
	var order []string
	groups := map[string]*group{}
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var row transcriptRow
		if err := json.Unmarshal(b, &row); err != nil {
			return nil, &Error{File: name, Pos: Position{Line: line, Column: 1}, Msg: fmt.Sprintf("invalid transcript row: %v; each line must be one JSON object", err)}
		}
		if row.TestID == "" {
			return nil, &Error{File: name, Pos: Position{Line: line, Column: 1}, Msg: "transcript row has no test_id; every row needs the id of the test it belongs to"}
		}
		g, ok := groups[row.TestID]
		if !ok {
			g = &group{}
			groups[row.TestID] = g
			order = append(order, row.TestID)
		}
		g.rows = append(g.rows, row)
		g.line = append(g.line, line)
	}
	if err := sc.Err(); err != nil {
		return nil, &Error{File: name, Pos: Position{Line: line + 1, Column: 1}, Msg: fmt.Sprintf("cannot read transcript: %v", err)}
	}
	out := make([]Recorded, 0, len(order))
	for _, id := range order {
		g := groups[id]
		idx := make([]int, len(g.rows))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return g.rows[idx[a]].MessageIndex < g.rows[idx[b]].MessageIndex })
		rows := make([]transcriptRow, len(idx))
		for i, j := range idx {
			rows[i] = g.rows[j]
		}
		t, err := buildTrajectory(rows)
		if err != nil {
			return nil, &Error{File: name, Pos: Position{Line: g.line[0], Column: 1}, Msg: fmt.Sprintf("test %q: %v", id, err)}
		}
		out = append(out, Recorded{TestID: id, Trajectory: t})
	}
	return out, nil
}

func buildTrajectory(rows []transcriptRow) (Trajectory, error) {
	var t Trajectory
	first := rows[0]
	if u := first.TokenUsage; u != nil {
		t.Usage = &Usage{Input: int64(u.Input), Output: int64(u.Output), Cached: int64(u.Cached), Reasoning: int64(u.Reasoning)}
	}
	if d := first.DurationMs; d != nil && finite(*d) {
		dd := msDuration(*d)
		t.Duration = &dd
	}
	if c := first.CostUSD; c != nil && finite(*c) {
		cc := *c
		t.CostUSD = &cc
	}
	for _, r := range rows {
		text := contentText(r.Content)
		t.Messages = append(t.Messages, Message{Role: r.Role, Content: text})
		before := len(t.Calls)
		// The answer is the last assistant message with content, as
		// AgentV's extractLastAssistantContent reads it: a turn that only
		// calls tools (no content) is not the answer.
		if r.Role == "assistant" && len(r.Content) > 0 && string(r.Content) != "null" {
			t.Output = text
		}
		for _, tc := range r.ToolCalls {
			if tc.Tool == "" {
				continue // AgentV drops tool calls without a name too
			}
			c := ToolCall{Name: tc.Tool}
			if len(tc.Input) > 0 {
				var v any
				if err := json.Unmarshal(tc.Input, &v); err != nil {
					return t, fmt.Errorf("tool call %s: bad input: %v", tc.Tool, err)
				}
				if m, ok := v.(map[string]any); ok {
					c.Args, c.ArgsOrder = m, ObjectKeys(tc.Input)
				} else {
					c.ArgsRaw = v
				}
			}
			if len(tc.Output) > 0 {
				_ = json.Unmarshal(tc.Output, &c.Output) // the output was already validated as JSON by the row decode
			}
			if tc.DurationMs != nil && finite(*tc.DurationMs) {
				d := msDuration(*tc.DurationMs)
				c.Duration = &d
			}
			if tc.Status == "error" || tc.Status == "timeout" || tc.Status == "cancelled" {
				c.Err = tc.Status
				t.Errors++
			}
			t.Calls = append(t.Calls, c)
		}
		t.Messages[len(t.Messages)-1].Calls = len(t.Calls) - before
	}
	t.EventCount = len(t.Calls)
	return t, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func msDuration(ms float64) time.Duration {
	if ms > float64(math.MaxInt64/int64(time.Millisecond)) {
		return time.Duration(math.MaxInt64)
	}
	if ms < -float64(math.MaxInt64/int64(time.Millisecond)) {
		return time.Duration(math.MinInt64)
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// contentText flattens message content: a string as is, a list of parts by
// joining their text fields, anything else as compact JSON.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}
