package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
)

func newProjectsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "projects",
		Short: "Make and list projects: traces, scores, datasets, rules and keys kept apart per team",
		Long: `A project keeps its traces, scores, datasets, rules, monitors and retention
period apart from every other project's: each is a store of its own beside
the default one (for SQLite, NAME.projects/PROJECT.db beside NAME.db; for
PostgreSQL, the schema SCHEMA__PROJECT of the same database). Commands use
one project at a time (--project, or LOUPE_PROJECT); loupe serve serves all
of them, each to the keys that allow it (loupe keys create --projects).`,
		Annotations: map[string]string{serverWideAnnotation: "true"},
	}
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Make a project",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				p, err := server.CreateProject(ctx, st, args[0], time.Now())
				if err != nil {
					return err
				}
				dsn, err := store.ProjectDSN(dbDSN(cmd), p.Name)
				if err != nil {
					return err
				}
				pst, err := store.Open(ctx, dsn) // made now, so that a misconfigured store shows here and not at the first request
				if err != nil {
					return fmt.Errorf("project %s: %w", p.Name, err)
				}
				if err := pst.Close(); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "made project %s (%s); give it keys with loupe keys create --projects %s\n", p.Name, store.Redact(dsn), p.Name)
				return nil
			})
		},
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List projects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				ps, err := server.Projects(ctx, st)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tCREATED")
				for _, p := range ps {
					created := "-"
					if !p.Created.IsZero() {
						created = p.Created.Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\n", p.Name, created)
				}
				return tw.Flush()
			})
		},
	}
	cmd.AddCommand(add, ls)
	return cmd
}
