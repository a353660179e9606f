package readme_test

// The ```go blocks of docs/models.md, as Examples (compiled, not run:
// they call the providers' APIs).

import (
	"context"
	"fmt"
	"log"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/anthropic"
	"github.com/loupe-dev/loupe/llm/openai"
	"github.com/loupe-dev/loupe/trace"
)

func Example_modelsOpenAI() {
	ctx := context.Background()
	var myTools []agent.Tool

	// README: models openai
	model, err := openai.New("gpt-4o-mini") // reads OPENAI_API_KEY
	if err != nil {
		log.Fatal(err)
	}
	exec := &agent.Executor{Tracer: trace.New(trace.Options{}), Limits: agent.Limits{MaxIterations: 10, MaxCostUSD: 0.50}}
	res := exec.Run(ctx, &agent.ReAct{Model: model, Tools: agent.NewToolbox(myTools...)}, "What's the weather in Paris?")
	fmt.Println(res.Answer, res.Stats.CostUSD)
	// README: end
}

func Example_modelsAnthropic() {
	// README: models anthropic
	model, err := anthropic.New("claude-sonnet-4-5", // reads ANTHROPIC_API_KEY
		anthropic.WithMaxTokens(8192),
		anthropic.WithThinking(2048)) // extended thinking, recorded as the call's thinking
	// README: end

	_, _ = model, err
}

func Example_modelsOllama() {
	// README: models ollama
	model, err := openai.New("qwen3:8b",
		openai.WithBaseURL("http://localhost:11434/v1"),
		openai.WithAPIKey("ollama"),   // any non-empty key
		openai.WithProvider("ollama")) // recorded in each call's usage
	// README: end

	_, _ = model, err
}
