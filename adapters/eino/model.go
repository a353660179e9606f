package einotrace

import (
	"io"
	"strings"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components/embedding"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/trace"
)

// modelName is the model.call's name: the model the component's config
// names, else the component's type ("OpenAI"), else its node's name.
func modelName(cfg *model.Config, info *callbacks.RunInfo) string {
	if cfg != nil && cfg.Model != "" {
		return cfg.Model
	}
	if info.Type != "" {
		return info.Type
	}
	return leafName(info)
}

// startModel begins a chat model call: the span's name and request are
// known now, the rest at the end.
func (c *call) startModel(input any) {
	in := model.ConvCallbackInput(input)
	var cfg *model.Config
	var req trace.Value
	if in != nil {
		cfg = in.Config
		req = requestValue(in.Messages, len(in.Tools))
		c.discover(in.Tools)
	}
	c.name = modelName(cfg, c.info)
	c.provider = strings.ToLower(c.info.Type)
	c.span = c.ec.StartSpan(trace.SpanModel, c.name, req)
}

// discover records tool.discovered for each tool offered to a model, once
// per run. Without a run of the Handler's own (a model recording into a
// foreign run) it records nothing: that run's runtime records its tools.
func (c *call) discover(tools []*schema.ToolInfo) {
	if c.run == nil {
		return
	}
	for _, t := range tools {
		if t == nil || t.Name == "" || c.run.discovered(t.Name) {
			continue
		}
		var sch trace.Value
		if t.ParamsOneOf != nil {
			if js, err := t.ParamsOneOf.ToJSONSchema(); err == nil && js != nil {
				sch = encode(js)
			}
		}
		c.ec.Record(trace.Record{Type: trace.TypeToolDiscovered, Name: t.Name, Input: sch, Output: trace.Text(t.Desc)})
	}
}

// endModel records a chat model call that returned.
func (c *call) endModel(output any, err error) {
	var msg *schema.Message
	var u tokens
	if out := model.ConvCallbackOutput(output); out != nil {
		msg = out.Message
		u.addModel(out.TokenUsage)
	}
	c.finishModel(msg, u, err)
}

// streamModel reads a chat model's output stream: each chunk of text or
// reasoning becomes a model.delta record as it comes, and the call is
// recorded at the end with the chunks put together. It returns the
// stream's error.
func (c *call) streamModel(sr *schema.StreamReader[callbacks.CallbackOutput]) error {
	defer sr.Close()
	var chunks []*schema.Message
	var u tokens
	var err error
	for {
		v, e := sr.Recv()
		if e == io.EOF {
			break
		}
		if e != nil {
			err = e
			break
		}
		out := model.ConvCallbackOutput(v)
		if out == nil {
			continue
		}
		u.addModel(out.TokenUsage)
		m := out.Message
		if m == nil {
			continue
		}
		if m.ReasoningContent != "" {
			c.span.Delta("thinking", trace.Text(m.ReasoningContent))
		}
		if m.Content != "" {
			c.span.Delta("text", trace.Text(m.Content))
		}
		if m.ResponseMeta != nil {
			u.addSchema(m.ResponseMeta.Usage)
		}
		chunks = append(chunks, m)
	}
	c.finishModel(concatMessages(chunks), u, err)
	return err
}

// finishModel records the model.call.
func (c *call) finishModel(msg *schema.Message, u tokens, err error) {
	var output, thinking trace.Value
	var finish string
	if msg != nil {
		output = responseValue(msg)
		if msg.ReasoningContent != "" {
			thinking = trace.Text(msg.ReasoningContent)
		}
		if msg.ResponseMeta != nil {
			finish = msg.ResponseMeta.FinishReason
			u.addSchema(msg.ResponseMeta.Usage)
		}
	}
	c.span.EndModel(output, thinking, c.h.usage(c.name, c.provider, u), finish, err)
}

