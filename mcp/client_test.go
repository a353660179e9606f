package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/mcp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// agentCall is a tool call as a model makes it.
func agentCall(name, input string) agent.ToolCall {
	return agent.ToolCall{ID: "call-1", Name: name, Input: json.RawMessage(input)}
}

// A peer is a way to reach the Go SDK test server.
type peer struct {
	name   string
	server func(t *testing.T) mcp.Server
}

// peers are the transports every behaviour is checked over.
var peers = []peer{
	{"stdio", stdioServer},
	{"http", func(t *testing.T) mcp.Server {
		ts, _ := httpServer(t)
		return mcp.Server{Name: "gotest", URL: ts.URL}
	}},
}

// connect connects to s, closing the client when the test ends.
func connect(t *testing.T, s mcp.Server) *mcp.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The connection outlives Connect's timeout only if ctx is not the
	// one that bounds it: give Connect a context that lasts the test.
	c, err := mcp.Connect(context.WithoutCancel(ctx), s)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestTools(t *testing.T) {
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			c := connect(t, p.server(t))
			if c.Name() != "gotest" {
				t.Errorf("Name() = %q, want gotest", c.Name())
			}
			defs := c.Definitions()
			var names []string
			for i, d := range defs {
				names = append(names, d.Name)
				if got := c.Tools()[i].Definition(); got.Name != d.Name || string(got.Schema) != string(d.Schema) {
					t.Errorf("Tools()[%d] = %+v, Definitions()[%d] = %+v", i, got, i, d)
				}
			}
			slices.Sort(names)
			want := []string{"big", "die", "echo", "fail", "hang", "image", "proc", "weather"}
			if !slices.Equal(names, want) {
				t.Fatalf("tools %v, want %v", names, want)
			}
			i := slices.IndexFunc(defs, func(d agent.ToolDef) bool { return d.Name == "echo" })
			echo := defs[i]
			if echo.Description != "Echo a message." {
				t.Errorf("echo description %q", echo.Description)
			}
			var schema struct {
				Type       string
				Required   []string
				Properties map[string]struct{ Type, Description string }
			}
			if err := json.Unmarshal(echo.Schema, &schema); err != nil {
				t.Fatalf("echo schema %s: %v", echo.Schema, err)
			}
			if schema.Type != "object" || !slices.Equal(schema.Required, []string{"message"}) ||
				schema.Properties["message"].Type != "string" || schema.Properties["message"].Description != "what to echo" {
				t.Errorf("echo schema is not the server's: %s", echo.Schema)
			}
		})
	}
}

func TestPrefix(t *testing.T) {
	s := stdioServer(t)
	s.Prefix = true
	c := connect(t, s)
	for _, d := range c.Definitions() {
		if !strings.HasPrefix(d.Name, "gotest__") {
			t.Errorf("tool %q has no prefix", d.Name)
		}
	}
	out, err := c.Call(context.Background(), agentCall("gotest__echo", `{"message":"hi"}`))
	if err != nil || !strings.Contains(string(out), `"text":"echo: hi"`) {
		t.Errorf("Call(gotest__echo) = %s, %v", out, err)
	}
	// CallTool takes the server's own name.
	if r, err := c.CallTool(context.Background(), "echo", json.RawMessage(`{"message":"hi"}`)); err != nil || r.Text != "echo: hi" {
		t.Errorf("CallTool(echo) = %+v, %v", r, err)
	}
	if _, err := c.Call(context.Background(), agentCall("echo", `{}`)); err == nil || !strings.Contains(err.Error(), "gotest__echo") {
		t.Errorf("Call(echo) with a prefix: err = %v, want the list of tools", err)
	}

	// A name model APIs would refuse in a tool name is made safe.
	s.Name = "my server.v2"
	c = connect(t, s)
	if d := c.Definitions()[0]; !strings.HasPrefix(d.Name, "my_server_v2__") {
		t.Errorf("tool %q: want the prefix my_server_v2__", d.Name)
	}
}

