package online_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/trace"
)

// The README's rules file parses: its rules, graders and judge.
func TestParseRulesFile(t *testing.T) {
	cfg, err := online.ParseFile("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Judge.Model != "openai:gpt-4o-mini" || cfg.Judge.Concurrency != 2 || cfg.Judge.Timeout.Seconds() != 30 || cfg.Settle.Seconds() != 5 || len(cfg.Rules) != 2 {
		t.Fatalf("config %+v", cfg)
	}
	r := cfg.Rules[1]
	if r.Name != "answer-quality" || r.Sample != 0.1 || r.BudgetUSDPerHour != 0.5 || len(r.Assertions) != 2 || r.Assertions[1].Name != "rubrics" {
		t.Errorf("rule %+v", r)
	}
	if r := cfg.Rules[0]; r.Sample != 1 || len(r.Assertions) != 2 || r.Assertions[0].Trajectory == nil || string(r.Definition) == "" {
		t.Errorf("rule %+v", r)
	}
}

// Every error of a bad rules file: file:line:column, what is wrong and
// what to do (golden files, -update to rewrite).
func TestParseRulesErrors(t *testing.T) {
	paths, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(paths) == 0 {
		t.Fatal("no bad rules files")
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			_, err = online.Parse(filepath.ToSlash(p), data)
			if err == nil {
				t.Fatal("no error")
			}
			golden.Check(t, "errors/"+strings.TrimSuffix(filepath.Base(p), ".yaml")+".txt", []byte(err.Error()+"\n"))
		})
	}
}

// Sampling is decided by the rule's name and the trace id alone: the
// same every time, about the rate asked for, and different per rule.
func TestSampled(t *testing.T) {
	a := &online.Rule{Name: "a", Sample: 0.25}
	b := &online.Rule{Name: "b", Sample: 0.25}
	na, both := 0, 0
	for i := range 4000 {
		id := trace.TraceID{byte(i >> 8), byte(i), 7}
		sa := online.Sampled(a, id)
		if sa != online.Sampled(a, id) {
			t.Fatal("not deterministic")
		}
		if sa {
			na++
			if online.Sampled(b, id) {
				both++
			}
		}
	}
	if na < 900 || na > 1100 {
		t.Errorf("%d of 4000 sampled at 0.25", na)
	}
	if both > na/2 {
		t.Errorf("rules a and b sample the same traces (%d of %d)", both, na)
	}
	if !online.Sampled(&online.Rule{Name: "x", Sample: 1}, trace.TraceID{1}) {
		t.Error("sample 1 skipped a trace")
	}
}

// ParseRule (the API's) refuses what runs a command.
func TestParseRuleRefusesCodeGraders(t *testing.T) {
	_, err := online.ParseRule("request", []byte(`{"name": "x", "assertions": [{"type": "code-grader", "command": ["sh", "-c", "true"]}]}`))
	if err == nil || !strings.Contains(err.Error(), "request:1:") || !strings.Contains(err.Error(), "rules file") {
		t.Errorf("err %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range append([]string{"testdata/rules.yaml"}, must(filepath.Glob("testdata/bad/*.yaml"))...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("rules: [{name: a, filter: 'tool:\"x', assertions: [&a {type: contains, value: *a}]}]"))
	f.Add([]byte("judge: {model: 'openai:x', timeout: 1d}\nrules: [{name: a, sample: .5, assertions: [x, {type: is-json}]}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := online.Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error without the file name: %v", err)
			}
			return
		}
		for _, r := range cfg.Rules {
			if r.Name == "" || len(r.Assertions) == 0 || !(r.Sample > 0 && r.Sample <= 1) {
				t.Fatalf("accepted rule %+v", r)
			}
			if _, err := online.ParseRule("again", r.Definition); err != nil && !strings.Contains(err.Error(), "code-grader") {
				t.Fatalf("a parsed rule's definition does not parse again: %v\n%s", err, r.Definition)
			}
		}
	})
}

func must[T any](v T, _ error) T { return v }

// The rules file README.md shows under "Grade live traffic" parses.
func TestREADMERulesFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testrepo.Root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "### Grade live traffic")
	if !ok {
		t.Fatal("README.md has no Grade live traffic section")
	}
	_, y, ok := strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatal("the section shows no rules file")
	}
	y, _, _ = strings.Cut(y, "```")
	cfg, err := online.Parse("README.md rules.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Rules) != 2 || cfg.Judge.Model == "" {
		t.Errorf("README's rules: %+v", cfg)
	}
}
