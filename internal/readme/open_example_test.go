package readme_test

// The ```go blocks of README.md's sections on real models, MCP tools and
// replay, as Examples (compiled, not run: they call providers' APIs, start
// servers from npm, or need a stored trace).

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm"
	"github.com/loupe-dev/loupe/mcp"
	"github.com/loupe-dev/loupe/replay"
	"github.com/loupe-dev/loupe/trace"
)

func Example_llmOpen() {
	ctx := context.Background()
	var myTools []agent.Tool

	// README: llm open
	model, err := llm.Open("openai:gpt-4o-mini", llm.Options{}) // or anthropic:claude-sonnet-4-5, ollama:qwen3:8b, …
	if err != nil {
		log.Fatal(err)
	}
	exec := &agent.Executor{Tracer: trace.New(trace.Options{}), Limits: agent.Limits{MaxIterations: 10, MaxCostUSD: 0.50}}
	res := exec.Run(ctx, &agent.ReAct{Model: model, Tools: agent.NewToolbox(myTools...)}, "What's the weather in Paris?")
	fmt.Println(res.Answer, res.Stats.CostUSD)
	// README: end
}

func Example_mcpTools() {
	ctx := context.Background()
	var model agent.Model

	// README: mcp tools
	fs, err := mcp.Connect(ctx, mcp.Server{
		Name:        "fs",
		Command:     "mcp-server-filesystem", // npm install -g @modelcontextprotocol/server-filesystem
		Args:        []string{"."},           // the directory it may read
		CallTimeout: 30 * time.Second,
		Prefix:      true, // tools named fs__read_text_file, …
	})
	if err != nil {
		log.Fatal(err)
	}
	defer fs.Close() // stops the server's process

	docs, err := mcp.Connect(ctx, mcp.Server{
		Name:    "docs",
		URL:     "https://mcp.example.com/mcp",
		Headers: map[string]string{"Authorization": "Bearer " + os.Getenv("DOCS_MCP_TOKEN")},
		Prefix:  true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer docs.Close()

	tools := agent.NewToolbox(append(fs.Tools(), docs.Tools()...)...)
	exec := &agent.Executor{Tracer: trace.New(trace.Options{})}
	res := exec.Run(ctx, &agent.ReAct{Model: model, Tools: tools}, "Summarise README.md.")
	// README: end
	fmt.Println(res.Answer, res.Err)
}

func Example_replay() {
	ctx := context.Background()
	var t testing.TB
	var records []trace.Record
	var tools []agent.Tool
	systemPrompt := "You add."

	// README: replay
	rec, err := replay.Load(records) // a stored trace's records (store.Store.Trace), or agent.Result.Records
	if err != nil {
		t.Fatal(err) // the trace cannot be replayed faithfully, and says why
	}
	rp, err := replay.New(rec, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	loop := &agent.ReAct{
		Model:  rp.Model(),        // answers from the recording
		Tools:  rp.Stub(tools...), // your tools' current definitions, results from the recording
		System: systemPrompt,      // your current prompt
	}
	res := (&agent.Executor{}).Run(ctx, loop, rec.Input)
	if d := rp.Finish(res); d != nil {
		t.Fatal(d) // replay diverged at step 2, model call 2: the model was asked with other messages …
	}
	// README: end
}
