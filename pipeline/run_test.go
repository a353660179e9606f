package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/export/console"
	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/internal/tracefix"
	"github.com/loupe-dev/loupe/pipeline"
	"github.com/loupe-dev/loupe/pipeline/builtin"
	"github.com/loupe-dev/loupe/trace"
)

// load parses and validates a pipeline file.
func load(t *testing.T, path string) *pipeline.Pipeline {
	t.Helper()
	p, err := pipeline.Load(path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	return p
}

// clock makes a run's trace deterministic.
func clock() trace.Options { return trace.Options{Now: tracefix.Clock(time.Millisecond)} }

// offlineParams are the parameters the demos are run with.
func offlineParams() map[string]any {
	return map[string]any{
		"topic":         "typed languages",
		"query":         "Why use typed languages?",
		"documents_dir": "builtin/testdata/docs",
	}
}

var traceIDRe = regexp.MustCompile(`[0-9a-f]{32}`)

// render prints a run as the golden files hold it: the span tree (trace id
// masked) and the memory pool.
func render(t *testing.T, res *pipeline.RunResult) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := console.Tree(&b, res.Records, console.Options{}); err != nil {
		t.Fatal(err)
	}
	pool, err := json.MarshalIndent(res.Pool, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "termination: %s, steps: %d\npool: %s\n", res.Termination, res.Steps, pool)
	return traceIDRe.ReplaceAll(b.Bytes(), []byte("<trace>"))
}

// checkTrace asserts what every pipeline trace must show: each tool span
// ended, each memory write under a step, each branch's decision.
func checkTrace(t *testing.T, recs []trace.Record) (tools, iterations, branches, writes int) {
	t.Helper()
	spans := map[trace.SpanID]*trace.Record{}
	ended := map[trace.SpanID]bool{}
	for i := range recs {
		r := &recs[i]
		switch r.Type {
		case trace.TypeToolStart, trace.TypeNodeStart:
			spans[r.SpanID] = r
		case trace.TypeToolEnd, trace.TypeToolError, trace.TypeNodeEnd:
			ended[r.SpanID] = true
		}
	}
	for i := range recs {
		r := &recs[i]
		switch r.Type {
		case trace.TypeToolStart:
			tools++
			if !ended[r.SpanID] {
				t.Errorf("tool %s (seq %d) never ended", r.Name, r.Seq)
			}
		case trace.TypeIterationStart:
			iterations++
		case trace.TypeNodeEnd:
			if strings.HasPrefix(spans[r.SpanID].Name, "branch ") && r.Error == "" {
				branches++
				var d map[string]any
				if err := r.Output.Decode(&d); err != nil {
					t.Fatal(err)
				}
				for _, k := range []string{"router", "field", "value", "route"} {
					if _, ok := d[k]; !ok {
						t.Errorf("branch record %s lacks %q: %s", spans[r.SpanID].Name, k, r.Output)
					}
				}
			}
		case trace.TypeMemorySet:
			if r.Status == string(trace.ScopeParam) {
				continue
			}
			writes++
			if p := spans[r.ParentID]; p == nil || (p.Type != trace.TypeToolStart && p.Type != trace.TypeNodeStart) {
				t.Errorf("memory.set %s (seq %d) is not under a step", r.Name, r.Seq)
			}
		}
	}
	return
}

func TestPipelineOmniDemos(t *testing.T) {
	tests := []struct {
		file                                   string
		params                                 map[string]any
		tools, iterations, branches, minWrites int
		wantOut                                string
	}{
		{file: "demo-simple", tools: 3, minWrites: 3, wantOut: "final"},
		{file: "demo-loop", tools: 3, branches: 1, minWrites: 6, wantOut: "critique"},
		{file: "demo-branch", tools: 4, branches: 1, minWrites: 8, wantOut: "final"},
		{file: "demo-rag", params: map[string]any{"reference": "Static typing catches errors early."}, tools: 3, minWrites: 6, wantOut: "f1"},
		{file: "ultrarag_complex", tools: 5, iterations: 1, branches: 1, minWrites: 6, wantOut: "final"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p := load(t, "../testdata/real/omni/"+tt.file+".yaml")
			params := offlineParams()
			for k, v := range tt.params {
				params[k] = v
			}
			res, err := pipeline.Run(context.Background(), p, pipeline.RunOptions{Params: params, Trace: clock()})
			if err != nil {
				t.Fatal(err)
			}
			if res.Termination != trace.TerminationSuccess {
				t.Errorf("termination %s", res.Termination)
			}
			tools, iters, branches, writes := checkTrace(t, res.Records)
			if tools != tt.tools || iters != tt.iterations || branches != tt.branches || writes < tt.minWrites {
				t.Errorf("%d tool steps, %d loop passes, %d branch routes, %d memory writes; want %d, %d, %d, at least %d",
					tools, iters, branches, writes, tt.tools, tt.iterations, tt.branches, tt.minWrites)
			}
			if out, _ := res.Output.(map[string]any); out[tt.wantOut] == nil {
				t.Errorf("output %v lacks %s", res.Output, tt.wantOut)
			}
			golden.Check(t, "run/"+tt.file+".txt", render(t, res))
		})
	}
}

