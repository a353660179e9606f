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
	root.SetArgs([]string{"demo", "--dir", dir, "--out", out})
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
}
