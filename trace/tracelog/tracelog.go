// Package tracelog records log/slog records into Loupe traces. Its Handler
// wraps another slog.Handler: every record goes on to that handler as
// before, and a record logged with a context that carries a run (see
// trace.FromContext) is also recorded into the run's trace, as a log
// record (trace.TypeLog) under the span in progress in that context (a
// tool call's, when the agent runtime called the tool), with its
// attributes and groups:
//
//	logger := slog.New(tracelog.New(slog.NewJSONHandler(os.Stderr, nil), nil))
//	logger.InfoContext(ctx, "fetching", "city", city) // also in ctx's trace
//
// Logs written without a context (slog.Info rather than slog.InfoContext)
// cannot be attached to a run and only go to the wrapped handler.
package tracelog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// Options configure a Handler. The zero value records Info and above,
// with no logger name.
type Options struct {
	// Level is the lowest level recorded into traces; nil means
	// slog.LevelInfo. It does not filter what the wrapped handler gets,
	// which keeps its own level.
	Level slog.Leveler
	// Name is the Name of the log records (the logger's name); may be
	// empty.
	Name string
}

// Handler is a slog.Handler that records into traces and passes every
// record on (see the package documentation). It is safe for concurrent
// use, like every slog.Handler; WithAttrs and WithGroup return new
// Handlers and leave the receiver as it was.
type Handler struct {
	next  slog.Handler
	level slog.Leveler
	name  string
	goas  []groupOrAttrs // WithGroup and WithAttrs calls, in order
}

// groupOrAttrs is one WithGroup (group != "") or WithAttrs call.
type groupOrAttrs struct {
	group string
	attrs []slog.Attr
}

// New returns a Handler that passes records on to next (nil: to no other
// handler) and records them into traces as o says (nil: the zero
// Options).
func New(next slog.Handler, o *Options) *Handler {
	h := &Handler{next: next, level: slog.LevelInfo}
	if o != nil {
		if o.Level != nil {
			h.level = o.Level
		}
		h.name = o.Name
	}
	return h
}

// Enabled reports whether a record at level would go anywhere: to the
// wrapped handler, or into the trace ctx carries.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	if h.next != nil && h.next.Enabled(ctx, level) {
		return true
	}
	return h.traced(ctx, level)
}

// traced reports whether a record at level is recorded into ctx's trace.
func (h *Handler) traced(ctx context.Context, level slog.Level) bool {
	return ctx != nil && level >= h.level.Level() && trace.FromContext(ctx).Enabled()
}

// Handle records r into the trace ctx carries, if any and if r's level is
// at least Options.Level, then hands r to the wrapped handler if that
// handler is enabled at r's level, and returns its error.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if h.traced(ctx, r.Level) {
		trace.Log(ctx, h.entry(r))
	}
	if h.next != nil && h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

// WithAttrs returns a Handler whose records carry attrs too, in the
// groups opened so far; the wrapped handler gets them as well.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	c := *h
	c.goas = append(slices.Clip(h.goas), groupOrAttrs{attrs: slices.Clone(attrs)})
	if h.next != nil {
		c.next = h.next.WithAttrs(attrs)
	}
	return &c
}

// WithGroup returns a Handler that puts the attributes that follow in
// group name; the wrapped handler gets the group as well. An empty name
// returns h.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.goas = append(slices.Clip(h.goas), groupOrAttrs{group: name})
	if h.next != nil {
		c.next = h.next.WithGroup(name)
	}
	return &c
}

// entry turns r into the log entry to record.
func (h *Handler) entry(r slog.Record) trace.LogEntry {
	e := trace.LogEntry{
		Name:           h.name,
		Severity:       r.Level.String(),
		SeverityNumber: Severity(r.Level),
		Body:           trace.Text(r.Message),
		Time:           r.Time,
	}
	// The attributes, as slog's JSON handler nests them: WithAttrs and
	// WithGroup in order, then the record's own in the innermost group.
	root := &object{}
	cur := root
	for _, g := range h.goas {
		if g.group != "" {
			next := &object{}
			cur.add(g.group, next)
			cur = next
			continue
		}
		for _, a := range g.attrs {
			cur.attr(a)
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		cur.attr(a)
		return true
	})
	if b := root.appendJSON(nil); b != nil {
		e.Attributes = b
	}
	return e
}

// Severity returns the OpenTelemetry severity number of a slog level:
// trace.SeverityInfo + level (Debug 5, Info 9, Warn 13, Error 17), within
// 1 to 24, as OpenTelemetry's slog bridge maps levels.
func Severity(l slog.Level) int {
	return int(min(max(int64(trace.SeverityInfo)+int64(l), 1), 24))
}

// object is a JSON object being built from attributes, in order.
type object struct {
	keys []string
	vals []any // trace.Value or *object
}

func (o *object) add(k string, v any) {
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

// attr adds a following slog's rules: values are resolved, an empty
// attribute is left out, a group with no attributes is left out, and a
// group with an empty key is inlined.
func (o *object) attr(a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		as := a.Value.Group()
		if len(as) == 0 {
			return
		}
		into := o
		if a.Key != "" {
			into = &object{}
			o.add(a.Key, into)
		}
		for _, g := range as {
			into.attr(g)
		}
		return
	}
	o.add(a.Key, value(a.Value))
}

// appendJSON appends o as a JSON object, leaving out groups that hold no
// attribute; it returns b unchanged (nil for nil) when o holds none.
func (o *object) appendJSON(b []byte) []byte {
	start := len(b)
	n := 0
	for i, k := range o.keys {
		var v []byte
		switch x := o.vals[i].(type) {
		case *object:
			v = x.appendJSON(nil)
			if v == nil {
				continue
			}
		case trace.Value:
			v = x
		}
		if n == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		n++
		b = trace.AppendString(b, k)
		b = append(b, ':')
		b = append(b, v...)
	}
	if n == 0 {
		return b[:start]
	}
	return append(b, '}')
}

// value encodes a resolved, non-group slog value as JSON.
func value(v slog.Value) trace.Value {
	switch v.Kind() {
	case slog.KindString:
		return trace.Text(v.String())
	case slog.KindInt64:
		return strconv.AppendInt(nil, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(nil, v.Uint64(), 10)
	case slog.KindFloat64:
		f := v.Float64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return trace.Text(strconv.FormatFloat(f, 'g', -1, 64))
		}
		return strconv.AppendFloat(nil, f, 'g', -1, 64)
	case slog.KindBool:
		return strconv.AppendBool(nil, v.Bool())
	case slog.KindDuration:
		return trace.Text(v.Duration().String())
	case slog.KindTime:
		return trace.Text(v.Time().Format(time.RFC3339Nano))
	}
	a := v.Any()
	switch x := a.(type) {
	case nil:
		return trace.Value("null")
	case error:
		return trace.Text(x.Error())
	}
	if b, err := json.Marshal(a); err == nil {
		return b
	}
	return trace.Text(fmt.Sprint(a))
}
