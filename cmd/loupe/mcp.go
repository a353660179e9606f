package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/mcpserver"
	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
)

// mcpFlags are the flags `loupe mcp` and `loupe serve` share for the MCP
// server.
type mcpFlags struct {
	config  string
	evalDir string
	demoDir string
}

func (f *mcpFlags) add(cmd *cobra.Command, prefix string) {
	cmd.Flags().StringVar(&f.config, prefix+"config", "", "config file of what run_agent_with_trace runs: an agent (model, system prompt, tools, MCP servers, limits) or a pipeline; default: Loupe's demo agent")
	cmd.Flags().StringVar(&f.evalDir, prefix+"eval-dir", ".", "folder run_eval reads eval files from (files outside it are refused)")
	cmd.Flags().StringVar(&f.demoDir, prefix+"demo-dir", ".", "folder the demo agent's file search looks in")
}

// newMCPServer builds the MCP server over st from the flags; rd is the
// redaction (nil: none).
func newMCPServer(ctx context.Context, f mcpFlags, st store.Store, rd *redact.Redactor) (*mcpserver.Server, error) {
	o := mcpserver.Options{Store: st, EvalRoot: f.evalDir, DemoDir: f.demoDir, Redactor: rd, NoRedact: rd == nil, Version: versionString()}
	if f.config != "" {
		c, err := mcpserver.LoadConfig(f.config)
		if err != nil {
			return nil, err
		}
		o.Config = c
	}
	return mcpserver.New(ctx, o)
}

func newMCPCmd() *cobra.Command {
	var (
		f        mcpFlags
		httpAddr string
		noRedact bool
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve Loupe as an MCP server (stdio, or streamable HTTP with --http) for Claude Desktop, IDEs and other agents",
		Long: `Serve Loupe as an MCP server: another agent (Claude Desktop, an IDE, Codex)
runs an agent through it, reads its traces and scores them. Tools:
run_agent_with_trace, get_execution_trace, list_traces, search_traces,
list_sessions, list_scores, add_score, delete_trace, run_eval.

By default it speaks MCP over standard input and output (the client starts
"loupe mcp" itself). With --http 127.0.0.1:PORT it serves streamable HTTP at
http://127.0.0.1:PORT/mcp instead, on loopback only; to serve MCP to other
machines use loupe serve, whose /mcp requires an API key off loopback (a
read key for the tools that only read, an admin key for the others).

What run_agent_with_trace runs is set by --config FILE (YAML):
  agent:
    model: openai:gpt-4o-mini        # or scripted:turns.yaml, offline
    system: You are a careful assistant.
    tools: [calculator, clock, search_files]
    limits: {max_iterations: 10, timeout: 2m}
    mcp_servers:
      - {name: fs, command: npx, args: [-y, "@modelcontextprotocol/server-filesystem", "."]}
or "pipeline: FILE". Without --config it runs Loupe's demo agent (offline).
Runs are stored (--db / LOUPE_DB) and every trace leaves redacted (--no-redact
to turn that off).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if httpAddr != "" && !server.IsLoopback(httpAddr) {
				return fmt.Errorf("--http %s: loupe mcp listens on loopback only (e.g. 127.0.0.1:8765); to serve MCP to other machines, use loupe serve, whose /mcp requires an admin API key", httpAddr)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return withStore(cmd, func(_ context.Context, st store.Store) error {
				var rd *redact.Redactor
				if !noRedact {
					rd = redact.Default()
				}
				ms, err := newMCPServer(ctx, f, st, rd)
				if err != nil {
					return err
				}
				defer ms.Close()
				if httpAddr == "" {
					return ms.ServeStdio(ctx)
				}
				return serveMCPHTTP(ctx, httpAddr, ms, func(a net.Addr) {
					fmt.Fprintf(cmd.ErrOrStderr(), "loupe mcp: listening on http://%s/mcp, store %s\n", a, store.Redact(dbDSN(cmd)))
				})
			})
		},
	}
	f.add(cmd, "")
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve streamable HTTP at http://ADDR/mcp (a loopback host:port) instead of stdio")
	cmd.Flags().BoolVar(&noRedact, "no-redact", false, "return and store traces without scrubbing secrets (API keys, tokens, passwords)")
	return cmd
}

// serveMCPHTTP serves ms at /mcp on addr until ctx is done.
func serveMCPHTTP(ctx context.Context, addr string, ms *mcpserver.Server, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", ms.Handler())
	hs := server.NewHTTPServer(addr, mux)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	ready(ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	ms.Close() // ends the event streams, which Shutdown would wait for
	sctx, cancel := context.WithTimeout(context.Background(), server.ShutdownTimeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}
