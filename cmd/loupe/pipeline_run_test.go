package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// pipelineRoot returns the root command with `pipeline run` reachable,
// whether or not `pipeline` is registered yet.
func pipelineRoot() *cobra.Command {
	root := newRootCmd()
	for _, c := range root.Commands() {
		if c.Name() == "pipeline" {
			for _, s := range c.Commands() {
				if s.Name() == "run" {
					return root
				}
			}
			c.AddCommand(newPipelineRunCmd())
			return root
		}
	}
	pc := &cobra.Command{Use: "pipeline"}
	pc.AddCommand(newPipelineRunCmd())
	root.AddCommand(pc)
	return root
}

func runPipelineCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := pipelineRoot()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestPipelineRunCmd(t *testing.T) {
	db := filepath.Join(t.TempDir(), "loupe.db")
	out, err := runPipelineCmd(t, "--db", db, "pipeline", "run", "../../testdata/real/omni/demo-rag.yaml",
		"--param", "query=Why use typed languages?", "--param", "documents_dir=../../pipeline/builtin/testdata/docs",
		"--param", "top_k=2", "--param", "reference=Static typing catches errors early.")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"demo-rag  success", "tags: dialect:omni pipeline",
		"├─ tool retriever.search", "memory.set global[results]", "model offline", "tool evaluator.evaluate",
		"memory pool:", "param top_k = 2", `output: {"exact_match":0,"f1":`, "see it again with: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The run is in the store, where loupe traces finds it.
	_, id, _ := strings.Cut(out, "see it again with: ")
	id = strings.Fields(id)[len(strings.Fields(id))-1]
	show := mustRun(t, db, "traces", "show", id)
	if !strings.Contains(show, "tool generator.generate") {
		t.Errorf("traces show %s:\n%s", id, show)
	}
}

func TestPipelineRunCmdJSON(t *testing.T) {
	out, err := runPipelineCmd(t, "pipeline", "run", "--no-store", "--json", "../../testdata/real/omni/demo-branch.yaml", "--param", "topic=typed languages")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var j struct {
		Success     bool                      `json:"success"`
		Termination string                    `json:"termination"`
		Steps       int                       `json:"steps"`
		Result      map[string]any            `json:"result"`
		Pool        map[string]map[string]any `json:"memory_pool"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !j.Success || j.Termination != "success" || j.Steps != 4 || j.Result["final"] == nil || j.Pool["globals"]["route"] != "low_quality" {
		t.Errorf("result: %+v", j)
	}
}

func TestPipelineRunCmdErrors(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"../../testdata/real/omni/demo-simple.yaml"}, []string{"missing parameter: topic (", "--param name=value"}},
		{[]string{"../../testdata/real/omni/demo-simple.yaml", "--param", "topic"}, []string{`--param "topic": want name=value`}},
		{[]string{"../../testdata/real/omni/demo-simple.yaml", "--param", "topic=x", "--model", "nosuch:model"}, []string{"--model:"}},
		{[]string{"../../testdata/real/ultrarag/vanilla_rag.yaml"}, []string{"server benchmark (", "point servers.benchmark at an MCP server that exists"}},
		{[]string{"no-such-file.yaml"}, []string{"no-such-file.yaml"}},
	}
	for _, tt := range tests {
		out, err := runPipelineCmd(t, append([]string{"pipeline", "run", "--no-store"}, tt.args...)...)
		if err == nil {
			t.Errorf("%v: no error:\n%s", tt.args, out)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", tt.args, err, w)
			}
		}
	}
	// A failed run still prints its trace, up to the failing step.
	out, _ := runPipelineCmd(t, "pipeline", "run", "--no-store", "../../testdata/real/ultrarag/vanilla_rag.yaml")
	if !strings.Contains(out, "vanilla_rag  error") || !strings.Contains(out, "✗ server benchmark") {
		t.Errorf("failed run's output:\n%s", out)
	}
}

func TestPipelineRunCmdScriptedModel(t *testing.T) {
	script := filepath.Join(t.TempDir(), "turns.yaml")
	src := `model: scripted-pipeline
turns:
  - answer: Typed languages trade flexibility for early error detection.
    usage: {input_tokens: 50, output_tokens: 10}
  - answer: "Draft: types catch errors before the program runs."
    usage: {input_tokens: 60, output_tokens: 12}
  - answer: Use a typed language when correctness matters more than speed of writing.
    usage: {input_tokens: 70, output_tokens: 14}
`
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runPipelineCmd(t, "pipeline", "run", "--no-store", "--json", "../../testdata/real/omni/demo-simple.yaml",
		"--param", "topic=typed languages", "--model", "scripted:"+script)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var j struct {
		Result map[string]any `json:"result"`
		Stats  struct {
			ModelCalls   int   `json:"model_calls"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"stats"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if j.Result["final"] != "Use a typed language when correctness matters more than speed of writing." || j.Stats.ModelCalls != 3 || j.Stats.OutputTokens != 36 {
		t.Errorf("result %v, stats %+v", j.Result, j.Stats)
	}
}
