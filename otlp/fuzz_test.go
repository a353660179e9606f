package otlp

import (
	"os"
	"path/filepath"
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
