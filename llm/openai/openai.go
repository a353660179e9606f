// Package openai is an agent.Model for the OpenAI Chat Completions API and
// every server that speaks it (Ollama, vLLM, llama.cpp's server, LM
// Studio, OpenRouter), built on the official SDK
// github.com/openai/openai-go/v3.
//
// It sends the conversation and tool definitions, streams the answer by
// default (each chunk goes to Request.OnDelta, so a traced run records it
// as a model.delta record and the first one's time is the call's time to
// first token), collects parallel tool calls whose arguments arrive split
// across chunks, returns reasoning text when the server sends it
// ("reasoning_content" or "reasoning", as DeepSeek, vLLM and Ollama do),
// and reports token usage with cached and reasoning tokens and a cost
// from package price.
//
// WithResponsesAPI switches a Model to OpenAI's Responses API
// (POST /responses) with the same behaviour; reasoning summaries, which
// OpenAI returns only there, become the call's thinking.
//
//	m, err := openai.New("gpt-4o-mini")                      // OPENAI_API_KEY from the environment
//	m, err := openai.New("llama3.2", openai.WithBaseURL("http://localhost:11434/v1"), openai.WithAPIKey("ollama"))
//	m, err := openai.New("gpt-4o", openai.WithClient(myClient)) // a client configured elsewhere
//	m, err := openai.New("gpt-5-mini", openai.WithResponsesAPI())
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/internal/callerr"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/trace"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// An Option configures a Model.
type Option func(*Model)

// WithClient makes the Model send its requests through c, a client the
// caller configured (middleware, proxy, Azure, retries); WithBaseURL,
// WithAPIKey and WithRequestOptions then add per-request options on top.
func WithClient(c oai.Client) Option { return func(m *Model) { m.client, m.own = c, true } }

// WithBaseURL points the Model at an OpenAI-compatible server, e.g.
// "http://localhost:11434/v1" for Ollama.
func WithBaseURL(u string) Option {
	return func(m *Model) { m.opts = append(m.opts, option.WithBaseURL(u)) }
}

// WithAPIKey sets the API key (default $OPENAI_API_KEY). Local servers
// that need none accept any non-empty key.
func WithAPIKey(key string) Option {
	return func(m *Model) { m.opts = append(m.opts, option.WithAPIKey(key)) }
}

// WithRequestOptions adds SDK request options to every call, e.g.
// option.WithMaxRetries or option.WithHeader.
func WithRequestOptions(opts ...option.RequestOption) Option {
	return func(m *Model) { m.opts = append(m.opts, opts...) }
}

// WithStream sets whether the Model streams its answers (default true).
func WithStream(on bool) Option { return func(m *Model) { m.stream = on } }

// WithParams lets the caller set request parameters Loupe does not
// (temperature, max_completion_tokens, reasoning_effort, …). f is called
// on every request after Loupe fills in the model, messages and tools.
func WithParams(f func(*oai.ChatCompletionNewParams)) Option {
	return func(m *Model) { m.params = f }
}

// WithPrices prices calls with t instead of price.Default().
func WithPrices(t *price.Table) Option { return func(m *Model) { m.prices = t } }

// WithProvider sets the provider name recorded in each call's usage
// (default "openai"); name the server, e.g. "ollama", when it is not
// OpenAI.
func WithProvider(name string) Option { return func(m *Model) { m.provider = name } }

// A Model is an agent.Model calling one model of a Chat Completions
// server. It holds no per-run state and is safe for concurrent use.
type Model struct {
	name     string
	client   oai.Client
	own      bool // client given by WithClient
	opts     []option.RequestOption
	stream   bool
	params   func(*oai.ChatCompletionNewParams)
	prices   *price.Table
	provider string

	responses bool // WithResponsesAPI
	rparams   func(*responses.ResponseNewParams)
}

