package trace

import (
	"cmp"
	"slices"
	"time"
)

// A Node is one span of a trace, built from its records: a run, an
// iteration, a model or tool call, a hook, a child run, a pipeline node, or
// a point event (memory.set, message, guardrail, …) that is a span of its
// own with no duration.
type Node struct {
	Start    *Record // the first record of the span (run.start, tool.start, …, or the only one)
	End      *Record // the record that closed it; nil while open, and for point events
	Children []*Node // in order of their first record
}

// Record returns the record that best describes the node: the end record
// if there is one (it carries the outcome), otherwise the start.
func (n *Node) Record() *Record {
	if n.End != nil {
		return n.End
	}
	return n.Start
}

// Duration returns how long the span took: the end record's duration, or
// the start record's for spans recorded in one record (model.call,
// tool.end without a tool.start).
func (n *Node) Duration() time.Duration { return n.Record().Duration }

// Tree builds the span tree of one trace's records. Records may come in any
// order; they are sorted by Seq first. Spans whose parent is not among the
// records become roots, so a partial trace still renders, and so do spans
// whose parent links make a cycle (malformed input), so that no record is
// lost. The records are not copied: the nodes point into recs. It is the
// one tree builder: store.BuildSpans is a view of its result.
func Tree(recs []Record) []*Node {
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(recs[a].Seq, recs[b].Seq) })

	nodes := make(map[SpanID]*Node, len(recs))
	var order []*Node
	for _, i := range idx {
		r := &recs[i]
		if n, ok := nodes[r.SpanID]; ok && closes(n.Start.Type, r.Type) && n.End == nil {
			n.End = r
			continue
		}
		n := &Node{Start: r}
		if _, dup := nodes[r.SpanID]; !dup {
			nodes[r.SpanID] = n
		}
		order = append(order, n)
	}
	var roots []*Node
	for _, n := range order {
		p, ok := nodes[n.Start.ParentID]
		if !ok || p == n || n.Start.ParentID.IsZero() || inCycle(n, p, nodes) {
			roots = append(roots, n)
			continue
		}
		p.Children = append(p.Children, n)
	}
	return roots
}

// inCycle reports whether following parent links up from p reaches n, so
// that hanging n under p would make a cycle. A loop above p that does not
// pass through n is not n's: its members become roots themselves, and n
// stays reachable under p.
func inCycle(n, p *Node, nodes map[SpanID]*Node) bool {
	for steps := 0; p != nil && steps <= len(nodes); steps++ {
		if p == n {
			return true
		}
		if p.Start.ParentID.IsZero() {
			return false
		}
		p = nodes[p.Start.ParentID]
	}
	return false
}

// closes reports whether a record of type end closes a span opened by start.
func closes(start, end Type) bool {
	switch start {
	case TypeRunStart:
		return end == TypeRunEnd
	case TypeIterationStart:
		return end == TypeIterationEnd
	case TypeToolStart:
		return end == TypeToolEnd || end == TypeToolError
	case TypeHookStart:
		return end == TypeHookEnd || end == TypeHookError
	case TypeChildSpawn:
		return end == TypeChildEnd
	case TypeNodeStart:
		return end == TypeNodeEnd
	}
	return false
}
