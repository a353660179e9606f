package tracesview

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

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

func TestCriteriaQuery(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := Criteria{Tool: "web search", Status: "error", Since: "24h", Tags: []string{"env:ci"}, Types: []string{"tool.end"}, MinDuration: time.Second, Errors: true}
	q, err := c.Query([]string{"battery", `"long life"`}, now)
	if err != nil {
		t.Fatal(err)
	}
	if q.Tool != "web search" || q.Status != "error" || !q.Since.Equal(now.Add(-24*time.Hour)) || !slices.Equal(q.Tags, []string{"env:ci"}) ||
		len(q.Types) != 1 || q.MinDuration != time.Second || !q.HasErrors || !slices.Equal(q.Words, []string{"battery"}) || !slices.Equal(q.Phrases, []string{"long life"}) {
		t.Errorf("query = %+v", q)
	}
	if _, err := (Criteria{Since: "yesterday-ish"}).Filter(now); err == nil {
		t.Error("bad --since accepted")
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
