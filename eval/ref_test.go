package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// refCase is one reference observation. AgentV columns were observed by
// running the real CLI (see scripts/agentv-ref.sh):
//
//	npx agentv@4.42.4 eval run eval/testdata/agentv-ref/cases.yaml \
//	    --transcript eval/testdata/agentv-ref/transcript.jsonl -o OUT
//
// and reading score / per-test verdict (score >= 0.8) from OUT/index.jsonl.
type refCase struct {
	id            string
	agentvScore   float64 // observed with AgentV 4.42.4
	defaultScore  float64 // Loupe semantics
	defaultPasses bool
}

var refCases = []refCase{
	{"any-order-partial", 0.6667, 0.6667, false},
	{"any-order-pass", 1, 1, true},
	{"in-order-gaps", 1, 1, true},
	{"in-order-swapped", 0.5, 0.5, false},
	{"in-order-args-first-occurrence", 0.5, 1, true}, // AgentV consumes the first same-name call
	{"exact-extra-call", 1, 0.6667, false},           // AgentV ignores extra calls in exact
	{"exact-missing-call", 0.6667, 0.6667, false},
	{"exact-shifted", 0, 0, false},
	{"exact-pass", 1, 1, true},
	{"superset-first-fit", 0.5, 1, true}, // AgentV: `args: any` steals the only matching call
	{"superset-pass", 1, 1, true},
	{"subset-one-extra", 0.6667, 0.6667, false},
	{"subset-no-calls", 1, 1, true},
	{"args-exact-extra-key", 0, 0, false},
	{"args-superset", 1, 1, true},
	{"args-subset", 1, 1, true},
	{"args-subset-empty-actual", 1, 1, true},
	{"args-field-list", 1, 1, true},
	{"args-field-nested", 1, 1, true},
	{"args-field-list-nested-mismatch", 0, 0, false},
	{"args-any", 1, 1, true},
	{"args-ignore", 1, 1, true},
	{"args-type-mismatch", 0, 0, false},
	{"args-float-int", 1, 1, true},
	{"args-missing-input", 0, 0, false},
	{"duration-fail", 0.6667, 0.6667, false},
	{"duration-pass", 1, 1, true},
	{"duration-missing", 1, 1, true},
	{"duration-item-not-found", 0.3333, 0.5, false}, // AgentV still counts the latency check of a missing item
	{"no-calls-in-order", 0, 0, false},
	{"contains-pass", 1, 1, true},
	{"icontains-pass", 1, 1, true},
	{"regex-fail", 0, 0, false},
	{"equals-trim", 1, 1, true},
	{"starts-ends", 0.5, 0.5, false},
	{"is-json-pass", 1, 1, true},
	{"negate-contains", 1, 1, true},
	{"latency-cost-pass", 1, 1, true},
	{"latency-missing", 0, 0, false},
	{"token-usage-cached", 0, 1, true}, // AgentV adds cached tokens to the total
	{"exec-metrics-tokens-cached", 0.5, 0.5, false},
	{"weighted-mix", 0.75, 0.75, false},
	{"required-fails-case", 0.75, 0, false}, // exact fails in Loupe, and it is required
}

