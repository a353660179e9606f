// Package scripted is a Model that plays back turns written in a YAML or
// JSON file, so that agents run offline and deterministically: in tests,
// in demos and in CI.
//
// A script looks like this:
//
//	model: scripted-demo          # the name recorded in traces (default "scripted")
//	price:                        # optional, USD per million tokens
//	  input_per_mtok: 3
//	  output_per_mtok: 15
//	stream: true                  # optional: stream content as model.delta chunks
//	turns:
//	  - thinking: I should compute it.
//	    tool_calls:
//	      - name: calculator
//	        input: {expression: "2 + 2"}
//	    usage: {input_tokens: 120, output_tokens: 20}
//	  - when: "unknown time zone"   # only if the last tool result contains this
//	    answer: It is 4.
//	    usage: {input_tokens: 160, output_tokens: 8}
//	    cost_usd: 0.0004            # overrides price
//
// Each call to Generate plays the next turn. A turn with "when" is played
// only if the tool results the model was just given contain that text;
// otherwise it is skipped for good, which lets a script react to a tool
// failing. A turn is an answer, tool calls (with optional content), or an
// error the call returns.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/internal/yamlpos"
	"github.com/loupe-dev/loupe/trace"
)

// A Script is a parsed script. It is immutable and safe for concurrent
// use; each Model made from it plays it from the start.
type Script struct {
	Model    string `yaml:"model"`    // the model name the calls report
	Provider string `yaml:"provider"` // the provider in the calls' usage
	Price    *Price `yaml:"price"`    // prices the calls without cost_usd; nil: calls with tokens have an unknown cost
	Stream   bool   `yaml:"stream"`   // deliver each answer as deltas through Request.OnDelta
	Turns    []Turn `yaml:"turns"`    // the answers, in the order they are played

	file string
	pos  []string // "file:line:column" of each turn
}

// Price is a model's price in USD per million tokens.
type Price struct {
	InputPerMTok  float64 `yaml:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok"`
}

// A Turn is one scripted model answer.
type Turn struct {
	When         string     `yaml:"when"`          // play only if the last tool results contain this
	Thinking     string     `yaml:"thinking"`      // reasoning text
	Content      string     `yaml:"content"`       // text sent along with tool calls
	Answer       string     `yaml:"answer"`        // the final answer (no tool calls)
	ToolCalls    []ToolCall `yaml:"tool_calls"`    // tools to call
	Error        string     `yaml:"error"`         // the call fails with this error
	Usage        Usage      `yaml:"usage"`         // tokens of this call
	CostUSD      *float64   `yaml:"cost_usd"`      // the call's cost; nil means from Price
	FinishReason string     `yaml:"finish_reason"` // default "stop" or "tool_calls"
}

// A ToolCall is a scripted tool call.
type ToolCall struct {
	ID    string `yaml:"id"`    // default "call_<turn>_<n>"
	Name  string `yaml:"name"`  // required
	Input any    `yaml:"input"` // any value; default {}

	input json.RawMessage
}

// Usage is a scripted call's token usage.
type Usage struct {
	InputTokens     int64 `yaml:"input_tokens"`
	OutputTokens    int64 `yaml:"output_tokens"`
	CachedTokens    int64 `yaml:"cached_tokens"`
	ReasoningTokens int64 `yaml:"reasoning_tokens"`
}

// Load reads and parses the script at path.
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return Parse(data, path)
}

// Parse parses a script in YAML or JSON. filename is used in error
// messages, which have the form "file:line:column: what is wrong".
func Parse(data []byte, filename string) (*Script, error) {
	if filename == "" {
		filename = "script"
	}
	s := &Script{file: filename}
	f, err := yamlpos.DecodeFile(data, filename, "script", `it needs at least "turns:" with one turn`, s)
	if err != nil {
		return nil, err
	}
	at := func(path string) string { return yamlpos.At(f, filename, path) }
	if len(s.Turns) == 0 {
		return nil, fmt.Errorf("%s: the script has no turns; add a \"turns:\" list with at least one turn", at("$"))
	}
	if s.Model == "" {
		s.Model = "scripted"
	}
	if s.Provider == "" {
		s.Provider = "scripted"
	}
	if p := s.Price; p != nil && (p.InputPerMTok < 0 || p.OutputPerMTok < 0) {
		return nil, fmt.Errorf("%s: price: a price cannot be negative", at("$.price"))
	}
	s.pos = make([]string, len(s.Turns))
	for i := range s.Turns {
		t := &s.Turns[i]
		where := at(fmt.Sprintf("$.turns[%d]", i))
		s.pos[i] = where
		kinds := 0
		for _, set := range []bool{t.Answer != "", len(t.ToolCalls) > 0, t.Error != ""} {
			if set {
				kinds++
			}
		}
		switch {
		case kinds == 0:
			return nil, fmt.Errorf("%s: turn %d has no answer, tool_calls or error; give it one", where, i+1)
		case kinds > 1:
			return nil, fmt.Errorf("%s: turn %d has more than one of answer, tool_calls and error; a turn is one of them (put text sent with tool calls in content)", where, i+1)
		case t.Content != "" && len(t.ToolCalls) == 0:
			return nil, fmt.Errorf("%s: turn %d has content but no tool_calls; use answer for a final answer", where, i+1)
		}
		u := t.Usage
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CachedTokens < 0 || u.ReasoningTokens < 0 {
			return nil, fmt.Errorf("%s: turn %d: usage: token counts cannot be negative", at(fmt.Sprintf("$.turns[%d].usage", i)), i+1)
		}
		if t.CostUSD != nil && *t.CostUSD < 0 {
			return nil, fmt.Errorf("%s: turn %d: cost_usd cannot be negative", at(fmt.Sprintf("$.turns[%d].cost_usd", i)), i+1)
		}
		for j := range t.ToolCalls {
			c := &t.ToolCalls[j]
			cwhere := at(fmt.Sprintf("$.turns[%d].tool_calls[%d]", i, j))
			if c.Name == "" {
				return nil, fmt.Errorf("%s: turn %d, tool call %d has no name", cwhere, i+1, j+1)
			}
			if c.ID == "" {
				c.ID = fmt.Sprintf("call_%d_%d", i+1, j+1)
			}
			in := c.Input
			if in == nil {
				in = map[string]any{}
			}
			b, err := json.Marshal(in)
			if err != nil {
				return nil, fmt.Errorf("%s: turn %d, tool call %d: input cannot be written as JSON: %v", cwhere, i+1, j+1, err)
			}
			c.input = b
		}
	}
	return s, nil
}

