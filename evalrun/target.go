// Package evalrun runs evaluations: it takes parsed eval files and a Target
// that produces a run for each case (an agent, a command printing an AgentV
// trace, recorded transcripts or trace files, traces in a store), grades
// every run with package eval on a pool of workers, and reports the results
// as a terminal summary, AgentV-compatible JSONL rows, JUnit XML, and
// records in a store.
//
// It is the Go API behind `loupe eval` (whose command-line half, flags to
// exit codes, is internal/evalcli), the collector's evaluation endpoints
// and the MCP server's run_eval tool.
package evalrun

import (
	"context"
	"slices"
	"strings"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/eval/fromtrace"
	"github.com/loupe-dev/loupe/trace"
)

// A Target produces the run that a case is graded against.
//
// Run is called once per case, possibly from several goroutines at once
// (Runner.Workers), so implementations must be safe for concurrent use. An
// error means the run could not be produced (the agent or command failed,
// no recorded run for the case); the case is then reported with the error
// verdict and the evaluation exits with status 2.
type Target interface {
	// Name says what is graded, for result rows ("command", "transcript",
	// a model name, …).
	Name() string
	// Run produces the run for c.
	Run(ctx context.Context, c CaseRef) (*Run, error)
}

// A Preparer is a Target that needs to see every case before the first Run,
// for example to pair recorded runs with cases. Runner calls Prepare once;
// an error stops the evaluation before any case is graded.
type Preparer interface {
	Prepare(ctx context.Context, cases []CaseRef) error
}

// CaseRef is one case of one file, as handed to a Target.
type CaseRef struct {
	// File is the eval file the case comes from.
	File *eval.File
	// Case is the case itself.
	Case eval.Case
	// Index is the case's position among all cases of the evaluation, in
	// file order then case order, from 0.
	Index int
}

// Run is one run of an agent, as graded.
type Run struct {
	// Trajectory is what eval grades.
	Trajectory eval.Trajectory
	// Records are the run's trace records when it was recorded by Loupe
	// or imported into Loupe records; nil for sources that have none
	// (AgentV transcripts, plain-text command output).
	Records []trace.Record
	// TraceID identifies Records' trace; zero when Records is nil.
	TraceID trace.TraceID
	// Name is the run's name (the root run.start's name, a transcript's
	// test id), used to pair recorded runs with cases.
	Name string
	// Tags are the root run's tags.
	Tags []string
	// Source says where the run came from (a file name, a command, a DSN)
	// for messages.
	Source string
	// Failure, when set, is why the agent run ended early (out of turns,
	// a model error, a panic): the case is reported as an error with this
	// cause, though what the run did is still graded and kept.
	Failure error
	// Warning, when set, is a problem with how the run was obtained that
	// did not stop grading (a command that printed plain text, no trace).
	Warning string
}

// RunFromRecords builds a Run from one trace's records: the trajectory by
// fromtrace.Trajectory, the trace id, and the name and tags of the root
// run.start.
func RunFromRecords(recs []trace.Record, source string) *Run {
	r := &Run{Records: recs, Trajectory: fromtrace.Trajectory(recs), Source: source}
	if len(recs) > 0 {
		r.TraceID = recs[0].TraceID
	}
	for i := range recs {
		if recs[i].Type == trace.TypeRunStart && recs[i].Depth == 0 {
			r.Name = recs[i].Name
			r.Tags = slices.Clone(recs[i].Tags())
			break
		}
	}
	return r
}

// CaseTag is the tag prefix naming the case a run was made for:
// "case:<case id>". Runs Loupe makes for a case carry it, and recorded runs
// with it are paired with that case.
const CaseTag = "case:"

// caseName reports whether run r is named for case id: its name is id or
// it carries the tag "case:<id>".
func (r *Run) caseName(id string) bool {
	if r.Name == id {
		return true
	}
	return slices.Contains(r.Tags, CaseTag+id)
}

// withTags returns recs with tags added to the root run.start (copying the
// records it changes), so that stored runs can be found by case later.
func withTags(recs []trace.Record, tags ...string) []trace.Record {
	out := slices.Clone(recs)
	for i := range out {
		if out[i].Type == trace.TypeRunStart && out[i].Depth == 0 {
			ri := out[i].EditRun() // a copy: recs keep theirs
			for _, tag := range tags {
				if !slices.Contains(ri.Tags, tag) {
					ri.Tags = append(ri.Tags, tag)
				}
			}
			break
		}
	}
	return out
}

// suiteName is AgentV's suite for an eval file: its base name up to the
// first dot ("multi-agent.eval.yaml" → "multi-agent").
func suiteName(path string) string {
	base := path[strings.LastIndexAny(path, `/\`)+1:]
	if i := strings.IndexByte(base, '.'); i > 0 {
		base = base[:i]
	}
	return base
}
