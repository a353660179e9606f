// Command loupe records, stores, browses and evaluates traces of AI-agent
// runs. This package holds wiring and flags only; the work is done by the
// packages it imports.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root := newRootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "loupe:", err)
		os.Exit(exitCode(err))
	}
}

// exitError carries a specific exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "loupe",
		Short:         "Trace, store, browse and evaluate AI-agent runs",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Version enables --version, which prints the same as "loupe version".
		Version: versionString(),
	}
	root.SetVersionTemplate("loupe {{.Version}}\n")
	addDBFlag(root)
	root.AddCommand(
		newVersionCmd(),
		newEvalCmd(),
		newDatasetCmd(),
		newExperimentsCmd(),
		newDemoCmd(),
		newTracesCmd(),
		newSessionsCmd(),

		newScoresCmd(),
		newServeCmd(),
		newKeysCmd(),
		newProjectsCmd(),
		newPricesCmd(),
		newMCPCmd(),
		newReplayCmd(),
		newPipelineCmd(),
	)
	return root
}
