package otlp

import (
	"errors"
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
// levels deep and each attribute value level adds 3 (an array) or 4 (a
// map).
const maxJSONDepth = 12 + 4*MaxNesting + 16

// maxFieldNumber is the largest field number protobuf allows.
const maxFieldNumber = 1<<29 - 1

// pbMessage is a message type of the OTLP trace schema that can lead to
// an AnyValue.
type pbMessage uint8

const (
	pbRequest       pbMessage = iota // ExportTraceServiceRequest, or TracesData
	pbResourceSpans                  // ResourceSpans
	pbResource                       // Resource
	pbScopeSpans                     // ScopeSpans
	pbScope                          // InstrumentationScope
	pbSpan                           // Span
	pbEvent                          // Span.Event
	pbLink                           // Span.Link
	pbKeyValue                       // KeyValue
	pbAnyValue                       // AnyValue
	pbArrayValue                     // ArrayValue
	pbKeyValueList                   // KeyValueList
	pbLogsRequest                    // ExportLogsServiceRequest, or LogsData
	pbResourceLogs                   // ResourceLogs
	pbScopeLogs                      // ScopeLogs
	pbLogRecord                      // LogRecord
)

// pbNames names the message types in errors.
var pbNames = [...]string{
	pbRequest:       "ExportTraceServiceRequest",
	pbResourceSpans: "ResourceSpans",
	pbResource:      "Resource",
	pbScopeSpans:    "ScopeSpans",
	pbScope:         "InstrumentationScope",
	pbSpan:          "Span",
	pbEvent:         "Span.Event",
	pbLink:          "Span.Link",
	pbKeyValue:      "KeyValue",
	pbAnyValue:      "AnyValue",
	pbArrayValue:    "ArrayValue",
	pbKeyValueList:  "KeyValueList",
	pbLogsRequest:   "ExportLogsServiceRequest",
	pbResourceLogs:  "ResourceLogs",
	pbScopeLogs:     "ScopeLogs",
	pbLogRecord:     "LogRecord",
}

// pbField is a field number of a message type.
type pbField struct {
	msg pbMessage
	num uint64
}

// children maps the message fields that can lead to an AnyValue to the
// type of their (length-delimited) value. It follows the decoders pdata
// v1.70.0 generates (internal/generated_proto_*.go), which decode exactly
// these fields of these messages as sub-messages on the way to AnyValue:
// every other sub-message they decode (Resource.entity_refs, Span's ids
// and status, …) holds no AnyValue, and every field listed here is
// refused by pdata unless it has wire type 2. ResourceSpans field 1000 is
// the deprecated instrumentation_library_spans, which pdata still decodes
// as ScopeSpans.
var children = map[pbField]pbMessage{
	{pbRequest, 1}:          pbResourceSpans,
	{pbResourceSpans, 1}:    pbResource,
	{pbResourceSpans, 2}:    pbScopeSpans,
	{pbResourceSpans, 1000}: pbScopeSpans,
	{pbResource, 1}:         pbKeyValue,
	{pbScopeSpans, 1}:       pbScope,
	{pbScopeSpans, 2}:       pbSpan,
	{pbScope, 3}:            pbKeyValue,
	{pbSpan, 9}:             pbKeyValue,
	{pbSpan, 11}:            pbEvent,
	{pbSpan, 13}:            pbLink,
	{pbEvent, 3}:            pbKeyValue,
	{pbLink, 4}:             pbKeyValue,
	{pbKeyValue, 2}:         pbAnyValue,
	{pbAnyValue, 5}:         pbArrayValue,
	{pbAnyValue, 6}:         pbKeyValueList,
	{pbArrayValue, 1}:       pbAnyValue,
	{pbKeyValueList, 1}:     pbKeyValue,
	// The logs schema, from ExportLogsServiceRequest (field 1000 of
	// ResourceLogs is the deprecated instrumentation_library_logs, which
	// pdata still decodes as ScopeLogs; a LogRecord's body, field 5, is an
	// AnyValue itself).
	{pbLogsRequest, 1}:     pbResourceLogs,
	{pbResourceLogs, 1}:    pbResource,
	{pbResourceLogs, 2}:    pbScopeLogs,
	{pbResourceLogs, 1000}: pbScopeLogs,
	{pbScopeLogs, 1}:       pbScope,
	{pbScopeLogs, 2}:       pbLogRecord,
	{pbLogRecord, 5}:       pbAnyValue,
	{pbLogRecord, 6}:       pbKeyValue,
}

// checkProtoNesting walks the OTLP protobuf request b along every field
// that can hold an attribute value and reports values nested deeper than
// MaxNesting. It reads varints and lengths as pdata's decoder does, so it
// sees every message the decoder will, and it refuses whatever it cannot
// walk to the end rather than leave it to the decoder: malformed input
// (including field numbers past protobuf's 2^29-1, of which pdata keeps
// only the low 32 bits), and groups (wire types 3 and 4). OTLP never uses
// groups, and pdata skips an unknown one only up to its first field that
// is not a group, then decodes the rest of it as fields of the enclosing
// message.
func checkProtoNesting(b []byte) error {
	return walkProto(b, 0, pbRequest, 0)
}

// checkLogsProtoNesting is checkProtoNesting for an OTLP protobuf
// ExportLogsServiceRequest (or LogsData).
func checkLogsProtoNesting(b []byte) error {
	return walkProto(b, 0, pbLogsRequest, 0)
}

// walkProto walks b, a message of type msg at byte offset off of the
// request, whose attribute values, if it is an AnyValue or inside one,
// are depth levels deep.
func walkProto(b []byte, off int, msg pbMessage, depth int) error {
	if msg == pbAnyValue {
		depth++
		if depth > MaxNesting {
			return fmt.Errorf("attribute values nested deeper than %d levels (at byte %d)", MaxNesting, off)
		}
	}
	for pos := 0; pos < len(b); {
		start := pos
		tag, n := uvarint(b[pos:])
		if n <= 0 {
			return malformed(off+start, n, "tag")
		}
		pos += n
		num, wire := tag>>3, tag&7
		switch {
		case num == 0:
			return fmt.Errorf("malformed protobuf at byte %d: field number 0", off+start)
		case num > maxFieldNumber:
			return fmt.Errorf("malformed protobuf at byte %d: field number %d is out of range", off+start, num)
		}
		switch wire {
		case 3, 4:
			return fmt.Errorf("protobuf: field %d at byte offset %d uses a group (wire type %d), which OTLP does not use; refusing the request", num, off+start, wire)
		case 6, 7:
			return fmt.Errorf("malformed protobuf at byte %d: field %d has wire type %d, which protobuf does not define", off+start, num, wire)
		}
		child, onPath := children[pbField{msg, num}]
		if onPath && wire != 2 {
			return fmt.Errorf("malformed protobuf at byte %d: field %d of %s has wire type %d, want 2 (length-delimited)", off+start, num, pbNames[msg], wire)
		}
		switch wire {
		case 0:
			_, n := uvarint(b[pos:])
			if n <= 0 {
				return malformed(off+pos, n, fmt.Sprintf("value of field %d", num))
			}
			pos += n
		case 1, 5:
			size := 8
			if wire == 5 {
				size = 4
			}
			if len(b)-pos < size {
				return fmt.Errorf("malformed protobuf at byte %d: field %d needs %d bytes, %d left in its message", off+pos, num, size, len(b)-pos)
			}
			pos += size
		case 2:
			l, n := uvarint(b[pos:])
			if n <= 0 {
				return malformed(off+pos, n, fmt.Sprintf("length of field %d", num))
			}
			pos += n
			if l > uint64(len(b)-pos) {
				return fmt.Errorf("malformed protobuf at byte %d: field %d is %d bytes long, %d left in its message", off+start, num, l, len(b)-pos)
			}
			if onPath {
				if err := walkProto(b[pos:pos+int(l)], off+pos, child, depth); err != nil {
					return err
				}
			}
			pos += int(l)
		}
	}
	return nil
}

// uvarint decodes a varint from b as pdata's proto.ConsumeVarint does: at
// most 10 bytes, the bits past the 64th dropped. It returns the value and
// the number of bytes read, 0 if b ends inside the varint and -1 if the
// varint is longer than 10 bytes.
func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i := 0; i < len(b) && i < 10; i++ {
		x |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return x, i + 1
		}
	}
	if len(b) >= 10 {
		return 0, -1
	}
	return 0, 0
}

