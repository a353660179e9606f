package lctrace

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/trace"
	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// Options configure a Handler. The zero value names root runs
// "langchaingo", records model calls under the name "llm" (or the model the
// response names) without a provider, and prices them with the built-in
// price table.
type Options struct {
	// Name names the root runs the Handler starts; empty means
	// "langchaingo". Nested runs are named "chain".
	Name string
	// Tags label every root run the Handler starts, e.g. "env:ci".
	Tags []string
	// Model is the model's name as recorded in model.call records and
	// used to price calls. langchaingo's callbacks do not carry it; when
	// empty, a "model" string in the response's GenerationInfo is used,
	// else "llm".
	Model string
	// Provider is recorded in each model call's usage ("openai",
	// "anthropic", …).
	Provider string
	// Prices prices model calls; nil means price.Builtin(). A call whose
	// model has no price has an unknown cost (trace.Usage.CostUnknown).
	Prices *price.Table
}

// A Handler records langchaingo callbacks into Loupe runs. It implements
// callbacks.Handler. Make one with New; it is safe for concurrent use, and
// one Handler may serve many runs at once as long as each has a context of
// its own (see the package documentation). A Handler keeps state only for
// the runs in progress.
type Handler struct {
	tracer *trace.Tracer
	opts   Options
	prices *price.Table

	mu     sync.Mutex
	states map[any]*state
}

var _ callbacks.Handler = (*Handler)(nil)

// New returns a Handler that starts root runs with tracer. A nil tracer is
// allowed: the Handler then records only into Loupe runs that the contexts
// it is given carry (trace.FromContext), and nothing elsewhere.
func New(tracer *trace.Tracer, opts Options) *Handler {
	if opts.Name == "" {
		opts.Name = "langchaingo"
	}
	p := opts.Prices
	if p == nil {
		p = price.Builtin()
	}
	return &Handler{tracer: tracer, opts: opts, prices: p, states: map[any]*state{}}
}

const (
	// errNoEnd is the error of a call whose end langchaingo never
	// reported, recorded when its run ends or the next call begins.
	errNoEnd = "langchaingo reported no end for this call"
	// Names of what langchaingo's callbacks do not name.
	nestedRunName = "chain"
	retrieverName = "retriever"
	unnamedTool   = "tool"
	// notFinished is agents.ErrNotFinished's text: the executor finishes
	// with it as its output when it runs out of iterations.
	notFinished = "agent not finished before max iterations"
)

// state is what one context's runs have in progress: a stack of frames,
// the innermost last. Its mutex serialises the callbacks of that context.
type state struct {
	mu     sync.Mutex
	frames []*frame
	dead   bool // forgotten by release: look the context up again
}

// A frame is a run, or an agent's planning chain inside one (transparent:
// it records into its run).
type frame struct {
	r           *run
	transparent bool
}

// runKind says who owns a run.
type runKind uint8

const (
	owned     runKind = iota // started by a chain start; ended by its end
	borrowed                 // the Loupe run the context carries, for a call made outside any chain
	ephemeral                // a root run started for a call made outside any chain; ended with it
)

// A run is a Loupe run (ExecutionContext) the Handler records into.
type run struct {
	ec   *trace.ExecutionContext
	ctx  context.Context // carries ec
	kind runKind

	iter    bool // an iteration is open
	planned bool // it planned (a model call or planning chain)
	acted   bool // it ran agent actions

	model      *modelCall
	tools      []*toolCall // open tool calls, oldest first
	retrievals []*retrieval
}

type modelCall struct {
	id     trace.SpanID
	parent trace.SpanID // the tool call making it, if any; else the iteration or run
	name   string       // as the deltas were recorded
	start  time.Time
	input  trace.Value
}

type toolCall struct {
	span    trace.Span
	id      string // the model's tool call id (functions agents)
	log     string // the action's log (one-shot agents' scratchpad)
	action  bool   // started by an agent action
	started bool   // the tool reported HandleToolStart
}

type retrieval struct {
	span  trace.Span
	query string
}

