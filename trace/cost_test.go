package trace_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/loupe-dev/loupe/schema"
	"github.com/loupe-dev/loupe/trace"
)

const costRecordPrefix = `{"v":1,"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","seq":1,"time":"2026-01-01T00:00:00Z","type":"model.call","name":"m","usage":`

// TestUnknownCostEncoding checks that an unknown cost survives encoding and
// decoding, and that records without the field (all records written before
// it existed) decode as they did: their cost_usd, or 0, is the known cost.
func TestUnknownCostEncoding(t *testing.T) {
	var doc jsonschema.Schema
	if err := json.Unmarshal(schema.RecordV1, &doc); err != nil {
		t.Fatal(err)
	}
	sch, err := doc.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		usage string
		want  trace.Usage
	}{
		{"unknown", `{"input_tokens":10,"output_tokens":2,"cost_unknown":true}`, trace.Usage{InputTokens: 10, OutputTokens: 2, CostUnknown: true}},
		{"unknown, no tokens", `{"cost_unknown":true}`, trace.Usage{CostUnknown: true}},
		{"old record with a cost", `{"input_tokens":10,"cost_usd":0.5}`, trace.Usage{InputTokens: 10, CostUSD: 0.5}},
		{"old record without a cost", `{"input_tokens":10}`, trace.Usage{InputTokens: 10}},
		{"known zero", `{"cost_unknown":false,"input_tokens":10}`, trace.Usage{InputTokens: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := []byte(costRecordPrefix + tt.usage + `}`)
			r, err := trace.DecodeRecord(line)
			if err != nil {
				t.Fatal(err)
			}
			if r.Usage != tt.want {
				t.Fatalf("usage %+v, want %+v", r.Usage, tt.want)
			}
			out := r.AppendJSON(nil)
			if std, err := json.Marshal(r); err != nil || !bytes.Equal(std, out) {
				t.Errorf("json.Marshal differs from AppendJSON:\n%s\n%s", std, out)
			}
			if got := bytes.Contains(out, []byte(`"cost_unknown":true`)); got != tt.want.CostUnknown {
				t.Errorf("encoding %s: cost_unknown written = %v, want %v", out, got, tt.want.CostUnknown)
			}
			again, err := trace.DecodeRecord(out)
			if err != nil || again.Usage != tt.want {
				t.Errorf("round trip: %+v, %v", again.Usage, err)
			}
			var v any
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(v); err != nil {
				t.Errorf("schema refuses %s: %v", out, err)
			}
		})
	}

	// A cost both known and unknown is refused, by the decoder and the schema.
	bad := []byte(costRecordPrefix + `{"cost_usd":0.1,"cost_unknown":true}}`)
	_, err = trace.DecodeRecord(bad)
	var fe *trace.FieldError
	if !errors.As(err, &fe) || fe.Field != "usage.cost_unknown" || !strings.Contains(err.Error(), "drop one") {
		t.Errorf("DecodeRecord(%s) = %v, want a FieldError on usage.cost_unknown", bad, err)
	}
	var v any
	if err := json.Unmarshal(bad, &v); err != nil {
		t.Fatal(err)
	}
	if sch.Validate(v) == nil {
		t.Errorf("schema accepts %s", bad)
	}
}

// TestStatsCountUnpricedCalls checks that Stats keep the known cost and
// the number of calls whose cost is unknown apart, per run and per model.
func TestStatsCountUnpricedCalls(t *testing.T) {
	recs := []trace.Record{
		{Type: trace.TypeModelCall, Name: "priced", Usage: trace.Usage{InputTokens: 10, CostUSD: 0.25}},
		{Type: trace.TypeModelCall, Name: "mystery", Usage: trace.Usage{InputTokens: 10, CostUnknown: true}},
		{Type: trace.TypeModelCall, Name: "mystery", Usage: trace.Usage{InputTokens: 5, CostUnknown: true}},
	}
	st := trace.StatsOf(recs[:1])
	if !st.CostKnown() || st.CostUSD != 0.25 || st.UnpricedCalls != 0 {
		t.Errorf("priced only: %+v", st)
	}
	st = trace.StatsOf(recs)
	if st.CostKnown() || st.CostUSD != 0.25 || st.UnpricedCalls != 2 || st.ModelCalls != 3 {
		t.Errorf("stats %+v: want cost 0.25 with 2 unpriced calls of 3", st)
	}
	if m := st.ByModel["mystery"]; m.UnpricedCalls != 2 || m.CostUSD != 0 || m.Calls != 2 {
		t.Errorf("mystery: %+v", m)
	}
	if m := st.ByModel["priced"]; m.UnpricedCalls != 0 || m.CostUSD != 0.25 {
		t.Errorf("priced: %+v", m)
	}
	b, _ := json.Marshal(st)
	if !bytes.Contains(b, []byte(`"unpriced_calls":2`)) {
		t.Errorf("stats JSON %s lacks unpriced_calls", b)
	}
}
