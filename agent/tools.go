package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// A Tool is one callable tool. Package tool builds Tools from plain Go
// functions with typed, schema-validated input.
type Tool interface {
	// Definition describes the tool to a model.
	Definition() ToolDef
	// Call runs the tool with input, one JSON value, and returns its
	// output as one JSON value. An error is shown to the model as the
	// result of the call, and so is a panic (as a *trace.PanicError).
	// Call may be called concurrently.
	Call(ctx context.Context, input json.RawMessage) (json.RawMessage, error)
}

// A ToolChain is the set of tools a loop offers a model. Calls made
// through CallTool and CallTools are traced (tool.start, then tool.end or
// tool.error), counted against the run's tool-call limits and surrounded
// by the tool hooks; a ToolChain itself does not trace. A panic in Call
// fails that call only, like an error. Implementations
// must be safe for concurrent use, since tools may run in parallel.
type ToolChain interface {
	// Definitions describes every tool, in a stable order.
	Definitions() []ToolDef
	// Call runs the tool call.Name with call.Input.
	Call(ctx context.Context, call ToolCall) (json.RawMessage, error)
}

// A Toolbox is a ToolChain made of Tools, looked up by name. It is safe
// for concurrent use once built.
type Toolbox struct {
	tools []Tool
	defs  []ToolDef
	index map[string]Tool
}

// NewToolbox returns a Toolbox holding tools. It panics if two tools have
// the same name or a name is empty, which is a programming error.
func NewToolbox(tools ...Tool) *Toolbox {
	b := &Toolbox{index: make(map[string]Tool, len(tools))}
	for _, t := range tools {
		d := t.Definition()
		if d.Name == "" {
			panic("agent: NewToolbox: a tool has no name")
		}
		if _, dup := b.index[d.Name]; dup {
			panic(fmt.Sprintf("agent: NewToolbox: two tools are named %q", d.Name))
		}
		b.index[d.Name] = t
		b.tools = append(b.tools, t)
		b.defs = append(b.defs, d)
	}
	return b
}

// Definitions returns the tools' definitions in the order given to
// NewToolbox. The caller must not modify them.
func (b *Toolbox) Definitions() []ToolDef { return b.defs }

// Call runs the tool named call.Name; an unknown name is an error that
// lists the tools there are, so the model can correct itself.
func (b *Toolbox) Call(ctx context.Context, call ToolCall) (json.RawMessage, error) {
	t, ok := b.index[call.Name]
	if !ok {
		names := make([]string, len(b.defs))
		for i, d := range b.defs {
			names[i] = d.Name
		}
		slices.Sort(names)
		return nil, fmt.Errorf("unknown tool %q; the tools are: %s", call.Name, strings.Join(names, ", "))
	}
	return t.Call(ctx, call.Input)
}

// DiscoverTools records a tool.discovered record for each tool of chain:
// the input schema as Input and the description as Output (a JSON
// string, "" for none, so that a replay can tell an empty description
// from one recorded before descriptions were). Together with the
// model.call records they hold the whole of each request a model saw.
// Loops call it once when a run starts.
func DiscoverTools(ec *trace.ExecutionContext, chain ToolChain) {
	if ec == nil || chain == nil {
		return
	}
	for _, d := range chain.Definitions() {
		ec.Record(trace.Record{Type: trace.TypeToolDiscovered, Name: d.Name, Input: jsonValue(d.Schema), Output: trace.Text(d.Description)})
	}
}

// A ToolResult is the outcome of one tool call.
type ToolResult struct {
	Call   ToolCall
	Output json.RawMessage // the tool's output, when Err is nil
	Err    error           // why the call failed; see IsStop
}

// Content returns the result as the text a model sees: the output, or the
// error prefixed with "error: ".
func (r ToolResult) Content() string {
	if r.Err != nil {
		return errorText(r.Err)
	}
	var s string
	if len(r.Output) > 0 && r.Output[0] == '"' && json.Unmarshal(r.Output, &s) == nil {
		return s
	}
	return string(r.Output)
}

// Message returns the result as a RoleTool message answering the call.
func (r ToolResult) Message() Message {
	return Message{Role: RoleTool, ToolCallID: r.Call.ID, Name: r.Call.Name, Content: r.Content(), IsError: r.Err != nil}
}

