package evalcli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"github.com/loupe-dev/loupe/internal/evalcli"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

// Paths, relative to the repository root; tests run there (see inRoot).
const (
	staticEval  = "evalrun/testdata/static-trace.eval.yaml"
	staticTrace = "testdata/real/agentv/static-trace.json"
	realAgentV  = "testdata/real/agentv"
	realRuns    = "eval/testdata/real-runs"
	resultsFile = "testdata/real/agentv/multi-agent.eval.results.jsonl"
)

func fixedNow() time.Time { return time.Date(2026, 2, 22, 10, 0, 0, 0, time.UTC) }

// execute runs Execute with results not stored (unless cfg says where).
func execute(t *testing.T, cfg evalcli.Config) (code int, stdout, stderr string, err error) {
	t.Helper()
	if cfg.DB == "" {
		cfg.NoStore = true
	}
	if cfg.Now == nil {
		cfg.Now = fixedNow
	}
	var out, errb bytes.Buffer
	code, err = evalcli.Execute(context.Background(), cfg, &out, &errb)
	return code, out.String(), errb.String(), err
}

// The same cases graded on the same calls, whichever way the run arrives:
// a command printing the static trace, the trace file itself, and a
// scripted agent making the same calls.
func TestTargetsOnStaticTrace(t *testing.T) {
	testrepo.Chdir(t)
	tests := []struct {
		name     string
		cfg      evalcli.Config
		code     int
		verdicts string
	}{
		{"command", evalcli.Config{Command: "cat " + staticTrace}, 1, "pass pass fail fail"},
		{"command with placeholder", evalcli.Config{Command: `test -n {{input}} && test "$LOUPE_EVAL_CASE_ID" = {{case_id}} && cat ` + staticTrace}, 1, "pass pass fail fail"},
		{"trace file", evalcli.Config{Traces: []string{staticTrace}}, 1, "pass pass fail fail"},
		{"script", evalcli.Config{Script: "evalrun/testdata/scripts/default.yaml"}, 1, "pass pass fail pass"},
		{"script per case", evalcli.Config{Script: "evalrun/testdata/scripts", Workers: 4}, 0, "pass pass pass pass"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Files = []string{staticEval}
			tt.cfg.Out = filepath.Join(t.TempDir(), "r.jsonl")
			code, stdout, stderr, err := execute(t, tt.cfg)
			if err != nil || code != tt.code {
				t.Fatalf("exit %d, err %v, want %d\n%s%s", code, err, tt.code, stdout, stderr)
			}
			rows := readRows(t, tt.cfg.Out)
			var got []string
			for _, r := range rows {
				got = append(got, r["verdict"].(string))
			}
			if strings.Join(got, " ") != tt.verdicts {
				t.Errorf("verdicts %v, want %s\n%s", got, tt.verdicts, stdout)
			}
		})
	}
}

func TestSummaryGolden(t *testing.T) {
	testrepo.Chdir(t)
	_, stdout, _, err := execute(t, evalcli.Config{Files: []string{staticEval}, Command: "cat " + staticTrace})
	if err != nil {
		t.Fatal(err)
	}
	golden.CheckFile(t, "evalrun/testdata/golden/static-command.txt", []byte(stdout))
}

func TestJUnitGolden(t *testing.T) {
	testrepo.Chdir(t)
	junit := filepath.Join(t.TempDir(), "report.xml")
	_, _, _, err := execute(t, evalcli.Config{
		Files:   []string{staticEval, filepath.Join(realAgentV, "trace-evaluation.suite.yaml")},
		Command: "cat " + staticTrace, JUnit: junit,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Skipped  int `xml:"skipped,attr"`
	}
	// The 5 cases of trace-evaluation have code graders that need bun,
	// which the test machines lack: errors, not skips (before Loupe ran
	// code graders they were skipped).
	if err := xml.Unmarshal(b, &v); err != nil || v.Tests != 9 || v.Failures != 2 || v.Errors != 5 || v.Skipped != 0 {
		t.Errorf("testsuites: %+v, err %v; want 9 tests, 2 failures, 5 errors", v, err)
	}
	// Errors name the grader's working directory, which is absolute: the
	// golden file holds it relative to the repository, wherever that is.
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte(root+string(filepath.Separator)), []byte("$REPO/"))
	golden.CheckFile(t, "evalrun/testdata/golden/report.junit.xml", b)
}

