// Package fromtrace turns Loupe trace records into the eval.Trajectory that
// package eval grades. It is the one place where the trace model meets the
// evaluation model, so that eval itself does not depend on the trace model.
package fromtrace

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/trace"
)

// Unfinished is the error text of a tool call that has a tool.start record
// but neither a tool.end nor a tool.error (the run died or was cut off while
// the tool ran).
const Unfinished = "the call did not finish: no tool.end or tool.error was recorded"

// Trajectory converts the records of one run (its nested runs included)
// into an eval.Trajectory. recs need not be sorted; they are read in Seq
// order and not modified. Records of other traces are not filtered out:
// pass one trace's records (see Split).
//
// The mapping:
//
//   - Calls: one per tool call, of every depth (a sub-agent's calls are part
//     of the run's trajectory, as its tokens are part of trace.Stats), in
//     the order the calls began: the Seq of tool.start when one was
//     recorded, else that of the tool.end or tool.error. Ordering by start
//     keeps "called in order" meaningful when tools run in parallel and
//     finish out of order. Name, arguments (the input of tool.end/tool.error,
//     else of the tool.start with the same span), output, duration and error
//     come from those records. A tool.start without an end becomes a call
//     whose Err is Unfinished.
//   - Output: the root run.end's output (a JSON string as is, an object's
//     "text", "content" or "output" string field, in a list of chat
//     messages the last assistant message that has text, anything else as
//     JSON text); without one, the last assistant message record that has
//     text, then the last model call's output.
//   - Messages: the message records (Name is the role). When there are
//     none, the root run's input and output as a user and an assistant turn.
//   - Usage and LLMCalls: from trace.StatsOf, set only when the records hold
//     at least one model call (otherwise they are unknown, not zero). CostUSD
//     is set when some model call reported a cost and none has an unknown
//     cost (trace.Usage.CostUnknown).
//   - Duration: the root run.end's duration; without a run.end, the span
//     from the first record to the last when there are two or more.
//   - Errors: trace.Stats.Errors. EventCount: the number of records.
func Trajectory(recs []trace.Record) eval.Trajectory {
	b := builder{open: map[spanKey]*pendingCall{}}
	for _, i := range seqOrder(recs) {
		b.add(&recs[i])
	}
	t := eval.Trajectory{Messages: b.messages, Calls: b.finishCalls()}
	t.Output = b.output()
	if len(t.Messages) == 0 {
		t.Messages = b.runMessages(t.Output)
	}
	st := trace.StatsOf(recs)
	setModelStats(&t, st)
	t.Duration = b.duration(len(recs))
	t.Errors = st.Errors
	t.EventCount = len(recs)
	return t
}

// seqOrder returns the indexes of recs in Seq order, input order breaking
// ties, so that recs itself is neither sorted nor copied.
func seqOrder(recs []trace.Record) []int {
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(recs[a].Seq, recs[b].Seq) })
	return order
}

// builder gathers what Trajectory needs from the records, which it is
// given one at a time in Seq order.
type builder struct {
	calls       []*pendingCall           // in the order the calls began
	open        map[spanKey]*pendingCall // calls started and not yet ended, by span
	messages    []eval.Message           // the message records
	runStart    *trace.Record            // the first root run.start
	runEnd      *trace.Record            // the last root run.end
	lastAsst    string                   // the last assistant message...
	haveAsst    bool                     // ...if there is one
	lastModel   *trace.Record            // the last model.call
	first, last time.Time                // the earliest and latest record times
}

// pendingCall is a tool call being assembled from its records.
type pendingCall struct {
	call eval.ToolCall
	done bool // a tool.end or tool.error was seen
}

// add takes the next record in Seq order.
func (b *builder) add(r *trace.Record) {
	b.observeTime(r.Time)
	switch r.Type {
	case trace.TypeRunStart:
		if b.runStart == nil && r.Depth == 0 {
			b.runStart = r
		}
	case trace.TypeRunEnd:
		if r.Depth == 0 {
			b.runEnd = r
		}
	case trace.TypeToolStart:
		b.startCall(r)
	case trace.TypeToolEnd, trace.TypeToolError:
		b.endCall(r)
	case trace.TypeMessage:
		content := valueText(r.Output)
		b.messages = append(b.messages, eval.Message{Role: r.Name, Content: content})
		// The answer is the last assistant message that has text: a turn
		// that only calls tools is not the answer.
		if r.Name == "assistant" && strings.TrimSpace(content) != "" {
			b.lastAsst, b.haveAsst = content, true
		}
	case trace.TypeModelCall:
		b.lastModel = r
	}
}

