package trace

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// A PanicError is a panic recovered from code the caller did not write (a
// tool, a model, a hook), turned into an error the way net/http turns a
// handler's panic into a logged error: with the value and where it was
// raised. The agent runtime records it as that call's error; Tool records
// it as tool.error before panicking again.
type PanicError struct {
	Value any    // what was passed to panic
	Func  string // the function that panicked, e.g. "main.explode"; "" if unknown
	Where string // its file:line; "" if unknown
	Stack []byte // the panicking goroutine's stack, formatted as by runtime/debug.Stack
}

// Error returns "panic: <value> [<func> at <file:line>]": the value and
// where it came from, without the stack (which records would carry on
// every failed call; it is in Stack for whoever wants it).
func (e *PanicError) Error() string {
	var b strings.Builder
	b.WriteString("panic: ")
	fmt.Fprint(&b, e.Value)
	if e.Where != "" {
		b.WriteString(" [")
		if e.Func != "" {
			b.WriteString(e.Func)
			b.WriteString(" at ")
		}
		b.WriteString(e.Where)
		b.WriteByte(']')
	}
	return b.String()
}

// Unwrap returns the panic value if it is an error, so that errors.Is and
// errors.As see through the panic.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// NewPanicError describes the panic with value v. Call it from the
// deferred function that recovered v, while the panicking frames are still
// on the stack: it finds the function that called panic (or faulted) and
// keeps the stack.
func NewPanicError(v any) *PanicError {
	e := &PanicError{Value: v, Stack: debug.Stack()}
	var pcs [64]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	panicking := false
	for {
		f, more := frames.Next()
		if !panicking {
			// Everything above runtime.gopanic is the recovering code.
			panicking = f.Function == "runtime.gopanic"
		} else if !strings.HasPrefix(f.Function, "runtime.") {
			// The first frame below the runtime's panic machinery
			// (gopanic, panicmem, sigpanic, goPanicIndex, …) raised it.
			e.Func = f.Function
			e.Where = f.File + ":" + strconv.Itoa(f.Line)
			break
		}
		if !more {
			break
		}
	}
	return e
}
