package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/store"
)

func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error %+v", name, res.Content)
	}
	return res
}

// TestMCPStdio runs `loupe mcp` as the process an MCP client starts, runs
// the demo agent through it and finds the trace in the store --db names.
func TestMCPStdio(t *testing.T) {
	db := filepath.Join(t.TempDir(), "mcp.db")
	cmd := loupeChild("--db", db, "mcp", "--demo-dir", "testdata")
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := mcpCall(t, cs, "run_agent_with_trace", map[string]any{"query": "17% of 2340?"})
	sc, _ := res.StructuredContent.(map[string]any)
	sum, _ := sc["trace_summary"].(map[string]any)
	id, _ := sum["trace_id"].(string)
	if sc["success"] != true || len(id) != 32 {
		t.Fatalf("run: %v", sc)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("closing the session (the server's exit): %v", err)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.List(context.Background(), store.ListQuery{})
	if err != nil || len(page.Traces) != 1 || page.Traces[0].ID.String() != id {
		t.Fatalf("store after loupe mcp: %v %+v", err, page)
	}
}

// TestMCPHTTP runs `loupe mcp --http 127.0.0.1:0`, calls a tool over
// streamable HTTP and stops it with SIGTERM.
func TestMCPHTTP(t *testing.T) {
	db := filepath.Join(t.TempDir(), "mcp.db")
	cmd, url := startChild(t, "--db", db, "mcp", "--http", "127.0.0.1:0")
	if !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("loupe mcp --http said it listens on %q", url)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mcpCall(t, cs, "list_traces", map[string]any{})
	// The session stays open: SIGTERM must end its event stream too.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("loupe mcp --http after SIGTERM: %v (want exit 0)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("loupe mcp --http did not stop after SIGTERM")
	}
	cs.Close()
}

func TestMCPCommandErrors(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("agent:\n  model: openai:gpt-4o-mini\n  tools: [teleport]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "--http", "0.0.0.0:0"}, "loopback only"},
		{[]string{"mcp", "--config", bad}, bad + ":3:11: unknown tool \"teleport\""},
		{[]string{"mcp", "--config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"serve", "--mcp-config", bad}, "the MCP server at /mcp: " + bad + ":3:11"},
	} {
		if _, _, err := run(t, db, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("loupe %s: %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}
