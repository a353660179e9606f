package otlp

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// nestedKV returns a KeyValue{key: "k", value: …} whose value is an array
// nested levels deep around the string "x" (levels+1 AnyValue levels).
func nestedKV(levels int) []byte {
	inner := []byte{0x0a, 1, 'x'} // AnyValue{string_value: "x"}
	type size struct{ av, arr int }
	sizes := make([]size, levels)
	cur := len(inner)
	for i := range levels {
		arr := 1 + uvlen(cur) + cur // ArrayValue{values: …}
		av := 1 + uvlen(arr) + arr  // AnyValue{array_value: …}
		sizes[i] = size{av, arr}
		cur = av
	}
	b := []byte{0x0a, 1, 'k', 0x12} // KeyValue{key: "k", value: …}
	b = binary.AppendUvarint(b, uint64(cur))
	for i := levels - 1; i >= 0; i-- {
		b = append(b, 0x2a)
		b = binary.AppendUvarint(b, uint64(sizes[i].arr))
		b = append(b, 0x0a)
		in := len(inner)
		if i > 0 {
			in = sizes[i-1].av
		}
		b = binary.AppendUvarint(b, uint64(in))
	}
	return append(b, inner...)
}

// nestedProto returns an OTLP request whose resource has one attribute,
// an array nested levels deep.
func nestedProto(levels int) []byte {
	return pbLen(1, pbLen(1, pbLen(1, nestedKV(levels)))) // request{resource_spans{resource{attributes}}}
}

func uvlen(n int) int { return len(binary.AppendUvarint(nil, uint64(n))) }

// pbTag returns the tag of field num with wire type wire.
func pbTag(num uint64, wire int) []byte { return binary.AppendUvarint(nil, num<<3|uint64(wire)) }

// pbLen returns field num as a length-delimited field holding body.
func pbLen(num uint64, body []byte) []byte {
	b := binary.AppendUvarint(pbTag(num, 2), uint64(len(body)))
	return append(b, body...)
}

// longVarint encodes v as a varint of n bytes, padded with zero groups,
// which protobuf decoders accept.
func longVarint(v uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(v&0x7f) | 0x80
		v >>= 7
	}
	b[n-1] &= 0x7f
	return b
}

// cat concatenates byte slices.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// emptyGroup is an empty group of field 99 (start and end group), which
// pdata's decoder skips as an unknown field.
var emptyGroup = cat(pbTag(99, 3), pbTag(99, 4))

func nestedJSON(levels int) []byte {
	return []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":` +
		strings.Repeat(`{"arrayValue":{"values":[`, levels) + `{"stringValue":"x"}` + strings.Repeat(`]}}`, levels) + `}]}}]}`)
}

// bracketlessJSON is invalid JSON that jsoniter nevertheless reads as
// attribute values nested levels deep: after a member name, a comma
// opens an object and, in an array, an element.
func bracketlessJSON(levels int) []byte {
	return []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":` +
		strings.Repeat(`,"arrayValue":,"values":,`, levels) + `}]}}]}`)
}

