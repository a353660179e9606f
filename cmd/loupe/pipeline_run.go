package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/internal/tracesview"
	"github.com/loupe-dev/loupe/llm"
	"github.com/loupe-dev/loupe/pipeline"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
	"github.com/spf13/cobra"
)

func newPipelineRunCmd() *cobra.Command {
	var params []string
	var modelSpec string
	var jsonOut, io, noStore bool
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a pipeline, trace it, and show the trace",
		Long: `Runs a pipeline file as one traced run: the pipeline is the root, each tool
step a span with the memory writes it made, each loop pass an iteration, each
branch a span saying which route it took and why. The run is stored in the trace
store (--db; --no-store to skip it) and printed as a tree with its memory pool.

Built-in servers (servers: {name: builtin} or local://name) run offline:
retriever (SQLite FTS5 over --param documents=… or --param documents_dir=DIR),
generator (the --model, or a deterministic offline model), evaluator and router.
Other servers are MCP servers: the command or URL written in servers, and
nothing else, is started or reached.

Parameters: --param name=value, repeatable; a value that is JSON (5, true,
[1,2]) is taken as JSON, anything else as text. They override the file's
parameters and give the required ones (name: "$name").

Exit status: 0 the run succeeded; 1 the file is invalid or the run failed
(the trace, up to the failing step, is still printed and stored).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			p, err := pipeline.Load(args[0])
			if err != nil {
				return err
			}
			values, err := parseParams(params)
			if err != nil {
				return err
			}
			var model agent.Model
			if modelSpec != "" {
				if model, err = llm.Open(modelSpec, llm.Options{}); err != nil {
					return fmt.Errorf("--model: %w", err)
				}
			}
			var st store.Store
			// Block: a pipeline run is short, and every record should reach the store.
			to := trace.Options{Dispatch: trace.DispatchOptions{OnFull: trace.Block}}
			if !noStore {
				if st, err = store.Open(ctx, dbDSN(cmd)); err != nil {
					return fmt.Errorf("%w (use --no-store to run without a store)", err)
				}
				defer st.Close()
				to.Sinks = []trace.Sink{store.NewSink(st)}
			}
			res, runErr := pipeline.Run(ctx, p, pipeline.RunOptions{Params: values, Model: model, Trace: to})
			if res == nil {
				return runErr
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				if err := writeRunJSON(w, res, runErr); err != nil {
					return err
				}
				return runErr
			}
			if err := tracesview.Show(w, runTrace(ctx, st, res), tracesview.ShowOptions{IO: io}); err != nil {
				return err
			}
			if runErr == nil {
				out, _ := json.Marshal(res.Output)
				if n := len(out); n > maxPrintedOutput {
					head := trace.TruncateUTF8(string(out), maxPrintedOutput)
					out = fmt.Appendf([]byte(head), "… (%d bytes; --json prints it whole)", n)
				}
				fmt.Fprintf(w, "\noutput: %s\n", out)
			}
			if st != nil {
				fmt.Fprintf(w, "trace %s stored in %s; see it again with: %s\n", res.TraceID, store.Redact(dbDSN(cmd)), suggest(cmd, "traces", "show", res.TraceID.String()[:12]))
			}
			return runErr
		},
	}
	cmd.Flags().StringArrayVar(&params, "param", nil, "a parameter, name=value (repeatable)")
	cmd.Flags().StringVar(&modelSpec, "model", "", `the generator's model, e.g. openai:gpt-4o-mini or scripted:FILE (default: Loupe's offline model)`)
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the result, memory pool and stats as JSON instead of the tree")
	cmd.Flags().BoolVar(&io, "io", false, "print each span's input and output in the tree")
	cmd.Flags().BoolVar(&noStore, "no-store", false, "do not record the run into the trace store")
	return cmd
}

// maxPrintedOutput bounds the output printed under the tree.
const maxPrintedOutput = 2000

// parseParams turns name=value flags into parameters: JSON values as JSON,
// anything else as text.
func parseParams(flags []string) (map[string]any, error) {
	out := map[string]any{}
	for _, f := range flags {
		name, value, ok := strings.Cut(f, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("--param %q: want name=value, for example --param query='What is RAG?'", f)
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			v = value
		}
		out[strings.TrimSpace(name)] = v
	}
	return out, nil
}

// runTrace returns the run's trace as the store keeps it, or, without a
// store (or if reading it back fails), as built from the run's records.
func runTrace(ctx context.Context, st store.Store, res *pipeline.RunResult) *store.Trace {
	if st != nil {
		if t, err := st.Trace(ctx, res.TraceID); err == nil {
			return t
		}
	}
	sum := store.Summary{ID: res.TraceID, Status: string(res.Termination), Records: len(res.Records)}
	for _, r := range res.Records {
		if r.Type == trace.TypeRunStart && r.Depth == 0 {
			sum.Name, sum.Started, sum.Tags = r.Name, r.Time, r.Tags()
		}
		if r.Type == trace.TypeRunEnd && r.Depth == 0 {
			sum.Duration = r.Duration
		}
	}
	return store.NewTrace(sum, res.Records)
}

// runJSON is what --json prints, after the seed's run_agent_with_trace.
type runJSON struct {
	TraceID     string         `json:"trace_id"`
	Success     bool           `json:"success"`
	Termination string         `json:"termination"`
	Error       string         `json:"error,omitempty"`
	Steps       int            `json:"steps"`
	Output      any            `json:"result"`
	Memory      *pipeline.Pool `json:"memory_pool"`
	Summary     map[string]any `json:"memory_summary"`
	Stats       trace.Stats    `json:"stats"`
	DurationMS  float64        `json:"duration_ms"`
}

func writeRunJSON(w io.Writer, res *pipeline.RunResult, runErr error) error {
	j := runJSON{TraceID: res.TraceID.String(), Success: runErr == nil, Termination: string(res.Termination),
		Steps: res.Steps, Output: res.Output, Memory: res.Pool, Summary: res.Pool.Summary(), Stats: res.Stats}
	if runErr != nil {
		j.Error = runErr.Error()
	}
	for _, r := range res.Records {
		if r.Type == trace.TypeRunEnd && r.Depth == 0 {
			j.DurationMS = float64(r.Duration) / float64(time.Millisecond)
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(j); err != nil {
		return errors.Join(runErr, err)
	}
	return nil
}
