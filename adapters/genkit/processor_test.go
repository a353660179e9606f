package genkittrace

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/tracing"
	"github.com/firebase/genkit/go/genkit"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/trace"
)

// A flow that runs under another instrumentation's span (an HTTP server
// span) is the run; a span another instrumentation makes inside a tool is
// a node under the tool; spans outside Genkit are not recorded.
func TestForeignSpans(t *testing.T) {
	p, traces := record(t, Options{})
	a := newApp(t)
	app := tracing.TracerProvider().Tracer("app")
	stock := genkit.DefineTool(a.g, "stock", "Counts an item's stock.",
		func(ctx *ai.ToolContext, in orderIn) (int, error) {
			_, sp := app.Start(ctx, "db.query")
			sp.SetAttributes(attribute.String("db.statement", "SELECT n FROM stock WHERE id = ?"))
			sp.End()
			return 3, nil
		})
	flow := genkit.DefineFlow(a.g, "stock-flow", func(ctx context.Context, id string) (any, error) {
		return stock.RunRaw(ctx, map[string]any{"id": id})
	})

	ctx, http := app.Start(context.Background(), "GET /stock")
	if _, err := flow.Run(ctx, "S-1"); err != nil {
		t.Fatal(err)
	}
	http.End()

	recs := runOf(t, traces(), "stock-flow")
	var b strings.Builder
	shape(trace.Tree(recs), "", &b)
	want := `run.end stock-flow [0]
  tool.end stock [0]
    node.end db.query [0]
`
	if b.String() != want {
		t.Errorf("span tree:\n%s\nwant:\n%s", b.String(), want)
	}
	if start := recs[0]; start.Type != trace.TypeRunStart || !start.ParentID.IsZero() {
		t.Errorf("first record %s with parent %s, want run.start at the root", start.Type, start.ParentID)
	}
	for _, r := range recs {
		if r.Name == "GET /stock" {
			t.Errorf("the HTTP span outside the flow was recorded: %+v", r)
		}
	}
	if st := p.Stats(); st.Skipped != 1 || st.Spans != 3 {
		t.Errorf("stats %+v, want 3 spans recorded and the HTTP span skipped", st)
	}
	if n := openSpans(p); n != 0 {
		t.Errorf("%d spans remembered, want 0", n)
	}
}

func TestUnregister(t *testing.T) {
	p, traces := record(t, Options{})
	a := newApp(t)
	p.Unregister()
	p.Unregister() // twice is fine
	if _, err := a.summarize(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if n := len(traces()); n != 0 {
		t.Errorf("%d traces recorded after Unregister, want 0", n)
	}
}

// newLocal returns a Processor on a TracerProvider of its own (not
// Genkit's global one), a tracer that makes spans as Genkit's do, and the
// records delivered.
func newLocal(t testing.TB, o Options) (*Processor, *sdktrace.TracerProvider, *collector) {
	c := &collector{}
	d := trace.NewDispatcher(trace.DispatchOptions{Inline: true}, c)
	p := New(d, o)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = d.Shutdown(context.Background())
	})
	return p, tp, c
}

// Spans that never end are remembered up to MaxOpenSpans, no more; spans
// of other instrumentation past it are not recorded.
func TestMaxOpenSpans(t *testing.T) {
	p, tp, c := newLocal(t, Options{MaxOpenSpans: 2})
	gk, other := tp.Tracer(ScopeName), tp.Tracer("other")
	ctx := context.Background()
	for range 100 {
		gk.Start(ctx, "leaked") // never ended
	}
	if n := openSpans(p); n != 2 {
		t.Fatalf("%d spans remembered, want the limit, 2", n)
	}
	pctx, parent := gk.Start(ctx, "flow")
	_, child := other.Start(pctx, "child")
	child.End()
	parent.SetAttributes(attribute.String("genkit:type", "action"), attribute.String("genkit:metadata:subtype", "flow"),
		attribute.String("genkit:name", "flow"), attribute.Bool("genkit:isRoot", true))
	parent.End()
	if st := p.Stats(); st.Skipped != 1 || st.Spans != 1 {
		t.Errorf("stats %+v, want the Genkit span recorded and the other skipped", st)
	}
	if len(ofType(c.recs, trace.TypeRunStart)) != 1 {
		t.Errorf("records %+v, want a run", c.recs)
	}
}

