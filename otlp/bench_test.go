package otlp

import (
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// BenchmarkDecodeAndMap decodes an OTLP protobuf request of the 5 GenAI
// spans in testdata/genai.json and maps it to records: the collector's
// cost per request apart from the store. cpu-ns/op is the process's CPU
// time per request (unix), which a loaded machine disturbs less than
// ns/op.
func BenchmarkDecodeAndMap(b *testing.B) {
	td := decodeFile(b, "testdata/genai.json")
	var pm ptrace.ProtoMarshaler
	pb, err := pm.MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(pb)))
	cpu := cpuTime()
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
	if cpu > 0 {
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkDecodeAndMapDialects does the same for each dialect fixture
// (TestDialects), whose spans carry their content as JSON documents that
// the dialect readers parse: the cost per span is reported as ns/span.
func BenchmarkDecodeAndMapDialects(b *testing.B) {
	for _, c := range dialectCases {
		b.Run(strings.TrimSuffix(c.file, ".json"), func(b *testing.B) {
			raw, err := os.ReadFile("testdata/" + c.file)
			if err != nil {
				b.Fatal(err)
			}
			td, err := DecodeJSON(raw)
			if err != nil {
				b.Fatal(err)
			}
			n := td.SpanCount()
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
				if res := Map(td, nil); res.Spans != n {
					b.Fatal(res.Spans)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/span")
		})
	}
}
