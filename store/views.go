package store

import (
	"cmp"
	"slices"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// Span is one node of a trace's span tree: the records sharing a span id
// (a run, an iteration, a tool call, a hook, a model call, a point event)
// and the spans nested in it.
type Span struct {
	ID       trace.SpanID  `json:"span_id"`
	Parent   trace.SpanID  `json:"parent_id,omitzero"`
	Type     trace.Type    `json:"type"`               // the type of the span's first record
	Name     string        `json:"name,omitempty"`     // the first non-empty name of its records
	Start    time.Time     `json:"start"`              // the earliest start of its records
	Duration time.Duration `json:"duration_ns"`        // the longest duration of its records
	Status   string        `json:"status,omitempty"`   // the last non-empty status
	Error    string        `json:"error,omitempty"`    // the last non-empty error
	Seqs     []uint64      `json:"seqs"`               // its records' seqs, ascending
	Children []*Span       `json:"children,omitempty"` // nested spans, in order of their first record
}

// BuildSpans groups recs by span id into a tree and returns its roots:
// spans with no parent, or whose parent is not among recs (an orphan is
// kept as a root rather than lost), or whose parent links make a cycle.
// recs need not be sorted. The tree is trace.Tree's, the one tree builder;
// a Span is its JSON view, with the records of a span id that Tree keeps
// as separate nodes (malformed input) merged into one.
func BuildSpans(recs []trace.Record) []*Span {
	byID := make(map[trace.SpanID]*Span)
	var roots []*Span
	var walk func(ns []*trace.Node, into *[]*Span)
	walk = func(ns []*trace.Node, into *[]*Span) {
		for _, n := range ns {
			s := byID[n.Start.SpanID]
			if s == nil {
				s = &Span{ID: n.Start.SpanID, Parent: n.Start.ParentID, Type: n.Start.Type, Start: n.Start.Start()}
				byID[s.ID] = s
				*into = append(*into, s)
			}
			s.add(n.Start)
			if n.End != nil {
				s.add(n.End)
			}
			walk(n.Children, &s.Children)
		}
	}
	walk(trace.Tree(recs), &roots)
	for _, s := range byID {
		slices.Sort(s.Seqs)
	}
	return roots
}

// add folds r, one of the span's records, into s.
func (s *Span) add(r *trace.Record) {
	if s.Parent.IsZero() {
		s.Parent = r.ParentID
	}
	if s.Name == "" {
		s.Name = r.Name
	}
	if st := r.Start(); st.Before(s.Start) {
		s.Start = st
	}
	s.Duration = max(s.Duration, r.Duration)
	if r.Status != "" {
		s.Status = r.Status
	}
	if r.Error != "" {
		s.Error = r.Error
	}
	s.Seqs = append(s.Seqs, r.Seq)
}

// Memory is a run's memory pool rebuilt from its memory.set records, after
// the omni/UltraRAG memory pool: parameters and globals keep their last
// value, memory keys keep every write with the step that made it.
type Memory struct {
	Params  map[string]trace.Value   `json:"params,omitempty"`
	Globals map[string]trace.Value   `json:"globals,omitempty"`
	History map[string][]MemoryWrite `json:"history,omitempty"`
}

// MemoryWrite is one write of a memory-scope key.
type MemoryWrite struct {
	Step  int         `json:"step"` // the iteration that wrote it (the record's Iteration)
	Seq   uint64      `json:"seq"`
	Time  time.Time   `json:"time"`
	Value trace.Value `json:"value"`
}

// MemoryOf rebuilds the memory pool from the memory.set records in recs,
// in seq order. A record with an unknown scope counts as a global.
func MemoryOf(recs []trace.Record) Memory {
	var m Memory
	idx := make([]int, 0, 8)
	for i := range recs {
		if recs[i].Type == trace.TypeMemorySet {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(recs[a].Seq, recs[b].Seq) })
	for _, i := range idx {
		r := &recs[i]
		switch trace.Scope(r.Status) {
		case trace.ScopeParam:
			if m.Params == nil {
				m.Params = make(map[string]trace.Value)
			}
			m.Params[r.Name] = r.Output
		case trace.ScopeMemory:
			if m.History == nil {
				m.History = make(map[string][]MemoryWrite)
			}
			m.History[r.Name] = append(m.History[r.Name], MemoryWrite{Step: r.Iteration, Seq: r.Seq, Time: r.Time, Value: r.Output})
		default:
			if m.Globals == nil {
				m.Globals = make(map[string]trace.Value)
			}
			m.Globals[r.Name] = r.Output
		}
	}
	return m
}

// NewTrace assembles a Trace from a summary and the trace's records in seq
// order; backends use it so that every backend derives the same views.
func NewTrace(sum Summary, recs []trace.Record) *Trace {
	return &Trace{Summary: sum, Records: recs, Spans: BuildSpans(recs), Stats: trace.StatsOf(recs), Memory: MemoryOf(recs)}
}
