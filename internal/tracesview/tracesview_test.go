package tracesview

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/store"
)

func TestHighlight(t *testing.T) {
	tests := []struct {
		s       string
		words   []string
		phrases []string
		want    string
	}{
		{"Why use typed languages?", []string{"typed", "languages"}, nil, "Why use [typed] [languages]?"},
		{"Battery life and battery", nil, []string{"battery life"}, "[Battery life] and battery"},
		{"typedef typed", []string{"typed"}, nil, "typedef [typed]"},
		{"a b", []string{"a", "b"}, []string{"a b"}, "[a b]"},
		{"İstanbul TYPED", []string{"typed"}, nil, "İstanbul [TYPED]"},
		{"nothing", nil, nil, "nothing"},
	}
	for _, tt := range tests {
		if got := Highlight(tt.s, store.Query{Words: tt.words, Phrases: tt.phrases}); got != tt.want {
			t.Errorf("Highlight(%q, %v %v) = %q, want %q", tt.s, tt.words, tt.phrases, got, tt.want)
		}
	}
}

// TestShowHidesOTelSpanRecords: the otel.span records of an OTLP trace are
// left out of the tree and counted in a note.
func TestShowHidesOTelSpanRecords(t *testing.T) {
	b, err := os.ReadFile("../../otlp/testdata/genai.json")
	if err != nil {
		t.Fatal(err)
	}
	td, err := otlp.DecodeJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	recs := otlp.Map(td, nil).Records
	var out bytes.Buffer
	if err := Show(&out, store.NewTrace(store.Summary{ID: recs[0].TraceID, Name: "support"}, recs), ShowOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "custom otel.span") || !strings.Contains(out.String(), "(5 OpenTelemetry spans kept whole") ||
		!strings.Contains(out.String(), "tool lookup_order") {
		t.Errorf("show:\n%s", out.String())
	}
}