func loadRef(t *testing.T) (*File, []Recorded) {
	t.Helper()
	f, err := ParseFile("testdata/agentv-ref/cases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := os.Open("testdata/agentv-ref/transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runs, err := ParseTranscript("transcript.jsonl", r)
	if err != nil {
		t.Fatal(err)
	}
	return f, runs
}

func TestAgentVReference(t *testing.T) {
	f, runs := loadRef(t)
	if len(f.Cases) != len(refCases) {
		t.Fatalf("cases.yaml has %d cases, table has %d", len(f.Cases), len(refCases))
	}
	for _, mode := range []Mode{ModeAgentV, ModeDefault} {
		results, err := EvaluateFile(context.Background(), f, runs, Options{Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range refCases {
			got := results[i]
			if got.CaseID != want.id {
				t.Fatalf("case %d is %s, table says %s", i, got.CaseID, want.id)
			}
			t.Run(mode.String()+"/"+want.id, func(t *testing.T) {
				score, pass := want.defaultScore, want.defaultPasses
				if mode == ModeAgentV {
					score, pass = want.agentvScore, want.agentvScore >= DefaultThreshold
				}
				if math.Abs(got.Score-score) > 1e-3 || (got.Verdict == Pass) != pass {
					t.Errorf("score %.4f verdict %s, want %.4f pass=%v\n%s", got.Score, got.Verdict, score, pass, got.Explain())
				}
			})
		}
	}
}

// loadCase is one reference observation of loading.yaml, where each test
// has a grader AgentV 4.42.4 loads leniently. agentvScore was observed with
// the real CLI (scripts/agentv-ref.sh loading); the default columns are
// Loupe's LoadDefault, where a grader with a problem could not run.
type loadCase struct {
	id          string
	agentvScore float64   // observed with AgentV 4.42.4
	warned      bool      // --compat agentv warns about this test
	notRun      int       // graders that could not run in the default mode
	graders     []float64 // AgentV's score of each grader it kept, in order
}

var loadCases = []loadCase{
	{"unknown-key-maximums", 1, true, 1, []float64{1}},
	{"any-order-without-minimums", 1, true, 0, []float64{1}}, // Loupe grades any_order with expected
	{"invalid-mode", 1, true, 1, []float64{1}},
	{"unknown-type-step-count", 0.5, true, 0, []float64{0, 1}}, // Loupe implements it
	{"unknown-type-tool-used", 0.75, true, 0, []float64{0, 1}},
	{"deprecated-code-judge", 1, true, 0, []float64{1}},
	{"invalid-args-match", 0, true, 1, []float64{0}},
	{"unknown-item-key", 1, true, 1, []float64{1}},
	{"not-prefix", 0.5, true, 0, []float64{0, 1}},
	{"negative-minimum", 1, true, 1, []float64{1}},
	{"unknown-type-required", 0, true, 1, []float64{0, 1}},
	{"contains-any-all", 0.5, false, 0, []float64{1, 0, 0, 1}},
	{"contains-any-bad-value", 1, true, 1, []float64{1}},
}

func TestAgentVLoadingReference(t *testing.T) {
	r, err := os.Open("testdata/agentv-ref/loading-transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runs, err := ParseTranscript("loading-transcript.jsonl", r)
	if err != nil {
		t.Fatal(err)
	}
	const path = "testdata/agentv-ref/loading.yaml"
	if _, err := ParseFileMode(path, LoadStrict); err == nil {
		t.Fatal("strict mode loaded a file with invalid graders")
	}
	for _, load := range []LoadMode{LoadAgentV, LoadDefault} {
		f, err := ParseFileMode(path, load)
		if err != nil {
			t.Fatalf("%s: %v", load, err)
		}
		if len(f.Cases) != len(loadCases) {
			t.Fatalf("%s: %d cases, table has %d", load, len(f.Cases), len(loadCases))
		}
		opts := Options{}
		if load == LoadAgentV {
			opts.Mode = ModeAgentV
		}
		results, err := EvaluateFile(context.Background(), f, runs, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range loadCases {
			got := results[i]
			if got.CaseID != want.id {
				t.Fatalf("case %d is %s, table says %s", i, got.CaseID, want.id)
			}
			t.Run(load.String()+"/"+want.id, func(t *testing.T) {
				notRun := 0
				for _, a := range got.Assertions {
					if a.Verdict == CouldNotRun {
						notRun++
						if !strings.Contains(a.Reason, path+":") {
							t.Errorf("reason lacks file:line:column: %s", a.Reason)
						}
					}
				}
				if load == LoadAgentV {
					checkGraders(t, got, want.graders)
					if math.Abs(got.Score-want.agentvScore) > 1e-3 || (got.Verdict == Pass) != (want.agentvScore >= DefaultThreshold) {
						t.Errorf("score %.4f verdict %s, want %.4f\n%s", got.Score, got.Verdict, want.agentvScore, got.Explain())
					}
					if notRun != 0 {
						t.Errorf("%d graders could not run in agentv mode", notRun)
					}
					warned := false
					for _, w := range f.Warnings {
						warned = warned || (w.Pos.Line > f.Cases[i].Pos.Line && (i+1 == len(f.Cases) || w.Pos.Line < f.Cases[i+1].Pos.Line))
					}
					if warned != want.warned {
						t.Errorf("warned %v, want %v (warnings %v)", warned, want.warned, f.Warnings)
					}
					return
				}
				if notRun != want.notRun {
					t.Errorf("%d graders could not run, want %d\n%s", notRun, want.notRun, got.Explain())
				}
				if notRun > 0 && got.Verdict == Pass {
					t.Errorf("case with a grader that could not run passed")
				}
			})
		}
	}
}

// graderCase is one reference observation of graders.yaml (code graders).
// agentvScore was observed with the real CLI (scripts/agentv-ref.sh
// graders); in the default mode a grader that fails to run, or prints JSON
// that is not a result, could not run instead of scoring 0.
type graderCase struct {
	id           string
	agentvScore  float64   // observed with AgentV 4.42.4
	defaultScore float64   // Loupe's default mode, over the graders that ran
	notRun       int       // graders that could not run in the default mode
	graders      []float64 // AgentV's score of each grader it kept, in order
}

var graderCases = []graderCase{
	{"score-json", 0.7, 0.7, 0, []float64{0.7}},
	{"assertions-only", 0.6667, 0.6667, 0, []float64{0.6667}},
	{"plain-exit-0", 1, 1, 0, []float64{1}},
	{"plain-exit-1", 0, 0, 0, []float64{0}},
	{"exit-1-stderr", 0, 0, 1, []float64{0}},
	{"exit-1-json", 0, 0, 1, []float64{0}},
	{"bad-json-exit-0", 1, 0, 1, []float64{1}}, // AgentV passes JSON it cannot parse when the exit status is 0
	{"score-above-one", 1, 1, 0, []float64{1}},
	{"score-negative", 0, 0, 0, []float64{0}},
	{"score-string", 0, 0, 1, []float64{0}},
	{"json-array", 1, 0, 1, []float64{1}},
	{"reads-payload", 1, 1, 0, []float64{1}},
	{"reads-payload-miss", 0, 0, 0, []float64{0}},
	{"not-found", 0.5, 1, 1, []float64{0, 1}},
	{"missing-command", 1, 1, 1, []float64{1}}, // AgentV drops the grader
	{"script-key", 0.25, 0.25, 0, []float64{0.25}},
	{"script-type", 0.5, 1, 0, []float64{0, 1}}, // AgentV has no "script" type; Loupe runs it
	{"weighted-with-contains", 0.625, 0.625, 0, []float64{0.5, 1}},
	{"env-and-config", 1, 1, 0, []float64{1}},
	{"cwd-key", 0.4, 0.4, 0, []float64{0.4}},
	{"dump", 1, 1, 0, []float64{1}},
}

func TestAgentVCodeGraderReference(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the reference graders are sh scripts")
	}
	r, err := os.Open("testdata/agentv-ref/graders-transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runs, err := ParseTranscript("graders-transcript.jsonl", r)
	if err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "payload.json")
	const path = "testdata/agentv-ref/graders.yaml"
	for _, load := range []LoadMode{LoadAgentV, LoadDefault} {
		f, err := ParseFileMode(path, load)
		if err != nil {
			t.Fatalf("%s: %v", load, err)
		}
		// The dump case writes its payload where the test can read it.
		for i := range f.Cases {
			for j := range f.Cases[i].Assertions {
				if s := f.Cases[i].Assertions[j].Script; s != nil && f.Cases[i].ID == "dump" {
					s.Command = []string{"sh", "-c", `DUMP="$0" sh graders/print.sh '{"score": 1}'`, dump}
				}
			}
		}
		opts := Options{}
		if load == LoadAgentV {
			opts.Mode = ModeAgentV
		}
		results, err := EvaluateFile(context.Background(), f, runs, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != len(graderCases) {
			t.Fatalf("%d results, table has %d", len(results), len(graderCases))
		}
		for i, want := range graderCases {
			got := results[i]
			if got.CaseID != want.id {
				t.Fatalf("case %d is %s, table says %s", i, got.CaseID, want.id)
			}
			t.Run(load.String()+"/"+want.id, func(t *testing.T) {
				notRun := 0
				for _, a := range got.Assertions {
					if a.Verdict == CouldNotRun {
						notRun++
					}
				}
				score, pass := want.defaultScore, want.defaultScore >= DefaultThreshold && want.notRun == 0
				if load == LoadAgentV {
					score, pass = want.agentvScore, want.agentvScore >= DefaultThreshold
					checkGraders(t, got, want.graders)
					if notRun > 0 {
						t.Errorf("%d graders could not run in agentv mode", notRun)
					}
				} else if notRun != want.notRun {
					t.Errorf("%d graders could not run, want %d", notRun, want.notRun)
				}
				if math.Abs(got.Score-score) > 1e-3 || (got.Verdict == Pass) != pass {
					t.Errorf("score %.4f verdict %s, want %.4f pass=%v\n%s", got.Score, got.Verdict, score, pass, got.Explain())
				}
			})
		}
	}
	// The payload has AgentV's fields, in AgentV's shape.
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"criteria", "expected_output", "output", "messages", "input_files", "input", "metadata", "trace", "trace_summary", "token_usage", "cost_usd", "duration_ms", "start_time", "end_time", "file_changes", "workspace_path", "config"} {
		if _, ok := p[k]; !ok {
			t.Errorf("payload lacks %q", k)
		}
	}
	if p["output"] != "The answer is 42." || p["criteria"] != "the answer is 42" {
		t.Errorf("payload output %v criteria %v", p["output"], p["criteria"])
	}
	sum, _ := p["trace_summary"].(map[string]any)
	if tc, _ := sum["tool_calls"].(map[string]any); tc["search"] != 1.0 || tc["fetch"] != 1.0 {
		t.Errorf("trace_summary.tool_calls %v", sum["tool_calls"])
	}
	if d, _ := sum["tool_durations"].(map[string]any); fmt.Sprint(d["search"]) != "[12]" {
		t.Errorf("trace_summary.tool_durations %v", sum["tool_durations"])
	}
}

// checkGraders compares each grader's score and verdict with AgentV's
// (AgentV passes a grader at 0.8).
func checkGraders(t *testing.T, got CaseResult, want []float64) {
	t.Helper()
	if len(got.Assertions) != len(want) {
		t.Errorf("%d graders, AgentV kept %d\n%s", len(got.Assertions), len(want), got.Explain())
		return
	}
	for i, a := range got.Assertions {
		if math.Abs(a.Score-want[i]) > 1e-3 || (a.Verdict == Pass) != (want[i] >= DefaultThreshold) {
			t.Errorf("grader %d (%s): score %.4f verdict %s, AgentV %.4f", i, a.Name, a.Score, a.Verdict, want[i])
		}
	}
}

// The payload a code grader reads equals AgentV 4.42.4's for the same case
// and transcript: testdata/agentv-ref/graders-payload.json is what the
// real CLI sent to the "dump" grader of graders.yaml (trace.events, which
// Loupe does not send, removed).
func TestCodeGraderPayloadMatchesAgentV(t *testing.T) {
	want, err := os.ReadFile("testdata/agentv-ref/graders-payload.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFileMode("testdata/agentv-ref/graders.yaml", LoadDefault) // it has a grader without command
	if err != nil {
		t.Fatal(err)
	}
	r, err := os.Open("testdata/agentv-ref/graders-transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runs, err := ParseTranscript("graders-transcript.jsonl", r)
	if err != nil {
		t.Fatal(err)
	}
	i := len(f.Cases) - 1
	if f.Cases[i].ID != "dump" {
		t.Fatalf("last case is %s, want dump", f.Cases[i].ID)
	}
	got := buildPayload(f.Cases[i], runs[i].Trajectory, f.Cases[i].Assertions[0].Script)
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	// The target's name is not known to eval: only the case id is sent.
	delete(w["trace"].(map[string]any)["metadata"].(map[string]any), "provider")
	delete(w["trace"].(map[string]any)["metadata"].(map[string]any), "target")
	for k, wv := range w {
		if gs, ws := fmt.Sprint(g[k]), fmt.Sprint(wv); gs != ws {
			t.Errorf("%s:\n got %s\nwant %s", k, gs, ws)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("payload has %q, AgentV's has not", k)
		}
	}
}
