package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Call kinds.
const (
	KindModel = "model" // a model call
	KindTool  = "tool"  // a tool call
)

// A Call is one recorded model or tool call of a run's root loop (calls
// made inside nested runs, such as a sub-agent's, belong to the tool call
// that ran them and are not replayed on their own).
type Call struct {
	Kind     string        `json:"kind"`            // KindModel or KindTool
	Step     int           `json:"step"`            // the loop iteration it was made in, from 1 (0 outside iterations)
	Index    int           `json:"index"`           // its number among the run's calls of its kind, from 1
	Seq      uint64        `json:"seq"`             // the Seq of the record that holds it (model.call; tool.start or tool.end)
	Name     string        `json:"name"`            // the model's or the tool's name
	Duration time.Duration `json:"duration_ns"`     // how long it took
	Err      string        `json:"error,omitempty"` // why it failed, if it did

	// Model calls.
	Request  *Request       `json:"request,omitempty"` // what the model was asked, as recorded
	Response agent.Response `json:"response,omitzero"` // what it answered

	// Tool calls.
	ID     string          `json:"id,omitempty"`     // the model's id for the call (from the model call that asked for it)
	Input  json.RawMessage `json:"input,omitempty"`  // the tool's input
	Output json.RawMessage `json:"output,omitempty"` // the tool's output, when Err is ""
}

// A Request is what a model.call record holds of the request: the number
// of messages and tools, and the messages added since the model's
// previous turn (the runtime records the history as deltas; see
// agent.Generate). History is the whole conversation rebuilt from the
// deltas and the earlier answers, when that rebuild adds up to Messages.
type Request struct {
	Messages int             `json:"messages"`
	Tools    int             `json:"tools"`
	New      []agent.Message `json:"new"`
	History  []agent.Message `json:"-"` // nil when the deltas do not add up (a loop that rewrites its history, compaction)
}

// A Recording is a run as replay needs it, read from its trace records:
// what the run was asked, with which system prompt and tools, and every
// model and tool call of its root loop, in the order they were recorded.
// It is read-only once made; Replayers share it.
type Recording struct {
	TraceID trace.TraceID
	Name    string          // the root run's name
	Tags    []string        // the root run's tags
	Input   string          // what the run was asked
	System  string          // the system prompt; "" for none
	Tools   []agent.ToolDef // the tools offered, from tool.discovered records
	// DescribedTools reports whether the tool descriptions were recorded
	// (traces written before Loupe recorded them have none, and replay
	// then cannot compare descriptions).
	DescribedTools bool
	Calls          []Call // model and tool calls of the root loop, in record order
	Answer         string // the final answer (run.end output)
	Status         string // the termination reason; "" when the run has not ended
	Err            string // why the run failed, if it did
	Ended          bool   // the trace has the root run.end
	// Limits are the limits the run was stopped by, read from its
	// guardrail records (the limits it never reached left no trace), so
	// that a replay stops where the run did.
	Limits agent.Limits
	// Problems lists what makes the recording unfit to replay: lost,
	// truncated, omitted or redacted values, an unfinished run. Load
	// refuses a recording that has any; Read keeps them here.
	Problems []string
}

// Steps returns the number of the last step that made a call.
func (r *Recording) Steps() int {
	n := 0
	for i := range r.Calls {
		n = max(n, r.Calls[i].Step)
	}
	return n
}

// Load reads the recording of a run from its trace records (in Seq order,
// as a store or agent.Result returns them) and fails, saying what is
// missing and what to do, when the records cannot be replayed faithfully:
// records lost on the way to the store, values truncated by
// MaxValueBytes, omitted by a metadata capture policy or redacted, a run
// that never ended, a model call whose request was not recorded.
func Load(recs []trace.Record) (*Recording, error) {
	rec := Read(recs)
	if len(rec.Problems) > 0 {
		return nil, &UnreplayableError{TraceID: rec.TraceID, Problems: rec.Problems}
	}
	return rec, nil
}