// startEmbedding begins an embedding call, recorded as a model.call.
func (c *call) startEmbedding(input any) {
	var req trace.Value
	c.name = modelName(nil, c.info)
	if in := embedding.ConvCallbackInput(input); in != nil {
		if in.Config != nil && in.Config.Model != "" {
			c.name = in.Config.Model
		}
		req = encode(map[string]any{"texts": in.Texts})
	}
	c.provider = strings.ToLower(c.info.Type)
	c.span = c.ec.StartSpan(trace.SpanModel, c.name, req)
}

// endEmbedding records an embedding call: how many vectors of which size
// came out (not the vectors), and the tokens.
func (c *call) endEmbedding(output any, err error) {
	var u tokens
	var out trace.Value
	if o := embedding.ConvCallbackOutput(output); o != nil && err == nil {
		dims := 0
		if len(o.Embeddings) > 0 {
			dims = len(o.Embeddings[0])
		}
		out = encode(map[string]int{"vectors": len(o.Embeddings), "dimensions": dims})
		if o.TokenUsage != nil {
			u.add(int64(o.TokenUsage.PromptTokens), int64(o.TokenUsage.CompletionTokens), 0, 0)
		}
	}
	c.span.EndModel(out, nil, c.h.usage(c.name, c.provider, u), "", err)
}

// tokens are a call's token counts; chunks of a stream may each report
// them, cumulatively: the largest of each count is kept, as Eino's
// schema.ConcatMessages does.
type tokens struct{ in, out, cached, reasoning int64 }

func (t *tokens) add(in, out, cached, reasoning int64) {
	t.in, t.out = max(t.in, in), max(t.out, out)
	t.cached, t.reasoning = max(t.cached, cached), max(t.reasoning, reasoning)
}

func (t *tokens) addModel(u *model.TokenUsage) {
	if u != nil {
		t.add(int64(u.PromptTokens), int64(u.CompletionTokens), int64(u.PromptTokenDetails.CachedTokens), int64(u.CompletionTokensDetails.ReasoningTokens))
	}
}

func (t *tokens) addSchema(u *schema.TokenUsage) {
	if u != nil {
		t.add(int64(u.PromptTokens), int64(u.CompletionTokens), int64(u.PromptTokenDetails.CachedTokens), int64(u.CompletionTokensDetails.ReasoningTokens))
	}
}

// usage turns a call's tokens into a trace.Usage, priced as Loupe's model
// providers price theirs: a model the price table does not know, and that
// used tokens, has CostUnknown set.
func (h *Handler) usage(model, provider string, t tokens) trace.Usage {
	u := trace.Usage{Provider: provider, InputTokens: t.in, OutputTokens: t.out, CachedTokens: t.cached, ReasoningTokens: t.reasoning}
	if u.InputTokens+u.OutputTokens <= 0 {
		return u
	}
	u.CostUnknown = true
	if c, ok := h.prices.Cost(model, price.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CachedRead: u.CachedTokens, Reasoning: u.ReasoningTokens}); ok {
		u.CostUSD, u.CostUnknown = c, false
	}
	return u
}

// concatMessages puts a model's streamed chunks together with Eino's own
// schema.ConcatMessages; chunks it refuses (different roles, say) are
// joined by hand, text to text, so that the record keeps what came.
func concatMessages(chunks []*schema.Message) *schema.Message {
	switch len(chunks) {
	case 0:
		return nil
	case 1:
		return chunks[0]
	}
	if m, err := schema.ConcatMessages(chunks); err == nil && m != nil {
		return m
	}
	var text, reasoning strings.Builder
	m := &schema.Message{Role: chunks[0].Role}
	for _, c := range chunks {
		text.WriteString(c.Content)
		reasoning.WriteString(c.ReasoningContent)
		m.ToolCalls = append(m.ToolCalls, c.ToolCalls...)
		if c.ResponseMeta != nil {
			m.ResponseMeta = c.ResponseMeta
		}
	}
	m.Content, m.ReasoningContent = text.String(), reasoning.String()
	return m
}
