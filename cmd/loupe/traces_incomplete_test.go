package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// TestTracesIncomplete checks that ls and show mark a trace whose run never
// ended, once silent longer than --stale-after, and the records it lost.
func TestTracesIncomplete(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "loupe.db")
	tid, root := trace.NewTraceID(), trace.NewSpanID()
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	recs := []trace.Record{
		{V: trace.Version, TraceID: tid, SpanID: root, Seq: 1, Time: t0, Type: trace.TypeRunStart, Name: "crashy"},
		{V: trace.Version, TraceID: tid, SpanID: trace.NewSpanID(), ParentID: root, Seq: 2, Time: t0.Add(time.Second), Type: trace.TypeDropped, Name: "records", Output: trace.JSON(map[string]int{"count": 5})},
		{V: trace.Version, TraceID: tid, SpanID: trace.NewSpanID(), ParentID: root, Seq: 3, Time: t0.Add(2 * time.Second), Type: trace.TypeDropped, Name: "records", Output: trace.JSON(map[string]int{"count": 2})},
	}
	var b []byte
	for i := range recs {
		b = append(recs[i].AppendJSON(b), '\n')
	}
	file := filepath.Join(dir, "crashy.jsonl")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, db, "traces", "import", file)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"traces", "ls"}, []string{"crashy", "incomplete (7 lost)"}},
		{[]string{"traces", "ls", "--stale-after", "-1ns"}, []string{"running (7 lost)"}},
		{[]string{"traces", "ls", "--status", "incomplete"}, []string{"crashy"}},
		{[]string{"traces", "show", tid.String()}, []string{"incomplete (7 lost)", "incomplete: 7 records lost by the recorder", "the run never ended (silent since 2025-06-01T12:00:02Z"}},
		{[]string{"traces", "show", "--stale-after", "-1ns", tid.String()}, []string{"running (7 lost)", "incomplete: 7 records lost"}},
	}
	for _, tt := range tests {
		out := mustRun(t, db, tt.args...)
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("loupe %s:\n%s\nlacks %q", strings.Join(tt.args, " "), out, w)
			}
		}
	}
	if out := mustRun(t, db, "traces", "ls", "--status", "running"); strings.Contains(out, "crashy") {
		t.Errorf("--status running lists the dead trace:\n%s", out)
	}
	if out := mustRun(t, db, "traces", "show", "--stale-after", "-1ns", tid.String()); strings.Contains(out, "never ended") {
		t.Errorf("with --stale-after -1ns the trace is still said to have never ended:\n%s", out)
	}
}