// The rows carry AgentV's field names: every top-level, scores-entry and
// trace-summary field of the real results file appears in Loupe's rows
// (output only with --include-trace, as in AgentV).
func TestRowFieldNamesMatchAgentV(t *testing.T) {
	testrepo.Chdir(t)
	realTop, realScore, realTrace := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range readRows(t, resultsFile) {
		for k := range r {
			realTop[k] = true
		}
		for _, s := range asList(r["scores"]) {
			for k := range s.(map[string]any) {
				realScore[k] = true
			}
		}
		for k := range r["trace"].(map[string]any) {
			realTrace[k] = true
		}
	}
	for _, include := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "r.jsonl")
		if _, _, _, err := execute(t, evalcli.Config{Files: []string{staticEval}, Script: "evalrun/testdata/scripts/default.yaml", Out: out, IncludeTrace: include}); err != nil {
			t.Fatal(err)
		}
		row := readRows(t, out)[0]
		for k := range realTop {
			if _, ok := row[k]; !ok && (k != "output" || include) {
				t.Errorf("include-trace=%v: row lacks AgentV field %q; row has %v", include, k, slices.Sorted(maps.Keys(row)))
			}
		}
		if _, ok := row["output"]; ok != include {
			t.Errorf("include-trace=%v: output present = %v", include, ok)
		}
		if _, ok := row["records"]; ok != include {
			t.Errorf("include-trace=%v: records present = %v", include, ok)
		}
		for k := range realScore {
			if _, ok := asList(row["scores"])[0].(map[string]any)[k]; !ok {
				t.Errorf("scores entry lacks AgentV field %q", k)
			}
		}
		summary := row["trace"].(map[string]any)
		if got, want := slices.Sorted(maps.Keys(summary)), slices.Sorted(maps.Keys(realTrace)); !slices.Equal(got, want) {
			t.Errorf("trace summary fields\n got %v\nwant %v", got, want)
		}
	}
}

