package lctrace_test

import (
	"context"
	"errors"
	"math"
	"testing"

	lctrace "github.com/loupe-dev/loupe/adapters/langchaingo"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// unmarshalable makes encoding/json panic inside its MarshalJSON.
type unmarshalable struct{}

func (unmarshalable) MarshalJSON() ([]byte, error) { panic("no encoding for you") }

// FuzzCallbacks drives a Handler with callbacks in any order, with odd
// values, over two contexts and a Loupe run's context: nothing may panic,
// and every record made must be one a store accepts.
func FuzzCallbacks(f *testing.F) {
	f.Add([]byte{5, 0, 14, 9, 10, 11, 1, 3, 2, 6}, "x")
	f.Add([]byte{0, 0, 0, 7, 8, 9, 12, 13, 6, 6, 6}, `{"__arg1":"1"}`)
	f.Add([]byte{2, 3, 4, 10, 11, 15, 16, 17, 18, 19}, "\xff\x00")
	f.Fuzz(func(t *testing.T, ops []byte, s string) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		tr, c := newTracer()
		h := lctrace.New(tr, lctrace.Options{})
		ctx1, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctx2, run := tr.Start(context.Background(), "outer", trace.RunOptions{})
		ctxs := []context.Context{ctx1, ctx2, context.Background(), nil} //nolint:staticcheck // a nil context is odd input
		odd := map[string]any{"input": s, "agent_scratchpad": s, "bad": unmarshalable{}, "nan": math.NaN()}
		for i, op := range ops {
			ctx := ctxs[i%len(ctxs)]
			switch op % 20 {
			case 0:
				h.HandleChainStart(ctx, map[string]any{"input": s})
			case 1:
				h.HandleChainStart(ctx, map[string]any{"agent_scratchpad": s})
			case 2:
				h.HandleChainStart(ctx, odd)
			case 3:
				h.HandleChainEnd(ctx, map[string]any{"output": s})
			case 4:
				h.HandleChainEnd(ctx, odd)
			case 5:
				h.HandleChainError(ctx, errors.New(s))
			case 6:
				h.HandleChainError(ctx, nil)
			case 7:
				h.HandleLLMGenerateContentStart(ctx, []llms.MessageContent{
					{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: s, Content: s}}},
					{Role: "odd", Parts: []llms.ContentPart{nil, llms.BinaryContent{Data: []byte(s)}, llms.ToolCall{}}},
				})
			case 8:
				h.HandleLLMStart(ctx, []string{s})
			case 9:
				h.HandleLLMGenerateContentEnd(ctx, &llms.ContentResponse{Choices: []*llms.ContentChoice{nil, {
					Content: s, ToolCalls: []llms.ToolCall{{ID: s}, {FunctionCall: &llms.FunctionCall{Name: s, Arguments: s}}},
					GenerationInfo: map[string]any{"PromptTokens": -5, "CompletionTokens": math.Inf(1), "InputTokens": uint64(math.MaxUint64),
						"CacheReadInputTokens": int64(math.MaxInt64), "ReasoningTokens": 1 << 41, "model": s},
				}}})
			case 10:
				h.HandleLLMGenerateContentEnd(ctx, nil)
			case 11:
				h.HandleLLMError(ctx, nil)
			case 12:
				h.HandleAgentAction(ctx, schema.AgentAction{Tool: s, ToolInput: s, Log: s, ToolID: s})
			case 13:
				h.HandleToolStart(ctx, s)
			case 14:
				h.HandleToolEnd(ctx, s)
			case 15:
				h.HandleToolError(ctx, nil)
			case 16:
				h.HandleAgentFinish(ctx, schema.AgentFinish{ReturnValues: odd})
			case 17:
				h.HandleRetrieverStart(ctx, s)
			case 18:
				h.HandleRetrieverEnd(ctx, s, []schema.Document{{PageContent: s, Score: float32(math.NaN()), Metadata: map[string]any{"x": math.Inf(-1)}}})
			case 19:
				h.HandleStreamingFunc(ctx, []byte(s))
				h.HandleText(ctx, s)
			}
		}
		run.End(nil, nil)
		for _, recs := range c.all() {
			for i := range recs {
				if err := store.ValidateRecord(i, &recs[i]); err != nil {
					t.Errorf("invalid record: %v", err)
				}
				for _, v := range []trace.Value{recs[i].Input, recs[i].Output, recs[i].Thinking} {
					if len(v) > 0 && !trace.ValidJSON(v) {
						t.Errorf("%s record holds invalid JSON %q", recs[i].Type, v)
					}
				}
			}
		}
	})
}

// uncomparable is a context that cannot be a map key.
type uncomparable struct {
	context.Context
	tags []string
}

// TestUncomparableContext runs a chain with a context that cannot be a
// map key: its runs are recorded all the same.
func TestUncomparableContext(t *testing.T) {
	tr, c := newTracer()
	h := lctrace.New(tr, lctrace.Options{})
	ctx := uncomparable{Context: context.Background(), tags: []string{"x"}}
	for range 2 {
		h.HandleChainStart(ctx, map[string]any{"input": "hi"})
		h.HandleLLMStart(ctx, []string{"hi"})
		h.HandleLLMGenerateContentEnd(ctx, &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "hello"}}})
		h.HandleChainEnd(ctx, map[string]any{"text": "hello"})
	}
	all := c.all()
	if len(all) != 2 {
		t.Fatalf("%d traces, want 2", len(all))
	}
	for _, recs := range all {
		check(t, recs)
		if end := recs[len(recs)-1]; end.Type != trace.TypeRunEnd || end.Output.Text() != "hello" {
			t.Errorf("run ended with %s %s", end.Type, end.Output)
		}
	}
}
