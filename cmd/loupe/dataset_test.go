package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/dataset"
)

// TestDatasetCommands: loupe dataset add (by id and by query), ls, show,
// export (which imports back), import and rm, and loupe experiments on a
// store without any, against the real trace files.
func TestDatasetCommands(t *testing.T) {
	fixedNow(t)
	db := filepath.Join(t.TempDir(), "loupe.db")
	importAll(t, db)
	if out := mustRun(t, db, "dataset", "ls"); !strings.Contains(out, "no datasets") {
		t.Errorf("empty ls: %q", out)
	}
	if out := mustRun(t, db, "experiments", "ls"); !strings.Contains(out, "no experiments") {
		t.Errorf("empty experiments ls: %q", out)
	}
	var page struct {
		Traces []struct {
			ID   string `json:"trace_id"`
			Tags []string
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "traces", "ls", "--json")), &page); err != nil || len(page.Traces) < 2 {
		t.Fatalf("traces: %v", err)
	}
	id := page.Traces[0].ID
	out := mustRun(t, db, "dataset", "add", id[:10], "--dataset", "real")
	if !strings.Contains(out, "dataset real@1: 1 case(s) added") || !strings.Contains(out, id) {
		t.Errorf("add: %q", out)
	}
	out = mustRun(t, db, "dataset", "add", "--query", "since:3650d", "--limit", "2", "--dataset", "real")
	if !strings.Contains(out, "dataset real@2: 2 case(s) added, 3 in all") {
		t.Errorf("add --query: %q", out)
	}
	var shown struct {
		Name     string         `json:"name"`
		Version  int            `json:"version"`
		Cases    []dataset.Case `json:"cases"`
		Versions []struct{ Version int }
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "dataset", "show", "real@1", "--json")), &shown); err != nil ||
		shown.Version != 1 || len(shown.Cases) != 1 || shown.Cases[0].Trace != id || len(shown.Versions) != 2 {
		t.Fatalf("show real@1: %+v %v", shown, err)
	}
	if out := mustRun(t, db, "dataset", "ls"); !strings.Contains(out, "real") || !strings.Contains(out, "added 2 case(s)") {
		t.Errorf("ls: %q", out)
	}
	exported := mustRun(t, db, "dataset", "export", "real")
	cases, err := dataset.Import("real.yaml", []byte(exported))
	if err != nil || len(cases) != 3 {
		t.Fatalf("the export does not import: %v\n%s", err, exported)
	}
	file := filepath.Join(t.TempDir(), "real.eval.yaml")
	if err := os.WriteFile(file, []byte(exported), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, db, "dataset", "import", file, "--dataset", "copy"); !strings.Contains(out, "dataset copy@1: 3 case(s) imported") {
		t.Errorf("import: %q", out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"dataset", "add", "--dataset", "real"}, "nothing to add"},
		{[]string{"dataset", "add", id}, `"dataset" not set`},
		{[]string{"dataset", "add", id, "--dataset", "bad name"}, "not allowed"},
		{[]string{"dataset", "show", "real@9"}, "not found"},
		{[]string{"dataset", "show", "real@x"}, "a number from 1"},
		{[]string{"experiments", "diff", "a", "b"}, "experiment a: not found"},
	} {
		_, _, err := run(t, db, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("loupe %s: %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
	if out := mustRun(t, db, "dataset", "rm", "real"); !strings.Contains(out, "dataset real removed") {
		t.Errorf("rm: %q", out)
	}
	if _, _, err := run(t, db, "dataset", "rm", "real"); err == nil {
		t.Error("rm of a removed dataset succeeded")
	}
}
