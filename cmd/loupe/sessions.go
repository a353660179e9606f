package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/tracesview"
	"github.com/loupe-dev/loupe/store"
)

func newSessionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List sessions (runs of one conversation) and show one as a conversation",
	}
	cmd.AddCommand(newSessionsLsCmd(), newSessionsShowCmd())
	cmd.PersistentFlags().Duration("stale-after", store.DefaultStaleAfter,
		"show a run that has not ended as incomplete once it has been silent this long (negative: never)")
	return cmd
}

func newSessionsLsCmd() *cobra.Command {
	var (
		c      store.Criteria
		limit  int
		cursor string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List sessions with their runs, tokens, cost and errors, latest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := c.Filter(nowFunc())
			if err != nil {
				return err
			}
			q := store.SessionQuery{User: f.User, Since: f.Since, Until: f.Until, Limit: limit, Cursor: cursor}
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				page, err := store.ListSessions(ctx, st, q)
				if err != nil {
					return err
				}
				if page.Sessions == nil {
					page.Sessions = []store.SessionSummary{}
				}
				table := func(w io.Writer) error { return tracesview.SessionTable(w, page.Sessions) }
				return tracesview.WritePage(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON, page, table, page.Next)
			})
		},
	}
	cmd.Flags().StringVar(&c.User, "user", "", "only this user's runs")
	cmd.Flags().StringVar(&c.Since, "since", "", "only runs started at or after: a duration before now (24h, 7d) or a time (2006-01-02, RFC 3339)")
	cmd.Flags().StringVar(&c.Until, "until", "", "only runs started before (same forms as --since)")
	cmd.Flags().IntVar(&limit, "limit", 50, "sessions per page")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page's cursor")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newSessionsShowCmd() *cobra.Command {
	var (
		o      tracesview.SessionOptions
		runs   int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show SESSION",
		Short: "Show a session as its conversation: each run's input, tool calls and answer, in order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runs < 1 || runs > store.MaxSessionTurns {
				return fmt.Errorf("--runs %d: want 1 to %d", runs, store.MaxSessionTurns)
			}
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				sum, turns, more, err := store.SessionTurns(ctx, st, args[0], runs)
				if err != nil {
					return err
				}
				v := store.SessionView{Session: sum, Turns: turns, More: more}
				if asJSON {
					return tracesview.WriteJSON(cmd.OutOrStdout(), v)
				}
				return tracesview.ShowSession(cmd.OutOrStdout(), &v, o)
			})
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 50, "show the last this many runs")
	cmd.Flags().IntVar(&o.MaxIO, "max-io", 0, "bytes of each input/output to print (default 200; -1: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
