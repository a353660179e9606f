package eval

import (
	"fmt"
	"strings"
)

// Explain renders the case result as stable, human-readable text: the
// verdict and score, the partial-credit measures, and for each assertion its
// checks; for trajectory assertions the expected and actual calls aligned
// side by side, with the argument differences of each failed row. The
// output depends only on the result (no maps iterated unsorted, no times).
func (r CaseResult) Explain() string {
	var b strings.Builder
	fmt.Fprintf(&b, "case %s: %s score %.3f (threshold %.2f, mode %s)\n", r.CaseID, strings.ToUpper(string(r.Verdict)), r.Score, r.Threshold, r.Mode)
	if r.RequiredFailed != "" {
		fmt.Fprintf(&b, "  required assertion %q is below its bar, so the case scores 0\n", r.RequiredFailed)
	}
	if m := r.Metrics; m != nil {
		fmt.Fprintf(&b, "  calls: %s\n", m)
	}
	for _, a := range r.Assertions {
		b.WriteString(a.explain())
	}
	return b.String()
}

// String summarizes the measures on one line.
func (m CallMetrics) String() string {
	return fmt.Sprintf("matched %d of %d expected, %d actual; precision %.2f recall %.2f F1 %.2f order %.2f",
		m.Matched, m.Expected, m.Actual, m.Precision, m.Recall, m.F1, m.Order)
}

// Explain renders one assertion's result as Explain renders it within
// its case: the verdict, score and weight, then its checks (for a
// trajectory, the expected and actual calls aligned, with the argument
// differences of each failed row), a skip's or an error's reason, and a
// judge's reasoning.
func (a AssertionResult) Explain() string { return a.explain() }

func (a AssertionResult) explain() string {
	var b strings.Builder
	mark := map[Verdict]string{Pass: "ok", Fail: "FAIL", Skip: "skip", CouldNotRun: "ERROR"}[a.Verdict]
	title := a.Name
	if a.Spec != nil {
		title += " (" + string(a.Spec.Mode) + ")"
	}
	if a.Negated {
		title += " [negated]"
	}
	fmt.Fprintf(&b, "  [%s] %s score %.3f weight %g", mark, title, a.Score, a.Weight)
	if a.Pos.Line > 0 { // assertions built in Go (tracetest) have no file position
		fmt.Fprintf(&b, " at line %d", a.Pos.Line)
	}
	b.WriteString("\n")
	if a.Verdict == Skip {
		fmt.Fprintf(&b, "      skipped: %s\n", a.Reason)
		return b.String()
	}
	if a.Verdict == CouldNotRun {
		fmt.Fprintf(&b, "      could not run: %s\n", strings.ReplaceAll(a.Reason, "\n", "\n      "))
		return b.String()
	}
	if a.Verdict == Pass {
		return b.String()
	}
	for _, c := range a.Checks {
		m := "✓"
		switch {
		case c.Skipped:
			m = "-"
		case !c.Passed:
			m = "✗"
		}
		fmt.Fprintf(&b, "      %s %s\n", m, c.Text)
		if c.Evidence != "" {
			fmt.Fprintf(&b, "          judge: %s\n", c.Evidence)
		}
	}
	if a.Reasoning != "" {
		fmt.Fprintf(&b, "      judge's reasoning: %s\n", a.Reasoning)
	}
	if len(a.Rows) > 0 {
		b.WriteString(a.table())
	}
	return b.String()
}

// table renders the alignment: # | expected | actual | status.
func (a AssertionResult) table() string {
	type line struct{ n, exp, act, status string }
	lines := []line{{"#", "expected", "actual", ""}}
	for _, r := range a.Rows {
		l := line{exp: "—", act: "—"}
		if r.Expected >= 0 {
			l.n = itoa(r.Expected + 1)
			l.exp = expectedText(a.Spec.Expected[r.Expected])
		}
		if r.Actual >= 0 {
			l.act = "#" + itoa(r.Actual+1) + " " + callText(a.Calls[r.Actual])
		}
		l.status = "ok"
		if !r.OK {
			l.status = "✗ " + r.Note
		} else if r.Note != "" {
			l.status = r.Note
		}
		lines = append(lines, l)
	}
	w1, w2 := 0, 0
	for _, l := range lines {
		w1 = max(w1, len([]rune(clip(l.exp))))
		w2 = max(w2, len([]rune(clip(l.act))))
	}
	var b strings.Builder
	for k, l := range lines {
		row := fmt.Sprintf("      %-3s %s  %s  %s", l.n, pad(clip(l.exp), w1), pad(clip(l.act), w2), l.status)
		b.WriteString(strings.TrimRight(row, " ") + "\n")
		if k == 0 {
			continue
		}
		for _, d := range a.Rows[k-1].Diffs {
			fmt.Fprintf(&b, "          · %s\n", d)
		}
	}
	return b.String()
}

func clip(s string) string {
	r := []rune(s)
	if len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return s
}

func pad(s string, w int) string {
	return s + strings.Repeat(" ", max(0, w-len([]rune(s))))
}
