package main

import (
	"context"
	"fmt"
	"time"

	"github.com/loupe-dev/loupe/export/console"
	"github.com/loupe-dev/loupe/export/jsonl"
	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	var dir, out string
	var io, jsonOut, noStore bool
	var session, user string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a sample agent offline and show its trace",
		Long: `Runs a sample agent — a scripted model with a real calculator, file search,
clock and a summariser sub-agent, one of whose tool calls fails — and prints
its trace as a tree. The records are also written as JSON lines to --out and
into the trace store (--db; --no-store to skip it), where "loupe traces"
finds them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			file, err := jsonl.Create(out)
			if err != nil {
				return err
			}
			format := console.FormatTree
			if jsonOut {
				format = console.FormatJSON
			}
			sinks := []trace.Sink{file, console.NewSink(cmd.OutOrStdout(), format, console.Options{IO: io})}
			var st store.Store
			if !noStore {
				if st, err = store.Open(cmd.Context(), dbDSN(cmd)); err != nil {
					return fmt.Errorf("%w (use --no-store to run without a store)", err)
				}
				defer st.Close()
				sinks = append(sinks, store.NewSink(st))
			}
			// Block: the demo is short and every record should reach the store.
			tracer := trace.New(trace.Options{Sinks: sinks, Dispatch: trace.DispatchOptions{OnFull: trace.Block}})
			res, runErr := demo.RunSession(cmd.Context(), tracer, dir, session, user)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 10*time.Second)
			defer cancel()
			if err := tracer.Shutdown(ctx); err != nil {
				return fmt.Errorf("writing the trace: %w", err)
			}
			if runErr != nil {
				return runErr
			}
			if !jsonOut {
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "\nanswer: %s\n", res.Answer)
				fmt.Fprintf(w, "trace %s: %d records written to %s\n", res.TraceID, len(res.Records), file.Path())
				if st != nil {
					fmt.Fprintf(w, "stored in %s; see it again with: %s\n", store.Redact(dbDSN(cmd)), suggest(cmd, "traces", "show", res.TraceID.String()[:12]))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "folder the demo's file search looks in")
	cmd.Flags().StringVar(&out, "out", "loupe-demo.jsonl", "file to write the trace to, as JSON lines")
	cmd.Flags().BoolVar(&io, "io", false, "print each span's input and output in the tree")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print records as JSON lines instead of a tree")
	cmd.Flags().BoolVar(&noStore, "no-store", false, "do not record the run into the trace store")
	cmd.Flags().StringVar(&session, "session", "", "record the run as part of this session (conversation)")
	cmd.Flags().StringVar(&user, "user", "", "record the run as this user's")
	return cmd
}