func TestCall(t *testing.T) {
	cases := []struct {
		name, tool, args string
		text             string // want Result.Text
		json             string // want Result.JSON, if not empty
		structured       string // want Result.Structured, if not empty
		err              string // want an error containing this
		isError          bool
	}{
		{name: "text", tool: "echo", args: `{"message":"hi"}`, text: "echo: hi",
			json: `{"server":"gotest","tool":"echo","text":"echo: hi"}`},
		{name: "no args", tool: "weather", args: ``, text: `{"conditions":"sunny","temperature":21}`},
		{name: "null args", tool: "weather", args: `null`, text: `{"conditions":"sunny","temperature":21}`},
		{name: "structured", tool: "weather", args: `{}`, text: `{"conditions":"sunny","temperature":21}`,
			structured: `{"conditions":"sunny","temperature":21}`,
			json:       `{"server":"gotest","tool":"weather","text":"{\"conditions\":\"sunny\",\"temperature\":21}","structuredContent":{"conditions":"sunny","temperature":21}}`},
		{name: "image", tool: "image", args: `{}`, text: "a pixel:",
			json: `{"server":"gotest","tool":"image","text":"a pixel:","content":[{"type":"text","text":"a pixel:"},{"type":"image","mimeType":"image/png","data":"iVBORw=="}]}`},
		{name: "isError", tool: "fail", args: `{"message":"Atlantis"}`, text: "no such city: Atlantis", isError: true,
			err:  `mcp server "gotest", tool "fail": no such city: Atlantis`,
			json: `{"server":"gotest","tool":"fail","text":"no such city: Atlantis","isError":true}`},
		{name: "bad args", tool: "echo", args: `{"message":`, err: `mcp server "gotest", tool "echo": the arguments are not valid JSON`},
		// The Go SDK's server checks arguments against the schema and
		// answers isError, so that the model can correct itself.
		{name: "args off schema", tool: "echo", args: `{"message":7}`, isError: true,
			text: `validating "arguments": validating root: validating /properties/message: type: 7 has type "integer", want "string"`,
			err:  `mcp server "gotest", tool "echo": validating "arguments": `},
		{name: "unknown tool", tool: "nope", args: `{}`, err: `mcp server "gotest", tool "nope": `},
	}
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			c := connect(t, p.server(t))
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					r, err := c.CallTool(context.Background(), tc.tool, json.RawMessage(tc.args))
					if tc.err == "" && err != nil {
						t.Fatalf("err = %v", err)
					}
					if tc.err != "" {
						var e *mcp.Error
						if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &e) {
							t.Fatalf("err = %v, want an *mcp.Error containing %q", err, tc.err)
						}
						if tc.isError != (e.Result != nil) {
							t.Errorf("Error.Result = %+v, want it set only for isError", e.Result)
						}
					}
					if r.Text != tc.text || r.IsError != tc.isError {
						t.Errorf("Result = %+v, want text %q, isError %v", r, tc.text, tc.isError)
					}
					if tc.structured != "" && string(r.Structured) != tc.structured {
						t.Errorf("Structured = %s, want %s", r.Structured, tc.structured)
					}
					if tc.json != "" {
						if got := string(r.JSON("gotest", tc.tool)); got != tc.json {
							t.Errorf("JSON =\n%s\nwant\n%s", got, tc.json)
						}
					}
					if tc.err == "" && !json.Valid(r.Content) {
						t.Errorf("Content is not JSON: %s", r.Content)
					}
				})
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			s := p.server(t)
			// Long enough for the other calls on a loaded machine: the
			// timeout bounds every call of the client.
			s.CallTimeout = time.Second
			c := connect(t, s)
			before := hangCanceled.Load()
			_, err := c.CallTool(context.Background(), "hang", nil)
			if err == nil || !errors.Is(err, context.DeadlineExceeded) ||
				!strings.Contains(err.Error(), `mcp server "gotest", tool "hang": no answer within 1s (Server.CallTimeout)`) {
				t.Fatalf("err = %v, want a timeout naming the server and the tool", err)
			}
			// The connection is still good.
			if r, err := c.CallTool(context.Background(), "echo", json.RawMessage(`{"message":"still here"}`)); err != nil || r.Text != "echo: still here" {
				t.Fatalf("call after a timeout: %+v, %v", r, err)
			}
			if p.name == "http" && !waitFor(5*time.Second, func() bool { return hangCanceled.Load() > before }) {
				t.Error("the server was not told to cancel the call")
			}
		})
	}
}

