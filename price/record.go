package price

import (
	"fmt"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// PriceRecord gives a model.call record that carries tokens but no cost
// the cost t says it had: the price of the record's model in effect at the
// record's time. When t does not know the model, the cost is marked
// unknown (trace.Usage.CostUnknown), never left as $0.
//
// Records of other types, without tokens, with a cost, or already marked
// unknown are left alone: a cost the recorder computed wins. A cost of 0
// cannot be told from no cost in a record, so a call the recorder priced
// at $0 is priced again here (list free models in the price file both
// sides use). It reports whether it changed r. This is how both the
// collector (`loupe serve`) and `loupe traces import` price what arrives.
func (t *Table) PriceRecord(r *trace.Record) bool {
	u := &r.Usage
	if r.Type != trace.TypeModelCall || u.CostUSD != 0 || u.CostUnknown || u.InputTokens+u.OutputTokens == 0 {
		return false
	}
	tok := Tokens{Input: u.InputTokens, Output: u.OutputTokens, CachedRead: u.CachedTokens, Reasoning: u.ReasoningTokens}
	when := r.Time
	if when.IsZero() {
		when = time.Now()
	}
	if p, ok := t.LookupAt(r.Name, when); ok {
		u.CostUSD = p.Cost(tok)
		return true
	}
	u.CostUnknown = true
	return true
}

// Format writes a cost for people: "$0.0123" when every call was priced,
// "$0.0123 + ?" when unpriced calls (whose cost is unknown) add an unknown
// amount, and "unknown" when no call was priced. usd is the sum of the
// known costs, unpriced the number of calls whose cost is unknown
// (trace.Stats.UnpricedCalls).
func Format(usd float64, unpriced int) string {
	switch {
	case unpriced > 0 && usd == 0:
		return "unknown"
	case unpriced > 0:
		return fmt.Sprintf("$%.4f + ?", usd)
	}
	return fmt.Sprintf("$%.4f", usd)
}
