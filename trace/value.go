package trace

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Value is a recorded input, output or payload: one JSON value in its
// encoded form. A nil or empty Value means "not recorded" and encodes as
// null. Values are immutable once recorded: the recorder copies what it is
// given, so a caller may reuse its buffers afterwards.
type Value []byte

// JSON encodes v with encoding/json. If v cannot be encoded the Value is a
// JSON object saying why, so recording never fails.
func JSON(v any) Value {
	switch v := v.(type) {
	case nil:
		return nil
	case Value:
		return v
	case json.RawMessage:
		return Value(v)
	case string:
		return Text(v)
	case int:
		return strconv.AppendInt(nil, int64(v), 10)
	case int64:
		return strconv.AppendInt(nil, v, 10)
	case bool:
		return strconv.AppendBool(nil, v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Text(fmt.Sprintf("<unencodable %T: %v>", v, err))
	}
	return b
}

// Text returns s as a JSON string value.
func Text(s string) Value {
	return appendJSONString(make([]byte, 0, len(s)+2), s)
}

// Raw returns b as a Value if it is one valid JSON value, and otherwise b
// as a JSON string, so that a Value always holds JSON. Recording copies it.
func Raw(b []byte) Value {
	if !ValidJSON(b) {
		return Text(string(b))
	}
	return Value(b)
}

// String returns v's JSON text, or "null" if v is empty.
func (v Value) String() string {
	if len(v) == 0 {
		return "null"
	}
	return string(v)
}

// Text returns v's content as text: the string itself for a JSON string,
// otherwise the JSON text.
func (v Value) Text() string {
	if len(v) > 0 && v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	return v.String()
}

// Decode unmarshals v into dst with encoding/json.
func (v Value) Decode(dst any) error { return json.Unmarshal(v, dst) }

// MarshalJSON implements json.Marshaler.
func (v Value) MarshalJSON() ([]byte, error) {
	if len(v) == 0 {
		return []byte("null"), nil
	}
	return v, nil
}

// UnmarshalJSON implements json.Unmarshaler; it keeps a copy of b. A JSON
// null becomes an empty Value.
func (v *Value) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = nil
		return nil
	}
	*v = append(Value(nil), b...)
	return nil
}

// TruncateUTF8 returns the longest prefix of s that is at most n bytes long
// and does not end in the middle of a character's UTF-8 encoding: s itself
// if it is not longer than n, "" if n ≤ 0. If s is valid UTF-8, so is the
// result. Invalid bytes are kept as they are: only a complete character
// that the cut would split is left out, whole. It looks back at most
// utf8.UTFMax-1 bytes from n, so it takes constant time.
//
// It is the one way Loupe cuts text at a size limit: the recorder's
// truncation marker (Options.MaxValueBytes) and the store's bounds on a
// record's strings use it.
func TruncateUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	if utf8.RuneStart(s[n]) {
		return s[:n] // s[n] begins a character (or is ASCII): nothing is split
	}
	// s[n] continues a character: find where that character starts, at
	// most UTFMax-1 bytes back, and leave it out if it is a whole one.
	for i := n - 1; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if r, size := utf8.DecodeRuneInString(s[i:]); (r != utf8.RuneError || size > 1) && i+size > n {
				return s[:i]
			}
			break
		}
	}
	return s[:n]
}
