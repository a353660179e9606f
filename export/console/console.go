// Package console prints traces for people, as a tree with durations,
// tokens, cost and errors, and for machines, as compact JSON lines.
package console

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/trace"
)

// Options control how a tree is printed. The zero value prints names,
// outcomes, durations, tokens and cost, without inputs and outputs.
type Options struct {
	// IO prints each span's input and output under it, cut to MaxIO bytes.
	IO bool
	// MaxIO bounds each printed value (default 200 bytes; negative: no limit).
	MaxIO int
	// Color uses ANSI colors for outcomes.
	Color bool
}

// Tree prints the span tree of one trace's records to w.
func Tree(w io.Writer, recs []trace.Record, o Options) error {
	p := printer{w: w, o: o}
	if p.o.MaxIO == 0 {
		p.o.MaxIO = 200
	}
	roots := trace.Tree(recs)
	if len(recs) > 0 {
		st := trace.StatsOf(recs)
		p.line("trace %s  %d records  %s  %s  %d tool calls  %d errors",
			recs[0].TraceID, len(recs), tokens(st.InputTokens, st.OutputTokens), price.Format(st.CostUSD, st.UnpricedCalls), st.ToolCalls, st.Errors)
	}
	for i, n := range roots {
		p.node(n, "", i == len(roots)-1)
	}
	return p.err
}

type printer struct {
	w   io.Writer
	o   Options
	err error
}

func (p *printer) line(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
	}
}

func (p *printer) node(n *trace.Node, prefix string, last bool) {
	branch, cont := "├─ ", "│  "
	if last {
		branch, cont = "└─ ", "   "
	}
	p.line("%s%s%s", prefix, branch, p.describe(n))
	if p.o.IO {
		r := n.Record()
		if len(n.Start.Input) > 0 {
			p.line("%s%s   in:  %s", prefix, cont, p.clip(n.Start.Input))
		}
		if len(r.Output) > 0 {
			p.line("%s%s   out: %s", prefix, cont, p.clip(r.Output))
		}
		if len(r.Thinking) > 0 {
			p.line("%s%s   thinking: %s", prefix, cont, p.clip(r.Thinking))
		}
	}
	for i, c := range n.Children {
		p.node(c, prefix+cont, i == len(n.Children)-1)
	}
}

func (p *printer) clip(v trace.Value) string {
	s := v.Text()
	s = strings.ReplaceAll(s, "\n", `\n`)
	if p.o.MaxIO > 0 && len(s) > p.o.MaxIO {
		s = s[:p.o.MaxIO] + "… (" + strconv.Itoa(len(s)) + " bytes)"
	}
	return s
}

// describe returns the one-line summary of a node.
func (p *printer) describe(n *trace.Node) string {
	s, r := n.Start, n.Record()
	var b strings.Builder
	switch s.Type {
	case trace.TypeRunStart:
		fmt.Fprintf(&b, "run %s", s.Name)
	case trace.TypeIterationStart:
		fmt.Fprintf(&b, "iteration %d", s.Iteration)
	case trace.TypeChildSpawn:
		fmt.Fprintf(&b, "child %s", s.Name)
	case trace.TypeToolStart, trace.TypeToolEnd, trace.TypeToolError:
		fmt.Fprintf(&b, "tool %s", s.Name)
	case trace.TypeHookStart:
		fmt.Fprintf(&b, "hook %s", s.Name)
	case trace.TypeNodeStart:
		fmt.Fprintf(&b, "node %s", s.Name)
	case trace.TypeModelCall:
		fmt.Fprintf(&b, "model %s", s.Name)
	case trace.TypeMemorySet:
		fmt.Fprintf(&b, "memory.set %s[%s] = %s", s.Status, s.Name, p.short(s.Output))
	case trace.TypeStateUpdate:
		fmt.Fprintf(&b, "state %s = %s", s.Name, p.short(s.Output))
	case trace.TypeMessage:
		fmt.Fprintf(&b, "message %s: %s", s.Name, p.short(s.Output))
	case trace.TypeGuardrail:
		fmt.Fprintf(&b, "guardrail %s → %s", s.Name, s.Status)
	case trace.TypeLog:
		b.WriteString(strings.TrimSpace("log " + s.Status + " " + s.Name))
		if e, _ := s.Entry(); len(e.Body) > 0 && s.Error == "" {
			b.WriteString(": " + p.short(e.Body))
		}
	default:
		b.WriteString(string(s.Type))
		if s.Name != "" {
			b.WriteString(" " + s.Name)
		}
	}
	if n.End == nil && closable(s.Type) {
		b.WriteString("  (unfinished)")
	}
	switch {
	case r.Type == trace.TypeRunEnd || r.Type == trace.TypeChildEnd:
		b.WriteString("  " + p.status(r.Status, r.Status != string(trace.TerminationSuccess)))
	case r.Type == trace.TypeIterationEnd && r.Status != "":
		b.WriteString("  " + r.Status)
	case r.Type == trace.TypeModelCall && r.Status != "":
		b.WriteString("  finish=" + r.Status)
	}
	if d := n.Duration(); d > 0 {
		b.WriteString("  " + Duration(d))
	}
	if u := r.Usage; u.InputTokens != 0 || u.OutputTokens != 0 {
		b.WriteString("  " + tokens(u.InputTokens, u.OutputTokens))
	}
	if r.Usage.CostUnknown {
		b.WriteString("  cost unknown") // the model has no price: not $0
	} else if r.Usage.CostUSD != 0 {
		b.WriteString("  " + cost(r.Usage.CostUSD))
	}
	if r.Error != "" {
		b.WriteString("  " + p.status("✗ "+r.Error, true))
	}
	return b.String()
}

