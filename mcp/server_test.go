package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/mcp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverEnv, when set in the environment of the test binary, makes it an
// MCP server over stdio (see TestMain) instead of running the tests.
const serverEnv = "LOUPE_MCP_TEST_SERVER"

// TestMain runs the test server when the binary is re-executed as one.
func TestMain(m *testing.M) {
	if mode := os.Getenv(serverEnv); mode != "" {
		fmt.Fprintln(os.Stderr, "test server: starting")
		if mode == "crash" {
			fmt.Fprintln(os.Stderr, "test server: cannot open the database")
			os.Exit(2)
		}
		if mode == "stubborn" {
			// Deaf to SIGTERM and staying on after stdin closes: only
			// SIGKILL ends it.
			signal.Ignore(syscall.SIGTERM)
		}
		srv := newTestServer(func() {
			// The server dies in the middle of a call, saying why on
			// stderr first, as a crashing server would.
			fmt.Fprintln(os.Stderr, "test server: fatal: the disk is on fire")
			os.Exit(3)
		}, nil)
		if err := srv.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		if mode == "stubborn" {
			select {}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hangCanceled counts the hang calls whose context the server saw
// canceled (in-process servers only).
var hangCanceled atomic.Int64

// hangMarkEnv, when set (in the test process, and so in the stdio
// servers it starts), names a file that the hang tool writes when a call
// reaches it: a test can wait for a call to be in progress, whatever the
// transport.
const hangMarkEnv = "LOUPE_MCP_TEST_HANG_MARK"

type echoIn struct {
	Message string `json:"message" jsonschema:"what to echo"`
}

type sizeIn struct {
	Bytes int `json:"bytes" jsonschema:"how many bytes of text to return"`
}

type empty struct{}

type procInfo struct {
	Args  []string `json:"args"`
	Dir   string   `json:"dir"`
	Value string   `json:"value"`
}

type weather struct {
	Temperature int    `json:"temperature"`
	Conditions  string `json:"conditions"`
}

// newTestServer returns a server with the tools the tests call: echo,
// fail (an isError result), hang (answers only when canceled), die (calls
// die mid-call), big (a text of the size asked), image (text and an image)
// and weather (structured content).
// Hang also answers once stop is closed, so that an HTTP test server can
// shut down (the SDK's server waits for its handlers to return).
func newTestServer(die func(), stop <-chan struct{}) *mcpsdk.Server {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "loupe-test", Version: "1"}, nil)
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "echo", Description: "Echo a message."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in echoIn) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "echo: " + in.Message}}}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in echoIn) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "no such city: " + in.Message}}}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "hang", Description: "Never answers."},
		func(ctx context.Context, _ *mcpsdk.CallToolRequest, _ empty) (*mcpsdk.CallToolResult, any, error) {
			if p := os.Getenv(hangMarkEnv); p != "" {
				os.WriteFile(p, []byte("in the hang call\n"), 0o644)
			}
			select {
			case <-ctx.Done():
				hangCanceled.Add(1)
				return nil, nil, ctx.Err()
			case <-stop:
				return nil, nil, errors.New("the test is over")
			}
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "die", Description: "Crashes the server."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, _ empty) (*mcpsdk.CallToolResult, any, error) {
			die()
			select {} // die does not return for stdio; over HTTP the connection is gone
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "proc", Description: "How the server process was started."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, _ empty) (*mcpsdk.CallToolResult, procInfo, error) {
			dir, _ := os.Getwd()
			dir, _ = filepath.EvalSymlinks(dir)
			return nil, procInfo{Args: os.Args[1:], Dir: dir, Value: os.Getenv("LOUPE_MCP_TEST_VALUE")}, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "big", Description: "Returns a long text."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in sizeIn) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: strings.Repeat("é", in.Bytes/2)}}}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "image", Description: "Returns a text and an image."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, _ empty) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
				&mcpsdk.TextContent{Text: "a pixel:"},
				&mcpsdk.ImageContent{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
			}}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "weather", Description: "Structured weather."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, _ empty) (*mcpsdk.CallToolResult, weather, error) {
			return nil, weather{Temperature: 21, Conditions: "sunny"}, nil
		})
	return s
}

// stdioServer returns the Server that re-executes the test binary as the
// test server.
func stdioServer(t *testing.T) mcp.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return mcp.Server{Name: "gotest", Command: exe, Args: []string{"-test.run=^$"}, Env: []string{serverEnv + "=1"}}
}

// httpServer serves the test server over streamable HTTP. Each request's
// Authorization header is sent on the returned channel. Its die tool
// closes every client connection and the listener.
func httpServer(t *testing.T) (*httptest.Server, <-chan string) {
	t.Helper()
	auth := make(chan string, 100)
	var ts *httptest.Server
	stop := make(chan struct{})
	srv := newTestServer(func() {
		go ts.Close()
		ts.CloseClientConnections()
	}, stop)
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case auth <- r.Header.Get("Authorization"):
		default:
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(stop)
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts, auth
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}
