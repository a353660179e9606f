package scripted_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/scripted"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"empty", "", "s.yaml:1:1: the script is empty"},
		{"comment only", "# nothing\n", "s.yaml:1:1: the script is empty"},
		{"syntax", "turns:\n  - answer: [unclosed\n", "s.yaml:2:"},
		{"unknown field", "turns:\n  - answr: hi\n", "s.yaml:2:5: unknown field \"answr\""},
		{"wrong type", "turns:\n  - answer: hi\n    usage: {input_tokens: many}\n", "s.yaml:3:"},
		{"no turns", "model: m\n", "s.yaml:1:1: the script has no turns"},
		{"turn without content", "turns:\n  - thinking: hmm\n", "s.yaml:2:5: turn 1 has no answer, tool_calls or error"},
		{"answer and tools", "turns:\n  - answer: a\n  - answer: b\n    tool_calls: [{name: x}]\n", "s.yaml:3:5: turn 2 has more than one of answer, tool_calls and error"},
		{"content without tools", "turns:\n  - content: hi\n    error: e\n", "turn 1 has content but no tool_calls"},
		{"tool without name", "turns:\n  - tool_calls:\n      - input: {a: 1}\n", "s.yaml:3:9: turn 1, tool call 1 has no name"},
		{"negative tokens", "turns:\n  - answer: a\n    usage:\n      input_tokens: -3\n", "s.yaml:4:7: turn 1: usage: token counts cannot be negative"},
		{"negative cost", "turns:\n  - answer: a\n    cost_usd: -1\n", "s.yaml:3:15: turn 1: cost_usd cannot be negative"},
		{"negative price", "price: {input_per_mtok: -1}\nturns:\n  - answer: a\n", "s.yaml:1:8: price: a price cannot be negative"},
		{"two documents", "turns:\n  - answer: a\n---\nturns:\n  - answer: b\n", "holds 2 YAML documents"},
		{"json", `{"turns": [{"answer": "a", "usage": {"input_tokens": "x"}}]}`, "s.yaml:1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scripted.Parse([]byte(tt.src), "s.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestExampleScript(t *testing.T) {
	s, err := scripted.Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := s.NewModel()
	if m.Name() != "scripted-example" || m.Remaining() != 3 {
		t.Fatalf("model %q with %d turns", m.Name(), m.Remaining())
	}
	ctx := context.Background()
	r1, err := m.Generate(ctx, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "17% of 2340?"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.ToolCalls) != 1 || r1.ToolCalls[0].Name != "calculator" || string(r1.ToolCalls[0].Input) != `{"expression":"2340 * 0.17"}` ||
		r1.ToolCalls[0].ID != "call_1_1" || r1.FinishReason != "tool_calls" || r1.Thinking == "" {
		t.Fatalf("turn 1 = %+v", r1)
	}
	if want := (120*3.0 + 24*15.0) / 1e6; r1.Usage.CostUSD != want || r1.Usage.Provider != "scripted" {
		t.Errorf("usage = %+v, cost want %v", r1.Usage, want)
	}
	// The calculator succeeded, so the "when: error" retry is skipped.
	r2, err := m.Generate(ctx, agent.Request{Messages: []agent.Message{
		{Role: agent.RoleAssistant, ToolCalls: r1.ToolCalls},
		{Role: agent.RoleTool, ToolCallID: "call_1_1", Content: `{"value":397.8}`},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Content != "17% of 2340 is 397.8." || r2.FinishReason != "stop" || r2.Usage.CostUSD != 0.0005 {
		t.Fatalf("turn 3 = %+v", r2)
	}
	_, err = m.Generate(ctx, agent.Request{})
	if err == nil || !strings.Contains(err.Error(), "call 3 has no turn left in testdata/example.yaml (3 turns; skipped because the last tool results did not match: turn 2 (testdata/example.yaml:12:5, when \"error\"))") {
		t.Fatalf("out of turns: %v", err)
	}
}

func TestWhenMatchesToolFailure(t *testing.T) {
	s, err := scripted.Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := s.NewModel()
	ctx := context.Background()
	if _, err := m.Generate(ctx, agent.Request{}); err != nil {
		t.Fatal(err)
	}
	r, err := m.Generate(ctx, agent.Request{Messages: []agent.Message{{Role: agent.RoleTool, Content: "error: bad expression", IsError: true}}})
	if err != nil || len(r.ToolCalls) != 1 || !strings.Contains(string(r.ToolCalls[0].Input), "17 / 100") {
		t.Fatalf("retry turn = %+v, %v", r, err)
	}
}

func TestErrorTurnAndCanceledContext(t *testing.T) {
	s, err := scripted.Parse([]byte("model: m\nturns:\n  - error: rate limited\n"), "e.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.NewModel().Generate(ctx, agent.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	_, err = s.NewModel().Generate(context.Background(), agent.Request{})
	if err == nil || err.Error() != `scripted model "m": turn 1 (e.yaml:3:5): rate limited` {
		t.Errorf("error turn: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"turns:\n  - answer: a\n",
		"model: m\nprice: {input_per_mtok: 1}\nturns:\n  - tool_calls: [{name: x, input: {a: [1, 2]}}]\n    usage: {input_tokens: 3}\n  - when: err\n    answer: b\n",
		`{"turns": [{"answer": "a"}]}`,
		"turns:\n  - tool_calls:\n      - name: x\n        input: &a {b: *a}\n",
		"turns: [",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := scripted.Parse(data, "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error without the file name: %v", err)
			}
			return
		}
		m := s.NewModel()
		for range len(s.Turns) + 1 {
			if _, err := m.Generate(context.Background(), agent.Request{}); err != nil {
				break
			}
		}
	})
}
