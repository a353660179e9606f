package trace

import (
	"strconv"
	"unicode/utf8"
)

// Capture says how much of recorded values (inputs, outputs, thinking)
// a Tracer keeps. The zero value, CaptureFull, keeps everything up to
// Options.MaxValueBytes.
type Capture int

const (
	// CaptureFull keeps values, truncated to Options.MaxValueBytes.
	CaptureFull Capture = iota
	// CaptureMetadata keeps only each value's size, as
	// {"$loupe":"omitted","bytes":N}; names, timings, tokens and errors stay.
	CaptureMetadata
	// CaptureNone drops values entirely.
	CaptureNone
)

// String returns "full", "metadata" or "none".
func (c Capture) String() string {
	switch c {
	case CaptureFull:
		return "full"
	case CaptureMetadata:
		return "metadata"
	case CaptureNone:
		return "none"
	}
	return "Capture(" + strconv.Itoa(int(c)) + ")"
}

// DefaultMaxValueBytes is the size limit for one recorded value when
// Options.MaxValueBytes is zero.
const DefaultMaxValueBytes = 64 << 10

// Field names a Value field of a Record, for Options.Redact.
type Field string

// The Value fields of a Record.
const (
	FieldInput    Field = "input"
	FieldOutput   Field = "output"
	FieldThinking Field = "thinking"
)

// Truncated reports whether v is a truncation marker made by the capture
// policy, and if so how many bytes the original value had.
func (v Value) Truncated() (bool, int) {
	const p = `{"$loupe":"truncated","bytes":`
	if len(v) < len(p) || string(v[:len(p)]) != p {
		return false, 0
	}
	rest := v[len(p):]
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return true, n
}

// truncate returns the marker that stands for v when v is longer than max:
// a JSON object that says it was cut, how big v was, and its first bytes as
// text, so a reader sees both that something is missing and what it was.
func truncate(v Value, max int) Value {
	head := v[:max]
	for len(head) > 0 && !utf8.Valid(head) { // do not split a rune
		head = head[:len(head)-1]
	}
	b := make([]byte, 0, max+64)
	b = append(b, `{"$loupe":"truncated","bytes":`...)
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, `,"head":`...)
	b = appendJSONString(b, string(head))
	return append(b, '}')
}

func omitted(v Value) Value {
	b := make([]byte, 0, 40)
	b = append(b, `{"$loupe":"omitted","bytes":`...)
	b = strconv.AppendInt(b, int64(len(v)), 10)
	return append(b, '}')
}
