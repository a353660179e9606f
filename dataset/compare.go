package dataset

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Change is how a case moved from one experiment to the next.
type Change string

// Changes, in the order a comparison lists them.
const (
	Regression Change = "regression" // passed in A, does not pass in B
	Fix        Change = "fix"        // did not pass in A, passes in B
	Unchanged  Change = "unchanged"  // the same pass or no-pass in both
	Added      Change = "added"      // only in B
	Removed    Change = "removed"    // only in A
)

func (c Change) rank() int {
	return slices.Index([]Change{Regression, Fix, Unchanged, Added, Removed}, c)
}

// Row is one case of a comparison.
type Row struct {
	ID     string      `json:"id"`
	Change Change      `json:"change"`
	A      *CaseResult `json:"a,omitempty"`
	B      *CaseResult `json:"b,omitempty"`
	// ScoreDelta is B's score minus A's (0 when one is missing).
	ScoreDelta float64 `json:"score_delta"`
}

// Delta is B's totals minus A's.
type Delta struct {
	PassRate  float64 `json:"pass_rate"`
	MeanScore float64 `json:"mean_score"`
	CostUSD   float64 `json:"cost_usd"`
	P50Ms     float64 `json:"p50_ms"`
	P95Ms     float64 `json:"p95_ms"`
}

// Comparison is experiment B against experiment A (the baseline).
type Comparison struct {
	A        string  `json:"a"`
	B        string  `json:"b"`
	DatasetA string  `json:"dataset_a"`
	DatasetB string  `json:"dataset_b"`
	SummaryA Summary `json:"summary_a"`
	SummaryB Summary `json:"summary_b"`
	Delta    Delta   `json:"delta"`
	// Regressions, Fixes and Unchanged count the rows of each kind.
	Regressions int `json:"regressions"`
	Fixes       int `json:"fixes"`
	Unchanged   int `json:"unchanged"`
	// Rows are the cases, by id: regressions first, then fixes, then
	// unchanged, added and removed, each group in B's case order (A's for
	// removed).
	Rows []Row `json:"rows"`
}

// Compare compares b with the baseline a, case by case (matched by id).
func Compare(a, b *Experiment) *Comparison {
	c := &Comparison{A: a.Name, B: b.Name, DatasetA: fmt.Sprintf("%s@%d", a.Dataset, a.Version), DatasetB: fmt.Sprintf("%s@%d", b.Dataset, b.Version),
		SummaryA: Summarize(a.Cases), SummaryB: Summarize(b.Cases), Rows: make([]Row, 0, max(len(a.Cases), len(b.Cases)))}
	c.Delta = Delta{
		PassRate:  c.SummaryB.PassRate - c.SummaryA.PassRate,
		MeanScore: c.SummaryB.MeanScore - c.SummaryA.MeanScore,
		CostUSD:   c.SummaryB.CostUSD - c.SummaryA.CostUSD,
		P50Ms:     c.SummaryB.P50Ms - c.SummaryA.P50Ms,
		P95Ms:     c.SummaryB.P95Ms - c.SummaryA.P95Ms,
	}
	inA := make(map[string]*CaseResult, len(a.Cases))
	for i := range a.Cases {
		inA[a.Cases[i].ID] = &a.Cases[i]
	}
	inB := make(map[string]bool, len(b.Cases))
	for i := range b.Cases {
		cb := &b.Cases[i]
		inB[cb.ID] = true
		r := Row{ID: cb.ID, B: cb}
		switch ca := inA[cb.ID]; {
		case ca == nil:
			r.Change = Added
		case ca.Passed() && !cb.Passed():
			r.Change = Regression
		case !ca.Passed() && cb.Passed():
			r.Change = Fix
		default:
			r.Change = Unchanged
		}
		if ca := inA[cb.ID]; ca != nil {
			r.A = ca
			r.ScoreDelta = cb.Score - ca.Score
		}
		c.Rows = append(c.Rows, r)
	}
	for i := range a.Cases {
		if !inB[a.Cases[i].ID] {
			c.Rows = append(c.Rows, Row{ID: a.Cases[i].ID, Change: Removed, A: &a.Cases[i]})
		}
	}
	slices.SortStableFunc(c.Rows, func(x, y Row) int { return x.Change.rank() - y.Change.rank() })
	for _, r := range c.Rows {
		switch r.Change {
		case Regression:
			c.Regressions++
		case Fix:
			c.Fixes++
		case Unchanged:
			c.Unchanged++
		}
	}
	return c
}

// RegressionMessages maps each regressed case's id to a sentence saying
// so, for evalrun.JUnitOptions.Regressions.
func (c *Comparison) RegressionMessages() map[string]string {
	m := map[string]string{}
	for _, r := range c.Rows {
		if r.Change == Regression {
			m[r.ID] = fmt.Sprintf("regression: passed in %s (score %.2f), %s now (score %.2f)", c.A, r.A.Score, r.B.Verdict, r.B.Score)
		}
	}
	return m
}

