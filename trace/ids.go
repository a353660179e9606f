package trace

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
)

// TraceID identifies one trace: a run and everything it caused. It is the
// W3C Trace Context / OpenTelemetry trace id: 16 bytes, written as 32
// lowercase hex digits. The zero value is invalid and means "no trace".
type TraceID [16]byte

// SpanID identifies one span inside a trace: 8 bytes, written as 16
// lowercase hex digits, as in OpenTelemetry. The zero value means "no span"
// (for example the parent of a root span).
type SpanID [8]byte

// NewTraceID returns a random, non-zero trace id. It is safe for concurrent use.
func NewTraceID() TraceID {
	var id TraceID
	for id.IsZero() {
		putUint64(id[:8], rand.Uint64())
		putUint64(id[8:], rand.Uint64())
	}
	return id
}

// NewSpanID returns a random, non-zero span id. It is safe for concurrent use.
func NewSpanID() SpanID {
	var id SpanID
	for id.IsZero() {
		putUint64(id[:], rand.Uint64())
	}
	return id
}

func putUint64(b []byte, v uint64) {
	_ = b[7]
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

// IsZero reports whether id is the zero (invalid) trace id.
func (id TraceID) IsZero() bool { return id == TraceID{} }

// IsZero reports whether id is the zero span id.
func (id SpanID) IsZero() bool { return id == SpanID{} }

// String returns the 32-digit lowercase hex form of id.
func (id TraceID) String() string { return hex.EncodeToString(id[:]) }

// String returns the 16-digit lowercase hex form of id.
func (id SpanID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText implements encoding.TextMarshaler.
func (id TraceID) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, id[:]), nil }

// MarshalText implements encoding.TextMarshaler.
func (id SpanID) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, id[:]), nil }

// UnmarshalText implements encoding.TextUnmarshaler. It accepts exactly 32
// hex digits, in either case.
func (id *TraceID) UnmarshalText(b []byte) error { return decodeID(id[:], b, "trace id") }

// UnmarshalText implements encoding.TextUnmarshaler. It accepts exactly 16
// hex digits, in either case. An empty text decodes to the zero id.
func (id *SpanID) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*id = SpanID{}
		return nil
	}
	return decodeID(id[:], b, "span id")
}

// ParseTraceID parses the hex form of a trace id.
func ParseTraceID(s string) (TraceID, error) {
	var id TraceID
	err := id.UnmarshalText([]byte(s))
	return id, err
}

// ParseSpanID parses the hex form of a span id.
func ParseSpanID(s string) (SpanID, error) {
	var id SpanID
	err := id.UnmarshalText([]byte(s))
	return id, err
}

func decodeID(dst, src []byte, what string) error {
	if len(src) != 2*len(dst) {
		return fmt.Errorf("%s %q: want %d hex digits, got %d", what, src, 2*len(dst), len(src))
	}
	if _, err := hex.Decode(dst, src); err != nil {
		return fmt.Errorf("%s %q: not hex: %v", what, src, err)
	}
	return nil
}
