package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

// TestImportStdinAndFolder: "-" reads standard input (of any format, told
// from its content), and a folder imports the files in it.
func TestImportStdinAndFolder(t *testing.T) {
	db := filepath.Join(t.TempDir(), "loupe.db")
	for _, f := range []string{"omni/session_rag_demo.trace.json", "fragola/otel-traces.jsonl"} {
		b, err := os.ReadFile(testrepo.Real(t, f))
		if err != nil {
			t.Fatal(err)
		}
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetIn(bytes.NewReader(b))
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs([]string{"--db", db, "traces", "import", "-"})
		if err := root.Execute(); err != nil {
			t.Fatalf("import - < %s: %v\n%s", f, err, errOut.String())
		}
		if !strings.HasPrefix(out.String(), "-: ") || !strings.Contains(out.String(), " new)") {
			t.Errorf("import - < %s: %q", f, out.String())
		}
	}
	ls := mustRun(t, db, "traces", "ls")
	if !strings.Contains(ls, "pipeline") || strings.Count(ls, "\n") != 1+1+4 {
		t.Errorf("after importing stdin twice:\n%s", ls)
	}

	dir := t.TempDir()
	for _, f := range []string{"agentv/static-trace.json", "omni/session_failed_run.trace.json"} {
		copyFile(t, testrepo.Real(t, f), filepath.Join(dir, filepath.Base(f)), 0o644)
	}
	if err := os.WriteFile(filepath.Join(dir, ".hidden"), []byte("not a trace"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	db2 := filepath.Join(t.TempDir(), "loupe.db")
	out := mustRun(t, db2, "traces", "import", dir)
	want := filepath.Join(dir, "session_failed_run.trace.json") + ": omni, 12 records in 1 traces (12 new)\n" +
		filepath.Join(dir, "static-trace.json") + ": agentv, 10 records in 1 traces (10 new)\n"
	if out != want {
		t.Errorf("import FOLDER:\n got %q\nwant %q", out, want)
	}
	if _, _, err := run(t, db2, "traces", "import", filepath.Join(dir, "sub")); err == nil || !strings.Contains(err.Error(), "no files to import") {
		t.Errorf("import of an empty folder: %v", err)
	}
}

// TestExportNothingMatched: an export that matches nothing says so on
// stderr (stdout stays empty, for pipes).
func TestExportNothingMatched(t *testing.T) {
	db := filepath.Join(t.TempDir(), "loupe.db")
	mustRun(t, db, "traces", "import", testrepo.Real(t, "agentv/static-trace.json"))
	out, errOut, err := run(t, db, "traces", "export", "--name", "nosuch")
	if err != nil || out != "" || !strings.Contains(errOut, "no traces matched") {
		t.Errorf("export --name nosuch: err %v, stdout %q, stderr %q", err, out, errOut)
	}
	out, errOut, err = run(t, db, "traces", "export", "--name", "static-trace")
	if err != nil || !strings.Contains(out, `"run.start"`) || errOut != "" {
		t.Errorf("export --name static-trace: err %v, stdout %q, stderr %q", err, out, errOut)
	}
}

// TestImportNotATrace: files that are not traces get a message saying
// what they look like and which command reads them, with or without
// --format.
func TestImportNotATrace(t *testing.T) {
	db := filepath.Join(t.TempDir(), "loupe.db")
	for _, tc := range []struct {
		file func(t *testing.T) string
		args []string
		want []string
	}{
		{func(t *testing.T) string { return testrepo.Real(t, "agentv/tool-trajectory-demo.v2.yaml") }, nil,
			[]string{"looks like an AgentV eval file", "loupe eval FILE"}},
		{func(t *testing.T) string { return testrepo.Real(t, "agentv/trace-evaluation.suite.yaml") }, nil,
			[]string{"looks like an AgentV eval file (tests, providers)", "loupe eval FILE"}},
		{func(t *testing.T) string { return testrepo.Real(t, "agentv/expected-messages-demo.v2.yaml") }, []string{"--format", "agentv"},
			[]string{"looks like an AgentV eval file", "loupe eval FILE", "read as agentv"}},
		{func(t *testing.T) string { return testrepo.Real(t, "omni/demo-loop.yaml") }, nil,
			[]string{"looks like a pipeline definition", "session_*.trace.json"}},
		{func(t *testing.T) string { return testrepo.Real(t, "ultrarag/vanilla_rag.yaml") }, nil,
			[]string{"looks like a pipeline definition"}},
		{func(t *testing.T) string { return testrepo.Real(t, "omni/contracts.v1.json") }, nil,
			[]string{"omni tool-contracts file"}},
	} {
		file := tc.file(t)
		_, errOut, err := run(t, db, append(append([]string{"traces", "import"}, tc.args...), file)...)
		if err == nil {
			t.Errorf("import %s succeeded", file)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("import %v %s: stderr lacks %q:\n%s", tc.args, file, w, errOut)
			}
		}
		if strings.Contains(errOut, "pass the format explicitly") {
			t.Errorf("import %s still suggests passing a format:\n%s", file, errOut)
		}
	}
}
