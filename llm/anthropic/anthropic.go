// Package anthropic is an agent.Model for the Anthropic Messages API, built
// on the official SDK github.com/anthropics/anthropic-sdk-go.
//
// It sends the conversation and tool definitions, streams the answer by
// default (text and thinking chunks go to Request.OnDelta, so a traced run
// records each as a model.delta record and the first one's time is the
// call's time to first token), returns extended thinking blocks as the
// response's Thinking, reports usage with cache read and cache creation
// tokens and a cost from package price, and passes the stop reason on as
// the finish reason ("end_turn", "tool_use", "max_tokens", …).
//
//	m, err := anthropic.New("claude-sonnet-4-5")                        // ANTHROPIC_API_KEY from the environment
//	m, err := anthropic.New("claude-sonnet-4-5", anthropic.WithThinking(2048))
//	m, err := anthropic.New("claude-sonnet-4-5", anthropic.WithClient(myClient))
//
// With extended thinking and tools, the API wants each thinking block
// sent back, signature and all, with the tool calls it led to. An
// agent.Message carries thinking as text only, so the Model remembers the
// blocks of its recent answers by tool call id and puts them back when the
// conversation returns those calls.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/internal/callerr"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/trace"
)

// DefaultMaxTokens is the max_tokens sent when WithMaxTokens is not given;
// the Messages API requires one.
const DefaultMaxTokens = 4096

// An Option configures a Model.
type Option func(*Model)

// WithClient makes the Model send its requests through c, a client the
// caller configured (middleware, proxy, Bedrock, Vertex); WithBaseURL,
// WithAPIKey and WithRequestOptions then add per-request options on top.
func WithClient(c anthropic.Client) Option { return func(m *Model) { m.client, m.own = c, true } }

// WithBaseURL sends requests to another Messages API endpoint.
func WithBaseURL(u string) Option {
	return func(m *Model) { m.opts = append(m.opts, option.WithBaseURL(u)) }
}

// WithAPIKey sets the API key (default $ANTHROPIC_API_KEY).
func WithAPIKey(key string) Option {
	return func(m *Model) { m.opts = append(m.opts, option.WithAPIKey(key)) }
}

// WithRequestOptions adds SDK request options to every call.
func WithRequestOptions(opts ...option.RequestOption) Option {
	return func(m *Model) { m.opts = append(m.opts, opts...) }
}

// WithStream sets whether the Model streams its answers (default true).
func WithStream(on bool) Option { return func(m *Model) { m.stream = on } }

// WithMaxTokens sets max_tokens (default DefaultMaxTokens).
func WithMaxTokens(n int64) Option { return func(m *Model) { m.maxTokens = n } }

// WithThinking turns extended thinking on with a budget of budget tokens
// (at least 1024, and below max_tokens).
func WithThinking(budget int64) Option { return func(m *Model) { m.thinking = budget } }

// WithParams lets the caller set request parameters Loupe does not
// (temperature, top_p, metadata, …). f is called on every request after
// Loupe fills in the rest.
func WithParams(f func(*anthropic.MessageNewParams)) Option {
	return func(m *Model) { m.params = f }
}

// WithPrices prices calls with t instead of price.Default().
func WithPrices(t *price.Table) Option { return func(m *Model) { m.prices = t } }

// A Model is an agent.Model calling one Claude model. It is safe for
// concurrent use.
type Model struct {
	name      string
	client    anthropic.Client
	own       bool
	opts      []option.RequestOption
	stream    bool
	maxTokens int64
	thinking  int64
	params    func(*anthropic.MessageNewParams)
	prices    *price.Table

	mu     sync.Mutex
	blocks map[string][]anthropic.ContentBlockParamUnion // first tool call id → thinking blocks that preceded it
}

// maxRemembered bounds the thinking blocks a Model keeps: an agent loop
// sends back only its latest answer's, so older ones can go.
const maxRemembered = 256