// An UnreplayableError is Load's error for a trace that cannot be
// replayed faithfully.
type UnreplayableError struct {
	TraceID  trace.TraceID
	Problems []string // each thing that is wrong, with where
}

// Error lists the problems.
func (e *UnreplayableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s cannot be replayed faithfully", e.TraceID)
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p)
	}
	return b.String()
}

// Read reads the recording of a run from its trace records, as Load
// does, but keeps going when values are missing or damaged: what is wrong
// is listed in Problems. It suits views (traces diff) that show what
// there is; a replay must use Load.
func Read(recs []trace.Record) *Recording {
	rd := reader{rec: &Recording{}, open: map[trace.SpanID]int{}, inner: map[trace.SpanID]bool{}, lastModel: -1}
	for i := range recs {
		rd.add(&recs[i])
	}
	rd.finish()
	return rd.rec
}

type reader struct {
	rec       *Recording
	started   bool
	sawSystem bool
	open      map[trace.SpanID]int  // tool.start span → index in Calls
	inner     map[trace.SpanID]bool // tool calls made inside other tool calls, left out
	models    int
	tools     int
	lost      int64
	lastModel int // index in Calls of the latest model call, -1 before one
	claimed   []bool
	history   []agent.Message // the conversation so far, nil once it no longer adds up
	broken    bool
}

func (rd *reader) problem(format string, args ...any) {
	rd.rec.Problems = append(rd.rec.Problems, fmt.Sprintf(format, args...))
}

// value checks that v, the field of r that replay uses, is whole, and
// returns it.
func (rd *reader) value(r *trace.Record, field string, v trace.Value) trace.Value {
	what := fmt.Sprintf("record %d (%s %s", r.Seq, r.Type, field)
	if r.Name != "" {
		what += " of " + r.Name
	}
	if r.Iteration > 0 {
		what += fmt.Sprintf(", step %d", r.Iteration)
	}
	what += ")"
	if ok, n := v.Truncated(); ok {
		rd.problem("%s was truncated when recorded (%d bytes, over the tracer's MaxValueBytes); record with a larger trace.Options.MaxValueBytes to replay such runs", what, n)
		return nil
	}
	if bytes.HasPrefix(v, []byte(`{"$loupe":"omitted"`)) {
		rd.problem("%s was not recorded (capture policy metadata); record with trace.CaptureFull to replay", what)
		return nil
	}
	if bytes.Contains(v, []byte(redact.DefaultReplacement)) {
		rd.problem("%s was redacted (it holds %s); a replay would compare and answer with the redacted text, not what the run saw", what, redact.DefaultReplacement)
	}
	return v
}

