package evalcli

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/dataset"
	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/store"
)

// loadDataset reads the dataset ref names from the store.
func loadDataset(ctx context.Context, ref string, getStore func() (store.Store, error)) (*dataset.Dataset, error) {
	s, err := getStore()
	if err != nil {
		return nil, err
	}
	dss, err := dataset.Open(s)
	if err != nil {
		return nil, err
	}
	d, err := dataset.Load(ctx, dss, ref)
	if err != nil {
		return nil, fmt.Errorf("--dataset: %w (list them with loupe dataset ls)", err)
	}
	if len(d.Cases) == 0 {
		return nil, fmt.Errorf("dataset %s has no cases: add runs with loupe dataset add TRACE --dataset %s", d.Ref(), d.Name)
	}
	return d, nil
}

// saveExperiment stores the run of dataset d as an experiment.
func saveExperiment(ctx context.Context, cfg Config, d *dataset.Dataset, rep *evalrun.Report, evalTrace string, st store.Store) (*dataset.Experiment, error) {
	dss, err := dataset.Open(st)
	if err != nil {
		return nil, err
	}
	conf := dataset.Config{Target: rep.Target, Model: cfg.Model, SystemPrompt: cfg.SystemPrompt, Command: cfg.Command, GitCommit: gitCommit(ctx)}
	name, unique := cfg.Experiment, false
	if name == "" {
		now := time.Now
		if cfg.Now != nil {
			now = cfg.Now
		}
		name, unique = dataset.DefaultName(d.Name, now()), true
	}
	if err := store.CheckName("experiment", name); err != nil {
		return nil, fmt.Errorf("--experiment: %w", err)
	}
	e := dataset.FromReport(name, d, conf, rep, evalTrace)
	if _, err := dataset.SaveExperiment(ctx, dss, e, unique); err != nil {
		return nil, fmt.Errorf("storing the experiment: %w", err)
	}
	return e, nil
}

// gitCommit is the commit of the working directory's repository, or "".
func gitCommit(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// writeSummaryMD writes a Markdown summary of an evaluation without a
// baseline: the counts and the cases that did not pass.
func writeSummaryMD(w io.Writer, rep *evalrun.Report) error {
	pass, fail, skip, errs := rep.Counts()
	if _, err := fmt.Fprintf(w, "## Loupe eval: %d passed, %d failed, %d skipped, %d could not run\n", pass, fail, skip, errs); err != nil {
		return err
	}
	first := true
	for _, r := range rep.Results {
		if r.Result.Verdict == "pass" || r.Result.Verdict == "skip" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\n| case | verdict | score |\n|---|---|---|")
			first = false
		}
		fmt.Fprintf(w, "| `%s` | %s | %.2f |\n", strings.ReplaceAll(r.Case.ID, "|", `\|`), r.Result.Verdict, r.Result.Score)
	}
	return nil
}
