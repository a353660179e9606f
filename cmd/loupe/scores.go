package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/scoresview"
	"github.com/loupe-dev/loupe/internal/tracesview"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

func newScoresCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scores",
		Short: "Add, list and remove the scores of traces, spans and sessions",
	}
	cmd.AddCommand(newScoresAddCmd(), newScoresLsCmd(), newScoresRmCmd())
	return cmd
}

func newScoresAddCmd() *cobra.Command {
	var (
		o      scoresview.AddOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "add TRACE[/SPAN] NAME VALUE",
		Short: "Score a trace, a span of it, or (with --session, without TRACE) a session",
		Long: `Score a trace, a span of it, or a session.

TRACE is a trace id or a unique prefix of one; /SPAN adds a span's full id.
VALUE is true or false, a number, or a category: read as the kind the name
is configured as or has been given before, else guessed from the value.
With --session, leave TRACE out: loupe scores add --session ID NAME VALUE.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.Session != "" {
				return cobra.ExactArgs(2)(cmd, args)
			}
			return cobra.ExactArgs(3)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Session == "" {
				o.Target, args = args[0], args[1:]
			}
			o.Name, o.Value = args[0], args[1]
			if o.Author == "" {
				o.Author = os.Getenv("USER")
			}
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				s, err := scoresview.Add(ctx, st, o)
				if err != nil {
					return err
				}
				if asJSON {
					return tracesview.WriteJSON(cmd.OutOrStdout(), s)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "scored %s: %s = %s (%s)\n", scoresview.Target(&s), s.Name, scoresview.Value(&s), s.ID)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Comment, "comment", "", "a comment on the score")
	f.StringVar(&o.Session, "session", "", "score this session instead of a trace")
	f.StringVar(&o.Author, "author", "", "who gives the score (default $USER)")
	f.BoolVar(&asJSON, "json", false, "print the stored score as JSON")
	return cmd
}

func newScoresLsCmd() *cobra.Command {
	var (
		o            scoresview.ListOptions
		span, source string
		since, until string
		asJSON       bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List scores, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if span != "" {
				id, err := trace.ParseSpanID(span)
				if err != nil {
					return fmt.Errorf("--span: %w", err)
				}
				o.Filter.SpanID = id
			}
			o.Filter.Source = store.ScoreSource(source)
			tf, err := store.Criteria{Since: since, Until: until}.Filter(nowFunc())
			if err != nil {
				return err
			}
			o.Filter.Since, o.Filter.Until = tf.Since, tf.Until
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				page, err := scoresview.List(ctx, st, o)
				if err != nil {
					return err
				}
				table := func(w io.Writer) error { return scoresview.Table(w, page.Scores) }
				return tracesview.WritePage(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON, page, table, page.Next)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Trace, "trace", "", "scores of this trace (an id or a unique prefix)")
	f.StringVar(&span, "span", "", "with --trace: scores of this span")
	f.StringVar(&o.Filter.Session, "session", "", "scores of this session")
	f.StringVar(&o.Filter.Name, "name", "", "scores of this name")
	f.StringVar(&source, "source", "", "scores from this source: human, api, eval or online")
	f.StringVar(&since, "since", "", "given at or after: a duration before now (24h, 7d) or a time")
	f.StringVar(&until, "until", "", "given before (same forms as --since)")
	f.IntVar(&o.Filter.Limit, "limit", store.DefaultScoreLimit, fmt.Sprintf("scores per page (at most %d)", store.MaxScoreLimit))
	f.StringVar(&o.Filter.Cursor, "cursor", "", "continue from a previous page's cursor")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newScoresRmCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Delete scores by id",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				n, err := scoresview.Remove(ctx, st, args)
				if err != nil {
					return err
				}
				if asJSON {
					return tracesview.WriteJSON(cmd.OutOrStdout(), map[string]any{"deleted": n})
				}
				if n < len(args) {
					fmt.Fprintf(cmd.OutOrStdout(), "deleted %d scores (%d of the ids are not stored)\n", n, len(args)-n)
					return nil
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %d scores\n", n)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
