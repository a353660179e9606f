package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/trace"
)

// maxDiffLines bounds the lines of one divergence's diff: the first
// differences say where to look, a dump of all of them would not.
const maxDiffLines = 12

// differ collects the lines of a readable diff between an old and a new
// value, named by the labels (recorded/replayed, A/B).
type differ struct {
	old, new string // labels
	lines    []string
	more     int // differences left out past maxDiffLines
}

func (d *differ) add(format string, args ...any) {
	if len(d.lines) >= maxDiffLines {
		d.more++
		return
	}
	d.lines = append(d.lines, fmt.Sprintf(format, args...))
}

func (d *differ) result() []string {
	if d.more > 0 {
		return append(d.lines, fmt.Sprintf("(%d more differences)", d.more))
	}
	return d.lines
}

// text adds the difference between two strings under head: both in full
// when short, else a window around the first difference.
func (d *differ) text(head, a, b string) {
	if a == b {
		return
	}
	d.add("%s differs:", head)
	const short = 100
	if len(a) <= short && len(b) <= short {
		d.add("  - %s: %s", d.old, strconv.Quote(a))
		d.add("  + %s: %s", d.new, strconv.Quote(b))
		return
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	for i > 0 && (i < len(a) && !utf8.RuneStart(a[i]) || i < len(b) && !utf8.RuneStart(b[i])) {
		i--
	}
	d.add("  (first difference at byte %d of %d and %d)", i, len(a), len(b))
	d.add("  - %s: %s", d.old, window(a, i))
	d.add("  + %s: %s", d.new, window(b, i))
}

// window quotes s around byte i: 30 bytes before, 50 after.
func window(s string, i int) string {
	lo, hi := max(0, i-30), min(len(s), i+50)
	for lo > 0 && !utf8.RuneStart(s[lo]) {
		lo--
	}
	for hi < len(s) && !utf8.RuneStart(s[hi]) {
		hi++
	}
	q := strconv.Quote(s[lo:hi])
	if lo > 0 {
		q = "…" + q
	}
	if hi < len(s) {
		q += "…"
	}
	return q
}

// json adds the differences between two JSON values, path by path
// ($.key[0]…). Values that are not JSON are compared as text.
func (d *differ) json(head string, a, b json.RawMessage) {
	if jsonEqual(a, b) {
		return
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		d.text(head, string(a), string(b))
		return
	}
	d.add("%s differs:", head)
	d.value("$", va, vb)
}

func (d *differ) value(path string, a, b any) {
	ma, oka := a.(map[string]any)
	mb, okb := b.(map[string]any)
	if oka && okb {
		keys := make([]string, 0, len(ma)+len(mb))
		for k := range ma {
			keys = append(keys, k)
		}
		for k := range mb {
			if _, ok := ma[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := path + "." + k
			va, ina := ma[k]
			vb, inb := mb[k]
			switch {
			case !ina:
				d.add("  %s: only in %s: %s", p, d.new, compact(vb))
			case !inb:
				d.add("  %s: only in %s: %s", p, d.old, compact(va))
			default:
				d.value(p, va, vb)
			}
		}
		return
	}
	la, oka := a.([]any)
	lb, okb := b.([]any)
	if oka && okb {
		for i := range max(len(la), len(lb)) {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(la):
				d.add("  %s: only in %s: %s", p, d.new, compact(lb[i]))
			case i >= len(lb):
				d.add("  %s: only in %s: %s", p, d.old, compact(la[i]))
			default:
				d.value(p, la[i], lb[i])
			}
		}
		return
	}
	if ca, cb := compact(a), compact(b); ca != cb {
		d.add("  %s: %s %s, %s %s", path, d.old, ca, d.new, cb)
	}
}

// compact writes v as JSON, shortened past 80 bytes.
func compact(v any) string {
	b, _ := json.Marshal(v)
	return shorten(string(b), 80)
}

// shorten cuts s to about n bytes, on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return trace.TruncateUTF8(s, n) + "…"
}

// jsonEqual reports whether a and b are the same JSON value (key order
// and spacing aside); values that are not JSON are compared as bytes.
func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	ca, erra := canonical(a)
	cb, errb := canonical(b)
	if erra != nil || errb != nil {
		return false
	}
	return ca == cb
}

// canonical re-encodes a JSON value with sorted keys and no spaces; the
// empty value is null.
func canonical(b json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return "null", nil
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "", err
	}
	out, err := json.Marshal(v) // maps are written with sorted keys
	return string(out), err
}

