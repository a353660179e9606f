package lctrace_test

import (
	"context"
	"encoding/json"
	"testing"

	lctrace "github.com/loupe-dev/loupe/adapters/langchaingo"
	"github.com/loupe-dev/loupe/trace"
	"github.com/tmc/langchaingo/llms"
)

// TestUsage reads token usage as each langchaingo provider reports it in
// GenerationInfo (the keys and number types of their v0.1.14 sources),
// names the model and prices the call.
func TestUsage(t *testing.T) {
	tests := []struct {
		name  string
		opts  lctrace.Options
		info  map[string]any
		model string
		want  trace.Usage // cost checked apart
		price bool        // a known cost, else unknown when tokens were used
	}{{
		name: "openai",
		opts: lctrace.Options{Model: "gpt-4o-mini", Provider: "openai"},
		info: map[string]any{"CompletionTokens": 30, "PromptTokens": 200, "TotalTokens": 230, "ReasoningTokens": 0,
			"ThinkingTokens": 0, "PromptCachedTokens": 128, "CompletionReasoningTokens": 0},
		model: "gpt-4o-mini",
		want:  trace.Usage{Provider: "openai", InputTokens: 200, OutputTokens: 30, CachedTokens: 128},
		price: true,
	}, {
		name:  "openai reasoning model",
		opts:  lctrace.Options{Model: "o3-mini"},
		info:  map[string]any{"CompletionTokens": 500, "PromptTokens": 40, "ReasoningTokens": 448, "ThinkingContent": ""},
		model: "o3-mini",
		want:  trace.Usage{InputTokens: 40, OutputTokens: 500, ReasoningTokens: 448},
		price: true,
	}, {
		name:  "anthropic: cache reads and writes are input",
		opts:  lctrace.Options{Provider: "anthropic"},
		info:  map[string]any{"InputTokens": 20, "OutputTokens": 7, "CacheCreationInputTokens": 1000, "CacheReadInputTokens": 3000},
		model: "llm",
		want:  trace.Usage{Provider: "anthropic", InputTokens: 4020, OutputTokens: 7, CachedTokens: 3000},
	}, {
		name: "google ai: prompt tokens include the cached ones",
		info: map[string]any{"input_tokens": int32(900), "output_tokens": int32(12), "total_tokens": int32(912),
			"PromptTokens": int32(900), "CompletionTokens": int32(12), "CachedTokens": int32(600), "CacheReadInputTokens": int32(600),
			"NonCachedInputTokens": int32(300), "ThinkingTokens": 0},
		model: "llm",
		want:  trace.Usage{InputTokens: 900, OutputTokens: 12, CachedTokens: 600},
	}, {
		name:  "bedrock",
		info:  map[string]any{"input_tokens": 55, "output_tokens": 8},
		model: "llm",
		want:  trace.Usage{InputTokens: 55, OutputTokens: 8},
	}, {
		name:  "anthropic raw api spelling",
		info:  map[string]any{"input_tokens": int64(5), "output_tokens": int64(3), "cache_read_input_tokens": int64(10)},
		model: "llm",
		want:  trace.Usage{InputTokens: 15, OutputTokens: 3, CachedTokens: 10},
	}, {
		name:  "decoded JSON numbers, model named by the response",
		info:  map[string]any{"prompt_tokens": json.Number("12"), "completion_tokens": float64(4), "model": "mistral-large-latest"},
		model: "mistral-large-latest",
		want:  trace.Usage{InputTokens: 12, OutputTokens: 4},
	}, {
		name:  "nonsense counts are left out",
		info:  map[string]any{"PromptTokens": -3, "CompletionTokens": "many", "ReasoningTokens": 1e30},
		model: "llm",
		want:  trace.Usage{},
	}, {
		name:  "no usage",
		model: "llm",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, c := newTracer()
			h := lctrace.New(tr, tc.opts)
			ctx := context.Background()
			h.HandleLLMGenerateContentStart(ctx, []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "hi")})
			h.HandleLLMGenerateContentEnd(ctx, &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "hello", StopReason: "end_turn", GenerationInfo: tc.info}}})
			recs := one(t, c)
			m := ofType(recs, trace.TypeModelCall)
			if len(m) != 1 {
				t.Fatalf("%d model calls, want 1", len(m))
			}
			got := m[0].Usage
			if m[0].Name != tc.model || m[0].Status != "end_turn" {
				t.Errorf("model.call named %q with status %q, want %q and end_turn", m[0].Name, m[0].Status, tc.model)
			}
			if tc.price && (got.CostUSD <= 0 || got.CostUnknown) {
				t.Errorf("cost %v (unknown %v), want a price", got.CostUSD, got.CostUnknown)
			}
			tokens := got.InputTokens+got.OutputTokens > 0
			if !tc.price && (got.CostUSD != 0 || got.CostUnknown != tokens) {
				t.Errorf("cost %v unknown %v; want an unknown cost exactly when tokens were used", got.CostUSD, got.CostUnknown)
			}
			got.CostUSD, got.CostUnknown = 0, false
			if got != tc.want {
				t.Errorf("usage %+v, want %+v", got, tc.want)
			}
		})
	}
}