// sharedKey is the key of the state of contexts that cannot be map keys.
type sharedKey struct{}

// lookup returns the state for ctx (not nil), creating it when create is
// set; nil when there is none. A context is its runs' key; contexts that
// cannot be map keys share one.
func (h *Handler) lookup(ctx context.Context, create bool) (st *state) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var k any = ctx
	defer func() {
		// A context whose dynamic value is not comparable panics as a
		// map key: such contexts share one key.
		if recover() != nil {
			k = sharedKey{}
			st = h.states[k]
			if st == nil && create {
				st = &state{}
				h.states[k] = st
			}
		}
	}()
	st = h.states[k]
	if st == nil && create {
		st = &state{}
		h.states[k] = st
	}
	return st
}

// release forgets st when no run of it is in progress.
func (h *Handler) release(ctx context.Context, st *state) {
	if len(st.frames) > 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	st.dead = true
	if !h.forget(ctx, st) && h.states[sharedKey{}] == st {
		delete(h.states, sharedKey{})
	}
}

// forget deletes key k's state if it is st, and reports whether it did; a
// key that cannot be a map key (see lookup) is not deleted. h.mu is held.
func (h *Handler) forget(k any, st *state) (done bool) {
	defer func() {
		if recover() != nil {
			done = false
		}
	}()
	if h.states[k] == st {
		delete(h.states, k)
		return true
	}
	return false
}

// with runs fn with ctx's state locked, creating the state, and forgets
// the state afterwards if nothing is left in progress.
func (h *Handler) with(ctx context.Context, fn func(ctx context.Context, st *state)) {
	if ctx == nil {
		ctx = context.Background()
	}
	var st *state
	for {
		st = h.lookup(ctx, true)
		st.mu.Lock()
		if !st.dead {
			break
		}
		st.mu.Unlock()
	}
	defer st.mu.Unlock()
	fn(ctx, st)
	h.release(ctx, st)
}

func (st *state) top() *frame {
	if len(st.frames) == 0 {
		return nil
	}
	return st.frames[len(st.frames)-1]
}

// topOwned returns the innermost run started by a chain, or nil.
func (st *state) topOwned() *run {
	for i := len(st.frames) - 1; i >= 0; i-- {
		if r := st.frames[i].r; r.kind == owned {
			return r
		}
	}
	return nil
}

// target returns the run a call made now records into: the innermost run
// in progress, else the Loupe run ctx carries (borrowed), else a new root
// run (ephemeral), pushed as a frame. The last two are popped again by
// settle once their calls end.
func (h *Handler) target(ctx context.Context, st *state) *run {
	if f := st.top(); f != nil {
		return f.r
	}
	r := &run{ctx: ctx, kind: borrowed, ec: trace.FromContext(ctx)}
	if r.ec == nil {
		r.kind = ephemeral
		r.ctx, r.ec = h.tracer.Start(ctx, h.opts.Name, trace.RunOptions{Tags: h.opts.Tags})
	}
	st.frames = append(st.frames, &frame{r: r})
	return r
}

// settle pops the frames of calls made outside any chain whose calls have
// ended, ending an ephemeral run.
func (st *state) settle() {
	for {
		f := st.top()
		if f == nil || f.r.kind == owned || f.r.busy() {
			return
		}
		st.frames = st.frames[:len(st.frames)-1]
		if f.r.kind == ephemeral {
			f.r.ec.End(nil, nil)
		}
	}
}

func (r *run) busy() bool { return r.model != nil || len(r.tools) > 0 || len(r.retrievals) > 0 }

// beginStep opens the iteration a planning step belongs to: a new one
// when none is open or the open one already planned or acted.
func (r *run) beginStep() {
	if r.kind != owned {
		return
	}
	if r.iter && (r.planned || r.acted) {
		r.ec.EndIteration("continue")
		r.iter = false
	}
	if !r.iter {
		r.ec.StartIteration()
		r.iter, r.planned, r.acted = true, false, false
	}
	r.planned = true
}

