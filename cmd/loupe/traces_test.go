package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

// realFiles are the trace files in testdata/real that loupe can import.
var realFiles = []string{
	"agentv/static-trace.json",
	"agentv/multi-agent.eval.results.jsonl",
	"omni/session_failed_run.trace.json",
	"omni/session_rag_demo.trace.json",
	"fragola/otel-traces.jsonl",
}

// run runs loupe with args against db in-process and returns stdout,
// stderr and the error.
func run(t *testing.T, db string, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"--db", db}, args...))
	err := root.Execute()
	return out.String(), errOut.String(), err
}

func mustRun(t *testing.T, db string, args ...string) string {
	t.Helper()
	out, errOut, err := run(t, db, args...)
	if err != nil {
		t.Fatalf("loupe %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// fixedNow makes relative times (--since, prune) deterministic: the real
// files' traces are from 2024 to 2026-11.
func fixedNow(t *testing.T) {
	old := nowFunc
	nowFunc = func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }
	t.Cleanup(func() { nowFunc = old })
}

func importAll(t *testing.T, db string) string {
	t.Helper()
	args := []string{"traces", "import"}
	for _, f := range realFiles {
		args = append(args, testrepo.Real(t, f))
	}
	return mustRun(t, db, args...)
}

func TestTracesImportAndList(t *testing.T) {
	fixedNow(t)
	db := filepath.Join(t.TempDir(), "loupe.db")
	out := importAll(t, db)
	for _, want := range []string{
		"static-trace.json: agentv, 10 records in 1 traces (10 new)",
		"multi-agent.eval.results.jsonl: agentv-results, 46 records in 5 traces (46 new, 6 model calls priced)",
		"session_failed_run.trace.json: omni, 12 records in 1 traces (12 new)",
		"session_rag_demo.trace.json: omni, 12 records in 1 traces (12 new)",
		"otel-traces.jsonl: otel-jsonl, 27 records in 4 traces (27 new)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	// Importing again adds nothing.
	if out := importAll(t, db); strings.Count(out, "(0 new") != len(realFiles) {
		t.Errorf("re-import added records:\n%s", out)
	}

	golden.Check(t, "ls.txt", []byte(mustRun(t, db, "traces", "ls")))
	golden.Check(t, "ls_errors.txt", []byte(mustRun(t, db, "traces", "ls", "--errors", "--since", "400d")))

	var page struct {
		Traces []struct {
			ID        string `json:"trace_id"`
			Name      string `json:"name"`
			Status    string `json:"status"`
			ToolCalls int    `json:"tool_calls"`
		} `json:"traces"`
		Next string `json:"next"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "traces", "ls", "--json", "--tool", "WebSearch")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != 1 || page.Traces[0].Name != "research-question" || page.Traces[0].ToolCalls != 7 {
		t.Errorf("ls --tool WebSearch = %+v", page)
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "traces", "ls", "--json", "--limit", "3", "--name", "assistant")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != 3 || page.Next == "" {
		t.Errorf("ls --limit 3 --name assistant: %d traces, next %q", len(page.Traces), page.Next)
	}
	next := mustRun(t, db, "traces", "ls", "--json", "--limit", "3", "--name", "assistant", "--cursor", page.Next)
	page.Next = ""
	if err := json.Unmarshal([]byte(next), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != 1 || page.Next != "" {
		t.Errorf("second page: %+v", page)
	}
	if out := mustRun(t, db, "traces", "ls", "--status", "error", "--tag", "source:omni"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "pipeline") {
		t.Errorf("ls --status error --tag source:omni:\n%s", out)
	}
}

func TestTracesShowSearchExportRmPrune(t *testing.T) {
	fixedNow(t)
	db := filepath.Join(t.TempDir(), "loupe.db")
	importAll(t, db)

	// The omni trace, by a prefix of its id.
	recs, _, err := traceio.ReadFile(testrepo.Real(t, "omni/session_failed_run.trace.json"), traceio.FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	omniID := recs[0].TraceID.String()
	golden.Check(t, "show_omni.txt", []byte(mustRun(t, db, "traces", "show", omniID[:8])))
	golden.Check(t, "show_omni_io.txt", []byte(mustRun(t, db, "traces", "show", "--io", omniID)))
	golden.Check(t, "show_agentv.txt", []byte(mustRun(t, db, "traces", "show", "b03402200f97")))

	var whole struct {
		Records []trace.Record `json:"records"`
		Memory  struct {
			History map[string][]struct {
				Step int `json:"step"`
			} `json:"history"`
		} `json:"memory"`
		Stats trace.Stats `json:"stats"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "traces", "show", "--json", omniID)), &whole); err != nil {
		t.Fatal(err)
	}
	if len(whole.Records) != 12 || len(whole.Memory.History["memory_plan"]) != 2 || whole.Memory.History["memory_plan"][1].Step != 4 || whole.Stats.ToolCalls != 2 {
		t.Errorf("show --json: %d records, memory %+v, stats %+v", len(whole.Records), whole.Memory, whole.Stats)
	}
	if _, _, err := run(t, db, "traces", "show", "ffff0000"); err == nil || !strings.Contains(err.Error(), "no trace id starts with ffff0000") {
		t.Errorf("show unknown prefix: %v", err)
	}

	golden.Check(t, "search_typed.txt", []byte(mustRun(t, db, "traces", "search", "typed", "languages", "--tool", "retriever.hybrid_search")))
	golden.Check(t, "search_thinkpad.txt", []byte(mustRun(t, db, "traces", "search", `"battery life"`, "--type", "tool.end")))
	if out := mustRun(t, db, "traces", "search", "vertex-ai", "--type", "model.call", "--status", "error"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "[vertex-ai]") {
		t.Errorf("search vertex-ai:\n%s", out)
	}
	if out := mustRun(t, db, "traces", "search", "nothing-like-this"); out != "no matches\n" {
		t.Errorf("search without hits: %q", out)
	}

	// Export one trace to a file and import it into another store: same records.
	exp := filepath.Join(t.TempDir(), "omni.jsonl")
	mustRun(t, db, "traces", "export", omniID[:10], "-o", exp)
	got, f, err := traceio.ReadFile(exp, traceio.FormatAuto)
	if err != nil || f != traceio.FormatLoupe || len(got) != 12 {
		t.Fatalf("exported file: %d records, %s, %v", len(got), f, err)
	}
	for i := range got {
		if !bytes.Equal(got[i].AppendJSON(nil), recs[i].AppendJSON(nil)) {
			t.Errorf("exported record %d = %s\nwant %s", i, got[i].AppendJSON(nil), recs[i].AppendJSON(nil))
		}
	}
	if out := mustRun(t, db, "traces", "export", "--tag", "source:fragola"); strings.Count(out, "\n") != 27 {
		t.Errorf("export --tag source:fragola: %d lines", strings.Count(out, "\n"))
	}

	if out := mustRun(t, db, "traces", "rm", omniID[:8]); out != "deleted 1 traces\n" {
		t.Errorf("rm: %q", out)
	}
	if _, _, err := run(t, db, "traces", "show", omniID); err == nil {
		t.Error("show after rm succeeded")
	}

	// 11 traces left; keep 9, then everything older than 300 days (before 2026-02-04).
	if out := mustRun(t, db, "traces", "prune", "--keep", "9"); !strings.HasPrefix(out, "removed 2 traces (") {
		t.Errorf("prune --keep 9:\n%s", out)
	}
	out := mustRun(t, db, "traces", "prune", "--older-than", "7200h", "--json")
	var pr struct {
		Traces  []string `json:"traces"`
		Records int      `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	if len(pr.Traces) == 0 || pr.Records == 0 {
		t.Errorf("prune --older-than: %s", out)
	}
	if _, _, err := run(t, db, "traces", "prune"); err == nil {
		t.Error("prune without a policy succeeded")
	}
}

func TestTracesImportBadFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "loupe.db")
	dir := t.TempDir()
	good := `{"v":1,"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","seq":1,"time":"2026-01-01T00:00:00Z","type":"run.start","name":"kept"}`
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(good+"\n"+`{"v":1,"trace_id":"0102030405060708090a0b0c0d0e0f10","span_id":"0102030405060708","seq":2,"time":"yesterday","type":"run.end"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, db, "traces", "import", bad, testrepo.Real(t, "agentv/static-trace.json"))
	if err == nil {
		t.Fatal("import of a bad file exited 0")
	}
	if !strings.Contains(errOut, "bad.jsonl:2: field time") {
		t.Errorf("stderr does not name file:line and field:\n%s", errOut)
	}
	if !strings.Contains(out, "bad.jsonl: loupe, 1 records in 1 traces (1 new)") || !strings.Contains(out, "static-trace.json: agentv, 10 records") {
		t.Errorf("stdout:\n%s", out)
	}
	if ls := mustRun(t, db, "traces", "ls"); !strings.Contains(ls, "kept") || !strings.Contains(ls, "static-trace") {
		t.Errorf("records before the error were not kept:\n%s", ls)
	}
	if _, _, err := run(t, db, "traces", "import", "--format", "csv", bad); err == nil || !strings.Contains(err.Error(), `unknown trace format "csv"`) {
		t.Errorf("--format csv: %v", err)
	}
}

func TestDBFromEnv(t *testing.T) {
	db := filepath.Join(t.TempDir(), "env.db")
	t.Setenv("LOUPE_DB", db)
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"traces", "import", testrepo.Real(t, "agentv/static-trace.json")})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(db); err != nil {
		t.Errorf("LOUPE_DB was not used: %v", err)
	}
}
