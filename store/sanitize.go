package store

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/trace"
)

// The bounds Sanitize puts on a record's strings. A longer string is cut
// at a character boundary and ends with a marker saying how long it was,
// e.g. "…[truncated by loupe: 5000 bytes]", the whole within the bound.
const (
	// MaxNameBytes bounds a record's Name, Status, each of its Tags and
	// its Usage.Provider: names, not text.
	MaxNameBytes = 1 << 10
	// MaxErrorBytes bounds a record's Error.
	MaxErrorBytes = 64 << 10
	// MaxTags bounds how many Tags a record keeps.
	MaxTags = 64
)

// Sanitize makes r fit to store and to encode, whatever a client sent,
// by repairing and bounding its text rather than refusing it:
//
//   - invalid UTF-8 in Name, Status, Error, Tags and Usage.Provider
//     becomes U+FFFD, and so do NUL bytes (which PostgreSQL text cannot
//     hold);
//   - Name, Status, each tag and Usage.Provider longer than MaxNameBytes,
//     and Error longer than MaxErrorBytes, are cut at a character boundary
//     and end with "…[truncated by loupe: N bytes]", N their length
//     (after the repair); beyond MaxTags tags, the last one kept is
//     "…[truncated by loupe: N tags]", N how many there were;
//   - Session and User become trace.BoundID of themselves: invalid
//     UTF-8 and NUL bytes become U+FFFD, and they are cut at a character
//     boundary to MaxSessionBytes, without a marker (they are ids, and
//     the same long id is cut the same way every time);
//   - invalid UTF-8 in Input, Output and Thinking becomes U+FFFD (in
//     valid JSON such bytes can only be inside strings, where the
//     replacement keeps it valid), and a value that is still not one valid
//     JSON value becomes a JSON string holding its text.
//
// Afterwards every string of r is valid UTF-8 within its bound, every
// non-empty Value is valid JSON, and r's JSON encoding is valid UTF-8.
// Sanitize does not bound the size of values: repairing one can lengthen
// it (an invalid byte becomes the three bytes of U+FFFD), so a collector
// bounds them after it (otlp.LimitValue, the recorder's truncation
// marker). Nor does it check ids, times or numbers: ValidateRecord does,
// after it. Sanitize never fails; a record that needs nothing is left as
// it is, without allocating.
//
// Sanitize writes only r's own fields: a Value, or a Run, it changes is
// replaced by a new one, never written into, since records share them (a
// recorded Value is immutable).
//
// It belongs to this package rather than to trace because the bounds are
// what a store accepts from outside the process: the recorder keeps what
// its program hands it, within its capture policy, and its encoder
// already writes any record as valid JSON.
func Sanitize(r *trace.Record) {
	r.Name = sanitizeString(r.Name, MaxNameBytes)
	r.Status = sanitizeString(r.Status, MaxNameBytes)
	r.Error = sanitizeString(r.Error, MaxErrorBytes)
	r.Usage.Provider = sanitizeString(r.Usage.Provider, MaxNameBytes)
	if ri := r.Run; ri != nil {
		tags, session, user := sanitizeTags(ri.Tags), trace.BoundID(ri.Session), trace.BoundID(ri.User)
		if len(tags) > 0 && &tags[0] != &ri.Tags[0] || session != ri.Session || user != ri.User {
			r.Run = &trace.RunInfo{Tags: tags, Session: session, User: user}
		}
	}
	r.Input = sanitizeValue(r.Input)
	r.Output = sanitizeValue(r.Output)
	r.Thinking = sanitizeValue(r.Thinking)
}

// sanitizeString returns s as valid UTF-8 without NUL bytes, within max
// bytes.
func sanitizeString(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= max {
		return s
	}
	marker := truncatedMarker(len(s), "bytes")
	if len(marker) > max {
		return trace.TruncateUTF8(s, max)
	}
	return trace.TruncateUTF8(s, max-len(marker)) + marker
}

// truncatedMarker returns "…[truncated by loupe: N unit]".
func truncatedMarker(n int, unit string) string {
	return "…[truncated by loupe: " + strconv.Itoa(n) + " " + unit + "]"
}

// sanitizeTags returns tags with each tag sanitized and at most MaxTags of
// them, in a new slice if anything changed.
func sanitizeTags(tags []string) []string {
	n := min(len(tags), MaxTags)
	var out []string // nil until something changes
	for i, t := range tags[:n] {
		if c := sanitizeString(t, MaxNameBytes); c != t {
			if out == nil {
				out = append([]string(nil), tags[:n]...)
			}
			out[i] = c
		}
	}
	if len(tags) > MaxTags {
		if out == nil {
			out = append([]string(nil), tags[:n]...)
		}
		out[MaxTags-1] = truncatedMarker(len(tags), "tags")
	}
	if out == nil {
		return tags
	}
	return out
}

// replacement is U+FFFD, which stands for invalid UTF-8.
var replacement = []byte("\uFFFD")

// sanitizeValue returns v as valid UTF-8 and one valid JSON value, in a
// new slice if anything changed.
func sanitizeValue(v trace.Value) trace.Value {
	if len(v) == 0 {
		return v
	}
	if !utf8.Valid(v) {
		v = bytes.ToValidUTF8(v, replacement)
	}
	if !trace.ValidJSON(v) {
		v = trace.Text(string(v))
	}
	return v
}