func TestCancel(t *testing.T) {
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			c := connect(t, p.server(t))
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			_, err := c.CallTool(ctx, "hang", nil)
			if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `mcp server "gotest", tool "hang": the call was abandoned`) {
				t.Fatalf("err = %v, want context.Canceled naming the server and the tool", err)
			}
			if r, err := c.CallTool(context.Background(), "echo", json.RawMessage(`{"message":"still here"}`)); err != nil || r.Text != "echo: still here" {
				t.Fatalf("call after a cancel: %+v, %v", r, err)
			}
		})
	}
}

func TestMaxResultBytes(t *testing.T) {
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			s := p.server(t)
			s.MaxResultBytes = 1001 // odd: the cut falls inside a two-byte "é"
			c := connect(t, s)
			r, err := c.CallTool(context.Background(), "big", json.RawMessage(`{"bytes":10000}`))
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Repeat("é", 500) + "\n[truncated by Loupe: 1000 of 10000 bytes shown (Server.MaxResultBytes)]"
			if r.Text != want || !r.Truncated || r.Content != nil || !utf8.ValidString(r.Text) {
				t.Errorf("Result = text %q (%d bytes), truncated %v, content %d bytes; want the first 1000 bytes and a marker", r.Text[:20], len(r.Text), r.Truncated, len(r.Content))
			}
			if j := r.JSON("gotest", "big"); !json.Valid(j) || !strings.Contains(string(j), `"truncated":true`) {
				t.Errorf("JSON %s does not say it was truncated", j[len(j)-40:])
			}

			s.MaxResultBytes = -1
			c = connect(t, s)
			r, err = c.CallTool(context.Background(), "big", json.RawMessage(`{"bytes":10000}`))
			if err != nil || len(r.Text) != 10000 || r.Truncated {
				t.Errorf("without a limit: %d bytes, truncated %v, %v", len(r.Text), r.Truncated, err)
			}
		})
	}
}

func TestServerDiesMidCall(t *testing.T) {
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			c := connect(t, p.server(t))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := c.CallTool(ctx, "die", nil)
			var e *mcp.Error
			if err == nil || !errors.As(err, &e) || e.Server != "gotest" || e.Tool != "die" || ctx.Err() != nil {
				t.Fatalf("err = %v, want an *mcp.Error for gotest/die before the deadline", err)
			}
			if p.name == "stdio" {
				for _, want := range []string{`mcp server "gotest", tool "die": the server closed the connection`,
					"exited with exit status 3", "the disk is on fire"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("err = %v\nwant it to contain %q", err, want)
					}
				}
			}
			t.Logf("the failed call: %v", err)
			// Later calls fail at once, saying why.
			start := time.Now()
			_, err2 := c.CallTool(ctx, "echo", json.RawMessage(`{"message":"anyone?"}`))
			if err2 == nil || !strings.Contains(err2.Error(), `mcp server "gotest", tool "echo": `) {
				t.Fatalf("call after the server died: err = %v", err2)
			}
			if p.name == "stdio" && !strings.Contains(err2.Error(), "exit status 3") {
				t.Errorf("call after the server died: err = %v, want how it exited", err2)
			}
			t.Logf("the next call: %v", err2)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("call to a dead server took %v", d)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close after the server died: %v", err)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			c := connect(t, p.server(t))
			if err := c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			_, err := c.CallTool(context.Background(), "echo", json.RawMessage(`{"message":"hi"}`))
			if err == nil || !strings.Contains(err.Error(), `mcp server "gotest", tool "echo": the client is closed: Client.Close was called`) {
				t.Fatalf("call after Close: err = %v", err)
			}
		})
	}
}

// TestStdioCommand checks that the command runs as given: arguments passed
// as they are (no shell), Env added, Dir used.
func TestStdioCommand(t *testing.T) {
	s := stdioServer(t)
	args := []string{"two words", "$(touch pwned); echo hi", "*", `"quoted"`, ""}
	s.Args = append(s.Args, args...)
	s.Env = append(s.Env, "LOUPE_MCP_TEST_VALUE=from Env")
	s.Dir = t.TempDir()
	c := connect(t, s)
	r, err := c.CallTool(context.Background(), "proc", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Args  []string
		Dir   string
		Value string
	}
	if err := json.Unmarshal(r.Structured, &got); err != nil {
		t.Fatalf("%s: %v", r.Structured, err)
	}
	wantDir, _ := filepath.EvalSymlinks(s.Dir)
	if !slices.Equal(got.Args, append([]string{"-test.run=^$"}, args...)) || got.Dir != wantDir || got.Value != "from Env" {
		t.Errorf("the server saw %+v\nwant args %q, dir %s, value %q", got, args, wantDir, "from Env")
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "pwned")); err == nil {
		t.Error("an argument was run by a shell")
	}
}

