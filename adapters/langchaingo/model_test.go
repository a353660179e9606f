package lctrace_test

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"
)

// turn is one scripted answer of the model.
type turn struct {
	content   string
	reasoning string
	calls     []llms.ToolCall
	info      map[string]any
	stop      string
	chunks    []string // streamed, when the caller streams
	err       error
}

// scripted is an llms.Model that answers from a script, one turn per call,
// and reports its calls to its CallbacksHandler the way langchaingo's
// providers do: HandleLLMGenerateContentStart, then
// HandleLLMGenerateContentEnd or (like the Anthropic provider)
// HandleLLMError. It is the tests' only stand-in: everything else is
// langchaingo's own code.
type scripted struct {
	CallbacksHandler callbacks.Handler

	mu    sync.Mutex
	turns []turn
	seen  [][]llms.MessageContent
}

var _ llms.Model = (*scripted)(nil)

func newScripted(h callbacks.Handler, turns ...turn) *scripted {
	return &scripted{CallbacksHandler: h, turns: turns}
}

func (m *scripted) GenerateContent(ctx context.Context, msgs []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	if m.CallbacksHandler != nil {
		m.CallbacksHandler.HandleLLMGenerateContentStart(ctx, msgs)
	}
	var o llms.CallOptions
	for _, opt := range options {
		opt(&o)
	}
	m.mu.Lock()
	m.seen = append(m.seen, msgs)
	var t turn
	if len(m.turns) == 0 {
		t.err = errors.New("scripted model: the script has no more turns")
	} else {
		t, m.turns = m.turns[0], m.turns[1:]
	}
	m.mu.Unlock()
	if t.err != nil {
		if m.CallbacksHandler != nil {
			m.CallbacksHandler.HandleLLMError(ctx, t.err)
		}
		return nil, t.err
	}
	if o.StreamingFunc != nil {
		for _, c := range t.chunks {
			if err := o.StreamingFunc(ctx, []byte(c)); err != nil {
				return nil, err
			}
		}
	}
	stop := t.stop
	if stop == "" {
		stop = "stop"
		if len(t.calls) > 0 {
			stop = "tool_calls"
		}
	}
	resp := &llms.ContentResponse{Choices: []*llms.ContentChoice{{
		Content: t.content, ReasoningContent: t.reasoning, ToolCalls: t.calls,
		StopReason: stop, GenerationInfo: t.info,
	}}}
	if m.CallbacksHandler != nil {
		m.CallbacksHandler.HandleLLMGenerateContentEnd(ctx, resp)
	}
	return resp, nil
}

func (m *scripted) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// weather is a tool that always fails, reporting the failure to its
// CallbacksHandler the way langchaingo's own tools (duckduckgo, serpapi,
// wikipedia) do.
type weather struct {
	CallbacksHandler callbacks.Handler
}

var _ tools.Tool = weather{}

func (weather) Name() string { return "weather" }

func (weather) Description() string {
	return `Current weather of a city. Input: a JSON object {"city": "<name>"}.`
}

var errWeather = errors.New("weather service unavailable: connection refused")

func (w weather) Call(ctx context.Context, input string) (string, error) {
	if w.CallbacksHandler != nil {
		w.CallbacksHandler.HandleToolStart(ctx, input)
	}
	if !strings.Contains(input, "city") {
		return "give a city", nil
	}
	if w.CallbacksHandler != nil {
		w.CallbacksHandler.HandleToolError(ctx, errWeather)
	}
	return "", errWeather
}

// funcCall is a model's tool call of a functions agent.
func funcCall(id, name, args string) llms.ToolCall {
	return llms.ToolCall{ID: id, Type: "function", FunctionCall: &llms.FunctionCall{Name: name, Arguments: args}}
}