// afterErrorJSON is valid JSON, nested 7 levels deep, that pdata's decoder
// reads as attribute values nested about reps levels deep: the boolValue
// 1 is an error, after which jsoniter cannot push bytes back and reads
// each [1,"arrayValue"] as the start of an array value (the "1" taken for
// the element's "{") whose first member is arrayValue (the "]" taken for
// the ":").
func afterErrorJSON(reps int) []byte {
	return []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"arrayValue":{"values":[{"boolValue":1}]` +
		strings.Repeat(`,"values":[1,"arrayValue"]`, reps) + `}}}]}}]}`)
}

// deepTraces returns traces with one attribute, in the place named by
// where, whose value nests levels arrays (or maps, if kvlist) deep around
// an empty value: levels+1 AnyValue levels.
func deepTraces(where string, levels int, kvlist bool) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ss := rs.ScopeSpans().AppendEmpty()
	sp := ss.Spans().AppendEmpty()
	var attrs pcommon.Map
	switch where {
	case "resource":
		attrs = rs.Resource().Attributes()
	case "scope":
		attrs = ss.Scope().Attributes()
	case "span":
		attrs = sp.Attributes()
	case "event":
		attrs = sp.Events().AppendEmpty().Attributes()
	case "link":
		attrs = sp.Links().AppendEmpty().Attributes()
	default:
		panic(where)
	}
	v := attrs.PutEmpty("deep")
	for range levels {
		if kvlist {
			v = v.SetEmptyMap().PutEmpty("k")
		} else {
			v = v.SetEmptySlice().AppendEmpty()
		}
	}
	return td
}

func marshalProto(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	var m ptrace.ProtoMarshaler
	b, err := m.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func marshalJSON(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	var m ptrace.JSONMarshaler
	b, err := m.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// valueNesting returns how many AnyValue levels v has.
func valueNesting(v pcommon.Value) int {
	inner := 0
	switch v.Type() {
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		for i := range s.Len() {
			inner = max(inner, valueNesting(s.At(i)))
		}
	case pcommon.ValueTypeMap:
		inner = mapNesting(v.Map())
	}
	return 1 + inner
}

// mapNesting returns how many AnyValue levels the values of m have.
func mapNesting(m pcommon.Map) int {
	n := 0
	for _, v := range m.All() {
		n = max(n, valueNesting(v))
	}
	return n
}

// maxNesting returns how many AnyValue levels the deepest attribute value
// of td (resource, scope, span, event or link) has.
func maxNesting(td ptrace.Traces) int {
	n := 0
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		rs := rss.At(i)
		n = max(n, mapNesting(rs.Resource().Attributes()))
		sss := rs.ScopeSpans()
		for j := range sss.Len() {
			ss := sss.At(j)
			n = max(n, mapNesting(ss.Scope().Attributes()))
			sps := ss.Spans()
			for k := range sps.Len() {
				sp := sps.At(k)
				n = max(n, mapNesting(sp.Attributes()))
				for l := range sp.Events().Len() {
					n = max(n, mapNesting(sp.Events().At(l).Attributes()))
				}
				for l := range sp.Links().Len() {
					n = max(n, mapNesting(sp.Links().At(l).Attributes()))
				}
			}
		}
	}
	return n
}

func TestNestingLimit(t *testing.T) {
	for _, tt := range []struct {
		name   string
		decode func([]byte) (ptrace.Traces, error)
		make   func(int) []byte
	}{{"proto", DecodeProto, nestedProto}, {"json", DecodeJSON, nestedJSON}} {
		if _, err := tt.decode(tt.make(MaxNesting - 1)); err != nil {
			t.Errorf("%s: %d levels refused: %v", tt.name, MaxNesting-1, err)
		}
		if _, err := tt.decode(tt.make(MaxNesting + 10)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
			t.Errorf("%s: %d levels: %v", tt.name, MaxNesting+10, err)
		}
	}
	// Every place attribute values live is checked, in arrays and maps:
	// MaxNesting levels decode, one more does not.
	for _, where := range []string{"resource", "scope", "span", "event", "link"} {
		for _, kvlist := range []bool{false, true} {
			for _, enc := range []struct {
				name   string
				encode func(testing.TB, ptrace.Traces) []byte
				decode func([]byte) (ptrace.Traces, error)
			}{{"proto", marshalProto, DecodeProto}, {"json", marshalJSON, DecodeJSON}} {
				name := fmt.Sprintf("%s %s kvlist=%v", enc.name, where, kvlist)
				td, err := enc.decode(enc.encode(t, deepTraces(where, MaxNesting-1, kvlist)))
				if err != nil {
					t.Errorf("%s: %d levels refused: %v", name, MaxNesting, err)
				} else if n := maxNesting(td); n != MaxNesting {
					t.Errorf("%s: decoded %d levels, want %d", name, n, MaxNesting)
				}
				if _, err := enc.decode(enc.encode(t, deepTraces(where, MaxNesting, kvlist))); err == nil || !strings.Contains(err.Error(), "nested deeper") {
					t.Errorf("%s: %d levels: %v", name, MaxNesting+1, err)
				}
			}
		}
	}
}

// TestProtoGuardRefuses checks that what the protobuf guard cannot walk to
// the end is refused with a message that says why and where, never left
// for pdata's decoder.
func TestProtoGuardRefuses(t *testing.T) {
	shallow := nestedProto(1)
	for _, tt := range []struct {
		name string
		in   []byte
		want string // a substring of the error
	}{
		// Groups, which OTLP never uses: pdata skips an unknown one and
		// decodes on, so the guard would lose track of what follows.
		{"empty group before the request", cat(emptyGroup, shallow), "protobuf: field 99 at byte offset 0 uses a group (wire type 3), which OTLP does not use"},
		{"group before a deep request", cat(emptyGroup, nestedProto(MaxNesting+10)), "uses a group (wire type 3)"},
		{"end group alone", cat(pbTag(99, 4), shallow), "field 99 at byte offset 0 uses a group (wire type 4)"},
		{"group after the request", cat(shallow, emptyGroup), fmt.Sprintf("at byte offset %d uses a group", len(shallow))},
		{"group in a field of the path", cat(pbTag(1, 3), shallow, pbTag(1, 4)), "field 1 at byte offset 0 uses a group"},
		{"unterminated group", cat(pbTag(99, 3), shallow), "uses a group"},
		{"group in a resource", pbLen(1, pbLen(1, cat(emptyGroup, nestedKV(1)))), "field 99 at byte offset 4 uses a group"},
		{"group in an attribute value", pbLen(1, pbLen(1, pbLen(1, cat([]byte{0x0a, 1, 'k'}, pbLen(2, cat(emptyGroup, []byte{0x0a, 1, 'x'})))))), "field 99 at byte offset 11 uses a group"},
		{"group in an array", pbLen(1, pbLen(1, pbLen(1, cat([]byte{0x0a, 1, 'k'}, pbLen(2, pbLen(5, emptyGroup)))))), "field 99 at byte offset 13 uses a group"},

		// Malformed input.
		{"truncated tag", []byte{0x80}, "malformed protobuf at byte 0: the input ends inside the tag"},
		{"truncated varint", []byte{0x10, 0x80}, "malformed protobuf at byte 1: the input ends inside the value of field 2"},
		{"varint longer than 10 bytes", cat([]byte{0x10}, bytes.Repeat([]byte{0xff}, 10), []byte{1}), "malformed protobuf at byte 1: the value of field 2 is a varint longer than 10 bytes"},
		{"tag longer than 10 bytes", cat(bytes.Repeat([]byte{0x80}, 10), []byte{1}), "the tag is a varint longer than 10 bytes"},
		{"truncated fixed64", []byte{0x11, 1, 2, 3}, "malformed protobuf at byte 1: field 2 needs 8 bytes, 3 left"},
		{"truncated fixed32", []byte{0x15, 1}, "malformed protobuf at byte 1: field 2 needs 4 bytes, 1 left"},
		{"truncated length", []byte{0x0a, 0x80}, "malformed protobuf at byte 1: the input ends inside the length of field 1"},
		{"length past the end", []byte{0x0a, 5, 1, 2}, "malformed protobuf at byte 0: field 1 is 5 bytes long, 2 left in its message"},
		{"huge length", cat([]byte{0x12}, bytes.Repeat([]byte{0xff}, 9), []byte{1}), "field 2 is 18446744073709551615 bytes long"},
		{"length past its message", pbLen(1, []byte{0x12, 9}), "malformed protobuf at byte 2: field 2 is 9 bytes long, 0 left"},
		{"field 0", []byte{0x02, 0}, "malformed protobuf at byte 0: field number 0"},
		{"field 0 in a span", pbLen(1, pbLen(2, pbLen(2, []byte{0x00, 0}))), "malformed protobuf at byte 6: field number 0"},
		{"wire type 6", []byte{0x0e}, "malformed protobuf at byte 0: field 1 has wire type 6"},
		{"wire type 7", []byte{0x17}, "field 2 has wire type 7"},
		{"field number past 2^29-1", cat(pbTag(1<<29, 0), []byte{0}), "field number 536870912 is out of range"},
		// pdata keeps the low 32 bits of a field number: this is field 1.
		{"field number that wraps to 1", pbLen(1<<32|1, pbLen(1, pbLen(1, nestedKV(MaxNesting+10)))), "field number 4294967297 is out of range"},
		{"field of the path as a varint", []byte{0x08, 1}, "malformed protobuf at byte 0: field 1 of ExportTraceServiceRequest has wire type 0, want 2"},
		{"attribute value as fixed64", pbLen(1, pbLen(1, pbLen(1, cat([]byte{0x0a, 1, 'k', 0x11}, make([]byte, 8))))), "field 2 of KeyValue has wire type 1, want 2"},

		// Attribute values too deep on a path that is easy to miss.
		{"deprecated instrumentation_library_spans", pbLen(1, pbLen(1000, pbLen(2, pbLen(9, nestedKV(MaxNesting))))), "attribute values nested deeper than 100 levels"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkProtoNesting(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkProtoNesting: %v, want an error with %q", err, tt.want)
			}
			if len(err.Error()) > 200 {
				t.Errorf("message of %d bytes: %.300s", len(err.Error()), err)
			}
			if _, err := DecodeProto(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeProto: %v", err)
			}
		})
	}
}

// TestProtoGuardAccepts checks that requests pdata decodes and the guard
// can walk, including unusual but valid encodings, still decode, to what
// pdata alone makes of them.
func TestProtoGuardAccepts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	type input struct {
		name string
		in   []byte
	}
	var inputs []input
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var u ptrace.JSONUnmarshaler
		td, err := u.UnmarshalTraces(raw)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, input{filepath.Base(p), marshalProto(t, td)})
	}
	one := nestedKV(1)
	inputs = append(inputs, []input{
		{"empty request", nil},
		{"unknown fields of every wire type", pbLen(1, pbLen(1, cat(
			[]byte{0x78, 1},                      // field 15, varint
			[]byte{0x79, 1, 2, 3, 4, 5, 6, 7, 8}, // field 15, fixed64
			[]byte{0x7d, 1, 2, 3, 4},             // field 15, fixed32
			pbLen(15, []byte{0x08, 1}),           // field 15, bytes
			pbLen(1, one)))),
		},
		{"non-minimal varints", cat(longVarint(1<<3|2, 2), longVarint(uint64(len(nestedProto(1))-2), 5), nestedProto(1)[2:])},
		{"10-byte varint with bits past 64", cat([]byte{0x10}, bytes.Repeat([]byte{0xff}, 9), []byte{0x7f}, nestedProto(1))},
		{"deprecated instrumentation_library_spans", pbLen(1, pbLen(1000, pbLen(2, pbLen(9, nestedKV(MaxNesting-1)))))},
		{"deepest allowed", nestedProto(MaxNesting - 1)},
		{"highest field number", cat(pbTag(maxFieldNumber, 0), []byte{0}, nestedProto(1))},
	}...)
	for _, tt := range inputs {
		t.Run(tt.name, func(t *testing.T) {
			var u ptrace.ProtoUnmarshaler
			want, err := u.UnmarshalTraces(tt.in)
			if err != nil {
				t.Fatalf("pdata: %v", err)
			}
			got, err := DecodeProto(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(marshalProto(t, got), marshalProto(t, want)) {
				t.Error("DecodeProto and pdata decode differently")
			}
		})
	}
}

// TestJSONGuard checks the OTLP/JSON guard: valid JSON within the limits
// decodes as pdata alone decodes it, anything else is refused.
func TestJSONGuard(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	type input struct {
		name string
		in   []byte
	}
	accept := []input{
		{"deepest allowed", nestedJSON(MaxNesting - 1)},
		{"white space", []byte(" \t\r\n{ \"resourceSpans\" : [ ] } \n")},
		{"empty document", []byte(`{}`)},
		{"escapes", []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"\"k\\\/\b\f\n\r\t\u00e9\ud83d\ude00","value":{"stringValue":"[{,\"arrayValue\":"}}]}}]}`)},
		{"numbers", []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"doubleValue":-0.5e-3}},{"key":"i","value":{"intValue":0}},{"key":"e","value":{"doubleValue":1E+2}}]}}]}`)},
		{"literals", []byte(`{"resourceSpans":[{"resource":null,"scopeSpans":[{"scope":{"attributes":[{"key":"b","value":{"boolValue":true}},{"key":"f","value":{"boolValue":false}}]}}]}]}`)},
	}
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		accept = append(accept, input{filepath.Base(p), raw})
	}
	for _, tt := range accept {
		t.Run(tt.name, func(t *testing.T) {
			var u ptrace.JSONUnmarshaler
			want, err := u.UnmarshalTraces(tt.in)
			if err != nil {
				t.Fatalf("pdata: %v", err)
			}
			got, err := DecodeJSON(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(marshalProto(t, got), marshalProto(t, want)) {
				t.Error("DecodeJSON and pdata decode differently")
			}
		})
	}

	escapedArray := strings.ReplaceAll(string(nestedJSON(MaxNesting)), `"arrayValue"`, `"\u0061rrayValue"`)
	for _, tt := range []struct {
		name, in, want string
	}{
		{"bracketless nesting", string(bracketlessJSON(3)), "malformed JSON at byte 64: want a value, not ','"},
		{"nesting after an error", string(afterErrorJSON(MaxNesting + 1)), "JSON names arrayValue or kvlistValue right after a comma more than 100 times"},
		{"escaped member names", escapedArray, "attribute values nested deeper than 100 levels"},
		{"snake case member names", strings.ReplaceAll(string(nestedJSON(MaxNesting)), `"arrayValue"`, `"array_value"`), "nested deeper"},
		{"too deep", `{"a":` + strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth) + `}`, "JSON nested deeper than"},
		{"two documents", `{}{}`, "malformed JSON at byte 2: want nothing after the JSON value"},
		{"trailing comma", `{"resourceSpans":[],}`, "malformed JSON at byte 20: want a member name"},
		{"missing colon", `{"a" 1}`, "want ':' after a member name"},
		{"mismatched brackets", `{"a":[}`, "want a value, not '}'"},
		{"object closed by a bracket", `{"a":1]`, "want ',' or '}' in an object"},
		{"truncated", `{"resourceSpans":[`, "the input ends before the JSON value does"},
		{"truncated string", `{"a`, "the input ends inside a string"},
		{"control character", "{\"a\x01\":1}", "control character 0x01 in a string"},
		{"bad escape", `{"\x":1}`, `malformed JSON at byte 2: invalid escape`},
		{"bad unicode escape", `{"\u12g4":1}`, `invalid \u escape`},
		{"bad number", `{"a":01}`, "want ',' or '}' in an object, not '1'"},
		{"bad fraction", `{"a":1.}`, "want a value, not '}'"},
		{"bad literal", `{"a":nul}`, "want a value, not 'n'"},
		{"empty", ``, "the input ends before the JSON value does"},
		{"byte order mark", "\ufeff{}", "malformed JSON at byte 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkJSONNesting([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkJSONNesting: %v, want an error with %q", err, tt.want)
			}
			if len(err.Error()) > 250 {
				t.Errorf("message of %d bytes: %.300s", len(err.Error()), err)
			}
			if strings.HasPrefix(err.Error(), "malformed JSON") == json.Valid([]byte(tt.in)) {
				t.Errorf("encoding/json.Valid says %v", json.Valid([]byte(tt.in)))
			}
			if _, err := DecodeJSON([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeJSON: %v", err)
			}
		})
	}
}