// New returns a Model calling model. Without WithClient it builds a client
// from the environment (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL) and the
// options. It fails if model is empty, the thinking budget is not below
// max_tokens, or the price file $LOUPE_PRICES names cannot be read.
func New(model string, opts ...Option) (*Model, error) {
	if strings.TrimSpace(model) == "" {
		return nil, errors.New("anthropic: the model name is empty; pass one such as \"claude-sonnet-4-5\"")
	}
	m := &Model{name: model, stream: true, maxTokens: DefaultMaxTokens, blocks: map[string][]anthropic.ContentBlockParamUnion{}}
	for _, o := range opts {
		o(m)
	}
	if m.maxTokens <= 0 {
		return nil, fmt.Errorf("anthropic: max tokens %d; it must be positive", m.maxTokens)
	}
	if m.thinking != 0 && (m.thinking < 1024 || m.thinking >= m.maxTokens) {
		return nil, fmt.Errorf("anthropic: thinking budget %d; it must be at least 1024 and below max tokens (%d): raise WithMaxTokens", m.thinking, m.maxTokens)
	}
	if !m.own {
		m.client = anthropic.NewClient(m.opts...)
		m.opts = nil
	}
	if m.prices == nil {
		t, err := price.Default()
		if err != nil {
			return nil, fmt.Errorf("anthropic: %w", err)
		}
		m.prices = t
	}
	return m, nil
}

// Name returns the model name given to New.
func (m *Model) Name() string { return m.name }

// Generate sends req and returns the model's answer. A call the API
// refuses or cannot answer (rate limit, overload, prompt too long,
// refusal, network failure) returns an error saying which, with what usage
// the API reported.
func (m *Model) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	params, err := m.request(req)
	if err != nil {
		return agent.Response{}, err
	}
	var attempts atomic.Int32
	opts := append(m.opts[:len(m.opts):len(m.opts)], countAttempts(&attempts))
	var msg *anthropic.Message
	if m.stream {
		msg, err = m.generateStream(ctx, params, req.OnDelta, opts)
	} else {
		msg, err = m.client.Messages.New(ctx, params, opts...)
	}
	var resp agent.Response
	if msg != nil {
		resp = m.response(msg)
	}
	if err != nil {
		return resp, callerr.Retried(m.wrap(ctx, err), int(attempts.Load()))
	}
	if resp.FinishReason == string(anthropic.StopReasonRefusal) {
		return resp, &RefusalError{Model: m.name, Content: resp.Content}
	}
	for _, c := range resp.ToolCalls {
		if !json.Valid(c.Input) {
			return resp, fmt.Errorf("anthropic: model %s: tool call %s (%s): the input is not valid JSON (stop reason %s): %.200q", m.name, c.ID, c.Name, resp.FinishReason, c.Input)
		}
	}
	return resp, nil
}

// request builds the Messages API parameters for req.
func (m *Model) request(req agent.Request) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(m.name), MaxTokens: m.maxTokens}
	if m.thinking > 0 {
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(m.thinking)
	}
	// add appends blocks as a turn of role, joining them to the previous
	// turn when it has the same role: the API wants all results of one
	// round of tool calls in one user turn.
	add := func(role anthropic.MessageParamRole, blocks ...anthropic.ContentBlockParamUnion) {
		if n := len(p.Messages); n > 0 && p.Messages[n-1].Role == role {
			p.Messages[n-1].Content = append(p.Messages[n-1].Content, blocks...)
			return
		}
		p.Messages = append(p.Messages, anthropic.MessageParam{Role: role, Content: blocks})
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case agent.RoleSystem:
			p.System = append(p.System, anthropic.TextBlockParam{Text: msg.Content})
		case agent.RoleUser:
			add(anthropic.MessageParamRoleUser, anthropic.NewTextBlock(msg.Content))
		case agent.RoleTool:
			add(anthropic.MessageParamRoleUser, anthropic.NewToolResultBlock(msg.ToolCallID, msg.Content, msg.IsError))
		case agent.RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if len(msg.ToolCalls) > 0 {
				m.mu.Lock()
				blocks = append(blocks, m.blocks[msg.ToolCalls[0].ID]...)
				m.mu.Unlock()
			}
			if msg.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(msg.Content))
			}
			for _, c := range msg.ToolCalls {
				in := c.Input
				if len(in) == 0 {
					in = json.RawMessage("{}")
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, in, c.Name))
			}
			if len(blocks) == 0 {
				continue // an empty assistant turn: the API refuses empty content
			}
			add(anthropic.MessageParamRoleAssistant, blocks...)
		default:
			return p, fmt.Errorf("anthropic: message %d has role %q; want system, user, assistant or tool", i, msg.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := inputSchema(t.Schema)
		if err != nil {
			return p, fmt.Errorf("anthropic: tool %q: %w", t.Name, err)
		}
		tp := &anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	if m.params != nil {
		m.params(&p)
	}
	return p, nil
}

