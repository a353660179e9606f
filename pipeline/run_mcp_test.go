package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/loupe-dev/loupe/internal/testrepo"
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
	addUltraRAGTools(s)
	_ = s.Run(context.Background(), &mcpsdk.StdioTransport{})
}

// The tools of UltraRAG's vanilla_rag.yaml, as small Go stand-ins for its
// Python servers: enough to show that an UltraRAG pipeline runs once its
// servers point at MCP servers that exist.
type (
	noArgs    struct{}
	ultraData struct {
		Questions []string   `json:"q_ls"`
		Gold      [][]string `json:"gt_ls"`
	}
	ultraSearchIn struct {
		Questions []string `json:"q_ls"`
	}
	ultraSearchOut struct {
		Passages [][]string `json:"ret_psg"`
	}
	ultraPromptIn struct {
		Questions []string   `json:"q_ls"`
		Passages  [][]string `json:"ret_psg"`
	}
	ultraPromptOut struct {
		Prompts []string `json:"prompt_ls"`
	}
	ultraGenIn struct {
		Prompts []string `json:"prompt_ls"`
	}
	ultraGenOut struct {
		Answers []string `json:"ans_ls"`
	}
	ultraExtractIn struct {
		Answers []string `json:"ans_ls"`
	}
	ultraExtractOut struct {
		Predictions []string `json:"pred_ls"`
	}
	ultraEvalIn struct {
		Predictions []string   `json:"pred_ls"`
		Gold        [][]string `json:"gt_ls"`
	}
	ultraEvalOut struct {
		EM float64 `json:"em"`
	}
)

func addUltraRAGTools(s *mcpsdk.Server) {
	tool := func(name string) *mcpsdk.Tool {
		return &mcpsdk.Tool{Name: name, Description: "UltraRAG stand-in: " + name}
	}
	none := func(context.Context, *mcpsdk.CallToolRequest, noArgs) (*mcpsdk.CallToolResult, struct{}, error) {
		return nil, struct{}{}, nil
	}
	mcpsdk.AddTool(s, tool("get_data"), func(context.Context, *mcpsdk.CallToolRequest, noArgs) (*mcpsdk.CallToolResult, ultraData, error) {
		return nil, ultraData{Questions: []string{"What do static types catch?"}, Gold: [][]string{{"errors early"}}}, nil
	})
	mcpsdk.AddTool(s, tool("retriever_init"), none)
	mcpsdk.AddTool(s, tool("generation_init"), none)
	mcpsdk.AddTool(s, tool("retriever_search"), func(_ context.Context, _ *mcpsdk.CallToolRequest, in ultraSearchIn) (*mcpsdk.CallToolResult, ultraSearchOut, error) {
		out := ultraSearchOut{}
		for range in.Questions {
			out.Passages = append(out.Passages, []string{"Static typing catches errors early."})
		}
		return nil, out, nil
	})
	mcpsdk.AddTool(s, tool("qa_rag_boxed"), func(_ context.Context, _ *mcpsdk.CallToolRequest, in ultraPromptIn) (*mcpsdk.CallToolResult, ultraPromptOut, error) {
		out := ultraPromptOut{}
		for i, q := range in.Questions {
			out.Prompts = append(out.Prompts, strings.Join(in.Passages[i], " ")+"\nQ: "+q+"\nAnswer in \\boxed{}.")
		}
		return nil, out, nil
	})
	mcpsdk.AddTool(s, tool("generate"), func(_ context.Context, _ *mcpsdk.CallToolRequest, in ultraGenIn) (*mcpsdk.CallToolResult, ultraGenOut, error) {
		out := ultraGenOut{}
		for range in.Prompts {
			out.Answers = append(out.Answers, "They catch \\boxed{errors early}.")
		}
		return nil, out, nil
	})
	mcpsdk.AddTool(s, tool("output_extract_from_boxed"), func(_ context.Context, _ *mcpsdk.CallToolRequest, in ultraExtractIn) (*mcpsdk.CallToolResult, ultraExtractOut, error) {
		out := ultraExtractOut{}
		for _, a := range in.Answers {
			_, rest, _ := strings.Cut(a, "\\boxed{")
			inner, _, _ := strings.Cut(rest, "}")
			out.Predictions = append(out.Predictions, inner)
		}
		return nil, out, nil
	})
	mcpsdk.AddTool(s, tool("evaluate"), func(_ context.Context, _ *mcpsdk.CallToolRequest, in ultraEvalIn) (*mcpsdk.CallToolResult, ultraEvalOut, error) {
		hit := 0.0
		for i, p := range in.Predictions {
			if i < len(in.Gold) && len(in.Gold[i]) > 0 && p == in.Gold[i][0] {
				hit++
			}
		}
		return nil, ultraEvalOut{EM: hit / float64(max(1, len(in.Predictions)))}, nil
	})
}

// TestPipelineUltraRAGOnMCPServers runs UltraRAG's vanilla_rag.yaml as
// written, its servers block pointed at MCP servers that exist (the test
// binary, serving Go stand-ins for UltraRAG's tools).
func TestPipelineUltraRAGOnMCPServers(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(mcpServerEnv, "1")
	src, err := os.ReadFile("../testdata/real/ultrarag/vanilla_rag.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for _, name := range []string{"benchmark", "retriever", "prompt", "generation", "evaluation", "custom"} {
		text = strings.Replace(text, name+": servers/"+name, name+": '"+exe+"'", 1)
	}
	if strings.Contains(text, "servers/") {
		t.Fatalf("a server was not rewritten:\n%s", text)
	}
	p := load(t, writeFile(t, text))
	res, err := pipeline.Run(context.Background(), p, pipeline.RunOptions{Trace: clock()})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Pool.Get("em"); v != 1.0 {
		t.Errorf("em = %v, want 1", v)
	}
	if res.Steps != 8 || res.Stats.ToolCalls != 8 {
		t.Errorf("%d steps, %d tool calls, want 8", res.Steps, res.Stats.ToolCalls)
	}
	// Each step got only what its tool's schema asks for from the pool.
	for _, r := range res.Records {
		if r.Type == trace.TypeToolStart && r.Name == "evaluation.evaluate" && string(r.Input) != `{"gt_ls":[["errors early"]],"pred_ls":["errors early"]}` {
			t.Errorf("evaluation.evaluate was given %s", r.Input)
		}
	}
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
		testrepo.Missing(t, fmt.Sprintf("node or @modelcontextprotocol/server-everything is not installed (%v %v); scripts/mcp-js.sh installs it", err, serr))
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