// New returns a Model calling model. Without WithClient it builds a client
// from the environment (OPENAI_API_KEY, OPENAI_BASE_URL) and the options.
// It fails if model is empty or the price file $LOUPE_PRICES names cannot
// be read.
func New(model string, opts ...Option) (*Model, error) {
	if strings.TrimSpace(model) == "" {
		return nil, errors.New("openai: the model name is empty; pass one such as \"gpt-4o-mini\"")
	}
	m := &Model{name: model, stream: true, provider: "openai"}
	for _, o := range opts {
		o(m)
	}
	if !m.own {
		m.client = oai.NewClient(m.opts...)
		m.opts = nil
	}
	if m.prices == nil {
		t, err := price.Default()
		if err != nil {
			return nil, fmt.Errorf("openai: %w", err)
		}
		m.prices = t
	}
	return m, nil
}

// Name returns the model name given to New.
func (m *Model) Name() string { return m.name }

// Generate sends req and returns the model's answer. A call the server
// refuses or cannot answer (rate limit, context too long, refusal, content
// filter, network failure) returns an error saying which, with what usage
// the server reported.
func (m *Model) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	var attempts atomic.Int32
	opts := append(m.opts[:len(m.opts):len(m.opts)], countAttempts(&attempts))
	var resp agent.Response
	if m.responses {
		params, err := m.responsesRequest(req)
		if err != nil {
			return agent.Response{}, err
		}
		if m.stream {
			resp, err = m.responsesStream(ctx, params, req.OnDelta, opts)
		} else {
			resp, err = m.responsesOnce(ctx, params, opts)
		}
		return m.finish(ctx, resp, err, &attempts)
	}
	params, err := m.request(req)
	if err != nil {
		return agent.Response{}, err
	}
	if m.stream {
		resp, err = m.generateStream(ctx, params, req.OnDelta, opts)
	} else {
		resp, err = m.generateOnce(ctx, params, opts)
	}
	return m.finish(ctx, resp, err, &attempts)
}

// finish maps a call's error and checks its answer, the same for both APIs.
func (m *Model) finish(ctx context.Context, resp agent.Response, err error, attempts *atomic.Int32) (agent.Response, error) {
	if err != nil {
		return resp, callerr.Retried(m.wrap(ctx, err), int(attempts.Load()))
	}
	return resp, m.check(resp)
}

// request builds the Chat Completions parameters for req.
func (m *Model) request(req agent.Request) (oai.ChatCompletionNewParams, error) {
	p := oai.ChatCompletionNewParams{Model: shared.ChatModel(m.name)}
	for i, msg := range req.Messages {
		switch msg.Role {
		case agent.RoleSystem:
			p.Messages = append(p.Messages, oai.SystemMessage(msg.Content))
		case agent.RoleUser:
			p.Messages = append(p.Messages, oai.UserMessage(msg.Content))
		case agent.RoleTool:
			p.Messages = append(p.Messages, oai.ToolMessage(msg.Content, msg.ToolCallID))
		case agent.RoleAssistant:
			a := oai.ChatCompletionAssistantMessageParam{}
			if msg.Content != "" {
				a.Content.OfString = oai.String(msg.Content)
			}
			for _, c := range msg.ToolCalls {
				args := callArgs(c)
				a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
					}})
			}
			p.Messages = append(p.Messages, oai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			return p, fmt.Errorf("openai: message %d has role %q; want system, user, assistant or tool", i, msg.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := toolSchema(t)
		if err != nil {
			return p, err
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fd.Description = oai.String(t.Description)
		}
		p.Tools = append(p.Tools, oai.ChatCompletionFunctionTool(fd))
	}
	if m.params != nil {
		m.params(&p)
	}
	return p, nil
}

// callArgs returns a tool call's arguments as sent back to the server:
// "{}" for none, which both APIs require to be a JSON string.
func callArgs(c agent.ToolCall) string {
	if len(c.Input) == 0 {
		return "{}"
	}
	return string(c.Input)
}

