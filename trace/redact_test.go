package trace_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// TestEntryPointsCopyValues calls each entry point of ExecutionContext,
// Span and Tracer that takes a caller's bytes, overwrites the caller's
// buffer right after the call, and checks that what ends up recorded (and
// what Result returns) is what was passed, for values small enough for the
// run's arena and values too big for it.
func TestEntryPointsCopyValues(t *testing.T) {
	type call func(ctx context.Context, ec *trace.ExecutionContext, buf trace.Value, tags []string)
	tests := []struct {
		name string
		do   call
		// got returns the recorded value under test.
		got func(ec *trace.ExecutionContext) string
	}{
		{"End/Result", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.End(b, nil)
		}, func(ec *trace.ExecutionContext) string { return string(ec.Result()) }},
		{"End", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.End(b, nil)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeRunEnd).Output) }},
		{"Record", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.Record(trace.Record{Type: trace.TypeCustom, Name: "c", Input: b, Output: b, Thinking: b})
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeCustom).Thinking) }},
		{"ToolCall", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.ToolCall("t", b, b, time.Millisecond, nil)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeToolEnd).Input) }},
		{"ModelCall", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.ModelCall(trace.ModelCall{Model: "m", Input: b, Output: b, Thinking: b})
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeModelCall).Thinking) }},
		{"Start(tool)", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.StartSpan(trace.SpanTool, "t", b)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeToolStart).Input) }},
		{"Start(model)+EndModel", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			s := ec.StartSpan(trace.SpanModel, "m", b)
			// The buffer is overwritten before EndModel, as a caller
			// building the response in the request's buffer would.
			clobber(b)
			s.EndModel(trace.Text("out"), nil, trace.Usage{}, "stop", nil)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeModelCall).Input) }},
		{"Span.End", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.StartSpan(trace.SpanNode, "n", nil).End(b, nil)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeNodeEnd).Output) }},
		{"Span.EndModel", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.StartSpan(trace.SpanModel, "m", nil).EndModel(b, b, trace.Usage{}, "stop", nil)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeModelCall).Thinking) }},
		{"Span.Delta", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.StartSpan(trace.SpanModel, "m", nil).Delta("text", b)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeModelDelta).Output) }},
		{"Tool", func(ctx context.Context, _ *trace.ExecutionContext, b trace.Value, _ []string) {
			_, _ = trace.Tool(ctx, "t", b, func(context.Context) (trace.Value, error) { return b, nil })
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeToolEnd).Output) }},
		{"ToolDiscovered", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.ToolDiscovered("t", b)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeToolDiscovered).Input) }},
		{"StateInit", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.StateInit(b)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeStateInit).Output) }},
		{"StateUpdate", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.StateUpdate("k", b, b)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeStateUpdate).Input) }},
		{"MemorySet", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.MemorySet(trace.ScopeMemory, "k", b)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeMemorySet).Output) }},
		{"Guardrail", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.Guardrail("r", "warn", "m", b)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeGuardrail).Output) }},
		{"Message", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.Message("user", b)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeMessage).Output) }},
		{"Custom", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			ec.Custom("c", b)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeCustom).Output) }},
		{"child End", func(_ context.Context, ec *trace.ExecutionContext, b trace.Value, _ []string) {
			_, c := trace.SpawnChild(trace.NewContext(context.Background(), ec), "child", nil)
			c.End(b, nil)
		}, func(ec *trace.ExecutionContext) string { return string(last(ec, trace.TypeChildEnd).Output) }},
		{"Record tags", func(_ context.Context, ec *trace.ExecutionContext, _ trace.Value, tags []string) {
			ec.Record(trace.Record{Type: trace.TypeCustom, Name: "c", Run: &trace.RunInfo{Tags: tags}})
		}, func(ec *trace.ExecutionContext) string {
			r := last(ec, trace.TypeCustom)
			return strings.Join(r.Tags(), ",")
		}},
	}
	for _, size := range []int{8, 5000} {
		for _, tt := range tests {
			t.Run(tt.name+"/"+strings.Repeat("x", 0)+sizeName(size), func(t *testing.T) {
				tr := trace.New(trace.Options{})
				ctx, ec := tr.Start(context.Background(), "copy", trace.RunOptions{})
				buf := trace.Value(`"` + strings.Repeat("a", size-2) + `"`)
				want := string(buf)
				tags := []string{"env:ci", "team:a"}
				wantTags := "env:ci,team:a"
				tt.do(ctx, ec, buf, tags)
				clobber(buf)
				tags[0], tags[1] = "X", "Y"
				got := tt.got(ec)
				if strings.HasSuffix(tt.name, "tags") {
					want = wantTags
				}
				if got != want {
					t.Errorf("recorded %.40q…, want %.40q…: the caller's buffer was kept", got, want)
				}
			})
		}
	}
}

func sizeName(n int) string {
	if n > 1024 {
		return "big"
	}
	return "small"
}

func clobber(b []byte) {
	for i := range b {
		b[i] = 'X'
	}
}

// last returns the last record of type typ of ec's trace.
func last(ec *trace.ExecutionContext, typ trace.Type) trace.Record {
	recs := ec.Records()
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Type == typ {
			return recs[i]
		}
	}
	return trace.Record{}
}

