package pipeline_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/pipeline"
	"github.com/loupe-dev/loupe/trace"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServerEnv makes the test binary an MCP server over stdio (see
// TestMain), so that a pipeline can name it as a command.
const mcpServerEnv = "LOUPE_PIPELINE_TEST_MCP_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(mcpServerEnv) == "1" {
		serveMCP()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type shoutIn struct {
	Text string `json:"text"`
}

type shoutOut struct {
	Shouted string `json:"shouted"`
}

// serveMCP serves two tools over stdio with the Go SDK: shout (structured
// output) and fail (an isError result).
func serveMCP() {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "pipeline-test", Version: "1"}, nil)
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "shout", Description: "Upper-cases text."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in shoutIn) (*mcpsdk.CallToolResult, shoutOut, error) {
			return nil, shoutOut{Shouted: strings.ToUpper(in.Text)}, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in shoutIn) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "cannot fail " + in.Text + " gracefully"}}}, nil, nil
		})
	_ = s.Run(context.Background(), &mcpsdk.StdioTransport{})
}

func TestPipelineMCPGoServer(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(mcpServerEnv, "1") // inherited by the server process only
	src := "servers:\n  go: '" + exe + "'\nparameters:\n  text: hello\n  topic: unrelated\npipeline:\n  - go.shout\n  - go.fail:\n      input:\n        text: $shouted\n"
	p := load(t, writeFile(t, src))
	res, err := pipeline.Run(context.Background(), p, pipeline.RunOptions{Trace: clock()})
	if err == nil || !strings.Contains(err.Error(), "step 2 go.fail") || !strings.Contains(err.Error(), "cannot fail HELLO gracefully") {
		t.Fatalf("err = %v, want step 2 failing with the tool's isError text", err)
	}
	if v, _ := res.Pool.Get("shouted"); v != "HELLO" {
		t.Errorf("shouted = %v, want HELLO (the structured result)", v)
	}
	// A step without an input mapping gives an MCP tool only the arguments
	// its schema names, not the whole pool.
	for _, r := range res.Records {
		if r.Type == trace.TypeToolStart && r.Name == "go.shout" && string(r.Input) != `{"text":"hello"}` {
			t.Errorf("go.shout was given %s", r.Input)
		}
	}
	if res.Termination != trace.TerminationError || res.Steps != 1 {
		t.Errorf("%s after %d steps", res.Termination, res.Steps)
	}
}

func TestPipelineMCPEverythingServer(t *testing.T) {
	bin, err := filepath.Abs("../testdata/mcp-js/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(bin); err != nil || serr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or server-everything missing (run scripts/mcp-js.sh): %v %v", err, serr)
		}
		t.Skip("node or @modelcontextprotocol/server-everything is not installed; scripts/mcp-js.sh installs it")
	}
	src := "servers:\n  generator: builtin\n  everything: " + node + " '" + bin + "' stdio\nparameters:\n  topic: \"$topic\"\npipeline:\n  - generator.analyze\n  - everything.echo:\n      input:\n        message: $analysis\n      output:\n        - echoed\n"
	p := load(t, writeFile(t, src))
	res, err := pipeline.Run(context.Background(), p, pipeline.RunOptions{Params: map[string]any{"topic": "typed languages"}, Trace: clock()})
	if err != nil {
		t.Fatal(err)
	}
	echoed, _ := res.Pool.Get("echoed")
	if s, _ := echoed.(string); !strings.HasPrefix(s, "Echo: Analysis of \"typed languages\"") {
		b, _ := json.Marshal(echoed)
		t.Errorf("echoed = %s", b)
	}
	if res.Stats.ByTool["everything.echo"].Calls != 1 {
		t.Errorf("stats by tool: %+v", res.Stats.ByTool)
	}
}