// malformed reports the varint at byte off that uvarint could not read
// (n is what it returned).
func malformed(off, n int, what string) error {
	if n < 0 {
		return fmt.Errorf("malformed protobuf at byte %d: the %s is a varint longer than 10 bytes", off, what)
	}
	return fmt.Errorf("malformed protobuf at byte %d: the input ends inside the %s", off, what)
}

// isJSONContainer reports whether name is that of a member of an
// OTLP/JSON AnyValue that holds nested attribute values, as pdata's
// decoder spells them.
func isJSONContainer[S string | []byte](name S) bool {
	switch len(name) {
	case 10:
		return string(name) == "arrayValue"
	case 11:
		return string(name) == "array_value" || string(name) == "kvlistValue"
	case 12:
		return string(name) == "kvlist_value"
	}
	return false
}

// isEscapedJSONContainer is isJSONContainer for raw, the text of a valid
// JSON string with escapes.
func isEscapedJSONContainer(raw []byte) bool {
	var name [12]byte
	n := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' {
			// The names are ASCII letters and '_': only \u00XX can
			// spell one of them.
			if raw[i+1] != 'u' {
				return false
			}
			r := 0
			for _, h := range raw[i+2 : i+6] {
				switch {
				case '0' <= h && h <= '9':
					h -= '0'
				case 'a' <= h && h <= 'f':
					h -= 'a' - 10
				default:
					h -= 'A' - 10
				}
				r = r<<4 | int(h)
			}
			if r >= 0x80 {
				return false
			}
			c = byte(r)
			i += 5
		}
		if n == len(name) {
			return false
		}
		name[n] = c
		n++
	}
	return isJSONContainer(name[:n])
}