// endIteration closes the open iteration with action.
func (r *run) endIteration(action string) {
	if r.iter {
		r.ec.EndIteration(action)
		r.iter, r.planned, r.acted = false, false, false
	}
}

// closeTools ends every open tool call: with err when not nil, else as
// returned, with the output observe finds for it (nil when unknown).
func (r *run) closeTools(err error, observe func(*toolCall) trace.Value) {
	for _, t := range r.tools {
		if err != nil {
			t.span.End(nil, err)
			continue
		}
		var out trace.Value
		if observe != nil {
			out = observe(t)
		}
		t.span.End(out, nil)
	}
	r.tools = nil
}

// closeAll ends whatever the run has open when it ends: the model call
// and retrievals as failed (with err, or errNoEnd), the tool calls as
// closeTools does.
func (r *run) closeAll(h *Handler, err error) {
	if r.model != nil {
		e := err
		if e == nil {
			e = errors.New(errNoEnd)
		}
		r.endModelWith(h, nil, e)
	}
	for _, q := range r.retrievals {
		e := err
		if e == nil {
			e = errors.New(errNoEnd)
		}
		q.span.End(nil, e)
	}
	r.retrievals = nil
	r.closeTools(err, nil)
}

// HandleChainStart starts a run for the chain: a root run (or a nested run
// of the Loupe run ctx carries) for the outermost chain, a nested run for
// a chain inside another; an agent's planning chain instead begins an
// iteration of the run it belongs to.
func (h *Handler) HandleChainStart(ctx context.Context, inputs map[string]any) {
	h.with(ctx, func(ctx context.Context, st *state) {
		parent := st.topOwned()
		if parent != nil {
			if pad, ok := inputs["agent_scratchpad"]; ok {
				// The agent plans its next step: the tools it ran are done,
				// and its scratchpad holds what they returned.
				text, _ := pad.(string)
				parent.closeTools(nil, scratchpadObservations(text, parent.tools))
				parent.beginStep()
				st.frames = append(st.frames, &frame{r: parent, transparent: true})
				return
			}
		}
		in := inputValue(inputs)
		r := &run{kind: owned}
		switch {
		case parent != nil:
			pctx := parent.ctx
			if n := len(parent.tools); n > 0 {
				pctx = parent.tools[n-1].span.Context(pctx) // run by the tool in progress
			}
			r.ctx, r.ec = trace.SpawnChild(pctx, nestedRunName, nil)
		case trace.FromContext(ctx) != nil:
			r.ctx, r.ec = trace.SpawnChild(ctx, h.opts.Name, nil)
		default:
			r.ctx, r.ec = h.tracer.Start(ctx, h.opts.Name, trace.RunOptions{Input: in, Tags: h.opts.Tags})
		}
		// The input as the user's message, as Loupe's agent loop records
		// it; a nested run has no other place for it (child.spawn carries
		// none), a root run has it on run.start too.
		if len(in) > 0 && (in[0] == '"' || r.ec.Parent() != nil) {
			r.ec.Message("user", in)
		}
		st.frames = append(st.frames, &frame{r: r})
	})
}

// popChain pops the frames down to and including the innermost chain's
// (ending calls made outside it that never ended), and returns that frame,
// or nil when no chain is in progress.
func (st *state) popChain(h *Handler, err error) *frame {
	for len(st.frames) > 0 {
		f := st.frames[len(st.frames)-1]
		st.frames = st.frames[:len(st.frames)-1]
		if f.r.kind == owned {
			return f
		}
		f.r.closeAll(h, err)
		if f.r.kind == ephemeral {
			f.r.ec.End(nil, err)
		}
	}
	return nil
}

// HandleChainEnd ends the innermost chain's run with its outputs.
func (h *Handler) HandleChainEnd(ctx context.Context, outputs map[string]any) {
	h.with(ctx, func(ctx context.Context, st *state) {
		f := st.popChain(h, nil)
		if f == nil || f.transparent {
			return
		}
		r := f.r
		r.closeAll(h, nil)
		r.endIteration("terminate")
		r.ec.End(outputValue(outputs), nil)
	})
}

