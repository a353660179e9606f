package einotrace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/trace"
)

// A Handler records Eino callbacks into Loupe traces. Make one with New
// and pass it to Eino (compose.WithCallbacks, or
// callbacks.AppendGlobalHandlers). It is safe for concurrent use, and one
// Handler serves any number of runs.
type Handler struct {
	tracer     *trace.Tracer
	tags       []string
	streamOnly bool
	prices     *price.Table

	busy counter // root runs not yet ended, streams not yet read
}

var (
	_ callbacks.Handler       = (*Handler)(nil)
	_ callbacks.TimingChecker = (*Handler)(nil)
)

// An Option configures a Handler.
type Option func(*Handler)

// WithTags labels every root run the Handler starts (trace.RunOptions.Tags).
func WithTags(tags ...string) Option {
	return func(h *Handler) { h.tags = append([]string(nil), tags...) }
}

// WithStreamOnly starts root runs with trace.RunOptions.StreamOnly: their
// records go to the tracer's sinks and are not kept in memory.
func WithStreamOnly() Option { return func(h *Handler) { h.streamOnly = true } }

// WithPrices prices model calls with t instead of price.Default().
func WithPrices(t *price.Table) Option { return func(h *Handler) { h.prices = t } }

// New returns a Handler that starts root runs with t. A nil t starts none:
// the Handler then records only into a Loupe run the context already
// carries (an Eino graph called from a Loupe agent's tool, or inside
// tracetest.Run), and does nothing without one. Model calls are priced
// with price.Default() unless WithPrices says otherwise; New fails when
// that table cannot be read (a bad LOUPE_PRICES file).
func New(t *trace.Tracer, opts ...Option) (*Handler, error) {
	h := &Handler{tracer: t}
	for _, o := range opts {
		o(h)
	}
	if h.prices == nil {
		p, err := price.Default()
		if err != nil {
			return nil, fmt.Errorf("einotrace: %w", err)
		}
		h.prices = p
	}
	return h, nil
}

// Wait blocks until every root run the Handler started has ended and
// every stream it was given has been read and recorded, or until ctx is
// done, in which case it returns ctx's error. Runs started while it waits
// are waited for too. Call it before reading a streamed run's records:
// the caller may finish reading its stream before the Handler has.
func (h *Handler) Wait(ctx context.Context) error { return h.busy.wait(ctx) }

func (h *Handler) busyAdd()  { h.busy.add() }
func (h *Handler) busyDone() { h.busy.done() }

// A counter counts work in progress; wait waits for none. The zero
// counter counts none.
type counter struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to 0
}

func (c *counter) add() {
	c.mu.Lock()
	if c.n <= 0 {
		c.n = 0
		c.idle = make(chan struct{})
	}
	c.n++
	c.mu.Unlock()
}

func (c *counter) done() {
	c.mu.Lock()
	if c.n > 0 {
		c.n--
		if c.n == 0 {
			close(c.idle)
		}
	}
	c.mu.Unlock()
}

