package genkittrace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/tracetest"
)

// The test app: a real Genkit instance whose only stand-in is the model,
// defined through Genkit's model API, which answers from a script. The
// script is a function of the request alone, so flows may run at the same
// time.

const modelName = "scripted/brain"

type orderIn struct {
	ID string `json:"id"`
}

type orderOut struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

type refundIn struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
	APIKey string  `json:"api_key,omitempty"`
}

// script answers one model request:
//   - "Where is order X?" → think, then ask lookup_order for X;
//   - "Refund order X"    → ask refund for X;
//   - a tool's answer     → say what it said;
//   - "summarize: T"      → "summary: T";
//   - with a stream callback, stream "Hel" and "lo", then answer "Hello".
func script(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	if len(req.Messages) == 0 {
		return nil, errors.New("script: no messages")
	}
	last := req.Messages[len(req.Messages)-1]
	resp := func(u ai.GenerationUsage, parts ...*ai.Part) *ai.ModelResponse {
		return &ai.ModelResponse{Message: ai.NewModelMessage(parts...), FinishReason: ai.FinishReasonStop, Usage: &u}
	}
	if last.Role == ai.RoleTool {
		for _, p := range last.Content {
			if p.ToolResponse != nil {
				b, _ := json.Marshal(p.ToolResponse.Output)
				return resp(ai.GenerationUsage{InputTokens: 30, OutputTokens: 7},
					ai.NewTextPart(p.ToolResponse.Name+" said "+string(b))), nil
			}
		}
		return nil, errors.New("script: a tool message without a tool response")
	}
	text := last.Text()
	switch {
	case cb != nil:
		for _, s := range []string{"Hel", "lo"} {
			if err := cb(ctx, &ai.ModelResponseChunk{Content: []*ai.Part{ai.NewTextPart(s)}}); err != nil {
				return nil, err
			}
		}
		return resp(ai.GenerationUsage{InputTokens: 3, OutputTokens: 2}, ai.NewTextPart("Hello")), nil
	case strings.HasPrefix(text, "Where is order "):
		id := strings.TrimSuffix(strings.TrimPrefix(text, "Where is order "), "?")
		return resp(ai.GenerationUsage{InputTokens: 12, OutputTokens: 5, ThoughtsTokens: 3, CachedContentTokens: 4},
			ai.NewReasoningPart("I need the order's status", nil),
			ai.NewToolRequestPart(&ai.ToolRequest{Name: "lookup_order", Ref: "call-" + id, Input: map[string]any{"id": id}})), nil
	case strings.HasPrefix(text, "Refund order "):
		id := strings.TrimPrefix(text, "Refund order ")
		return resp(ai.GenerationUsage{InputTokens: 9, OutputTokens: 4},
			ai.NewToolRequestPart(&ai.ToolRequest{Name: "refund", Ref: "call-r", Input: map[string]any{"id": id, "amount": 5, "api_key": "sk-ant-api03-" + strings.Repeat("x", 40)}})), nil
	case strings.HasPrefix(text, "summarize: "):
		return resp(ai.GenerationUsage{InputTokens: 8, OutputTokens: 3}, ai.NewTextPart("summary: "+strings.TrimPrefix(text, "summarize: "))), nil
	}
	return nil, fmt.Errorf("script: no answer for %q", text)
}

// app holds the flows of the test app.
type app struct {
	g         *genkit.Genkit
	support   func(context.Context, string) (string, error)
	refund    func(context.Context, string) (string, error)
	summarize func(context.Context, string) (string, error)
}

