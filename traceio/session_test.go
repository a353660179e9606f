package traceio_test

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

// TestSessionRoundTrip: a run's session and user survive Loupe JSONL and
// OTLP/JSON files, written and read back.
func TestSessionRoundTrip(t *testing.T) {
	tr := trace.New(trace.Options{})
	_, ec := tr.Start(context.Background(), "chat", trace.RunOptions{Input: trace.Text("hi"), Session: "conv-1", User: "ada"})
	ec.End(trace.Text("hello"), nil)
	recs := ec.Records()

	var jsonl bytes.Buffer
	if err := traceio.WriteJSONL(&jsonl, slices.Values(recs)); err != nil {
		t.Fatal(err)
	}
	td, _, _ := otlp.Spans(recs, otlp.SpanOptions{})
	otlpJSON, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		data []byte
		f    traceio.Format
	}{{"loupe", jsonl.Bytes(), traceio.FormatLoupe}, {"otlp", otlpJSON, traceio.FormatOTLP}} {
		var start *trace.Record
		for r, err := range traceio.Read(bytes.NewReader(tt.data), tt.name, tt.f) {
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if r.Type == trace.TypeRunStart {
				start = &r
			}
		}
		if start == nil || start.Session() != "conv-1" || start.User() != "ada" {
			t.Errorf("%s: run.start %+v, want session conv-1 and user ada", tt.name, start)
		}
	}
}
