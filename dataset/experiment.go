package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/store"
)

// Config is the agent configuration an experiment ran: what the cases
// were run with, as far as it is known.
type Config struct {
	// Target is the evaluation target's name ("command", "scripted", a
	// model name).
	Target string `json:"target"`
	// Model is the model spec (provider:model) when the target is a model.
	Model string `json:"model,omitempty"`
	// SystemPrompt is the agent's system prompt when Loupe set it.
	SystemPrompt string `json:"system_prompt,omitempty"`
	// Command is the shell command run per case, for a command target.
	Command string `json:"command,omitempty"`
	// GitCommit is the commit of the working directory's repository, when
	// there is one.
	GitCommit string `json:"git_commit,omitempty"`
}

// CaseResult is one case's outcome in an experiment.
type CaseResult struct {
	// ID is the case's id in the dataset.
	ID string `json:"id"`
	// Trace is the hex id of the run's trace, when it was recorded.
	Trace string `json:"trace,omitempty"`
	// Verdict is pass, fail, skip or error.
	Verdict string `json:"verdict"`
	// Score is the case score in [0, 1].
	Score float64 `json:"score"`
	// Scores are the graders' scores, by grader name.
	Scores map[string]float64 `json:"scores,omitempty"`
	// CostUSD is the run's model cost; nil when unknown.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// LatencyMs is how long the run took (its recorded duration, else the
	// time to produce and grade it).
	LatencyMs float64 `json:"latency_ms"`
	// Error says why the run could not be produced or graded.
	Error string `json:"error,omitempty"`
}

// Passed reports whether the case passed.
func (r *CaseResult) Passed() bool { return r != nil && r.Verdict == string(eval.Pass) }

// Experiment is a dataset version run against one agent configuration.
type Experiment struct {
	Name    string    `json:"name"`
	Dataset string    `json:"dataset"`
	Version int       `json:"version"`
	Created time.Time `json:"created"`
	Config  Config    `json:"config"`
	// EvalTrace is the id of the trace holding the evaluation's results
	// (evalrun.Save), when they were stored.
	EvalTrace string `json:"eval_trace,omitempty"`
	// Cases are the results, in the dataset's order.
	Cases []CaseResult `json:"cases"`
}

// Summary totals an experiment.
type Summary struct {
	Cases   int `json:"cases"`
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Errors  int `json:"errors"`
	Skipped int `json:"skipped"`
	// PassRate is Passed / Cases (0 without cases).
	PassRate float64 `json:"pass_rate"`
	// MeanScore is the mean case score.
	MeanScore float64 `json:"mean_score"`
	// CostUSD sums the known costs.
	CostUSD float64 `json:"cost_usd"`
	// P50Ms and P95Ms are latency percentiles (nearest rank).
	P50Ms float64 `json:"p50_ms"`
	P95Ms float64 `json:"p95_ms"`
}

// Summarize totals cases.
func Summarize(cases []CaseResult) Summary {
	s := Summary{Cases: len(cases)}
	lat := make([]float64, 0, len(cases))
	sum := 0.0
	for i := range cases {
		c := &cases[i]
		switch c.Verdict {
		case string(eval.Pass):
			s.Passed++
		case string(eval.Fail):
			s.Failed++
		case string(evalrun.VerdictError):
			s.Errors++
		default:
			s.Skipped++
		}
		sum += c.Score
		if c.CostUSD != nil {
			s.CostUSD += *c.CostUSD
		}
		lat = append(lat, c.LatencyMs)
	}
	if len(cases) > 0 {
		s.PassRate = float64(s.Passed) / float64(len(cases))
		s.MeanScore = sum / float64(len(cases))
	}
	slices.Sort(lat)
	s.P50Ms, s.P95Ms = percentile(lat, 50), percentile(lat, 95)
	return s
}

