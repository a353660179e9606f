package evalrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/eval/fromtrace"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

// Assign pairs each case with one of runs, by these rules, the first that
// applies:
//
//  1. By name: every case's ID names exactly one run (its name, or a
//     "case:<id>" tag). Runs then need not be in any order, and extra runs
//     are ignored.
//  2. One run: every case is graded against it, like AgentV's static-trace
//     providers, which print the same trace whatever the input.
//  3. By position: as many runs as cases; the i-th case gets the i-th run
//     (the order of the transcript, of the trace files, of the store's
//     selection oldest first). This is how AgentV maps transcripts.
//
// Otherwise it returns an error saying how many runs and cases there were
// and how to select them. The result is indexed like cases.
func Assign(cases []CaseRef, runs []*Run) ([]*Run, error) {
	if len(runs) == 0 {
		return nil, errors.New("no recorded runs to grade: the transcript or trace files hold no trace; check that they are the files the agent wrote")
	}
	out := make([]*Run, len(cases))
	byName := true
	for i, c := range cases {
		var found *Run
		n := 0
		for _, r := range runs {
			if r.caseName(c.Case.ID) {
				found = r
				n++
			}
		}
		if n != 1 {
			byName = false
			break
		}
		out[i] = found
	}
	if byName {
		return out, nil
	}
	switch {
	case len(runs) == 1:
		for i := range out {
			out[i] = runs[0]
		}
	case len(runs) == len(cases):
		copy(out, runs)
	default:
		return nil, fmt.Errorf("%d recorded runs for %d cases: runs are paired with cases by name (run name or tag %q equal to the case id), else by position when the counts are equal, or one run is graded against every case; select the runs so that one of these holds",
			len(runs), len(cases), CaseTag+"<id>")
	}
	return out, nil
}

// Recorded is a Target that grades runs recorded earlier, paired with cases
// by Assign when the evaluation starts. Build one with NewRecorded,
// TranscriptTarget, TraceFilesTarget or StoreTarget.
type Recorded struct {
	name     string
	load     func(ctx context.Context) ([]*Run, error)
	assigned []*Run
}

// NewRecorded returns a Target named name whose runs are loaded by load
// when the evaluation starts.
func NewRecorded(name string, load func(ctx context.Context) ([]*Run, error)) *Recorded {
	return &Recorded{name: name, load: load}
}

// Name implements Target.
func (t *Recorded) Name() string { return t.name }

// Prepare loads the runs and pairs them with cases (see Assign).
func (t *Recorded) Prepare(ctx context.Context, cases []CaseRef) error {
	runs, err := t.load(ctx)
	if err != nil {
		return err
	}
	t.assigned, err = Assign(cases, runs)
	return err
}

// Run returns the run paired with c by Prepare.
func (t *Recorded) Run(_ context.Context, c CaseRef) (*Run, error) {
	if c.Index < 0 || c.Index >= len(t.assigned) {
		return nil, fmt.Errorf("case %s: no recorded run (Prepare was not called with this case)", c.Case.ID)
	}
	return t.assigned[c.Index], nil
}

// TranscriptTarget grades the runs of AgentV transcript JSONL files (see
// eval.ParseTranscript), read in the order given. Transcripts hold no Loupe
// records, so their runs are not stored.
func TranscriptTarget(paths ...string) *Recorded {
	return NewRecorded("transcript", func(context.Context) ([]*Run, error) {
		var runs []*Run
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			recs, err := eval.ParseTranscript(p, f)
			f.Close()
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				runs = append(runs, &Run{Trajectory: r.Trajectory, Name: r.TestID, Source: p})
			}
		}
		return runs, nil
	})
}

// TraceFilesTarget grades the traces in files of any format traceio reads
// (format f, or traceio.FormatAuto to detect each file's). A file may hold
// several traces; they are taken in order of first appearance.
func TraceFilesTarget(f traceio.Format, paths ...string) *Recorded {
	return NewRecorded("trace", func(context.Context) ([]*Run, error) {
		var runs []*Run
		for _, p := range paths {
			recs, _, err := traceio.ReadFile(p, f)
			if err != nil {
				return nil, err
			}
			for _, one := range fromtrace.Split(recs) {
				runs = append(runs, RunFromRecords(one, p))
			}
		}
		return runs, nil
	})
}

// StoreSelection picks the stored traces StoreTarget grades.
type StoreSelection struct {
	// Filter narrows the traces (name, tags, since, …). Traces tagged
	// EvalTag (stored evaluation results) are always left out.
	Filter store.Filter
	// Limit keeps only the newest Limit matching traces; 0 means all.
	Limit int
}

// StoreTarget grades traces already in st. The selected traces are taken
// oldest first, so that positional pairing follows the order the runs were
// made in. st is not closed.
func StoreTarget(st store.Store, sel StoreSelection) *Recorded {
	return NewRecorded("store", func(ctx context.Context) ([]*Run, error) {
		var ids []trace.TraceID
		q := store.ListQuery{Filter: sel.Filter, Limit: store.MaxLimit}
		for {
			page, err := st.List(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("listing stored traces: %w", err)
			}
			for _, s := range page.Traces {
				if slices.Contains(s.Tags, EvalTag) {
					continue
				}
				ids = append(ids, s.ID)
				if sel.Limit > 0 && len(ids) == sel.Limit {
					break
				}
			}
			if page.Next == "" || (sel.Limit > 0 && len(ids) == sel.Limit) {
				break
			}
			q.Cursor = page.Next
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("no stored trace matches the selection %s", describeFilter(sel))
		}
		slices.Reverse(ids) // List is newest first
		runs := make([]*Run, 0, len(ids))
		for _, id := range ids {
			tr, err := st.Trace(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("reading stored trace %s: %w", id, err)
			}
			runs = append(runs, RunFromRecords(tr.Records, "store"))
		}
		return runs, nil
	})
}

func describeFilter(sel StoreSelection) string {
	var parts []string
	f := sel.Filter
	if f.Name != "" {
		parts = append(parts, "name="+f.Name)
	}
	for _, t := range f.Tags {
		parts = append(parts, "tag="+t)
	}
	if !f.Since.IsZero() {
		parts = append(parts, "since="+f.Since.Format("2006-01-02T15:04:05Z07:00"))
	}
	if sel.Limit > 0 {
		parts = append(parts, fmt.Sprintf("limit=%d", sel.Limit))
	}
	if len(parts) == 0 {
		return "(all traces)"
	}
	return "(" + strings.Join(parts, " ") + ")"
}