// HandleChainError ends the innermost chain's run with err, failing what
// it left open: langchaingo's executor stops at the first tool error, and
// some providers return a model's error without reporting it.
func (h *Handler) HandleChainError(ctx context.Context, err error) {
	if err == nil {
		err = errors.New("langchaingo reported a chain error without an error")
	}
	h.with(ctx, func(ctx context.Context, st *state) {
		f := st.popChain(h, err)
		if f == nil {
			return
		}
		r := f.r
		if f.transparent {
			if r.model != nil {
				r.endModelWith(h, nil, err)
			}
			return
		}
		r.closeAll(h, err)
		r.endIteration("terminate")
		r.ec.End(nil, err)
	})
}

// startModel opens a model call with input; a call still open is ended
// first as never reported.
func (h *Handler) startModel(ctx context.Context, msgs []message) {
	h.with(ctx, func(ctx context.Context, st *state) {
		r := h.target(ctx, st)
		if f := st.top(); f != nil && !f.transparent && r.kind == owned {
			// A model call the run makes itself is a planning step: the
			// tools before it are done (a functions agent shows their
			// results to the model), unless one is running the call.
			answered := toolResponses(msgs)
			var still []*toolCall
			for _, t := range r.tools {
				out, ok := answered[t.id]
				if t.id == "" || !ok {
					if t.started {
						still = append(still, t)
						continue
					}
				}
				t.span.End(out, nil)
			}
			r.tools = still
			if len(still) == 0 {
				r.beginStep()
			}
		}
		if r.model != nil {
			r.endModelWith(h, nil, errors.New(errNoEnd))
		}
		r.model = &modelCall{id: trace.NewSpanID(), name: h.modelName(), start: time.Now(), input: requestValue(msgs)}
		if n := len(r.tools); n > 0 && r.tools[n-1].started {
			r.model.parent = r.tools[n-1].span.ID() // made by the tool in progress
		}
	})
}

// HandleLLMGenerateContentStart opens a model call with the messages sent.
func (h *Handler) HandleLLMGenerateContentStart(ctx context.Context, ms []llms.MessageContent) {
	h.startModel(ctx, messagesOf(ms))
}

// HandleLLMStart opens a model call for prompts (each a user message).
func (h *Handler) HandleLLMStart(ctx context.Context, prompts []string) {
	msgs := make([]message, len(prompts))
	for i, p := range prompts {
		msgs[i] = message{Role: "user", Content: p}
	}
	h.startModel(ctx, msgs)
}

// HandleLLMGenerateContentEnd records the model call with its response.
func (h *Handler) HandleLLMGenerateContentEnd(ctx context.Context, res *llms.ContentResponse) {
	h.with(ctx, func(ctx context.Context, st *state) {
		r := h.target(ctx, st)
		r.endModelWith(h, res, nil)
		st.settle()
	})
}

// HandleLLMError records the model call as failed with err.
func (h *Handler) HandleLLMError(ctx context.Context, err error) {
	if err == nil {
		err = errors.New("langchaingo reported a model error without an error")
	}
	h.with(ctx, func(ctx context.Context, st *state) {
		r := h.target(ctx, st)
		r.endModelWith(h, nil, err)
		st.settle()
	})
}

// endModelWith records the open model call (or one without a start) with
// res or err.
func (r *run) endModelWith(h *Handler, res *llms.ContentResponse, err error) {
	if r.model == nil {
		r.model = &modelCall{id: trace.NewSpanID(), name: h.modelName(), start: time.Now()}
	}
	m := r.model
	r.model = nil
	rec := trace.Record{Type: trace.TypeModelCall, SpanID: m.id, ParentID: m.parent, Input: m.input, Duration: time.Since(m.start)}
	rec.Name = h.opts.Model
	if res != nil {
		resp := responseOf(res)
		rec.Output, rec.Thinking, rec.Status = resp.output, resp.thinking, resp.finish
		rec.Usage = resp.usage
		if rec.Name == "" {
			rec.Name = resp.model
		}
	}
	if rec.Name == "" {
		rec.Name = m.name
	}
	rec.Usage.Provider = h.opts.Provider
	h.price(rec.Name, &rec.Usage)
	if err != nil {
		rec.Error = err.Error()
	}
	r.ec.Record(rec)
}

