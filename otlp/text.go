package otlp

import (
	"strings"
	"unicode/utf8"

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
	if !w.object(partDoc, 0) || w.skipSpace() < len(w.b) {
		return r.Output.Text(), true
	}
	return w.out.String(), true
}

// textWalker reads an OTLP/JSON traces document, writing the text
// SpanText keeps to out. Its methods return false on anything that is not
// JSON of the expected shape; the walker is then abandoned. It calls no
// function values and decodes strings itself, so that reading a span
// allocates nothing but the text.
type textWalker struct {
	b   []byte
	i   int
	out strings.Builder
}

// part names the objects of the document that the walker reads into.
type part uint8

const (
	partDoc      part = iota // the document: resourceSpans
	partResource             // a ResourceSpans: scopeSpans
	partScope                // a ScopeSpans: spans
	partSpan                 // a span: name, attributes, status
	partStatus               // a span's status: message
	partKeyValue             // a key-value pair: value
	partValue                // an AnyValue: stringValue, intValue, doubleValue, arrayValue, kvlistValue
	partArray                // an ArrayValue: values, AnyValues
	partKvlist               // a KeyValueList: values, key-value pairs
)

// member reads the value of member key of an object p whose values are
// nested d arrays and maps deep.
func (w *textWalker) member(p part, d int, key []byte) bool {
	switch k := string(key); {
	case p == partDoc && k == "resourceSpans":
		return w.array(partResource, d)
	case p == partResource && k == "scopeSpans":
		return w.array(partScope, d)
	case p == partScope && k == "spans":
		return w.array(partSpan, d)
	case p == partSpan && k == "name", p == partStatus && k == "message":
		return w.text()
	case p == partSpan && k == "attributes":
		return w.array(partKeyValue, d)
	case p == partSpan && k == "status":
		return w.object(partStatus, d)
	case p == partKeyValue && k == "value":
		return w.object(partValue, d)
	case p == partValue && (k == "stringValue" || k == "intValue" || k == "doubleValue"):
		return w.text()
	case p == partValue && k == "arrayValue" && d < DefaultMaxDepth:
		return w.object(partArray, d+1)
	case p == partValue && k == "kvlistValue" && d < DefaultMaxDepth:
		return w.object(partKvlist, d+1)
	case p == partArray && k == "values":
		return w.array(partValue, d)
	case p == partKvlist && k == "values":
		return w.array(partKeyValue, d)
	}
	return w.skip()
}

// object reads the object at w.i, a p at depth d.
func (w *textWalker) object(p part, d int) bool {
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
		if !w.member(p, d, key) {
			return false
		}
		if more, ok := w.next('}'); !more {
			return ok
		}
	}
}

// array reads the array at w.i, whose elements are objects p at depth d.
func (w *textWalker) array(p part, d int) bool {
	if w.skipSpace() >= len(w.b) || w.b[w.i] != '[' {
		return false
	}
	w.i++
	if w.skipSpace() < len(w.b) && w.b[w.i] == ']' {
		w.i++
		return true
	}
	for {
		if !w.object(p, d) {
			return false
		}
		if more, ok := w.next(']'); !more {
			return ok
		}
	}
}

// next moves past what follows an element of a container that ends with
// end: a comma (more) or end (done, ok); anything else is not ok.
func (w *textWalker) next(end byte) (more, ok bool) {
	if w.skipSpace() >= len(w.b) {
		return false, false
	}
	switch w.b[w.i] {
	case ',':
		w.i++
		return true, true
	case end:
		w.i++
		return false, true
	}
	return false, false
}

// text writes the string or number at w.i to out on a line of its own,
// and skips anything else.
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
			w.newLine()
			w.out.Write(w.b[start:w.i])
		}
		return true
	}
	escaped, ok := w.str()
	if !ok {
		return false
	}
	s := w.b[start+1 : w.i-1]
	if isBlank(s) {
		return true
	}
	w.newLine()
	if !escaped {
		w.out.Write(s)
		return true
	}
	return w.unescape(s)
}

// newLine starts a line of out, unless out is empty.
func (w *textWalker) newLine() {
	if w.out.Len() > 0 {
		w.out.WriteByte('\n')
	}
}

func isBlank(s []byte) bool {
	for _, c := range s {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// unescape writes the JSON string body s, escapes decoded, to out. A
// lone surrogate becomes U+FFFD, as encoding/json decodes it.
func (w *textWalker) unescape(s []byte) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			w.out.WriteByte(c)
			continue
		}
		if i++; i >= len(s) {
			return false
		}
		switch s[i] {
		case '"', '\\', '/':
			w.out.WriteByte(s[i])
		case 'b':
			w.out.WriteByte('\b')
		case 'f':
			w.out.WriteByte('\f')
		case 'n':
			w.out.WriteByte('\n')
		case 'r':
			w.out.WriteByte('\r')
		case 't':
			w.out.WriteByte('\t')
		case 'u':
			r, ok := hex4(s, i+1)
			if !ok {
				return false
			}
			i += 4
			if r >= 0xD800 && r < 0xDC00 { // a high surrogate: a pair?
				if lo, ok := hex4(s, i+3); ok && i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' && lo >= 0xDC00 && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
			}
			if !utf8.ValidRune(r) {
				r = utf8.RuneError
			}
			w.out.WriteRune(r)
		default:
			return false
		}
	}
	return true
}

// hex4 returns the rune of the four hex digits at s[i:].
func hex4(s []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// skip moves past the value at w.i, nested containers included, without
// recursion.
func (w *textWalker) skip() bool {
	depth := 0
	for {
		if w.skipSpace() >= len(w.b) {
			return false
		}
		switch w.b[w.i] {
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
