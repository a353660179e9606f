package otlp

import (
	"encoding/binary"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// nestedProto returns an OTLP request whose resource has one attribute,
// an array nested levels deep.
func nestedProto(levels int) []byte {
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
	var b []byte
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
	b = append(b, inner...)
	wrap := func(prefix []byte, field byte, body []byte) []byte {
		out := append(prefix, field)
		out = binary.AppendUvarint(out, uint64(len(body)))
		return append(out, body...)
	}
	kv := wrap([]byte{0x0a, 1, 'k'}, 0x12, b) // KeyValue{key, value}
	res := wrap(nil, 0x0a, kv)                // Resource{attributes}
	rs := wrap(nil, 0x0a, res)                // ResourceSpans{resource}
	return wrap(nil, 0x0a, rs)                // request{resource_spans}
}

func uvlen(n int) int { return len(binary.AppendUvarint(nil, uint64(n))) }

func nestedJSON(levels int) []byte {
	return []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":` +
		strings.Repeat(`{"arrayValue":{"values":[`, levels) + `{"stringValue":"x"}` + strings.Repeat(`]}}`, levels) + `}]}}]}`)
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
	// Span attributes are checked too.
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	v := sp.Attributes().PutEmptySlice("deep")
	for range MaxNesting + 5 {
		v = v.AppendEmpty().SetEmptySlice()
	}
	var pm ptrace.ProtoMarshaler
	b, _ := pm.MarshalTraces(td)
	if _, err := DecodeProto(b); err == nil {
		t.Error("deep span attribute accepted")
	}
}

// TestDeepInputDoesNotCrash decodes a few megabytes nested millions of
// levels deep, in a child process so that a crash fails this test only:
// without the nesting check, pdata's recursive decoder overflows the stack
// (a fatal error no recover catches) and takes the collector down.
func TestDeepInputDoesNotCrash(t *testing.T) {
	if kind := os.Getenv("LOUPE_DEEP_CHILD"); kind != "" {
		var err error
		if kind == "proto" {
			_, err = DecodeProto(nestedProto(3_000_000))
		} else {
			_, err = DecodeJSON(nestedJSON(3_000_000))
		}
		if err == nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	for _, kind := range []string{"proto", "json"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDeepInputDoesNotCrash$")
		cmd.Env = append(os.Environ(), "LOUPE_DEEP_CHILD="+kind)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: decoding deep input: %v\n%.500s", kind, err, out)
		}
	}
}