// observeTime widens the span [first, last] of record times to t; zero
// times are ignored.
func (b *builder) observeTime(t time.Time) {
	if t.IsZero() {
		return
	}
	if b.first.IsZero() || t.Before(b.first) {
		b.first = t
	}
	if t.After(b.last) {
		b.last = t
	}
}

// startCall begins the call of a tool.start record: its name and input.
func (b *builder) startCall(r *trace.Record) {
	p := &pendingCall{call: eval.ToolCall{Name: r.Name}}
	setInput(&p.call, r.Input)
	b.calls = append(b.calls, p)
	b.open[spanKey{r.TraceID, r.SpanID}] = p
}

// endCall completes the call a tool.end or tool.error record ends: the
// call open on its span, else a new call that begins here. The end's
// input, output, duration and error override the start's.
func (b *builder) endCall(r *trace.Record) {
	k := spanKey{r.TraceID, r.SpanID}
	p := b.open[k]
	if p == nil || p.done {
		p = &pendingCall{call: eval.ToolCall{Name: r.Name}}
		b.calls = append(b.calls, p)
	}
	delete(b.open, k)
	p.done = true
	if p.call.Name == "" {
		p.call.Name = r.Name
	}
	if len(r.Input) > 0 {
		setInput(&p.call, r.Input)
	}
	if len(r.Output) > 0 {
		p.call.Output = decode(r.Output)
	}
	if r.Duration > 0 {
		d := r.Duration
		p.call.Duration = &d
	}
	if r.Error != "" {
		p.call.Err = r.Error
	} else if r.Type == trace.TypeToolError {
		p.call.Err = "tool error"
	}
}

// finishCalls returns the calls in the order they began; a call that never
// ended gets the error Unfinished.
func (b *builder) finishCalls() []eval.ToolCall {
	var calls []eval.ToolCall
	for _, p := range b.calls {
		if !p.done {
			p.call.Err = Unfinished
		}
		calls = append(calls, p.call)
	}
	return calls
}

// output is the run's final output: the root run.end's, else the last
// assistant message, else the last model call's output.
func (b *builder) output() string {
	switch {
	case b.runEnd != nil && len(b.runEnd.Output) > 0:
		return valueText(b.runEnd.Output)
	case b.haveAsst:
		return b.lastAsst
	case b.lastModel != nil && len(b.lastModel.Output) > 0:
		return valueText(b.lastModel.Output)
	}
	return ""
}

// runMessages stands in for a run without message records: the root run's
// input as a user turn and output as an assistant turn, each when there
// is one.
func (b *builder) runMessages(output string) []eval.Message {
	var msgs []eval.Message
	if b.runStart != nil && len(b.runStart.Input) > 0 {
		msgs = append(msgs, eval.Message{Role: "user", Content: roleText(b.runStart.Input, "user")})
	}
	if output != "" {
		msgs = append(msgs, eval.Message{Role: "assistant", Content: output})
	}
	return msgs
}

// setModelStats sets Usage, LLMCalls and CostUSD from st when the records
// hold at least one model call; otherwise they stay unknown (nil), not
// zero. CostUSD is set only when some call reported a cost and no call's
// cost is unknown (its model had no price): a partial sum is not the run's
// cost.
func setModelStats(t *eval.Trajectory, st trace.Stats) {
	if st.ModelCalls == 0 {
		return
	}
	t.Usage = &eval.Usage{
		Input:     st.InputTokens,
		Output:    st.OutputTokens,
		Cached:    st.CachedTokens,
		Reasoning: st.ReasoningTokens,
	}
	n := st.ModelCalls
	t.LLMCalls = &n
	if st.CostUSD > 0 && st.CostKnown() {
		c := st.CostUSD
		t.CostUSD = &c
	}
}

