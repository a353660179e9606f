package otlp

import (
	"encoding/binary"
	"fmt"
)

// MaxNesting bounds how deeply attribute values (AnyValue inside arrays
// and maps) may nest in a request before it is decoded. pdata decodes
// recursively without a limit, so a small, deeply nested body (millions
// of levels fit in a few megabytes) would overflow the decoding
// goroutine's stack and kill the process; DecodeProto and DecodeJSON
// refuse such input first.
const MaxNesting = 100

// maxJSONDepth bounds JSON nesting: OTLP/JSON's own structure is about 12
// levels deep and each attribute value level adds 3.
const maxJSONDepth = 12 + 3*MaxNesting + 16

// message types of the OTLP trace schema that lead to AnyValue.
const (
	pbRequest = iota // ExportTraceServiceRequest / TracesData
	pbResourceSpans
	pbResource
	pbScopeSpans
	pbScope
	pbSpan
	pbEvent
	pbLink
	pbKeyValue
	pbAnyValue
	pbArrayValue
	pbKeyValueList
	pbOther // a message or bytes that holds no AnyValue
)

// children maps (message type, field number) to the type of the
// length-delimited field, for the fields that can lead to an AnyValue.
var children = map[[2]int]int{
	{pbRequest, 1}:       pbResourceSpans,
	{pbResourceSpans, 1}: pbResource, {pbResourceSpans, 2}: pbScopeSpans,
	{pbResource, 1}:   pbKeyValue,
	{pbScopeSpans, 1}: pbScope, {pbScopeSpans, 2}: pbSpan,
	{pbScope, 3}: pbKeyValue,
	{pbSpan, 9}:  pbKeyValue, {pbSpan, 11}: pbEvent, {pbSpan, 13}: pbLink,
	{pbEvent, 3}:    pbKeyValue,
	{pbLink, 4}:     pbKeyValue,
	{pbKeyValue, 2}: pbAnyValue,
	{pbAnyValue, 5}: pbArrayValue, {pbAnyValue, 6}: pbKeyValueList,
	{pbArrayValue, 1}:   pbAnyValue,
	{pbKeyValueList, 1}: pbKeyValue,
}

// checkProtoNesting walks the OTLP protobuf b along the fields that can
// hold attribute values and reports values nested deeper than
// MaxNesting. Malformed input is left for the decoder to report.
func checkProtoNesting(b []byte) error {
	return walkProto(b, pbRequest, 0)
}

func walkProto(b []byte, typ, depth int) error {
	if typ == pbAnyValue {
		depth++
		if depth > MaxNesting {
			return fmt.Errorf("attribute values nested deeper than %d levels", MaxNesting)
		}
	}
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return nil
		}
		b = b[n:]
		field, wire := int(tag>>3), int(tag&7)
		switch wire {
		case 0:
			_, n := binary.Uvarint(b)
			if n <= 0 {
				return nil
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return nil
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return nil
			}
			b = b[4:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return nil
			}
			sub := b[n : n+int(l)]
			b = b[n+int(l):]
			if child, ok := children[[2]int{typ, field}]; ok {
				if err := walkProto(sub, child, depth); err != nil {
					return err
				}
			}
		default:
			return nil // groups: not OTLP; the decoder says so
		}
	}
	return nil
}

// checkJSONNesting reports JSON nested deeper than maxJSONDepth.
func checkJSONNesting(b []byte) error {
	depth := 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxJSONDepth {
				return fmt.Errorf("JSON nested deeper than %d levels (attribute values may nest %d deep)", maxJSONDepth, MaxNesting)
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}
