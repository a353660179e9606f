package eval

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A grader that runs too long is stopped with its children, and could not
// run (default) or scores 0 with AgentV's error (agentv): never a pass.
func TestCodeGraderTimeout(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("sh graders")
	}
	src := "tests:\n  - id: slow\n    assertions:\n      - type: code-grader\n        command: \"sleep 30; echo '{\\\"score\\\": 1}'\"\n"
	for _, load := range []LoadMode{LoadDefault, LoadAgentV} {
		f, err := ParseMode("slow.yaml", []byte(src), load)
		if err != nil {
			t.Fatal(err)
		}
		opts := Options{GraderTimeout: 100 * time.Millisecond}
		if load == LoadAgentV {
			opts.Mode = ModeAgentV
		}
		r := Evaluate(context.Background(), f.Cases[0], Trajectory{}, opts)
		a := r.Assertions[0]
		text := a.Reason
		for _, c := range a.Checks {
			text += c.Text
		}
		if r.Verdict == Pass || a.Score != 0 || !strings.Contains(text, "timed out after 100ms") {
			t.Errorf("%s: verdict %s score %v: %s", load, r.Verdict, a.Score, text)
		}
		if (a.Verdict == CouldNotRun) != (load == LoadDefault) {
			t.Errorf("%s: grader verdict %s", load, a.Verdict)
		}
	}
}

// A grader's config: the keys it does not know, merged with config:.
func TestCodeGraderConfig(t *testing.T) {
	f, err := Parse("/x/s.yaml", []byte("tests:\n  - id: c\n    assertions:\n      - type: code-grader\n        command: [check]\n        cwd: sub\n        threshold: 7\n        config: {level: high}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Cases[0].Assertions[0].Script
	if s.Dir != "/x/sub" || s.Config["threshold"] != 7.0 || s.Config["level"] != "high" || len(s.Config) != 2 {
		t.Errorf("spec %+v", s)
	}
}

// A ScriptSpec built in Go without a command could not run; it does not
// panic.
func TestCodeGraderWithoutCommand(t *testing.T) {
	c := Case{ID: "c", Assertions: []Assertion{{Name: "g", Kind: KindScript, Weight: 1, Script: &ScriptSpec{}}}}
	r := Evaluate(context.Background(), c, Trajectory{}, Options{})
	if r.Verdict == Pass || r.Assertions[0].Verdict != CouldNotRun {
		t.Errorf("%s\n%s", r.Verdict, r.Explain())
	}
}