func verdictOf(r *CaseResult) string {
	if r == nil {
		return "-"
	}
	return r.Verdict
}

func scoreOf(r *CaseResult) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.Score)
}

func signed(f float64, format string) string {
	s := fmt.Sprintf(format, f)
	if strings.Trim(s, "-0.") == "" {
		s = strings.TrimPrefix(s, "-")
	}
	if f >= 0 && !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s
}

// totals returns the rows of the totals table: name, A, B, delta.
func (c *Comparison) totals() [][4]string {
	a, b, d := c.SummaryA, c.SummaryB, c.Delta
	pct := func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }
	return [][4]string{
		{"pass rate", fmt.Sprintf("%s (%d/%d)", pct(a.PassRate), a.Passed, a.Cases), fmt.Sprintf("%s (%d/%d)", pct(b.PassRate), b.Passed, b.Cases), signed(100*d.PassRate, "%.1f") + " pts"},
		{"mean score", fmt.Sprintf("%.3f", a.MeanScore), fmt.Sprintf("%.3f", b.MeanScore), signed(d.MeanScore, "%.3f")},
		{"cost", fmt.Sprintf("$%.4f", a.CostUSD), fmt.Sprintf("$%.4f", b.CostUSD), signed(d.CostUSD, "%.4f")},
		{"latency p50", fmt.Sprintf("%.1f ms", a.P50Ms), fmt.Sprintf("%.1f ms", b.P50Ms), signed(d.P50Ms, "%.1f") + " ms"},
		{"latency p95", fmt.Sprintf("%.1f ms", a.P95Ms), fmt.Sprintf("%.1f ms", b.P95Ms), signed(d.P95Ms, "%.1f") + " ms"},
	}
}

// WriteText writes the comparison for a terminal: one line per case
// (changed cases first), then the totals with their deltas.
func WriteText(w io.Writer, c *Comparison) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s (%s) → %s (%s)\n\n", c.A, c.DatasetA, c.B, c.DatasetB)
	idw := 4
	for _, r := range c.Rows {
		idw = max(idw, len(r.ID))
	}
	fmt.Fprintf(bw, "%-10s  %-*s  %-7s %-5s  %-7s %-5s  %s\n", "CHANGE", idw, "CASE", "A", "SCORE", "B", "SCORE", "DELTA")
	for _, r := range c.Rows {
		fmt.Fprintf(bw, "%-10s  %-*s  %-7s %-5s  %-7s %-5s  %s\n", r.Change, idw, r.ID, verdictOf(r.A), scoreOf(r.A), verdictOf(r.B), scoreOf(r.B), signed(r.ScoreDelta, "%.2f"))
	}
	fmt.Fprintln(bw)
	for _, t := range c.totals() {
		fmt.Fprintf(bw, "%-12s %-16s %-16s %s\n", t[0], t[1], t[2], t[3])
	}
	fmt.Fprintf(bw, "\n%d regression(s), %d fix(es), %d unchanged\n", c.Regressions, c.Fixes, c.Unchanged)
	return bw.Flush()
}

// mdCell escapes text for a Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\n", " ")
	return s
}

// WriteMarkdown writes the comparison as Markdown a CI job can post on a
// pull request: a headline, the totals table and the changed cases
// (regressions, then fixes); unchanged cases are counted, not listed.
func WriteMarkdown(w io.Writer, c *Comparison) error {
	bw := bufio.NewWriter(w)
	head := "No regressions"
	if c.Regressions > 0 {
		head = fmt.Sprintf("%d regression(s)", c.Regressions)
	}
	fmt.Fprintf(bw, "## Loupe eval: %s\n\n", head)
	fmt.Fprintf(bw, "`%s` (%s) against the baseline `%s` (%s).\n\n", mdCell(c.B), mdCell(c.DatasetB), mdCell(c.A), mdCell(c.DatasetA))
	fmt.Fprintln(bw, "| | baseline | this run | change |")
	fmt.Fprintln(bw, "|---|---|---|---|")
	for _, t := range c.totals() {
		fmt.Fprintf(bw, "| %s | %s | %s | %s |\n", t[0], t[1], t[2], t[3])
	}
	var changed []Row
	for _, r := range c.Rows {
		if r.Change == Regression || r.Change == Fix || r.Change == Added || r.Change == Removed {
			changed = append(changed, r)
		}
	}
	if len(changed) > 0 {
		fmt.Fprintln(bw, "\n| change | case | baseline | this run | score change |")
		fmt.Fprintln(bw, "|---|---|---|---|---|")
		for _, r := range changed {
			fmt.Fprintf(bw, "| %s | `%s` | %s %s | %s %s | %s |\n", r.Change, mdCell(r.ID), verdictOf(r.A), scoreOf(r.A), verdictOf(r.B), scoreOf(r.B), signed(r.ScoreDelta, "%.2f"))
		}
	}
	fmt.Fprintf(bw, "\n%d regression(s), %d fix(es), %d unchanged.\n", c.Regressions, c.Fixes, c.Unchanged)
	return bw.Flush()
}
