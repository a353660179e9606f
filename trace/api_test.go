package trace_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/loupe-dev/loupe/trace"
)

// callAllNil calls every exported method of v's type (found by reflection,
// so that a method added later is covered too) with zero arguments, and
// fails for each one that panics or returns something other than zero
// values. v is a nil *ExecutionContext or a zero Span: disabled tracing.
func callAllNil(t *testing.T, v reflect.Value) int {
	t.Helper()
	typ := v.Type()
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		t.Run(m.Name, func(t *testing.T) {
			args := []reflect.Value{v}
			for j := 1; j < m.Type.NumIn(); j++ {
				in := m.Type.In(j)
				if m.Type.IsVariadic() && j == m.Type.NumIn()-1 {
					continue
				}
				args = append(args, reflect.Zero(in))
			}
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s.%s on a disabled value panicked: %v", typ, m.Name, p)
				}
			}()
			var ctxArg bool
			for j := 1; j < m.Type.NumIn(); j++ {
				if m.Type.In(j) == reflect.TypeFor[context.Context]() {
					args[j] = reflect.ValueOf(context.Background())
					ctxArg = true
				}
			}
			for k, out := range m.Func.Call(args) {
				if ctxArg && out.Type() == reflect.TypeFor[context.Context]() {
					continue // a context in, the same context out
				}
				if !out.IsZero() {
					t.Errorf("%s.%s on a disabled value: result %d = %v, want the zero value", typ, m.Name, k, out)
				}
			}
		})
	}
	return typ.NumMethod()
}

// TestNilExecutionContextMethods holds the contract that a nil
// *ExecutionContext (and the zero Span it hands out) is disabled tracing:
// every method does nothing and returns zero values.
func TestNilExecutionContextMethods(t *testing.T) {
	if n := callAllNil(t, reflect.ValueOf((*trace.ExecutionContext)(nil))); n < 20 {
		t.Fatalf("found %d methods on *ExecutionContext by reflection: did the test break?", n)
	}
	if n := callAllNil(t, reflect.ValueOf(trace.Span{})); n < 4 {
		t.Fatalf("found %d methods on Span by reflection", n)
	}
}

func TestStartSpanKinds(t *testing.T) {
	fail := errors.New("boom")
	tests := []struct {
		kind      trace.SpanKind
		err       error
		wantTypes []trace.Type
	}{
		{trace.SpanTool, nil, []trace.Type{trace.TypeToolStart, trace.TypeToolEnd}},
		{trace.SpanTool, fail, []trace.Type{trace.TypeToolStart, trace.TypeToolError}},
		{trace.SpanHook, nil, []trace.Type{trace.TypeHookStart, trace.TypeHookEnd}},
		{trace.SpanHook, fail, []trace.Type{trace.TypeHookStart, trace.TypeHookError}},
		{trace.SpanNode, nil, []trace.Type{trace.TypeNodeStart, trace.TypeNodeEnd}},
		{trace.SpanNode, fail, []trace.Type{trace.TypeNodeStart, trace.TypeNodeEnd}},
		{trace.SpanModel, nil, []trace.Type{trace.TypeModelCall}},
		{trace.SpanModel, fail, []trace.Type{trace.TypeModelCall}},
		// Not kinds: nothing is recorded, rather than a guardrail followed by node.end.
		{0, nil, nil},
		{trace.SpanNode + 1, fail, nil},
		{255, nil, nil},
	}
	for _, tt := range tests {
		tr := trace.New(trace.Options{})
		_, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
		s := ec.StartSpan(tt.kind, "x", trace.Text("in"))
		s.End(trace.Text("out"), tt.err)
		var got []trace.Type
		for _, r := range ec.Records()[1:] {
			got = append(got, r.Type)
			if r.Failed() != (tt.err != nil) && r.Type != trace.TypeToolStart && r.Type != trace.TypeHookStart && r.Type != trace.TypeNodeStart {
				t.Errorf("kind %d, err %v: record %s Failed() = %v", tt.kind, tt.err, r.Type, r.Failed())
			}
		}
		if !slices.Equal(got, tt.wantTypes) {
			t.Errorf("kind %d, err %v: recorded %v, want %v", tt.kind, tt.err, got, tt.wantTypes)
		}
	}
}

