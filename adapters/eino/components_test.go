package einotrace_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/embedding"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/retriever"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	einotrace "github.com/loupe-dev/loupe/adapters/eino"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/trace"
)

// TestComponents drives the Handler through Eino's callbacks API the way
// components that report their own callbacks do (eino-ext's retrievers,
// embedders and models), with the payload types Eino defines, and with odd
// payloads: each component called on its own is a root run of its own.
func TestComponents(t *testing.T) {
	for _, tc := range []struct {
		name  string
		info  *callbacks.RunInfo
		call  func(ctx context.Context)
		check func(t *testing.T, recs []trace.Record)
	}{{
		name: "retriever",
		info: &callbacks.RunInfo{Name: "docs", Type: "Memory", Component: components.ComponentOfRetriever},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart(ctx, &retriever.CallbackInput{Query: "eino", TopK: 2})
			callbacks.OnEnd(ctx, &retriever.CallbackOutput{Docs: []*schema.Document{
				(&schema.Document{ID: "d1", Content: "Eino is a framework."}).WithScore(0.9), nil}})
		},
		check: func(t *testing.T, recs []trace.Record) {
			if got := oneOf(t, recs, trace.TypeToolStart, "docs"); string(got.Input) != `{"query":"eino","top_k":2}` {
				t.Errorf("tool.start input %s", got.Input)
			}
			end := oneOf(t, recs, trace.TypeToolEnd, "docs")
			docs := decode(t, end.Output).([]any)
			if len(docs) != 1 || docs[0].(map[string]any)["id"] != "d1" || docs[0].(map[string]any)["score"] != 0.9 {
				t.Errorf("tool.end output %s", end.Output)
			}
		},
	}, {
		name: "embedding",
		info: &callbacks.RunInfo{Type: "Local", Component: components.ComponentOfEmbedding},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart(ctx, &embedding.CallbackInput{Texts: []string{"a", "b"}, Config: &embedding.Config{Model: "embed-small"}})
			callbacks.OnEnd(ctx, &embedding.CallbackOutput{Embeddings: [][]float64{{0.1, 0.2, 0.3}, {0.4, 0.5, 0.6}},
				TokenUsage: &embedding.TokenUsage{PromptTokens: 8, TotalTokens: 8}})
		},
		check: func(t *testing.T, recs []trace.Record) {
			c := oneOf(t, recs, trace.TypeModelCall, "embed-small")
			if string(c.Output) != `{"dimensions":3,"vectors":2}` || string(c.Input) != `{"texts":["a","b"]}` ||
				c.Usage.InputTokens != 8 || c.Usage.Provider != "local" {
				t.Errorf("model.call input %s output %s usage %+v", c.Input, c.Output, c.Usage)
			}
			oneOf(t, recs, trace.TypeRunStart, "LocalEmbedding")
		},
	}, {
		name: "a component Loupe does not know",
		info: &callbacks.RunInfo{Type: "Cohere", Component: "Reranker"},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart(ctx, map[string]any{"query": "q", "n": 2})
			callbacks.OnEnd(ctx, []string{"b", "a"})
		},
		check: func(t *testing.T, recs []trace.Record) {
			if got := oneOf(t, recs, trace.TypeNodeStart, "CohereReranker"); string(got.Input) != `{"n":2,"query":"q"}` {
				t.Errorf("node.start input %s", got.Input)
			}
			if got := oneOf(t, recs, trace.TypeNodeEnd, "CohereReranker"); string(got.Output) != `["b","a"]` {
				t.Errorf("node.end output %s", got.Output)
			}
		},
	}, {
		name: "a model with nil input and output",
		info: &callbacks.RunInfo{Component: components.ComponentOfChatModel},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart[*model.CallbackInput](ctx, nil)
			callbacks.OnEnd[*model.CallbackOutput](ctx, nil)
		},
		check: func(t *testing.T, recs []trace.Record) {
			c := oneOf(t, recs, trace.TypeModelCall, "ChatModel")
			if c.Output != nil || c.Input != nil || c.Usage != (trace.Usage{}) {
				t.Errorf("model.call %+v", c)
			}
		},
	}, {
		name: "a model with a payload of another type",
		info: &callbacks.RunInfo{Type: "Odd", Component: components.ComponentOfChatModel},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart(ctx, 42)
			callbacks.OnEnd(ctx, make(chan int))
		},
		check: func(t *testing.T, recs []trace.Record) {
			oneOf(t, recs, trace.TypeModelCall, "Odd")
		},
	}, {
		name: "a node whose output cannot be encoded",
		info: &callbacks.RunInfo{Name: "odd", Component: "Lambda"},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart(ctx, panicky{})
			callbacks.OnEnd(ctx, func() {})
		},
		check: func(t *testing.T, recs []trace.Record) {
			if got := oneOf(t, recs, trace.TypeNodeStart, "odd"); !strings.Contains(string(got.Input), "unencodable") {
				t.Errorf("node.start input %s", got.Input)
			}
			if got := oneOf(t, recs, trace.TypeNodeEnd, "odd"); !strings.Contains(string(got.Output), "unencodable") {
				t.Errorf("node.end output %s", got.Output)
			}
		},
	}, {
		name: "a tool that fails",
		info: &callbacks.RunInfo{Name: "search", Component: components.ComponentOfTool},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart(ctx, &tool.CallbackInput{ArgumentsInJSON: `{"q":`})
			callbacks.OnError(ctx, errors.New("bad arguments"))
		},
		check: func(t *testing.T, recs []trace.Record) {
			if got := oneOf(t, recs, trace.TypeToolStart, "search"); trace.Value(got.Input).Text() != `{"q":` {
				t.Errorf("tool.start input %s", got.Input)
			}
			if got := oneOf(t, recs, trace.TypeToolError, "search"); got.Error != "bad arguments" {
				t.Errorf("tool.error %q", got.Error)
			}
			if end := oneOf(t, recs, trace.TypeRunEnd, "search"); end.Status != string(trace.TerminationError) {
				t.Errorf("run.end %q", end.Status)
			}
		},
	}, {
		name: "a tool whose result streams",
		info: &callbacks.RunInfo{Name: "read", Component: components.ComponentOfTool},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart(ctx, `{"path":"a.txt"}`)
			_, sr := callbacks.OnEndWithStreamOutput(ctx, schema.StreamReaderFromArray([]string{`{"text":`, `"hi"}`}))
			drain(sr)
		},
		check: func(t *testing.T, recs []trace.Record) {
			if got := oneOf(t, recs, trace.TypeToolEnd, "read"); string(got.Output) != `{"text":"hi"}` {
				t.Errorf("tool.end output %s", got.Output)
			}
		},
	}, {
		name: "a model stream that fails",
		info: &callbacks.RunInfo{Type: "Flaky", Component: components.ComponentOfChatModel},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart(ctx, []*schema.Message{schema.UserMessage("hi")})
			sr, sw := schema.Pipe[*schema.Message](3)
			sw.Send(&schema.Message{Role: schema.Assistant, Content: "Hel"}, nil)
			sw.Send(&schema.Message{Role: schema.Assistant, Content: "lo"}, nil)
			sw.Send(nil, errors.New("connection reset"))
			sw.Close()
			_, out := callbacks.OnEndWithStreamOutput(ctx, sr)
			drain(out)
		},
		check: func(t *testing.T, recs []trace.Record) {
			c := oneOf(t, recs, trace.TypeModelCall, "Flaky")
			if c.Error != "connection reset" || trace.Value(c.Output).Text() != "Hello" {
				t.Errorf("model.call error %q output %s", c.Error, c.Output)
			}
			if got := named(recs, trace.TypeModelDelta, "Flaky"); len(got) != 2 || got[0].ParentID != c.SpanID {
				t.Errorf("model.delta records:\n%s", dump(got))
			}
			if string(c.Input) != `{"messages":1,"new":[{"role":"user","content":"hi"}]}` {
				t.Errorf("model.call input %s", c.Input)
			}
		},
	}, {
		name: "a model stream of nil chunks",
		info: &callbacks.RunInfo{Type: "Nil", Component: components.ComponentOfChatModel},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart(ctx, []*schema.Message{nil})
			_, out := callbacks.OnEndWithStreamOutput(ctx, schema.StreamReaderFromArray([]*schema.Message{nil, nil}))
			drain(out)
		},
		check: func(t *testing.T, recs []trace.Record) {
			oneOf(t, recs, trace.TypeModelCall, "Nil")
		},
	}, {
		name: "an error without an error",
		info: &callbacks.RunInfo{Name: "g", Component: "Graph"},
		call: func(ctx context.Context) {
			ctx = callbacks.OnStart(ctx, "in")
			callbacks.OnError(ctx, nil)
		},
		check: func(t *testing.T, recs []trace.Record) {
			if end := oneOf(t, recs, trace.TypeRunEnd, "g"); end.Status != string(trace.TerminationError) || end.Error == "" {
				t.Errorf("run.end %q %q", end.Status, end.Error)
			}
		},
	}, {
		name: "an end without a start, and a second end",
		info: &callbacks.RunInfo{Name: "n", Component: "Lambda"},
		call: func(ctx context.Context) {
			callbacks.OnEnd(ctx, "ignored")
			ctx = callbacks.OnStart(ctx, "in")
			callbacks.OnEnd(ctx, "out")
			callbacks.OnError(ctx, errors.New("ignored"))
		},
		check: func(t *testing.T, recs []trace.Record) {
			if got := oneOf(t, recs, trace.TypeNodeEnd, "n"); got.Output.Text() != "out" || got.Error != "" {
				t.Errorf("node.end %s %q", got.Output, got.Error)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h, col := newHandler(t)
			tc.call(callbacks.InitCallbacks(context.Background(), tc.info, h))
			wait(t, h)
			recs := col.one(t)
			if ofType(recs, trace.TypeRunEnd) == nil {
				t.Errorf("the run did not end:\n%s", dump(recs))
			}
			tc.check(t, recs)
		})
	}
}

