package price

import (
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

func TestPriceRecord(t *testing.T) {
	tb, err := Parse([]byte(`{"models":[
		{"model":"m","input":1,"output":10,"valid_from":"2025-01-01"},
		{"model":"m","input":2,"output":20,"valid_from":"2026-01-01"}]}`), "test")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		in      trace.Record
		want    trace.Usage
		changed bool
	}{
		{"priced at the record's time", trace.Record{Type: trace.TypeModelCall, Name: "m", Time: at, Usage: trace.Usage{InputTokens: 1e6, OutputTokens: 1e5}},
			trace.Usage{InputTokens: 1e6, OutputTokens: 1e5, CostUSD: 2}, true},
		{"the later price after it took effect", trace.Record{Type: trace.TypeModelCall, Name: "m-2026-03-01", Time: at.AddDate(1, 0, 0), Usage: trace.Usage{InputTokens: 1e6}},
			trace.Usage{InputTokens: 1e6, CostUSD: 2}, true},
		{"unknown model", trace.Record{Type: trace.TypeModelCall, Name: "other", Time: at, Usage: trace.Usage{OutputTokens: 5}},
			trace.Usage{OutputTokens: 5, CostUnknown: true}, true},
		{"a cost is kept", trace.Record{Type: trace.TypeModelCall, Name: "m", Time: at, Usage: trace.Usage{InputTokens: 1e6, CostUSD: 0.5}},
			trace.Usage{InputTokens: 1e6, CostUSD: 0.5}, false},
		{"unknown is kept", trace.Record{Type: trace.TypeModelCall, Name: "m", Time: at, Usage: trace.Usage{InputTokens: 1e6, CostUnknown: true}},
			trace.Usage{InputTokens: 1e6, CostUnknown: true}, false},
		{"no tokens", trace.Record{Type: trace.TypeModelCall, Name: "other", Time: at},
			trace.Usage{}, false},
		{"not a model call", trace.Record{Type: trace.TypeCustom, Name: "m", Time: at, Usage: trace.Usage{InputTokens: 1e6}},
			trace.Usage{InputTokens: 1e6}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.in
			if changed := tb.PriceRecord(&r); changed != tt.changed || r.Usage != tt.want {
				t.Errorf("PriceRecord: %+v (changed %v), want %+v (changed %v)", r.Usage, changed, tt.want, tt.changed)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		usd      float64
		unpriced int
		want     string
	}{
		{0, 0, "$0.0000"},
		{0.01234, 0, "$0.0123"},
		{0.01234, 2, "$0.0123 + ?"},
		{0, 1, "unknown"},
	} {
		if got := Format(tt.usd, tt.unpriced); got != tt.want {
			t.Errorf("Format(%v, %d) = %q, want %q", tt.usd, tt.unpriced, got, tt.want)
		}
	}
}
