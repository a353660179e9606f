package eval

import (
	"fmt"
	"time"
)

// Row is one line of an alignment between expected and actual calls.
type Row struct {
	// Expected is an index into the assertion's expected calls, or -1.
	Expected int
	// Actual is an index into the trajectory's calls, or -1.
	Actual int
	// OK is true when this row satisfies the expectation.
	OK bool
	// Note says what went wrong (empty when OK), e.g. "not found".
	Note string
	// Diffs are argument differences when the call had the right name.
	Diffs []ArgDiff
}

// seqResult is the outcome of comparing a trajectory with a TrajectorySpec.
type seqResult struct {
	hits, total int
	checks      []Check
	// match[i] is the actual index paired with expected i, or -1.
	match []int
	// near[i] is an actual index with the right name but wrong args, or -1.
	near []int
}

func newSeq(n int) *seqResult {
	r := &seqResult{match: make([]int, n), near: make([]int, n)}
	for i := range r.match {
		r.match[i], r.near[i] = -1, -1
	}
	return r
}

func (r *seqResult) check(ok bool, format string, args ...any) {
	r.checks = append(r.checks, Check{Text: fmt.Sprintf(format, args...), Passed: ok})
}

// latency applies an expected item's max_duration_ms to a matched call. A
// missing duration skips the check (it counts neither way), as in AgentV.
func (r *seqResult) latency(e ExpectedCall, c ToolCall) {
	if e.MaxDuration == nil {
		return
	}
	if c.Duration == nil {
		r.check(true, "%s: no duration recorded; max_duration_ms check skipped", e.Tool)
		r.checks[len(r.checks)-1].Skipped = true
		return
	}
	r.total++
	if *c.Duration <= *e.MaxDuration {
		r.hits++
		r.check(true, "%s completed in %s (max %s)", e.Tool, ms(*c.Duration), ms(*e.MaxDuration))
	} else {
		r.check(false, "%s took %s (max %s)", e.Tool, ms(*c.Duration), ms(*e.MaxDuration))
	}
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%gms", float64(d)/float64(time.Millisecond))
}

func compatible(e ExpectedCall, def ArgsMatch, c ToolCall) bool {
	return c.Name == e.Tool && argsOK(e, def, c)
}

// inOrderAgentV is AgentV 4.42.4's in_order: for each expected item scan
// forward from the last position; the first call with the right name is
// taken even when its arguments differ (the item then fails and the call is
// consumed), so a later call with matching arguments is never considered.
func inOrderAgentV(s *TrajectorySpec, calls []ToolCall) *seqResult {
	r := newSeq(len(s.Expected))
	r.total = len(s.Expected)
	j := 0
	for i, e := range s.Expected {
		found := false
		for ; j < len(calls); j++ {
			if calls[j].Name != e.Tool {
				continue
			}
			if argsOK(e, s.ArgsMatch, calls[j]) {
				r.match[i], found = j, true
				r.hits++
				r.check(true, "found %s at position %d", e.Tool, j)
				r.latency(e, calls[j])
			} else {
				r.near[i] = j
				r.check(false, "expected %s (item %d): call at position %d has the name but not the arguments", e.Tool, i, j)
			}
			j++
			break
		}
		if !found && r.near[i] < 0 {
			r.check(false, "expected %s (item %d): not found in the remaining calls", e.Tool, i)
		}
	}
	r.unmatchedLatency(s)
	return r
}

// unmatchedLatency reproduces AgentV's denominator: every expected item
// with max_duration_ms adds one to it, matched or not (skips excepted).
func (r *seqResult) unmatchedLatency(s *TrajectorySpec) {
	for i, e := range s.Expected {
		if e.MaxDuration != nil && r.match[i] < 0 {
			r.total++
		}
	}
}

// inOrderBest is Loupe's in_order: the longest order-preserving matching
// of expected items to calls (an LCS over the compatibility relation), so a
// call with wrong arguments never blocks a later call with right ones.
func inOrderBest(s *TrajectorySpec, calls []ToolCall) *seqResult {
	n, m := len(s.Expected), len(calls)
	r := newSeq(n)
	r.total = n
	dp := lcsTable(n, m, func(i, j int) bool { return compatible(s.Expected[i], s.ArgsMatch, calls[j]) })
	for i, j := 0, 0; i < n && j < m; {
		switch {
		case compatible(s.Expected[i], s.ArgsMatch, calls[j]) && dp[i][j] == dp[i+1][j+1]+1:
			r.match[i] = j
			i, j = i+1, j+1
		case dp[i+1][j] >= dp[i][j+1]:
			i++
		default:
			j++
		}
	}
	for i, e := range s.Expected {
		if j := r.match[i]; j >= 0 {
			r.hits++
			r.check(true, "found %s at position %d", e.Tool, j)
			r.latency(e, calls[j])
			continue
		}
		r.near[i] = nearest(e, calls, r.match)
		note := nearNote(r.near[i])
		if j := r.near[i]; j >= 0 && compatible(e, s.ArgsMatch, calls[j]) {
			// The call is right but placing it would break the order of
			// the calls already matched.
			note = fmt.Sprintf("; call at position %d matches but is out of order", j)
		}
		r.check(false, "expected %s (item %d): no call in order%s", e.Tool, i, note)
	}
	return r
}

func nearNote(j int) string {
	if j < 0 {
		return ""
	}
	return fmt.Sprintf("; call at position %d has the name but not the arguments", j)
}

// nearest finds an unmatched call named like e, to explain argument diffs.
func nearest(e ExpectedCall, calls []ToolCall, match []int) int {
	used := map[int]bool{}
	for _, j := range match {
		used[j] = true
	}
	for j, c := range calls {
		if c.Name == e.Tool && !used[j] {
			return j
		}
	}
	return -1
}

