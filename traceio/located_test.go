package traceio

import (
	"iter"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestReadLocated checks that ReadLocated gives each record of a JSON-lines
// file the line it was read from (blank lines counted), and the same
// records Read gives.
func TestReadLocated(t *testing.T) {
	golden, err := os.ReadFile("testdata/fragola_otel-traces.jsonl.golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(golden)), "\n")[:3]
	tests := []struct {
		name      string
		input     string
		wantLines []int
	}{
		{"one per line", lines[0] + lines[1] + lines[2], []int{1, 2, 3}},
		{"blank lines", "\n" + lines[0] + "\n  \n" + lines[1] + "\n" + lines[2], []int{2, 5, 7}},
		{"no final newline", lines[0] + strings.TrimSpace(lines[1]), []int{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			i := 0
			want := Read(strings.NewReader(tt.input), "x.jsonl", FormatLoupe)
			next, stop := iter.Pull2(want)
			defer stop()
			for loc, err := range ReadLocated(strings.NewReader(tt.input), "x.jsonl", FormatLoupe) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, loc.Line)
				r, _, ok := next()
				if !ok || r.Seq != loc.Record.Seq || r.TraceID != loc.Record.TraceID {
					t.Errorf("record %d differs from Read's", i)
				}
				i++
			}
			if !slices.Equal(got, tt.wantLines) {
				t.Errorf("lines %v, want %v", got, tt.wantLines)
			}
		})
	}
	// An error carries the line it is on too.
	sawErr := false
	for loc, err := range ReadLocated(strings.NewReader(lines[0]+"{not json\n"), "x.jsonl", FormatLoupe) {
		if err != nil {
			sawErr = true
			if loc.Line != 2 {
				t.Errorf("error %v at line %d, want 2", err, loc.Line)
			}
		}
	}
	if !sawErr {
		t.Error("a bad line gave no error")
	}
}

// FuzzReadLocated checks, for any input in any format, that ReadLocated
// yields what Read yields, with lines that start at 1 and never go back.
func FuzzReadLocated(f *testing.F) {
	seed(f, "fragola_otel-traces.jsonl.golden.jsonl", "omni_session_rag_demo.trace.json.golden.jsonl", "agentv_static-trace.json.golden.jsonl")
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, stop := iter.Pull2(Read(strings.NewReader(string(data)), "fuzz.in", FormatAuto))
		defer stop()
		last := 0
		for loc, err := range ReadLocated(strings.NewReader(string(data)), "fuzz.in", FormatAuto) {
			r, werr, ok := want()
			if !ok || (err == nil) != (werr == nil) {
				t.Fatalf("ReadLocated gave (%v), Read gave (%v, more %v)", err, werr, ok)
			}
			if err != nil {
				return
			}
			if r.Seq != loc.Record.Seq || r.TraceID != loc.Record.TraceID || r.Type != loc.Record.Type {
				t.Fatalf("ReadLocated's record differs from Read's")
			}
			if loc.Line < last || loc.Line < 0 {
				t.Fatalf("line %d after line %d", loc.Line, last)
			}
			last = loc.Line
		}
		if _, _, more := want(); more {
			t.Fatal("Read gave more records than ReadLocated")
		}
	})
}
