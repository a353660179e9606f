package trace

import (
	"strconv"
	"unicode/utf8"
)

// Capture says how much of recorded values (inputs, outputs, thinking)
// a Tracer keeps. The zero value, CaptureFull, keeps everything up to
// Options.MaxValueBytes.
type Capture int

const (
	// CaptureFull keeps values, truncated to Options.MaxValueBytes.
	CaptureFull Capture = iota
	// CaptureMetadata keeps only each value's size, as
	// {"$loupe":"omitted","bytes":N}; names, timings, tokens and errors stay.
	CaptureMetadata
	// CaptureNone drops values entirely.
	CaptureNone
)

// String returns "full", "metadata" or "none".
func (c Capture) String() string {
	switch c {
	case CaptureFull:
		return "full"
	case CaptureMetadata:
		return "metadata"
	case CaptureNone:
		return "none"
	}
	return "Capture(" + strconv.Itoa(int(c)) + ")"
}

// DefaultMaxValueBytes is the size limit for one recorded value when
// Options.MaxValueBytes is zero.
const DefaultMaxValueBytes = 64 << 10

// Field names a field of a Record that can carry data, for Options.Redact
// (the Value fields) and Options.RedactString (the string fields).
type Field string

// The Value fields of a Record: JSON, passed to Options.Redact.
const (
	FieldInput    Field = "input"
	FieldOutput   Field = "output"
	FieldThinking Field = "thinking"
)

// The string fields of a Record, passed to Options.RedactString. Type,
// ids and times are left out: the recorder makes them, so they hold no
// caller data.
const (
	FieldName      Field = "name"     // Record.Name: a tool, model, key, role or rule name
	FieldStatus    Field = "status"   // Record.Status: a reason, action, scope or finish reason
	FieldErrorText Field = "error"    // Record.Error: an error or guardrail message
	FieldTag       Field = "tag"      // one of Record.Run.Tags
	FieldProvider  Field = "provider" // Record.Usage.Provider
	FieldSession   Field = "session"  // Record.Run.Session: a conversation id
	FieldUser      Field = "user"     // Record.Run.User: a user id
)

// IsValue reports whether f names a Value field (JSON) rather than a
// string field.
func (f Field) IsValue() bool {
	return f == FieldInput || f == FieldOutput || f == FieldThinking
}

// Truncated reports whether v is a truncation marker made by the capture
// policy, and if so how many bytes the original value had.
func (v Value) Truncated() (bool, int) {
	const p = `{"$loupe":"truncated","bytes":`
	if len(v) < len(p) || string(v[:len(p)]) != p {
		return false, 0
	}
	rest := v[len(p):]
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return true, n
}

// truncate returns the marker that stands for v when v is longer than max:
// a JSON object that says it was cut, how big v was, and its first bytes as
// text, so a reader sees both that something is missing and what it was.
func truncate(v Value, max int) Value {
	// Not splitting a character; invalid UTF-8 before the cut becomes
	// U+FFFD in the JSON string (appendJSONString), so the marker is
	// valid UTF-8 whatever v holds.
	head := TruncateUTF8(string(v[:max+min(len(v)-max, utf8.UTFMax-1)]), max)
	b := make([]byte, 0, max+64)
	b = append(b, `{"$loupe":"truncated","bytes":`...)
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, `,"head":`...)
	b = appendJSONString(b, head)
	return append(b, '}')
}

func omitted(v Value) Value {
	b := make([]byte, 0, 40)
	b = append(b, `{"$loupe":"omitted","bytes":`...)
	b = strconv.AppendInt(b, int64(len(v)), 10)
	return append(b, '}')
}

// capture applies the capture policy and the redaction hooks to r, and
// copies values too big for the run's arena (so that the caller may reuse
// them; r.Run is already r's own, see record). It runs outside the run's lock, since the hooks are the
// caller's code. It reports, per value (input, output, thinking), whether
// the value is a buffer of its own making that nothing else references (a
// marker or a copy); keep copies the others.
//
// Without hooks it costs a few length and nil checks: no allocation.
// With hooks it makes one pass over the record, strings first, so that
// the value hook sees the record with its strings already scrubbed.
func (ec *ExecutionContext) capture(r *Record) (fresh [3]bool) {
	o := &ec.t.opts
	hasValues := len(r.Input) > 0 || len(r.Output) > 0 || len(r.Thinking) > 0
	switch o.Capture {
	case CaptureNone:
		r.Input, r.Output, r.Thinking = nil, nil, nil
		hasValues = false
	case CaptureMetadata:
		if hasValues {
			r.Input, r.Output, r.Thinking = omitOrNil(r.Input), omitOrNil(r.Output), omitOrNil(r.Thinking)
			fresh = [3]bool{true, true, true}
		}
		hasValues = false
	}
	if o.RedactString != nil || (o.Redact != nil && hasValues) {
		applyHooks(o, r, hasValues)
	}
	if !hasValues {
		return fresh
	}
	limit := o.MaxValueBytes
	for i, v := range [...]*Value{&r.Input, &r.Output, &r.Thinking} {
		switch n := len(*v); {
		case limit > 0 && n > limit:
			*v = truncate(*v, limit) // a fresh buffer already
			fresh[i] = true
		case n > maxArenaValue:
			// Too big for the arena: copied here, outside the lock.
			*v = append(Value(nil), *v...)
			fresh[i] = true
		}
	}
	return fresh
}

