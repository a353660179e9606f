package otlp

import (
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/trace"
)

// TestDialectShares measures, for each dialect fixture, how many spans map
// to a typed record (a model call, a tool call or an agent run) and how
// many stay generic steps, and how many input tokens the model calls
// count. docs/otlp-mapping.md has the table it prints:
//
//	go test -run TestDialectShares -v ./otlp/
func TestDialectShares(t *testing.T) {
	// spans, model, tool, agent, generic (the root included when generic)
	want := map[string][5]int{
		"vercel.json":      {13, 6, 4, 3, 0},
		"pydantic_ai.json": {10, 4, 4, 2, 0},
		"genai_parts.json": {6, 2, 1, 1, 2},
		"genkit.json":      {7, 2, 3, 1, 1},
		"traceloop.json":   {8, 2, 2, 1, 3},
		"adk.json":         {8, 3, 2, 2, 1},
	}
	t.Log("| fixture | spans | model | tool | agent | generic | typed | input tokens counted |")
	for _, c := range dialectCases {
		td := decodeFile(t, "testdata/"+c.file)
		var n [5]int
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
				ss := rss.At(i).ScopeSpans().At(j)
				for k := 0; k < ss.Spans().Len(); k++ {
					sp := ss.Spans().At(k)
					m := scanMarks(sp.Attributes())
					kind, _ := m.classify(ss.Scope().Name(), sp.Name())
					n[0]++
					n[map[Kind]int{KindModel: 1, KindTool: 2, KindAgent: 3, KindGeneric: 4}[kind]]++
				}
			}
		}
		st := trace.StatsOf(Map(td, nil).Records)
		t.Logf("| %s | %d | %d | %d | %d | %d | %d%% | %d |", strings.TrimSuffix(c.file, ".json"), n[0], n[1], n[2], n[3], n[4],
			100*(n[0]-n[4])/n[0], st.InputTokens)
		if n != want[c.file] {
			t.Errorf("%s: spans, model, tool, agent, generic = %v, want %v", c.file, n, want[c.file])
		}
		if st.InputTokens != c.inputTokens {
			t.Errorf("%s: %d input tokens counted, want %d", c.file, st.InputTokens, c.inputTokens)
		}
	}
}
