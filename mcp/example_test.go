package mcp_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm"
	"github.com/loupe-dev/loupe/mcp"
	"github.com/loupe-dev/loupe/trace"
)

// An agent whose tools come from two MCP servers: the reference filesystem
// server over stdio and a server over streamable HTTP. Every call is traced
// as a tool call, and a server that fails or hangs fails that call, not the
// run. (Compiled, not run: it starts a server from npm and calls OpenAI.)
func Example() {
	ctx := context.Background()

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

	model, err := llm.Open("openai:gpt-4o-mini", llm.Options{})
	if err != nil {
		log.Fatal(err)
	}
	tools := agent.NewToolbox(append(fs.Tools(), docs.Tools()...)...)
	exec := &agent.Executor{Tracer: trace.New(trace.Options{})}
	res := exec.Run(ctx, &agent.ReAct{Model: model, Tools: tools}, "Summarise README.md.")
	fmt.Println(res.Answer, res.Err)
}