// TestTypesIsACopy: changing the slice Types returns must not change what
// the package considers valid (it used to be an exported variable).
func TestTypesIsACopy(t *testing.T) {
	ts := trace.Types()
	if len(ts) == 0 || !ts[0].Valid() {
		t.Fatalf("Types() = %v", ts)
	}
	first := ts[0]
	for i := range ts {
		ts[i] = "changed"
	}
	if !first.Valid() || trace.Type("changed").Valid() || trace.Types()[0] != first {
		t.Error("changing the slice Types returned changed the package's vocabulary")
	}
}

// TestChildEndsInItsOwnParent: a child run is ended by its own End, and
// its child.end goes to the run that spawned it, never to another run.
func TestChildEndsInItsOwnParent(t *testing.T) {
	tr := trace.New(trace.Options{})
	ctxA, a := tr.Start(context.Background(), "a", trace.RunOptions{})
	_, b := tr.Start(context.Background(), "b", trace.RunOptions{})
	_, child := trace.SpawnChild(ctxA, "child", nil)
	child.End(trace.Text("done"), nil)
	a.End(nil, nil)
	b.End(nil, nil)
	var ends int
	for _, r := range a.Records() {
		if r.Type == trace.TypeChildEnd && r.SpanID == child.SpanID() {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("run a has %d child.end records for its child, want 1", ends)
	}
	for _, r := range b.Records() {
		if r.Type == trace.TypeChildEnd || r.Type == trace.TypeChildSpawn {
			t.Errorf("run b got %s of a's child", r.Type)
		}
	}
}

// TestStreamOnly: a StreamOnly run sends every record to the sinks, keeps
// none (Records is nil), and still keeps its stats and outcome.
func TestStreamOnly(t *testing.T) {
	for _, inline := range []bool{true, false} {
		var mu sync.Mutex
		var sunk []trace.Record
		sink := trace.SinkFunc(func(_ context.Context, rs []trace.Record) error {
			mu.Lock()
			sunk = append(sunk, rs...)
			mu.Unlock()
			return nil
		})
		tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}, Dispatch: trace.DispatchOptions{Inline: inline, OnFull: trace.Block}})
		ctx, ec := tr.Start(context.Background(), "r", trace.RunOptions{StreamOnly: true})
		const n = 1000
		for i := range n {
			ec.ToolCall("t", trace.JSON(i), nil, 0, nil)
		}
		_, child := trace.SpawnChild(ctx, "c", nil)
		child.Message("assistant", trace.Text("hi"))
		child.End(nil, nil)
		ec.End(trace.Text("ok"), nil)
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		const want = n + 5 // run.start, the tool calls, child.spawn, message, child.end, run.end
		if len(sunk) != want {
			t.Errorf("inline=%v: sinks got %d records, want %d", inline, len(sunk), want)
		}
		if ec.Records() != nil || child.Records() != nil {
			t.Errorf("inline=%v: a StreamOnly run kept records", inline)
		}
		if st := ec.Stats(); st.Records != want || st.ToolCalls != n || st.Children != 1 {
			t.Errorf("inline=%v: stats %+v", inline, st)
		}
		if reason, _ := ec.Termination(); reason != trace.TerminationSuccess || ec.Result().Text() != "ok" {
			t.Errorf("inline=%v: ended %q with %s", inline, reason, ec.Result())
		}
	}
}

// TestTreeKeepsCycles: spans whose parent links form a cycle (malformed
// input) become roots instead of disappearing from the tree.
func TestTreeKeepsCycles(t *testing.T) {
	root, x, y, z := trace.SpanID{1}, trace.SpanID{2}, trace.SpanID{3}, trace.SpanID{4}
	recs := []trace.Record{
		{Seq: 1, SpanID: root, Type: trace.TypeRunStart},
		{Seq: 2, SpanID: x, ParentID: y, Type: trace.TypeCustom},
		{Seq: 3, SpanID: y, ParentID: x, Type: trace.TypeCustom},
		{Seq: 4, SpanID: z, ParentID: x, Type: trace.TypeCustom}, // under the cycle, not in it
	}
	var count func([]*trace.Node) int
	count = func(ns []*trace.Node) int {
		n := len(ns)
		for _, c := range ns {
			n += count(c.Children)
		}
		return n
	}
	roots := trace.Tree(recs)
	if len(roots) != 3 || roots[1].Start.SpanID != x || roots[2].Start.SpanID != y || count(roots) != 4 {
		t.Fatalf("got %d roots, %d nodes; want root, x and y as roots and all 4 nodes", len(roots), count(roots))
	}
	if len(roots[1].Children) != 1 || roots[1].Children[0].Start.SpanID != z {
		t.Errorf("z is not under x")
	}
}