// wait returns when the count is 0, or ctx's error when ctx is done first.
func (c *counter) wait(ctx context.Context) error {
	for {
		c.mu.Lock()
		if c.n <= 0 {
			c.mu.Unlock()
			return nil
		}
		ch := c.idle
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Needed tells Eino whether the Handler has anything to record into: a
// tracer, or a Loupe run in ctx. When it has not, Eino skips it, and does
// not copy streams for it.
func (h *Handler) Needed(ctx context.Context, _ *callbacks.RunInfo, _ callbacks.CallbackTiming) bool {
	return h != nil && ctx != nil && (h.tracer != nil || trace.FromContext(ctx) != nil)
}

// kind is what a component becomes in the trace.
type kind uint8

const (
	kindSkip      kind = iota // plumbing: not recorded
	kindRun                   // a graph, chain or workflow: a run
	kindModel                 // a chat model: model.call
	kindEmbedding             // an embedder: model.call
	kindTool                  // a tool, retriever or indexer: tool.start/end/error
	kindNode                  // anything else: node.start/node.end
)

func kindOf(c components.Component) kind {
	switch c {
	case compose.ComponentOfGraph, compose.ComponentOfChain, compose.ComponentOfWorkflow:
		return kindRun
	case components.ComponentOfChatModel:
		return kindModel
	case components.ComponentOfEmbedding:
		return kindEmbedding
	case components.ComponentOfTool, components.ComponentOfRetriever, components.ComponentOfIndexer:
		return kindTool
	case compose.ComponentOfToolsNode, compose.ComponentOfPassthrough:
		return kindSkip
	}
	return kindNode
}

// A call is one component invocation between its start and end
// callbacks, carried in the context Eino passes from one to the other.
type call struct {
	h    *Handler
	info *callbacks.RunInfo // the same pointer at start and end: how a call knows its own end
	kind kind
	ec   *trace.ExecutionContext // where the call records
	run  *run                    // kindRun: the run it is; else the Handler's run it records into, if any
	own  *run                    // a root run started for a component called on its own
	span trace.Span
	name string

	provider string // model calls: the component's type, lowercased
	done     atomic.Bool
}

type callKey struct{ h *Handler }

type runKey struct{ h *Handler }

// callOf returns the call info started in ctx, if this Handler started it.
func (h *Handler) callOf(ctx context.Context, info *callbacks.RunInfo) *call {
	if ctx == nil {
		return nil
	}
	c, _ := ctx.Value(callKey{h}).(*call)
	if c == nil || c.info != info {
		return nil
	}
	return c
}

// runOf returns the Handler's run that ec is, if it is one.
func (h *Handler) runOf(ctx context.Context, ec *trace.ExecutionContext) *run {
	r, _ := ctx.Value(runKey{h}).(*run)
	if r == nil || ec == nil || r.ec != ec {
		return nil
	}
	return r
}

// OnStart begins recording the call info describes.
func (h *Handler) OnStart(ctx context.Context, info *callbacks.RunInfo, input callbacks.CallbackInput) context.Context {
	nctx, _ := h.start(ctx, info, input, false)
	return nctx
}

// OnStartWithStreamInput begins recording the call info describes, whose
// input is a stream: it is read in a goroutine and closed. A run's
// streamed input is recorded when it has been read (as message records,
// or a custom "eino.input" record), since its run.start is recorded at
// once, and the run ends only after that; other calls' streamed inputs
// are closed unread and not recorded.
func (h *Handler) OnStartWithStreamInput(ctx context.Context, info *callbacks.RunInfo, input *schema.StreamReader[callbacks.CallbackInput]) context.Context {
	nctx, c := h.start(ctx, info, nil, true)
	if input == nil {
		return nctx
	}
	if c == nil || c.kind != kindRun {
		input.Close()
		return nctx
	}
	// The run ends once its input has been read, so that the input's
	// records come before its end. (An input stream that never ends,
	// because its writer is never closed, keeps the run from ending.)
	c.run.hold()
	h.busyAdd()
	go func() {
		defer h.busyDone()
		defer c.run.release()
		defer func() { _ = recover() }() // a callback's goroutine never takes the program down
		chunks, _, err := readAll(input, maxChunks)
		if err != nil {
			return // the run's own end reports what failed
		}
		guard(func() { c.run.recordInput(joinChunks(chunks), true) })
	}()
	return nctx
}

// OnEnd records the end of the call info describes.
func (h *Handler) OnEnd(ctx context.Context, info *callbacks.RunInfo, output callbacks.CallbackOutput) context.Context {
	c := h.callOf(ctx, info)
	if c == nil || !c.done.CompareAndSwap(false, true) {
		return ctx
	}
	guard(func() { c.end(output, nil) })
	return ctx
}

// OnError records that the call info describes failed with err.
func (h *Handler) OnError(ctx context.Context, info *callbacks.RunInfo, err error) context.Context {
	c := h.callOf(ctx, info)
	if c == nil || !c.done.CompareAndSwap(false, true) {
		return ctx
	}
	if err == nil {
		err = errNilError
	}
	guard(func() { c.end(nil, err) })
	return ctx
}

// OnEndWithStreamOutput records the end of the call info describes, whose
// output is a stream: it is read in a goroutine and closed, and the call
// is recorded when the stream ends (for a model, with a model.delta
// record for each chunk of text or reasoning as it comes). An error in
// the stream is the call's error.
func (h *Handler) OnEndWithStreamOutput(ctx context.Context, info *callbacks.RunInfo, output *schema.StreamReader[callbacks.CallbackOutput]) context.Context {
	c := h.callOf(ctx, info)
	if c == nil || !c.done.CompareAndSwap(false, true) {
		if output != nil {
			output.Close()
		}
		return ctx
	}
	if output == nil {
		guard(func() { c.end(nil, nil) })
		return ctx
	}
	// The run (and the runs around it) end only once the stream has been
	// read, so that their end records follow this call's.
	held := c.run
	held.hold()
	h.busyAdd()
	model := c.kind == kindModel && held != nil
	if model {
		held.modelStreams.add()
	}
	go func() {
		defer h.busyDone()
		defer held.release()
		if model {
			defer held.modelStreams.done()
		}
		guard(func() { c.endStream(output) })
	}()
	return ctx
}

// errNilError stands for the nil error an OnError callback was given.
var errNilError = errors.New("eino reported an error without one (a nil error)")

// guard runs fn, recovering a panic: a callback never panics into Eino.
func guard(fn func()) {
	defer func() { _ = recover() }()
	fn()
}

// start begins the call; it returns the context for the call's end and
// the call, or ctx and nil when there is nothing to record.
func (h *Handler) start(ctx context.Context, info *callbacks.RunInfo, input any, streamed bool) (out context.Context, c *call) {
	out = ctx
	if ctx == nil || info == nil || h == nil {
		return ctx, nil
	}
	defer func() {
		if v := recover(); v != nil {
			out, c = ctx, nil
		}
	}()
	if h.callOf(ctx, info) != nil {
		return ctx, nil // the Handler was registered twice: record the call once
	}
	k := kindOf(info.Component)
	if k == kindSkip {
		return ctx, nil
	}
	ec := trace.FromContext(ctx)
	if ec == nil && h.tracer == nil {
		return ctx, nil
	}
	parent := h.runOf(ctx, ec)
	c = &call{h: h, info: info, kind: k}
	if k == kindRun {
		c.name = runName(info)
		r := &run{h: h, parent: parent, outer: parent == nil}
		if ec != nil {
			ctx, r.ec = trace.SpawnChild(ctx, c.name, nil)
		} else {
			var in trace.Value
			if !streamed {
				in = encode(input)
			}
			ctx, r.ec = h.tracer.Start(ctx, c.name, trace.RunOptions{Input: in, Tags: h.tags, StreamOnly: h.streamOnly})
		}
		if r.outer {
			h.busyAdd()
		}
		c.run, c.ec = r, r.ec
		if !streamed {
			r.recordInput(input, ec != nil)
		}
		ctx = context.WithValue(ctx, runKey{h}, r)
		return context.WithValue(ctx, callKey{h}, c), c
	}
	c.name = leafName(info)
	if ec == nil {
		// A component called on its own: a root run of its own.
		r := &run{h: h, outer: true}
		ctx, r.ec = h.tracer.Start(ctx, c.name, trace.RunOptions{Tags: h.tags, StreamOnly: h.streamOnly})
		h.busyAdd()
		c.own, parent, ec = r, r, r.ec
		ctx = context.WithValue(ctx, runKey{h}, r)
	}
	c.ec, c.run = ec, parent
	if parent != nil && k == kindTool && compose.GetToolCallID(ctx) != "" {
		// A ToolsNode runs a tool call once it has read the whole
		// answer that asked for it, so that answer's stream has ended:
		// let the model calls still being read in this run be recorded
		// first, so that a streamed model.call precedes the tool calls
		// it asked for, as it does unstreamed. (A model streaming in a
		// parallel branch of the same graph is waited for too.)
		_ = parent.modelStreams.wait(ctx)
	}
	switch k {
	case kindModel:
		c.startModel(input)
	case kindEmbedding:
		c.startEmbedding(input)
	case kindTool:
		c.span = ec.StartSpan(trace.SpanTool, c.name, toolInput(info.Component, input))
		ctx = c.span.Context(ctx)
	default:
		c.span = ec.StartSpan(trace.SpanNode, c.name, encode(input))
		ctx = c.span.Context(ctx)
	}
	return context.WithValue(ctx, callKey{h}, c), c
}

// end records the end of the call with its output or error.
func (c *call) end(output any, err error) {
	switch c.kind {
	case kindRun:
		c.run.finishWith(output, err)
		return
	case kindModel:
		c.endModel(output, err)
	case kindEmbedding:
		c.endEmbedding(output, err)
	case kindTool:
		if err != nil {
			c.span.End(nil, err)
		} else {
			c.span.End(toolOutput(c.info.Component, output), nil)
		}
	default:
		if err != nil {
			c.span.End(nil, err)
		} else {
			c.span.End(encode(output), nil)
		}
	}
	if c.own != nil {
		c.own.requestEnd(nil, err)
	}
}

// endStream reads a call's output stream to its end, closes it and
// records the call.
func (c *call) endStream(sr *schema.StreamReader[callbacks.CallbackOutput]) {
	if c.kind == kindModel {
		err := c.streamModel(sr)
		if c.own != nil {
			c.own.requestEnd(nil, err)
		}
		return
	}
	chunks, _, err := readAll(sr, maxChunks)
	var out any
	if err == nil {
		out = joinChunks(chunks)
	}
	c.end(out, err)
}

// maxChunks bounds how many chunks of a stream other than a model's are
// kept to record; the rest are read and dropped (the recorder cuts a value
// at its size limit anyway).
const maxChunks = 1 << 16

// readAll reads sr to its end (or its first error) and closes it. It keeps
// at most max chunks and reports whether it dropped any.
func readAll[T any](sr *schema.StreamReader[T], max int) (chunks []any, dropped bool, err error) {
	defer sr.Close()
	for {
		v, e := sr.Recv()
		if e == io.EOF {
			return chunks, dropped, nil
		}
		if e != nil {
			return chunks, dropped, e
		}
		if len(chunks) < max {
			chunks = append(chunks, v)
		} else {
			dropped = true
		}
	}
}

// runName names a run after its graph: its name, else its type and kind.
func runName(info *callbacks.RunInfo) string {
	if info.Name != "" {
		return info.Name
	}
	if n := info.Type + string(info.Component); n != "" {
		return n
	}
	return "eino"
}

// leafName names a tool, node or model: the node's (or tool's) name, else
// Eino's default name for a component, its type then its kind
// ("OpenAIChatModel").
func leafName(info *callbacks.RunInfo) string {
	return runName(info)
}
