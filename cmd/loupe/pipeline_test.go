package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

func TestPipelineValidateCommand(t *testing.T) {
	testrepo.Chdir(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("servers:\n  gen: builtin\npipeline:\n  - loop:\n      steps: [gen.x]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		code  int
		want  []string // lines of stdout, in order
		stder string
	}{
		{"valid files", []string{"pipeline", "validate", "testdata/real/omni/demo-loop.yaml", "testdata/real/ultrarag/ircot.yaml"}, 0,
			[]string{"testdata/real/omni/demo-loop.yaml: valid (omni)", "testdata/real/ultrarag/ircot.yaml: valid (ultrarag)"}, ""},
		{"every error of every file", []string{"pipeline", "validate", bad, "testdata/real/omni/demo-rag.yaml"}, 1,
			[]string{
				bad + ":2:8: `gen` is not a built-in server; expected one of `evaluator`, `generator`, `retriever`, `router`, or a command or URL",
				bad + ":4:5: loop has no bound; expected `times` (UltraRAG) or `max_iterations` (omni), an integer from 1 to 1000000",
				"testdata/real/omni/demo-rag.yaml: valid (omni)",
			}, "loupe: 1 of 2 pipeline files have errors"},
		{"missing file", []string{"pipeline", "validate", "nope.yaml"}, 1,
			[]string{"nope.yaml: cannot read the file: open nope.yaml: no such file or directory"}, "1 of 1 pipeline files have errors"},
		{"no file", []string{"pipeline", "validate"}, 1, nil, "requires at least 1 arg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runLoupe(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, errOut)
			}
			var got []string
			if out != "" {
				got = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, strings.Join(tc.want, "\n"))
			}
			if !strings.Contains(errOut, tc.stder) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tc.stder)
			}
		})
	}
}

func TestPipelineValidateCommandJSON(t *testing.T) {
	testrepo.Chdir(t)
	// demo-branch with branches no route of check_quality selects.
	src, err := os.ReadFile("testdata/real/omni/demo-branch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "demo-branch.yaml")
	if err := os.WriteFile(bad, []byte(strings.NewReplacer("high_quality", "good", "low_quality", "poor").Replace(string(src))), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runLoupe(t, "pipeline", "validate", "--json", bad, "testdata/real/omni/ultrarag_complex.yaml")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var got struct {
		Files []struct {
			File    string `json:"file"`
			Valid   bool   `json:"valid"`
			Dialect string `json:"dialect"`
			Errors  []struct {
				File    string `json:"file"`
				Line    int    `json:"line"`
				Column  int    `json:"column"`
				Layer   string `json:"layer"`
				Message string `json:"message"`
			} `json:"errors"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(got.Files) != 2 {
		t.Fatalf("got %d files, want 2", len(got.Files))
	}
	branch, complex := got.Files[0], got.Files[1]
	if branch.Valid || branch.Dialect != "omni" || len(branch.Errors) != 3 {
		t.Errorf("demo-branch = %+v, want invalid omni with 3 errors", branch)
	}
	if e := branch.Errors[1]; e.Line != 17 || e.Column != 9 || e.Layer != "semantic" || !strings.HasPrefix(e.Message, "branch `good` is never taken") {
		t.Errorf("second error = %+v", e)
	}
	if !complex.Valid || complex.Errors == nil || len(complex.Errors) != 0 {
		t.Errorf("ultrarag_complex = %+v, want valid with an empty error list", complex)
	}
}

func TestPipelineGraphCommand(t *testing.T) {
	testrepo.Chdir(t)
	code, out, errOut := runLoupe(t, "pipeline", "graph", "testdata/real/ultrarag/rag_loop.yaml")
	want, err := os.ReadFile("pipeline/testdata/graph/ultrarag-rag_loop.mmd")
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || out != string(want) || errOut != "" {
		t.Errorf("mermaid: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	code, out, _ = runLoupe(t, "pipeline", "graph", "--format", "dot", "testdata/real/ultrarag/rag_loop.yaml")
	if want, _ := os.ReadFile("pipeline/testdata/graph/ultrarag-rag_loop.dot"); code != 0 || out != string(want) {
		t.Errorf("dot: exit %d, stdout:\n%s", code, out)
	}
	// An invalid pipeline is drawn, with its errors as warnings.
	src, err := os.ReadFile("testdata/real/omni/demo-branch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	invalid := filepath.Join(t.TempDir(), "demo-branch.yaml")
	if err := os.WriteFile(invalid, []byte(strings.NewReplacer("high_quality", "good", "low_quality", "poor").Replace(string(src))), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runLoupe(t, "pipeline", "graph", invalid)
	if code != 0 || !strings.HasPrefix(out, "flowchart TD\n") || !strings.Contains(errOut, "warning: "+invalid+":17:9: branch `good` is never taken") {
		t.Errorf("invalid pipeline: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runLoupe(t, "pipeline", "graph", "--format", "png", "testdata/real/ultrarag/rag_loop.yaml"); code != 1 || !strings.Contains(errOut, `--format "png": expected mermaid or dot`) {
		t.Errorf("bad format: exit %d, stderr %q", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("- not a pipeline\n"), 0o644)
	if code, out, errOut := runLoupe(t, "pipeline", "graph", bad); code != 1 || out != "" || !strings.Contains(errOut, bad+":1:1: the file holds a list; expected a mapping") {
		t.Errorf("unparsable file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