func (rd *reader) add(r *trace.Record) {
	rec := rd.rec
	if rec.TraceID.IsZero() {
		rec.TraceID = r.TraceID
	}
	if r.Type == trace.TypeDropped {
		rd.lost += store.LostCount(r)
		return
	}
	if r.Depth != 0 {
		return
	}
	switch r.Type {
	case trace.TypeRunStart:
		if rd.started {
			return
		}
		rd.started = true
		rec.Name, rec.Tags = r.Name, r.Tags()
		rec.Input = text(rd.value(r, "input", r.Input))
	case trace.TypeRunEnd:
		rec.Ended, rec.Status, rec.Err = true, r.Status, r.Error
		rec.Answer = text(r.Output)
	case trace.TypeToolDiscovered:
		d := agent.ToolDef{Name: r.Name, Schema: json.RawMessage(rd.value(r, "input", r.Input))}
		if r.Output != nil {
			rec.DescribedTools = true
			d.Description = text(rd.value(r, "output", r.Output))
		}
		rec.Tools = append(rec.Tools, d)
	case trace.TypeMessage:
		if r.Name == agent.RoleSystem && !rd.sawSystem {
			rd.sawSystem = true
			rec.System = text(rd.value(r, "output", r.Output))
		}
	case trace.TypeModelCall:
		if len(rd.open) > 0 {
			return // made inside a tool call (see inner)
		}
		rd.modelCall(r)
	case trace.TypeGuardrail:
		if r.Status == "abort" {
			rd.limit(r)
		}
	case trace.TypeToolStart:
		if rd.toolCall(r) {
			rd.open[r.SpanID] = len(rec.Calls) - 1
		}
	case trace.TypeToolEnd, trace.TypeToolError:
		if rd.inner[r.SpanID] {
			delete(rd.inner, r.SpanID)
			return
		}
		i, ok := rd.open[r.SpanID]
		if !ok {
			// A call recorded in one record (ExecutionContext.ToolCall).
			if !rd.toolCall(r) {
				return
			}
			i = len(rec.Calls) - 1
		}
		delete(rd.open, r.SpanID)
		c := &rec.Calls[i]
		c.Duration = r.Duration
		if r.Type == trace.TypeToolError || r.Error != "" {
			c.Err = r.Error
			if strings.Contains(r.Error, redact.DefaultReplacement) {
				rd.problem("record %d (%s of %s, step %d): its error was redacted; a replay would answer with the redacted text", r.Seq, r.Type, r.Name, r.Iteration)
			}
		} else {
			c.Output = json.RawMessage(rd.value(r, "output", r.Output))
		}
	}
}

// toolCall adds the tool call r starts (or, in one record, is) to the
// calls, and reports whether it did. It gives the call the id of the
// first call of that tool and input, not yet claimed, that the latest
// model call asked for: the runtime records a turn's tool calls in the
// order the model asked for them. A call the model did not ask for, made
// while another tool call is running, is inside that call (a tool that
// traces its own steps: its records have the same parent): the replay
// answers the outer call and never makes it, so it is left out.
func (rd *reader) toolCall(r *trace.Record) bool {
	in := json.RawMessage(rd.value(r, "input", r.Input))
	id, ok := "", false
	if rd.lastModel >= 0 {
		asked := rd.rec.Calls[rd.lastModel].Response.ToolCalls
		for pass := range 2 {
			for j := range asked {
				// Second pass, for a sequential call whose input a hook
				// changed: the name alone.
				if !rd.claimed[j] && asked[j].Name == r.Name && (pass == 1 || jsonEqual(asked[j].Input, in)) {
					rd.claimed[j], id, ok = true, asked[j].ID, true
					break
				}
			}
			if ok || len(rd.open) > 0 {
				break
			}
		}
	}
	if !ok && len(rd.open) > 0 {
		rd.inner[r.SpanID] = true
		return false
	}
	rd.tools++
	rd.rec.Calls = append(rd.rec.Calls, Call{Kind: KindTool, Step: r.Iteration, Index: rd.tools, Seq: r.Seq, Name: r.Name, ID: id, Input: in})
	return true
}

