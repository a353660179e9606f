package store

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

func TestBackendFor(t *testing.T) {
	for _, tt := range []struct{ dsn, want string }{
		{"postgres://u@h/db", "postgres"}, {"POSTGRESQL://u@h/db", "postgres"},
		{"/tmp/x.db", "sqlite"}, {"file:/tmp/x.db", "sqlite"}, {"loupe.db", "sqlite"},
	} {
		if got := BackendFor(tt.dsn); got != tt.want {
			t.Errorf("BackendFor(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}

func TestOpenUnregistered(t *testing.T) {
	// This package's tests register no backend.
	_, err := Open(context.Background(), "postgres://u:secret@127.0.0.1/db")
	if err == nil || !strings.Contains(err.Error(), "without the postgres backend") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Open error = %v", err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/data")
	if got := DefaultPath(); got != filepath.Join("/data", "loupe", "loupe.db") {
		t.Errorf("DefaultPath() = %q", got)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := DefaultPath(); got != "/home/u/.local/share/loupe/loupe.db" {
		t.Errorf("DefaultPath() without XDG_DATA_HOME = %q", got)
	}
}

func TestValidateRecord(t *testing.T) {
	ok := trace.Record{TraceID: trace.NewTraceID(), SpanID: trace.NewSpanID(), Seq: 1, Type: trace.TypeCustom, Time: time.Now()}
	if err := ValidateRecord(0, &ok); err != nil {
		t.Fatal(err)
	}
	bad := ok
	bad.Time = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	var re *RecordError
	if err := ValidateRecord(7, &bad); !errors.As(err, &re) || re.Index != 7 || !strings.Contains(err.Error(), "1678-2261") {
		t.Errorf("far-future time: %v", err)
	}
}

func TestBuildSpans(t *testing.T) {
	a, b, c, orphanParent := trace.SpanID{1}, trace.SpanID{2}, trace.SpanID{3}, trace.SpanID{9}
	x, y := trace.SpanID{4}, trace.SpanID{5}
	t0 := time.Unix(100, 0)
	recs := []trace.Record{
		{Seq: 4, SpanID: b, ParentID: a, Type: trace.TypeToolEnd, Name: "search", Time: t0.Add(3 * time.Second), Duration: 2 * time.Second},
		{Seq: 1, SpanID: a, Type: trace.TypeRunStart, Name: "main", Time: t0},
		{Seq: 2, SpanID: b, ParentID: a, Type: trace.TypeToolStart, Name: "search", Time: t0.Add(time.Second)},
		{Seq: 3, SpanID: c, ParentID: orphanParent, Type: trace.TypeCustom, Time: t0},
		{Seq: 5, SpanID: x, ParentID: y, Type: trace.TypeCustom, Time: t0}, // x and y are each other's parent
		{Seq: 6, SpanID: y, ParentID: x, Type: trace.TypeCustom, Time: t0},
	}
	roots := BuildSpans(recs)
	// The orphan and both spans of the cycle become roots: nothing is lost.
	if len(roots) != 4 || roots[0].ID != a || roots[1].ID != c || roots[2].ID != x || roots[3].ID != y {
		t.Fatalf("roots = %+v", roots)
	}
	if len(roots[0].Children) != 1 || roots[0].Children[0].Duration != 2*time.Second || len(roots[0].Children[0].Seqs) != 2 || !roots[0].Children[0].Start.Equal(t0.Add(time.Second)) {
		t.Errorf("tool span = %+v", roots[0].Children)
	}
}

func TestMemoryOf(t *testing.T) {
	recs := []trace.Record{
		{Seq: 3, Type: trace.TypeMemorySet, Status: "memory", Name: "k", Iteration: 2, Output: trace.Text("b")},
		{Seq: 1, Type: trace.TypeMemorySet, Status: "param", Name: "p", Output: trace.JSON(1)},
		{Seq: 2, Type: trace.TypeMemorySet, Status: "memory", Name: "k", Iteration: 1, Output: trace.Text("a")},
		{Seq: 4, Type: trace.TypeMemorySet, Status: "weird", Name: "g", Output: trace.Text("x")},
		{Seq: 5, Type: trace.TypeMemorySet, Status: "global", Name: "g", Output: trace.Text("y")},
		{Seq: 6, Type: trace.TypeCustom, Name: "k"},
	}
	m := MemoryOf(recs)
	if string(m.Params["p"]) != "1" || string(m.Globals["g"]) != `"y"` {
		t.Errorf("params %v globals %v", m.Params, m.Globals)
	}
	h := m.History["k"]
	if len(h) != 2 || h[0].Step != 1 || string(h[0].Value) != `"a"` || h[1].Step != 2 {
		t.Errorf("history %+v", h)
	}
}

func TestPrefixRange(t *testing.T) {
	for _, tt := range []struct {
		prefix, lo, hi, err string
	}{
		{"ab", "ab000000000000000000000000000000", "abffffffffffffffffffffffffffffff", ""},
		{"ABC", "abc00000000000000000000000000000", "abcfffffffffffffffffffffffffffff", ""},
		{"0102030405060708090a0b0c0d0e0f10", "0102030405060708090a0b0c0d0e0f10", "0102030405060708090a0b0c0d0e0f10", ""},
		{"", "", "", "want 1 to 32 hex digits"},
		{"abg", "", "", `"g" is not a hex digit`},
		{strings.Repeat("a", 33), "", "", "want 1 to 32 hex digits"},
	} {
		lo, hi, err := PrefixRange(tt.prefix)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("PrefixRange(%q) error = %v, want %q", tt.prefix, err, tt.err)
			}
			continue
		}
		if err != nil || lo.String() != tt.lo || hi.String() != tt.hi {
			t.Errorf("PrefixRange(%q) = %s, %s, %v", tt.prefix, lo, hi, err)
		}
	}
}

func TestLostCount(t *testing.T) {
	tests := []struct {
		typ    trace.Type
		output string
		want   int64
	}{
		{trace.TypeDropped, `{"count":12}`, 12},
		{trace.TypeDropped, `{"count":1}`, 1},
		{trace.TypeDropped, `{"count":9223372036854775807}`, MaxLostCount}, // bounded, so sums cannot overflow
		{trace.TypeDropped, `{"count":0}`, 1},                              // a marker says something was lost
		{trace.TypeDropped, `{"count":-5}`, 1},                             // not a count
		{trace.TypeDropped, `{"count":2.5}`, 1},                            // not an integer
		{trace.TypeDropped, `{"count":"7"}`, 1},                            // a string is not a count
		{trace.TypeDropped, `{"count":1e99}`, 1},                           // out of range
		{trace.TypeDropped, `{}`, 1},                                       // no count
		{trace.TypeDropped, ``, 1},                                         // no output
		{trace.TypeDropped, `[1,2]`, 1},                                    // not an object
		{trace.TypeCustom, `{"count":12}`, 0},                              // not a marker
		{trace.TypeToolEnd, `{"count":12}`, 0},                             // not a marker
		{trace.TypeDropped, `{"count":3,"x":1}`, 3},                        // other fields are ignored
	}
	for _, tt := range tests {
		r := trace.Record{Type: tt.typ, Output: trace.Value(tt.output)}
		if got := LostCount(&r); got != tt.want {
			t.Errorf("LostCount(%s %s) = %d, want %d", tt.typ, tt.output, got, tt.want)
		}
	}
}

func FuzzLostCount(f *testing.F) {
	for _, s := range []string{`{"count":12}`, `{"count":-1}`, `{"count":"x"}`, `{`, `null`, `{"count":1e3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		r := trace.Record{Type: trace.TypeDropped, Output: trace.Value(out)}
		if n := LostCount(&r); n < 1 || n > MaxLostCount {
			t.Fatalf("LostCount(%q) = %d; a marker counts 1 to MaxLostCount", out, n)
		}
	})
}

func TestSummaryTokensSaturate(t *testing.T) {
	for _, tt := range []struct{ in, out, want int64 }{
		{3, 4, 7}, {math.MaxInt64, 1, math.MaxInt64}, {math.MaxInt64, math.MaxInt64, math.MaxInt64}, {-5, 2, 2},
	} {
		s := Summary{InputTokens: tt.in, OutputTokens: tt.out}
		if got := s.Tokens(); got != tt.want {
			t.Errorf("Tokens() of %d + %d = %d, want %d", tt.in, tt.out, got, tt.want)
		}
	}
}
