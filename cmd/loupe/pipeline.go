package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/pipeline"
)

func newPipelineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Check, draw and run YAML pipelines (omni and UltraRAG dialects)",
		Long: `Check, draw and run declarative YAML pipelines, in omni's dialect (servers
builtin or local://, $parameters, loop.max_iterations, branch with router, field,
value_map) or UltraRAG's (servers as paths or commands, input/output mappings,
loop.times, branch.router as a list).`,
	}
	// The subcommands. `run` is defined in pipeline_run.go (newPipelineRunCmd)
	// and added to this list.
	cmd.AddCommand(
		newPipelineValidateCmd(),
		newPipelineGraphCmd(),
		newPipelineRunCmd(),
	)
	return cmd
}

func newPipelineValidateCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate FILE…",
		Short: "Check pipeline files and print every error",
		Long: `Check pipeline files in three layers: the JSON Schema of the format
(schema/pipeline.v1.schema.json: shapes, types, unknown keys), semantics
(servers, steps, $parameters, variables read before written, branch routes,
loop bounds) and tool contracts (built-in, plus runtime.tool_contracts).
Every error is printed as file:line:column: what is wrong; what was expected.

Exit status: 0 every file is valid, 1 a file has an error.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			type fileResult struct {
				File    string             `json:"file"`
				Valid   bool               `json:"valid"`
				Dialect string             `json:"dialect,omitempty"`
				Errors  pipeline.ErrorList `json:"errors"`
			}
			var results []fileResult
			bad := 0
			for _, path := range args {
				p, err := pipeline.Load(path)
				r := fileResult{File: path, Valid: err == nil, Errors: pipeline.ErrorList{}}
				if p != nil {
					r.Dialect = p.Dialect.String()
				}
				if err != nil {
					bad++
					var list pipeline.ErrorList
					if errors.As(err, &list) {
						r.Errors = list
					} else {
						r.Errors = pipeline.ErrorList{{File: path, Layer: pipeline.LayerRead, Msg: err.Error()}}
					}
				}
				results = append(results, r)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(map[string]any{"files": results}); err != nil {
					return err
				}
			} else {
				for _, r := range results {
					if r.Valid {
						fmt.Fprintf(out, "%s: valid (%s)\n", r.File, r.Dialect)
						continue
					}
					for _, e := range r.Errors {
						fmt.Fprintln(out, e.Error())
					}
				}
			}
			if bad > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d pipeline files have errors", bad, len(args))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"files": [{"file", "valid", "dialect", "errors": [{"file", "line", "column", "layer", "message"}]}]}`)
	return cmd
}

func newPipelineGraphCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "graph FILE",
		Short: "Print a pipeline's step graph (Mermaid or DOT)",
		Long: `Print a pipeline's step graph: Mermaid (default; paste it in Markdown) or
DOT (Graphviz: loupe pipeline graph FILE --format dot | dot -Tsvg > graph.svg).
Loops are subgraphs whose body goes back to the loop node; branch edges carry
the route tokens that select them.

A file that does not parse is an error; validation errors are printed on
standard error and the graph is still drawn, since it helps to find them.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "mermaid" && format != "dot" {
				return fmt.Errorf("--format %q: expected mermaid or dot", format)
			}
			p, err := pipeline.ParseFile(args[0])
			if err != nil {
				return err
			}
			for _, e := range p.Validate() {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", e.Error())
			}
			if format == "dot" {
				_, err = fmt.Fprint(cmd.OutOrStdout(), p.DOT())
			} else {
				_, err = fmt.Fprint(cmd.OutOrStdout(), p.Mermaid())
			}
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "mermaid", "mermaid or dot")
	return cmd
}
