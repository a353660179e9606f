// Package fromtrace turns Loupe trace records into the eval.Trajectory that
// package eval grades. It is the one place where the trace model meets the
// evaluation model, so that eval itself depends on no other Loupe package.
package fromtrace

import (
	"encoding/json"
	"slices"
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
//     "text", "content" or "output" string field, anything else as JSON
//     text); without one, the last assistant message record, then the last
//     model call's output.
//   - Messages: the message records (Name is the role). When there are
//     none, the root run's input and output as a user and an assistant turn.
//   - Usage and LLMCalls: from trace.StatsOf, set only when the records hold
//     at least one model call (otherwise they are unknown, not zero). CostUSD
//     is set when some model call reported a cost.
//   - Duration: the root run.end's duration; without a run.end, the span
//     from the first record to the last when there are two or more.
//   - Errors: trace.Stats.Errors. EventCount: the number of records.
func Trajectory(recs []trace.Record) eval.Trajectory {
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case recs[a].Seq < recs[b].Seq:
			return -1
		case recs[a].Seq > recs[b].Seq:
			return 1
		}
		return 0
	})

	type pending struct {
		seq  uint64
		call eval.ToolCall
		done bool
	}
	var (
		calls     []*pending
		open      = map[spanKey]*pending{}
		t         eval.Trajectory
		runEnd    *trace.Record
		runStart  *trace.Record
		lastAsst  string
		haveAsst  bool
		lastModel *trace.Record
		first     time.Time
		last      time.Time
	)
	for _, i := range order {
		r := &recs[i]
		if !r.Time.IsZero() {
			if first.IsZero() || r.Time.Before(first) {
				first = r.Time
			}
			if r.Time.After(last) {
				last = r.Time
			}
		}
		switch r.Type {
		case trace.TypeRunStart:
			if runStart == nil && r.Depth == 0 {
				runStart = r
			}
		case trace.TypeRunEnd:
			if r.Depth == 0 {
				runEnd = r
			}
		case trace.TypeToolStart:
			p := &pending{seq: r.Seq, call: eval.ToolCall{Name: r.Name}}
			setInput(&p.call, r.Input)
			calls = append(calls, p)
			open[spanKey{r.TraceID, r.SpanID}] = p
		case trace.TypeToolEnd, trace.TypeToolError:
			k := spanKey{r.TraceID, r.SpanID}
			p := open[k]
			if p == nil || p.done {
				p = &pending{seq: r.Seq, call: eval.ToolCall{Name: r.Name}}
				calls = append(calls, p)
			}
			delete(open, k)
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
		case trace.TypeMessage:
			content := valueText(r.Output)
			t.Messages = append(t.Messages, eval.Message{Role: r.Name, Content: content})
			if r.Name == "assistant" {
				lastAsst, haveAsst = content, true
			}
		case trace.TypeModelCall:
			lastModel = r
		}
	}
	for _, p := range calls {
		if !p.done {
			p.call.Err = Unfinished
		}
		t.Calls = append(t.Calls, p.call)
	}

	switch {
	case runEnd != nil && len(runEnd.Output) > 0:
		t.Output = valueText(runEnd.Output)
	case haveAsst:
		t.Output = lastAsst
	case lastModel != nil && len(lastModel.Output) > 0:
		t.Output = valueText(lastModel.Output)
	}
	if len(t.Messages) == 0 {
		if runStart != nil && len(runStart.Input) > 0 {
			t.Messages = append(t.Messages, eval.Message{Role: "user", Content: valueText(runStart.Input)})
		}
		if t.Output != "" {
			t.Messages = append(t.Messages, eval.Message{Role: "assistant", Content: t.Output})
		}
	}

	st := trace.StatsOf(recs)
	if st.ModelCalls > 0 {
		t.Usage = &eval.Usage{
			Input:     st.InputTokens,
			Output:    st.OutputTokens,
			Cached:    st.CachedTokens,
			Reasoning: st.ReasoningTokens,
		}
		n := st.ModelCalls
		t.LLMCalls = &n
		if st.CostUSD > 0 {
			c := st.CostUSD
			t.CostUSD = &c
		}
	}
	switch {
	case runEnd != nil:
		d := runEnd.Duration
		t.Duration = &d
	case len(recs) > 1 && !first.IsZero():
		d := last.Sub(first)
		t.Duration = &d
	}
	t.Errors = st.Errors
	t.EventCount = len(recs)
	return t
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
		c.Args, c.ArgsRaw = x, nil
	case nil:
		c.Args, c.ArgsRaw = nil, nil
	default:
		c.Args, c.ArgsRaw = nil, x
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
// "text", "content" or "output" string field of an object, else the JSON
// text.
func valueText(v trace.Value) string {
	if len(v) == 0 {
		return ""
	}
	if m, ok := decode(v).(map[string]any); ok {
		for _, k := range []string{"text", "content", "output"} {
			if s, ok := m[k].(string); ok {
				return s
			}
		}
	}
	return v.Text()
}
