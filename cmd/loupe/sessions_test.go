package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// sessionsFile writes a JSONL file of four runs, with fixed ids: three of
// session conv-a (user ada), the last with a failing tool, and one of
// no session.
func sessionsFile(t *testing.T) string {
	t.Helper()
	var b []byte
	t0 := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	for i, s := range []storetest.Spec{
		{Name: "concierge", Session: "conv-a", User: "ada", Steps: 1},
		{Name: "concierge", Session: "conv-a", User: "ada", Steps: 1, Tool: "book"},
		{Name: "concierge", Session: "conv-a", User: "ada", Steps: 1, Tool: "book", ToolErr: "sold out"},
		{Name: "batch", Steps: 1},
	} {
		s.Start = t0.Add(time.Duration(i) * time.Hour)
		recs := storetest.Gen(s)
		id := trace.TraceID{0xa0 + byte(i), 1}
		spans := map[trace.SpanID]trace.SpanID{}
		for j := range recs {
			r := &recs[j]
			r.TraceID = id
			for _, p := range []*trace.SpanID{&r.SpanID, &r.ParentID} {
				if p.IsZero() {
					continue
				}
				if _, ok := spans[*p]; !ok {
					spans[*p] = trace.SpanID{0xa0 + byte(i), byte(len(spans) + 1)}
				}
				*p = spans[*p]
			}
			b = append(r.AppendJSON(b), '\n')
		}
	}
	path := filepath.Join(t.TempDir(), "sessions.jsonl")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSessionsCommands(t *testing.T) {
	fixedNow(t)
	db := filepath.Join(t.TempDir(), "loupe.db")
	mustRun(t, db, "traces", "import", sessionsFile(t))
	golden.Check(t, "sessions_ls.txt", []byte(mustRun(t, db, "sessions", "ls")))
	golden.Check(t, "sessions_show.txt", []byte(mustRun(t, db, "sessions", "show", "conv-a")))
	golden.Check(t, "traces_ls_session.txt", []byte(mustRun(t, db, "traces", "ls", "--session", "conv-a", "--user", "ada")))
	if out := mustRun(t, db, "sessions", "ls", "--user", "bob"); strings.Count(out, "\n") != 1 {
		t.Errorf("sessions ls --user bob:\n%s", out)
	}
	if out := mustRun(t, db, "sessions", "show", "conv-a", "--runs", "1", "--json"); !strings.Contains(out, `"runs": 3`) || strings.Count(out, `"trace_id"`) != 1 {
		t.Errorf("sessions show --runs 1 --json:\n%s", out)
	}
	if out := mustRun(t, db, "traces", "ls", "--name", "batch"); strings.Contains(out, "SESSION") {
		t.Errorf("traces ls shows a session column for runs of none:\n%s", out)
	}
	if _, _, err := run(t, db, "sessions", "show", "nope"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("sessions show nope: %v", err)
	}
}