func TestPipelineLoops(t *testing.T) {
	tests := []struct {
		file       string
		iterations int
		lastAction string
	}{
		{"loop_exit", 2, "complete"},
		{"memory_history", 2, "max_iterations"},
		{"router_step", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			res, err := pipeline.Run(context.Background(), load(t, "testdata/run/"+tt.file+".yaml"), pipeline.RunOptions{Params: offlineParams(), Trace: clock()})
			if err != nil {
				t.Fatal(err)
			}
			_, iters, _, _ := checkTrace(t, res.Records)
			last := ""
			for _, r := range res.Records {
				if r.Type == trace.TypeIterationEnd {
					last = r.Status
				}
			}
			if iters != tt.iterations || last != tt.lastAction {
				t.Errorf("%d passes ending with %q, want %d ending with %q", iters, last, tt.iterations, tt.lastAction)
			}
			golden.Check(t, "run/"+tt.file+".txt", render(t, res))
		})
	}
}

func TestPipelineMemoryHistory(t *testing.T) {
	res, err := pipeline.Run(context.Background(), load(t, "testdata/run/memory_history.yaml"), pipeline.RunOptions{Params: offlineParams(), Trace: clock()})
	if err != nil {
		t.Fatal(err)
	}
	h := res.Pool.History("memory_analysis")
	if len(h) != 3 {
		t.Fatalf("history has %d writes, want 3: %v", len(h), h)
	}
	for i, w := range h {
		if w.Step != i+1 || w.Name != "generator.analyze" {
			t.Errorf("write %d: step %d by %s, want step %d by generator.analyze", i, w.Step, w.Name, i+1)
		}
	}
	if v, _ := res.Pool.Get("memory_analysis"); v != h[2].Value {
		t.Errorf("Get returns %v, want the latest write", v)
	}
	// The records say the same: memory.set of scope memory, Iteration = step.
	var steps []int
	for _, r := range res.Records {
		if r.Type == trace.TypeMemorySet && r.Status == string(trace.ScopeMemory) {
			steps = append(steps, r.Iteration)
		}
	}
	if fmt.Sprint(steps) != "[1 2 3]" {
		t.Errorf("memory.set steps %v, want [1 2 3]", steps)
	}
	if v, _ := res.Pool.Param("topic"); v != "typed languages" {
		t.Errorf("param topic = %v", v)
	}
}

// funcServer is a ToolServer of the test's own.
type funcServer map[string]func(ctx context.Context, args map[string]any) (any, error)

func (f funcServer) CallTool(ctx context.Context, tool string, args map[string]any) (any, error) {
	fn, ok := f[tool]
	if !ok {
		return nil, fmt.Errorf("no tool %s", tool)
	}
	return fn(ctx, args)
}
func (funcServer) Close() error { return nil }

// connectTo returns a RunOptions.Connect giving servers by name; any other
// server fails the test.
func connectTo(t *testing.T, servers map[string]pipeline.ToolServer) func(context.Context, *pipeline.Pipeline, *pipeline.Server) (pipeline.ToolServer, error) {
	return func(_ context.Context, _ *pipeline.Pipeline, s *pipeline.Server) (pipeline.ToolServer, error) {
		srv, ok := servers[s.Name]
		if !ok {
			t.Errorf("the runner connected to server %s", s.Name)
			return nil, errors.New("unexpected server")
		}
		return srv, nil
	}
}