func newApp(t *testing.T) *app {
	t.Helper()
	ctx := context.Background()
	g := genkit.Init(ctx)
	genkit.DefineModel(g, modelName, &ai.ModelOptions{Label: "Scripted", Supports: &ai.ModelSupports{Multiturn: true, Tools: true}}, script)
	lookup := genkit.DefineTool(g, "lookup_order", "Looks an order up.",
		func(_ *ai.ToolContext, in orderIn) (orderOut, error) {
			return orderOut{ID: in.ID, Status: "shipped"}, nil
		})
	refund := genkit.DefineTool(g, "refund", "Refunds an order.",
		func(_ *ai.ToolContext, in refundIn) (string, error) {
			return "", fmt.Errorf("refunds are closed for order %s", in.ID)
		})
	summarize := genkit.DefineFlow(g, "summarize", func(ctx context.Context, text string) (string, error) {
		return genkit.GenerateText(ctx, g, ai.WithModelName(modelName), ai.WithPrompt("summarize: "+text))
	})
	support := genkit.DefineFlow(g, "support", func(ctx context.Context, question string) (string, error) {
		resp, err := genkit.Generate(ctx, g, ai.WithModelName(modelName), ai.WithPrompt(question), ai.WithTools(lookup))
		if err != nil {
			return "", err
		}
		return summarize.Run(ctx, resp.Text())
	})
	refundFlow := genkit.DefineFlow(g, "refund", func(ctx context.Context, id string) (string, error) {
		resp, err := genkit.Generate(ctx, g, ai.WithModelName(modelName), ai.WithPrompt("Refund order "+id), ai.WithTools(refund))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	return &app{g: g, support: support.Run, refund: refundFlow.Run, summarize: summarize.Run}
}

// collector is a sink that keeps every record.
type collector struct {
	mu   sync.Mutex
	recs []trace.Record
}

func (c *collector) WriteRecords(_ context.Context, recs []trace.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, recs...)
	c.mu.Unlock()
	return nil
}

// traces returns the records collected so far, by trace, each trace in
// Seq order.
func (c *collector) traces() map[trace.TraceID][]trace.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[trace.TraceID][]trace.Record{}
	for _, r := range c.recs {
		out[r.TraceID] = append(out[r.TraceID], r)
	}
	for _, recs := range out {
		slices.SortFunc(recs, func(a, b trace.Record) int { return cmpSeq(a.Seq, b.Seq) })
	}
	return out
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// record registers a Processor delivering to a fresh tracer (background
// dispatcher) for the test, and returns a function that flushes it and
// returns the traces.
func record(t *testing.T, o Options) (*Processor, func() map[trace.TraceID][]trace.Record) {
	t.Helper()
	c := &collector{}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{c}})
	p := Register(tr, o)
	t.Cleanup(func() {
		p.Unregister()
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return p, func() map[trace.TraceID][]trace.Record {
		t.Helper()
		if err := p.ForceFlush(context.Background()); err != nil {
			t.Fatalf("ForceFlush: %v", err)
		}
		return c.traces()
	}
}

// runOf returns the only trace whose run is named name.
func runOf(t *testing.T, traces map[trace.TraceID][]trace.Record, name string) []trace.Record {
	t.Helper()
	var found [][]trace.Record
	for _, recs := range traces {
		for _, r := range recs {
			if r.Type == trace.TypeRunStart && r.Name == name {
				found = append(found, recs)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d traces with a run named %q, want 1 (of %d traces)", len(found), name, len(traces))
	}
	return found[0]
}

func ofType(recs []trace.Record, typ trace.Type) []trace.Record {
	var out []trace.Record
	for _, r := range recs {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// shape renders a span tree as "type name" lines indented by depth, with
// the depth of each record in brackets: what a reader of the trace sees.
func shape(nodes []*trace.Node, indent string, b *strings.Builder) {
	for _, n := range nodes {
		r := n.Record()
		fmt.Fprintf(b, "%s%s %s [%d]\n", indent, r.Type, r.Name, r.Depth)
		shape(n.Children, indent+"  ", b)
	}
}

func jsonEq(t *testing.T, what string, got trace.Value, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: %q is not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want %q: %v", what, want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s = %s, want %s", what, gb, wb)
	}
}

func TestFlowWithToolsAndNestedFlow(t *testing.T) {
	p, traces := record(t, Options{Tags: []string{"env:test"}})
	a := newApp(t)
	out, err := a.support(context.Background(), "Where is order A-17?")
	if err != nil {
		t.Fatal(err)
	}
	if want := `summary: lookup_order said {"id":"A-17","status":"shipped"}`; out != want {
		t.Fatalf("support = %q, want %q", out, want)
	}
	recs := runOf(t, traces(), "support")

	var b strings.Builder
	shape(trace.Tree(recs), "", &b)
	want := `run.end support [0]
  node.end generate [0]
    model.call scripted/brain [0]
    tool.end lookup_order [0]
    node.end generate [0]
      model.call scripted/brain [0]
  child.end summarize [0]
    node.end generate [1]
      model.call scripted/brain [1]
`
	if b.String() != want {
		t.Errorf("span tree:\n%s\nwant:\n%s", b.String(), want)
	}

	// The run: the flow's input, output and tags.
	start, end := ofType(recs, trace.TypeRunStart)[0], ofType(recs, trace.TypeRunEnd)[0]
	jsonEq(t, "run.start input", start.Input, `"Where is order A-17?"`)
	jsonEq(t, "run.end output", end.Output, fmt.Sprintf("%q", out))
	if end.Status != string(trace.TerminationSuccess) || end.Error != "" || end.Duration <= 0 {
		t.Errorf("run.end status %q error %q duration %v, want success, no error, a duration", end.Status, end.Error, end.Duration)
	}
	if !slices.Contains(start.Tags(), "source:genkit") || !slices.Contains(start.Tags(), "env:test") || slices.Contains(start.Tags(), "source:otlp") {
		t.Errorf("run.start tags %q, want source:genkit and env:test", start.Tags())
	}

	// The model calls: the first thinks and asks for the tool, the second
	// answers with the tool's result, the nested flow's summarizes.
	calls := ofType(recs, trace.TypeModelCall)
	if len(calls) != 3 {
		t.Fatalf("%d model calls, want 3", len(calls))
	}
	first := calls[0]
	if first.Name != modelName || first.Status != "stop" {
		t.Errorf("model.call name %q status %q, want %q, stop", first.Name, first.Status, modelName)
	}
	if u := first.Usage; u.InputTokens != 12 || u.OutputTokens != 5+3 || u.ReasoningTokens != 3 || u.CachedTokens != 4 || u.Provider != "scripted" {
		t.Errorf("first call's usage %+v, want 12 in, 8 out (5 + 3 thoughts), 3 reasoning, 4 cached, provider scripted", u)
	}
	jsonEq(t, "first call's thinking", first.Thinking, `"I need the order's status"`)
	if !strings.Contains(string(first.Output), `"lookup_order"`) || !strings.Contains(string(first.Output), `"A-17"`) {
		t.Errorf("first call's output %s, want its tool request", first.Output)
	}
	if !strings.Contains(string(first.Input), "Where is order A-17?") {
		t.Errorf("first call's input %s, want the prompt", first.Input)
	}
	if !strings.Contains(string(calls[1].Output), `lookup_order said`) || !strings.Contains(string(calls[1].Input), `"toolResponse"`) {
		t.Errorf("second call: input %s output %s, want the tool response in, the answer out", calls[1].Input, calls[1].Output)
	}

	// The tool call, its arguments and result.
	ts, te := ofType(recs, trace.TypeToolStart), ofType(recs, trace.TypeToolEnd)
	if len(ts) != 1 || len(te) != 1 {
		t.Fatalf("%d tool.start, %d tool.end, want 1 each", len(ts), len(te))
	}
	jsonEq(t, "tool.start input", ts[0].Input, `{"id":"A-17"}`)
	jsonEq(t, "tool.end output", te[0].Output, `{"id":"A-17","status":"shipped"}`)

	// The nested flow is a child run.
	spawn := ofType(recs, trace.TypeChildSpawn)
	if len(spawn) != 1 || spawn[0].Name != "summarize" {
		t.Fatalf("child.spawn %+v, want one, summarize", spawn)
	}
	jsonEq(t, "child.spawn input", spawn[0].Input, `"lookup_order said {\"id\":\"A-17\",\"status\":\"shipped\"}"`)

	// The trajectory, graded as loupe eval grades it.
	tracetest.New(t, recs).
		CalledExactly("lookup_order").
		Args("lookup_order", map[string]any{"id": "A-17"}, tracetest.Partial).
		NoErrors().
		MaxLLMCalls(3).
		MaxTokens(12 + 8 + 30 + 7 + 8 + 3).
		OutputContains("summary: lookup_order said")

	st := p.Stats()
	if st.Spans != 9 || st.Rejected != 0 || st.Records != uint64(len(recs)) {
		t.Errorf("stats %+v, want 9 spans, %d records, none rejected", st, len(recs))
	}
	if n := openSpans(p); n != 0 {
		t.Errorf("%d spans still remembered after the flow ended, want 0", n)
	}
	for _, r := range recs {
		if r.Type == trace.TypeCustom && r.Name == "otel.span" {
			t.Errorf("a companion otel.span record without KeepSpans")
		}
	}
}

func openSpans(p *Processor) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.open)
}

func TestFailingTool(t *testing.T) {
	_, traces := record(t, Options{Redact: redact.Default().Record})
	a := newApp(t)
	_, err := a.refund(context.Background(), "B-2")
	if err == nil || !strings.Contains(err.Error(), "refunds are closed for order B-2") {
		t.Fatalf("refund flow: %v, want the tool's error", err)
	}
	recs := runOf(t, traces(), "refund")

	te := ofType(recs, trace.TypeToolError)
	if len(te) != 1 || te[0].Name != "refund" || !strings.Contains(te[0].Error, "refunds are closed for order B-2") {
		t.Fatalf("tool.error records %+v, want refund's error", te)
	}
	ts := ofType(recs, trace.TypeToolStart)
	if len(ts) != 1 || strings.Contains(string(ts[0].Input), "sk-ant-") || !strings.Contains(string(ts[0].Input), "[REDACTED]") {
		t.Errorf("tool.start %+v, want the api key redacted", ts)
	}
	end := ofType(recs, trace.TypeRunEnd)[0]
	if end.Status != string(trace.TerminationError) || !strings.Contains(end.Error, "refunds are closed") {
		t.Errorf("run.end status %q error %q, want error with the tool's message", end.Status, end.Error)
	}
	tracetest.New(t, recs).
		CalledExactly("refund").
		Args("refund", map[string]any{"id": "B-2", "amount": 5.0}, tracetest.Partial)
	for _, r := range recs {
		for _, v := range []trace.Value{r.Input, r.Output, r.Thinking} {
			if strings.Contains(string(v), "sk-ant-") {
				t.Errorf("%s %s keeps the api key: %s", r.Type, r.Name, v)
			}
		}
	}
}

func TestStreamingGenerate(t *testing.T) {
	_, traces := record(t, Options{})
	a := newApp(t)
	var chunks []string
	resp, err := genkit.Generate(context.Background(), a.g, ai.WithModelName(modelName), ai.WithPrompt("hi"),
		ai.WithStreaming(func(_ context.Context, c *ai.ModelResponseChunk) error {
			chunks = append(chunks, c.Text())
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Hello" || strings.Join(chunks, "|") != "Hel|lo" {
		t.Fatalf("streamed %q, answered %q; want Hel|lo, Hello", chunks, resp.Text())
	}
	// Generate outside a flow: the generate step is the run.
	recs := runOf(t, traces(), "generate")
	calls := ofType(recs, trace.TypeModelCall)
	if len(calls) != 1 {
		t.Fatalf("%d model calls, want 1", len(calls))
	}
	jsonEq(t, "model.call output", calls[0].Output, `"Hello"`)
	if u := calls[0].Usage; u.InputTokens != 3 || u.OutputTokens != 2 {
		t.Errorf("usage %+v, want 3 in, 2 out", u)
	}
	tracetest.New(t, recs).NoErrors().MaxLLMCalls(1).MaxToolCalls(0)
}

// Flows running at the same time make separate, whole traces, each with
// its own arguments.
func TestConcurrentFlows(t *testing.T) {
	p, traces := record(t, Options{})
	a := newApp(t)
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("C-%d", i)
			if i%4 == 3 {
				_, err := a.refund(context.Background(), id)
				if err == nil {
					errs <- fmt.Errorf("refund %s did not fail", id)
				}
				return
			}
			if _, err := a.support(context.Background(), "Where is order "+id+"?"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all := traces()
	if len(all) != n {
		t.Fatalf("%d traces, want %d", len(all), n)
	}
	for _, recs := range all {
		starts := ofType(recs, trace.TypeRunStart)
		if len(starts) != 1 || len(ofType(recs, trace.TypeRunEnd)) != 1 {
			t.Fatalf("a trace with %d run.start, want 1 and a run.end", len(starts))
		}
		var id string
		if err := json.Unmarshal(starts[0].Input, &id); err != nil {
			t.Fatal(err)
		}
		switch starts[0].Name {
		case "support":
			id = strings.TrimSuffix(strings.TrimPrefix(id, "Where is order "), "?")
			tracetest.New(t, recs).CalledExactly("lookup_order").Args("lookup_order", map[string]any{"id": id}, tracetest.Partial).NoErrors()
			if len(ofType(recs, trace.TypeChildEnd)) != 1 || len(ofType(recs, trace.TypeModelCall)) != 3 {
				t.Errorf("support %s: %d child runs, %d model calls; want 1 and 3", id, len(ofType(recs, trace.TypeChildEnd)), len(ofType(recs, trace.TypeModelCall)))
			}
		case "refund":
			tracetest.New(t, recs).CalledExactly("refund").Args("refund", map[string]any{"id": id}, tracetest.Partial)
			if len(ofType(recs, trace.TypeToolError)) != 1 {
				t.Errorf("refund %s: no tool.error", id)
			}
		default:
			t.Errorf("a run named %q", starts[0].Name)
		}
		for _, r := range recs {
			if r.TraceID != starts[0].TraceID {
				t.Fatalf("record of trace %s among %s's", r.TraceID, starts[0].TraceID)
			}
		}
	}
	if n := openSpans(p); n != 0 {
		t.Errorf("%d spans still remembered after every flow ended, want 0", n)
	}
}
