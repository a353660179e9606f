package dataset

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// recordRun records a run that calls tools with arguments, as an agent
// would, and returns its records.
func recordRun(t *testing.T, name, input string, calls ...[2]string) []trace.Record {
	t.Helper()
	tr := trace.New(trace.Options{})
	ctx, ec := tr.Start(context.Background(), name, trace.RunOptions{Input: trace.Text(input)})
	_ = ctx
	for _, c := range calls {
		span := trace.NewSpanID()
		ec.Record(trace.Record{Type: trace.TypeToolStart, Name: c[0], SpanID: span, Input: trace.Value(c[1])})
		ec.Record(trace.Record{Type: trace.TypeToolEnd, Name: c[0], SpanID: span, Input: trace.Value(c[1]), Output: trace.Text("ok")})
	}
	ec.End(trace.Text("done"), nil)
	return ec.Records()
}

func TestFromTrace(t *testing.T) {
	recs := recordRun(t, "weather agent", "Weather in Paris?", [2]string{"geocode", `{"city":"Paris"}`}, [2]string{"forecast", `{"days":2}`})
	c := FromTrace(recs)
	id := recs[0].TraceID.String()
	if c.ID != "weather-agent-"+id[:8] || c.Input != "Weather in Paris?" || c.Trace != id {
		t.Fatalf("case %+v", c)
	}
	tr := c.Trajectory
	if tr == nil || tr.Mode != "in_order" || tr.ArgsMatch.Rule != "superset" || len(tr.Expected) != 2 ||
		tr.Expected[0].Tool != "geocode" || tr.Expected[0].Args["city"] != "Paris" || tr.Expected[1].Args["days"] != 2.0 {
		t.Fatalf("trajectory %+v", tr)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	// A run without tool calls expects none.
	if c := FromTrace(recordRun(t, "", "hi")); c.Trajectory == nil || len(c.Trajectory.Expected) != 0 || !strings.HasPrefix(c.ID, "run-") {
		t.Fatalf("no calls: %+v", c)
	}
}

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		c    Case
		want string
	}{
		{Case{ID: "", Input: "x"}, "case id"},
		{Case{ID: "a b", Input: "x"}, "case id"},
		{Case{ID: "a", Trajectory: &Trajectory{Mode: "sideways"}}, "trajectory.mode"},
		{Case{ID: "a", Trajectory: &Trajectory{ArgsMatch: ArgsMatch{Rule: "loose"}}}, "args_match"},
		{Case{ID: "a", Trajectory: &Trajectory{Expected: []ExpectedCall{{}}}}, "expected[0].tool"},
		{Case{ID: "a", Assertions: []map[string]any{{"value": 1}}}, "no type"},
		{Case{ID: "a", Input: strings.Repeat("x", MaxInputBytes+1)}, "longer than"},
	} {
		if err := tt.c.Check(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.c, err, tt.want)
		}
	}
	if err := CheckCases([]Case{{ID: "a"}, {ID: "a"}}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate ids: %v", err)
	}
}

func TestParseRef(t *testing.T) {
	for _, tt := range []struct {
		in   string
		name string
		v    int
		bad  bool
	}{
		{"triage", "triage", 0, false},
		{"triage@3", "triage", 3, false},
		{"triage@0", "", 0, true},
		{"triage@x", "", 0, true},
		{"@2", "", 0, true},
		{"a/b", "", 0, true},
	} {
		n, v, err := ParseRef(tt.in)
		if (err != nil) != tt.bad || n != tt.name || v != tt.v {
			t.Errorf("ParseRef(%q) = %q, %d, %v", tt.in, n, v, err)
		}
	}
}

func TestImportErrors(t *testing.T) {
	for _, tt := range []struct{ file, want string }{
		{"tests:\n  - input: x\n", "x.yaml:2:5"},
		{"evalcases:\n  - id: a\n    expected_outcome: ok\n    input_messages: [{role: user, content: hi}]\n", "older evalcases"},
		{"tests:\n  - id: a b\n    input: x\n", "case id"},
		{"tests: [", "x.yaml"},
	} {
		_, err := Import("x.yaml", []byte(tt.file))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.file, err, tt.want)
		}
	}
}

