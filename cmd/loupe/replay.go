package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm"
	"github.com/loupe-dev/loupe/replay"
	"github.com/loupe-dev/loupe/store"
	"github.com/spf13/cobra"
)

// Exit statuses of loupe replay.
const (
	exitDiverged     = 1 // the replay diverged from the recording
	exitReplayFailed = 2 // the replay could not be run
	exitBranchFailed = 3 // a --from-step branch ran, and its live part failed
)

func newReplayCmd() *cobra.Command {
	var (
		fromStep  int
		modelSpec string
		system    string
		maxSteps  int
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "replay TRACE_ID",
		Short: "Re-run a stored run with model and tools answered from its trace; report where it diverges",
		Long: `Re-runs a stored run as a ReAct agent rebuilt from its trace (its system
prompt, input and tool definitions) with every model call and tool call
answered from the recording, comparing each request with the recorded one.
The first difference (messages, tool definitions, a tool's input, a call
more or fewer, another answer) is reported with a diff, and the exit status
is 1; 0 means the run replays exactly; 2 means it could not be replayed
(values truncated, not captured or redacted, records lost, a run that never
ended, a trace not recorded by Loupe's agent runtime). Hooks, custom loops
and compaction are not re-run, and a sub-agent is answered as the one tool
call that ran it; a Go test replays its own agent with package replay.

--from-step N branches the run: steps before N come from the recording,
step N and after are answered by --model (and see --system, if given).
Tools after the branch answer from the recording when called with a
recorded input, and otherwise fail with an error the model sees. The new
run is stored, tagged replay-of:<id> and replay-from-step:N; compare it
with "loupe traces diff". A branch whose live part fails (the model cannot
be reached, say) is still stored, and the exit status is 3.

Models (--model PROVIDER:MODEL):
` + llm.Help(),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := replay.RunOptions{Limits: agent.Limits{MaxIterations: maxSteps}} // for a branch only
			if cmd.Flag("system").Changed {
				o.System = &system
			}
			switch {
			case fromStep < 0:
				return &exitError{code: exitReplayFailed, err: fmt.Errorf("--from-step %d: give a step number from 1", fromStep)}
			case fromStep > 0 && modelSpec == "":
				return &exitError{code: exitReplayFailed, err: errors.New("--from-step needs --model PROVIDER:MODEL, the model that answers from that step on")}
			case fromStep == 0 && (modelSpec != "" || o.System != nil):
				return &exitError{code: exitReplayFailed, err: errors.New("--model and --system change the steps after a branch: give --from-step N too")}
			}
			if modelSpec != "" {
				m, err := llm.Open(modelSpec, llm.Options{})
				if err != nil {
					return &exitError{code: exitReplayFailed, err: err}
				}
				o.FromStep, o.Live = fromStep, m
			}
			var rep *replay.Report
			// A branch is stored: the store is opened for writing then.
			err := useStore(cmd, fromStep == 0, func(ctx context.Context, st store.Store) error {
				var err error
				rep, err = replay.RunStored(ctx, st, args[0], o)
				return err
			})
			if err != nil {
				return &exitError{code: exitReplayFailed, err: err}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				err = rep.WriteJSON(w)
			} else {
				err = rep.WriteText(w)
				if err == nil && !rep.Trace.IsZero() {
					_, err = fmt.Fprintf(w, "compare: %s\n", suggest(cmd, "traces", "diff", rep.Original.String()[:12], rep.Trace.String()[:12]))
				}
			}
			if err != nil {
				return err
			}
			if rep.Divergence != nil {
				return &exitError{code: exitDiverged, err: errors.New("the replay diverged from the recording")}
			}
			if fromStep > 0 && rep.Error != "" {
				return &exitError{code: exitBranchFailed, err: errors.New("the branch's live run failed: " + rep.Error)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&fromStep, "from-step", 0, "branch: answer step N and after with --model instead of the recording")
	f.StringVar(&modelSpec, "model", "", "the model that answers after the branch, e.g. openai:gpt-4o-mini or scripted:FILE")
	f.StringVar(&system, "system", "", "replace the recorded system prompt")
	f.IntVar(&maxSteps, "max-steps", 50, "stop a branch after this many steps (0: no limit)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func newTracesDiffCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Show two runs' trajectories side by side and where they first differ",
		Long: `Shows two stored runs step by step, side by side: each model call with its
tokens, cost and what it asked for, each tool call with its input and
outcome. The first pair of calls that differ is marked with ≠ and
explained below the table. A and B are trace ids or unique prefixes (at
least 4 hex digits), for example a run and its branch from loupe replay.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				c, err := replay.CompareStored(ctx, st, args[0], args[1])
				if err != nil {
					return err
				}
				if asJSON {
					return c.WriteJSON(cmd.OutOrStdout())
				}
				return c.WriteText(cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	return cmd
}
