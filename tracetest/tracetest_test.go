package tracetest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/tracetest"
)

// fakeTB records failures instead of failing the test, so failure messages
// can be asserted.
type fakeTB struct {
	testing.TB
	errs   []string
	fatals []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
}

// research records a small research run: two searches, a fetch that
// fails, a summary; two iterations, 1300 tokens.
func research(t *testing.T) []trace.Record {
	t.Helper()
	tr := trace.New(trace.Options{})
	ctx, ec := tr.Start(context.Background(), "research", trace.RunOptions{Input: trace.Text("what is new in go?")})
	ec.StartIteration()
	ec.ModelCall(trace.ModelCall{Model: "m", Usage: trace.Usage{InputTokens: 500, OutputTokens: 100, CostUSD: 0.002}})
	_, _ = trace.Tool(ctx, "search", map[string]any{"q": "go", "limit": 5}, func(context.Context) ([]string, error) { return []string{"go.dev"}, nil })
	_, _ = trace.Tool(ctx, "search", map[string]any{"q": "go 1.26 release notes"}, func(context.Context) ([]string, error) { return nil, nil })
	_, _ = trace.Tool(ctx, "fetch", map[string]any{"url": "https://go.dev/doc"}, func(context.Context) (string, error) { return "", errors.New("503 unavailable") })
	ec.EndIteration("continue")
	ec.StartIteration()
	_, _ = trace.Tool(ctx, "summarize", map[string]any{"text": "…"}, func(context.Context) (string, error) { return "ok", nil })
	ec.ModelCall(trace.ModelCall{Model: "m", Usage: trace.Usage{InputTokens: 600, OutputTokens: 100, CostUSD: 0.003}})
	ec.EndIteration("terminate")
	ec.End(trace.Text("Go 1.26 is out."), nil)
	return ec.Records()
}

func TestPassingAssertionsReportNothing(t *testing.T) {
	f := &fakeTB{}
	tracetest.New(f, research(t)).
		CalledInOrder("search", "summarize").
		CalledInOrder("search", "fetch", "summarize").
		CalledExactly("search", "search", "fetch", "summarize").
		Called("search", "fetch").
		NotCalled("delete").
		MinCalls("search", 2).
		MaxCalls("search", 2).
		Args("search", map[string]any{"q": "go"}, tracetest.Partial).
		Args("search", map[string]any{"q": "go", "limit": 5}, tracetest.Exact).
		Args("fetch", map[string]any{"url": "https://go.dev/doc", "x": 1}, tracetest.Fields("url")).
		Sequence(eval.InOrder, eval.ExpectedCall{Tool: "search", Args: map[string]any{"q": "go 1.26 release notes"}}, eval.ExpectedCall{Tool: "fetch", AnyArgs: true}).
		MaxSteps(2).
		MaxToolCalls(4).
		MaxLLMCalls(2).
		MaxTokens(1300).
		MaxCost(0.01).
		MaxDuration(time.Minute).
		OutputContains("Go 1.26")
	if len(f.errs)+len(f.fatals) > 0 {
		t.Fatalf("unexpected failures:\n%s", strings.Join(append(f.errs, f.fatals...), "\n---\n"))
	}
}

// Each failing assertion reports eval's explanation; the messages are
// golden (testdata/failures.golden, go test -update to rewrite).
func TestFailureMessages(t *testing.T) {
	recs := research(t)
	tests := []struct {
		name string
		fn   func(*tracetest.Trajectory)
		want string // a line the message must contain
	}{
		{"in order", func(tr *tracetest.Trajectory) { tr.CalledInOrder("summarize", "search") }, "call at position 3 matches but is out of order"},
		{"exactly", func(tr *tracetest.Trajectory) { tr.CalledExactly("search", "summarize") }, "expected 2 tool calls, got 4"},
		{"called", func(tr *tracetest.Trajectory) { tr.Called("search", "translate") }, "translate: called 0 times (required >= 1)"},
		{"not called", func(tr *tracetest.Trajectory) { tr.NotCalled("fetch") }, "fetch: called 1 times (must not be used)"},
		{"min calls", func(tr *tracetest.Trajectory) { tr.MinCalls("search", 3) }, "search: called 2 times (required >= 3)"},
		{"max calls", func(tr *tracetest.Trajectory) { tr.MaxCalls("search", 1) }, "search: called 2 times (required 0..1)"},
		{"args partial", func(tr *tracetest.Trajectory) { tr.Args("search", map[string]any{"q": "rust"}, tracetest.Partial) }, "no search call has the expected arguments (superset)"},
		{"args exact", func(tr *tracetest.Trajectory) { tr.Args("search", map[string]any{"q": "go"}, tracetest.Exact) }, "limit: not expected, got 5"},
		{"args never called", func(tr *tracetest.Trajectory) { tr.Args("translate", map[string]any{}, tracetest.Partial) }, "translate was never called"},
		{"steps", func(tr *tracetest.Trajectory) { tr.MaxSteps(1) }, "steps 2 <= 1 max (iterations)"},
		{"no errors", func(tr *tracetest.Trajectory) { tr.NoErrors() }, "call #3 fetch failed: 503 unavailable"},
		{"tokens", func(tr *tracetest.Trajectory) { tr.MaxTokens(1000) }, "1300"},
		{"cost", func(tr *tracetest.Trajectory) { tr.MaxCost(0.001) }, "0.005"},
		{"tool calls", func(tr *tracetest.Trajectory) { tr.MaxToolCalls(3) }, "tool calls 4 > 3 max"},
		{"output", func(tr *tracetest.Trajectory) { tr.OutputContains("Rust") }, `output does not contain "Rust"`},
	}
	var failures strings.Builder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTB{}
			tt.fn(tracetest.New(f, recs))
			if len(f.errs) != 1 || len(f.fatals) != 0 {
				t.Fatalf("got %d Errorf and %d Fatalf calls, want 1 Errorf: %q", len(f.errs), len(f.fatals), f.errs)
			}
			if !strings.Contains(f.errs[0], tt.want) {
				t.Errorf("message does not contain %q:\n%s", tt.want, f.errs[0])
			}
			fmt.Fprintf(&failures, "=== %s\n%s\n", tt.name, f.errs[0])
		})
	}
	golden.Check(t, "failures.golden", []byte(failures.String()))
}