func TestAddAndVersions(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ds, err := Open(st)
	if err != nil {
		t.Fatal(err)
	}
	recs := recordRun(t, "agent", "q", [2]string{"search", `{"q":"x"}`})
	if _, err := st.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	c, err := CaseFromStore(ctx, st, recs[0].TraceID.String()[:6])
	if err != nil {
		t.Fatal(err)
	}
	d1, err := Add(ctx, ds, "set", "first", []Case{c})
	if err != nil || d1.Version != 1 {
		t.Fatal(d1, err)
	}
	// The same run again: a second case, with a suffix, in version 2.
	qc, err := CasesFromQuery(ctx, st, "tool:search", 10)
	if err != nil || len(qc) != 1 {
		t.Fatal(qc, err)
	}
	d2, err := Add(ctx, ds, "set", "again", qc)
	if err != nil || d2.Version != 2 || len(d2.Cases) != 2 || d2.Cases[1].ID != c.ID+"-2" {
		t.Fatalf("%+v %v", d2, err)
	}
	old, err := Load(ctx, ds, "set@1")
	if err != nil || len(old.Cases) != 1 {
		t.Fatalf("set@1: %+v %v", old, err)
	}
	if _, err := CasesFromQuery(ctx, st, "tool:nothing", 10); err == nil {
		t.Fatal("a query that selects nothing made cases")
	}
	var buf bytes.Buffer
	if err := Export(&buf, "", d2.Cases); err != nil {
		t.Fatal(err)
	}
	if f, err := EvalFile("set@2", "", d2.Cases); err != nil || len(f.Cases) != 2 {
		t.Fatalf("eval file: %v", err)
	}
	_ = store.ErrConflict
}

func cr(id, verdict string, score, ms float64) CaseResult {
	return CaseResult{ID: id, Verdict: verdict, Score: score, LatencyMs: ms}
}

func TestCompare(t *testing.T) {
	cost := 0.5
	a := &Experiment{Name: "a", Dataset: "d", Version: 1, Cases: []CaseResult{
		cr("keeps", "pass", 1, 10), cr("breaks", "pass", 1, 20), cr("fixed", "fail", 0.2, 30), cr("gone", "pass", 1, 40), cr("still-bad", "fail", 0, 50),
	}}
	b := &Experiment{Name: "b", Dataset: "d", Version: 2, Cases: []CaseResult{
		cr("new", "pass", 1, 5), cr("still-bad", "error", 0, 60), cr("fixed", "pass", 0.9, 30), cr("keeps", "pass", 1, 10), cr("breaks", "fail", 0.4, 100),
	}}
	b.Cases[0].CostUSD = &cost
	c := Compare(a, b)
	var order []string
	for _, r := range c.Rows {
		order = append(order, string(r.Change)+":"+r.ID)
	}
	want := "regression:breaks fix:fixed unchanged:still-bad unchanged:keeps added:new removed:gone"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("rows %s\nwant %s", got, want)
	}
	if c.Regressions != 1 || c.Fixes != 1 || c.Unchanged != 2 {
		t.Fatalf("counts %+v", c)
	}
	if c.SummaryA.PassRate != 0.6 || c.SummaryB.PassRate != 0.6 || c.SummaryB.CostUSD != 0.5 || c.Delta.CostUSD != 0.5 {
		t.Fatalf("summaries %+v %+v", c.SummaryA, c.SummaryB)
	}
	// Nearest-rank percentiles: B's latencies 5 10 30 60 100.
	if c.SummaryB.P50Ms != 30 || c.SummaryB.P95Ms != 100 || c.Delta.P50Ms != 0 {
		t.Fatalf("latency %+v %+v", c.SummaryB, c.Delta)
	}
	if m := c.RegressionMessages(); len(m) != 1 || !strings.Contains(m["breaks"], "passed in a") {
		t.Fatalf("messages %v", m)
	}
	var txt, md bytes.Buffer
	if err := WriteText(&txt, c); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "## Loupe eval: 1 regression(s)") || !strings.Contains(md.String(), "| regression | `breaks` | pass 1.00 | fail 0.40 | -0.60 |") ||
		strings.Contains(md.String(), "`keeps`") {
		t.Fatalf("markdown:\n%s", md.String())
	}
	if !strings.HasPrefix(strings.Split(txt.String(), "\n")[3], "regression  breaks") {
		t.Fatalf("text:\n%s", txt.String())
	}
}

func TestSaveExperimentNames(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ds store.Datasets = st
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	name := DefaultName("set", now)
	if name != "set-20260102-030405" {
		t.Fatal(name)
	}
	for i, want := range []string{name, name + "-2"} {
		e := &Experiment{Name: name, Dataset: "set", Version: 1, Created: now, Cases: []CaseResult{cr("a", "pass", 1, 1)}}
		got, err := SaveExperiment(ctx, ds, e, true)
		if err != nil || got != want {
			t.Fatalf("%d: %q %v, want %q", i, got, err, want)
		}
	}
	e := &Experiment{Name: name, Dataset: "set", Version: 1}
	if _, err := SaveExperiment(ctx, ds, e, false); err == nil {
		t.Fatal("a taken name was accepted")
	}
	list, err := ListExperiments(ctx, ds, "set")
	if err != nil || len(list) != 2 || list[0].Summary.Passed != 1 {
		t.Fatalf("%+v %v", list, err)
	}
	got, err := LoadExperiment(ctx, ds, name)
	if err != nil || len(got.Cases) != 1 {
		t.Fatalf("%+v %v", got, err)
	}
}