// messages adds the differences between two conversations, message by
// message: the first message that differs, field by field, and the
// messages one has and the other has not.
func (d *differ) messages(a, b []agent.Message) {
	if len(a) != len(b) {
		d.add("the request has %d messages in %s, %d in %s", len(a), d.old, len(b), d.new)
	}
	for i := range min(len(a), len(b)) {
		if messageEqual(&a[i], &b[i]) {
			continue
		}
		d.message(fmt.Sprintf("message %d (%s)", i+1, describe(&a[i])), &a[i], &b[i])
		return // what follows a changed message usually changes with it
	}
	for i := len(b); i < len(a); i++ {
		d.add("message %d (%s): only in %s: %s", i+1, describe(&a[i]), d.old, shorten(strconv.Quote(a[i].Content), 80))
	}
	for i := len(a); i < len(b); i++ {
		d.add("message %d (%s): only in %s: %s", i+1, describe(&b[i]), d.new, shorten(strconv.Quote(b[i].Content), 80))
	}
}

// describe names a message: its role, and the tool it answers.
func describe(m *agent.Message) string {
	if m.Role == agent.RoleTool && m.Name != "" {
		return "tool result of " + m.Name
	}
	return m.Role
}

func (d *differ) message(head string, a, b *agent.Message) {
	if a.Role != b.Role {
		d.add("%s: role: %s %q, %s %q", head, d.old, a.Role, d.new, b.Role)
	}
	d.text(head+": content", a.Content, b.Content)
	d.text(head+": thinking", a.Thinking, b.Thinking)
	if a.ToolCallID != b.ToolCallID {
		d.add("%s: tool_call_id: %s %q, %s %q", head, d.old, a.ToolCallID, d.new, b.ToolCallID)
	}
	if a.Name != b.Name {
		d.add("%s: name: %s %q, %s %q", head, d.old, a.Name, d.new, b.Name)
	}
	if a.IsError != b.IsError {
		d.add("%s: is_error: %s %v, %s %v", head, d.old, a.IsError, d.new, b.IsError)
	}
	d.toolCalls(head+": tool call", a.ToolCalls, b.ToolCalls)
}

func (d *differ) toolCalls(head string, a, b []agent.ToolCall) {
	for i := range max(len(a), len(b)) {
		h := fmt.Sprintf("%s %d", head, i+1)
		switch {
		case i >= len(a):
			d.add("%s: only in %s: %s %s", h, d.new, b[i].Name, shorten(string(b[i].Input), 80))
		case i >= len(b):
			d.add("%s: only in %s: %s %s", h, d.old, a[i].Name, shorten(string(a[i].Input), 80))
		default:
			if a[i].Name != b[i].Name {
				d.add("%s: tool: %s %q, %s %q", h, d.old, a[i].Name, d.new, b[i].Name)
			}
			if a[i].ID != b[i].ID {
				d.add("%s: id: %s %q, %s %q", h, d.old, a[i].ID, d.new, b[i].ID)
			}
			d.json(h+" ("+b[i].Name+") input", a[i].Input, b[i].Input)
		}
	}
}

func messageEqual(a, b *agent.Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.Thinking != b.Thinking || a.ToolCallID != b.ToolCallID ||
		a.Name != b.Name || a.IsError != b.IsError || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	for i := range a.ToolCalls {
		x, y := &a.ToolCalls[i], &b.ToolCalls[i]
		if x.ID != y.ID || x.Name != y.Name || !jsonEqual(x.Input, y.Input) {
			return false
		}
	}
	return true
}

// tools adds the differences between two sets of tool definitions, by
// name; descriptions are compared only when describe is set.
func (d *differ) tools(a, b []agent.ToolDef, descriptions bool) {
	index := func(defs []agent.ToolDef) map[string]*agent.ToolDef {
		m := make(map[string]*agent.ToolDef, len(defs))
		for i := range defs {
			m[defs[i].Name] = &defs[i]
		}
		return m
	}
	ia, ib := index(a), index(b)
	for i := range a {
		x := &a[i]
		y, ok := ib[x.Name]
		if !ok {
			d.add("tool %s: only in %s", x.Name, d.old)
			continue
		}
		if descriptions {
			d.text("tool "+x.Name+": description", x.Description, y.Description)
		}
		d.json("tool "+x.Name+": input schema", x.Schema, y.Schema)
	}
	for i := range b {
		if _, ok := ia[b[i].Name]; !ok {
			d.add("tool %s: only in %s", b[i].Name, d.new)
		}
	}
	if len(d.lines) == 0 && !slices.EqualFunc(a, b, func(x, y agent.ToolDef) bool { return x.Name == y.Name }) {
		names := func(defs []agent.ToolDef) string {
			s := make([]string, len(defs))
			for i := range defs {
				s[i] = defs[i].Name
			}
			return strings.Join(s, ", ")
		}
		d.add("the tools are offered in another order: %s [%s], %s [%s]", d.old, names(a), d.new, names(b))
	}
}