// toolSchema returns t's input JSON Schema as both APIs take it, an
// object with no properties when t has none.
func toolSchema(t agent.ToolDef) (map[string]any, error) {
	var schema map[string]any
	if len(t.Schema) > 0 {
		if err := json.Unmarshal(t.Schema, &schema); err != nil {
			return nil, fmt.Errorf("openai: tool %q: its input schema is not a JSON object: %v", t.Name, err)
		}
	}
	if schema == nil {
		schema = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return schema, nil
}

func (m *Model) generateOnce(ctx context.Context, p oai.ChatCompletionNewParams, opts []option.RequestOption) (agent.Response, error) {
	c, err := m.client.Chat.Completions.New(ctx, p, opts...)
	if err != nil {
		return agent.Response{}, err
	}
	resp := agent.Response{Usage: m.usage(c.Model, c.Usage)}
	if len(c.Choices) == 0 {
		return resp, errors.New("the response has no choices")
	}
	ch := c.Choices[0]
	resp.Content = ch.Message.Content
	resp.Thinking = reasoning(ch.Message.JSON.ExtraFields)
	resp.FinishReason = ch.FinishReason
	if ch.Message.Refusal != "" {
		return resp, &RefusalError{Model: m.name, Refusal: ch.Message.Refusal}
	}
	for _, tc := range ch.Message.ToolCalls {
		resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(tc.Function.Arguments)})
	}
	return resp, nil
}

// partial is a tool call being assembled from stream chunks.
type partial struct {
	id, name string
	args     strings.Builder
}

func (m *Model) generateStream(ctx context.Context, p oai.ChatCompletionNewParams, onDelta func(kind, chunk string), opts []option.RequestOption) (agent.Response, error) {
	p.StreamOptions.IncludeUsage = oai.Bool(true) // usage arrives in a last chunk without choices
	s := m.client.Chat.Completions.NewStreaming(ctx, p, opts...)
	defer s.Close()
	var (
		resp              agent.Response
		content, thinking strings.Builder
		refusal           strings.Builder
		calls             = map[int64]*partial{}
		model             string
	)
	for s.Next() {
		c := s.Current()
		if c.Model != "" {
			model = c.Model
		}
		if c.JSON.Usage.Valid() {
			resp.Usage = m.usage(model, c.Usage)
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue // one answer is asked for; n>1 is not supported
			}
			d := ch.Delta
			if r := reasoning(d.JSON.ExtraFields); r != "" {
				thinking.WriteString(r)
				if onDelta != nil {
					onDelta("thinking", r)
				}
			}
			if d.Content != "" {
				content.WriteString(d.Content)
				if onDelta != nil {
					onDelta("text", d.Content)
				}
			}
			refusal.WriteString(d.Refusal)
			for _, tc := range d.ToolCalls {
				pc := calls[tc.Index]
				if pc == nil {
					pc = &partial{}
					calls[tc.Index] = pc
				}
				if tc.ID != "" {
					pc.id = tc.ID
				}
				if tc.Function.Name != "" {
					pc.name += tc.Function.Name
				}
				pc.args.WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != "" {
				resp.FinishReason = ch.FinishReason
			}
		}
	}
	resp.Content, resp.Thinking = content.String(), thinking.String()
	if resp.Usage == (trace.Usage{}) && model != "" {
		resp.Usage = m.usage(model, oai.CompletionUsage{}) // server sent no usage: provider only, cost unknown
	}
	for _, i := range slices.Sorted(maps.Keys(calls)) {
		pc := calls[i]
		if pc.id == "" {
			// Some compatible servers send no id; the tool results
			// must still name the call they answer.
			pc.id = fmt.Sprintf("call_%d", i)
		}
		resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: pc.id, Name: pc.name, Input: json.RawMessage(pc.args.String())})
	}
	if err := s.Err(); err != nil {
		return resp, err
	}
	if refusal.Len() > 0 {
		return resp, &RefusalError{Model: m.name, Refusal: refusal.String()}
	}
	return resp, nil
}