// CallTool runs one tool call through chain, traced as a tool span in the
// run carried by ctx, checked against the run's tool-call limits, with the
// before_tool and after_tool hooks around it. When a limit or a hook stops
// the run, the tool is not called and the result's Err says why (see
// IsStop). A tool that panics fails the call: Err is a *trace.PanicError
// with the panic value and where it was raised, recorded as tool.error.
func CallTool(ctx context.Context, chain ToolChain, call ToolCall) ToolResult {
	var c toolCall
	if c.begin(ctx, call) {
		c.invoke(ctx, chain)
		c.finish(ctx)
	}
	return c.res
}

// A toolCall is one tool call in its three steps: begin (limits,
// before_tool hooks, tool.start) and finish (tool.end or tool.error,
// after_tool hooks) run in the caller's goroutine, invoke may run in
// another. CallTools runs begin and finish in the order the model asked
// for the calls, so that their records, and everything the hooks record,
// come in that order whatever order the tools finish in.
type toolCall struct {
	r     *run
	ec    *trace.ExecutionContext
	hooks bool
	res   ToolResult
	span  trace.Span
	start time.Time     // when the tool was called, for the after_tool hook
	dur   time.Duration // how long the tool took, for the after_tool hook
	end   trace.Record  // the tool.end or tool.error record, made when the tool returned
	began bool          // CallTools: begin let the call run
	ready bool          // CallTools: the tool returned, or was never called
}

// begin prepares the call; it reports false when the call must not run,
// with c.res.Err saying why.
func (c *toolCall) begin(ctx context.Context, call ToolCall) bool {
	r := runFrom(ctx)
	c.r, c.ec, c.res.Call = r, trace.FromContext(ctx), call
	if r != nil {
		if err := r.ctxErr(ctx, ctx.Err()); err != nil {
			c.res.Err = err
			return false
		}
		if err := r.beforeToolCall(call.Name); err != nil {
			c.res.Err = err
			return false
		}
	}
	c.hooks = r != nil && len(r.exec.Hooks) > 0
	if c.hooks {
		// Hooks get pointers to copies made here, so that without hooks
		// the call stays on the stack (the same for the request and
		// response in Generate).
		cc := call
		if err := r.fire(ctx, &HookEvent{Point: BeforeTool, ToolCall: &cc}, true); err != nil {
			c.res.Err = err
			return false
		}
		c.res.Call = cc
	}
	if c.ec != nil {
		c.span = c.ec.StartSpan(trace.SpanTool, c.res.Call.Name, jsonValue(c.res.Call.Input))
	}
	if c.hooks { // the clock is read only for what uses it
		c.start = time.Now()
	}
	return true
}

// invoke calls the tool, turning a panic into the call's error, and takes
// the end record (its time is when the tool returned) without recording it.
func (c *toolCall) invoke(ctx context.Context, chain ToolChain) {
	call := c.res.Call
	if chain == nil {
		c.res.Err = fmt.Errorf("no tools are available; %s cannot be called", call.Name)
	} else {
		c.res.Output, c.res.Err = callChain(c.span.Context(ctx), chain, call)
	}
	c.ended()
}

// ended takes the end record and the duration when the tool returned,
// not when the call is finished, which may be later.
func (c *toolCall) ended() {
	if c.ec != nil {
		c.end = c.span.EndRecord(jsonValue(c.res.Output), c.res.Err)
	}
	if c.hooks {
		c.dur = time.Since(c.start)
	}
}

// callChain calls chain, recovering a panic as a *trace.PanicError.
func callChain(ctx context.Context, chain ToolChain, call ToolCall) (out json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, trace.NewPanicError(v)
		}
	}()
	return chain.Call(ctx, call)
}

// finish records the end of the call and fires the after_tool hooks.
func (c *toolCall) finish(ctx context.Context) {
	if c.ec != nil {
		c.ec.Record(c.end)
		c.end = trace.Record{} // the output is the tool's; do not keep it twice
	}
	r := c.r
	if r != nil && c.res.Err != nil {
		c.res.Err = r.ctxErr(ctx, c.res.Err)
	}
	if c.hooks {
		cc := c.res.Call
		if err := r.fire(ctx, &HookEvent{Point: AfterTool, ToolCall: &cc, ToolOutput: c.res.Output, Err: c.res.Err, Duration: c.dur}, true); err != nil {
			c.res.Err = err
		}
	}
}