// percentile is the nearest-rank percentile p of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// FromReport makes an experiment from an evaluation of dataset d: one
// CaseResult per result of rep, in order.
func FromReport(name string, d *Dataset, cfg Config, rep *evalrun.Report, evalTrace string) *Experiment {
	e := &Experiment{Name: name, Dataset: d.Name, Version: d.Version, Created: rep.Started.UTC(), Config: cfg, EvalTrace: evalTrace, Cases: []CaseResult{}}
	if cfg.Target == "" {
		e.Config.Target = rep.Target
	}
	for _, r := range rep.Results {
		cr := CaseResult{ID: r.Case.ID, Verdict: string(r.Result.Verdict), Score: r.Result.Score, LatencyMs: float64(r.Elapsed) / 1e6}
		if r.Err != nil {
			cr.Error = r.Err.Error()
		}
		for _, a := range r.Result.Assertions {
			if cr.Scores == nil {
				cr.Scores = map[string]float64{}
			}
			cr.Scores[a.Name] = a.Score
		}
		if r.Run != nil {
			if !r.Run.TraceID.IsZero() {
				cr.Trace = r.Run.TraceID.String()
			}
			if t := r.Run.Trajectory; t.Duration != nil {
				cr.LatencyMs = float64(*t.Duration) / 1e6
			}
			if c := r.Run.Trajectory.CostUSD; c != nil {
				v := *c
				cr.CostUSD = &v
			}
		}
		e.Cases = append(e.Cases, cr)
	}
	return e
}

// DefaultName is the name an experiment of dataset gets when none is
// given: the dataset's name and the time, "triage-20260102-150405".
func DefaultName(dataset string, now time.Time) string {
	return dataset + "-" + now.UTC().Format("20060102-150405")
}

// SaveExperiment stores e. When e.Name is taken and unique is set, a
// suffix ("-2", …) is added until it is free; else the name conflict is an
// error wrapping store.ErrConflict. It returns the name used.
func SaveExperiment(ctx context.Context, ds store.Datasets, e *Experiment, unique bool) (string, error) {
	base := e.Name
	for n := 2; ; n++ {
		doc, err := json.Marshal(e)
		if err != nil {
			return "", err
		}
		sum, err := json.Marshal(Summarize(e.Cases))
		if err != nil {
			return "", err
		}
		err = ds.PutExperiment(ctx, store.Experiment{Name: e.Name, Dataset: e.Dataset, Version: e.Version, Created: e.Created, Summary: sum, Doc: doc})
		if unique && errors.Is(err, store.ErrConflict) && n < 100 {
			e.Name = fmt.Sprintf("%s-%d", base, n)
			continue
		}
		return e.Name, err
	}
}

// LoadExperiment reads experiment name.
func LoadExperiment(ctx context.Context, ds store.Datasets, name string) (*Experiment, error) {
	se, err := ds.Experiment(ctx, name)
	if err != nil {
		return nil, err
	}
	var e Experiment
	if err := json.Unmarshal(se.Doc, &e); err != nil {
		return nil, fmt.Errorf("experiment %s: stored document: %w", name, err)
	}
	return &e, nil
}

// Listing is one experiment in a list: who ran what, and its totals.
type Listing struct {
	Name    string    `json:"name"`
	Dataset string    `json:"dataset"`
	Version int       `json:"version"`
	Created time.Time `json:"created"`
	Summary Summary   `json:"summary"`
}

// ListExperiments lists experiments newest first; dataset, when not
// empty, keeps those of that dataset.
func ListExperiments(ctx context.Context, ds store.Datasets, dataset string) ([]Listing, error) {
	list, err := ds.ListExperiments(ctx, dataset)
	if err != nil {
		return nil, err
	}
	out := make([]Listing, 0, len(list))
	for _, e := range list {
		l := Listing{Name: e.Name, Dataset: e.Dataset, Version: e.Version, Created: e.Created}
		if len(e.Summary) > 0 {
			if err := json.Unmarshal(e.Summary, &l.Summary); err != nil {
				return nil, fmt.Errorf("experiment %s: stored summary: %w", e.Name, err)
			}
		}
		out = append(out, l)
	}
	return out, nil
}