// checkJSONNesting refuses OTLP/JSON that pdata's decoder might recurse
// through too deeply: b must be valid JSON (RFC 8259), nested at most
// maxJSONDepth levels, with attribute values nested at most MaxNesting
// levels, and with at most MaxNesting arrayValue or kvlistValue strings
// right after a comma.
//
// Validity is needed because pdata's decoder (jsoniter) also reads
// invalid JSON, where it recurses without brackets: in
// "value":,"arrayValue":,"values":,"arrayValue":… every comma opens a
// level. On valid JSON it follows the document's structure until its
// first error (it reads ids and bytes values without unescaping them, but
// an escape in one is an error), so until then the attribute values it
// holds open are ones counted here; each level counts one for every
// arrayValue or kvlistValue member above it (escaped names included),
// whatever the object.
//
// The last rule bounds what happens after an error, which pdata's decoder
// does not stop at: it reads on to the end of the input, out of step with
// the JSON, and can recurse there as deep as the input is long (valid
// JSON of one nesting level can repeat ,"values":[1,"arrayValue"] to
// recurse twice per 26 bytes). Once jsoniter has an error, though, it can
// no longer push a byte back, so a member name can only be read after a
// comma, and only without escapes: each level of attribute values it
// opens after the error takes one raw ,"arrayValue" (or its three other
// spellings, possibly with white space after the comma) from the input.
// OTLP/JSON as encoders write it has none: an attribute value is an
// object with one member.
func checkJSONNesting(b []byte) error {
	type level struct {
		object bool
		nest   int // attribute value levels an object here would be at
	}
	const (
		expValue      = iota // a value
		expValueOrEnd        // a value or ']', after '['
		expKeyOrEnd          // a member name or '}', after '{'
		expKey               // a member name, after ',' in an object
		expColon             // ':' after a member name
		expNext              // ',' or the end of the enclosing object or array
	)
	var (
		stack      []level
		expect     = expValue
		nest       = 1     // the attribute value level of the next value
		container  = false // the next value is that of an arrayValue or kvlistValue member
		comma      = false // the last token was a comma
		commaNames = 0     // raw container names right after a comma
	)
	bad := func(i int, what string) error {
		if i >= len(b) {
			return fmt.Errorf("malformed JSON: the input ends inside %s", what)
		}
		return fmt.Errorf("malformed JSON at byte %d: want %s, not %q", i, what, b[i])
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		wasComma := comma
		comma = false
		switch expect {
		case expColon:
			if c != ':' {
				return bad(i, "':' after a member name")
			}
			expect = expValue
			continue
		case expNext:
			if len(stack) == 0 {
				return bad(i, "nothing after the JSON value")
			}
			top := stack[len(stack)-1]
			switch {
			case c == ',':
				comma = true
				nest, container = top.nest, false
				expect = expValue
				if top.object {
					expect = expKey
				}
			case c == '}' && top.object, c == ']' && !top.object:
				stack = stack[:len(stack)-1]
			case top.object:
				return bad(i, "',' or '}' in an object")
			default:
				return bad(i, "',' or ']' in an array")
			}
			continue
		case expKeyOrEnd, expKey:
			if c == '}' && expect == expKeyOrEnd {
				stack = stack[:len(stack)-1]
				expect = expNext
				continue
			}
			if c != '"' {
				return bad(i, "a member name")
			}
		case expValueOrEnd:
			if c == ']' {
				stack = stack[:len(stack)-1]
				expect = expNext
				continue
			}
		}
		// A value, or a member name where expect says so.
		switch c {
		case '{', '[':
			if len(stack) >= maxJSONDepth {
				return fmt.Errorf("JSON nested deeper than %d levels (attribute values may nest %d deep)", maxJSONDepth, MaxNesting)
			}
			if c == '{' && !container && nest > MaxNesting {
				return fmt.Errorf("attribute values nested deeper than %d levels (at byte %d)", MaxNesting, i)
			}
			stack = append(stack, level{c == '{', nest})
			expect, container = expValueOrEnd, false
			if c == '{' {
				expect = expKeyOrEnd
			}
		case '"':
			start := i
			end, escaped, err := scanJSONString(b, i)
			if err != nil {
				return err
			}
			i = end
			raw := b[start+1 : end]
			if wasComma && isJSONContainer(raw) {
				commaNames++
				if commaNames > MaxNesting {
					return fmt.Errorf("JSON names arrayValue or kvlistValue right after a comma more than %d times (at byte %d); an attribute value should be an object with one member", MaxNesting, start)
				}
			}
			if expect != expKeyOrEnd && expect != expKey {
				expect = expNext
				break
			}
			expect = expColon
			if escaped {
				container = isEscapedJSONContainer(raw)
			} else {
				container = isJSONContainer(raw)
			}
			nest = stack[len(stack)-1].nest
			if container {
				nest++
			}
		case 't', 'f', 'n':
			lit := "null"
			if c == 't' {
				lit = "true"
			} else if c == 'f' {
				lit = "false"
			}
			if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
				return bad(i, "a value")
			}
			i += len(lit) - 1
			expect = expNext
		default:
			end, ok := scanJSONNumber(b, i)
			if !ok {
				return bad(end, "a value")
			}
			i = end - 1
			expect = expNext
		}
	}
	if len(stack) > 0 || expect != expNext {
		return errors.New("malformed JSON: the input ends before the JSON value does")
	}
	return nil
}

// scanJSONString reads the JSON string that starts at b[i] (a quote) and
// returns the index of its closing quote and whether it has escapes.
func scanJSONString(b []byte, i int) (end int, escaped bool, err error) {
	for i++; i < len(b); i++ {
		for i < len(b) && !jsonStringSpecial[b[i]] {
			i++
		}
		if i == len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i, escaped, nil
		case c < 0x20:
			return 0, false, fmt.Errorf("malformed JSON at byte %d: control character %#02x in a string", i, c)
		case c == '\\':
			escaped = true
			i++
			if i >= len(b) {
				break
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 {
					i = len(b)
					break
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return 0, false, fmt.Errorf("malformed JSON at byte %d: invalid \\u escape", i-1)
					}
				}
				i += 4
			default:
				return 0, false, fmt.Errorf("malformed JSON at byte %d: invalid escape", i-1)
			}
		}
	}
	return 0, false, errors.New("malformed JSON: the input ends inside a string")
}

// jsonStringSpecial marks the bytes that end a run of plain characters
// in a JSON string: a quote, a backslash and the control characters.
var jsonStringSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// scanJSONNumber reads the JSON number that starts at b[i] and returns the
// index just past it, or the index of the first byte that does not fit
// and false.
func scanJSONNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}
