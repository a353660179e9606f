package traceio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// AgentV trace events (agentv docs, "Trace Events"): type is model_step,
// tool_call, tool_result, message or error; tool_call and tool_result pair
// by id. Times are "timestamp" in the spec and "startTime" in what CLI
// agents print; both are read.
type agentvEvent struct {
	Type       string          `json:"type"`
	Timestamp  json.RawMessage `json:"timestamp"`
	StartTime  json.RawMessage `json:"startTime"`
	EndTime    json.RawMessage `json:"endTime"`
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Role       string          `json:"role"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output"`
	Text       json.RawMessage `json:"text"`
	Error      json.RawMessage `json:"error"`
	DurationMs *float64        `json:"durationMs"`
	Duration   *float64        `json:"duration_ms"`
	Metadata   struct {
		Model      string       `json:"model"`
		Role       string       `json:"role"`
		TokenUsage *agentvUsage `json:"tokenUsage"`
		Usage      *agentvUsage `json:"usage"`
	} `json:"metadata"`
}

// agentvUsage is AgentV's token usage, in either of its spellings.
type agentvUsage struct {
	Input        int64   `json:"input"`
	Output       int64   `json:"output"`
	Cached       int64   `json:"cached"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

func (u *agentvUsage) usage() trace.Usage {
	if u == nil {
		return trace.Usage{}
	}
	return trace.Usage{
		InputTokens:  max(u.Input, u.InputTokens, 0),
		OutputTokens: max(u.Output, u.OutputTokens, 0),
		CachedTokens: max(u.Cached, 0),
		CostUSD:      max(u.CostUSD, 0),
	}
}

// readAgentV reads an AgentV trace file {"text": …, "trace": [events]}.
//
// The trace id is derived from the file's base name and content; span ids
// from the trace id and the event's id (tool calls) or position. The run
// is named after the file (without extension), starts at the first event
// and ends at the last, with the text as its output.
func readAgentV(s *source) error {
	var doc json.RawMessage
	data, top, err := s.object(&doc)
	if err != nil {
		return err
	}
	var text, events json.RawMessage
	var evOff int64
	for _, m := range top {
		switch m.key {
		case "text":
			text = m.raw
		case "trace":
			events, evOff = m.raw, m.off
		}
	}
	if events == nil {
		return &Error{File: s.name, Line: 1, Field: "trace", Err: errors.New(`missing; an AgentV trace file is {"text": …, "trace": [events]}`)}
	}
	tid := traceIDOf(string(FormatAgentV), s.base, string(data))
	name := strings.TrimSuffix(s.base, ".json")
	return s.agentvEvents(data, tid, name, events, evOff, "trace", text, nil)
}

// agentvEvents emits a run made of AgentV trace events.
func (s *source) agentvEvents(data []byte, tid trace.TraceID, name string, events json.RawMessage, evOff int64, field string, final json.RawMessage, tags []string) error {
	list, err := elems(events, evOff)
	if err != nil {
		return &Error{File: s.name, Line: lineAt(data, evOff), Field: field, Err: err}
	}
	evs := make([]agentvEvent, len(list))
	for i, m := range list {
		if err := s.decodeAt(data, m, fmt.Sprintf("%s[%d]", field, i), &evs[i]); err != nil {
			return err
		}
	}
	// Times: each event's own, else the one before it.
	times := make([]time.Time, len(evs))
	var start, last time.Time
	for i := range evs {
		e := &evs[i]
		ts := e.Timestamp
		if len(ts) == 0 {
			ts = e.StartTime
		}
		t, err := parseTime(ts)
		if err != nil {
			f := "timestamp"
			if len(e.Timestamp) == 0 {
				f = "startTime"
			}
			return &Error{File: s.name, Line: lineAt(data, list[i].off), Field: fmt.Sprintf("%s[%d].%s", field, i, f), Err: err}
		}
		if t.IsZero() {
			t = last
		}
		if start.IsZero() && !t.IsZero() {
			start = t
		}
		times[i], last = t, t
	}
	if start.IsZero() {
		start = time.Unix(0, 0).UTC()
	}
	run := spanIDOf(tid, "run")
	if err := s.emit(trace.Record{TraceID: tid, SpanID: run, Time: start, Type: trace.TypeRunStart, Name: name,
		Run: &trace.RunInfo{Tags: append([]string{"source:agentv"}, tags...)}}); err != nil {
		return err
	}
	type call struct {
		span  trace.SpanID
		name  string
		start time.Time
	}
	open := map[string]call{}
	seen := map[string]int{}
	end := start
	for i := range evs {
		e := &evs[i]
		t := times[i]
		if t.IsZero() {
			t = start
		}
		end = maxTime(end, t)
		fieldErr := func(f string, err error) error {
			return &Error{File: s.name, Line: lineAt(data, list[i].off), Field: fmt.Sprintf("%s[%d].%s", field, i, f), Err: err}
		}
		d, err := eventDuration(e)
		if err != nil {
			return fieldErr("durationMs", err)
		}
		r := trace.Record{TraceID: tid, ParentID: run, Time: t, Name: e.Name}
		switch e.Type {
		case "tool_call":
			key := e.ID
			if key == "" {
				key = "#" + strconv.Itoa(i)
			}
			seen[key]++
			if n := seen[key]; n > 1 {
				key += "#" + strconv.Itoa(n)
			}
			c := call{span: spanIDOf(tid, "tool", key), name: e.Name, start: t}
			open[e.ID] = c
			r.Type, r.SpanID, r.Input = trace.TypeToolStart, c.span, jsonValue(e.Input)
		case "tool_result":
			c, ok := open[e.ID]
			if ok && e.ID != "" {
				delete(open, e.ID)
			} else {
				c = call{span: spanIDOf(tid, "result", strconv.Itoa(i)), start: t}
			}
			if r.Name == "" {
				r.Name = c.name
			}
			r.Type, r.SpanID, r.Output = trace.TypeToolEnd, c.span, jsonValue(e.Output)
			r.Duration = max(t.Sub(c.start), 0)
			if d > 0 {
				r.Duration = d
			}
			if msg := toolError(e.Error); msg != "" {
				r.Type, r.Error = trace.TypeToolError, msg
			}
		case "model_step":
			r.Type, r.SpanID = trace.TypeModelCall, spanIDOf(tid, "model", strconv.Itoa(i))
			r.Name = firstNonEmpty(e.Metadata.Model, e.Name)
			r.Input, r.Output, r.Duration = jsonValue(e.Input), firstValue(e.Text, e.Output), d
			r.Usage = e.Metadata.TokenUsage.usage()
			if r.Usage == (trace.Usage{}) {
				r.Usage = e.Metadata.Usage.usage()
			}
			if len(e.EndTime) > 0 {
				if et, err := parseTime(e.EndTime); err == nil && et.After(t) {
					r.Time, r.Duration = et, et.Sub(t)
					end = maxTime(end, et)
				}
			}
			r.Error = textOf(e.Error)
		case "message":
			r.Type, r.SpanID = trace.TypeMessage, spanIDOf(tid, "message", strconv.Itoa(i))
			r.Name = firstNonEmpty(e.Role, e.Metadata.Role, e.Name, "assistant")
			r.Output = firstValue(e.Text, e.Output)
		case "error":
			r.Type, r.SpanID = trace.TypeError, spanIDOf(tid, "error", strconv.Itoa(i))
			r.Error = firstNonEmpty(textOf(e.Error), textOf(e.Text), textOf(e.Output), "error")
		default:
			return fieldErr("type", fmt.Errorf("unknown AgentV event type %q (want model_step, tool_call, tool_result, message or error)", e.Type))
		}
		if err := s.emit(r); err != nil {
			return err
		}
	}
	return s.emit(trace.Record{TraceID: tid, SpanID: run, Time: end, Type: trace.TypeRunEnd, Name: name,
		Status: string(trace.TerminationSuccess), Output: jsonValue(final), Duration: end.Sub(start)})
}

// eventDuration is the event's duration, under either of its names.
func eventDuration(e *agentvEvent) (time.Duration, error) {
	if e.DurationMs != nil {
		return millis(*e.DurationMs)
	}
	return optMillis(e.Duration)
}

// toolError is the message of a failed tool call's "error" member: "" when
// it is absent, null or false (AgentV writes error: false for success).
func toolError(raw json.RawMessage) string {
	if msg := textOf(raw); msg != "false" {
		return msg
	}
	return ""
}

// AgentV result rows: one evaluated test per line. "trace" is a summary
// (TraceSummary) by default, or the full event list when AgentV was asked
// to keep it; "output" holds the agent's messages with their tool calls,
// durations and token usage, when the provider reported them.
type agentvRow struct {
	Timestamp  json.RawMessage `json:"timestamp"`
	TestID     string          `json:"test_id"`
	EvalID     string          `json:"eval_id"`
	Suite      string          `json:"suite"`
	Target     string          `json:"target"`
	Score      *float64        `json:"score"`
	Scores     json.RawMessage `json:"scores"`
	Assertions json.RawMessage `json:"assertions"`
	Trace      json.RawMessage `json:"trace"`
	Output     json.RawMessage `json:"output"`
	Error      string          `json:"error"`
}

type agentvSummary struct {
	DurationMs float64      `json:"duration_ms"`
	TokenUsage *agentvUsage `json:"token_usage"`
	CostUSD    float64      `json:"cost_usd"`
}

type agentvMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"`
	ToolCalls  []agentvToolCall `json:"tool_calls"`
	DurationMs *float64         `json:"duration_ms"`
	TokenUsage *agentvUsage     `json:"token_usage"`
}

