package otlpsink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

func collector(t *testing.T) (store.Store, string) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "o.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close(); st.Close() })
	return st, ts.URL + "/v1/traces"
}

// TestRoundTrip: Loupe → OTLP (this sink) → loupe serve → Loupe gives back
// the same span tree, tokens and tool calls.
func TestRoundTrip(t *testing.T) {
	st, endpoint := collector(t)
	sink, err := New(Options{Endpoint: endpoint, Content: true, ServiceName: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var orig []trace.Record
	keep := trace.SinkFunc(func(_ context.Context, recs []trace.Record) error {
		mu.Lock()
		orig = append(orig, recs...)
		mu.Unlock()
		return nil
	})
	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink, keep}})
	ctx, run := tr.Start(context.Background(), "planner", trace.RunOptions{Input: trace.Text("plan a trip")})
	run.StartIteration()
	run.ModelCall(trace.ModelCall{Model: "gpt-4o", Usage: trace.Usage{Provider: "openai", InputTokens: 120, OutputTokens: 30, CachedTokens: 20}, FinishReason: "tool_calls",
		Input: trace.Value(`[{"role":"user","content":"plan"}]`), Output: trace.Value(`[{"role":"assistant","content":"ok"}]`)})
	trace.Tool(ctx, "search", map[string]string{"q": "Lisbon"}, func(context.Context) ([]string, error) { return []string{"sunny"}, nil })
	trace.Tool(ctx, "book", 3, func(context.Context) (int, error) { return 0, errors.New("no seats") })
	run.EndIteration("continue")
	_, child := trace.SpawnChild(ctx, "researcher", nil)
	child.ModelCall(trace.ModelCall{Model: "gpt-4o-mini", Usage: trace.Usage{InputTokens: 40, OutputTokens: 5}})
	child.End(nil, nil)
	run.Message("assistant", trace.Text("done"))
	run.End(nil, nil)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := st.Trace(context.Background(), run.TraceID())
	if err != nil {
		t.Fatal(err)
	}
	want := trace.StatsOf(orig)
	if got.Stats.InputTokens != want.InputTokens || got.Stats.OutputTokens != want.OutputTokens || got.Stats.CachedTokens != want.CachedTokens ||
		got.Stats.ToolCalls != want.ToolCalls || got.Stats.ModelCalls != want.ModelCalls || got.Stats.Errors != want.Errors {
		t.Errorf("stats: got %+v, want %+v", got.Stats, want)
	}
	for name, ts := range want.ByTool {
		if g := got.Stats.ByTool[name]; g.Calls != ts.Calls || g.Errors != ts.Errors {
			t.Errorf("tool %s: got %+v, want %+v", name, g, ts)
		}
	}
	// The tree: every span of the original, with the same parent.
	parents := func(recs []trace.Record) map[trace.SpanID]trace.SpanID {
		m := map[trace.SpanID]trace.SpanID{}
		var walk func(spans []*store.Span, parent trace.SpanID)
		walk = func(spans []*store.Span, parent trace.SpanID) {
			for _, s := range spans {
				if s.Type == trace.TypeCustom || s.Type == trace.TypeMessage {
					continue
				}
				m[s.ID] = parent
				walk(s.Children, s.ID)
			}
		}
		walk(store.BuildSpans(recs), trace.SpanID{})
		return m
	}
	wp, gp := parents(orig), parents(got.Records)
	if len(wp) < 7 { // run, iteration, 2 model calls, 2 tools, child
		t.Fatalf("only %d spans in the original", len(wp))
	}
	for id, p := range wp {
		if g, ok := gp[id]; !ok || g != p {
			t.Errorf("span %s: parent %s in Loupe, %s (found %v) after the round trip", id, p, g, ok)
		}
	}
	// Tool inputs and outputs survive (Content is on).
	in := func(recs []trace.Record, typ trace.Type, name string) string {
		for _, r := range recs {
			if r.Type == typ && r.Name == name {
				return string(r.Input) + "|" + string(r.Output) + "|" + r.Error
			}
		}
		return "missing"
	}
	for _, c := range []struct {
		typ  trace.Type
		name string
	}{{trace.TypeToolStart, "search"}, {trace.TypeToolEnd, "search"}, {trace.TypeToolError, "book"}, {trace.TypeModelCall, "gpt-4o"}} {
		if w, g := in(orig, c.typ, c.name), in(got.Records, c.typ, c.name); w != g {
			t.Errorf("%s %s: %s in Loupe, %s after the round trip", c.typ, c.name, w, g)
		}
	}
	if got.Summary.Name != "planner" || got.Summary.Status != "success" {
		t.Errorf("summary: %+v", got.Summary)
	}
}

// TestNoContentByDefault: without Content, no input or output leaves.
func TestNoContentByDefault(t *testing.T) {
	st, endpoint := collector(t)
	sink, _ := New(Options{Endpoint: endpoint})
	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}, Dispatch: trace.DispatchOptions{Inline: true}})
	ctx, run := tr.Start(context.Background(), "secretive", trace.RunOptions{Input: trace.Text("my password is hunter2")})
	trace.Tool(ctx, "lookup", "hunter2", func(context.Context) (string, error) { return "hunter2", nil })
	run.End(nil, nil)
	tr.Shutdown(context.Background())
	recs, err := st.Trace(context.Background(), run.TraceID())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs.Records {
		if slices.Contains([]string{string(r.Input), string(r.Output)}, `"hunter2"`) || len(r.Output) > 0 && r.Type != trace.TypeCustom {
			t.Errorf("content exported: %s", r.AppendJSON(nil))
		}
		if r.Type == trace.TypeCustom && r.Name == otlp.SpanRecordName && strings.Contains(string(r.Output), "hunter2") {
			t.Errorf("content in the span: %s", r.Output)
		}
	}
}

// TestOTLPBackAsItCame: spans received over OTLP and stored are exported
// again exactly as they came (OTLP → Loupe → OTLP).
func TestOTLPBackAsItCame(t *testing.T) {
	b, err := os.ReadFile("../../otlp/testdata/openinference.json")
	if err != nil {
		t.Fatal(err)
	}
	td, err := otlp.DecodeJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	recs := otlp.Map(td, nil).Records
	back, _, open := otlp.Spans(recs, otlp.SpanOptions{})
	if len(open) != 0 {
		t.Errorf("open spans: %v", open)
	}
	want, _ := otlp.DecodeJSON(b)
	var m ptrace.JSONMarshaler
	wb, _ := m.MarshalTraces(want)
	gb, _ := m.MarshalTraces(back)
	if string(wb) != string(gb) {
		t.Errorf("spans differ:\nwant %s\ngot  %s", wb, gb)
	}
}
