package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// A Comparison is two runs' trajectories side by side, step by step, with
// the first place where they differ. Make one with Compare.
type Comparison struct {
	A          RunInfo     `json:"a"`
	B          RunInfo     `json:"b"`
	Steps      []StepPair  `json:"steps"`
	Divergence *Divergence `json:"divergence,omitempty"` // nil when the trajectories are the same; "-" lines are A, "+" lines B
}

// RunInfo sums up one run of a Comparison.
type RunInfo struct {
	TraceID      trace.TraceID `json:"trace_id"`
	Name         string        `json:"name"`
	Status       string        `json:"status"` // termination reason; "" when not ended
	Tags         []string      `json:"tags,omitempty"`
	Steps        int           `json:"steps"`
	ModelCalls   int           `json:"model_calls"`
	ToolCalls    int           `json:"tool_calls"`
	InputTokens  int64         `json:"input_tokens"`
	OutputTokens int64         `json:"output_tokens"`
	CostUSD      float64       `json:"cost_usd"`
	Answer       string        `json:"answer"`
	Problems     []string      `json:"problems,omitempty"` // values missing or damaged in the records
}

// A StepPair is one step of both runs: its calls, paired by position.
type StepPair struct {
	Step int       `json:"step"`
	Rows []CallRow `json:"rows"`
}

// A CallRow pairs the calls at one position of a step; either side may
// be missing.
type CallRow struct {
	A        *Call `json:"a,omitempty"`
	B        *Call `json:"b,omitempty"`
	Diverged bool  `json:"diverged,omitempty"` // the first row that differs
}

// Compare lines up two recordings (read with Read: damaged values are
// shown, not refused) step by step and marks the first pair of calls
// that differ: another kind of call or another model or tool, another
// answer from the model (its text or the tools it asked for; call ids and
// thinking aside), another tool input or outcome, or a call only one run
// made. Tokens, cost and durations are shown, not compared.
func Compare(a, b *Recording) *Comparison {
	c := &Comparison{A: info(a), B: info(b)}
	steps := max(c.A.Steps, c.B.Steps)
	byStep := func(r *Recording) map[int][]*Call {
		m := map[int][]*Call{}
		for i := range r.Calls {
			m[r.Calls[i].Step] = append(m[r.Calls[i].Step], &r.Calls[i])
		}
		return m
	}
	sa, sb := byStep(a), byStep(b)
	for s := 0; s <= steps; s++ {
		ca, cb := sa[s], sb[s]
		if len(ca) == 0 && len(cb) == 0 {
			continue
		}
		p := StepPair{Step: s}
		for i := range max(len(ca), len(cb)) {
			var row CallRow
			if i < len(ca) {
				row.A = ca[i]
			}
			if i < len(cb) {
				row.B = cb[i]
			}
			if c.Divergence == nil {
				if d := compareCalls(s, i+1, row.A, row.B); d != nil {
					c.Divergence, row.Diverged = d, true
				}
			}
			p.Rows = append(p.Rows, row)
		}
		c.Steps = append(c.Steps, p)
	}
	if c.Divergence == nil && (a.Status != b.Status || a.Answer != b.Answer) {
		df := differ{old: "A", new: "B"}
		if a.Status != b.Status {
			df.add("termination: A %s, B %s", orNone(a.Status), orNone(b.Status))
		}
		df.text("answer", a.Answer, b.Answer)
		c.Divergence = &Divergence{Call: "run end", Kind: DivergedOutcome, Summary: "the same calls, but the runs ended differently", Diff: df.result()}
	}
	return c
}

func orNone(s string) string {
	if s == "" {
		return "(not ended)"
	}
	return s
}

func info(r *Recording) RunInfo {
	in := RunInfo{TraceID: r.TraceID, Name: r.Name, Status: r.Status, Tags: r.Tags, Steps: r.Steps(), Answer: r.Answer, Problems: r.Problems}
	for i := range r.Calls {
		c := &r.Calls[i]
		if c.Kind == KindModel {
			in.ModelCalls++
			in.InputTokens += c.Response.Usage.InputTokens
			in.OutputTokens += c.Response.Usage.OutputTokens
			in.CostUSD += c.Response.Usage.CostUSD
		} else {
			in.ToolCalls++
		}
	}
	return in
}

// compareCalls returns how a and b, the n-th calls of step, differ, or
// nil.
func compareCalls(step, n int, a, b *Call) *Divergence {
	at := fmt.Sprintf("call %d", n)
	switch {
	case a == nil:
		return &Divergence{Step: step, Call: at, Kind: DivergedExtraCall, Seq: b.Seq,
			Summary: fmt.Sprintf("only B made this call: %s", cell(b))}
	case b == nil:
		return &Divergence{Step: step, Call: at, Kind: DivergedMissing, Seq: a.Seq,
			Summary: fmt.Sprintf("only A made this call: %s", cell(a))}
	case a.Kind != b.Kind:
		return &Divergence{Step: step, Call: at, Kind: DivergedExtraCall,
			Summary: fmt.Sprintf("A made a %s call (%s), B a %s call (%s)", a.Kind, a.Name, b.Kind, b.Name)}
	}
	df := differ{old: "A", new: "B"}
	if a.Kind == KindModel {
		at = fmt.Sprintf("model call %d", b.Index)
		if a.Name != b.Name {
			df.add("model: A %s, B %s", a.Name, b.Name)
		}
		if a.Err != b.Err {
			df.text("error", a.Err, b.Err)
		}
		df.text("content", a.Response.Content, b.Response.Content)
		df.toolCalls("asked for tool call", stripIDs(a.Response.ToolCalls), stripIDs(b.Response.ToolCalls))
		if len(df.lines) == 0 {
			return nil
		}
		return &Divergence{Step: step, Call: at, Kind: DivergedMessages, Seq: b.Seq, Summary: "the model calls differ", Diff: df.result()}
	}
	at = fmt.Sprintf("tool call %d (%s)", b.Index, b.Name)
	if a.Name != b.Name || !jsonEqual(a.Input, b.Input) {
		if a.Name != b.Name {
			df.add("tool: A %s, B %s", a.Name, b.Name)
		}
		df.json("input", a.Input, b.Input)
		return &Divergence{Step: step, Call: at, Kind: DivergedToolInput, Seq: b.Seq, Summary: "another tool or input", Diff: df.result()}
	}
	if a.Err != b.Err {
		df.text("error", a.Err, b.Err)
	}
	if a.Err == "" && b.Err == "" {
		df.json("output", a.Output, b.Output)
	}
	if len(df.lines) == 0 {
		return nil
	}
	return &Divergence{Step: step, Call: at, Kind: DivergedToolOutcome, Seq: b.Seq, Summary: "the same call, another outcome", Diff: df.result()}
}

