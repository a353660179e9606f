package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// variant writes the demo trace at from to a file under a new trace id,
// with edit applied to each line, and returns the file.
func variant(t *testing.T, from, id, name string, edit func(line string) string) string {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var orig struct {
		TraceID string `json:"trace_id"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &orig); err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		lines[i] = edit(strings.ReplaceAll(l, orig.TraceID, id))
	}
	path := filepath.Join(filepath.Dir(from), name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReplayCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "loupe.db")
	jsonl := filepath.Join(dir, "demo.jsonl")
	mustRun(t, db, "demo", "--dir", dir, "--out", jsonl)
	var ls struct {
		Traces []struct {
			ID string `json:"trace_id"`
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "traces", "ls", "--json")), &ls); err != nil || len(ls.Traces) != 1 {
		t.Fatalf("traces ls: %v %+v", err, ls)
	}
	id := ls.Traces[0].ID

	// The demo run replays cleanly.
	code, out, errOut := runLoupe(t, "--db", db, "replay", id[:12])
	if code != 0 || !strings.Contains(out, "5 model calls and 5 tool calls answered from the recording") || !strings.Contains(out, "no divergence") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runLoupe(t, "--db", db, "replay", id, "--json")
	var rep struct {
		Divergence  any    `json:"divergence"`
		Termination string `json:"termination"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Divergence != nil || rep.Termination != "success" {
		t.Fatalf("replay --json: exit %d\n%s", code, out)
	}

	// A branch from step 3 with a scripted model is stored, linked.
	live := filepath.Join(dir, "live.yaml")
	if err := os.WriteFile(live, []byte("model: live-model\nturns:\n  - tool_calls:\n      - {name: clock, input: {zone: UTC}}\n  - answer: Branched.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runLoupe(t, "--db", db, "replay", id[:12], "--from-step", "3", "--model", "scripted:"+live)
	if code != 0 || !strings.Contains(out, "answer: Branched.") || !strings.Contains(out, "tags replay-of:"+id+" replay-from-step:3") {
		t.Fatalf("replay --from-step: exit %d\n%s%s", code, out, errOut)
	}
	// A branch whose live model fails is stored too, and exits 3.
	failing := filepath.Join(dir, "failing.yaml")
	if err := os.WriteFile(failing, []byte("model: live-model\nturns:\n  - error: rate limited, try later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, fout, ferr := runLoupe(t, "--db", db, "replay", id[:12], "--from-step", "3", "--model", "scripted:"+failing); code != 3 || !strings.Contains(fout, "new run: ") || !strings.Contains(ferr, "rate limited") {
		t.Errorf("replay --from-step with a failing model: exit %d\n%s%s", code, fout, ferr)
	}
	_, newID, _ := strings.Cut(out, "new run: ")
	newID = newID[:32]
	show := mustRun(t, db, "traces", "show", newID[:12])
	if !strings.Contains(show, "tags: replay-from-step:3 replay-of:"+id) {
		t.Errorf("traces show of the branch:\n%s", show)
	}
	diff := mustRun(t, db, "traces", "diff", id[:12], newID[:12])
	for _, want := range []string{"≠    3  model demo-model", "model live-model", "first divergence: step 3, model call 3: the model calls differ", "model: A demo-model, B live-model"} {
		if !strings.Contains(diff, want) {
			t.Errorf("traces diff lacks %q:\n%s", want, diff)
		}
	}
	if js := mustRun(t, db, "traces", "diff", id[:12], newID[:12], "--json"); !json.Valid([]byte(js)) || !strings.Contains(js, `"diverged": true`) {
		t.Errorf("traces diff --json:\n%s", js)
	}

	// A trace whose tool input differs from what the model asked for
	// diverges: exit 1, with the step, the call and the difference.
	edited := variant(t, jsonl, "0123456789abcdef0123456789abcdef", "edited.jsonl", func(l string) string {
		if strings.Contains(l, `"type":"tool.start","name":"calculator"`) {
			return strings.Replace(l, "2340 * 0.17", "2340 * 0.18", 1)
		}
		return l
	})
	mustRun(t, db, "traces", "import", edited)
	code, out, errOut = runLoupe(t, "--db", db, "replay", "0123456789ab")
	if code != 1 || !strings.Contains(out, "DIVERGED: step 1, tool call 1 (calculator): calculator was called with another input") ||
		!strings.Contains(out, `$.expression: recorded "2340 * 0.18 + sqrt(144)", replayed "2340 * 0.17 + sqrt(144)"`) {
		t.Fatalf("replay of the edited trace: exit %d\n%s%s", code, out, errOut)
	}

	// A trace whose request was truncated cannot be replayed: exit 2.
	truncated := variant(t, jsonl, "fedcba9876543210fedcba9876543210", "truncated.jsonl", func(l string) string {
		if strings.Contains(l, `"type":"model.call"`) && strings.Contains(l, `"iteration":2,`) {
			i := strings.Index(l, `"input":{`)
			j := strings.Index(l, `,"output":`)
			return l[:i] + `"input":{"$loupe":"truncated","bytes":70000}` + l[j:]
		}
		return l
	})
	mustRun(t, db, "traces", "import", truncated)
	code, out, errOut = runLoupe(t, "--db", db, "replay", "fedcba98")
	if code != 2 || !strings.Contains(errOut, "cannot be replayed faithfully") || !strings.Contains(errOut, "model.call input of demo-model, step 2) was truncated") || strings.Contains(out, "no divergence") {
		t.Fatalf("replay of the truncated trace: exit %d\n%s%s", code, out, errOut)
	}

	// Flags that only make sense for a branch.
	if code, _, errOut := runLoupe(t, "--db", db, "replay", id, "--model", "scripted:"+live); code != 2 || !strings.Contains(errOut, "give --from-step N too") {
		t.Errorf("--model without --from-step: exit %d %s", code, errOut)
	}
}