// With KeepSpans every span also keeps its companion record, from which
// otlp.Traces rebuilds the span with Genkit's attributes.
func TestKeepSpans(t *testing.T) {
	_, tp, c := newLocal(t, Options{KeepSpans: true})
	_, sp := tp.Tracer(ScopeName).Start(context.Background(), "weather")
	sp.SetAttributes(attribute.String("genkit:type", "action"), attribute.String("genkit:metadata:subtype", "tool.v2"),
		attribute.String("genkit:name", "weather"), attribute.String("genkit:input", `{"city":"Oslo"}`),
		attribute.String("genkit:output", `{"output":{"c":4}}`), attribute.String("genkit:state", "success"))
	sp.End()
	if n := len(ofType(c.recs, trace.TypeCustom)); n != 1 {
		t.Fatalf("%d custom records, want the companion", n)
	}
	td, err := otlp.Traces(c.recs)
	if err != nil {
		t.Fatal(err)
	}
	got := td.ResourceSpans().At(0).ScopeSpans().At(0)
	if got.Scope().Name() != ScopeName || got.Spans().At(0).Name() != "weather" {
		t.Fatalf("rebuilt scope %q span %q", got.Scope().Name(), got.Spans().At(0).Name())
	}
	if v, _ := got.Spans().At(0).Attributes().Get("genkit:input"); v.Str() != `{"city":"Oslo"}` {
		t.Errorf("rebuilt genkit:input %q", v.Str())
	}
	// A root tool call: a run with the call inside, its output unwrapped.
	te := ofType(c.recs, trace.TypeToolEnd)
	if len(te) != 1 || string(te[0].Output) != `{"c":4}` {
		t.Errorf("tool.end %+v, want the tool's own output", te)
	}
}

// Every attribute type the SDK has, and odd Genkit attributes, map to
// valid records without a panic.
func TestOddAttributes(t *testing.T) {
	_, tp, c := newLocal(t, Options{MaxValueBytes: 64})
	ctx, root := tp.Tracer(ScopeName).Start(context.Background(), "root")
	_, sp := tp.Tracer(ScopeName).Start(ctx, "odd")
	sp.SetAttributes(
		attribute.String("genkit:type", "action"),
		attribute.String("genkit:metadata:subtype", "model"),
		attribute.String("genkit:name", "\xff/model"),
		attribute.String("genkit:path", "}/{}/{,t:flow}/{{,t:flow}"),
		attribute.String("genkit:input", strings.Repeat("[", 5000)),
		attribute.String("genkit:output", `{"message":{"content":[{"text":7},{"reasoning":null},{"toolRequest":"x"}]},"usage":{"inputTokens":-3,"outputTokens":1e300}}`),
		attribute.String("genkit:state", "error"),
		attribute.Bool("genkit:isRoot", false),
		attribute.BoolSlice("bools", []bool{true}),
		attribute.Int64Slice("ints", []int64{-1}),
		attribute.Float64Slice("floats", []float64{1.5}),
		attribute.StringSlice("strs", []string{"a", "\xfe"}),
		attribute.Int64("big", 1<<62),
		attribute.Float64("f", -0.5),
		attribute.String("long", strings.Repeat("x", 1000)),
	)
	sp.AddEvent("e")
	sp.SetStatus(codes.Error, "")
	sp.End()
	root.End()
	if len(c.recs) == 0 {
		t.Fatal("no records")
	}
	checkRecords(t, c.recs)
}