// TestRedactSeesEveryString plants a secret in every string and value an
// entry point records and checks that the hooks saw each one with the
// right Field, and that no record keeps it, under every capture policy.
func TestRedactSeesEveryString(t *testing.T) {
	const secret = "s3cr3t"
	for _, capture := range []trace.Capture{trace.CaptureFull, trace.CaptureMetadata, trace.CaptureNone} {
		t.Run(capture.String(), func(t *testing.T) {
			var mu sync.Mutex
			seen := map[trace.Field]int{}
			note := func(f trace.Field, s string) {
				if strings.Contains(s, secret) {
					mu.Lock()
					seen[f]++
					mu.Unlock()
				}
			}
			tr := trace.New(trace.Options{
				Capture: capture,
				Redact: func(r *trace.Record, f trace.Field, v trace.Value) trace.Value {
					if !f.IsValue() {
						t.Errorf("Redact got string field %s", f)
					}
					if strings.Contains(r.Error+r.Name+r.Status, secret) {
						t.Errorf("Redact saw a record whose strings were not redacted yet: %+v", r)
					}
					note(f, string(v))
					return trace.Value(strings.ReplaceAll(string(v), secret, "x"))
				},
				RedactString: func(r *trace.Record, f trace.Field, s string) string {
					if f.IsValue() {
						t.Errorf("RedactString got value field %s", f)
					}
					note(f, s)
					return strings.ReplaceAll(s, secret, "x")
				},
			})
			v := trace.Text("in " + secret)
			err := errors.New("failed with " + secret)
			ctx, ec := tr.Start(context.Background(), "run-"+secret, trace.RunOptions{Input: v, Tags: []string{"tag:" + secret},
				Session: "conv-" + secret, User: "user-" + secret})
			ec.StartIteration()
			ec.ToolCall("tool-"+secret, v, v, time.Millisecond, err)
			ec.ModelCall(trace.ModelCall{Model: "m", Input: v, Output: v, Thinking: v, FinishReason: "stop-" + secret,
				Usage: trace.Usage{Provider: "p-" + secret}, Err: err})
			s := ec.StartSpan(trace.SpanHook, "hook", nil)
			s.End(nil, err)
			ec.Guardrail("rule", "warn", "message "+secret, v)
			ec.MemorySet(trace.ScopeGlobal, "key-"+secret, v)
			ec.Error(err)
			_, _ = trace.Tool(ctx, "t", v, func(context.Context) (int, error) { return 0, err })
			ec.EndIteration("continue-" + secret)
			_, c := trace.SpawnChild(ctx, "child-"+secret, nil)
			c.End(v, err)
			ec.End(v, err)

			for _, r := range ec.Records() {
				b := r.AppendJSON(nil)
				if strings.Contains(string(b), secret) {
					t.Errorf("recorded %s", b)
				}
			}
			for _, f := range []trace.Field{trace.FieldName, trace.FieldStatus, trace.FieldErrorText, trace.FieldTag, trace.FieldProvider,
				trace.FieldSession, trace.FieldUser} {
				if seen[f] == 0 {
					t.Errorf("RedactString never saw a secret in %s", f)
				}
			}
			values := []trace.Field{trace.FieldInput, trace.FieldOutput, trace.FieldThinking}
			for _, f := range values {
				if got := seen[f] > 0; got != (capture == trace.CaptureFull) {
					t.Errorf("Redact saw a secret in %s: %v (capture %s)", f, got, capture)
				}
			}
			if seen[trace.FieldErrorText] < 7 {
				t.Errorf("RedactString saw %d errors, want one per failing call", seen[trace.FieldErrorText])
			}
		})
	}
}

// TestRedactDropsAndKeeps checks the hooks' return values: nil drops a
// value, an empty string clears a string field, and tags are the run's
// own copy.
func TestRedactDropsAndKeeps(t *testing.T) {
	tr := trace.New(trace.Options{
		Redact: func(r *trace.Record, f trace.Field, v trace.Value) trace.Value { return nil },
		RedactString: func(r *trace.Record, f trace.Field, s string) string {
			if f == trace.FieldTag {
				return strings.ToUpper(s)
			}
			if f == trace.FieldErrorText {
				return ""
			}
			return s
		},
	})
	tags := []string{"a", "b"}
	_, ec := tr.Start(context.Background(), "r", trace.RunOptions{Input: trace.Text("x"), Tags: tags})
	ec.ToolCall("t", trace.Text("in"), nil, 0, errors.New("boom"))
	recs := ec.Records()
	if got := recs[0].Tags(); !slices.Equal(got, []string{"A", "B"}) || tags[0] != "a" {
		t.Errorf("tags recorded %q, caller's now %q", got, tags)
	}
	if recs[0].Input != nil || recs[1].Input != nil {
		t.Errorf("nil from Redact did not drop the value")
	}
	if recs[1].Error != "" || recs[1].Type != trace.TypeToolError {
		t.Errorf("tool.error recorded as %s with error %q", recs[1].Type, recs[1].Error)
	}
}

// BenchmarkRecordRedact is BenchmarkRecord with both redaction hooks set
// to functions that change nothing: the cost of the hooks' pass itself.
func BenchmarkRecordRedact(b *testing.B) {
	tr := trace.New(trace.Options{
		Redact:       func(_ *trace.Record, _ trace.Field, v trace.Value) trace.Value { return v },
		RedactString: func(_ *trace.Record, _ trace.Field, s string) string { return s },
	})
	in, out := trace.Raw([]byte(`{"expr":"6*7"}`)), trace.Raw([]byte(`42`))
	_, ec := tr.Start(context.Background(), "bench", trace.RunOptions{})
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		ec.ToolCall("calculator", in, out, 50*time.Microsecond, nil)
		if n++; n == 1000 {
			ec.End(nil, nil)
			_, ec = tr.Start(context.Background(), "bench", trace.RunOptions{})
			n = 0
		}
	}
}