// panicky panics when encoded.
type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("no") }

func drain[T any](sr *schema.StreamReader[T]) {
	defer sr.Close()
	for {
		if _, err := sr.Recv(); err != nil {
			return
		}
	}
}

// TestOddRegistrations: a Handler registered twice records each call
// once; a nil RunInfo, a skipped component and a Handler without a
// tracer or a Loupe run record nothing.
func TestOddRegistrations(t *testing.T) {
	h, col := newHandler(t)
	ctx := callbacks.InitCallbacks(context.Background(), &callbacks.RunInfo{Name: "twice", Component: "Lambda"}, h, h)
	callbacks.OnEnd(callbacks.OnStart(ctx, 1), 2)
	wait(t, h)
	recs := col.one(t)
	if len(ofType(recs, trace.TypeNodeStart)) != 1 || len(ofType(recs, trace.TypeNodeEnd)) != 1 {
		t.Errorf("registered twice:\n%s", dump(recs))
	}

	for _, info := range []*callbacks.RunInfo{nil, {Name: "tools", Component: "ToolsNode"}} {
		h, col := newHandler(t)
		ctx := callbacks.InitCallbacks(context.Background(), info, h)
		ctx, in := callbacks.OnStartWithStreamInput(ctx, schema.StreamReaderFromArray([]int{1}))
		drain(in)
		_, out := callbacks.OnEndWithStreamOutput(ctx, schema.StreamReaderFromArray([]int{2}))
		drain(out)
		wait(t, h)
		if n := len(col.traces()); n != 0 {
			t.Errorf("%v: %d traces recorded", info, n)
		}
	}

	off, err := einotrace.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx = callbacks.InitCallbacks(context.Background(), &callbacks.RunInfo{Component: "Lambda"}, off)
	if off.Needed(ctx, nil, callbacks.TimingOnEndWithStreamOutput) {
		t.Error("a Handler with nothing to record into says it is needed")
	}
	callbacks.OnEnd(callbacks.OnStart(ctx, 1), 2)
}

