package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/evalcli"
	"github.com/loupe-dev/loupe/store"
)

func newDatasetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dataset",
		Short: "Keep evaluation datasets made from recorded runs (versioned, AgentV eval cases)",
		Long: `A dataset is a named list of AgentV eval cases kept in the store, each made
from a recorded run (its input, and its tool calls as the expected trajectory,
to edit) or imported from an AgentV eval file. Every change is a new version:
NAME@VERSION always reads the same cases. Run one with loupe eval --dataset NAME.`,
	}
	var name, query string
	var limit int
	add := &cobra.Command{
		Use:   "add [TRACE…] --dataset NAME",
		Short: "Add stored runs (by id, or --query) to a dataset as a new version",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				return evalcli.DatasetAdd(ctx, st, name, args, query, limit, cmd.OutOrStdout())
			})
		},
	}
	add.Flags().StringVar(&name, "dataset", "", "the dataset's name (created if new)")
	add.Flags().StringVar(&query, "query", "", "add the runs this search selects, e.g. 'tool:search status:error since:7d'")
	add.Flags().IntVar(&limit, "limit", 100, "with --query: at most this many runs, newest first")
	_ = add.MarkFlagRequired("dataset")

	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List datasets (newest version of each)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				return evalcli.DatasetList(ctx, st, cmd.OutOrStdout(), asJSON)
			})
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	show := &cobra.Command{
		Use:   "show NAME[@VERSION]",
		Short: "Show a dataset's cases and versions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				return evalcli.DatasetShow(ctx, st, args[0], cmd.OutOrStdout(), asJSON)
			})
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a dataset and all its versions (experiments are kept)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				return evalcli.DatasetRemove(ctx, st, args[0], cmd.OutOrStdout())
			})
		},
	}
	export := &cobra.Command{
		Use:   "export NAME[@VERSION]",
		Short: "Print a dataset version as an AgentV eval file (YAML) that agentv and loupe eval run",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				return evalcli.DatasetExport(ctx, st, args[0], cmd.OutOrStdout())
			})
		},
	}
	var importName string
	imp := &cobra.Command{
		Use:   "import FILE --dataset NAME",
		Short: "Store the tests of an AgentV eval file as a new version of a dataset",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("give one AgentV eval file: loupe dataset import FILE --dataset NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				return evalcli.DatasetImport(ctx, st, importName, args[0], cmd.OutOrStdout())
			})
		},
	}
	imp.Flags().StringVar(&importName, "dataset", "", "the dataset's name (created if new)")
	_ = imp.MarkFlagRequired("dataset")
	cmd.AddCommand(add, ls, show, rm, export, imp)
	return cmd
}

func newExperimentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "experiments",
		Aliases: []string{"experiment"},
		Short:   "List and compare experiments (runs of a dataset made by loupe eval --dataset)",
	}
	var asJSON bool
	var ds string
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List experiments, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				return evalcli.ExperimentsList(ctx, st, ds, cmd.OutOrStdout(), asJSON)
			})
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	ls.Flags().StringVar(&ds, "dataset", "", "only the experiments of this dataset")
	var failOnRegression bool
	diff := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare experiment B with the baseline A: regressions, fixes, totals and deltas",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				c, err := evalcli.ExperimentsDiff(ctx, st, args[0], args[1], cmd.OutOrStdout(), asJSON)
				if err == nil && failOnRegression && c.Regressions > 0 {
					return &exitError{code: 1, err: errors.New("regressions: a case that passed in " + args[0] + " does not pass in " + args[1])}
				}
				return err
			})
		},
	}
	diff.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	diff.Flags().BoolVar(&failOnRegression, "fail-on-regression", false, "exit 1 when a case regressed")
	cmd.AddCommand(ls, diff)
	return cmd
}