// duration is the root run.end's duration; without a run.end, the span
// from the first record time to the last when there are n ≥ 2 records
// with a time; nil otherwise.
func (b *builder) duration(n int) *time.Duration {
	var d time.Duration
	switch {
	case b.runEnd != nil:
		d = b.runEnd.Duration
	case n > 1 && !b.first.IsZero():
		d = b.last.Sub(b.first)
	default:
		return nil
	}
	return &d
}

type spanKey struct {
	trace trace.TraceID
	span  trace.SpanID
}

// Split groups recs by trace id, in the order each trace first appears,
// keeping each group's records in their input order.
func Split(recs []trace.Record) [][]trace.Record {
	idx := map[trace.TraceID]int{}
	var out [][]trace.Record
	for _, r := range recs {
		i, ok := idx[r.TraceID]
		if !ok {
			i = len(out)
			idx[r.TraceID] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// setInput stores a recorded tool input: a JSON object in Args, anything
// else (a bare string, a list) in ArgsRaw.
func setInput(c *eval.ToolCall, v trace.Value) {
	if len(v) == 0 {
		return
	}
	switch x := decode(v).(type) {
	case map[string]any:
		c.Args, c.ArgsOrder, c.ArgsRaw = x, eval.ObjectKeys(v), nil
	case nil:
		c.Args, c.ArgsOrder, c.ArgsRaw = nil, nil, nil
	default:
		c.Args, c.ArgsOrder, c.ArgsRaw = nil, nil, x
	}
}

// decode returns v as decoded JSON, or its text when it is not valid JSON
// (a Value made with trace.Raw is not checked).
func decode(v trace.Value) any {
	if len(v) == 0 {
		return nil
	}
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return string(v)
	}
	return x
}

// valueText returns the text of a recorded output: a JSON string itself, the
// "text", "content" or "output" string field of an object, the text of the
// last assistant message that has text in a list of chat messages (see
// messagesText), else the JSON text.
func valueText(v trace.Value) string { return roleText(v, "assistant") }

// roleText is valueText, reading a list of chat messages for role:
// "assistant" takes the last such message that has text (a turn that only
// calls tools is not the answer), "user" joins the texts of every user
// message with newlines.
func roleText(v trace.Value, role string) string {
	if len(v) == 0 {
		return ""
	}
	switch x := decode(v).(type) {
	case map[string]any:
		for _, k := range []string{"text", "content", "output"} {
			if s, ok := x[k].(string); ok {
				return s
			}
		}
	case []any:
		if s, ok := messagesText(x, role); ok {
			return s
		}
	}
	return v.Text()
}

// messagesText reads a list of chat messages as OpenTelemetry's GenAI
// conventions ({"role", "parts": [{"type": "text", "content"}]}) and the
// OpenAI and Anthropic APIs ({"role", "content": "..." or [{"type":
// "text", "text"}]}) write them: for role "assistant", the text of the
// last assistant message that has any; for "user", the texts of the user
// messages, joined with newlines. ok is false when msgs is not such a
// list or no message of role has text.
func messagesText(msgs []any, role string) (string, bool) {
	var texts []string
	for _, m := range msgs {
		o, ok := m.(map[string]any)
		if !ok {
			return "", false
		}
		r, ok := o["role"].(string)
		if !ok {
			return "", false
		}
		if r != role {
			continue
		}
		t := messageText(o)
		if strings.TrimSpace(t) == "" {
			continue
		}
		texts = append(texts, t)
	}
	switch {
	case len(texts) == 0:
		return "", false
	case role == "assistant":
		return texts[len(texts)-1], true
	}
	return strings.Join(texts, "\n"), true
}

// messageText is the text of one chat message: its content string, or the
// text parts of its parts or content list, joined.
func messageText(m map[string]any) string {
	if s, ok := m["content"].(string); ok {
		return s
	}
	parts, ok := m["parts"].([]any)
	if !ok {
		parts, _ = m["content"].([]any)
	}
	var b strings.Builder
	for _, p := range parts {
		o, ok := p.(map[string]any)
		if !ok {
			continue
		}
		if t, _ := o["type"].(string); t != "" && t != "text" {
			continue
		}
		for _, k := range []string{"content", "text"} {
			if s, ok := o[k].(string); ok {
				b.WriteString(s)
				break
			}
		}
	}
	return b.String()
}