// lcsTable returns dp where dp[i][j] is the length of the longest common
// subsequence of items i.. and calls j.. under ok.
func lcsTable(n, m int, ok func(i, j int) bool) [][]int {
	dp := make([][]int, n+1)
	for i := range dp {
		dp[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if ok(i, j) {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp
}

// exactCompare compares position by position. AgentV 4.42.4 divides the
// hits by the number of expected items only, so extra trailing calls cost
// nothing (strict=false); Loupe divides by the longer list and requires
// equal lengths to pass (strict=true).
func exactCompare(s *TrajectorySpec, calls []ToolCall, strict bool) *seqResult {
	n, m := len(s.Expected), len(calls)
	r := newSeq(n)
	r.total = n
	if strict {
		r.total = max(n, m)
	}
	if n != m {
		r.check(false, "expected %d tool calls, got %d", n, m)
	}
	for i := 0; i < min(n, m); i++ {
		e, c := s.Expected[i], calls[i]
		switch {
		case c.Name != e.Tool:
			r.check(false, "position %d: expected %s, got %s", i, e.Tool, c.Name)
		case !argsOK(e, s.ArgsMatch, c):
			r.near[i] = i
			r.check(false, "position %d: %s called with other arguments", i, e.Tool)
		default:
			r.match[i] = i
			r.hits++
			r.check(true, "position %d: %s", i, e.Tool)
			r.latency(e, c)
		}
	}
	for i := m; i < n; i++ {
		r.check(false, "position %d: expected %s, got nothing", i, s.Expected[i].Tool)
	}
	if !strict {
		r.unmatchedLatency(s)
	}
	return r
}

// supersetFirstFit is AgentV's superset: each expected item takes the first
// unused compatible call, so an early permissive item (args: any) can steal
// the only call a later, stricter item could use.
func supersetFirstFit(s *TrajectorySpec, calls []ToolCall) *seqResult {
	r := newSeq(len(s.Expected))
	r.total = len(s.Expected)
	used := make([]bool, len(calls))
	for i, e := range s.Expected {
		for j, c := range calls {
			if !used[j] && compatible(e, s.ArgsMatch, c) {
				used[j], r.match[i] = true, j
				break
			}
		}
		r.supersetCheck(i, e, calls)
	}
	return r
}

// supersetBest is Loupe's superset (and any_order with expected): a maximum
// bipartite matching, so the result does not depend on item order.
func supersetBest(s *TrajectorySpec, calls []ToolCall) *seqResult {
	r := newSeq(len(s.Expected))
	r.total = len(s.Expected)
	copy(r.match, maxMatching(len(s.Expected), len(calls), func(i, j int) bool {
		return compatible(s.Expected[i], s.ArgsMatch, calls[j])
	}))
	for i, e := range s.Expected {
		r.supersetCheck(i, e, calls)
	}
	return r
}

func (r *seqResult) supersetCheck(i int, e ExpectedCall, calls []ToolCall) {
	if j := r.match[i]; j >= 0 {
		r.hits++
		r.check(true, "found %s at position %d", e.Tool, j)
		return
	}
	r.near[i] = nearest(e, calls, r.match)
	r.check(false, "expected %s (item %d): not found%s", e.Tool, i, nearNote(r.near[i]))
}

// subsetCheck is subset mode (same in both modes): every actual call must be
// allowed by some expected item; items may be reused. Score = allowed/calls.
func subsetCheck(s *TrajectorySpec, calls []ToolCall) *seqResult {
	r := newSeq(len(s.Expected))
	r.total = len(calls)
	for j, c := range calls {
		ok := false
		for i, e := range s.Expected {
			if compatible(e, s.ArgsMatch, c) {
				ok = true
				if r.match[i] < 0 {
					r.match[i] = j
				}
				break
			}
		}
		if ok {
			r.hits++
			r.check(true, "position %d: %s is allowed", j, c.Name)
		} else {
			r.check(false, "position %d: %s is not in the allowed set", j, c.Name)
		}
	}
	return r
}

// minimumsCheck is any_order with minimums (same in both modes): one check
// per tool, score = tools meeting their minimum / tools listed.
func minimumsCheck(s *TrajectorySpec, calls []ToolCall) *seqResult {
	r := newSeq(0)
	r.total = len(s.Minimums)
	counts := map[string]int{}
	for _, c := range calls {
		counts[c.Name]++
	}
	for _, m := range s.Minimums {
		n := counts[m.Tool]
		ok := float64(n) >= m.Count
		if ok {
			r.hits++
		}
		r.check(ok, "%s: called %d times (required >= %g)", m.Tool, n, m.Count)
	}
	return r
}

// maxMatching returns, for each left vertex, its right partner or -1 in a
// maximum bipartite matching (augmenting paths; sizes here are small).
func maxMatching(n, m int, edge func(i, j int) bool) []int {
	matchR := make([]int, m)
	for j := range matchR {
		matchR[j] = -1
	}
	var try func(i int, seen []bool) bool
	try = func(i int, seen []bool) bool {
		for j := 0; j < m; j++ {
			if seen[j] || !edge(i, j) {
				continue
			}
			seen[j] = true
			if matchR[j] < 0 || try(matchR[j], seen) {
				matchR[j] = i
				return true
			}
		}
		return false
	}
	for i := 0; i < n; i++ {
		try(i, make([]bool, m))
	}
	out := make([]int, n)
	for i := range out {
		out[i] = -1
	}
	for j, i := range matchR {
		if i >= 0 {
			out[i] = j
		}
	}
	return out
}