func (p *printer) short(v trace.Value) string {
	s := strings.ReplaceAll(v.Text(), "\n", `\n`)
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

func (p *printer) status(s string, bad bool) string {
	if !p.o.Color {
		return s
	}
	if bad {
		return "\x1b[31m" + s + "\x1b[0m"
	}
	return "\x1b[32m" + s + "\x1b[0m"
}

func closable(t trace.Type) bool {
	switch t {
	case trace.TypeRunStart, trace.TypeIterationStart, trace.TypeToolStart, trace.TypeHookStart, trace.TypeChildSpawn, trace.TypeNodeStart:
		return true
	}
	return false
}

// Duration formats d for people: 1.2s, 35ms, 812µs.
func Duration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	case d >= time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64) + "µs"
	}
}

func tokens(in, out int64) string { return fmt.Sprintf("%d→%d tok", in, out) }

func cost(c float64) string { return fmt.Sprintf("$%.4f", c) }

// Format selects what a Sink prints.
type Format int

const (
	// FormatTree prints each trace's tree when its run ends.
	FormatTree Format = iota
	// FormatJSON prints every record as one compact JSON line as it arrives.
	FormatJSON
)

// Sink is a trace.Sink that prints to a terminal or a log. In FormatTree it
// keeps each trace's records until its root run.end arrives, then prints
// the tree; Close prints traces that never ended, marked unfinished. It is
// safe for concurrent use.
type Sink struct {
	mu      sync.Mutex
	w       io.Writer
	format  Format
	o       Options
	pending map[trace.TraceID][]trace.Record
	order   []trace.TraceID
	buf     []byte
}

// NewSink returns a Sink printing to w in format f.
func NewSink(w io.Writer, f Format, o Options) *Sink {
	return &Sink{w: w, format: f, o: o, pending: make(map[trace.TraceID][]trace.Record)}
}

// WriteRecords implements trace.Sink.
func (s *Sink) WriteRecords(_ context.Context, recs []trace.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.format == FormatJSON {
		s.buf = s.buf[:0]
		for i := range recs {
			s.buf = append(recs[i].AppendJSON(s.buf), '\n')
		}
		_, err := s.w.Write(s.buf)
		return err
	}
	for _, r := range recs {
		if _, ok := s.pending[r.TraceID]; !ok {
			s.order = append(s.order, r.TraceID)
		}
		s.pending[r.TraceID] = append(s.pending[r.TraceID], r)
		if r.Type == trace.TypeRunEnd && r.Depth == 0 {
			if err := s.print(r.TraceID); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Sink) print(id trace.TraceID) error {
	recs := s.pending[id]
	delete(s.pending, id)
	for i, x := range s.order {
		if x == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	return Tree(s.w, recs, s.o)
}

// Close prints the trees of traces that have not ended.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.order) > 0 {
		if err := s.print(s.order[0]); err != nil {
			return err
		}
	}
	return nil
}
