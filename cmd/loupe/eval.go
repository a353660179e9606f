package main

import (
	"errors"
	"fmt"
	"github.com/loupe-dev/loupe/internal/evalcli"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/llm"
	"github.com/loupe-dev/loupe/store"
)

func newEvalCmd() *cobra.Command {
	var cfg evalcli.Config
	var since string
	var tags []string
	cmd := &cobra.Command{
		Use:   "eval FILE… | --dataset NAME[@VERSION]",
		Short: "Grade agent runs against AgentV eval files",
		Long: `Grade agent runs against AgentV eval files (both the original evalcases
format and the current tests/assertions format).

What is graded is chosen with exactly one of:
  --command CMD      run CMD per case; it prints an AgentV trace {"text", "trace"}
                     (the case input is in {{input}}, $LOUPE_EVAL_INPUT and stdin)
  --transcript FILE  AgentV transcript JSONL (runs map to cases by test id, else by position)
  --trace FILE       trace files in any format loupe reads (Loupe, AgentV, omni, OTel JSONL)
  --from-store       traces already in the store, selected by --name/--tag/--since/--limit
  --script FILE|DIR  run an agent per case whose model plays a script (offline, deterministic)
  --model SPEC       run a ReAct agent per case on this model (--system-prompt sets its prompt)

Recorded runs are paired with cases by name (run name or tag case:<id> equal to
the case id), else one run is graded against every case, else by position.

A grader with a problem (an unknown key, an invalid mode, an unknown type) does
not stop the others: it is reported for its own case as could not run, with the
file:line:column and a suggestion, and its case does not pass. --strict refuses
such a file instead. --compat agentv loads what AgentV 4.42.4 loads (unknown keys
ignored, invalid graders dropped, unknown types scored 0), with a warning each.

Code graders (code-grader) run their command with AgentV's JSON payload on
standard input, in the eval file's directory (or cwd:), and print a JSON result
{"score", "assertions"}; --grader-timeout bounds each run.

Graders that need a language model (llm-grader, rubric, rubrics and bare
criterion strings, llm-rubric, g-eval, factuality, trajectory:goal-success)
run on the judge model --judge-model names, as provider:model:
` + indentHelp(llm.Help()) + `--judge-base-url and --judge-api-key (or LOUPE_JUDGE_MODEL, LOUPE_JUDGE_BASE_URL,
LOUPE_JUDGE_API_KEY) point it at another server, e.g. a local OpenAI-compatible
one. Each judge call is stored with the results as a model call (prompt, answer,
tokens, cost). Without a judge model these graders are skipped, and the cases
that had them are named.

A stored dataset runs instead of files with --dataset NAME[@VERSION]: the run
is stored as an experiment (--experiment NAME; default NAME-<time>) with the
dataset version, the agent's configuration and each case's trace, verdict,
scores, cost and latency. --model SPEC runs a ReAct agent on that model per case
(with --system-prompt). --baseline EXPERIMENT compares the run with a stored
experiment (printed, in --junit, and as Markdown in --summary-md); with
--fail-on-regression the status is 1 exactly when a case that passed in the
baseline does not pass now.

Exit status: 0 every case passed, 1 a case failed, 2 the evaluation could not
run (a bad file, a target that failed, a grader that could not run, no case
graded at all).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !cmd.Flags().Changed("dataset") {
				return &exitError{code: evalrun.ExitNotGraded, err: errors.New("no eval file given: loupe eval FILE… [--command CMD | --transcript F | --trace F | --from-store | --script F]")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Files = args
			if since != "" {
				q, err := store.ParseQuery("since:" + since)
				if err != nil {
					return &exitError{code: evalrun.ExitNotGraded, err: fmt.Errorf("--since: %w", err)}
				}
				cfg.Selection.Filter.Since = q.Since
			}
			cfg.Selection.Filter.Tags = tags
			// The environment fills what the flags leave out; the key is
			// never a flag default, so --help cannot show it.
			if cfg.JudgeModel == "" {
				cfg.JudgeModel = os.Getenv("LOUPE_JUDGE_MODEL")
			}
			if cfg.JudgeModel != "" {
				if cfg.JudgeBaseURL == "" {
					cfg.JudgeBaseURL = os.Getenv("LOUPE_JUDGE_BASE_URL")
				}
				if cfg.JudgeAPIKey == "" {
					cfg.JudgeAPIKey = os.Getenv("LOUPE_JUDGE_API_KEY")
				}
			}
			cfg.DB = dbDSN(cmd)
			cfg.StderrIsTerminal = term.IsTerminal(int(os.Stderr.Fd()))
			code, err := evalcli.Execute(cmd.Context(), cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
			switch {
			case err != nil:
				return &exitError{code: code, err: err}
			case code == evalrun.ExitFail:
				return &exitError{code: code, err: errors.New("evaluation failed: a case scored below the threshold")}
			case code != 0:
				return &exitError{code: code, err: errors.New("evaluation incomplete: a case or grader could not be run, or no case was graded")}
			}
			return nil
		},
	}
	// A bad flag means the evaluation could not run: status 2, not 1.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: evalrun.ExitNotGraded, err: err}
	})
	f := cmd.Flags()
	f.StringVar(&cfg.Command, "command", "", "shell command run per case, printing an AgentV trace")
	f.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "time limit of one run of --command or --script")
	f.DurationVar(&cfg.GraderTimeout, "grader-timeout", time.Minute, "time limit of one run of a code-grader command")
	f.StringSliceVar(&cfg.Transcripts, "transcript", nil, "AgentV transcript JSONL file(s) to grade")
	f.StringSliceVar(&cfg.Traces, "trace", nil, "trace file(s) to grade, any format loupe reads")
	f.StringVar(&cfg.TraceFormat, "trace-format", "auto", "format of the --trace files: auto, loupe, agentv, agentv-results, omni, otel-jsonl (formerly fragola), otlp")
	f.StringVar(&cfg.Script, "script", "", "run a scripted-model agent per case: a script file, or a directory of <case id>.yaml scripts")
	f.BoolVar(&cfg.FromStore, "from-store", false, "grade traces already in the store")
	f.StringVar(&cfg.Selection.Filter.Name, "name", "", "with --from-store: root run name")
	f.StringSliceVar(&tags, "tag", nil, "with --from-store: required tag (repeatable)")
	f.StringVar(&since, "since", "", "with --from-store: started within this duration (24h, 7d) or since this date")
	f.IntVar(&cfg.Selection.Limit, "limit", 0, "with --from-store: only the newest N traces (0: all)")
	f.Float64Var(&cfg.Threshold, "threshold", 0, "pass mark of a case score in (0,1] (default 0.8)")
	f.StringVar(&cfg.Compat, "compat", "", "scoring semantics: agentv (AgentV 4.42.4) or loupe (default)")
	f.BoolVar(&cfg.Strict, "strict", false, "refuse an eval file with any problem (unknown key, invalid grader) instead of reporting that grader as could not run")
	f.StringVar(&cfg.JudgeModel, "judge-model", "", "model for the LLM graders, provider:model (openai:gpt-4o-mini, anthropic:…, ollama:llama3.2, scripted:FILE); env LOUPE_JUDGE_MODEL")
	f.StringVar(&cfg.JudgeBaseURL, "judge-base-url", "", "endpoint of the judge model's server (an OpenAI-compatible URL, a proxy); env LOUPE_JUDGE_BASE_URL")
	f.StringVar(&cfg.JudgeAPIKey, "judge-api-key", "", "API key of the judge model (default: the provider's variable, e.g. OPENAI_API_KEY); env LOUPE_JUDGE_API_KEY")
	f.DurationVar(&cfg.JudgeTimeout, "judge-timeout", 2*time.Minute, "time limit of one call to the judge model")
	f.IntVar(&cfg.Workers, "workers", 1, "cases run and graded at once")
	f.BoolVar(&cfg.Progress, "progress", false, "show a progress bar on standard error even when it is not a terminal")
	f.StringVar(&cfg.Out, "out", "", "write AgentV-compatible result rows (JSONL) to this file (- for stdout)")
	f.BoolVar(&cfg.IncludeTrace, "include-trace", false, "include the full trace in --out rows (may hold private data)")
	f.StringVar(&cfg.JUnit, "junit", "", "write a JUnit XML report to this file")
	f.BoolVar(&cfg.NoStore, "no-store", false, "do not store the results and graded runs")
	f.StringVar(&cfg.Model, "model", "", "run a ReAct agent per case on this model, provider:model (scripted:FILE offline)")
	f.StringVar(&cfg.SystemPrompt, "system-prompt", "", "with --model: the agent's system prompt")
	f.StringVar(&cfg.Dataset, "dataset", "", "grade a stored dataset, NAME or NAME@VERSION, and store the run as an experiment")
	f.StringVar(&cfg.Experiment, "experiment", "", "with --dataset: the experiment's name (default: NAME-<time>)")
	f.StringVar(&cfg.Baseline, "baseline", "", "with --dataset: compare with this stored experiment")
	f.BoolVar(&cfg.FailOnRegression, "fail-on-regression", false, "with --baseline: exit 1 exactly when a case that passed in the baseline does not pass now")
	f.StringVar(&cfg.SummaryMD, "summary-md", "", "write a Markdown summary (the comparison with --baseline) to this file, for a CI job to post")
	return cmd
}

// indentHelp indents llm.Help's lines for a command's long help.
func indentHelp(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
