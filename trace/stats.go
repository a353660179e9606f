package trace

import (
	"maps"
	"math"
	"time"
)

// ModelStats aggregates the model calls made with one model.
type ModelStats struct {
	Calls           int     `json:"calls"`
	Errors          int     `json:"errors,omitempty"`
	InputTokens     int64   `json:"input_tokens"`
	OutputTokens    int64   `json:"output_tokens"`
	CachedTokens    int64   `json:"cached_tokens,omitempty"`
	ReasoningTokens int64   `json:"reasoning_tokens,omitempty"`
	CostUSD         float64 `json:"cost_usd"`                 // summed over the priced calls
	UnpricedCalls   int     `json:"unpriced_calls,omitempty"` // calls whose cost is unknown (Usage.CostUnknown), not in CostUSD
}

// ToolStats aggregates the calls of one tool.
type ToolStats struct {
	Calls  int           `json:"calls"`
	Errors int           `json:"errors,omitempty"`
	Total  time.Duration `json:"total_ns"`
	Max    time.Duration `json:"max_ns"`
}

// Stats are a run's aggregates, kept up to date as records arrive. The
// stats of an ExecutionContext include those of its children. A Stats value
// returned by ExecutionContext.Stats is a copy the caller owns.
type Stats struct {
	Records         int                   `json:"records"`
	Iterations      int                   `json:"iterations"`
	ModelCalls      int                   `json:"model_calls"`
	InputTokens     int64                 `json:"input_tokens"`
	OutputTokens    int64                 `json:"output_tokens"`
	CachedTokens    int64                 `json:"cached_tokens,omitempty"`
	ReasoningTokens int64                 `json:"reasoning_tokens,omitempty"`
	CostUSD         float64               `json:"cost_usd"`                 // summed over the priced model calls
	UnpricedCalls   int                   `json:"unpriced_calls,omitempty"` // model calls whose cost is unknown, not in CostUSD
	ToolCalls       int                   `json:"tool_calls"`
	Errors          int                   `json:"errors"`
	Children        int                   `json:"children,omitempty"`
	Guardrails      int                   `json:"guardrails,omitempty"`
	ByModel         map[string]ModelStats `json:"by_model,omitempty"`
	ByTool          map[string]ToolStats  `json:"by_tool,omitempty"`
}

// TotalTokens returns input plus output tokens, at most math.MaxInt64.
func (s *Stats) TotalTokens() int64 { return addCount(max(s.InputTokens, 0), s.OutputTokens) }

// CostKnown reports whether CostUSD is the whole cost of the model calls:
// none of them is unpriced. When it is false, CostUSD is a lower bound.
func (s *Stats) CostKnown() bool { return s.UnpricedCalls == 0 }

// Add folds r into s. It is how every Stats is built, so a store or an
// importer that replays records gets the same aggregates as the recorder.
//
// Sums never wrap: token counts and durations below zero count as zero
// and their sums stop at math.MaxInt64; a cost that is negative or NaN
// counts as zero and cost sums stop at math.MaxFloat64. Stores refuse such
// numbers (store.ValidateRecord), but a recorder is handed whatever a
// provider reports, and stores may hold records from before they checked.
func (s *Stats) Add(r *Record) {
	s.Records++
	switch r.Type {
	case TypeIterationStart:
		s.Iterations++
	case TypeModelCall:
		s.ModelCalls++
		u := &r.Usage
		s.InputTokens = addCount(s.InputTokens, u.InputTokens)
		s.OutputTokens = addCount(s.OutputTokens, u.OutputTokens)
		s.CachedTokens = addCount(s.CachedTokens, u.CachedTokens)
		s.ReasoningTokens = addCount(s.ReasoningTokens, u.ReasoningTokens)
		s.CostUSD = addCost(s.CostUSD, u.CostUSD)
		if u.CostUnknown {
			s.UnpricedCalls++
		}
		if s.ByModel == nil {
			s.ByModel = make(map[string]ModelStats)
		}
		m := s.ByModel[r.Name]
		m.Calls++
		m.InputTokens = addCount(m.InputTokens, u.InputTokens)
		m.OutputTokens = addCount(m.OutputTokens, u.OutputTokens)
		m.CachedTokens = addCount(m.CachedTokens, u.CachedTokens)
		m.ReasoningTokens = addCount(m.ReasoningTokens, u.ReasoningTokens)
		m.CostUSD = addCost(m.CostUSD, u.CostUSD)
		if u.CostUnknown {
			m.UnpricedCalls++
		}
		if r.Error != "" {
			m.Errors++
			s.Errors++
		}
		s.ByModel[r.Name] = m
	case TypeToolEnd, TypeToolError:
		s.ToolCalls++
		if s.ByTool == nil {
			s.ByTool = make(map[string]ToolStats)
		}
		t := s.ByTool[r.Name]
		t.Calls++
		t.Total = time.Duration(addCount(int64(t.Total), int64(r.Duration)))
		t.Max = max(t.Max, r.Duration)
		if r.Failed() {
			t.Errors++
			s.Errors++
		}
		s.ByTool[r.Name] = t
	case TypeHookError, TypeError:
		s.Errors++
	case TypeNodeEnd:
		if r.Error != "" {
			s.Errors++
		}
	case TypeChildSpawn:
		s.Children++
	case TypeGuardrail:
		s.Guardrails++
	}
}

// addCount returns sum+n for a count or duration n, n < 0 counting as 0,
// stopping at math.MaxInt64 rather than wrapping.
func addCount(sum, n int64) int64 {
	switch {
	case n <= 0:
		return sum
	case sum > math.MaxInt64-n:
		return math.MaxInt64
	}
	return sum + n
}

// addCost returns sum+c for a cost c, a negative or NaN c counting as 0,
// stopping at math.MaxFloat64 rather than reaching +Inf (which JSON
// cannot hold).
func addCost(sum, c float64) float64 {
	if !(c > 0) {
		return sum
	}
	return min(sum+c, math.MaxFloat64)
}

// Clone returns a deep copy of s.
func (s Stats) Clone() Stats {
	s.ByModel = maps.Clone(s.ByModel)
	s.ByTool = maps.Clone(s.ByTool)
	return s
}

// StatsOf aggregates recs.
func StatsOf(recs []Record) Stats {
	var s Stats
	for i := range recs {
		s.Add(&recs[i])
	}
	return s
}
