package trace_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/trace"
)

func TestTruncateUTF8(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 3, "abc"},
		{"abc", 2, "ab"},
		{"abc", 0, ""},
		{"abc", -1, ""},
		{"", 3, ""},
		{"aé", 2, "a"},         // é is 2 bytes: not split
		{"aé", 3, "aé"},        // whole
		{"a€b", 2, "a"},        // € is 3 bytes
		{"a€b", 3, "a"},        //
		{"a€b", 4, "a€"},       //
		{"😀x", 3, ""},          // 4 bytes
		{"😀x", 4, "😀"},         //
		{"a\xffb", 2, "a\xff"}, // invalid UTF-8 is kept, not looked back past
		{"a\x80\x80\x80\x80b", 3, "a\x80\x80"},
		{"a\xe2\x82", 2, "a\xe2"}, // an incomplete character at the end is not a whole one: cut where asked
		{"ab\xe2\x82\xacc", 3, "ab"},
	} {
		if got := trace.TruncateUTF8(tt.s, tt.n); got != tt.want {
			t.Errorf("TruncateUTF8(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func FuzzTruncateUTF8(f *testing.F) {
	for _, s := range []string{"abc", "aé€😀", "a\xffb\xe2\x82", ""} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := trace.TruncateUTF8(s, n)
		if !strings.HasPrefix(s, got) || len(got) > max(n, 0) && len(got) != len(s) || len(got) > len(s) {
			t.Fatalf("TruncateUTF8(%q, %d) = %q: not a prefix within n", s, n, got)
		}
		if n >= len(s) && got != s {
			t.Fatalf("TruncateUTF8(%q, %d) = %q, want s", s, n, got)
		}
		// At most UTFMax-1 bytes short, and never splitting a character.
		if n > 0 && n < len(s) && len(got) < n-(utf8.UTFMax-1) {
			t.Fatalf("TruncateUTF8(%q, %d) = %q: cut too much", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("TruncateUTF8(%q, %d) = %q: split a character", s, n, got)
		}
	})
}

// TestTruncateInvalidUTF8 checks that the truncation marker of a value
// with invalid UTF-8 early on keeps its head (it used to shrink the head
// a byte at a time until it was valid, to nothing, in quadratic time) and
// is valid JSON in valid UTF-8.
func TestTruncateInvalidUTF8(t *testing.T) {
	v := append(trace.Value(`"`+"\xff"), strings.Repeat("é", 1<<20)...)
	v = append(v, '"')
	tr := trace.New(trace.Options{MaxValueBytes: 64 << 10})
	_, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
	start := time.Now()
	ec.ToolCall("t", v, nil, time.Millisecond, nil)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("recording took %v", d)
	}
	got := ec.Records()[1].Input
	if ok, n := got.Truncated(); !ok || n != len(v) {
		t.Fatalf("input %.80s…: not a truncation marker of %d bytes", got, len(v))
	}
	var m struct{ Head string }
	if err := json.Unmarshal(got, &m); err != nil || !utf8.Valid(got) {
		t.Fatalf("marker is not JSON in valid UTF-8: %v", err)
	}
	if want := "\"\uFFFD" + strings.Repeat("é", (64<<10-2)/2); m.Head != want {
		t.Errorf("head has %d bytes, want %d", len(m.Head), len(want))
	}
}

func TestStatsSaturate(t *testing.T) {
	var s trace.Stats
	huge := trace.Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64 - 1, CachedTokens: math.MaxInt64, ReasoningTokens: math.MaxInt64, CostUSD: math.MaxFloat64}
	for range 3 {
		s.Add(&trace.Record{Type: trace.TypeModelCall, Name: "m", Usage: huge})
		s.Add(&trace.Record{Type: trace.TypeToolEnd, Name: "t", Duration: math.MaxInt64 / 2})
	}
	// Negative and NaN numbers count as nothing.
	s.Add(&trace.Record{Type: trace.TypeModelCall, Name: "m", Usage: trace.Usage{InputTokens: -5, OutputTokens: math.MinInt64, CostUSD: math.NaN()}})
	s.Add(&trace.Record{Type: trace.TypeModelCall, Name: "m", Usage: trace.Usage{CostUSD: math.Inf(-1)}})
	s.Add(&trace.Record{Type: trace.TypeToolEnd, Name: "t", Duration: -time.Hour})
	m, o := s.ByModel["m"], s.ByTool["t"]
	if s.InputTokens != math.MaxInt64 || s.OutputTokens != math.MaxInt64 || s.CachedTokens != math.MaxInt64 || s.ReasoningTokens != math.MaxInt64 ||
		s.CostUSD != math.MaxFloat64 || s.TotalTokens() != math.MaxInt64 || s.ModelCalls != 5 {
		t.Errorf("stats %+v: want sums stopped at the maximum", s)
	}
	if m.InputTokens != math.MaxInt64 || m.OutputTokens != math.MaxInt64 || m.CostUSD != math.MaxFloat64 || m.Calls != 5 {
		t.Errorf("model stats %+v", m)
	}
	if o.Total != math.MaxInt64 || o.Max != math.MaxInt64/2 || o.Calls != 4 {
		t.Errorf("tool stats %+v", o)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Errorf("stats do not encode: %v", err)
	}
	// Ordinary sums are unchanged.
	var small trace.Stats
	small.Add(&trace.Record{Type: trace.TypeModelCall, Usage: trace.Usage{InputTokens: 3, OutputTokens: 4, CostUSD: 0.25}})
	small.Add(&trace.Record{Type: trace.TypeModelCall, Usage: trace.Usage{InputTokens: 5, CostUSD: 0.5}})
	if small.InputTokens != 8 || small.TotalTokens() != 12 || small.CostUSD != 0.75 {
		t.Errorf("small stats %+v", small)
	}
}

// TestEncodeNonFiniteCost checks that a record whose cost JSON cannot hold
// still encodes as valid JSON that decodes.
func TestEncodeNonFiniteCost(t *testing.T) {
	for _, tt := range []struct {
		cost float64
		want float64
	}{{math.NaN(), 0}, {math.Inf(1), math.MaxFloat64}, {math.Inf(-1), -math.MaxFloat64}} {
		r := trace.Record{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Seq: 1, Time: time.Unix(0, 0).UTC(), Type: trace.TypeModelCall,
			Usage: trace.Usage{InputTokens: 1, CostUSD: tt.cost}}
		b, err := json.Marshal(r)
		if err != nil || !json.Valid(b) {
			t.Fatalf("cost %v: json.Marshal = %s, %v", tt.cost, b, err)
		}
		var u struct {
			Usage struct {
				CostUSD float64 `json:"cost_usd"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(b, &u); err != nil || u.Usage.CostUSD != tt.want {
			t.Errorf("cost %v encoded as %s (%v), want %v", tt.cost, b, err, tt.want)
		}
	}
}
