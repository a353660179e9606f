package trace_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/trace"
)

// raise calls f, which panics, and returns the recovered panic as a
// *trace.PanicError.
func raise(f func()) (pe *trace.PanicError) {
	defer func() { pe = trace.NewPanicError(recover()) }()
	f()
	return nil
}

func explode(v any) { panic(v) }

// nilMapWrite and outOfRange panic in the runtime, not by calling panic.
func nilMapWrite(m map[string]int) { m["x"] = 1 }

func outOfRange(xs []int) int { return xs[2] }

func thisFile() string {
	_, file, _, _ := runtime.Caller(0)
	return file
}

func TestPanicError(t *testing.T) {
	for _, tt := range []struct {
		name  string
		f     func()
		text  string // in Error()
		fn    string // suffix of Func
		cause error  // what Unwrap returns, if not nil
	}{
		{"value", func() { explode("boom") }, "panic: boom [", "trace_test.explode", nil},
		{"error value", func() { explode(io.ErrUnexpectedEOF) }, "panic: unexpected EOF [", "trace_test.explode", io.ErrUnexpectedEOF},
		{"nil map", func() { nilMapWrite(nil) }, "panic: assignment to entry in nil map [", "trace_test.nilMapWrite", nil},
		{"index", func() { outOfRange(nil) }, "panic: runtime error: index out of range [2] with length 0 [", "trace_test.outOfRange", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pe := raise(tt.f)
			if !strings.HasPrefix(pe.Error(), tt.text) || !strings.HasSuffix(pe.Func, tt.fn) || !strings.HasPrefix(pe.Where, thisFile()+":") {
				t.Errorf("error %q, func %q, where %q; want %q… raised by %s in %s", pe.Error(), pe.Func, pe.Where, tt.text, tt.fn, thisFile())
			}
			if !strings.Contains(pe.Error(), pe.Func+" at "+pe.Where+"]") {
				t.Errorf("error %q does not say where the panic was raised", pe.Error())
			}
			if tt.cause != nil && !errors.Is(pe, tt.cause) {
				t.Errorf("errors.Is(%v, %v) = false", pe, tt.cause)
			}
			if !strings.Contains(string(pe.Stack), "panic(") {
				t.Errorf("stack does not show the panic:\n%s", pe.Stack)
			}
		})
	}
}

// TestToolPanics: trace.Tool records the panic of the caller's function as
// tool.error, then panics again with the same value, as untraced code
// would.
func TestToolPanics(t *testing.T) {
	ctx, ec := trace.New(trace.Options{}).Start(context.Background(), "t", trace.RunOptions{})
	var got any
	func() {
		defer func() { got = recover() }()
		_, _ = trace.Tool(ctx, "explode", 1, func(context.Context) (int, error) {
			explode("tool exploded")
			return 0, nil
		})
	}()
	if got != "tool exploded" {
		t.Fatalf("recovered %v, want the tool's own panic value", got)
	}
	ec.End(nil, nil)
	var errs []trace.Record
	for _, r := range ec.Records() {
		if r.Type == trace.TypeToolError {
			errs = append(errs, r)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error, "panic: tool exploded [") || !strings.Contains(errs[0].Error, thisFile()+":") {
		t.Errorf("tool.error records = %+v", errs)
	}
}

// TestToolGoexit: runtime.Goexit in fn (t.FailNow) is recorded as
// tool.error and not stopped.
func TestToolGoexit(t *testing.T) {
	ctx, ec := trace.New(trace.Options{}).Start(context.Background(), "t", trace.RunOptions{})
	done := make(chan bool)
	go func() {
		returned := false
		defer func() { done <- returned }()
		_, _ = trace.Tool(ctx, "quit", 1, func(context.Context) (int, error) {
			runtime.Goexit()
			return 0, nil
		})
		returned = true
	}()
	if <-done {
		t.Fatal("Goexit was stopped: trace.Tool returned")
	}
	ec.End(nil, nil)
	var errs []string
	for _, r := range ec.Records() {
		if r.Type == trace.TypeToolError {
			errs = append(errs, r.Error)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "runtime.Goexit") {
		t.Errorf("tool.error records = %q", errs)
	}
}