func TestConnectErrors(t *testing.T) {
	crash := stdioServer(t)
	crash.Env = []string{serverEnv + "=crash"}
	cases := []struct {
		name string
		s    mcp.Server
		want []string
	}{
		{"exits at start", crash, []string{`mcp server "gotest": connecting: `, "exited with exit status 2", "cannot open the database"}},
		{"no such command", mcp.Server{Command: "loupe-no-such-mcp-server"}, []string{`mcp server "loupe-no-such-mcp-server": starting loupe-no-such-mcp-server: `, "executable file not found"}},
		{"both", mcp.Server{Name: "x", Command: "a", URL: "http://b"}, []string{`mcp server "x": both Command and URL are set`}},
		{"neither", mcp.Server{Name: "x"}, []string{`mcp server "x": neither Command nor URL is set`}},
		{"bad URL", mcp.Server{URL: "ftp://example.com/mcp"}, []string{`mcp server "example.com": URL "ftp://example.com/mcp": want an http:// or https:// URL`}},
		{"nothing listening", mcp.Server{Name: "x", URL: "http://127.0.0.1:1/mcp"}, []string{`mcp server "x": connecting: `}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := mcp.Connect(ctx, tc.s)
			if err == nil {
				c.Close()
				t.Fatal("Connect succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
	if _, err := mcp.ConnectTransport(context.Background(), mcp.Server{Name: "x"}, nil); err == nil {
		t.Error("ConnectTransport with a nil transport succeeded")
	}
	if _, err := mcp.ConnectTransport(context.Background(), mcp.Server{Name: "x", URL: "http://a"}, nil); err == nil {
		t.Error("ConnectTransport with a URL succeeded")
	}
}

func TestHTTPHeaders(t *testing.T) {
	ts, auth := httpServer(t)
	c := connect(t, mcp.Server{URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}})
	if _, err := c.CallTool(context.Background(), "echo", json.RawMessage(`{"message":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	n := 0
	for len(auth) > 0 {
		if got := <-auth; got != "Bearer s3cret" {
			t.Errorf("a request came with Authorization %q", got)
		}
		n++
	}
	if n < 3 { // initialize, initialized, tools/list, tools/call
		t.Errorf("saw %d requests, want at least 3", n)
	}
}

// TestCloseDuringCall checks that Close ends a call in progress, and
// returns, even when the server ignores the cancellation (over HTTP the
// Go SDK's server does not answer the session's DELETE until its handlers
// return).
func TestCloseDuringCall(t *testing.T) {
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			mark := filepath.Join(t.TempDir(), "hang")
			t.Setenv(hangMarkEnv, mark) // before connect: a stdio server inherits it
			c := connect(t, p.server(t))
			errc := make(chan error, 1)
			go func() {
				_, err := c.CallTool(context.Background(), "hang", nil)
				errc <- err
			}()
			// Close once the call is in progress in the server.
			if !waitFor(10*time.Second, func() bool { _, err := os.Stat(mark); return err == nil }) {
				t.Fatal("the hang call did not reach the server within 10s")
			}
			start := time.Now()
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("Close took %v", d)
			}
			select {
			case err := <-errc:
				if err == nil || !strings.Contains(err.Error(), `mcp server "gotest", tool "hang": `) {
					t.Errorf("the call in progress: err = %v", err)
				}
				t.Logf("the call in progress: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("the call in progress did not end with Close")
			}
		})
	}
}

// TestConnectTransport connects to a server in the same process.
func TestConnectTransport(t *testing.T) {
	ctx := context.Background()
	st, ct := mcpsdk.NewInMemoryTransports()
	if _, err := newTestServer(nil, nil).Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	c, err := mcp.ConnectTransport(ctx, mcp.Server{Name: "mem", Prefix: true, CallTimeout: 200 * time.Millisecond}, ct)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := c.Call(ctx, agentCall("mem__echo", `{"message":"hi"}`))
	if err != nil || string(out) != `{"server":"mem","tool":"echo","text":"echo: hi"}` {
		t.Errorf("mem__echo: %s, %v", out, err)
	}
	if _, err := c.CallTool(ctx, "hang", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang: err = %v, want the CallTimeout", err)
	}
}
