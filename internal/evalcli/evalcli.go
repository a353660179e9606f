// Package evalcli is the command-line half of `loupe eval`: a Config filled
// from the command's flags and Execute, which picks the target, runs
// package evalrun, writes the reports and returns the exit code.
package evalcli

import (
	"context"
	"errors"
	"fmt"
	"github.com/loupe-dev/loupe/evalrun"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/dataset"
	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/llm"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/traceio"
)

// Config is everything `loupe eval` is told on its command line. The
// command fills it from flags and calls Execute; all behavior lives here.
type Config struct {
	// Files are the eval files, graded in order.
	Files []string

	// Exactly one target: Command, Transcripts, Traces, FromStore or
	// Agent.
	Command     string                 // a shell command printing an AgentV trace
	Timeout     time.Duration          // per run of Command or Agent; 0: none
	Transcripts []string               // AgentV transcript JSONL files
	Traces      []string               // trace files in any format traceio reads
	TraceFormat string                 // the Traces' format; "" or "auto" detects
	FromStore   bool                   // grade traces already in the store
	Selection   evalrun.StoreSelection // which stored traces FromStore grades
	// Script is a scripted-model file or directory (evalrun.ScriptTarget).
	Script string
	// Agent, when set, is an in-process agent target built by the caller
	// (a Go program embedding loupe eval with its own agent).
	Agent evalrun.Target
	// Model runs a ReAct agent per case on this model (provider:model, as
	// llm.Open reads it), with SystemPrompt and stand-in tools.
	Model        string
	SystemPrompt string

	// Dataset, instead of Files, grades the cases of a stored dataset
	// ("NAME" or "NAME@VERSION") and stores the run as an experiment
	// named Experiment (default: the dataset's name and the time).
	Dataset    string
	Experiment string
	// Baseline names a stored experiment to compare the run with: the
	// comparison is printed, added to the JUnit report and written as
	// Markdown to SummaryMD. With FailOnRegression the exit status is
	// evalrun.ExitFail when a case that passed in the baseline does not
	// pass now, and otherwise ignores cases that did not pass in either
	// (evalrun.ExitNotGraded still wins when nothing could be graded).
	Baseline         string
	FailOnRegression bool
	SummaryMD        string

	// Grading.
	Threshold float64 // 0: eval.DefaultThreshold
	Compat    string  // "" or "loupe": eval.ModeDefault; "agentv": eval.ModeAgentV
	// Strict refuses a whole eval file on any problem in it. Without it,
	// a bad grader or test is reported as could not run (default) or
	// handled as AgentV 4.42.4 handles it (--compat agentv).
	Strict bool
	// GraderTimeout bounds one run of a code-grader command; 0 means
	// eval.DefaultGraderTimeout.
	GraderTimeout time.Duration
	// JudgeModel is the model that runs the LLM graders, as llm.Open
	// reads it ("openai:gpt-4o-mini", "scripted:FILE"); "" skips them
	// (each skipped case is named, with how to enable them). JudgeBaseURL
	// and JudgeAPIKey replace the provider's endpoint and key. Judge,
	// when set, is used instead (a Go program's own judge).
	JudgeModel   string
	JudgeBaseURL string
	JudgeAPIKey  string
	// JudgeTimeout bounds one judge call; 0 means no limit.
	JudgeTimeout time.Duration
	Judge        eval.Judge
	Workers      int  // 0: 1
	Progress     bool // force the progress bar on standard error

	// Outputs.
	Out          string // results JSONL path ("-" for standard output)
	IncludeTrace bool   // full traces in Out
	JUnit        string // JUnit XML path

	// Store: where results (and the graded runs) are kept. DB is a path or
	// DSN ("" is store.DefaultPath); NoStore turns storing off.
	DB      string
	NoStore bool
	// OpenStore opens the store; nil means store.Open.
	OpenStore func(ctx context.Context, dsn string) (store.Store, error)

	// Now stamps results; nil means time.Now. Tests fix it.
	Now func() time.Time
	// StderrIsTerminal turns the progress bar on (the command sets it
	// when standard error is a terminal).
	StderrIsTerminal bool
}

