package evalrun

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/loupe-dev/loupe/eval"
)

// Exit statuses of an evaluation, as `loupe eval` returns them.
const (
	ExitPass      = 0 // every graded case passed (some may be skipped; at least one was graded)
	ExitFail      = 1 // a case failed
	ExitNotGraded = 2 // the evaluation could not run: a bad file, a target or grader that failed, nothing graded
)

// VerdictError is the verdict of a case whose run could not be produced.
const VerdictError eval.Verdict = "error"

// Runner grades eval files against a Target. The zero value is not usable:
// Target is required.
type Runner struct {
	// Target produces the runs.
	Target Target
	// Options configure grading (mode, threshold, judge).
	Options eval.Options
	// Workers is how many cases are run and graded at once; 0 or less
	// means 1. Results are reported in input order whatever the value.
	Workers int
	// Progress, when set, receives a progress bar (one update per case).
	Progress io.Writer
	// Now returns the time results are stamped with; nil means time.Now.
	Now func() time.Time
}

// Result is the outcome of one case.
type Result struct {
	CaseRef
	// Run is what was graded; nil when Err is set.
	Run *Run
	// Result is eval's grade; its Verdict is VerdictError when Err is set.
	Result eval.CaseResult
	// Err says why no run could be produced.
	Err error
	// Time is when the case finished.
	Time time.Time
	// Elapsed is how long producing and grading the run took.
	Elapsed time.Duration
}

// Report is the outcome of an evaluation, results in input order.
type Report struct {
	Target    string        // the target's name, as in result rows
	Mode      eval.Mode     // the grading semantics
	Threshold float64       // the case pass mark used
	Files     []*eval.File  // the eval files, in the order given
	Results   []Result      // one per graded case, in input order
	Started   time.Time     // when the evaluation began
	Elapsed   time.Duration // how long it took in all
}

// Counts tallies the verdicts.
func (r *Report) Counts() (pass, fail, skip, errs int) {
	for _, x := range r.Results {
		switch x.Result.Verdict {
		case eval.Pass:
			pass++
		case eval.Fail:
			fail++
		case VerdictError:
			errs++
		default:
			skip++
		}
	}
	return
}

// ExitCode is ExitNotGraded when a case or a grader could not be run, or
// when no case was graded at all (every case skipped); else ExitFail when a
// case failed; else ExitPass.
func (r *Report) ExitCode() int {
	pass, fail, _, errs := r.Counts()
	switch {
	case errs > 0 || r.GradersNotRun() > 0:
		return ExitNotGraded
	case len(r.Results) > 0 && pass+fail == 0:
		return ExitNotGraded
	case fail > 0:
		return ExitFail
	}
	return ExitPass
}

// GradersNotRun counts the graders (and whole cases) reported as
// eval.CouldNotRun.
func (r *Report) GradersNotRun() int {
	n := 0
	for _, x := range r.Results {
		for _, a := range x.Result.Assertions {
			if a.Verdict == eval.CouldNotRun {
				n++
			}
		}
	}
	return n
}

// Cases lists the cases of files in evaluation order.
func Cases(files []*eval.File) []CaseRef {
	var refs []CaseRef
	for _, f := range files {
		for _, c := range f.Cases {
			refs = append(refs, CaseRef{File: f, Case: c, Index: len(refs)})
		}
	}
	return refs
}

// Run grades every case of files. It returns an error only when the
// evaluation could not start (the Target's Prepare failed); a case whose run
// failed is reported in the Report with VerdictError. When ctx is canceled,
// cases not yet started are reported with the context's error.
func (rn *Runner) Run(ctx context.Context, files []*eval.File) (*Report, error) {
	now := rn.Now
	if now == nil {
		now = time.Now
	}
	cases := Cases(files)
	thr := rn.Options.Threshold
	if thr == 0 {
		thr = eval.DefaultThreshold
	}
	rep := &Report{Target: rn.Target.Name(), Mode: rn.Options.Mode, Threshold: thr, Files: files, Started: now()}
	if p, ok := rn.Target.(Preparer); ok {
		if err := p.Prepare(ctx, cases); err != nil {
			return nil, err
		}
	}
	rep.Results = make([]Result, len(cases))
	workers := max(rn.Workers, 1)
	var bar *progressbar.ProgressBar
	if rn.Progress != nil && len(cases) > 0 {
		bar = progressbar.NewOptions(len(cases),
			progressbar.OptionSetWriter(rn.Progress),
			progressbar.OptionSetDescription("grading"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond),
		)
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	var barMu sync.Mutex
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				rep.Results[i] = rn.one(ctx, cases[i], now)
				if bar != nil {
					barMu.Lock()
					_ = bar.Add(1)
					barMu.Unlock()
				}
			}
		}()
	}
	for i := range cases {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if bar != nil {
		_ = bar.Finish()
	}
	rep.Elapsed = now().Sub(rep.Started)
	return rep, nil
}

// one produces and grades the run of one case.
func (rn *Runner) one(ctx context.Context, c CaseRef, now func() time.Time) (res Result) {
	start := time.Now()
	res.CaseRef = c
	defer func() {
		res.Time = now()
		res.Elapsed = time.Since(start)
	}()
	thr := rn.Options.Threshold
	if thr == 0 {
		thr = eval.DefaultThreshold
	}
	errResult := func(err error) Result {
		res.Err = err
		res.Result = eval.CaseResult{CaseID: c.Case.ID, Mode: rn.Options.Mode, Threshold: thr, Verdict: VerdictError}
		return res
	}
	if err := ctx.Err(); err != nil {
		return errResult(err)
	}
	run, err := rn.Target.Run(ctx, c)
	if err != nil {
		return errResult(err)
	}
	if run == nil {
		return errResult(fmt.Errorf("case %s: the target returned no run", c.Case.ID))
	}
	res.Run = run
	res.Result = eval.Evaluate(ctx, c.Case, run.Trajectory, rn.Options)
	if run.Failure != nil {
		// What the run did is graded and kept, but a run that crashed is
		// an error with its cause, not an ordinary failure.
		res.Err = fmt.Errorf("case %s: the agent run failed: %w", c.Case.ID, run.Failure)
		res.Result.Verdict = VerdictError
	}
	return res
}
