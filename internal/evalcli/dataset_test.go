package evalcli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/dataset"
	"github.com/loupe-dev/loupe/internal/evalcli"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// A run that called search then fetch, recorded as an agent records it.
func storeRun(t *testing.T, st store.Store) trace.TraceID {
	t.Helper()
	tr := trace.New(trace.Options{})
	_, ec := tr.Start(context.Background(), "support", trace.RunOptions{Input: trace.Text("Where is my parcel 42?")})
	for _, c := range [][2]string{{"search", `{"q":"parcel 42"}`}, {"fetch", `{"id":42}`}} {
		span := trace.NewSpanID()
		ec.Record(trace.Record{Type: trace.TypeToolStart, Name: c[0], SpanID: span, Input: trace.Value(c[1])})
		ec.Record(trace.Record{Type: trace.TypeToolError, Name: c[0], SpanID: span, Input: trace.Value(c[1]), Error: "timeout"})
	}
	ec.End(nil, nil)
	if _, err := st.Append(context.Background(), ec.Records()); err != nil {
		t.Fatal(err)
	}
	return ec.TraceID()
}

const (
	goodScript = "model: agent-v1\nturns:\n  - tool_calls: [{name: search, input: {q: parcel 42}}]\n  - tool_calls: [{name: fetch, input: {id: 42}}]\n  - answer: It is on its way.\n"
	badScript  = "model: agent-v2\nturns:\n  - tool_calls: [{name: search, input: {q: parcel}}]\n  - answer: I do not know.\n"
)

// TestDatasetExperimentsGate is the CI workflow end to end on a real
// store: a dataset from a stored run, an experiment before and after the
// scripted model changes, the comparison, and --fail-on-regression with
// its JUnit and Markdown reports.
func TestDatasetExperimentsGate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "loupe.db")
	open := func(ctx context.Context, dsn string) (store.Store, error) { return sqlite.Open(ctx, dsn) }
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	id := storeRun(t, st)
	var out bytes.Buffer
	if err := evalcli.DatasetAdd(ctx, st, "support", []string{id.String()[:8]}, "", 0, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "dataset support@1: 1 case(s) added") {
		t.Fatalf("add: %s", out.String())
	}
	st.Close()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte(goodScript), 0o644)
	os.WriteFile(bad, []byte(badScript), 0o644)

	run := func(cfg evalcli.Config) (int, string, string, error) {
		cfg.DB, cfg.OpenStore = db, open
		return execute(t, cfg)
	}
	code, stdout, stderr, err := run(evalcli.Config{Dataset: "support", Model: "scripted:" + good, SystemPrompt: "Be brief.", Experiment: "before"})
	if code != 0 || err != nil || !strings.Contains(stderr, "experiment before stored (dataset support@1)") {
		t.Fatalf("before: %d %v\n%s\n%s", code, err, stdout, stderr)
	}
	junit, md := filepath.Join(dir, "junit.xml"), filepath.Join(dir, "summary.md")
	code, stdout, stderr, err = run(evalcli.Config{Dataset: "support@1", Model: "scripted:" + bad, Experiment: "after",
		Baseline: "before", FailOnRegression: true, JUnit: junit, SummaryMD: md})
	if code != 1 || err == nil || !strings.Contains(err.Error(), "1 regression(s) against the baseline before") {
		t.Fatalf("after: %d %v\n%s\n%s", code, err, stdout, stderr)
	}
	if !strings.Contains(stdout, "regression  support-") {
		t.Errorf("the comparison is not printed:\n%s", stdout)
	}
	j, _ := os.ReadFile(junit)
	if !strings.Contains(string(j), `type="regression"`) || !strings.Contains(string(j), `<property name="baseline" value="before">`) {
		t.Errorf("junit:\n%s", j)
	}
	m, _ := os.ReadFile(md)
	if !strings.Contains(string(m), "## Loupe eval: 1 regression(s)") || !strings.Contains(string(m), "| pass rate | 100.0% (1/1) | 0.0% (0/1) | -100.0 pts |") {
		t.Errorf("summary:\n%s", m)
	}
	// The same agent as the baseline: no regression, status 0; a case
	// failing in both would not count either.
	code, _, _, err = run(evalcli.Config{Dataset: "support", Model: "scripted:" + good, Baseline: "before", FailOnRegression: true})
	if code != 0 || err != nil {
		t.Fatalf("no regression: %d %v", code, err)
	}
	// Against the failing run as the baseline, the failing agent again:
	// the case fails but did not regress.
	code, _, _, err = run(evalcli.Config{Dataset: "support", Model: "scripted:" + bad, Baseline: "after", FailOnRegression: true})
	if code != 0 || err != nil {
		t.Fatalf("failing in both: %d %v", code, err)
	}

	st, err = sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := dataset.LoadExperiment(ctx, st, "before")
	if err != nil {
		t.Fatal(err)
	}
	if e.Version != 1 || e.Config.Model != "scripted:"+good || e.Config.SystemPrompt != "Be brief." || e.Config.Target != "scripted:"+good ||
		len(e.Cases) != 1 || e.Cases[0].Verdict != "pass" || e.Cases[0].Trace == "" || e.Cases[0].Scores["tool-trajectory"] != 1 || e.EvalTrace == "" {
		t.Fatalf("experiment %+v", e)
	}
	tid, err := trace.ParseTraceID(e.Cases[0].Trace)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Trace(ctx, tid); err != nil {
		t.Fatalf("the case's run is not stored: %v", err)
	}
	out.Reset()
	if err := evalcli.ExperimentsList(ctx, st, "", &out, false); err != nil || strings.Count(out.String(), "support@1") != 4 {
		t.Fatalf("ls: %v\n%s", err, out.String())
	}
	out.Reset()
	c, err := evalcli.ExperimentsDiff(ctx, st, "before", "after", &out, false)
	if err != nil || c.Regressions != 1 {
		t.Fatalf("diff: %v %+v", err, c)
	}

	for _, tt := range []struct {
		cfg  evalcli.Config
		want string
	}{
		{evalcli.Config{Dataset: "support", Files: []string{"x.yaml"}, Command: "true"}, "together"},
		{evalcli.Config{Dataset: "support", Command: "true", FailOnRegression: true}, "needs --baseline"},
		{evalcli.Config{Files: []string{"x.yaml"}, Command: "true", Baseline: "before"}, "go with --dataset"},
		{evalcli.Config{Dataset: "nope", Command: "true"}, "not found"},
		{evalcli.Config{Dataset: "support", Command: "true", Baseline: "nope"}, "--baseline"},
		{evalcli.Config{Dataset: "support", Command: "true", Experiment: "bad name"}, "--experiment"},
	} {
		code, _, _, err := run(tt.cfg)
		if code != 2 || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %d %v, want %q", tt.cfg, code, err, tt.want)
		}
	}
}
