package evalrun_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/eval/fromtrace"
	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/trace"
)

// benchRun records a run of n tool calls (with a model call every 5).
func benchRun(n int) []trace.Record {
	tr := trace.New(trace.Options{})
	ctx, ec := tr.Start(context.Background(), "bench", trace.RunOptions{Input: trace.Text("go")})
	for i := range n {
		if i%5 == 0 {
			ec.ModelCall(trace.ModelCall{Model: "m", Usage: trace.Usage{InputTokens: 100, OutputTokens: 10}})
		}
		trace.Tool(ctx, fmt.Sprintf("tool%d", i%7), map[string]any{"q": i}, func(context.Context) (int, error) { return i, nil })
	}
	ec.End(trace.Text("done"), nil)
	return ec.Records()
}

// BenchmarkTrajectory measures the trace → trajectory mapping, per record.
func BenchmarkTrajectory(b *testing.B) {
	recs := benchRun(1000)
	b.ReportAllocs()
	for b.Loop() {
		fromtrace.Trajectory(recs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}

// BenchmarkGradeAndRow measures grading one case (in_order with 3 expected
// calls against 1000) and rendering its result row, the per-case cost of
// `loupe eval` beyond producing the run.
func BenchmarkGradeAndRow(b *testing.B) {
	run := evalrun.RunFromRecords(benchRun(1000), "bench")
	c := eval.Case{ID: "c", Assertions: []eval.Assertion{{Kind: eval.KindToolTrajectory, Weight: 1,
		Trajectory: &eval.TrajectorySpec{Mode: eval.InOrder, Expected: []eval.ExpectedCall{{Tool: "tool1", AnyArgs: true}, {Tool: "tool3", AnyArgs: true}, {Tool: "tool6", AnyArgs: true}}}}}}
	f := &eval.File{Path: "bench.yaml", Cases: []eval.Case{c}}
	rep := &evalrun.Report{Target: "bench", Files: []*eval.File{f}}
	b.ReportAllocs()
	for b.Loop() {
		res := eval.Evaluate(context.Background(), c, run.Trajectory, eval.Options{})
		rep.Results = []evalrun.Result{{CaseRef: evalrun.CaseRef{File: f, Case: c}, Run: run, Result: res}}
		if err := evalrun.WriteRows(io.Discard, rep, evalrun.RowOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatsOf is the reference for BenchmarkTrajectory: aggregating
// the same records with trace.StatsOf, which decodes no values.
func BenchmarkStatsOf(b *testing.B) {
	recs := benchRun(1000)
	b.ReportAllocs()
	for b.Loop() {
		trace.StatsOf(recs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
