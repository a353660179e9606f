package eval

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// render prints a decoded JSON value compactly and deterministically:
// strings quoted, map keys sorted, floats without trailing zeros.
func render(v any) string {
	var b strings.Builder
	renderTo(&b, v, 0)
	return b.String()
}

func renderTo(b *strings.Builder, v any, depth int) {
	if depth > 20 {
		b.WriteString("…")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		b.WriteString(strconv.Quote(x))
	case float64:
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			renderTo(b, e, depth+1)
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k)
			b.WriteString(": ")
			renderTo(b, x[k], depth+1)
		}
		b.WriteByte('}')
	default:
		b.WriteString("?")
	}
}

// callText renders a call as name(args).
func callText(c ToolCall) string {
	in := c.input()
	if in == nil {
		return c.Name + "()"
	}
	return c.Name + "(" + render(in) + ")"
}

// expectedText renders an expected call as name(args).
func expectedText(e ExpectedCall) string {
	switch {
	case e.AnyArgs:
		return e.Tool + "(any)"
	case e.Args == nil:
		return e.Tool
	}
	return e.Tool + "(" + render(e.Args) + ")"
}
