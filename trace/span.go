package trace

import (
	"context"
	"errors"
	"time"
)

// A Span is a timed operation in progress: a tool call, a hook, a pipeline
// node or a model call. Start it with ExecutionContext.StartSpan and finish
// it with End (or EndModel); the end record carries the duration and, on
// failure, the error. A Span is a small value: copy it freely, end it once.
// The zero Span (from a nil ExecutionContext) does nothing.
type Span struct {
	ec    *ExecutionContext
	typ   Type // the start record's type: TypeToolStart, TypeHookStart, TypeNodeStart or TypeModelCall
	name  string
	id    SpanID
	start time.Time
	input Value // a model call's input, recorded at the end
}

// SpanKind is the kind of operation a Span times. Only the four constants
// below are kinds: the other record types are point events, recorded with
// Record or its shorthands.
type SpanKind uint8

// The span kinds.
const (
	SpanTool  SpanKind = iota + 1 // a tool call: tool.start, then tool.end or tool.error
	SpanModel                     // a model call: one model.call record, at the end
	SpanHook                      // a hook: hook.start, then hook.end or hook.error
	SpanNode                      // a pipeline node: node.start, then node.end
)

// spanTypes maps a SpanKind to its start record's type.
var spanTypes = [...]Type{SpanTool: TypeToolStart, SpanModel: TypeModelCall, SpanHook: TypeHookStart, SpanNode: TypeNodeStart}

// StartSpan begins a span of the given kind named name (the tool, model,
// hook point or node). For a tool, hook or node it records the start
// record with input; a model call is recorded once, when it ends, with
// input included. Either way input is copied, so the caller may reuse it
// as soon as StartSpan returns. A kind other than the SpanKind constants
// records nothing and returns the zero Span.
func (ec *ExecutionContext) StartSpan(kind SpanKind, name string, input Value) Span {
	if ec == nil || kind == 0 || int(kind) >= len(spanTypes) {
		return Span{}
	}
	typ := spanTypes[kind]
	s := Span{ec: ec, typ: typ, name: name, id: NewSpanID(), start: ec.t.now()}
	if typ != TypeModelCall {
		ec.Record(Record{Type: typ, Name: name, SpanID: s.id, Input: input, Time: s.start})
	} else {
		s.input = ec.ownValue(input) // a copy: the caller may reuse input before EndModel
	}
	return s
}

type spanKey struct{}

// spanRef is what a context carries for Span.Context.
type spanRef struct {
	ec *ExecutionContext
	id SpanID
}

// Context returns a copy of ctx in which s is the span in progress, so that
// runs started with SpawnChild(ctx, …) nest under it. For the zero Span it
// returns ctx.
func (s Span) Context(ctx context.Context) context.Context {
	if s.ec == nil {
		return ctx
	}
	return &spanCtx{ctx, spanRef{s.ec, s.id}}
}

// spanCtx is context.WithValue(parent, spanKey{}, ref) in one allocation
// instead of two (WithValue boxes the value): the agent makes one for every
// tool call.
type spanCtx struct {
	context.Context
	ref spanRef
}

// Value returns the span for spanKey and asks the parent for anything else.
func (c *spanCtx) Value(key any) any {
	if _, ok := key.(spanKey); ok {
		return c.ref
	}
	return c.Context.Value(key)
}

// ID returns the span's id.
func (s Span) ID() SpanID { return s.id }

// End finishes the span: tool.end / hook.end / node.end with output, or
// tool.error / hook.error (node.end with Error) if err is not nil.
func (s Span) End(output Value, err error) {
	if s.ec == nil {
		return
	}
	if s.typ == TypeModelCall {
		s.EndModel(output, nil, Usage{}, "", err)
		return
	}
	s.ec.Record(s.EndRecord(output, err))
}

// EndRecord returns the record End would record now, without recording
// it: its time and duration are read now, its Seq is given when the caller
// passes it to ExecutionContext.Record. The agent runtime ends parallel
// tool calls this way, to record their ends in the order the model asked
// for the calls whatever order they finish in. output is kept, not copied,
// until the record is recorded. For the zero Span, or a model call, it
// returns the zero Record.
func (s Span) EndRecord(output Value, err error) Record {
	if s.ec == nil || s.typ == TypeModelCall {
		return Record{}
	}
	now := s.ec.t.now()
	r := Record{Name: s.name, SpanID: s.id, Output: output, Duration: now.Sub(s.start), Time: now}
	switch s.typ {
	case TypeToolStart:
		r.Type = TypeToolEnd
		if err != nil {
			r.Type = TypeToolError
		}
	case TypeHookStart:
		r.Type = TypeHookEnd
		if err != nil {
			r.Type = TypeHookError
		}
	case TypeNodeStart:
		r.Type = TypeNodeEnd
	}
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

// EndModel finishes a model-call span, recording one model.call record with
// the response, the thinking text, token usage and the finish reason.
func (s Span) EndModel(output, thinking Value, u Usage, finish string, err error) {
	if s.ec == nil {
		return
	}
	now := s.ec.t.now()
	r := Record{Type: TypeModelCall, Name: s.name, SpanID: s.id, Input: s.input, Output: output,
		Thinking: thinking, Usage: u, Status: finish, Duration: now.Sub(s.start), Time: now}
	if err != nil {
		r.Error = err.Error()
	}
	s.ec.Record(r)
}

// Delta records one streamed chunk of the model call in progress: kind is
// "text" or "thinking".
func (s Span) Delta(kind string, chunk Value) {
	if s.ec == nil {
		return
	}
	s.ec.Record(Record{Type: TypeModelDelta, Name: s.name, ParentID: s.id, Status: kind, Output: chunk})
}

// Tool runs fn as a traced tool call named name: one line wraps a call,
// and the error path is recorded too.
//
//	out, err := trace.Tool(ctx, "search", query, func(ctx context.Context) ([]Hit, error) { … })
//
// input and the result are encoded with JSON. fn gets ctx with the call
// as the span in progress (see Span.Context), so that what it records
// with Log, and the runs it starts with SpawnChild, hang under the call.
// Without an ExecutionContext in ctx it just calls fn.
//
// If fn panics, Tool records tool.error with the panic (a *PanicError's
// text: the value and where it was raised) and panics again with the same
// value: fn is the caller's own code, and a panic in it must behave as Go
// says, recover or crash, whether traced or not. (The agent runtime, which
// calls tools it did not write, turns their panics into errors instead.)
func Tool[T any](ctx context.Context, name string, input any, fn func(context.Context) (T, error)) (T, error) {
	ec := FromContext(ctx)
	if ec == nil {
		return fn(ctx)
	}
	s := ec.StartSpan(SpanTool, name, JSON(input))
	returned := false
	defer func() {
		if !returned {
			v := recover()
			// A nil v is runtime.Goexit (t.FailNow in a test), which
			// recover does not stop: it is recorded and goes on.
			err := errGoexit
			if v != nil {
				err = NewPanicError(v)
			}
			s.End(nil, err)
			if v != nil {
				panic(v)
			}
		}
	}()
	out, err := fn(s.Context(ctx))
	returned = true
	if err != nil {
		s.End(nil, err)
	} else {
		s.End(JSON(out), nil)
	}
	return out, err
}

// errGoexit is the error recorded for a tool that called runtime.Goexit.
var errGoexit = errors.New("the tool called runtime.Goexit (t.FailNow or t.SkipNow in a test?) and did not return")
