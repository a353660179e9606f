package scripted_test

import (
	"context"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/trace"
)

// TestCostWithoutPrice: a script without a price gives calls that used
// tokens an unknown cost (not $0); an explicit cost_usd, a price, or a call
// without tokens gives a known one.
func TestCostWithoutPrice(t *testing.T) {
	tests := []struct {
		name, script string
		want         trace.Usage
	}{
		{"no price", "model: m\nturns:\n  - answer: hi\n    usage: {input_tokens: 10, output_tokens: 2}\n",
			trace.Usage{Provider: "scripted", InputTokens: 10, OutputTokens: 2, CostUnknown: true}},
		{"no price, no tokens", "model: m\nturns:\n  - answer: hi\n",
			trace.Usage{Provider: "scripted"}},
		{"explicit cost", "model: m\nturns:\n  - answer: hi\n    usage: {input_tokens: 10}\n    cost_usd: 0.25\n",
			trace.Usage{Provider: "scripted", InputTokens: 10, CostUSD: 0.25}},
		{"explicit zero cost", "model: m\nturns:\n  - answer: hi\n    usage: {input_tokens: 10}\n    cost_usd: 0\n",
			trace.Usage{Provider: "scripted", InputTokens: 10}},
		{"priced at zero", "model: m\nprice: {input_per_mtok: 0, output_per_mtok: 0}\nturns:\n  - answer: hi\n    usage: {input_tokens: 10}\n",
			trace.Usage{Provider: "scripted", InputTokens: 10}},
		{"priced", "model: m\nprice: {input_per_mtok: 1000000, output_per_mtok: 0}\nturns:\n  - answer: hi\n    usage: {input_tokens: 2}\n",
			trace.Usage{Provider: "scripted", InputTokens: 2, CostUSD: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scripted.Parse([]byte(tt.script), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.NewModel().Generate(context.Background(), agent.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Usage != tt.want {
				t.Errorf("usage %+v, want %+v", r.Usage, tt.want)
			}
		})
	}
}
