package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

// runLoupe runs the loupe command in process and returns its exit status
// and output, as main would.
func runLoupe(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	if err := root.ExecuteContext(context.Background()); err != nil {
		errb.WriteString("loupe: " + err.Error() + "\n")
		return exitCode(err), out.String(), errb.String()
	}
	return 0, out.String(), errb.String()
}

func TestEvalCommand(t *testing.T) {
	testrepo.Chdir(t)
	t.Setenv("LOUPE_DB", filepath.Join(t.TempDir(), "loupe.db"))
	tmp := t.TempDir()
	const (
		staticEval  = "evalrun/testdata/static-trace.eval.yaml"
		staticTrace = "testdata/real/agentv/static-trace.json"
		realAgentV  = "testdata/real/agentv/"
	)
	tests := []struct {
		name string
		args []string
		code int
		want []string // substrings of stdout+stderr
	}{
		{"command", []string{"eval", "--no-store", staticEval, "--command", "cat " + staticTrace}, 1,
			[]string{"PASS  research-in-order", "FAIL  exact-plan", "2 passed, 2 failed", "evaluation failed"}},
		{"trace file, agentv mode", []string{"eval", "--no-store", "--compat", "agentv", staticEval, "--trace", staticTrace}, 1,
			[]string{"mode agentv"}},
		{"transcript of a real file", []string{"eval", "--no-store", realAgentV + "tool-trajectory-demo.v2.yaml",
			"--transcript", "eval/testdata/real-runs/tool-trajectory-demo.jsonl"}, 1, []string{"4 passed, 1 failed"}},
		{"real suite that needs judges, no judge", []string{"eval", "--no-store", realAgentV + "trace-evaluation.suite.yaml",
			"--command", "cat " + staticTrace}, 2, []string{"5 failed", "could not run: grader command bun run",
			"LLM graders skipped in 5 case(s)", "run them with --judge-model PROVIDER:MODEL (or LOUPE_JUDGE_MODEL)"}},
		// The code graders need bun (not installed): still incomplete, but
		// the judge graders are graded by the scripted judge.
		{"real suite that needs judges, scripted judge", []string{"eval", "--no-store", realAgentV + "trace-evaluation.suite.yaml",
			"--command", "cat " + staticTrace, "--judge-model", "scripted:evalrun/testdata/judges/trace-evaluation.yaml"}, 2,
			[]string{"5 failed", "judge gpt-4o-mini-judge: 5 call(s)", "[ok] rubrics score 1.000", "[FAIL] rubrics score 0.000",
				"could not run: the judge's answer could not be read", "could not run: judge call failed"}},
		{"judge model from the environment", []string{"eval", "--no-store", realAgentV + "trace-evaluation.suite.yaml",
			"--command", "cat " + staticTrace}, 2, []string{"judge gpt-4o-mini-judge: 5 call(s)"}},
		{"bad judge model", []string{"eval", "--no-store", realAgentV + "trace-evaluation.suite.yaml",
			"--command", "cat " + staticTrace, "--judge-model", "gpt-4o-mini"}, 2, []string{"--judge-model", "has no provider"}},
		{"script, stored", []string{"eval", staticEval, "--script", "evalrun/testdata/scripts", "--workers", "2",
			"--out", filepath.Join(tmp, "r.jsonl"), "--junit", filepath.Join(tmp, "r.xml")}, 0,
			[]string{"4 passed", "results stored as trace"}},
		{"from store", []string{"eval", "--no-store", staticEval, "--from-store", "--since", "1h", "--tag", "case:exact-plan"}, 1,
			[]string{"PASS  exact-plan"}},
		{"from store, limit", []string{"eval", "--no-store", staticEval, "--from-store", "--limit", "4"}, 0,
			[]string{"4 passed"}},
		{"bad since", []string{"eval", staticEval, "--from-store", "--since", "yesterday-ish"}, 2, []string{"--since"}},
		{"bad file", []string{"eval", "--no-store", "go.mod", "--command", "true"}, 2, []string{"go.mod"}},
		{"no target", []string{"eval", staticEval}, 2, []string{"nothing to grade"}},
		{"no file", []string{"eval"}, 2, []string{"no eval file given"}},
		{"bad flag", []string{"eval", staticEval, "--workers", "many"}, 2, []string{"--workers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.name, "environment") {
				t.Setenv("LOUPE_JUDGE_MODEL", "scripted:evalrun/testdata/judges/trace-evaluation.yaml")
			}
			code, stdout, stderr := runLoupe(t, tt.args...)
			all := stdout + stderr
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s", code, tt.code, all)
			}
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
		})
	}
	for _, f := range []string{"r.jsonl", "r.xml"} {
		if fi, err := os.Stat(filepath.Join(tmp, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	// traces show links a graded run to its results.
	b, err := os.ReadFile(filepath.Join(tmp, "r.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var row struct {
		TraceID string `json:"trace_id"`
	}
	if err := json.Unmarshal(bytes.SplitN(b, []byte("\n"), 2)[0], &row); err != nil || row.TraceID == "" {
		t.Fatalf("first row: %v %q", err, row.TraceID)
	}
	code, stdout, stderr := runLoupe(t, "traces", "show", row.TraceID)
	if code != 0 || !strings.Contains(stdout, "Evaluations (1):") || !strings.Contains(stdout, "PASS  research-in-order  score 1.00") {
		t.Errorf("traces show: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = runLoupe(t, "traces", "show", "--json", row.TraceID)
	if code != 0 || !strings.Contains(stdout, `"evaluations"`) || !strings.Contains(stdout, `"test_id": "research-in-order"`) {
		t.Errorf("traces show --json: exit %d\n%s", code, stdout)
	}
}