func stripIDs(calls []agent.ToolCall) []agent.ToolCall {
	out := make([]agent.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = agent.ToolCall{Name: c.Name, Input: c.Input}
	}
	return out
}

// cellWidth is the width of one side of the text table, in runes.
const cellWidth = 56

// cell is one call in one line.
func cell(c *Call) string {
	if c == nil {
		return ""
	}
	if c.Kind == KindModel {
		u := c.Response.Usage
		s := fmt.Sprintf("model %s %s tok %s", c.Name, tokens(u.InputTokens+u.OutputTokens), dollars(u.CostUSD))
		switch {
		case c.Err != "":
			s += " ✗ " + oneLine(c.Err)
		case len(c.Response.ToolCalls) > 0:
			names := make([]string, len(c.Response.ToolCalls))
			for i, tc := range c.Response.ToolCalls {
				names[i] = tc.Name
			}
			s += " → " + strings.Join(names, ", ")
		default:
			s += " → " + strconv.Quote(oneLine(c.Response.Content))
		}
		return s
	}
	s := "tool " + c.Name + " " + oneLine(string(c.Input))
	if c.Err != "" {
		return s + " ✗ " + oneLine(c.Err)
	}
	return s + " → " + oneLine(string(c.Output))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func tokens(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func dollars(usd float64) string {
	if usd == 0 {
		return "$-"
	}
	return fmt.Sprintf("$%.4f", usd)
}

// fit cuts s to w runes, marking the cut, and pads it to w.
func fit(s string, w int) string {
	if utf8.RuneCountInString(s) > w {
		r := []rune(s)
		s = string(r[:w-1]) + "…"
	}
	return fmt.Sprintf("%-*s", w, s)
}

// WriteText writes the comparison as a table: a line per run, then per
// step the calls of A and B side by side, the first differing row marked
// with ≠, and what differs.
func (c *Comparison) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	for _, r := range []struct {
		label string
		in    *RunInfo
	}{{"A", &c.A}, {"B", &c.B}} {
		in := r.in
		fmt.Fprintf(ew, "%s  %s  %s  %s  %d steps, %d model calls, %d tool calls, %s tokens, %s\n", r.label, in.TraceID.String()[:12],
			in.Name, orNone(in.Status), in.Steps, in.ModelCalls, in.ToolCalls, tokens(in.InputTokens+in.OutputTokens), dollars(in.CostUSD))
		if len(in.Tags) > 0 {
			fmt.Fprintf(ew, "   tags: %s\n", strings.Join(in.Tags, " "))
		}
		if n := len(in.Problems); n > 0 {
			fmt.Fprintf(ew, "   (%d problems in its records, e.g. %s)\n", n, in.Problems[0])
		}
	}
	fmt.Fprintf(ew, "\n  step  %s  %s\n", fit("A", cellWidth), "B")
	for _, s := range c.Steps {
		for i, row := range s.Rows {
			mark, step := " ", ""
			if row.Diverged {
				mark = "≠"
			}
			if i == 0 {
				step = strconv.Itoa(s.Step)
			}
			fmt.Fprintf(ew, "%s %4s  %s  %s\n", mark, step, fit(cell(row.A), cellWidth), strings.TrimRight(fit(cell(row.B), cellWidth), " "))
		}
	}
	fmt.Fprintln(ew)
	if d := c.Divergence; d != nil {
		fmt.Fprint(ew, "first divergence: ")
		if d.Step > 0 {
			fmt.Fprintf(ew, "step %d, ", d.Step)
		}
		fmt.Fprintf(ew, "%s: %s\n", d.Call, d.Summary)
		for _, l := range d.Diff {
			fmt.Fprintf(ew, "  %s\n", l)
		}
	} else {
		fmt.Fprintln(ew, "no divergence: the same calls with the same inputs and outcomes, and the same answer")
	}
	return ew.err
}

// WriteJSON writes the comparison as one indented JSON object.
func (c *Comparison) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(c)
}

// CompareStored compares the stored traces a and b (ids or unique
// prefixes of at least 4 hex digits).
func CompareStored(ctx context.Context, st store.Store, a, b string) (*Comparison, error) {
	var recs [2]*Recording
	for i, id := range []string{a, b} {
		records, err := storedRecords(ctx, st, id)
		if err != nil {
			return nil, err
		}
		recs[i] = Read(records)
	}
	return Compare(recs[0], recs[1]), nil
}