// CallTools runs calls through chain and returns their results in call
// order. With parallel set and more than one call, each tool runs in its
// own goroutine, while everything recorded around the tools (limits,
// hooks, tool.start, tool.end or tool.error) is recorded in call order:
// each call is begun in turn before its tool starts, and each is finished
// in turn once its tool and those before it have returned. A trace of
// parallel calls is therefore the same whatever order they finish in;
// their times still show how they overlapped. (Records that the tools
// themselves make, in nested runs for example, interleave as they
// happen.) A tool that panics or calls runtime.Goexit fails its call with
// an error; the others go on.
func CallTools(ctx context.Context, chain ToolChain, calls []ToolCall, parallel bool) []ToolResult {
	out := make([]ToolResult, len(calls))
	if !parallel || len(calls) < 2 {
		for i, c := range calls {
			out[i] = CallTool(ctx, chain, c)
		}
		return out
	}
	cs := make([]toolCall, len(calls))
	done := make(chan int, len(calls)) // the index of each call whose tool returned
	for i, call := range calls {
		c := &cs[i]
		if !c.begin(ctx, call) {
			c.ready = true // not called: nothing to wait for, nothing to finish
			continue
		}
		c.began = true
		go func() {
			returned := false
			defer func() {
				if !returned {
					// The tool called runtime.Goexit, which recover
					// cannot stop, or something around it panicked (a
					// tool's error whose Error method panics): the call
					// fails, the other calls and the run go on.
					err := errGoexit
					if v := recover(); v != nil {
						err = trace.NewPanicError(v)
					}
					c.res.Output, c.res.Err = nil, err
					c.ended()
				}
				done <- i
			}()
			c.invoke(ctx, chain)
			returned = true
		}()
	}
	// Finish the calls in order: a call whose tool returned early waits
	// for the ones before it.
	for next := 0; next < len(cs); {
		c := &cs[next]
		if !c.ready {
			cs[<-done].ready = true
			continue
		}
		if c.began {
			c.finish(ctx)
		}
		out[next] = c.res
		next++
	}
	return out
}

// errGoexit fails a parallel tool call whose tool called runtime.Goexit.
var errGoexit = errors.New("the tool called runtime.Goexit (t.FailNow or t.SkipNow in a test?) instead of returning")

// Generate asks m for the next turn, traced as one model.call record in
// the run carried by ctx (with streamed chunks as model.delta records when
// m streams), checked against the run's token and cost budgets, with the
// before_model and after_model hooks around it. A call that pushes the run
// over a budget returns its response together with the *LimitError. A
// model that panics fails the call: the error is a *trace.PanicError,
// recorded on the model.call record like any model error.
func Generate(ctx context.Context, m Model, req Request) (Response, error) {
	r := runFrom(ctx)
	ec := trace.FromContext(ctx)
	if r != nil {
		if err := r.ctxErr(ctx, ctx.Err()); err != nil {
			return Response{}, err
		}
		if err := r.checkBudget(); err != nil {
			return Response{}, err
		}
	}
	hooks := r != nil && len(r.exec.Hooks) > 0
	name := m.Name()
	if hooks {
		rq := req
		if err := r.fire(ctx, &HookEvent{Point: BeforeModel, Model: name, Request: &rq}, true); err != nil {
			return Response{}, err
		}
		req = rq
	}
	var span trace.Span
	var buf *[]byte
	if ec != nil {
		// The request and response values are built in a pooled buffer:
		// the recorder copies what it keeps, so the buffer is free again
		// once EndModel returns.
		buf = valueBufs.Get().(*[]byte)
		*buf = appendRequest((*buf)[:0], req)
		span = ec.StartSpan(trace.SpanModel, name, *buf)
		if req.OnDelta == nil {
			req.OnDelta = func(kind, chunk string) { span.Delta(kind, trace.Text(chunk)) }
		}
	}
	var start time.Time
	if hooks {
		start = time.Now()
	}
	resp, err := generate(ctx, m, req)
	if ec != nil {
		var thinking trace.Value
		if resp.Thinking != "" {
			thinking = trace.Text(resp.Thinking)
		}
		in := len(*buf)
		*buf = appendResponse(*buf, resp)
		span.EndModel((*buf)[in:], thinking, resp.Usage, resp.FinishReason, err)
		if cap(*buf) <= maxPooledBuf {
			valueBufs.Put(buf)
		}
	}
	if r != nil {
		if err != nil {
			err = r.ctxErr(ctx, err)
		} else {
			err = r.spend(name, resp.Usage)
		}
	}
	if hooks {
		rq, rs := req, resp
		if herr := r.fire(ctx, &HookEvent{Point: AfterModel, Model: name, Request: &rq, Response: &rs, Err: err, Duration: time.Since(start)}, true); herr != nil && err == nil {
			err = herr
		}
		resp = rs
	}
	return resp, err
}