// Execute runs the evaluation described by cfg, writing the summary to
// stdout and progress and warnings to stderr, and returns the exit status
// (evalrun.ExitPass, evalrun.ExitFail or evalrun.ExitNotGraded) with, for evalrun.ExitNotGraded, the error
// that stopped it. Results not written (a file that cannot be created) make
// the status evalrun.ExitNotGraded too.
func Execute(ctx context.Context, cfg Config, stdout, stderr io.Writer) (int, error) {
	code, err := execute(ctx, cfg, stdout, stderr)
	if err != nil && code == evalrun.ExitPass {
		code = evalrun.ExitNotGraded
	}
	return code, err
}

func execute(ctx context.Context, cfg Config, stdout, stderr io.Writer) (int, error) {
	switch {
	case cfg.Dataset != "" && len(cfg.Files) > 0:
		return evalrun.ExitNotGraded, errors.New("eval files and --dataset given together: grade either files or a dataset")
	case cfg.Dataset == "" && len(cfg.Files) == 0:
		return evalrun.ExitNotGraded, errors.New("no eval file given: loupe eval FILE… with one or more AgentV eval files, or --dataset NAME")
	case cfg.Dataset != "" && cfg.NoStore:
		return evalrun.ExitNotGraded, errors.New("--dataset with --no-store: a dataset's run is stored as an experiment; drop --no-store")
	case cfg.Dataset == "" && (cfg.Baseline != "" || cfg.Experiment != ""):
		return evalrun.ExitNotGraded, errors.New("--baseline and --experiment go with --dataset NAME")
	case cfg.FailOnRegression && cfg.Baseline == "":
		return evalrun.ExitNotGraded, errors.New("--fail-on-regression needs --baseline EXPERIMENT to compare with")
	}
	opts := eval.Options{Threshold: cfg.Threshold, GraderTimeout: cfg.GraderTimeout}
	switch strings.ToLower(cfg.Compat) {
	case "", "loupe", "default":
	case "agentv":
		opts.Mode = eval.ModeAgentV
	default:
		return evalrun.ExitNotGraded, fmt.Errorf("--compat %q: want agentv (AgentV 4.42.4 scoring) or loupe (the default)", cfg.Compat)
	}
	if cfg.Threshold < 0 || cfg.Threshold > 1 {
		return evalrun.ExitNotGraded, fmt.Errorf("--threshold %g: want a score in (0, 1]", cfg.Threshold)
	}
	opts.Judge = cfg.Judge
	if opts.Judge == nil && cfg.JudgeModel != "" {
		j, err := evalrun.OpenJudge(cfg.JudgeModel, llm.Options{BaseURL: cfg.JudgeBaseURL, APIKey: cfg.JudgeAPIKey})
		if err != nil {
			return evalrun.ExitNotGraded, err
		}
		j.Timeout = cfg.JudgeTimeout
		opts.Judge = j
	} else if opts.Judge == nil && (cfg.JudgeBaseURL != "" || cfg.JudgeAPIKey != "") {
		return evalrun.ExitNotGraded, errors.New("--judge-base-url or --judge-api-key given without --judge-model: name the judge model too, e.g. --judge-model openai:gpt-4o-mini")
	}
	load := eval.LoadDefault
	switch {
	case cfg.Strict:
		load = eval.LoadStrict
	case opts.Mode == eval.ModeAgentV:
		load = eval.LoadAgentV
	}
	openStore := cfg.OpenStore
	if openStore == nil {
		openStore = store.Open
	}
	var st store.Store
	defer func() {
		if st != nil {
			st.Close()
		}
	}()
	getStore := func() (store.Store, error) {
		if st == nil {
			s, err := openStore(ctx, cfg.DB)
			if err != nil {
				return nil, fmt.Errorf("opening the store %s: %w", store.Redact(orDefault(cfg.DB)), err)
			}
			st = s
		}
		return st, nil
	}

	var files []*eval.File
	var ds *dataset.Dataset
	if cfg.Dataset != "" {
		var err error
		if ds, err = loadDataset(ctx, cfg.Dataset, getStore); err != nil {
			return evalrun.ExitNotGraded, err
		}
		f, err := dataset.EvalFile(ds.Ref(), "dataset "+ds.Ref(), ds.Cases)
		if err != nil {
			return evalrun.ExitNotGraded, fmt.Errorf("dataset %s: %w", ds.Ref(), err)
		}
		files = append(files, f)
	}
	var perr []error
	for _, p := range cfg.Files {
		f, err := eval.ParseFileMode(p, load)
		if err != nil {
			perr = append(perr, err)
			continue
		}
		for _, w := range f.Warnings {
			fmt.Fprintf(stderr, "loupe eval: warning: %s\n", w)
		}
		files = append(files, f)
	}
	if len(perr) > 0 {
		return evalrun.ExitNotGraded, errors.Join(perr...)
	}
	var baseline *dataset.Experiment
	if cfg.Baseline != "" {
		s, err := getStore()
		if err != nil {
			return evalrun.ExitNotGraded, err
		}
		dss, err := dataset.Open(s)
		if err != nil {
			return evalrun.ExitNotGraded, err
		}
		if baseline, err = dataset.LoadExperiment(ctx, dss, cfg.Baseline); err != nil {
			return evalrun.ExitNotGraded, fmt.Errorf("--baseline: %w (list them with loupe experiments ls)", err)
		}
	}

	target, err := chooseTarget(cfg, getStore)
	if err != nil {
		return evalrun.ExitNotGraded, err
	}
	rn := &evalrun.Runner{Target: target, Options: opts, Workers: cfg.Workers, Now: cfg.Now}
	if cfg.Progress || cfg.StderrIsTerminal {
		rn.Progress = stderr
	}
	rep, err := rn.Run(ctx, files)
	if err != nil {
		return evalrun.ExitNotGraded, err
	}
	// Say once on standard error what the summary says per case.
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if r.Run != nil && r.Run.Warning != "" && !seen[r.Run.Warning] {
			seen[r.Run.Warning] = true
			fmt.Fprintf(stderr, "loupe eval: warning: %s\n", r.Run.Warning)
		}
	}
	if err := evalrun.WriteSummary(stdout, rep, cfg.Now == nil); err != nil {
		return evalrun.ExitNotGraded, err
	}
	if cfg.Out != "" {
		if err := writeTo(cfg.Out, stdout, func(w io.Writer) error {
			return evalrun.WriteRows(w, rep, evalrun.RowOptions{IncludeTrace: cfg.IncludeTrace})
		}); err != nil {
			return evalrun.ExitNotGraded, fmt.Errorf("writing results: %w", err)
		}
	}
	var evalTrace string
	if !cfg.NoStore {
		// A store that cannot be opened or written does not change the
		// verdict of the evaluation; it is reported, never silent.
		if s, err := getStore(); err != nil {
			fmt.Fprintf(stderr, "loupe eval: results not stored: %v (use --no-store to not store them)\n", err)
		} else if id, err := evalrun.Save(ctx, s, rep, cfg.Now); err != nil {
			fmt.Fprintf(stderr, "loupe eval: results not stored: %v\n", err)
		} else {
			evalTrace = id.String()
			fmt.Fprintf(stderr, "loupe eval: results stored as trace %s\n", id)
		}
	}
	var cmp *dataset.Comparison
	if ds != nil {
		exp, err := saveExperiment(ctx, cfg, ds, rep, evalTrace, st)
		if err != nil {
			return evalrun.ExitNotGraded, err
		}
		fmt.Fprintf(stderr, "loupe eval: experiment %s stored (dataset %s)\n", exp.Name, ds.Ref())
		if baseline != nil {
			cmp = dataset.Compare(baseline, exp)
			fmt.Fprintln(stdout)
			if err := dataset.WriteText(stdout, cmp); err != nil {
				return evalrun.ExitNotGraded, err
			}
		}
	}
	if cfg.JUnit != "" {
		jo := evalrun.JUnitOptions{Times: cfg.Now == nil}
		if cmp != nil {
			jo.Baseline, jo.Regressions = cmp.A, cmp.RegressionMessages()
		}
		if err := writeTo(cfg.JUnit, stdout, func(w io.Writer) error {
			return evalrun.WriteJUnit(w, rep, jo)
		}); err != nil {
			return evalrun.ExitNotGraded, fmt.Errorf("writing the JUnit report: %w", err)
		}
	}
	if cfg.SummaryMD != "" {
		if err := writeTo(cfg.SummaryMD, stdout, func(w io.Writer) error {
			if cmp != nil {
				return dataset.WriteMarkdown(w, cmp)
			}
			return writeSummaryMD(w, rep)
		}); err != nil {
			return evalrun.ExitNotGraded, fmt.Errorf("writing the Markdown summary: %w", err)
		}
	}
	code := rep.ExitCode()
	if cfg.FailOnRegression && cmp != nil && code != evalrun.ExitNotGraded {
		if cmp.Regressions > 0 {
			return evalrun.ExitFail, fmt.Errorf("%d regression(s) against the baseline %s: a case that passed there does not pass now", cmp.Regressions, cmp.A)
		}
		return evalrun.ExitPass, nil
	}
	return code, nil
}

