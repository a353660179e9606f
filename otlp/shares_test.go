package otlp

import (
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/trace"
)

// TestDialectShares measures, for each dialect fixture, how many spans map
// to a typed record (a model call, a tool call or an agent run) and how
// many stay generic steps, and what the records hold: the input tokens the
// model calls count, the tool calls with arguments, the model calls with
// tokens and with thinking. docs/otlp-mapping.md has the table it prints:
//
//	go test -run TestDialectShares -v ./otlp/
func TestDialectShares(t *testing.T) {
	// spans, model, tool, agent, generic (the root included when generic)
	want := map[string][5]int{
		"vercel.json":          {13, 6, 4, 3, 0},
		"pydantic_ai.json":     {10, 4, 4, 2, 0},
		"genai_parts.json":     {6, 2, 1, 1, 2},
		"genkit.json":          {7, 2, 3, 1, 1},
		"traceloop.json":       {8, 2, 2, 1, 3},
		"adk.json":             {8, 3, 2, 2, 1},
		"openai_agents.json":   {11, 3, 3, 3, 2},
		"langgraph.json":       {8, 2, 1, 0, 5},
		"crewai.json":          {6, 2, 2, 1, 1},
		"smolagents.json":      {7, 2, 2, 1, 2},
		"llamaindex.json":      {7, 2, 1, 0, 4},
		"openlit.json":         {5, 2, 1, 1, 1},
		"semantic_kernel.json": {5, 2, 2, 1, 0},
		"strands.json":         {13, 4, 3, 2, 4},
		"eino.json":            {5, 2, 1, 0, 2},
	}
	t.Log("| fixture | spans | typed (model/tool/agent) | generic | input tokens counted | tool calls with arguments | model calls with tokens | model calls with thinking |")
	for _, c := range dialectCases {
		spans, _ := classify(decodeFile(t, "testdata/"+c.file), nil)
		var n [5]int
		for _, s := range spans {
			n[0]++
			n[map[Kind]int{KindModel: 1, KindTool: 2, KindAgent: 3, KindGeneric: 4}[s.kind]]++
		}
		s := shareOf(Map(decodeFile(t, "testdata/"+c.file), nil).Records)
		t.Logf("| `%s` | %d | %d (%d %%): %d model, %d tool, %d agent | %d | %d | %d/%d | %d/%d | %d |",
			strings.TrimSuffix(c.file, ".json"), n[0], n[0]-n[4], (200*(n[0]-n[4])/n[0]+1)/2, n[1], n[2], n[3], n[4],
			s.inputTokens, s.toolsWithArgs, s.tools, s.modelsWithTokens, s.models, s.thinking)
		if n != want[c.file] {
			t.Errorf("%s: spans, model, tool, agent, generic = %v, want %v", c.file, n, want[c.file])
		}
		if s.inputTokens != c.inputTokens {
			t.Errorf("%s: %d input tokens counted, want %d", c.file, s.inputTokens, c.inputTokens)
		}
	}
}

// share is what the records of a fixture hold.
type share struct {
	inputTokens                    int64
	models, modelsWithTokens       int
	tools, toolsWithArgs, thinking int
}

// shareOf counts from records only, so that it measures any version of the
// mapping the same way.
func shareOf(recs []trace.Record) share {
	var s share
	for _, r := range recs {
		switch r.Type {
		case trace.TypeModelCall:
			s.models++
			if r.Usage.InputTokens > 0 {
				s.modelsWithTokens++
			}
			if len(r.Thinking) > 0 && string(r.Thinking) != "null" {
				s.thinking++
			}
		case trace.TypeToolStart:
			s.tools++
			if len(r.Input) > 0 && string(r.Input) != "null" {
				s.toolsWithArgs++
			}
		}
	}
	s.inputTokens = trace.StatsOf(recs).InputTokens
	return s
}