// The real AgentV eval files, run offline against the recorded
// transcripts, with the verdicts of eval's own real-file test.
func TestRealFilesWithTranscripts(t *testing.T) {
	testrepo.Chdir(t)
	tests := []struct {
		file, runs       string
		pass, fail, skip int
		agentvPass       int
	}{
		{"tool-trajectory-demo.v2.yaml", "tool-trajectory-demo.jsonl", 4, 1, 0, 4},
		{"expected-messages-demo.v2.yaml", "expected-messages-demo.jsonl", 4, 1, 0, 0},
		{"trajectory-assertions-simple.suite.yaml", "trajectory-assertions-simple.jsonl", 10, 1, 0, 0},
		{"trace-evaluation.suite.yaml", "trace-evaluation.jsonl", 0, 5, 0, 0}, // code graders need bun: could not run
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfg := evalcli.Config{Files: []string{filepath.Join(realAgentV, tt.file)}, Transcripts: []string{filepath.Join(realRuns, tt.runs)}}
			out := filepath.Join(t.TempDir(), "r.jsonl")
			cfg.Out = out
			code, stdout, _, err := execute(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			p, f, s := 0, 0, 0
			for _, r := range readRows(t, out) {
				switch r["verdict"] {
				case "pass":
					p++
				case "fail":
					f++
				case "skip":
					s++
				}
			}
			if p != tt.pass || f != tt.fail || s != tt.skip {
				t.Errorf("pass/fail/skip = %d/%d/%d, want %d/%d/%d\n%s", p, f, s, tt.pass, tt.fail, tt.skip, stdout)
			}
			want := min(tt.fail, 1)
			if tt.pass+tt.fail == 0 || strings.Contains(stdout, "could not run:") {
				want = evalrun.ExitNotGraded // nothing graded, or a grader that could not run
			}
			if code != want {
				t.Errorf("exit %d, want %d", code, want)
			}
			cfg.Compat = "agentv"
			cfg.Out = filepath.Join(t.TempDir(), "agentv.jsonl")
			if _, _, _, err := execute(t, cfg); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range readRows(t, cfg.Out) {
				if r["verdict"] == "pass" {
					n++
				}
				if r["mode"] != "agentv" {
					t.Fatalf("mode %v", r["mode"])
				}
			}
			if n != tt.agentvPass {
				t.Errorf("agentv mode: %d passed, want %d", n, tt.agentvPass)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	testrepo.Chdir(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("tests:\n  - id: x\n    assertions:\n      - type: no-such-type\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	judgeOnly := filepath.Join(t.TempDir(), "judge.yaml")
	if err := os.WriteFile(judgeOnly, []byte("tests:\n  - id: x\n    assertions:\n      - the answer is polite\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outOfTurns := filepath.Join(t.TempDir(), "short.yaml")
	if err := os.WriteFile(outOfTurns, []byte("model: short\nturns:\n  - tool_calls: [{name: webSearch, input: {query: q}}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(t.TempDir(), "notjson.txt")
	if err := os.WriteFile(notJSON, []byte("{ this is not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     evalcli.Config
		code    int
		message string // in the error or the summary
	}{
		{"all pass", evalcli.Config{Files: []string{staticEval}, Script: "evalrun/testdata/scripts"}, 0, "4 passed"},
		{"threshold lowered", evalcli.Config{Files: []string{staticEval}, Command: "cat " + staticTrace, Threshold: 0.3}, 1, "3 passed, 1 failed"},
		{"case fails", evalcli.Config{Files: []string{staticEval}, Command: "cat " + staticTrace}, 1, "2 failed"},
		{"bad eval file, strict", evalcli.Config{Files: []string{bad}, Command: "true", Strict: true}, 2, "bad.yaml:4:"},
		{"bad grader, default", evalcli.Config{Files: []string{bad}, Command: "echo hi"}, 2, "could not run: " + bad + ":4:"},
		{"bad grader, agentv", evalcli.Config{Files: []string{bad}, Command: "echo hi", Compat: "agentv"}, 1, "warning: " + bad + ":4:"},
		{"missing eval file", evalcli.Config{Files: []string{"nope.yaml"}, Command: "true"}, 2, "nope.yaml"},
		{"no target", evalcli.Config{Files: []string{staticEval}}, 2, "nothing to grade"},
		{"two targets", evalcli.Config{Files: []string{staticEval}, Command: "true", Traces: []string{staticTrace}}, 2, "--command and --trace given together"},
		{"command fails", evalcli.Config{Files: []string{staticEval}, Command: "echo oops >&2; exit 3"}, 2, "oops"},
		{"command not found", evalcli.Config{Files: []string{staticEval}, Command: "/no/such/agent"}, 2, "could not run"},
		{"command prints nothing", evalcli.Config{Files: []string{staticEval}, Command: "true"}, 2, "printed nothing"},
		{"command prints bad json", evalcli.Config{Files: []string{staticEval}, Command: "cat " + notJSON}, 2, "not a trace"},
		{"command times out", evalcli.Config{Files: []string{staticEval}, Command: "sleep 5", Timeout: 50 * time.Millisecond}, 2, "timed out"},
		{"bad compat", evalcli.Config{Files: []string{staticEval}, Command: "true", Compat: "promptfoo"}, 2, "--compat"},
		{"bad threshold", evalcli.Config{Files: []string{staticEval}, Command: "true", Threshold: 2}, 2, "--threshold"},
		{"transcript count mismatch", evalcli.Config{Files: []string{staticEval}, Transcripts: []string{filepath.Join(realRuns, "tool-trajectory-demo.jsonl")}}, 2, "5 recorded runs for 4 cases"},
		{"bad trace format", evalcli.Config{Files: []string{staticEval}, Traces: []string{staticTrace}, TraceFormat: "xml"}, 2, "unknown trace format"},
		{"missing script", evalcli.Config{Files: []string{staticEval}, Script: "nope.yaml"}, 2, "--script"},
		{"plain text answer", evalcli.Config{Files: []string{staticEval}, Command: "echo The ThinkPad X1 Carbon."}, 1, "4 failed"},
		{"plain text warns", evalcli.Config{Files: []string{staticEval}, Command: "echo hello"}, 1, `warning: command "echo hello" printed no trace`},
		{"nothing graded", evalcli.Config{Files: []string{judgeOnly}, Command: "echo hello"}, 2, "no case was graded"},
		{"script out of turns", evalcli.Config{Files: []string{staticEval}, Script: outOfTurns}, 2, "the agent run failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr, err := execute(t, tt.cfg)
			all := stdout + stderr
			if err != nil {
				all += err.Error()
			}
			if code != tt.code || !strings.Contains(all, tt.message) {
				t.Errorf("exit %d, want %d; want %q in:\n%s", code, tt.code, tt.message, all)
			}
		})
	}
}

// Workers change how long a run takes, never the results or their order.
func TestWorkersKeepInputOrder(t *testing.T) {
	testrepo.Chdir(t)
	var outs []string
	for _, w := range []int{1, 8} {
		cfg := evalcli.Config{Files: []string{filepath.Join("eval", "testdata", "agentv-ref", "cases.yaml")},
			Transcripts: []string{filepath.Join("eval", "testdata", "agentv-ref", "transcript.jsonl")},
			Workers:     w, Out: filepath.Join(t.TempDir(), "r.jsonl")}
		_, stdout, _, err := execute(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(cfg.Out)
		outs = append(outs, stdout+string(b))
	}
	if outs[0] != outs[1] {
		t.Error("results differ between 1 and 8 workers")
	}
}

func TestProgressBar(t *testing.T) {
	testrepo.Chdir(t)
	_, _, stderr, err := execute(t, evalcli.Config{Files: []string{staticEval}, Traces: []string{staticTrace}, Progress: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "grading") {
		t.Errorf("no progress bar on stderr: %q", stderr)
	}
	_, _, stderr, _ = execute(t, evalcli.Config{Files: []string{staticEval}, Traces: []string{staticTrace}})
	if stderr != "" {
		t.Errorf("progress bar without a terminal or --progress: %q", stderr)
	}
}

// Results are stored with the runs they graded; ResultsFor finds them from
// the run's trace id; --from-store grades the stored runs again.
func TestStoreRoundTrip(t *testing.T) {
	testrepo.Chdir(t)
	db := filepath.Join(t.TempDir(), "loupe.db")
	open := func(ctx context.Context, dsn string) (store.Store, error) { return sqlite.Open(ctx, dsn) }
	cfg := evalcli.Config{Files: []string{staticEval}, Script: "evalrun/testdata/scripts", DB: db, OpenStore: open,
		Out: filepath.Join(t.TempDir(), "r.jsonl")}
	code, _, stderr, err := execute(t, cfg)
	if err != nil || code != 0 || !strings.Contains(stderr, "results stored as trace") {
		t.Fatalf("exit %d, err %v, stderr %q", code, err, stderr)
	}
	rows := readRows(t, cfg.Out)

	ctx := context.Background()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, err := trace.ParseTraceID(rows[0]["trace_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	got, err := evalrun.ResultsFor(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Row.TestID != "research-in-order" || got[0].Row.Verdict != eval.Pass || got[0].Row.Trace == nil {
		t.Fatalf("ResultsFor = %+v", got)
	}
	if got[0].Row.Records != nil || got[0].Row.Output != nil {
		t.Error("stored results hold trace content; they must be summaries")
	}
	if none, err := evalrun.ResultsFor(ctx, st, trace.NewTraceID()); err != nil || len(none) != 0 {
		t.Errorf("unknown trace: %v, %v", none, err)
	}
	// Each case's verdict and score are scores of its trace.
	sp, err := st.Scores(ctx, store.ScoreFilter{TraceIDs: []trace.TraceID{id}})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]store.Score{}
	for _, s := range sp.Scores {
		byName[s.Name] = s
	}
	if p, v := byName[evalrun.ScorePass], byName[evalrun.ScoreValue]; len(sp.Scores) != 2 || p.Kind != store.ScoreBoolean || p.Value != 1 ||
		p.Source != store.SourceEval || v.Kind != store.ScoreNumeric || v.Value != got[0].Row.Score {
		t.Errorf("scores of the graded trace: %+v", sp.Scores)
	}
	st.Close()

	// Grade the stored runs again: they carry case:<id> tags, so they pair
	// by name; the results trace itself is never selected.
	cfg2 := evalcli.Config{Files: []string{staticEval}, FromStore: true, DB: db, OpenStore: open,
		Selection: evalrun.StoreSelection{Filter: store.Filter{Tags: []string{"case:exact-plan"}}}, NoStore: true}
	code, stdout, _, err := execute(t, cfg2)
	if err != nil || code != 1 || !strings.Contains(stdout, "PASS  exact-plan") || !strings.Contains(stdout, "FAIL  research-in-order") {
		// One run (exact-plan's) selected: it is graded against every case.
		t.Errorf("from-store by tag: exit %d, err %v\n%s", code, err, stdout)
	}
	cfg2.Selection = evalrun.StoreSelection{}
	code, stdout, _, err = execute(t, cfg2)
	if err != nil || code != 0 || strings.Count(stdout, "PASS") != 4 {
		t.Errorf("from-store, all runs: exit %d, err %v\n%s", code, err, stdout)
	}
	cfg2.Selection = evalrun.StoreSelection{Filter: store.Filter{Name: "nobody"}}
	if code, _, _, err = execute(t, cfg2); code != 2 || err == nil || !strings.Contains(err.Error(), "name=nobody") {
		t.Errorf("empty selection: exit %d, err %v", code, err)
	}
}

// A stored evaluation with failing cases is not a failed agent run: it is
// not listed under status error, and its tag selects it.
func TestStoredEvaluationIsNotAFailedRun(t *testing.T) {
	testrepo.Chdir(t)
	db := filepath.Join(t.TempDir(), "loupe.db")
	open := func(ctx context.Context, dsn string) (store.Store, error) { return sqlite.Open(ctx, dsn) }
	code, _, stderr, err := execute(t, evalcli.Config{Files: []string{staticEval}, Command: "cat " + staticTrace, DB: db, OpenStore: open})
	if err != nil || code != 1 || !strings.Contains(stderr, "results stored as trace") {
		t.Fatalf("exit %d, err %v, stderr %q", code, err, stderr)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.List(ctx, store.ListQuery{Filter: store.Filter{Status: "error"}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range page.Traces {
		if slices.Contains(s.Tags, evalrun.EvalTag) {
			t.Errorf("evaluation %s listed under status error", s.ID)
		}
	}
	page, err = st.List(ctx, store.ListQuery{Filter: store.Filter{Tags: []string{evalrun.EvalTag}}, Limit: 100})
	if err != nil || len(page.Traces) != 1 {
		t.Errorf("tag %s: %d traces, err %v", evalrun.EvalTag, len(page.Traces), err)
	}
	// A listing of agent runs (loupe traces ls, /api/v1/traces) leaves the
	// evaluation out unless asked for.
	for _, tc := range []struct {
		c    store.Criteria
		want bool
	}{
		{store.Criteria{}, false},
		{store.Criteria{Evaluations: true}, true},
		{store.Criteria{Tags: []string{evalrun.EvalTag}}, true},
	} {
		f, err := tc.c.AgentRuns(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		page, err := st.List(ctx, store.ListQuery{Filter: f, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		listed := slices.ContainsFunc(page.Traces, func(s store.Summary) bool { return slices.Contains(s.Tags, evalrun.EvalTag) })
		if listed != tc.want || len(page.Traces) == 0 {
			t.Errorf("%+v: evaluation listed = %v, want %v (%d traces)", tc.c, listed, tc.want, len(page.Traces))
		}
	}
}

// A store that cannot be opened does not change the verdict; it is said.
func TestStoreUnavailableIsReported(t *testing.T) {
	testrepo.Chdir(t)
	code, _, stderr, err := execute(t, evalcli.Config{Files: []string{staticEval}, Script: "evalrun/testdata/scripts",
		DB: filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"),
		OpenStore: func(ctx context.Context, dsn string) (store.Store, error) {
			return sqlite.Open(ctx, "/dev/null/x.db")
		}})
	if err != nil || code != 0 || !strings.Contains(stderr, "results not stored") {
		t.Errorf("exit %d, err %v, stderr %q", code, err, stderr)
	}
}

func TestAssign(t *testing.T) {
	cases := []evalrun.CaseRef{{Case: eval.Case{ID: "a"}, Index: 0}, {Case: eval.Case{ID: "b"}, Index: 1}}
	run := func(name string, tags ...string) *evalrun.Run { return &evalrun.Run{Name: name, Tags: tags} }
	tests := []struct {
		name string
		runs []*evalrun.Run
		want []string // names of the assigned runs
		err  string
	}{
		{"by name, any order", []*evalrun.Run{run("b"), run("x"), run("a")}, []string{"a", "b"}, ""},
		{"by tag", []*evalrun.Run{run("r1", "case:b"), run("r2", "case:a")}, []string{"r2", "r1"}, ""},
		{"one run for all", []*evalrun.Run{run("only")}, []string{"only", "only"}, ""},
		{"by position", []*evalrun.Run{run("p"), run("q")}, []string{"p", "q"}, ""},
		{"ambiguous names fall back to position", []*evalrun.Run{run("a"), run("a")}, []string{"a", "a"}, ""},
		{"count mismatch", []*evalrun.Run{run("p"), run("q"), run("r")}, nil, "3 recorded runs for 2 cases"},
		{"none", nil, nil, "no recorded runs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evalrun.Assign(cases, tt.runs)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range got {
				names = append(names, r.Name)
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("got %v, want %v", names, tt.want)
			}
		})
	}
}

// Summarize agrees with trace.Stats on the real static trace.
func TestSummarizeStaticTrace(t *testing.T) {
	testrepo.Chdir(t)
	recs, _, err := traceio.ReadFile(staticTrace, traceio.FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	s := evalrun.Summarize(evalrun.RunFromRecords(recs, "test").Trajectory)
	if s.EventCount != len(recs) || !slices.Equal(s.ToolNames, []string{"fetchPage", "summarize", "webSearch"}) ||
		s.ToolCallsByName["webSearch"] != 2 || s.ErrorCount != 0 || *s.DurationMs != 7000 || len(s.ToolDurations["webSearch"]) != 2 {
		t.Errorf("summary %+v", s)
	}
	if s.TokenUsage != nil || s.CostUSD != nil || s.LLMCallCount != nil {
		t.Error("the static trace has no model calls: usage, cost and call count are unknown")
	}
}

func readRows(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rows = append(rows, m)
	}
	return rows
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// An in-process agent written as a function: its tool calls are recorded
// in a run named after the case, a failure is graded but reported as an
// error with its cause, and a panic is reported as a case that could not
// run.
func TestAgentTarget(t *testing.T) {
	testrepo.Chdir(t)
	f, err := eval.ParseFile(staticEval)
	if err != nil {
		t.Fatal(err)
	}
	target := &evalrun.AgentTarget{Label: "func-agent", Func: func(ctx context.Context, c evalrun.CaseRef) (string, error) {
		switch c.Case.ID {
		case "exact-plan":
			panic("lost")
		case "fetch-latency":
			return "", errors.New("model unavailable")
		}
		for _, q := range []string{"ThinkPad X1 Carbon Gen 11 specifications", "reviews"} {
			if _, err := trace.Tool(ctx, "webSearch", map[string]any{"query": q}, func(context.Context) (string, error) { return "ok", nil }); err != nil {
				return "", err
			}
		}
		trace.Tool(ctx, "fetchPage", map[string]any{"url": "u"}, func(context.Context) (string, error) { return "ok", nil })
		trace.Tool(ctx, "summarize", map[string]any{}, func(context.Context) (string, error) { return "ok", nil })
		return "The ThinkPad X1 Carbon Gen 11.", nil
	}}
	rep, err := (&evalrun.Runner{Target: target, Workers: 2}).Run(context.Background(), []*eval.File{f})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, string(r.Result.Verdict))
	}
	// A failed run is an error with its cause, though it is still graded.
	if want := "pass pass error error"; strings.Join(got, " ") != want {
		t.Errorf("verdicts %v, want %s", got, want)
	}
	if r := rep.Results[3]; r.Err == nil || !strings.Contains(r.Err.Error(), "model unavailable") || r.Run == nil || len(r.Result.Assertions) == 0 {
		t.Errorf("failed run: err %v, run kept %v, graded %v", r.Err, r.Run != nil, len(r.Result.Assertions))
	}
	if r := rep.Results[0].Run; r.Name != "research-in-order" || !slices.Contains(r.Tags, "case:research-in-order") {
		t.Errorf("run name %q tags %v", r.Name, r.Tags)
	}
	if r := rep.Results[3].Run; r.Trajectory.Errors == 0 {
		t.Error("the failed run's error was not recorded")
	}
	if rep.ExitCode() != evalrun.ExitNotGraded || !strings.Contains(rep.Results[2].Err.Error(), "panicked: lost") {
		t.Errorf("exit %d, err %v", rep.ExitCode(), rep.Results[2].Err)
	}
}

// --out rows say which graders could not run (default) or were dropped
// (--compat agentv), and why.
func TestRowsReportBadGraders(t *testing.T) {
	testrepo.Chdir(t)
	ref := filepath.Join("eval", "testdata", "agentv-ref")
	for _, compat := range []string{"", "agentv"} {
		cfg := evalcli.Config{Files: []string{filepath.Join(ref, "loading.yaml")}, Transcripts: []string{filepath.Join(ref, "loading-transcript.jsonl")},
			Compat: compat, Out: filepath.Join(t.TempDir(), "r.jsonl"), NoStore: true}
		code, _, stderr, err := execute(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rows := readRows(t, cfg.Out)
		if compat == "" {
			g := asList(rows[0]["scores"])[0].(map[string]any)
			if code != evalrun.ExitNotGraded || g["verdict"] != "error" || !strings.Contains(g["reason"].(string), "loading.yaml:13:9: unknown key \"maximums\"") {
				t.Errorf("default: exit %d, first grader %v", code, g)
			}
			continue
		}
		w := asList(rows[1]["warnings"])
		if code != evalrun.ExitFail || len(w) != 1 || !strings.Contains(w[0].(string), "grader dropped") || !strings.Contains(stderr, "warning: "+filepath.Join(ref, "loading.yaml")+":18:9:") {
			t.Errorf("agentv: exit %d, warnings %v, stderr %s", code, w, stderr)
		}
	}
}