func chooseTarget(cfg Config, getStore func() (store.Store, error)) (evalrun.Target, error) {
	var names []string
	var t evalrun.Target
	if cfg.Command != "" {
		names = append(names, "--command")
		t = &evalrun.CommandTarget{Command: cfg.Command, Timeout: cfg.Timeout}
	}
	if len(cfg.Transcripts) > 0 {
		names = append(names, "--transcript")
		t = evalrun.TranscriptTarget(cfg.Transcripts...)
	}
	if len(cfg.Traces) > 0 {
		names = append(names, "--trace")
		f, err := traceio.ParseFormat(cfg.TraceFormat)
		if err != nil {
			return nil, err
		}
		t = evalrun.TraceFilesTarget(f, cfg.Traces...)
	}
	if cfg.FromStore {
		names = append(names, "--from-store")
		st, err := getStore()
		if err != nil {
			return nil, err
		}
		t = evalrun.StoreTarget(st, cfg.Selection)
	}
	if cfg.Script != "" {
		names = append(names, "--script")
		s, err := evalrun.ScriptTarget(cfg.Script)
		if err != nil {
			return nil, err
		}
		s.Executor.Limits.Timeout = cfg.Timeout
		t = s
	}
	if cfg.Model != "" {
		names = append(names, "--model")
		spec := cfg.Model
		if _, err := llm.Open(spec, llm.Options{}); err != nil {
			return nil, fmt.Errorf("--model: %w", err)
		}
		mt := evalrun.ModelTarget(spec, cfg.SystemPrompt, func() (agent.Model, error) { return llm.Open(spec, llm.Options{}) })
		mt.Executor.Limits.Timeout = cfg.Timeout
		t = mt
	}
	if cfg.Agent != nil {
		names = append(names, "an in-process agent")
		t = cfg.Agent
	}
	switch len(names) {
	case 0:
		return nil, errors.New("nothing to grade: give one of --command, --transcript, --trace, --from-store, --script or --model")
	case 1:
		return t, nil
	}
	return nil, fmt.Errorf("%s given together: choose one thing to grade", strings.Join(names, " and "))
}

// writeTo writes to path, or to stdout when path is "-", creating the
// file's directory. The file is written whole or not at all.
func writeTo(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == "-" {
		return write(stdout)
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func orDefault(dsn string) string {
	if dsn == "" {
		return store.DefaultPath()
	}
	return dsn
}