type agentvToolCall struct {
	ID         string          `json:"id"`
	Tool       string          `json:"tool"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output"`
	DurationMs *float64        `json:"duration_ms"`
	Error      json.RawMessage `json:"error"`
}

// readAgentVResults reads AgentV result rows, one trace per row.
//
// The trace id is derived from the row's test id, timestamp, target and
// suite. The run is named after the test and starts at the row's
// timestamp. Each assistant message becomes a model.call (the target is
// the model; duration and tokens as reported) followed by its tool calls
// (tool.start/tool.end with input, output and duration); other roles
// become message records. AgentV does not say when each step began, so
// steps are laid out one after another from the start. The trace summary
// is kept whole in a custom "agentv.trace_summary" record and the scores
// and assertions in "agentv.result"; the summary's per-tool durations and
// totals are not turned into tool or model records, because a summary
// does not say in which order the calls happened. A row whose "trace" is
// the full event list is read like an AgentV trace file.
func readAgentVResults(s *source) error {
	return s.lines(func(b []byte) error { return s.whole(func() error { return s.agentvRow(b) }) })
}

// agentvRow emits the records of one result row.
func (s *source) agentvRow(b []byte) error {
	var row agentvRow
	if err := json.Unmarshal(b, &row); err != nil {
		return jsonError(s.name, b, s.line, err)
	}
	start, err := parseTime(row.Timestamp)
	if err != nil {
		return s.errf("timestamp", "%v", err)
	}
	if start.IsZero() {
		start = time.Unix(0, 0).UTC()
	}
	name := firstNonEmpty(row.TestID, row.EvalID)
	if name == "" {
		return s.errf("test_id", "missing; every AgentV result row names its test")
	}
	tid := traceIDOf(string(FormatAgentVResults), name, string(bytes.TrimSpace(row.Timestamp)), row.Target, row.Suite)
	var tags []string
	for _, t := range [][2]string{{"test", name}, {"suite", row.Suite}, {"target", row.Target}} {
		if t[1] != "" {
			tags = append(tags, t[0]+":"+t[1])
		}
	}
	if tr := bytes.TrimSpace(row.Trace); len(tr) > 0 && tr[0] == '[' {
		// The full trace was kept: its events say everything.
		var final json.RawMessage
		if msgs, _ := elems(row.Output, 0); len(msgs) > 0 {
			var m agentvMessage
			_ = json.Unmarshal(msgs[len(msgs)-1].raw, &m)
			final = m.Content
		}
		line := s.line
		err := s.agentvEvents(b, tid, name, row.Trace, int64(bytes.Index(b, tr)), "trace", final, tags)
		var e *Error
		if errors.As(err, &e) {
			e.Line = line
		}
		return err
	}
	var sum agentvSummary
	if len(row.Trace) > 0 {
		if err := json.Unmarshal(row.Trace, &sum); err != nil {
			e := jsonError(s.name, b, s.line, err)
			e.Field = "trace." + e.Field
			return e
		}
	}
	msgs, err := elems(row.Output, 0)
	if err != nil {
		return s.errf("output", "%v", err)
	}
	run := spanIDOf(tid, "run")
	if err := s.emit(trace.Record{TraceID: tid, SpanID: run, Time: start, Type: trace.TypeRunStart, Name: name,
		Run: &trace.RunInfo{Tags: append([]string{"source:agentv"}, tags...)}}); err != nil {
		return err
	}
	at := start
	var final trace.Value
	for i, mm := range msgs {
		var m agentvMessage
		if err := json.Unmarshal(mm.raw, &m); err != nil {
			e := jsonError(s.name, b, s.line, err)
			e.Field = fmt.Sprintf("output[%d].%s", i, e.Field)
			return e
		}
		d, err := optMillis(m.DurationMs)
		if err != nil {
			return s.errf(fmt.Sprintf("output[%d].duration_ms", i), "%v", err)
		}
		r := trace.Record{TraceID: tid, ParentID: run, SpanID: spanIDOf(tid, "output", strconv.Itoa(i))}
		if m.Role == "assistant" || m.Role == "" {
			at = at.Add(d)
			r.Type, r.Name, r.Time, r.Duration = trace.TypeModelCall, firstNonEmpty(row.Target, "model"), at, d
			r.Output, r.Usage = jsonValue(m.Content), m.TokenUsage.usage()
			final = r.Output
		} else {
			r.Type, r.Name, r.Time, r.Output = trace.TypeMessage, m.Role, at, jsonValue(m.Content)
		}
		if err := s.emit(r); err != nil {
			return err
		}
		for j, tc := range m.ToolCalls {
			td, err := optMillis(tc.DurationMs)
			if err != nil {
				return s.errf(fmt.Sprintf("output[%d].tool_calls[%d].duration_ms", i, j), "%v", err)
			}
			span := spanIDOf(tid, "tool", strconv.Itoa(i), strconv.Itoa(j))
			tool := firstNonEmpty(tc.Tool, tc.Name)
			if err := s.emit(trace.Record{TraceID: tid, SpanID: span, ParentID: run, Time: at, Type: trace.TypeToolStart,
				Name: tool, Input: jsonValue(tc.Input)}); err != nil {
				return err
			}
			at = at.Add(td)
			end := trace.Record{TraceID: tid, SpanID: span, ParentID: run, Time: at, Type: trace.TypeToolEnd,
				Name: tool, Output: jsonValue(tc.Output), Duration: td}
			if msg := toolError(tc.Error); msg != "" {
				end.Type, end.Error = trace.TypeToolError, msg
			}
			if err := s.emit(end); err != nil {
				return err
			}
		}
	}
	if len(bytes.TrimSpace(row.Trace)) > 0 {
		if err := s.emit(trace.Record{TraceID: tid, SpanID: spanIDOf(tid, "summary"), ParentID: run, Time: at,
			Type: trace.TypeCustom, Name: "agentv.trace_summary", Output: jsonValue(row.Trace)}); err != nil {
			return err
		}
	}
	if row.Score != nil || len(row.Scores) > 0 || len(row.Assertions) > 0 {
		res, _ := json.Marshal(struct {
			Score      *float64        `json:"score,omitempty"`
			Scores     json.RawMessage `json:"scores,omitempty"`
			Assertions json.RawMessage `json:"assertions,omitempty"`
		}{row.Score, json.RawMessage(jsonValue(row.Scores)), json.RawMessage(jsonValue(row.Assertions))})
		if err := s.emit(trace.Record{TraceID: tid, SpanID: spanIDOf(tid, "result"), ParentID: run, Time: at,
			Type: trace.TypeCustom, Name: "agentv.result", Output: res}); err != nil {
			return err
		}
	}
	endAt := at
	if sum.DurationMs > 0 {
		d, err := millis(sum.DurationMs)
		if err != nil {
			return s.errf("trace.duration_ms", "%v", err)
		}
		endAt = start.Add(d)
	}
	r := trace.Record{TraceID: tid, SpanID: run, Time: endAt, Type: trace.TypeRunEnd, Name: name,
		Status: string(trace.TerminationSuccess), Output: final, Duration: endAt.Sub(start), Error: row.Error}
	if row.Error != "" {
		r.Status = string(trace.TerminationError)
	}
	return s.emit(r)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func firstValue(raws ...json.RawMessage) trace.Value {
	for _, r := range raws {
		if v := jsonValue(r); v != nil {
			return v
		}
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