// check rejects answers the agent cannot use: a content filter stop and
// tool calls whose arguments are not JSON (a cut-off answer).
func (m *Model) check(resp agent.Response) error {
	if resp.FinishReason == "content_filter" {
		return fmt.Errorf("openai: model %s: the answer was stopped by the content filter (finish reason content_filter)", m.name)
	}
	for i := range resp.ToolCalls {
		c := &resp.ToolCalls[i]
		if len(c.Input) == 0 {
			c.Input = json.RawMessage("{}")
			continue
		}
		if !json.Valid(c.Input) {
			hint := ""
			if resp.FinishReason == "length" {
				hint = "; the answer hit the token limit (finish reason length): raise max_completion_tokens (max_output_tokens in the Responses API)"
			}
			return fmt.Errorf("openai: model %s: tool call %s (%s): the arguments are not valid JSON: %.200q%s", m.name, c.ID, c.Name, c.Input, hint)
		}
		if c.Name == "" {
			return fmt.Errorf("openai: model %s: tool call %d (id %q) has no function name", m.name, i, c.ID)
		}
	}
	return nil
}

// usage converts the server's usage and prices it. model is the name the
// server answered with (often dated, e.g. gpt-4o-2024-08-06); when the
// table does not know it, the configured name is tried. A model neither
// name prices, and that used tokens, has CostUnknown set: its cost is
// unknown, not $0 (see package price).
func (m *Model) usage(model string, u oai.CompletionUsage) trace.Usage {
	tu := trace.Usage{
		Provider:        m.provider,
		InputTokens:     u.PromptTokens,
		OutputTokens:    u.CompletionTokens,
		CachedTokens:    u.PromptTokensDetails.CachedTokens,
		ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens,
	}
	tok := price.Tokens{Input: tu.InputTokens, Output: tu.OutputTokens, CachedRead: tu.CachedTokens,
		CacheWrite: u.PromptTokensDetails.CacheWriteTokens, Reasoning: tu.ReasoningTokens}
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

// reasoning returns the reasoning text an OpenAI-compatible server put in
// a message or delta: "reasoning_content" (DeepSeek, vLLM, llama.cpp) or
// "reasoning" (Ollama, OpenRouter). OpenAI itself does not return it in
// Chat Completions.
func reasoning(extra map[string]respjson.Field) string {
	for _, k := range [...]string{"reasoning_content", "reasoning"} {
		f, ok := extra[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// A RefusalError is returned when the model refused to answer.
type RefusalError struct {
	Model   string
	Refusal string // the model's refusal message
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("openai: model %s refused: %s", e.Model, e.Refusal)
}

// wrap turns an SDK or transport error into one that says what happened
// and what to do. The original error stays reachable with errors.As.
func (m *Model) wrap(ctx context.Context, err error) error {
	var re *RefusalError
	if errors.As(err, &re) {
		return err
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	if se := streamed(err); se != nil {
		err = se
	}
	var ae *oai.Error
	if errors.As(err, &ae) {
		msg := ae.Message
		if msg == "" {
			msg = strings.TrimSpace(ae.RawJSON())
		}
		what := ""
		switch {
		case ae.StatusCode == 429:
			what = "rate limited or out of quota; wait and retry, or raise the limit"
		case ae.Code == "context_length_exceeded" || strings.Contains(msg, "context length") || strings.Contains(msg, "maximum context"):
			what = "the conversation is longer than the model's context window; shorten it"
		case ae.StatusCode == 401 || ae.StatusCode == 403:
			what = "the API key was refused; check OPENAI_API_KEY or WithAPIKey"
		case ae.StatusCode == 404:
			what = "the model or endpoint was not found; check the model name and base URL"
		case ae.StatusCode >= 500:
			what = "the server failed; retry later"
		}
		s := fmt.Sprintf("openai: model %s:", m.name)
		if ae.StatusCode != 0 {
			s += fmt.Sprintf(" HTTP %d", ae.StatusCode)
		}
		if ae.Code != "" {
			s += " " + ae.Code
		} else if ae.Type != "" {
			s += " " + ae.Type
		}
		if msg != "" {
			s += ": " + msg
		}
		if what != "" {
			s += " (" + what + ")"
		}
		var se *streamError
		if errors.As(err, &se) {
			// The status is the one the same error has as an HTTP
			// answer; this one came with a 200.
			s += " (" + se.where + ")"
		}
		return callerr.API(s, err)
	}
	if callerr.Unreachable(err) {
		return fmt.Errorf("openai: model %s: could not reach the server (check the base URL and network): %w", m.name, err)
	}
	return fmt.Errorf("openai: model %s: %w", m.name, err)
}

// countAttempts is a per-call middleware counting the HTTP attempts the
// SDK makes, its own retries included.
func countAttempts(n *atomic.Int32) option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		n.Add(1)
		return next(r)
	})
}

// streamError is an error that a server sent as an event of a stream
// (Chat Completions' {"error": …} chunk, the Responses API's "error"
// event) rather than as an HTTP error status.
type streamError struct {
	err   *oai.Error // the same error as the API returns it outside a stream
	from  error      // what the SDK or the stream reported
	where string     // where it was sent, for the message
}

func (e *streamError) Error() string { return e.from.Error() }

// Unwrap gives errors.As both the API error and the SDK's own.
func (e *streamError) Unwrap() []error { return []error{e.err, e.from} }

// streamed turns an error event of a stream into a *streamError holding
// an *oai.Error with the HTTP status the same error has outside a
// stream, so that it is reported alike: status, code, the provider's
// message and the same hint. It returns nil when err is no stream error.
func streamed(err error) error {
	var se *ssestream.StreamError
	if !errors.As(err, &se) {
		return nil
	}
	var body struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
			Param   string          `json:"param"`
			Status  int             `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(se.Event.Data, &body) != nil || body.Error.Message == "" && body.Error.Type == "" {
		return nil
	}
	b := body.Error
	ae := &oai.Error{Message: b.Message, Type: b.Type, Param: b.Param, StatusCode: b.Status}
	// Servers send the code as a string (OpenAI) or as the HTTP status
	// (vLLM, LiteLLM and other compatible servers).
	var n int
	if json.Unmarshal(b.Code, &n) == nil && n >= 100 && n < 600 {
		if ae.StatusCode == 0 {
			ae.StatusCode = n
		}
	} else {
		_ = json.Unmarshal(b.Code, &ae.Code)
	}
	if ae.StatusCode == 0 {
		ae.StatusCode = statusOf(ae.Code, ae.Type)
	}
	return &streamError{err: ae, from: err, where: "sent inside the stream"}
}

// responseError is streamed for the Responses API's errors that arrive in
// a body rather than as an HTTP status: the stream's "error" event and a
// response whose status is "failed"; where says which.
func responseError(code, message, where string) error {
	ae := &oai.Error{Code: code, Message: message, StatusCode: statusOf(code, "")}
	return &streamError{err: ae, from: fmt.Errorf("%s: %s: %s", where, code, message), where: where}
}

// statusOf is the HTTP status OpenAI answers with for an error of this
// code or type (API reference, "Error codes"); 0 if it is not known.
func statusOf(code, typ string) int {
	switch code {
	case "rate_limit_exceeded", "insufficient_quota":
		return 429
	case "invalid_api_key", "invalid_authentication":
		return 401
	case "model_not_found":
		return 404
	case "context_length_exceeded", "invalid_prompt", "invalid_request_error":
		return 400
	case "server_error", "internal_error":
		return 500
	}
	switch typ {
	case "insufficient_quota", "tokens", "requests", "rate_limit_error":
		return 429
	case "authentication_error":
		return 401
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "invalid_request_error":
		return 400
	case "server_error", "api_error":
		return 500
	case "service_unavailable", "overloaded_error":
		return 503
	}
	return 0
}
