package otlp

import (
	"context"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/tracefix"
	"github.com/loupe-dev/loupe/trace"
)

// TestUnknownCostRoundTrip: a model call whose cost is unknown is exported
// with loupe.usage.cost_unknown and imported back as unknown, not as $0;
// priced and unpriced-but-untagged calls keep their meaning.
func TestUnknownCostRoundTrip(t *testing.T) {
	tr := trace.New(trace.Options{Now: tracefix.Clock(time.Millisecond)})
	_, ec := tr.Start(context.Background(), "agent", trace.RunOptions{})
	ec.ModelCall(trace.ModelCall{Model: "mystery-model", Usage: trace.Usage{Provider: "openai", InputTokens: 12, OutputTokens: 3, CostUnknown: true}, Duration: time.Millisecond})
	ec.ModelCall(trace.ModelCall{Model: "gpt-4o", Usage: trace.Usage{InputTokens: 12, OutputTokens: 3, CostUSD: 0.01}, Duration: time.Millisecond})
	ec.ModelCall(trace.ModelCall{Model: "local", Usage: trace.Usage{InputTokens: 12}, Duration: time.Millisecond})
	ec.End(nil, nil)
	td, _, _ := Spans(ec.Records(), SpanOptions{})
	res := Map(td, nil)
	got := map[string]trace.Usage{}
	for _, r := range res.Records {
		if r.Type == trace.TypeModelCall {
			got[r.Name] = r.Usage
		}
	}
	want := map[string]trace.Usage{
		"mystery-model": {Provider: "openai", InputTokens: 12, OutputTokens: 3, CostUnknown: true},
		"gpt-4o":        {InputTokens: 12, OutputTokens: 3, CostUSD: 0.01},
		"local":         {InputTokens: 12},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: usage %+v after the round trip, want %+v", name, got[name], w)
		}
	}
	// A span that carries a cost has a known cost, whatever else it says.
	td, _, _ = Spans(ec.Records(), SpanOptions{})
	a := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < a.Len(); i++ {
		a.At(i).Attributes().PutDouble("gen_ai.usage.cost", 0.5)
		a.At(i).Attributes().PutStr(AttrCostUnknown, "true")
	}
	for _, r := range Map(td, nil).Records {
		if r.Type == trace.TypeModelCall && (r.Usage.CostUnknown || r.Usage.CostUSD != 0.5) {
			t.Errorf("%s: %+v, want the span's cost 0.5, known", r.Name, r.Usage)
		}
	}
}
