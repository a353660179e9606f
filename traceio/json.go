package traceio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// member is one member of a JSON object (or element of an array, key ""),
// with the offset of its value in the document, so errors can give a line.
type member struct {
	key string
	raw json.RawMessage
	off int64
}

// members returns the members of the JSON object raw in document order
// (encoding/json maps lose it), with offsets relative to base. A null or
// absent raw has no members.
func members(raw json.RawMessage, base int64) ([]member, error) {
	return scan(raw, base, '{')
}

// elems returns the elements of the JSON array raw, with offsets.
func elems(raw json.RawMessage, base int64) ([]member, error) {
	return scan(raw, base, '[')
}

func scan(raw json.RawMessage, base int64, open json.Delim) ([]member, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != open {
		want := "an object"
		if open == '[' {
			want = "an array"
		}
		return nil, fmt.Errorf("want %s, got %s", want, kindOf(t))
	}
	var out []member
	for dec.More() {
		var m member
		if open == '{' {
			tok, err := dec.Token()
			if err != nil {
				return out, err
			}
			m.key, _ = tok.(string)
		}
		if err := dec.Decode(&m.raw); err != nil {
			return out, err
		}
		m.off = base + dec.InputOffset() - int64(len(m.raw))
		out = append(out, m)
	}
	return out, nil
}

// kindOf names the kind of JSON value b starts with, for error messages.
func kindOf(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// decodeAt unmarshals m.raw into v; errors name field (plus the path
// inside the value) and the line of data where it went wrong.
func (s *source) decodeAt(data []byte, m member, field string, v any) error {
	err := json.Unmarshal(m.raw, v)
	if err == nil {
		return nil
	}
	e := &Error{File: s.name, Line: lineAt(data, m.off), Field: field, Err: err}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		e.Line = lineAt(data, m.off+te.Offset)
		if te.Field != "" {
			e.Field = field + "." + te.Field
		}
		e.Err = fmt.Errorf("want %s, got JSON %s", te.Type, te.Value)
	}
	return e
}

// parseTime parses the times foreign formats write: RFC 3339, ISO 8601
// without a zone (taken as UTC, as Python's datetime.isoformat writes
// them), or a Unix time in seconds, milliseconds or nanoseconds.
func parseTime(raw json.RawMessage) (time.Time, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, err
		}
		return parseTimeString(s)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("want a time, got %s", kindOf(raw))
	}
	return unixTime(f)
}

func parseTimeString(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return unixTime(f)
	}
	return time.Time{}, fmt.Errorf("want an ISO 8601 time, got %q", s)
}

// unixTime reads a Unix time whose unit is guessed from its size.
func unixTime(f float64) (time.Time, error) {
	switch {
	case math.IsNaN(f) || f < 0 || f > 1e19:
		return time.Time{}, fmt.Errorf("time %v is out of range", f)
	case f < 1e11: // seconds
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	case f < 1e14: // milliseconds
		return time.UnixMilli(int64(f)).UTC(), nil
	case f < 1e17: // microseconds
		return time.UnixMicro(int64(f)).UTC(), nil
	}
	return time.Unix(0, int64(f)).UTC(), nil
}

// millis converts a duration in (fractional) milliseconds, rejecting
// negative and absurd values.
func millis(ms float64) (time.Duration, error) {
	if math.IsNaN(ms) || ms < 0 || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, fmt.Errorf("duration %v ms is out of range", ms)
	}
	return time.Duration(math.Round(ms * float64(time.Millisecond))), nil
}

// optMillis is millis of *ms, or 0 when ms is nil (the member is absent).
func optMillis(ms *float64) (time.Duration, error) {
	if ms == nil {
		return 0, nil
	}
	return millis(*ms)
}

// textOf returns raw as text: a JSON string's content, or the JSON itself.
func textOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