// inputSchema converts a JSON Schema object to the SDK's form: properties
// and required have fields of their own, the rest goes in ExtraFields.
func inputSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var s anthropic.ToolInputSchemaParam
	if len(raw) == 0 {
		s.Properties = map[string]any{}
		return s, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return s, fmt.Errorf("its input schema is not a JSON object: %v", err)
	}
	for k, v := range obj {
		switch k {
		case "type":
		case "properties":
			s.Properties = v
		case "required":
			if err := json.Unmarshal(v, &s.Required); err != nil {
				return s, fmt.Errorf("its input schema's \"required\" is not a list of names: %v", err)
			}
		default:
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			s.ExtraFields[k] = v
		}
	}
	if s.Properties == nil {
		s.Properties = map[string]any{}
	}
	return s, nil
}

// generateStream streams the answer, passing text and thinking deltas to
// onDelta, and returns the message the SDK's accumulator assembled (what
// arrived, if the stream failed part way).
func (m *Model) generateStream(ctx context.Context, p anthropic.MessageNewParams, onDelta func(kind, chunk string), opts []option.RequestOption) (*anthropic.Message, error) {
	s := m.client.Messages.NewStreaming(ctx, p, opts...)
	defer s.Close()
	var msg anthropic.Message
	for s.Next() {
		ev := s.Current()
		if err := msg.Accumulate(ev); err != nil {
			return &msg, fmt.Errorf("the stream is malformed: %w", err)
		}
		if onDelta != nil && ev.Type == "content_block_delta" {
			switch ev.Delta.Type {
			case "text_delta":
				onDelta("text", ev.Delta.Text)
			case "thinking_delta":
				onDelta("thinking", ev.Delta.Thinking)
			}
		}
	}
	return &msg, s.Err()
}

// response converts the API's message, remembering its thinking blocks
// for the tool calls they led to.
func (m *Model) response(msg *anthropic.Message) agent.Response {
	var (
		resp           agent.Response
		text, think    strings.Builder
		thinkingBlocks []anthropic.ContentBlockParamUnion
		firstCall      string
	)
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			think.WriteString(b.Thinking)
			thinkingBlocks = append(thinkingBlocks, anthropic.NewThinkingBlock(b.Signature, b.Thinking))
		case "redacted_thinking":
			thinkingBlocks = append(thinkingBlocks, anthropic.NewRedactedThinkingBlock(b.Data))
		case "tool_use":
			in := json.RawMessage(b.Input)
			if len(in) == 0 {
				in = json.RawMessage("{}")
			}
			if firstCall == "" {
				firstCall = b.ID
			}
			resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: b.ID, Name: b.Name, Input: in})
		}
	}
	resp.Content, resp.Thinking = text.String(), think.String()
	resp.FinishReason = string(msg.StopReason)
	if firstCall != "" && len(thinkingBlocks) > 0 {
		m.mu.Lock()
		if len(m.blocks) >= maxRemembered {
			clear(m.blocks)
		}
		m.blocks[firstCall] = thinkingBlocks
		m.mu.Unlock()
	}
	resp.Usage = m.usage(string(msg.Model), msg.Usage)
	return resp
}

