package einotrace_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
)

// The scripted chat model below is the tests' only stand-in: it answers
// from a script, through Eino's own model.ToolCallingChatModel interface,
// so that the agents, graphs, tools and callbacks around it are Eino's.

// A turn is one scripted answer.
type turn struct {
	msg       *schema.Message // the answer, with its ResponseMeta (finish reason, usage)
	err       error           // the call fails with it
	streamErr error           // Stream: the stream fails with it after the first chunk
}

// script plays turns in order; it is safe for concurrent use.
type script struct {
	model string // the model's name in its Config (ownCallbacksModel)
	mu    sync.Mutex
	turns []turn
	n     int
}

func (s *script) take() turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n >= len(s.turns) {
		return turn{err: fmt.Errorf("scripted model: the script has %d turns and was asked for another", len(s.turns))}
	}
	t := s.turns[s.n]
	s.n++
	return t
}

// scriptedModel leaves callbacks to Eino: a graph reports its calls, with
// []*schema.Message in and *schema.Message out.
type scriptedModel struct {
	s     *script
	tools []*schema.ToolInfo
}

var _ model.ToolCallingChatModel = (*scriptedModel)(nil)

func (m *scriptedModel) GetType() string { return "Scripted" }

func (m *scriptedModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return &scriptedModel{s: m.s, tools: tools}, nil
}

func (m *scriptedModel) Generate(ctx context.Context, _ []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	t := m.s.take()
	if t.err != nil {
		return nil, t.err
	}
	return clone(t.msg), nil
}

// Stream sends the answer in chunks: the reasoning first, then the tool
// calls in one chunk, or the text a word at a time; the last chunk holds
// the ResponseMeta.
func (m *scriptedModel) Stream(ctx context.Context, _ []*schema.Message, _ ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	t := m.s.take()
	if t.err != nil {
		return nil, t.err
	}
	chunks := split(t.msg)
	sr, sw := schema.Pipe[*schema.Message](1)
	go func() {
		defer sw.Close()
		for i, c := range chunks {
			if sw.Send(c, nil) {
				return
			}
			if i == 0 && t.streamErr != nil {
				sw.Send(nil, t.streamErr)
				return
			}
		}
	}()
	return sr, nil
}

func clone(m *schema.Message) *schema.Message {
	c := *m
	if m.ResponseMeta != nil {
		rm := *m.ResponseMeta
		if rm.Usage != nil {
			u := *rm.Usage
			rm.Usage = &u
		}
		c.ResponseMeta = &rm
	}
	return &c
}

func split(m *schema.Message) []*schema.Message {
	var out []*schema.Message
	if m.ReasoningContent != "" {
		out = append(out, &schema.Message{Role: m.Role, ReasoningContent: m.ReasoningContent})
	}
	if len(m.ToolCalls) > 0 {
		out = append(out, &schema.Message{Role: m.Role, ToolCalls: m.ToolCalls})
	}
	words := strings.SplitAfter(m.Content, " ")
	for _, w := range words {
		if w != "" {
			out = append(out, &schema.Message{Role: m.Role, Content: w})
		}
	}
	if len(out) == 0 {
		out = append(out, &schema.Message{Role: m.Role})
	}
	if m.ResponseMeta != nil {
		last := *out[len(out)-1]
		rm := *m.ResponseMeta
		last.ResponseMeta = &rm
		out[len(out)-1] = &last
	}
	return out
}

// ownCallbacksModel reports its own callbacks, as eino-ext's provider
// models do: a *model.CallbackInput with its Config and the tools, a
// *model.CallbackOutput with the token usage (which it takes out of the
// message, so that the usage reaches the handler only that way).
type ownCallbacksModel struct{ scriptedModel }

var _ components.Checker = (*ownCallbacksModel)(nil)

func (m *ownCallbacksModel) IsCallbacksEnabled() bool { return true }

func (m *ownCallbacksModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return &ownCallbacksModel{scriptedModel{s: m.s, tools: tools}}, nil
}

func (m *ownCallbacksModel) config() *model.Config { return &model.Config{Model: m.s.model} }

// callbackOutput moves a message's usage into the callback output.
func (m *ownCallbacksModel) callbackOutput(msg *schema.Message) *model.CallbackOutput {
	out := &model.CallbackOutput{Message: msg, Config: m.config()}
	if msg != nil && msg.ResponseMeta != nil && msg.ResponseMeta.Usage != nil {
		u := msg.ResponseMeta.Usage
		out.TokenUsage = &model.TokenUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
			PromptTokenDetails:      model.PromptTokenDetails{CachedTokens: u.PromptTokenDetails.CachedTokens},
			CompletionTokensDetails: model.CompletionTokensDetails{ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens}}
		c := clone(msg)
		c.ResponseMeta.Usage = nil
		out.Message = c
	}
	return out
}

func (m *ownCallbacksModel) Generate(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	ctx = callbacks.EnsureRunInfo(ctx, m.GetType(), components.ComponentOfChatModel)
	ctx = callbacks.OnStart(ctx, &model.CallbackInput{Messages: in, Tools: m.tools, Config: m.config()})
	msg, err := m.scriptedModel.Generate(ctx, in, opts...)
	if err != nil {
		callbacks.OnError(ctx, err)
		return nil, err
	}
	callbacks.OnEnd(ctx, m.callbackOutput(msg))
	return msg, nil
}

func (m *ownCallbacksModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	ctx = callbacks.EnsureRunInfo(ctx, m.GetType(), components.ComponentOfChatModel)
	ctx = callbacks.OnStart(ctx, &model.CallbackInput{Messages: in, Tools: m.tools, Config: m.config()})
	sr, err := m.scriptedModel.Stream(ctx, in, opts...)
	if err != nil {
		callbacks.OnError(ctx, err)
		return nil, err
	}
	_, out := callbacks.OnEndWithStreamOutput(ctx, schema.StreamReaderWithConvert(sr, func(msg *schema.Message) (*model.CallbackOutput, error) {
		return m.callbackOutput(msg), nil
	}))
	return schema.StreamReaderWithConvert(out, func(o *model.CallbackOutput) (*schema.Message, error) {
		if o == nil || o.Message == nil {
			return nil, errors.New("scripted model: a chunk without a message")
		}
		return o.Message, nil
	}), nil
}
