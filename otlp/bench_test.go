package otlp

import (
	"os"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// BenchmarkDecodeAndMap decodes an OTLP protobuf request of the 5 GenAI
// spans in testdata/genai.json and maps it to records: the collector's
// cost per request apart from the store.
func BenchmarkDecodeAndMap(b *testing.B) {
	raw, err := os.ReadFile("testdata/genai.json")
	if err != nil {
		b.Fatal(err)
	}
	td, err := DecodeJSON(raw)
	if err != nil {
		b.Fatal(err)
	}
	var pm ptrace.ProtoMarshaler
	pb, err := pm.MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(pb)))
	for b.Loop() {
		td, err := DecodeProto(pb)
		if err != nil {
			b.Fatal(err)
		}
		if res := Map(td, nil); res.Spans != 5 {
			b.Fatal(res.Spans)
		}
	}
	b.ReportMetric(float64(b.N*5)/b.Elapsed().Seconds(), "spans/s")
}
