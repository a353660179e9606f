package trace

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends r's JSON encoding (one line, no trailing newline) to b
// and returns the extended buffer. It produces the same document as
// json.Marshal(r) with fields in the same order, without reflection; sinks
// use it to encode records without allocating.
func (r *Record) AppendJSON(b []byte) []byte {
	v := r.V
	if v == 0 {
		v = Version
	}
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(v), 10)
	b = append(b, `,"trace_id":"`...)
	b = hex.AppendEncode(b, r.TraceID[:])
	b = append(b, `","span_id":"`...)
	b = hex.AppendEncode(b, r.SpanID[:])
	b = append(b, '"')
	if !r.ParentID.IsZero() {
		b = append(b, `,"parent_id":"`...)
		b = hex.AppendEncode(b, r.ParentID[:])
		b = append(b, '"')
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","type":`...)
	b = appendJSONString(b, string(r.Type))
	if r.Name != "" {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, r.Name)
	}
	if r.Iteration != 0 {
		b = append(b, `,"iteration":`...)
		b = strconv.AppendInt(b, int64(r.Iteration), 10)
	}
	if r.Depth != 0 {
		b = append(b, `,"depth":`...)
		b = strconv.AppendInt(b, int64(r.Depth), 10)
	}
	if r.Duration != 0 {
		b = append(b, `,"duration_ns":`...)
		b = strconv.AppendInt(b, int64(r.Duration), 10)
	}
	if r.Status != "" {
		b = append(b, `,"status":`...)
		b = appendJSONString(b, r.Status)
	}
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, r.Error)
	}
	b = appendValue(b, `,"input":`, r.Input)
	b = appendValue(b, `,"output":`, r.Output)
	b = appendValue(b, `,"thinking":`, r.Thinking)
	if r.Usage != (Usage{}) {
		u := &r.Usage
		b = append(b, `,"usage":{`...)
		n := len(b)
		if u.Provider != "" {
			b = append(b, `"provider":`...)
			b = appendJSONString(b, u.Provider)
		}
		b = appendInt(b, n, "input_tokens", u.InputTokens)
		b = appendInt(b, n, "output_tokens", u.OutputTokens)
		b = appendInt(b, n, "cached_tokens", u.CachedTokens)
		b = appendInt(b, n, "reasoning_tokens", u.ReasoningTokens)
		// JSON has no NaN or infinity: a NaN cost is left out (as 0 is)
		// and an infinite one written as the largest float, so that the
		// line stays valid JSON (stores refuse both, store.ValidateRecord).
		if c := u.CostUSD; c != 0 && !math.IsNaN(c) {
			if len(b) > n {
				b = append(b, ',')
			}
			b = append(b, `"cost_usd":`...)
			b = strconv.AppendFloat(b, max(-math.MaxFloat64, min(c, math.MaxFloat64)), 'g', -1, 64)
		}
		if u.CostUnknown {
			if len(b) > n {
				b = append(b, ',')
			}
			b = append(b, `"cost_unknown":true`...)
		}
		b = append(b, '}')
	}
	if ri := r.Run; ri != nil {
		if len(ri.Tags) > 0 {
			b = append(b, `,"tags":[`...)
			for i, t := range ri.Tags {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, t)
			}
			b = append(b, ']')
		}
		if ri.Session != "" {
			b = append(b, `,"session":`...)
			b = appendJSONString(b, ri.Session)
		}
		if ri.User != "" {
			b = append(b, `,"user":`...)
			b = appendJSONString(b, ri.User)
		}
	}
	return append(b, '}')
}

func appendInt(b []byte, start int, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	if len(b) > start {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, v, 10)
}

func appendValue(b []byte, key string, v Value) []byte {
	if len(v) == 0 {
		return b
	}
	b = append(b, key...)
	// Values made by JSON, Text and Raw are valid JSON, but a Value is a
	// byte slice anyone can build; checking here keeps every line valid.
	if bytes.IndexByte(v, '\n') < 0 && bytes.IndexByte(v, '\r') < 0 && ValidJSON(v) {
		return append(b, v...) // the common case: already one valid line
	}
	// Compact so that one record stays one line.
	var buf bytes.Buffer
	if json.Compact(&buf, v) == nil {
		return append(b, buf.Bytes()...)
	}
	// Not JSON (a Value built without JSON, Text or Raw): keep the bytes as
	// a string rather than break the line.
	return appendJSONString(b, string(v))
}

// MarshalJSON implements json.Marshaler with AppendJSON.
func (r Record) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

const hexDigits = "0123456789abcdef"

// AppendString appends s to b as a JSON string, escaped exactly as
// encoding/json escapes it, and returns the extended buffer. Code that
// builds Values by hand on a hot path uses it instead of json.Marshal.
func AppendString(b []byte, s string) []byte { return appendJSONString(b, s) }

