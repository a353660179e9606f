package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/mcp"
	"github.com/loupe-dev/loupe/trace"
)

// needMCPJS returns the directory holding the npm MCP servers' commands
// (testdata/mcp-js/node_modules/.bin, installed by scripts/mcp-js.sh). It
// skips the test when node or the servers are missing, except under
// CI=true, where the test command is expected to have installed them.
func needMCPJS(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(testrepo.Root(t), "testdata", "mcp-js", "node_modules", ".bin")
	_, err := exec.LookPath("node")
	msg := "node is not installed (scripts/mcp-js.sh installs it with the MCP servers)"
	if err == nil {
		for _, cmd := range []string{"mcp-server-everything", "mcp-server-filesystem"} {
			if _, serr := os.Stat(filepath.Join(bin, cmd)); serr != nil {
				err = serr
				msg = "the npm MCP servers are not installed (run scripts/mcp-js.sh; scripts/test.sh does)"
			}
		}
	}
	if err == nil {
		return bin
	}
	testrepo.Missing(t, msg)
	return ""
}

// TestEverything calls tools of the reference server
// @modelcontextprotocol/server-everything over stdio and streamable HTTP.
func TestEverything(t *testing.T) {
	bin := needMCPJS(t)
	everything := filepath.Join(bin, "mcp-server-everything")
	servers := []struct {
		name   string
		server func(t *testing.T) mcp.Server
	}{
		{"stdio", func(t *testing.T) mcp.Server {
			return mcp.Server{Name: "everything", Command: everything}
		}},
		{"http", func(t *testing.T) mcp.Server {
			return mcp.Server{Name: "everything", URL: startEverythingHTTP(t, everything),
				Headers: map[string]string{"Authorization": "Bearer not-checked"}}
		}},
	}
	for _, p := range servers {
		t.Run(p.name, func(t *testing.T) {
			s := p.server(t)
			s.CallTimeout = 3 * time.Second // bounds every call: leave room on a loaded machine
			c := connect(t, s)
			var names []string
			for _, d := range c.Definitions() {
				names = append(names, d.Name)
			}
			for _, want := range []string{"echo", "get-sum", "get-structured-content", "get-tiny-image", "trigger-long-running-operation"} {
				if !slices.Contains(names, want) {
					t.Errorf("no tool %q among %v", want, names)
				}
			}
			ctx := context.Background()
			check := func(tool, args string, ok func(r mcp.Result) bool) {
				t.Helper()
				r, err := c.CallTool(ctx, tool, json.RawMessage(args))
				if err != nil || !ok(r) {
					t.Errorf("%s %s: %+v, %v", tool, args, r, err)
				}
			}
			check("echo", `{"message":"hi"}`, func(r mcp.Result) bool { return r.Text == "Echo: hi" })
			check("get-sum", `{"a":2,"b":3}`, func(r mcp.Result) bool { return strings.Contains(r.Text, "5") })
			check("get-structured-content", `{"location":"Chicago"}`, func(r mcp.Result) bool {
				var w struct{ Temperature *float64 }
				return json.Unmarshal(r.Structured, &w) == nil && w.Temperature != nil
			})
			check("get-tiny-image", `{}`, func(r mcp.Result) bool {
				return strings.Contains(string(r.JSON("everything", "get-tiny-image")), `"mimeType":"image/png"`)
			})

			// A long operation outlives CallTimeout; the session goes on.
			_, err := c.CallTool(ctx, "trigger-long-running-operation", json.RawMessage(`{"duration":30,"steps":3}`))
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `mcp server "everything", tool "trigger-long-running-operation": no answer within 3s`) {
				t.Errorf("long operation: err = %v, want a timeout", err)
			}
			check("echo", `{"message":"again"}`, func(r mcp.Result) bool { return r.Text == "Echo: again" })

			// A bad argument is the server's isError result.
			_, err = c.CallTool(ctx, "get-sum", json.RawMessage(`{"a":"two"}`))
			var e *mcp.Error
			if !errors.As(err, &e) || e.Tool != "get-sum" {
				t.Errorf("get-sum with bad arguments: err = %v", err)
			}
		})
	}
}

// startEverythingHTTP runs server-everything over streamable HTTP on a
// free port and returns its endpoint.
func startEverythingHTTP(t *testing.T, everything string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(everything, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if !waitFor(20*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("server-everything did not listen on %s: %s", addr, out.String())
	}
	return "http://" + addr + "/mcp"
}

// TestFilesystem reads files through @modelcontextprotocol/server-filesystem,
// directly and in a scripted agent run.
func TestFilesystem(t *testing.T) {
	bin := needMCPJS(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the meeting is at noon"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := connect(t, mcp.Server{Name: "fs", Command: filepath.Join(bin, "mcp-server-filesystem"), Args: []string{dir}, Prefix: true})
	ctx := context.Background()
	r, err := c.CallTool(ctx, "read_text_file", json.RawMessage(fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "notes.txt"))))
	if err != nil || r.Text != "the meeting is at noon" {
		t.Fatalf("read_text_file: %+v, %v", r, err)
	}
	// Outside the allowed directory: the server's isError result.
	_, err = c.CallTool(ctx, "read_text_file", json.RawMessage(`{"path":"/etc/passwd"}`))
	var e *mcp.Error
	if !errors.As(err, &e) || e.Result == nil || !e.Result.IsError || !strings.Contains(err.Error(), `mcp server "fs", tool "read_text_file": `) {
		t.Fatalf("read outside the directory: err = %v", err)
	}
	t.Logf("read outside the directory: %v", err)

	script, err := scripted.Parse([]byte(fmt.Sprintf(`
turns:
  - tool_calls: [{name: fs__read_text_file, input: {path: %q}}]
  - when: noon
    answer: At noon.
  - answer: the model did not see the file
`, filepath.Join(dir, "notes.txt"))), "fs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := (&agent.Executor{Tracer: trace.New(trace.Options{})}).Run(ctx, &agent.ReAct{Model: script.NewModel(), Tools: c}, "When is the meeting?")
	if res.Answer != "At noon." {
		t.Fatalf("run: %q, %v", res.Answer, res.Err)
	}
	var end *trace.Record
	discovered := 0
	for i, r := range res.Records {
		switch r.Type {
		case trace.TypeToolDiscovered:
			discovered++
		case trace.TypeToolEnd:
			end = &res.Records[i]
		}
	}
	if discovered != len(c.Definitions()) || end == nil || end.Name != "fs__read_text_file" ||
		string(end.Output) != `{"server":"fs","tool":"read_text_file","text":"the meeting is at noon","structuredContent":{"content":"the meeting is at noon"}}` {
		t.Errorf("%d tool.discovered for %d tools; tool.end %+v (output %s)", discovered, len(c.Definitions()), end, end.Output)
	}
}
