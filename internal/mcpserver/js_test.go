package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// mcpJS is where scripts/mcp-js.sh installs the MCP TypeScript SDK.
const mcpJS = "../../testdata/mcp-js"

// needMCPJS returns node and the SDK's folder (absolute), skipping the
// test when either is missing, except under CI=true, where the test
// command is expected to have installed them.
func needMCPJS(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	_, serr := os.Stat(filepath.Join(mcpJS, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm", "client", "index.js"))
	if err == nil && serr == nil {
		dir, err := filepath.Abs(mcpJS)
		if err != nil {
			t.Fatal(err)
		}
		return node, dir
	}
	msg := "the MCP TypeScript SDK is not installed (run scripts/mcp-js.sh; scripts/test.sh does)"
	if err != nil {
		msg = "node is not installed (scripts/mcp-js.sh installs it with the SDK)"
	}
	testrepo.Missing(t, msg)
	return "", ""
}

// tsReport is what testdata/client.mjs prints.
type tsReport struct {
	Server string `json:"server"`
	Tools  []struct {
		Name         string   `json:"name"`
		Required     []string `json:"required"`
		OutputSchema bool     `json:"output_schema"`
	} `json:"tools"`
	Run struct {
		IsError  bool   `json:"is_error"`
		Success  bool   `json:"success"`
		Result   string `json:"result"`
		TraceID  string `json:"trace_id"`
		Steps    int    `json:"steps"`
		Thinking int    `json:"thinking"`
	} `json:"run"`
	Get struct {
		IsError        bool   `json:"is_error"`
		TraceID        string `json:"trace_id"`
		Steps          int    `json:"steps"`
		NextStepOffset int    `json:"next_step_offset"`
		TotalSteps     int    `json:"total_steps"`
	} `json:"get"`
	List   []string `json:"list"`
	Search []string `json:"search"`
	Bad    struct {
		IsError bool   `json:"is_error"`
		Text    string `json:"text"`
	} `json:"bad"`
	Delete struct {
		IsError bool `json:"is_error"`
		Deleted bool `json:"deleted"`
	} `json:"delete"`
	AfterDelete struct {
		IsError bool   `json:"is_error"`
		Text    string `json:"text"`
	} `json:"after_delete"`
}

// TestTypeScriptClient drives Loupe's MCP server with the MCP TypeScript
// SDK's client over stdio (the test binary re-executed as the server) and
// over streamable HTTP. The SDK checks every structured result against the
// tool's output schema.
func TestTypeScriptClient(t *testing.T) {
	node, dir := needMCPJS(t)
	for _, mode := range []string{"stdio", "http"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			args := []string{"testdata/client.mjs", mode}
			env := append(os.Environ(), "MCP_JS="+dir)
			if mode == "stdio" {
				_, db := openStore(t)
				args = append(args, os.Args[0], "-test.run=^$")
				env = append(env, stdioEnv+"="+db)
			} else {
				s := newServer(t, Options{})
				ts := httptest.NewServer(s.Handler())
				t.Cleanup(ts.Close)
				t.Cleanup(func() { s.Close() }) // first: ends the client's event stream
				args = append(args, ts.URL)
			}
			cmd := exec.CommandContext(ctx, node, args...)
			cmd.Env = env
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node client.mjs %s: %v\n%s", mode, err, out)
			}
			var r tsReport
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("client.mjs printed %q: %v", out, err)
			}
			var names []string
			for _, tl := range r.Tools {
				names = append(names, tl.Name)
				if !tl.OutputSchema {
					t.Errorf("tool %s has no output schema", tl.Name)
				}
				if tl.Name == "run_agent_with_trace" && !slices.Equal(tl.Required, []string{"query"}) {
					t.Errorf("run_agent_with_trace requires %v, want [query]", tl.Required)
				}
			}
			if want := []string{"add_score", "delete_trace", "get_execution_trace", "list_scores", "list_sessions", "list_traces", "run_agent_with_trace", "run_eval", "search_traces"}; !slices.Equal(names, want) {
				t.Errorf("tools %v, want %v", names, want)
			}
			if r.Server != "loupe" {
				t.Errorf("server name %q", r.Server)
			}
			id := r.Run.TraceID
			if r.Run.IsError || !r.Run.Success || !strings.Contains(r.Run.Result, "409.8") || len(id) != 32 || r.Run.Steps < 10 || r.Run.Thinking == 0 {
				t.Errorf("run: %+v", r.Run)
			}
			if r.Get.IsError || r.Get.TraceID != id || r.Get.Steps != 2 || r.Get.NextStepOffset != 2 || r.Get.TotalSteps != r.Run.Steps {
				t.Errorf("get: %+v", r.Get)
			}
			if !slices.Contains(r.List, id) || !slices.Equal(r.Search, []string{id}) {
				t.Errorf("list %v, search %v, want %s in both", r.List, r.Search, id)
			}
			if !r.Bad.IsError || !strings.Contains(r.Bad.Text, "query") {
				t.Errorf("call without query: %+v", r.Bad)
			}
			if r.Delete.IsError || !r.Delete.Deleted || !r.AfterDelete.IsError || !strings.Contains(r.AfterDelete.Text, "no trace") {
				t.Errorf("delete %+v, then get %+v", r.Delete, r.AfterDelete)
			}
		})
	}
}

// TestConfigAgentWithNPMServer runs `run_agent_with_trace` for an agent
// whose tools come from the reference filesystem server from npm, started
// over stdio from the config (command, args, dir), as a user would write
// it.
func TestConfigAgentWithNPMServer(t *testing.T) {
	node, dir := needMCPJS(t)
	fsServer := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "hello.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "turns.yaml"), []byte(`turns:
  - tool_calls: [{name: list_directory, input: {path: "`+work+`"}}]
  - answer: listed
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(`agent:
  model: scripted:turns.yaml
  mcp_servers:
    - {name: fs, command: "`+node+`", args: ["`+fsServer+`", "`+work+`"], dir: ., call_timeout: 60s}
`), filepath.Join(work, "loupe-mcp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cs := connectMemory(t, newServer(t, Options{Config: cfg}))
	var out RunAgentOutput
	ok(t, cs, "run_agent_with_trace", map[string]any{"query": "what is there?"}, &out)
	var got GetTraceOutput
	ok(t, cs, "get_execution_trace", map[string]any{"trace_id": out.TraceSummary.TraceID}, &got)
	var listed bool
	for _, st := range got.Steps {
		if st.Type == "tool.start" && st.Name == "list_directory" && st.Status == "completed" && strings.Contains(fmt.Sprint(st.Output), "hello.txt") {
			listed = true
		}
	}
	if !out.Success || out.Result != "listed" || !listed {
		t.Errorf("run %+v; steps %+v", out, got.Steps)
	}
}