// appendJSONString appends s as a JSON string, escaping as encoding/json
// does (including <, > and & so output is safe to embed in HTML).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// wireRecord mirrors Record with plain strings for the fields whose errors
// DecodeRecord reports itself, so that each error names its field, and
// with Record.Run's fields at the top level, where the encoding has them.
type wireRecord struct {
	V         *int            `json:"v"`
	TraceID   string          `json:"trace_id"`
	SpanID    string          `json:"span_id"`
	ParentID  string          `json:"parent_id"`
	Seq       uint64          `json:"seq"`
	Time      string          `json:"time"`
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Iteration int             `json:"iteration"`
	Depth     int             `json:"depth"`
	Duration  int64           `json:"duration_ns"`
	Status    string          `json:"status"`
	Error     string          `json:"error"`
	Input     json.RawMessage `json:"input"`
	Output    json.RawMessage `json:"output"`
	Thinking  json.RawMessage `json:"thinking"`
	Usage     Usage           `json:"usage"`
	Tags      []string        `json:"tags"`
	Session   string          `json:"session"`
	User      string          `json:"user"`
}

// FieldError reports a record field that could not be decoded.
type FieldError struct {
	Field string // the JSON field, e.g. "trace_id" or "usage.input_tokens"
	Err   error
}

func (e *FieldError) Error() string { return "field " + e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// DecodeRecord decodes one JSON-encoded record and checks it: the version is
// known, ids are well-formed, the type is in the vocabulary, numbers are not
// negative. Errors are *FieldError values naming the field. Unknown fields
// are ignored so that newer minor additions can be read.
func DecodeRecord(data []byte) (Record, error) {
	var w wireRecord
	if err := json.Unmarshal(data, &w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Record{}, &FieldError{Field: te.Field, Err: fmt.Errorf("want %s, got JSON %s", te.Type, te.Value)}
		}
		return Record{}, fmt.Errorf("record is not a JSON object: %w", err)
	}
	var r Record
	switch {
	case w.V == nil:
		return r, &FieldError{"v", errors.New("missing; every record carries its encoding version")}
	case *w.V < 1 || *w.V > Version:
		return r, &FieldError{"v", fmt.Errorf("version %d is not supported (this build reads 1 to %d); upgrade loupe", *w.V, Version)}
	}
	r.V = *w.V
	if err := r.TraceID.UnmarshalText([]byte(w.TraceID)); err != nil {
		return Record{}, &FieldError{"trace_id", err}
	}
	if r.TraceID.IsZero() {
		return Record{}, &FieldError{"trace_id", errors.New("is all zeros, which W3C trace context forbids")}
	}
	if err := r.SpanID.UnmarshalText([]byte(w.SpanID)); err != nil || r.SpanID.IsZero() {
		if err == nil {
			err = errors.New("missing or all zeros")
		}
		return Record{}, &FieldError{"span_id", err}
	}
	if err := r.ParentID.UnmarshalText([]byte(w.ParentID)); err != nil {
		return Record{}, &FieldError{"parent_id", err}
	}
	r.Seq = w.Seq
	t, err := time.Parse(time.RFC3339Nano, w.Time)
	if err != nil {
		return Record{}, &FieldError{"time", fmt.Errorf("want an RFC 3339 time, got %q", w.Time)}
	}
	r.Time = t
	r.Type = Type(w.Type)
	if !r.Type.Valid() {
		return Record{}, &FieldError{"type", fmt.Errorf("unknown record type %q (known: run.start, tool.end, … custom)", w.Type)}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"iteration", int64(w.Iteration)}, {"depth", int64(w.Depth)}, {"duration_ns", w.Duration},
		{"usage.input_tokens", w.Usage.InputTokens}, {"usage.output_tokens", w.Usage.OutputTokens},
		{"usage.cached_tokens", w.Usage.CachedTokens}, {"usage.reasoning_tokens", w.Usage.ReasoningTokens}} {
		if f.v < 0 {
			return Record{}, &FieldError{f.name, fmt.Errorf("is negative (%d)", f.v)}
		}
	}
	if w.Usage.CostUnknown && w.Usage.CostUSD != 0 {
		return Record{}, &FieldError{"usage.cost_unknown", fmt.Errorf("is true but cost_usd is %v; a call's cost is either known (cost_usd) or unknown (cost_unknown), drop one", w.Usage.CostUSD)}
	}
	r.Name, r.Iteration, r.Depth, r.Duration = w.Name, w.Iteration, w.Depth, time.Duration(w.Duration)
	r.Status, r.Error, r.Usage = w.Status, w.Error, w.Usage
	if len(w.Tags) > 0 || w.Session != "" || w.User != "" {
		r.Run = &RunInfo{Tags: w.Tags, Session: w.Session, User: w.User}
	}
	r.Input, r.Output, r.Thinking = rawValue(w.Input), rawValue(w.Output), rawValue(w.Thinking)
	return r, nil
}

func rawValue(m json.RawMessage) Value {
	if len(m) == 0 || string(m) == "null" {
		return nil
	}
	return Value(m)
}

// UnmarshalJSON implements json.Unmarshaler with DecodeRecord.
func (r *Record) UnmarshalJSON(data []byte) error {
	d, err := DecodeRecord(data)
	if err != nil {
		return err
	}
	*r = d
	return nil
}