// The message for a failed in-order assertion, in full: the same text eval
// writes for a failed case.
func TestFailureMessageMatchesEval(t *testing.T) {
	f := &fakeTB{}
	tracetest.New(f, research(t)).CalledInOrder("summarize", "search")
	want := `tracetest: CalledInOrder("summarize", "search") failed
case CalledInOrder("summarize", "search"): FAIL score 0.500 (threshold 1.00, mode default)
  calls: matched 2 of 2 expected, 4 actual; precision 0.50 recall 1.00 F1 0.67 order 0.25
  [FAIL] tool-trajectory (in_order) score 0.500 weight 1
      ✗ expected summarize (item 0): no call in order; call at position 3 matches but is out of order
      ✓ found search at position 0
      #   expected        actual
      1   summarize(any)  —                                        ✗ not found; nearest call is #4
      2   search(any)     #1 search({limit: 5, q: "go"})           ok
          —               #2 search({q: "go 1.26 release notes"})  extra call
          —               #3 fetch({url: "https://go.dev/doc"})    extra call
          —               #4 summarize({text: "…"})                extra call`
	if len(f.errs) != 1 || f.errs[0] != want {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(f.errs, "\n---\n"), want)
	}
}

func TestFatalStopsAtFirstFailure(t *testing.T) {
	f := &fakeTB{}
	tracetest.New(f, research(t), tracetest.Fatal()).MinCalls("search", 9)
	if len(f.fatals) != 1 || len(f.errs) != 0 {
		t.Errorf("Fatal option: %d Fatalf, %d Errorf; want 1, 0", len(f.fatals), len(f.errs))
	}
}

func TestAgentVMode(t *testing.T) {
	// AgentV 4.42.4 scores exact [a, b] against a, b, c as 1.0 (it divides
	// by the expected count); Loupe's default mode fails it.
	calls := eval.Trajectory{Calls: []eval.ToolCall{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	for _, tc := range []struct {
		mode  eval.Mode
		fails int
	}{{eval.ModeAgentV, 0}, {eval.ModeDefault, 1}} {
		f := &fakeTB{}
		tracetest.FromTrajectory(f, calls, tracetest.WithMode(tc.mode)).CalledExactly("a", "b")
		if len(f.errs) != tc.fails {
			t.Errorf("mode %s: %d failures, want %d: %q", tc.mode, len(f.errs), tc.fails, f.errs)
		}
	}
	// Without iteration records, steps are model calls.
	one := 1
	g := &fakeTB{}
	tracetest.FromTrajectory(g, eval.Trajectory{LLMCalls: &one}).MaxSteps(0)
	if len(g.errs) != 1 || !strings.Contains(g.errs[0], "steps 1 <= 0 max (model calls)") {
		t.Errorf("MaxSteps without iterations: %q", g.errs)
	}
}

func TestRunAndFromContext(t *testing.T) {
	f := &fakeTB{}
	tr := tracetest.Run(f, "agent", "hi", func(ctx context.Context) (string, error) {
		_, err := trace.Tool(ctx, "lookup", map[string]any{"k": 1}, func(context.Context) (int, error) { return 2, nil })
		return "two", err
	})
	tr.CalledExactly("lookup").Args("lookup", map[string]any{"k": 1}, tracetest.Exact).NoErrors().OutputContains("two")
	if len(f.errs) > 0 {
		t.Fatal(f.errs)
	}
	if len(tr.Records()) == 0 || tr.Trajectory().Output != "two" {
		t.Errorf("records %d, output %q", len(tr.Records()), tr.Trajectory().Output)
	}

	g := &fakeTB{}
	tracetest.Run(g, "agent", "hi", func(context.Context) (string, error) { return "", errors.New("model down") }).NoErrors()
	if len(g.errs) != 1 || !strings.Contains(g.errs[0], "model down") {
		t.Errorf("a failed run: %q", g.errs)
	}

	tracer := trace.New(trace.Options{})
	_, ec := tracer.Start(context.Background(), "live", trace.RunOptions{})
	ec.ToolCall("x", nil, nil, 0, nil)
	h := &fakeTB{}
	tracetest.FromContext(h, ec).Called("x").MaxToolCalls(1)
	if len(h.errs) > 0 {
		t.Error(h.errs)
	}
}