// price sets u's cost from the price table, or CostUnknown when model has
// no price and the call used tokens.
func (h *Handler) price(model string, u *trace.Usage) {
	if u.InputTokens+u.OutputTokens == 0 {
		return
	}
	c, ok := h.prices.Cost(model, price.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CachedRead: u.CachedTokens, Reasoning: u.ReasoningTokens})
	if ok {
		u.CostUSD = c
	} else {
		u.CostUnknown = true
	}
}

// HandleStreamingFunc records chunk as a model.delta of the model call in
// progress (of the run, when no call is open).
func (h *Handler) HandleStreamingFunc(ctx context.Context, chunk []byte) {
	if ctx == nil {
		ctx = context.Background()
	}
	st := h.lookup(ctx, false)
	if st == nil {
		if ec := trace.FromContext(ctx); ec != nil {
			ec.Record(trace.Record{Type: trace.TypeModelDelta, Name: h.modelName(), Status: "text", Output: trace.Text(string(chunk))})
		}
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	f := st.top()
	if f == nil || st.dead {
		return
	}
	rec := trace.Record{Type: trace.TypeModelDelta, Name: h.modelName(), Status: "text", Output: trace.Text(string(chunk))}
	if m := f.r.model; m != nil {
		rec.ParentID, rec.Name = m.id, m.name
	}
	f.r.ec.Record(rec)
}

func (h *Handler) modelName() string {
	if h.opts.Model != "" {
		return h.opts.Model
	}
	return "llm"
}

// HandleAgentAction starts a tool call named after the action's tool: the
// executor calls the tool right after. Tool calls still open are done.
func (h *Handler) HandleAgentAction(ctx context.Context, action schema.AgentAction) {
	h.with(ctx, func(ctx context.Context, st *state) {
		r := h.target(ctx, st)
		r.closeTools(nil, nil)
		if r.kind == owned {
			if !r.iter {
				r.beginStep()
			}
			r.acted = true
		}
		name := action.Tool
		if name == "" {
			name = unnamedTool
		}
		span := r.ec.StartSpan(trace.SpanTool, name, argsValue(action.ToolInput))
		r.tools = append(r.tools, &toolCall{span: span, id: action.ToolID, log: action.Log, action: true})
	})
}

// HandleToolStart marks the tool call the last agent action started as
// running; without one it starts a tool call named "tool".
func (h *Handler) HandleToolStart(ctx context.Context, input string) {
	h.with(ctx, func(ctx context.Context, st *state) {
		r := h.target(ctx, st)
		if n := len(r.tools); n > 0 && r.tools[n-1].action && !r.tools[n-1].started {
			r.tools[n-1].started = true
			return
		}
		span := r.ec.StartSpan(trace.SpanTool, unnamedTool, argsValue(input))
		r.tools = append(r.tools, &toolCall{span: span, started: true})
	})
}

// endTool ends the latest open tool call with output or err; without one
// it records the end alone.
func (h *Handler) endTool(ctx context.Context, output trace.Value, err error) {
	h.with(ctx, func(ctx context.Context, st *state) {
		r := h.target(ctx, st)
		if n := len(r.tools); n > 0 {
			t := r.tools[n-1]
			r.tools = r.tools[:n-1]
			t.span.End(output, err)
		} else {
			r.ec.ToolCall(unnamedTool, nil, output, 0, err)
		}
		st.settle()
	})
}

// HandleToolEnd ends the tool call in progress with its output.
func (h *Handler) HandleToolEnd(ctx context.Context, output string) {
	h.endTool(ctx, trace.Text(output), nil)
}

// HandleToolError ends the tool call in progress as failed with err.
func (h *Handler) HandleToolError(ctx context.Context, err error) {
	if err == nil {
		err = errors.New("langchaingo reported a tool error without an error")
	}
	h.endTool(ctx, nil, err)
}

// HandleAgentFinish records the agent's answer as an assistant message and
// ends the iteration; a finish for want of iterations records the
// max_iterations guardrail and sets the run's termination.
func (h *Handler) HandleAgentFinish(ctx context.Context, finish schema.AgentFinish) {
	h.with(ctx, func(ctx context.Context, st *state) {
		r := h.target(ctx, st)
		r.closeTools(nil, nil)
		out, _ := finish.ReturnValues["output"].(string)
		if out == notFinished && r.kind == owned {
			r.endIteration("terminate")
			msg := "max_iterations: the agent did not finish within the executor's iterations; raise agents.WithMaxIterations or make the agent finish sooner"
			r.ec.Guardrail("max_iterations", "abort", msg, trace.JSON(map[string]int{"iterations": r.ec.Iteration()}))
			r.ec.SetTermination(trace.TerminationMaxIterations, errors.New(notFinished))
			return
		}
		r.ec.Message("assistant", outputValue(finish.ReturnValues))
		r.endIteration("terminate")
		st.settle()
	})
}

// HandleRetrieverStart starts a tool call named "retriever" with input
// {"query": query}.
func (h *Handler) HandleRetrieverStart(ctx context.Context, query string) {
	h.with(ctx, func(ctx context.Context, st *state) {
		r := h.target(ctx, st)
		span := r.ec.StartSpan(trace.SpanTool, retrieverName, safeJSON(map[string]string{"query": query}))
		r.retrievals = append(r.retrievals, &retrieval{span: span, query: query})
	})
}

// HandleRetrieverEnd ends the retrieval of query with the documents found.
func (h *Handler) HandleRetrieverEnd(ctx context.Context, query string, documents []schema.Document) {
	h.with(ctx, func(ctx context.Context, st *state) {
		r := h.target(ctx, st)
		out := documentsValue(documents)
		i := len(r.retrievals) - 1
		for j := i; j >= 0; j-- {
			if r.retrievals[j].query == query {
				i = j
				break
			}
		}
		if i < 0 {
			r.ec.ToolCall(retrieverName, safeJSON(map[string]string{"query": query}), out, 0, nil)
		} else {
			q := r.retrievals[i]
			r.retrievals = append(r.retrievals[:i], r.retrievals[i+1:]...)
			q.span.End(out, nil)
		}
		st.settle()
	})
}

// HandleText records text as a custom record named "langchaingo.text".
func (h *Handler) HandleText(ctx context.Context, text string) {
	h.with(ctx, func(ctx context.Context, st *state) {
		r := h.target(ctx, st)
		r.ec.Custom("langchaingo.text", trace.Text(text))
		st.settle()
	})
}

// scratchpadObservations returns a function that finds a text agent's
// tool call's observation in its scratchpad, which the one-shot agent
// writes as "\n" + the action's log + "\nObservation: " + observation +
// "\n" per step, and the conversational agent as the action's log +
// "\nObservation: " + observation, then "\nThought:" at the end.
func scratchpadObservations(pad string, tools []*toolCall) func(*toolCall) trace.Value {
	if pad == "" {
		return nil
	}
	return func(t *toolCall) trace.Value {
		if t.log == "" {
			return nil
		}
		marker := t.log + "\nObservation: "
		i := strings.LastIndex(pad, marker)
		if i < 0 {
			return nil
		}
		obs := pad[i+len(marker):]
		// The steps after this one follow as "\n" + log; steps' logs are
		// the model's outputs, so cut at the next open call's.
		for _, o := range tools {
			if o != t && o.log != "" {
				if j := strings.Index(obs, "\n"+o.log+"\nObservation: "); j >= 0 {
					obs = obs[:j]
				}
			}
		}
		// The one-shot agent ends each step with "\n", the conversational
		// one the scratchpad with "\nThought:".
		obs = strings.TrimSuffix(strings.TrimSuffix(obs, "\nThought:"), "\n")
		return trace.Text(obs)
	}
}
