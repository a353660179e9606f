package tracesview

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/export/console"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// cellWidth bounds a session or user id in a table, in characters.
const cellWidth = 32

// cell returns an id for a table cell: control characters (a tab would
// break the columns) shown as U+FFFD, and at most cellWidth characters,
// the last of them "…" when it was cut.
func cell(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) <= cellWidth {
		return s
	}
	n := 0
	for i := range s {
		if n == cellWidth-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// SessionTable writes sessions as an aligned table, one session per line:
// id, user, runs, first start and latest start (UTC), tokens (in/out),
// cost and errors (with how many runs failed).
func SessionTable(w io.Writer, sessions []store.SessionSummary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tUSER\tRUNS\tFIRST\tLATEST\tTOKENS\tCOST\tERRORS")
	for i := range sessions {
		s := &sessions[i]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n",
			cell(s.ID), orDash(cell(s.User)), s.Runs, s.First.UTC().Format("2006-01-02 15:04:05"),
			s.LastStarted.UTC().Format("2006-01-02 15:04:05"), tokens(s.InputTokens, s.OutputTokens),
			cost(s.CostUSD, s.UnpricedCalls), errorsCell(s.ErrorRuns, s.Errors))
	}
	return tw.Flush()
}

// errorsCell is a session's errors and, if any run failed, how many:
// "0", "3 (2 runs)".
func errorsCell(runs, errors int) string {
	switch {
	case runs == 0:
		return strconv.Itoa(errors)
	case runs == 1:
		return strconv.Itoa(errors) + " (1 run)"
	}
	return fmt.Sprintf("%d (%d runs)", errors, runs)
}

// SessionOptions control ShowSession.
type SessionOptions struct {
	MaxIO int // bound on each printed value (0: 200 bytes; negative: none)
}

// ShowSession writes a session for people, as the conversation it was: a
// header with its totals, then each run in the order it started, with
// its id, name, status and duration, its input ("> "), its tool calls
// ("· tool(input) → output", or "✗ error"), and its answer ("< ") or
// error ("! ").
func ShowSession(w io.Writer, v *store.SessionView, o SessionOptions) error {
	max := o.MaxIO
	switch {
	case max == 0:
		max = 200
	case max < 0:
		max = int(^uint(0) >> 1)
	}
	s := &v.Session
	fmt.Fprintf(w, "session %s", s.ID)
	if s.User != "" {
		fmt.Fprintf(w, "  user %s", s.User)
	}
	fmt.Fprintf(w, "\n%d runs from %s to %s  tokens %s  cost %s  errors %s\n",
		s.Runs, s.First.UTC().Format("2006-01-02 15:04:05"), s.Last.UTC().Format("2006-01-02 15:04:05"),
		tokens(s.InputTokens, s.OutputTokens), cost(s.CostUSD, s.UnpricedCalls), errorsCell(s.ErrorRuns, s.Errors))
	if shown := len(v.Turns); shown < s.Runs {
		fmt.Fprintf(w, "(the last %d runs)\n", shown)
	}
	text := func(v trace.Value) string { return oneLine(valueText(v), max) }
	for i := range v.Turns {
		t := &v.Turns[i]
		sum := &t.Summary
		fmt.Fprintf(w, "\n%s  %s  %s  %s  %s\n", sum.Started.UTC().Format("2006-01-02 15:04:05"), sum.ID.String()[:12],
			orDash(sum.Name), status(sum), console.Duration(sum.Duration))
		if len(t.Input) > 0 {
			fmt.Fprintf(w, "  > %s\n", text(t.Input))
		}
		for _, tool := range t.Tools {
			indent := strings.Repeat("  ", tool.Depth)
			if tool.Error != "" {
				fmt.Fprintf(w, "  %s✗ %s(%s): %s\n", indent, tool.Name, text(tool.Input), oneLine(tool.Error, max))
				continue
			}
			fmt.Fprintf(w, "  %s· %s(%s) → %s\n", indent, tool.Name, text(tool.Input), text(tool.Output))
		}
		if len(t.Output) > 0 {
			fmt.Fprintf(w, "  < %s\n", text(t.Output))
		}
		if t.Error != "" {
			fmt.Fprintf(w, "  ! %s\n", oneLine(t.Error, max))
		}
	}
	return nil
}

// valueText is a value as text: a JSON string's text; for a list of
// chat messages (OpenAI's content, or the GenAI conventions' parts), the
// text of the last one; else the JSON.
func valueText(v trace.Value) string {
	if len(v) == 0 {
		return ""
	}
	if v[0] == '[' {
		var msgs []struct {
			Content json.RawMessage `json:"content"`
			Parts   []struct {
				Type    string `json:"type"`
				Content string `json:"content"`
			} `json:"parts"`
		}
		if json.Unmarshal(v, &msgs) == nil && len(msgs) > 0 {
			m := msgs[len(msgs)-1]
			var texts []string
			for _, p := range m.Parts {
				if p.Type == "text" && p.Content != "" {
					texts = append(texts, p.Content)
				}
			}
			var c string
			if json.Unmarshal(m.Content, &c) == nil && c != "" {
				texts = append(texts, c)
			}
			if len(texts) > 0 {
				return strings.Join(texts, " ")
			}
		}
	}
	return v.Text()
}