// checkRecords checks what a store would: valid JSON values, valid UTF-8
// strings, ids set.
func checkRecords(t testing.TB, recs []trace.Record) {
	t.Helper()
	for _, r := range recs {
		for _, v := range []trace.Value{r.Input, r.Output, r.Thinking} {
			if len(v) > 0 && !json.Valid(v) {
				t.Errorf("%s %q: value %q is not JSON", r.Type, r.Name, v)
			}
		}
		for _, s := range append([]string{r.Name, r.Status, r.Error, r.Usage.Provider}, r.Tags()...) {
			if !utf8.ValidString(s) {
				t.Errorf("%s: %q is not UTF-8", r.Type, s)
			}
		}
		if r.TraceID.IsZero() || r.SpanID.IsZero() || r.Depth < 0 || r.Seq == 0 {
			t.Errorf("record %+v lacks ids, a seq or has a negative depth", r)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trace.DecodeRecord(b); err != nil {
			t.Errorf("record does not decode: %v\n%s", err, b)
		}
	}
}

// FuzzSpan feeds Genkit attributes of any content through the Processor.
func FuzzSpan(f *testing.F) {
	f.Add("model", "/{f,t:flow}/{g,t:util}/{m,t:action,s:model}", `{"messages":[]}`, `{"message":{"content":[{"text":"hi"}]},"usage":{"inputTokens":1}}`, "success", true)
	f.Add("tool.v2", "/{f,t:flow}/{t,t:action,s:tool.v2}", `{"id":1}`, `{"output":{"a":1},"content":[]}`, "error", false)
	f.Add("flow", "/{f,t:flow}/{g,t:flow}", `"x"`, `{"output":`, "", false)
	f.Fuzz(func(t *testing.T, sub, path, in, out, state string, isRoot bool) {
		_, tp, c := newLocal(t, Options{MaxValueBytes: 256})
		ctx, parent := tp.Tracer(ScopeName).Start(context.Background(), "parent")
		_, sp := tp.Tracer(ScopeName).Start(ctx, "span")
		sp.SetAttributes(attribute.String("genkit:type", "action"), attribute.String("genkit:metadata:subtype", sub),
			attribute.String("genkit:name", sub), attribute.String("genkit:path", path),
			attribute.String("genkit:input", in), attribute.String("genkit:output", out),
			attribute.String("genkit:state", state), attribute.Bool("genkit:isRoot", isRoot))
		sp.End()
		parent.End()
		checkRecords(t, c.recs)
	})
}

// BenchmarkModelSpan measures OnEnd for a model span carrying a 2 KB
// request and answer, into a background dispatcher that discards.
func BenchmarkModelSpan(b *testing.B) {
	d := trace.NewDispatcher(trace.DispatchOptions{}, trace.SinkFunc(func(context.Context, []trace.Record) error { return nil }))
	defer d.Shutdown(context.Background())
	p := New(d, Options{})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer(ScopeName)
	text := strings.Repeat("lorem ipsum ", 170)
	in := `{"messages":[{"role":"user","content":[{"text":"` + text + `"}]}]}`
	out := `{"message":{"role":"model","content":[{"text":"` + text + `"}]},"finishReason":"stop","usage":{"inputTokens":400,"outputTokens":400}}`
	ctx, root := tr.Start(context.Background(), "flow")
	defer root.End()
	b.ReportAllocs()
	for b.Loop() {
		_, sp := tr.Start(ctx, "scripted/brain")
		sp.SetAttributes(attribute.String("genkit:type", "action"), attribute.String("genkit:metadata:subtype", "model"),
			attribute.String("genkit:name", "scripted/brain"), attribute.String("genkit:path", "/{flow,t:flow}/{generate,t:util}/{scripted/brain,t:action,s:model}"),
			attribute.String("genkit:input", in), attribute.String("genkit:output", out), attribute.String("genkit:state", "success"))
		sp.End()
	}
}

// A retriever is a tool call with the query in and the documents out; a
// flow step (genkit.Run) is a node.
func TestRetrieverAndFlowStep(t *testing.T) {
	_, traces := record(t, Options{})
	a := newApp(t)
	docs := genkit.DefineRetriever(a.g, "kb/faq", &ai.RetrieverOptions{Label: "FAQ"},
		func(_ context.Context, req *ai.RetrieverRequest) (*ai.RetrieverResponse, error) {
			return &ai.RetrieverResponse{Documents: []*ai.Document{ai.DocumentFromText("Returns take 30 days.", nil)}}, nil
		})
	flow := genkit.DefineFlow(a.g, "faq", func(ctx context.Context, q string) (string, error) {
		res, err := genkit.Retrieve(ctx, a.g, ai.WithRetriever(docs), ai.WithTextDocs(q))
		if err != nil {
			return "", err
		}
		return genkit.Run(ctx, "first-doc", func() (string, error) {
			return res.Documents[0].Content[0].Text, nil
		})
	})
	if _, err := flow.Run(context.Background(), "returns?"); err != nil {
		t.Fatal(err)
	}
	recs := runOf(t, traces(), "faq")
	var b strings.Builder
	shape(trace.Tree(recs), "", &b)
	want := `run.end faq [0]
  tool.end kb/faq [0]
  node.end first-doc [0]
`
	if b.String() != want {
		t.Errorf("span tree:\n%s\nwant:\n%s", b.String(), want)
	}
	ts, te := ofType(recs, trace.TypeToolStart), ofType(recs, trace.TypeToolEnd)
	if len(ts) != 1 || !strings.Contains(string(ts[0].Input), "returns?") || !strings.Contains(string(te[0].Output), "Returns take 30 days.") {
		t.Errorf("retriever call %s → %s, want the query in and the document out", ts[0].Input, te[0].Output)
	}
}