// TestPrices: model calls are priced with the Handler's table; a model it
// does not know has an unknown cost, never $0.
func TestPrices(t *testing.T) {
	table, err := price.Parse([]byte(`{"models":[{"model":"scripted-1","input":1,"output":2}]}`), "test prices")
	if err != nil {
		t.Fatal(err)
	}
	h, col := newHandler(t, einotrace.WithPrices(table), einotrace.WithTags("env:test"))
	for _, name := range []string{"scripted-1", "unpriced"} {
		ctx := callbacks.InitCallbacks(context.Background(), &callbacks.RunInfo{Component: components.ComponentOfChatModel}, h)
		ctx = callbacks.OnStart(ctx, &model.CallbackInput{Config: &model.Config{Model: name}})
		callbacks.OnEnd(ctx, &model.CallbackOutput{Message: schema.AssistantMessage("ok", nil),
			TokenUsage: &model.TokenUsage{PromptTokens: 100, CompletionTokens: 50}})
	}
	wait(t, h)
	ts := col.traces()
	if len(ts) != 2 {
		t.Fatalf("%d traces", len(ts))
	}
	for _, recs := range ts {
		c := ofType(recs, trace.TypeModelCall)[0]
		switch c.Name {
		case "scripted-1":
			if want := (100*1 + 50*2) / 1e6; c.Usage.CostUnknown || c.Usage.CostUSD != want {
				t.Errorf("cost %v (unknown %v), want %v", c.Usage.CostUSD, c.Usage.CostUnknown, want)
			}
		case "unpriced":
			if !c.Usage.CostUnknown || c.Usage.CostUSD != 0 {
				t.Errorf("unpriced cost %+v", c.Usage)
			}
		}
		if start := ofType(recs, trace.TypeRunStart)[0]; fmt.Sprint(start.Tags()) != "[env:test]" {
			t.Errorf("tags %v", start.Tags())
		}
	}
}

// TestConcurrentRuns runs agents at once through one Handler, each with
// tools running in parallel: every run is a trace of its own, complete.
func TestConcurrentRuns(t *testing.T) {
	h, col := newHandler(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := newAgent(t, newModel(i%2 == 0, "scripted-1", weatherScript()), react.AgentConfig{})
			if _, err := run(t, a, h, i%4 < 2, "What's the weather in Paris?"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	wait(t, h)
	ts := col.traces()
	if len(ts) != n {
		t.Fatalf("%d traces, want %d", len(ts), n)
	}
	for _, recs := range ts {
		st := trace.StatsOf(recs)
		end := ofType(recs, trace.TypeRunEnd)
		if st.ModelCalls != 2 || st.ToolCalls != 2 || st.InputTokens != 320 || len(end) != 1 || end[0].Seq != recs[len(recs)-1].Seq {
			t.Errorf("a run's trace:\n%s", dump(recs))
		}
	}
}
