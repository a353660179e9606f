package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
)

func newProjectsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "projects",
		Short: "Make, list and delete projects: traces, scores, datasets, rules and keys kept apart per team",
		Long: `A project keeps its traces, scores, datasets, rules, monitors and retention
period apart from every other project's: each is a store of its own beside
the default one (for SQLite, NAME.projects/PROJECT.db beside NAME.db; for
PostgreSQL, the schema SCHEMA__PROJECT of the same database). Commands use
one project at a time (--project, or LOUPE_PROJECT); loupe serve serves all
of them, each to the keys that allow it (loupe keys create --projects), and
grades and watches a project with its own files (loupe serve --rules
PROJECT=FILE, --monitors PROJECT=FILE).`,
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
	var yes bool
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a project and everything in it (asks for --yes)",
		Long: `Delete a project for good: its traces, scores, datasets, rules, monitors
and settings (for SQLite, NAME.projects/PROJECT.db with its -wal and -shm
files; for PostgreSQL, the schema SCHEMA__PROJECT and everything in it),
and its entry in the list of projects. Keys that named it keep their other
projects; a key that named it alone is revoked. The default project cannot
be deleted. Making the project again starts it empty.

A collector serving the store stops serving the project within a few
seconds (5 at most, 1 for a request that names it). With SQLite, prefer
DELETE /api/v1/projects/NAME on the running collector, which closes the
project before removing its file; with PostgreSQL, loupe projects rm is as
good, its DROP SCHEMA waiting up to 10 s for the collectors' transactions.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == store.DefaultProject {
				return server.ErrDefaultProject
			}
			if !yes {
				return fmt.Errorf("loupe projects rm %s deletes the project's traces, scores, datasets, rules and monitors for good: add --yes to do it", name)
			}
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				dsn := dbDSN(cmd)
				res, err := server.DeleteProject(ctx, st, name, func(ctx context.Context) error { return store.DropProject(ctx, dsn, name) })
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "deleted project %s", res.Name)
				if len(res.KeysChanged) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "; keys no longer naming it: %s", strings.Join(res.KeysChanged, ", "))
				}
				if len(res.KeysRevoked) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "; keys revoked (it was their only project): %s", strings.Join(res.KeysRevoked, ", "))
				}
				fmt.Fprintln(cmd.ErrOrStderr())
				return nil
			})
		},
	}
	rm.Flags().BoolVar(&yes, "yes", false, "delete the project and everything in it, for good")
	cmd.AddCommand(add, ls, rm)
	return cmd
}
