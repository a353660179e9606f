package evalcli_test

import (
	"fmt"
	"github.com/loupe-dev/loupe/internal/evalcli"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestScriptedParallelCallsGradeInModelOrder: a scripted model asks for
// three tools in one turn; the stand-in tools run in parallel and finish
// in whatever order the scheduler gives, and the exact trajectory must
// still be the one the model asked for, in every case (issue 8: 24 runs
// gave three orders, never this one).
func TestScriptedParallelCallsGradeInModelOrder(t *testing.T) {
	dir := t.TempDir()
	script := `model: auth
turns:
  - tool_calls:
      - {name: checkCredentials, input: {user: ada}}
      - {name: generateToken, input: {user: ada}}
      - {name: auditLog, input: {event: login}}
  - answer: logged in
`
	var cases strings.Builder
	cases.WriteString("tests:\n")
	const n = 24
	for i := range n {
		fmt.Fprintf(&cases, `  - id: login-%d
    input: Log ada in.
    assertions:
      - type: tool-trajectory
        mode: exact
        expected:
          - {tool: checkCredentials, args: {user: ada}}
          - {tool: generateToken}
          - {tool: auditLog, args: {event: login}}
`, i)
	}
	evalFile, scriptFile := filepath.Join(dir, "login.eval.yaml"), filepath.Join(dir, "default.yaml")
	for f, s := range map[string]string{evalFile: cases.String(), scriptFile: script} {
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	out := filepath.Join(dir, "results.jsonl")
	code, stdout, stderr, err := execute(t, evalcli.Config{Files: []string{evalFile}, Script: scriptFile, Workers: 4, Out: out})
	if err != nil || code != 0 {
		t.Fatalf("exit %d, err %v; want every case to pass\n%s%s", code, err, stdout, stderr)
	}
	rows := readRows(t, out)
	if len(rows) != n {
		t.Fatalf("%d result rows, want %d", len(rows), n)
	}
	for _, r := range rows {
		if r["verdict"] != "pass" {
			t.Errorf("case %v: verdict %v, want pass", r["test_id"], r["verdict"])
		}
	}
}