func (rd *reader) modelCall(r *trace.Record) {
	rec := rd.rec
	rd.models++
	c := Call{Kind: KindModel, Step: r.Iteration, Index: rd.models, Seq: r.Seq, Name: r.Name, Duration: r.Duration, Err: r.Error}
	where := fmt.Sprintf("record %d (model call %d, step %d)", r.Seq, rd.models, r.Iteration)
	in := rd.value(r, "input", r.Input)
	var req Request
	switch {
	case in == nil && r.Input == nil:
		rd.problem("%s has no request (recorded with capture policy none, or not by Loupe's agent runtime); it cannot be compared", where)
	case in != nil:
		if err := json.Unmarshal(in, &req); err != nil || req.Messages == 0 && len(req.New) == 0 {
			rd.problem("%s: its input is not a request as Loupe's agent runtime records it ({\"messages\":N,\"new\":[…]}); it cannot be compared", where)
		} else {
			c.Request = &req
		}
	}
	out := rd.value(r, "output", r.Output)
	if len(out) > 0 {
		if out[0] == '"' {
			c.Response.Content = out.Text()
		} else {
			var o struct {
				Content   string           `json:"content"`
				ToolCalls []agent.ToolCall `json:"tool_calls"`
			}
			if err := json.Unmarshal(out, &o); err != nil {
				rd.problem("%s: its output is neither text nor {\"content\",\"tool_calls\"}: %v", where, err)
			}
			c.Response.Content, c.Response.ToolCalls = o.Content, o.ToolCalls
		}
	}
	if r.Thinking != nil {
		c.Response.Thinking = text(rd.value(r, "thinking", r.Thinking))
	}
	c.Response.Usage, c.Response.FinishReason = r.Usage, r.Status
	if redacted(r.Error) {
		rd.problem("%s: its error was redacted; a replay would answer with the redacted text", where)
	}
	// The history this call saw: the one before, the previous answer,
	// then what was added since.
	if c.Request != nil && !rd.broken {
		if rd.lastModel >= 0 {
			prev := rec.Calls[rd.lastModel].Response
			rd.history = append(rd.history, agent.Message{Role: agent.RoleAssistant, Content: prev.Content, Thinking: prev.Thinking, ToolCalls: prev.ToolCalls})
		}
		rd.history = append(rd.history, req.New...)
		if len(rd.history) == req.Messages {
			c.Request.History = rd.history[:len(rd.history):len(rd.history)]
		} else {
			rd.broken = true
		}
	} else {
		rd.broken = true
	}
	rec.Calls = append(rec.Calls, c)
	rd.lastModel = len(rec.Calls) - 1
	rd.claimed = make([]bool, len(c.Response.ToolCalls))
}

// text is v as text; "" for no value (Value.Text says "null").
func text(v trace.Value) string {
	if len(v) == 0 {
		return ""
	}
	return v.Text()
}

func redacted(s string) bool { return strings.Contains(s, redact.DefaultReplacement) }

func (rd *reader) finish() {
	rec := rd.rec
	if !rd.started {
		rd.problem("the records hold no run.start of a root run; is this a trace of an agent run?")
	}
	if rd.started && rd.models == 0 {
		rd.problem("the run has no model call of its own (model.call records of the root run): it was not recorded by an agent loop whose model calls Loupe traced, as imported traces often are not; there is nothing to replay")
	}
	if rd.lost > 0 {
		rd.problem("%d records of the trace were lost on the way to the store (dropped records); replay needs every model and tool call", rd.lost)
	}
	if !rec.Ended {
		rd.problem("the run has not ended (no run.end record): it is still running, or it crashed before recording its end")
	}
	for _, i := range rd.open {
		c := &rec.Calls[i]
		rd.problem("record %d: tool call %d (%s, step %d) never ended; its result is unknown", c.Seq, c.Index, c.Name, c.Step)
	}
}

// limit keeps the limit a guardrail record says stopped the run.
func (rd *reader) limit(r *trace.Record) {
	var d struct {
		Limit json.Number `json:"limit"`
	}
	if json.Unmarshal(r.Output, &d) != nil || d.Limit == "" {
		return
	}
	l := &rd.rec.Limits
	n, _ := d.Limit.Int64()
	f, _ := d.Limit.Float64()
	switch rule := r.Name; {
	case rule == "max_iterations":
		l.MaxIterations = int(n)
	case rule == "max_tool_calls":
		l.MaxToolCalls = int(n)
	case strings.HasPrefix(rule, "max_tool_calls:"):
		if l.MaxToolCallsPerTool == nil {
			l.MaxToolCallsPerTool = map[string]int{}
		}
		l.MaxToolCallsPerTool[strings.TrimPrefix(rule, "max_tool_calls:")] = int(n)
	case rule == "max_tokens":
		l.MaxTokens = n
	case rule == "max_cost_usd":
		l.MaxCostUSD = f
	}
}