// generate calls m, recovering a panic as a *trace.PanicError.
func generate(ctx context.Context, m Model, req Request) (resp Response, err error) {
	defer func() {
		if v := recover(); v != nil {
			resp, err = Response{}, trace.NewPanicError(v)
		}
	}()
	return m.Generate(ctx, req)
}

// jsonValue returns b as a trace value: as is when it is JSON, or as a
// JSON string when a model produced something that is not.
func jsonValue(b []byte) trace.Value {
	if len(b) == 0 {
		return nil
	}
	return trace.Raw(b) // JSON as it is, anything else as a JSON string
}

// valueBufs holds buffers for the values of model.call records.
var valueBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledBuf keeps a buffer that grew for one huge request out of the pool.
const maxPooledBuf = 64 << 10

// appendRequest appends what a model.call record shows of the request:
// the number of messages and tools, and the messages added since the
// model's previous turn. Message records and earlier model.call records
// hold the rest, and encoding the whole history on every call would make
// tracing cost grow with the square of the conversation.
func appendRequest(b []byte, req Request) []byte {
	i := len(req.Messages)
	for i > 0 && req.Messages[i-1].Role != RoleAssistant {
		i--
	}
	// Built by hand: this runs on every model call, and json.Marshal's
	// reflection was the largest part of what tracing cost the loop.
	b = append(b, `{"messages":`...)
	b = strconv.AppendInt(b, int64(len(req.Messages)), 10)
	if len(req.Tools) > 0 {
		b = append(b, `,"tools":`...)
		b = strconv.AppendInt(b, int64(len(req.Tools)), 10)
	}
	b = append(b, `,"new":[`...)
	for j := range req.Messages[i:] {
		if j > 0 {
			b = append(b, ',')
		}
		b = appendMessage(b, &req.Messages[i+j])
	}
	return append(b, "]}"...)
}

// appendMessage appends m as json.Marshal would encode it.
func appendMessage(b []byte, m *Message) []byte {
	b = append(b, `{"role":`...)
	b = trace.AppendString(b, m.Role)
	for _, f := range [...]struct{ key, val string }{{`,"content":`, m.Content}, {`,"thinking":`, m.Thinking}} {
		if f.val != "" {
			b = append(b, f.key...)
			b = trace.AppendString(b, f.val)
		}
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":`...)
		b = appendToolCalls(b, m.ToolCalls)
	}
	for _, f := range [...]struct{ key, val string }{{`,"tool_call_id":`, m.ToolCallID}, {`,"name":`, m.Name}} {
		if f.val != "" {
			b = append(b, f.key...)
			b = trace.AppendString(b, f.val)
		}
	}
	if m.IsError {
		b = append(b, `,"is_error":true`...)
	}
	return append(b, '}')
}

// appendToolCalls appends calls as json.Marshal would encode them.
func appendToolCalls(b []byte, calls []ToolCall) []byte {
	b = append(b, '[')
	for i, c := range calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = trace.AppendString(b, c.ID)
		b = append(b, `,"name":`...)
		b = trace.AppendString(b, c.Name)
		b = append(b, `,"input":`...)
		if len(c.Input) == 0 || !trace.ValidJSON(c.Input) {
			b = append(b, "null"...) // what json.Marshal cannot do, the trace must not break on
		} else {
			b = append(b, c.Input...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendResponse appends the model.call output: the text alone (nothing
// for no text), or the text and the tool calls.
func appendResponse(b []byte, resp Response) []byte {
	if len(resp.ToolCalls) == 0 {
		if resp.Content == "" {
			return b
		}
		return trace.AppendString(b, resp.Content)
	}
	b = append(b, '{')
	if resp.Content != "" {
		b = append(b, `"content":`...)
		b = trace.AppendString(b, resp.Content)
		b = append(b, ',')
	}
	b = append(b, `"tool_calls":`...)
	b = appendToolCalls(b, resp.ToolCalls)
	return append(b, '}')
}
