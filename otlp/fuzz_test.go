package otlp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// FuzzMap decodes arbitrary bytes as OTLP/JSON and as protobuf and maps
// what decodes: it must not panic, and every record must be one a store
// accepts, decoding back to itself.
func FuzzMap(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	var pm ptrace.ProtoMarshaler
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if td, err := DecodeJSON(b); err == nil {
			if pb, err := pm.MarshalTraces(td); err == nil {
				f.Add(pb)
			}
		}
	}
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01","spanId":"02"}]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, dec := range []func([]byte) (ptrace.Traces, error){DecodeJSON, DecodeProto} {
			td, err := dec(b)
			if err != nil {
				continue
			}
			res := Map(td, &Options{MaxValueBytes: 256, MaxDepth: 4})
			checkWellFormed(t, res.Records)
			if _, err := Traces(res.Records); err != nil {
				t.Errorf("companion records do not decode: %v", err)
			}
		}
	})
}

// fixtures returns the OTLP/JSON documents in testdata and, for each, the
// same traces as OTLP protobuf.
func fixtures(f *testing.F) (docs, protos [][]byte) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		f.Fatal(files, err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var u ptrace.JSONUnmarshaler
		td, err := u.UnmarshalTraces(b)
		if err != nil {
			f.Fatal(err)
		}
		docs, protos = append(docs, b), append(protos, marshalProto(f, td))
	}
	return docs, protos
}

// FuzzProtoNesting checks the protobuf guard against pdata's decoder:
// whatever the guard lets through must decode without panicking, and if
// it decodes, to attribute values nested at most MaxNesting levels.
func FuzzProtoNesting(f *testing.F) {
	_, protos := fixtures(f)
	for _, b := range protos {
		f.Add(b)
		f.Add(cat(emptyGroup, b))
	}
	for _, n := range []int{0, 1, 2, 50, MaxNesting - 1, MaxNesting, MaxNesting + 1} {
		f.Add(nestedProto(n))
		f.Add(cat(emptyGroup, nestedProto(n)))
		f.Add(cat(pbTag(99, 3), pbTag(1, 0), []byte{0}, nestedProto(n)))
		f.Add(pbLen(1, pbLen(1000, pbLen(2, pbLen(9, nestedKV(n))))))
		f.Add(pbLen(1, pbLen(1<<32|1, pbLen(1, nestedKV(n)))))
	}
	for _, where := range []string{"resource", "scope", "span", "event", "link"} {
		f.Add(marshalProto(f, deepTraces(where, MaxNesting-1, false)))
		f.Add(marshalProto(f, deepTraces(where, MaxNesting, true)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkProtoNesting(b) != nil {
			return
		}
		var u ptrace.ProtoUnmarshaler
		td, err := u.UnmarshalTraces(b)
		if err != nil {
			return
		}
		if n := maxNesting(td); n > MaxNesting {
			t.Errorf("the guard let through attribute values nested %d levels deep", n)
		}
	})
}

// FuzzJSONNesting checks the OTLP/JSON guard against encoding/json and
// pdata's decoder: it must refuse all invalid JSON, and call only that
// malformed; whatever it lets through must decode without panicking, and
// if it decodes, to attribute values nested at most MaxNesting levels.
func FuzzJSONNesting(f *testing.F) {
	docs, _ := fixtures(f)
	for _, b := range docs {
		f.Add(b)
	}
	for _, n := range []int{0, 1, 2, 50, MaxNesting - 1, MaxNesting, MaxNesting + 1} {
		f.Add(nestedJSON(n))
		f.Add([]byte(strings.ReplaceAll(string(nestedJSON(n)), `"arrayValue"`, `"\u0061rrayValue"`)))
	}
	for _, n := range []int{1, 5, MaxNesting + 1} {
		f.Add(bracketlessJSON(n))
		f.Add(afterErrorJSON(n))
	}
	for _, where := range []string{"resource", "scope", "span", "event", "link"} {
		f.Add(marshalJSON(f, deepTraces(where, MaxNesting-1, false)))
		f.Add(marshalJSON(f, deepTraces(where, MaxNesting-1, true)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkJSONNesting(b)
		switch valid := json.Valid(b); {
		case valid && err != nil && strings.HasPrefix(err.Error(), "malformed JSON"):
			t.Fatalf("valid JSON refused: %v", err)
		case !valid && err == nil:
			t.Fatal("invalid JSON let through")
		}
		if err != nil {
			return
		}
		var u ptrace.JSONUnmarshaler
		td, err := u.UnmarshalTraces(b)
		if err != nil {
			return
		}
		if n := maxNesting(td); n > MaxNesting {
			t.Errorf("the guard let through attribute values nested %d levels deep", n)
		}
	})
}
