package otlp

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/loupe-dev/loupe/trace"
)

// SpanText returns the searchable text of a companion record (type
// custom, named SpanRecordName): the span's name, its status message and
// the values of its attributes (strings and numbers, those inside arrays
// and maps too), one per line. The span's ids, times, kind, resource and
// scope are left out, and so are its events, which have records of their
// own: they are the OTLP structure, not what a person searches for, and
// they were most of the text index's work at ingest.
//
// ok is false for any other record. For a companion whose Output is not
// an OTLP/JSON document (a record written by hand), ok is true and text is
// the Output's JSON text, as for any other record. SpanText reads the
// document in one pass without decoding it, since the collector calls it
// for every span it stores; it is safe for concurrent use.
func SpanText(r *trace.Record) (text string, ok bool) {
	if r.Type != trace.TypeCustom || r.Name != SpanRecordName {
		return "", false
	}
	if len(r.Output) == 0 {
		return "", true
	}
	w := textWalker{b: r.Output}
	if !w.object(w.root) || w.skipSpace() < len(w.b) {
		return r.Output.Text(), true
	}
	return w.out.String(), true
}

// textWalker reads an OTLP/JSON traces document, writing the text
// SpanText keeps to out. Its methods return false on anything that is not
// JSON of the expected shape; the walker is then abandoned.
type textWalker struct {
	b   []byte
	i   int
	out strings.Builder
}

// root reads a member of the document: its resourceSpans.
func (w *textWalker) root(key []byte) bool {
	if string(key) != "resourceSpans" {
		return w.skip()
	}
	return w.array(func() bool {
		return w.object(func(key []byte) bool {
			if string(key) != "scopeSpans" {
				return w.skip() // the resource, the schema URL
			}
			return w.array(func() bool {
				return w.object(func(key []byte) bool {
					if string(key) != "spans" {
						return w.skip() // the scope, the schema URL
					}
					return w.array(func() bool { return w.object(w.span) })
				})
			})
		})
	})
}

// span reads a member of a span: its name, attributes and status.
func (w *textWalker) span(key []byte) bool {
	switch string(key) {
	case "name":
		return w.text()
	case "attributes":
		return w.array(func() bool { return w.object(w.keyValue(0)) })
	case "status":
		return w.object(func(key []byte) bool {
			if string(key) == "message" {
				return w.text()
			}
			return w.skip()
		})
	}
	return w.skip()
}

// keyValue returns the reader of the members of a key-value pair at
// nesting depth d: its value.
func (w *textWalker) keyValue(d int) func(key []byte) bool {
	return func(key []byte) bool {
		if string(key) != "value" {
			return w.skip()
		}
		return w.object(w.anyValue(d))
	}
}

// anyValue returns the reader of the members of an AnyValue at nesting
// depth d: strings and numbers are kept, arrays and maps read down to
// DefaultMaxDepth levels, anything else skipped.
func (w *textWalker) anyValue(d int) func(key []byte) bool {
	return func(key []byte) bool {
		switch string(key) {
		case "stringValue", "intValue", "doubleValue":
			return w.text()
		case "arrayValue", "kvlistValue":
			if d >= DefaultMaxDepth {
				return w.skip()
			}
			each := func() bool { return w.object(w.anyValue(d + 1)) }
			if string(key) == "kvlistValue" {
				each = func() bool { return w.object(w.keyValue(d + 1)) }
			}
			return w.object(func(key []byte) bool {
				if string(key) != "values" {
					return w.skip()
				}
				return w.array(each)
			})
		}
		return w.skip()
	}
}

// text writes the string or number at w.i to out on a line of its own.
func (w *textWalker) text() bool {
	start := w.skipSpace()
	if start >= len(w.b) {
		return false
	}
	if w.b[start] != '"' {
		if !w.skip() {
			return false
		}
		if c := w.b[start]; c == '-' || c >= '0' && c <= '9' {
			w.line(w.b[start:w.i]) // a number; not an object, array or literal
		}
		return true
	}
	escaped, ok := w.str()
	if !ok {
		return false
	}
	s := w.b[start+1 : w.i-1]
	if escaped {
		var u string
		if json.Unmarshal(w.b[start:w.i], &u) != nil {
			return false
		}
		s = []byte(u)
	}
	w.line(s)
	return true
}

// line writes s to out on a line of its own, unless it is blank.
func (w *textWalker) line(s []byte) {
	if len(bytes.TrimSpace(s)) == 0 {
		return
	}
	if w.out.Len() > 0 {
		w.out.WriteByte('\n')
	}
	w.out.Write(s)
}

// object reads the object at w.i, calling member with each key once w.i
// is at its value; member must read the value.
func (w *textWalker) object(member func(key []byte) bool) bool {
	if w.skipSpace() >= len(w.b) || w.b[w.i] != '{' {
		return false
	}
	w.i++
	if w.skipSpace() < len(w.b) && w.b[w.i] == '}' {
		w.i++
		return true
	}
	for {
		start := w.skipSpace()
		if start >= len(w.b) || w.b[start] != '"' {
			return false
		}
		if _, ok := w.str(); !ok {
			return false
		}
		key := w.b[start+1 : w.i-1]
		if w.skipSpace() >= len(w.b) || w.b[w.i] != ':' {
			return false
		}
		w.i++
		if !member(key) {
			return false
		}
		if w.skipSpace() >= len(w.b) {
			return false
		}
		switch w.b[w.i] {
		case ',':
			w.i++
		case '}':
			w.i++
			return true
		default:
			return false
		}
	}
}

// array reads the array at w.i, calling elem once w.i is at each element;
// elem must read it.
func (w *textWalker) array(elem func() bool) bool {
	if w.skipSpace() >= len(w.b) || w.b[w.i] != '[' {
		return false
	}
	w.i++
	if w.skipSpace() < len(w.b) && w.b[w.i] == ']' {
		w.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		if w.skipSpace() >= len(w.b) {
			return false
		}
		switch w.b[w.i] {
		case ',':
			w.i++
		case ']':
			w.i++
			return true
		default:
			return false
		}
	}
}

// skip moves past the value at w.i, nested containers included, without
// recursion.
func (w *textWalker) skip() bool {
	depth := 0
	for {
		if w.skipSpace() >= len(w.b) {
			return false
		}
		switch c := w.b[w.i]; c {
		case '"':
			if _, ok := w.str(); !ok {
				return false
			}
		case '{', '[':
			depth++
			w.i++
			continue
		case '}', ']':
			if depth == 0 {
				return false
			}
			depth--
			w.i++
		case ',', ':':
			if depth == 0 {
				return false
			}
			w.i++
			continue
		default:
			start := w.i
			for w.i < len(w.b) && !strings.ContainsRune(" \t\r\n,:]}[{\"", rune(w.b[w.i])) {
				w.i++
			}
			if w.i == start {
				return false
			}
		}
		if depth == 0 {
			return true
		}
	}
}

// str moves past the string whose opening quote is at w.i and reports
// whether it holds escapes.
func (w *textWalker) str() (escaped, ok bool) {
	for w.i++; w.i < len(w.b); w.i++ {
		switch w.b[w.i] {
		case '"':
			w.i++
			return escaped, true
		case '\\':
			escaped = true
			w.i++
		}
	}
	return false, false
}

func (w *textWalker) skipSpace() int {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return w.i
		}
	}
	return w.i
}