func TestIsEscapedJSONContainer(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want bool
	}{
		{`\u0061rrayValue`, true},
		{`arrayValu\u0065`, true},
		{`\u0061\u0072\u0072\u0061\u0079\u0056\u0061\u006c\u0075\u0065`, true},
		{`array\u005Fvalue`, true},
		{`\u006BvlistValue`, true},
		{`kvlist\u005fvalue`, true},
		{`\u0041rrayValue`, false},
		{`arrayValue\u0000`, false},
		{`arrayValue\n`, false},
		{`\/arrayValue`, false},
		{`\u00e1rrayValue`, false},
		{`kvlist_value\u0073`, false},
	} {
		if got := isEscapedJSONContainer([]byte(tt.raw)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.raw, got, tt.want)
		}
		var s string
		if err := json.Unmarshal([]byte(`"`+tt.raw+`"`), &s); err != nil || isJSONContainer(s) != tt.want {
			t.Errorf("%s: encoding/json reads %q (%v)", tt.raw, s, err)
		}
	}
}

// deepInputs are inputs of tens of megabytes nested millions of levels
// deep, or read so by pdata, that must be refused: pdata's recursive
// decoders would overflow the stack on each of them without the guards.
var deepInputs = map[string]struct {
	decode func([]byte) (ptrace.Traces, error)
	make   func() []byte
	want   string
}{
	"proto":                      {DecodeProto, func() []byte { return nestedProto(3_000_000) }, "nested deeper"},
	"proto after a group":        {DecodeProto, func() []byte { return cat(emptyGroup, nestedProto(3_000_000)) }, "uses a group"},
	"proto deprecated spans":     {DecodeProto, func() []byte { return pbLen(1, pbLen(1000, pbLen(2, pbLen(9, nestedKV(3_000_000))))) }, "nested deeper"},
	"proto wrapped field number": {DecodeProto, func() []byte { return pbLen(1, pbLen(1<<32|1, pbLen(1, nestedKV(3_000_000)))) }, "out of range"},
	"json":                       {DecodeJSON, func() []byte { return nestedJSON(3_000_000) }, "nested deeper"},
	"json bracketless":           {DecodeJSON, func() []byte { return bracketlessJSON(3_000_000) }, "malformed JSON"},
	"json after an error":        {DecodeJSON, func() []byte { return afterErrorJSON(4_000_000) }, "right after a comma"},
}

// TestDeepInputDoesNotCrash decodes each of deepInputs in a child process,
// so that a crash fails this test only: a stack overflow is a fatal error
// that no recover catches, which would take the collector down.
func TestDeepInputDoesNotCrash(t *testing.T) {
	if name := os.Getenv("LOUPE_DEEP_CHILD"); name != "" {
		in, ok := deepInputs[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "no deep input %q\n", name)
			os.Exit(4)
		}
		_, err := in.decode(in.make())
		if err == nil || !strings.Contains(err.Error(), in.want) {
			fmt.Fprintf(os.Stderr, "decoded with error %v, want one with %q\n", err, in.want)
			os.Exit(3)
		}
		os.Exit(0)
	}
	for _, name := range slices.Sorted(maps.Keys(deepInputs)) {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestDeepInputDoesNotCrash$")
			cmd.Env = append(os.Environ(), "LOUPE_DEEP_CHILD="+name)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("decoding deep input: %v\n%.500s", err, out)
			}
		})
	}
}