// NewModel returns a Model that plays the script from its first turn.
func (s *Script) NewModel() *Model { return &Model{s: s} }

// File returns the name the script was parsed with.
func (s *Script) File() string { return s.file }

// Model plays a Script. It implements agent.Model and is safe for
// concurrent use (calls take turns in the order they arrive).
type Model struct {
	s       *Script
	mu      sync.Mutex
	next    int // the next turn to consider
	calls   int
	skipped []string // turns passed over because their "when" did not match
}

// Name returns the script's model name.
func (m *Model) Name() string { return m.s.Model }

// Remaining returns how many turns have not been played or skipped.
func (m *Model) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.s.Turns) - m.next
}

// Generate plays the next turn whose condition holds. It fails, saying
// which call and which turns, when the script has no turn left.
func (m *Model) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return agent.Response{}, err
	}
	results := lastToolResults(req.Messages)
	m.mu.Lock()
	m.calls++
	call := m.calls
	idx := -1
	for i := m.next; i < len(m.s.Turns); i++ {
		t := &m.s.Turns[i]
		if t.When != "" && !strings.Contains(results, t.When) {
			m.skipped = append(m.skipped, fmt.Sprintf("turn %d (%s, when %q)", i+1, m.s.pos[i], t.When))
			continue
		}
		idx = i
		break
	}
	if idx < 0 {
		m.next = len(m.s.Turns)
		msg := fmt.Sprintf("scripted model %q: call %d has no turn left in %s (%d turns", m.s.Model, call, m.s.file, len(m.s.Turns))
		if len(m.skipped) > 0 {
			msg += "; skipped because the last tool results did not match: " + strings.Join(m.skipped, ", ")
		}
		m.mu.Unlock()
		return agent.Response{}, errors.New(msg + "); add a turn to the script")
	}
	m.next = idx + 1
	m.mu.Unlock()

	t := &m.s.Turns[idx]
	if t.Error != "" {
		return agent.Response{}, fmt.Errorf("scripted model %q: turn %d (%s): %s", m.s.Model, idx+1, m.s.pos[idx], t.Error)
	}
	resp := agent.Response{
		Thinking:     t.Thinking,
		Content:      t.Content,
		FinishReason: t.FinishReason,
		Usage: trace.Usage{
			Provider:        m.s.Provider,
			InputTokens:     t.Usage.InputTokens,
			OutputTokens:    t.Usage.OutputTokens,
			CachedTokens:    t.Usage.CachedTokens,
			ReasoningTokens: t.Usage.ReasoningTokens,
		},
	}
	switch {
	case t.CostUSD != nil:
		resp.Usage.CostUSD = *t.CostUSD
	case m.s.Price != nil:
		resp.Usage.CostUSD = (float64(t.Usage.InputTokens)*m.s.Price.InputPerMTok + float64(t.Usage.OutputTokens)*m.s.Price.OutputPerMTok) / 1e6
	default:
		// No price: a call that used tokens has an unknown cost, not $0.
		resp.Usage.CostUnknown = t.Usage.InputTokens+t.Usage.OutputTokens > 0
	}
	if len(t.ToolCalls) > 0 {
		resp.ToolCalls = make([]agent.ToolCall, len(t.ToolCalls))
		for j, c := range t.ToolCalls {
			resp.ToolCalls[j] = agent.ToolCall{ID: c.ID, Name: c.Name, Input: bytes.Clone(c.input)}
		}
		if resp.FinishReason == "" {
			resp.FinishReason = "tool_calls"
		}
	} else {
		resp.Content = t.Answer
		if resp.FinishReason == "" {
			resp.FinishReason = "stop"
		}
	}
	if m.s.Stream && req.OnDelta != nil {
		if resp.Thinking != "" {
			req.OnDelta("thinking", resp.Thinking)
		}
		for _, w := range strings.SplitAfter(resp.Content, " ") {
			if w != "" {
				req.OnDelta("text", w)
			}
		}
	}
	return resp, nil
}

// lastToolResults joins the tool results at the end of the conversation:
// what the model was just given.
func lastToolResults(msgs []agent.Message) string {
	i := len(msgs)
	for i > 0 && msgs[i-1].Role == agent.RoleTool {
		i--
	}
	if i == len(msgs) {
		return ""
	}
	var b strings.Builder
	for _, m := range msgs[i:] {
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

var _ agent.Model = (*Model)(nil)
