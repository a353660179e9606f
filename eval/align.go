package eval

// align builds the side-by-side rows of expected and actual calls from a
// sequence result: matched pairs in expected order, unmatched expected items
// where they were due, and unmatched actual calls where they occurred.
func align(s *TrajectorySpec, calls []ToolCall, r *seqResult) []Row {
	used := make([]bool, len(calls))
	for _, j := range r.match {
		if j >= 0 && j < len(calls) {
			used[j] = true
		}
	}
	emitted := make([]bool, len(calls))
	var rows []Row
	extra := func(j int) {
		emitted[j] = true
		rows = append(rows, Row{Expected: -1, Actual: j, OK: s.Mode != Exact && s.Mode != Subset, Note: "extra call"})
	}
	next := 0
	for i, e := range s.Expected {
		j := r.match[i]
		if j < 0 && s.Mode == Exact && i < len(calls) {
			j = i // exact compares positions: show what stood there
		}
		if j >= 0 {
			for ; next < j; next++ {
				if !used[next] && !emitted[next] {
					extra(next)
				}
			}
			if next == j {
				next++
			}
			emitted[j] = true
			row := Row{Expected: i, Actual: j, OK: r.match[i] == j}
			if !row.OK {
				row.Note = "mismatch"
				if calls[j].Name == e.Tool {
					row.Note = "arguments differ"
					row.Diffs = argDiffs(e, s.ArgsMatch, calls[j])
				} else {
					row.Note = "expected " + e.Tool + ", got " + calls[j].Name
				}
			} else if e.MaxDuration != nil && calls[j].Duration != nil && *calls[j].Duration > *e.MaxDuration {
				row.OK, row.Note = false, "too slow: "+ms(*calls[j].Duration)+" > "+ms(*e.MaxDuration)
			}
			rows = append(rows, row)
			continue
		}
		row := Row{Expected: i, Actual: -1, Note: "not found"}
		if n := r.near[i]; n >= 0 && n < len(calls) {
			row.Note = "not found; nearest call is #" + itoa(n+1)
			row.Diffs = argDiffs(e, s.ArgsMatch, calls[n])
		}
		rows = append(rows, row)
	}
	for j := range calls {
		if !emitted[j] && !used[j] {
			extra(j)
		}
	}
	if s.Mode == Subset { // in subset mode an extra call is fine only if allowed
		for k := range rows {
			if rows[k].Expected < 0 {
				rows[k].OK = allowed(s, calls[rows[k].Actual])
				if rows[k].OK {
					rows[k].Note = "allowed"
				} else {
					rows[k].Note = "not allowed"
				}
			}
		}
	}
	return rows
}

func allowed(s *TrajectorySpec, c ToolCall) bool {
	for _, e := range s.Expected {
		if compatible(e, s.ArgsMatch, c) {
			return true
		}
	}
	return false
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// callMetrics computes precision, recall, F1 and order similarity of calls
// against the expected items, pairing them by a maximum matching.
func callMetrics(s *TrajectorySpec, calls []ToolCall) CallMetrics {
	n, m := len(s.Expected), len(calls)
	ok := func(i, j int) bool { return compatible(s.Expected[i], s.ArgsMatch, calls[j]) }
	matched := 0
	for _, j := range maxMatching(n, m, ok) {
		if j >= 0 {
			matched++
		}
	}
	cm := CallMetrics{Matched: matched, Expected: n, Actual: m, Precision: 1, Recall: 1, Order: 1}
	if m > 0 {
		cm.Precision = float64(matched) / float64(m)
	}
	if n > 0 {
		cm.Recall = float64(matched) / float64(n)
	}
	if cm.Precision+cm.Recall > 0 {
		cm.F1 = 2 * cm.Precision * cm.Recall / (cm.Precision + cm.Recall)
	}
	if n > 0 || m > 0 {
		cm.Order = float64(lcsTable(n, m, ok)[0][0]) / float64(max(n, m))
	}
	return cm
}