func TestPipelineUltraRAGTimes(t *testing.T) {
	counter := funcServer{
		"start": func(context.Context, map[string]any) (any, error) { return map[string]any{"sum": 0.0}, nil },
		"add": func(_ context.Context, args map[string]any) (any, error) {
			return map[string]any{"total": args["total"].(float64) + 1}, nil
		},
	}
	res, err := pipeline.Run(context.Background(), load(t, "testdata/run/ultrarag_times.yaml"), pipeline.RunOptions{
		Trace: clock(), Connect: connectTo(t, map[string]pipeline.ToolServer{"counter": counter}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Pool.Get("sum"); v != 3.0 {
		t.Errorf("sum = %v, want 3 after 3 passes", v)
	}
	if _, ok := res.Pool.Get("total"); ok {
		t.Error("the output mapping kept total under its own name")
	}
	if _, iters, _, _ := checkTrace(t, res.Records); iters != 3 {
		t.Errorf("%d passes, want 3", iters)
	}
}

// countingModel counts the generator's model calls.
type countingModel struct {
	agent.Model
	calls atomic.Int32
}

func (m *countingModel) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	m.calls.Add(1)
	return m.Model.Generate(ctx, req)
}

func TestPipelineCheckpointResume(t *testing.T) {
	var checks atomic.Int32
	flaky := funcServer{"check": func(_ context.Context, args map[string]any) (any, error) {
		if args["draft"] == nil {
			return nil, errors.New("no draft")
		}
		if checks.Add(1) == 1 {
			return nil, errors.New("service unavailable")
		}
		return map[string]any{"checked": true}, nil
	}}
	p := load(t, "testdata/run/resume.yaml")
	model := &countingModel{Model: builtin.Offline()}
	o := pipeline.RunOptions{Params: offlineParams(), Model: model, Trace: clock(),
		Connect: connectTo(t, map[string]pipeline.ToolServer{"flaky": flaky})}
	res, err := pipeline.Run(context.Background(), p, o)
	if err == nil || !strings.Contains(err.Error(), "step 3 flaky.check (testdata/run/resume.yaml:12:5): service unavailable") {
		t.Fatalf("first run: err = %v", err)
	}
	if res.Termination != trace.TerminationError || res.Steps != 2 || res.Checkpoint.LastStep() != 2 {
		t.Fatalf("first run: %s after %d steps, checkpoint at step %d", res.Termination, res.Steps, res.Checkpoint.LastStep())
	}
	if n := model.calls.Load(); n != 2 {
		t.Fatalf("first run made %d model calls, want 2", n)
	}
	// The checkpoint survives JSON, as a caller may keep it.
	b, err := json.Marshal(res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	var cp pipeline.Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	res2, err := pipeline.Resume(context.Background(), p, &cp, o)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	// Steps 1 and 2 were restored, not run: only finalize asked the model,
	// and check ran once more, at step 3.
	if n := model.calls.Load(); n != 3 {
		t.Errorf("after resuming, %d model calls in all, want 3 (finalize only)", n)
	}
	if n := checks.Load(); n != 2 {
		t.Errorf("check ran %d times, want 2", n)
	}
	if res2.Steps != 4 || res2.Termination != trace.TerminationSuccess {
		t.Errorf("resumed run: %s after %d steps", res2.Termination, res2.Steps)
	}
	var names []string
	for _, r := range res2.Records {
		if r.Type == trace.TypeToolStart || r.Type == trace.TypeNodeStart {
			names = append(names, r.Name)
		}
	}
	if got := strings.Join(names, ", "); got != "restored generator.analyze, restored generator.draft, flaky.check, generator.finalize" {
		t.Errorf("resumed run's steps: %s", got)
	}
	golden.Check(t, "run/resume.txt", render(t, res2))

	// A checkpoint of another pipeline is refused.
	other := load(t, "../testdata/real/omni/demo-simple.yaml")
	if _, err := pipeline.Resume(context.Background(), other, &cp, o); err == nil || !strings.Contains(err.Error(), "another pipeline") {
		t.Errorf("resume with another pipeline: err = %v", err)
	}
	if _, err := pipeline.Resume(context.Background(), p, nil, o); err == nil {
		t.Error("resume without a checkpoint: no error")
	}
	// Without a checkpointer a run keeps none.
	res3, _ := pipeline.Run(context.Background(), other, pipeline.RunOptions{Params: offlineParams()})
	if res3.Checkpoint == nil {
		t.Error("demo-simple has checkpointer memory but kept no checkpoint")
	}
}

// blockingSink blocks its first delivery until release is closed.
type blockingSink struct {
	once             sync.Once
	entered, release chan struct{}
}

func (s *blockingSink) WriteRecords(context.Context, []trace.Record) error {
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	return nil
}

// signalModel closes called on its first call.
type signalModel struct {
	agent.Model
	once   sync.Once
	called chan struct{}
}

func (m *signalModel) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	m.once.Do(func() { close(m.called) })
	return m.Model.Generate(ctx, req)
}

// TestPipelineDispatchModes checks that callback_dispatch_mode picks the
// dispatcher: inline, a sink that blocks holds the run up (records are
// delivered as they are made, in the run's goroutine); background, the run
// goes on while the sink blocks.
func TestPipelineDispatchModes(t *testing.T) {
	for _, mode := range []string{"inline", "background"} {
		t.Run(mode, func(t *testing.T) {
			p := load(t, "testdata/run/dispatch_"+mode+".yaml")
			if d := pipeline.DispatchFor(p, trace.DispatchOptions{}); d.Inline != (mode == "inline") {
				t.Errorf("DispatchFor: Inline = %v", d.Inline)
			}
			sink := &blockingSink{entered: make(chan struct{}), release: make(chan struct{})}
			model := &signalModel{Model: builtin.Offline(), called: make(chan struct{})}
			o := clock()
			o.Sinks = []trace.Sink{sink}
			done := make(chan error, 1)
			go func() {
				_, err := pipeline.Run(context.Background(), p, pipeline.RunOptions{Params: offlineParams(), Model: model, Trace: o})
				done <- err
			}()
			<-sink.entered
			if mode == "inline" {
				// The sink holds run.start's delivery, inside the run's
				// Start: no step can have run.
				select {
				case <-model.called:
					t.Error("inline: a step ran while the sink held the first record")
				default:
				}
			} else {
				<-model.called // the run goes on; this would hang if it could not
			}
			close(sink.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPipelineErrors(t *testing.T) {
	// Parsed, not validated: Run validates.
	write := func(t *testing.T, src string) *pipeline.Pipeline {
		p, err := pipeline.Parse("p.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, src string
		params    map[string]any
		servers   map[string]pipeline.ToolServer
		model     agent.Model
		want      []string // in the error
		reason    trace.TerminationReason
	}{
		{name: "missing parameter", src: "servers: {generator: builtin}\nparameters: {topic: \"$topic\"}\npipeline: [generator.analyze]\n",
			want: []string{"missing parameter: topic (", "--param name=value"}},
		{name: "tool error", src: "servers: {evaluator: builtin}\npipeline: [evaluator.evaluate]\n",
			want: []string{"step 1 evaluator.evaluate (", ":2:12): evaluate: missing argument"}, reason: trace.TerminationError},
		{name: "unknown tool", src: "servers: {generator: builtin}\nparameters: {topic: x}\npipeline: [generator.summarize]\n",
			want: []string{"built-in server generator has no tool \"summarize\""}, reason: trace.TerminationError},
		{name: "panicking server", src: "servers: {boom: servers/boom}\npipeline: [boom.go]\n",
			servers: map[string]pipeline.ToolServer{"boom": funcServer{"go": func(context.Context, map[string]any) (any, error) { panic("kaboom") }}},
			want:    []string{"step 1 boom.go", "panic: kaboom"}, reason: trace.TerminationError},
		{name: "input never written", src: "servers: {generator: builtin}\npipeline:\n  - generator.analyze:\n      input: {topic: \"$nowhere\"}\n",
			want: []string{"p.yaml:4:22: input `topic` of step `generator.analyze` reads `$nowhere`, which is neither a parameter nor a step output"}},
		{name: "output not in result", src: "servers: {evaluator: builtin}\nparameters: {answer: a, reference: a}\npipeline:\n  - evaluator.evaluate:\n      output: [quality_score, grade]\n",
			want: []string{"output grade: the result has no \"grade\" (it has exact_match, f1,"}, reason: trace.TerminationError},
		{name: "server that exits", src: "servers: {dead: /bin/false}\npipeline: [dead.anything]\n",
			want: []string{"step 1 dead.anything (p.yaml:2:12): server dead (p.yaml:1:17, \"/bin/false\")"}, reason: trace.TerminationError},
		{name: "parameters are not substituted into commands", src: "servers: {x: \"$cmd\"}\nparameters: {cmd: /bin/sh}\npipeline: [x.run]\n",
			want: []string{`server x (p.yaml:1:14, "$cmd")`}, reason: trace.TerminationError},
		{name: "input written only on the branch not taken", src: `servers: {generator: builtin, router: builtin}
parameters: {topic: x, quality_score: 0.9}
pipeline:
  - branch:
      router: router.check_quality
      branches:
        high_quality:
          - generator.analyze:
              output: [analysis]
        low_quality:
          - generator.draft:
              input: {topic: $topic, analysis: $topic}
              output: [draft]
  - generator.finalize:
      input: {text: $draft, topic: $topic}
`, want: []string{"step 3 generator.finalize (p.yaml:14:5): input text (p.yaml:15:21) reads draft, which no step has written yet and no parameter defines"}, reason: trace.TerminationError},
		{name: "model error", src: "servers: {generator: builtin}\nparameters: {topic: x}\npipeline: [generator.analyze]\n",
			params: map[string]any{"topic": "x"}, model: failingModel{},
			want: []string{"step 1 generator.analyze (p.yaml:3:12): generator.analyze: model broken: quota exceeded"}, reason: trace.TerminationError},
		{name: "no route", src: "servers: {generator: builtin}\nparameters: {topic: x, route: sideways}\npipeline:\n  - generator.analyze\n  - branch:\n      router: pick\n      branches:\n        left: [generator.draft]\n        right: [generator.draft]\n",
			want: []string{"branch pick (", "no route", "route = \"sideways\" selects none; the branches are left, right"}, reason: trace.TerminationError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := write(t, tt.src)
			o := pipeline.RunOptions{Params: tt.params, Trace: clock(), Model: tt.model}
			if tt.servers != nil {
				o.Connect = connectTo(t, tt.servers)
			}
			res, err := pipeline.Run(context.Background(), p, o)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tt.reason == "" {
				return
			}
			if res == nil || res.Termination != tt.reason {
				t.Fatalf("result %+v, want termination %s", res, tt.reason)
			}
			// The failing step ended with the error, and the run says why.
			var last trace.Record
			for _, r := range res.Records {
				if r.Type == trace.TypeToolError || (r.Type == trace.TypeNodeEnd && r.Error != "") {
					last = r
				}
			}
			if last.Error == "" {
				t.Error("no step ended with the error")
			}
		})
	}
}

// failingModel fails every call.
type failingModel struct{}

func (failingModel) Name() string { return "broken" }
func (failingModel) Generate(context.Context, agent.Request) (agent.Response, error) {
	return agent.Response{}, errors.New("quota exceeded")
}

func TestPipelineCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var after atomic.Bool
	srv := funcServer{
		"stop": func(ctx context.Context, _ map[string]any) (any, error) {
			cancel()
			<-ctx.Done()
			return nil, ctx.Err()
		},
		"after": func(context.Context, map[string]any) (any, error) { after.Store(true); return nil, nil },
	}
	p := load(t, writeFile(t, "servers: {s: servers/s}\npipeline: [s.stop, s.after]\n"))
	res, err := pipeline.Run(ctx, p, pipeline.RunOptions{Trace: clock(), Connect: connectTo(t, map[string]pipeline.ToolServer{"s": srv})})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res.Termination != trace.TerminationContextCanceled || after.Load() {
		t.Errorf("termination %s; the step after ran: %v", res.Termination, after.Load())
	}
}

func writeFile(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPipelineUltraRAGServersMissing(t *testing.T) {
	p := load(t, "../testdata/real/ultrarag/vanilla_rag.yaml")
	res, err := pipeline.Run(context.Background(), p, pipeline.RunOptions{Trace: clock()})
	if !errors.Is(err, pipeline.ErrServerMissing) {
		t.Fatalf("err = %v, want ErrServerMissing", err)
	}
	for _, w := range []string{"server benchmark (", `"servers/benchmark" does not exist here`, "point servers.benchmark at an MCP server that exists", "(https://host/mcp)"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if res.Termination != trace.TerminationError {
		t.Errorf("termination %s", res.Termination)
	}
	// A directory (UltraRAG's Python server) says so, and a built-in name
	// suggests the built-in server.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "servers", "retriever"), 0o755); err != nil {
		t.Fatal(err)
	}
	p = load(t, writeFile(t, "servers: {retriever: "+filepath.Join(dir, "servers", "retriever")+"}\npipeline: [retriever.search]\n"))
	_, err = pipeline.Run(context.Background(), p, pipeline.RunOptions{})
	for _, w := range []string{"is a directory (UltraRAG's Python server code", "or write `builtin` for Loupe's built-in retriever"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}

func TestPipelineCallerTracer(t *testing.T) {
	var mu sync.Mutex
	var got []trace.Record
	sink := trace.SinkFunc(func(_ context.Context, recs []trace.Record) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, recs...)
		return nil
	})
	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}})
	p := load(t, "../testdata/real/omni/demo-simple.yaml")
	res, err := pipeline.Run(context.Background(), p, pipeline.RunOptions{Tracer: tr, Params: offlineParams(), Tags: []string{"env:test"}})
	if err != nil {
		t.Fatal(err)
	}
	// Run leaves the caller's tracer running: it can still record and flush.
	_, again := tr.Start(context.Background(), "after", trace.RunOptions{})
	again.End(nil, nil)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(res.Records)+2 {
		t.Errorf("the sink got %d records, want the run's %d and the later run's 2", len(got), len(res.Records))
	}
	if tags := strings.Join(res.Records[0].Tags(), " "); tags != "pipeline dialect:omni env:test" {
		t.Errorf("tags %q", tags)
	}
}
