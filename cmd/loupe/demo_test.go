package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/trace"
)

func TestDemoCmd(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("// TODO: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "trace", "demo.jsonl")
	var stdout bytes.Buffer
	root := newRootCmd()
	root.SetOut(&stdout)
	db := filepath.Join(dir, "loupe.db")
	root.SetArgs([]string{"--db", db, "demo", "--dir", dir, "--out", out})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"run demo  success", `✗ unknown time zone "Mars/Olympus"`, "child summarize  success", "answer: 2340 × 0.17 + √144 = 409.8"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var recs []trace.Record
	for n := 1; sc.Scan(); n++ {
		r, err := trace.DecodeRecord(sc.Bytes())
		if err != nil {
			t.Fatalf("%s:%d: %v", out, n, err)
		}
		recs = append(recs, r)
	}
	st := trace.StatsOf(recs)
	if len(recs) < 30 || st.ToolCalls != 5 || st.Errors != 1 || st.Children != 1 {
		t.Errorf("%d records, stats %+v", len(recs), st)
	}
	// The same run is in the store, where loupe traces finds it.
	ls := mustRun(t, db, "traces", "ls", "--json")
	if !strings.Contains(ls, recs[0].TraceID.String()) {
		t.Errorf("traces ls does not list the demo run %s:\n%s", recs[0].TraceID, ls)
	}
	// The hint the demo prints works as printed: run its arguments (after
	// the program, which is "go run ./cmd/loupe" for a test binary) with
	// nothing added, not even --db.
	_, hint, ok := strings.Cut(stdout.String(), "see it again with: ")
	hint, _, _ = strings.Cut(hint, "\n")
	args := strings.Fields(strings.TrimPrefix(hint, selfCommand()+" "))
	if !ok || !strings.HasPrefix(hint, selfCommand()+" --db "+db+" traces show ") {
		t.Fatalf("demo hint %q", hint)
	}
	t.Setenv("LOUPE_DB", "")
	code, show, errOut := runLoupe(t, args...)
	if code != 0 || !strings.Contains(show, "child summarize  success") {
		t.Errorf("the demo's hint %q: exit %d\n%s%s", hint, code, show, errOut)
	}
}