// applyHooks runs o's redaction hooks over r: its strings, then, if
// values is true, its values.
func applyHooks(o *Options, r *Record, values bool) {
	// The hooks get a copy: handing them r itself would make every record
	// escape to the heap, with or without a hook.
	view := new(Record)
	*view = *r
	if f := o.RedactString; f != nil {
		view.Name = redactString(f, view, FieldName, view.Name)
		view.Status = redactString(f, view, FieldStatus, view.Status)
		view.Error = redactString(f, view, FieldErrorText, view.Error)
		view.Usage.Provider = redactString(f, view, FieldProvider, view.Usage.Provider)
		if ri := view.Run; ri != nil { // r's own (see record), shared with view
			ri.Session = redactString(f, view, FieldSession, ri.Session)
			ri.User = redactString(f, view, FieldUser, ri.User)
			for i, t := range ri.Tags {
				ri.Tags[i] = f(view, FieldTag, t)
			}
		}
		r.Name, r.Status, r.Error, r.Usage.Provider = view.Name, view.Status, view.Error, view.Usage.Provider
	}
	if f := o.Redact; f != nil && values {
		r.Input = redact(f, view, FieldInput, r.Input)
		r.Output = redact(f, view, FieldOutput, r.Output)
		r.Thinking = redact(f, view, FieldThinking, r.Thinking)
	}
}

// maxArenaValue is the largest value keep copies into the run's arena;
// larger ones get an allocation of their own.
const maxArenaValue = 1 << 10

// maxArenaBlock is the largest arena block: the runtime's largest small
// object. Larger blocks would be large objects, whose pages the runtime
// hands back to the OS between runs, to be faulted in again.
const maxArenaBlock = 32 << 10

// keep copies r's values, except fresh ones, into the run's arena, so
// that the caller's buffers are not retained and the caller may reuse
// them: a few pointer-free blocks instead of an allocation per record,
// which the garbage collector need not scan. ec.mu must be held.
func (ec *ExecutionContext) keep(r *Record, fresh [3]bool) {
	for i, v := range [...]*Value{&r.Input, &r.Output, &r.Thinking} {
		switch {
		case len(*v) == 0:
			*v = nil
		case !fresh[i]:
			*v = ec.own(*v)
		}
	}
}

// own returns a copy of v that the run keeps: in the run's arena if v is
// small, in a buffer of its own otherwise. It is how every entry point
// that holds on to a caller's Value (End's result, a model-call span's input)
// stops sharing it. ec.mu must be held.
func (ec *ExecutionContext) own(v Value) Value {
	n := len(v)
	switch {
	case n == 0:
		return nil
	case n > maxArenaValue:
		return append(Value(nil), v...)
	}
	if cap(ec.arena)-len(ec.arena) < n {
		size := 1 << 10 // small for the many short runs (sub-agents), doubling for long ones
		if c := cap(ec.arena); c > 0 {
			size = min(2*c, maxArenaBlock)
		}
		ec.arena = make([]byte, 0, size)
	}
	start := len(ec.arena)
	ec.arena = append(ec.arena, v...)
	return Value(ec.arena[start:len(ec.arena):len(ec.arena)])
}

// ownValue is own for callers that do not hold ec.mu.
func (ec *ExecutionContext) ownValue(v Value) Value {
	if len(v) == 0 {
		return nil
	}
	ec.mu.Lock()
	v = ec.own(v)
	ec.mu.Unlock()
	return v
}

func redact(f func(*Record, Field, Value) Value, r *Record, field Field, v Value) Value {
	if len(v) == 0 {
		return v
	}
	return f(r, field, v)
}

func redactString(f func(*Record, Field, string) string, r *Record, field Field, s string) string {
	if s == "" {
		return s
	}
	return f(r, field, s)
}

func omitOrNil(v Value) Value {
	if len(v) == 0 {
		return nil
	}
	return omitted(v)
}