// usage converts the API's usage and prices it. The API counts cache
// reads and cache writes apart from input_tokens; trace.Usage counts
// cached tokens as part of the input, so they are added in. trace.Usage
// has no field for cache writes: they are priced at the cache write rate
// and counted in InputTokens. A call to a model the price table does not
// know has CostUnknown set: its cost is unknown, not $0 (see package price).
func (m *Model) usage(model string, u anthropic.Usage) trace.Usage {
	tu := trace.Usage{
		Provider:        "anthropic",
		InputTokens:     u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		OutputTokens:    u.OutputTokens,
		CachedTokens:    u.CacheReadInputTokens,
		ReasoningTokens: u.OutputTokensDetails.ThinkingTokens,
	}
	if tu == (trace.Usage{Provider: "anthropic"}) {
		return tu
	}
	tok := price.Tokens{Input: tu.InputTokens, Output: tu.OutputTokens, CachedRead: tu.CachedTokens,
		CacheWrite: u.CacheCreationInputTokens, Reasoning: tu.ReasoningTokens}
	tu.CostUnknown = tu.InputTokens+tu.OutputTokens > 0 // until a price is found
	for _, name := range []string{model, m.name} {
		if name == "" {
			continue
		}
		if c, ok := m.prices.Cost(name, tok); ok {
			tu.CostUSD, tu.CostUnknown = c, false
			break
		}
	}
	return tu
}

// A RefusalError is returned when Claude declined to answer (stop reason
// "refusal").
type RefusalError struct {
	Model   string
	Content string // what the model said before it stopped, if anything
}

func (e *RefusalError) Error() string {
	s := fmt.Sprintf("anthropic: model %s refused to answer (stop reason refusal)", e.Model)
	if e.Content != "" {
		s += ": " + e.Content
	}
	return s
}

// wrap turns an SDK or transport error into one that says what happened
// and what to do. The original error stays reachable with errors.As.
func (m *Model) wrap(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		var body struct {
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(ae.RawJSON()), &body)
		typ, msg := body.Error.Type, body.Error.Message
		status, inStream := ae.StatusCode, false
		if status >= 200 && status < 300 {
			// An error event of a stream: the HTTP answer was a 200.
			// Report the status the same error has as an HTTP answer
			// (API reference, "Errors"), so it reads alike.
			status, inStream = statusOf(typ), true
		}
		what := ""
		switch {
		case typ == "rate_limit_error" || status == 429:
			what = "rate limited; wait and retry, or raise the limit"
		case typ == "overloaded_error" || status == 529:
			what = "the API is overloaded; retry later"
		case strings.Contains(msg, "prompt is too long") || typ == "request_too_large":
			what = "the conversation is longer than the model's context window; shorten it"
		case typ == "authentication_error" || typ == "permission_error":
			what = "the API key was refused; check ANTHROPIC_API_KEY or WithAPIKey"
		case typ == "not_found_error":
			what = "the model or endpoint was not found; check the model name and base URL"
		case status >= 500:
			what = "the API failed; retry later"
		}
		s := fmt.Sprintf("anthropic: model %s:", m.name)
		if status != 0 {
			s += fmt.Sprintf(" HTTP %d", status)
		}
		if typ != "" {
			s += " " + typ
		}
		if msg != "" {
			s += ": " + msg
		} else if ae.RawJSON() != "" {
			s += ": " + ae.RawJSON()
		}
		if ae.RequestID != "" {
			s += " (request " + ae.RequestID + ")"
		}
		if what != "" {
			s += " (" + what + ")"
		}
		if inStream {
			s += " (sent inside the stream)"
		}
		return callerr.API(s, err)
	}
	if callerr.Unreachable(err) {
		return fmt.Errorf("anthropic: model %s: could not reach the API (check the base URL and network): %w", m.name, err)
	}
	return fmt.Errorf("anthropic: model %s: %w", m.name, err)
}

// countAttempts is a per-call middleware counting the HTTP attempts the
// SDK makes, its own retries included.
func countAttempts(n *atomic.Int32) option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		n.Add(1)
		return next(r)
	})
}

// statusOf is the HTTP status the Anthropic API answers with for an error
// of this type (API reference, "Errors"); 0 if it is not known.
func statusOf(typ string) int {
	switch typ {
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "billing_error":
		return 402
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error":
		return 429
	case "api_error":
		return 500
	case "timeout_error":
		return 504
	case "overloaded_error":
		return 529
	}
	return 0
}
