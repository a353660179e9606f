package lctrace

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/loupe-dev/loupe/trace"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// message is one message of a model call's input, in the shape of Loupe's
// agent.Message, so that model.call records read the same whichever
// runtime made them.
type message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []toolUse  `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	Parts      []partNote `json:"parts,omitempty"` // what is not text: images, binary data
}

// toolUse is a model's tool call, as agent.ToolCall encodes it.
type toolUse struct {
	ID    string      `json:"id"`
	Name  string      `json:"name"`
	Input trace.Value `json:"input"`
}

// partNote describes a message part that is not text, without its data.
type partNote struct {
	Type     string `json:"type"`
	URL      string `json:"url,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
	Bytes    int    `json:"bytes,omitempty"`
}

// roles maps langchaingo's message types to Loupe's roles.
var roles = map[llms.ChatMessageType]string{
	llms.ChatMessageTypeSystem:   "system",
	llms.ChatMessageTypeHuman:    "user",
	llms.ChatMessageTypeGeneric:  "user",
	llms.ChatMessageTypeAI:       "assistant",
	llms.ChatMessageTypeTool:     "tool",
	llms.ChatMessageTypeFunction: "tool",
}

// messagesOf converts the messages of a model call.
func messagesOf(ms []llms.MessageContent) []message {
	out := make([]message, 0, len(ms))
	for _, mc := range ms {
		m := message{Role: roles[mc.Role]}
		if m.Role == "" {
			m.Role = string(mc.Role)
		}
		var text []string
		for _, p := range mc.Parts {
			switch p := p.(type) {
			case llms.TextContent:
				text = append(text, p.Text)
			case llms.ToolCall:
				m.ToolCalls = append(m.ToolCalls, toolUseOf(p))
			case llms.ToolCallResponse:
				m.ToolCallID, m.Name = p.ToolCallID, p.Name
				text = append(text, p.Content)
			case llms.ImageURLContent:
				m.Parts = append(m.Parts, partNote{Type: "image_url", URL: p.URL})
			case llms.BinaryContent:
				m.Parts = append(m.Parts, partNote{Type: "binary", MIMEType: p.MIMEType, Bytes: len(p.Data)})
			case nil:
			default:
				m.Parts = append(m.Parts, partNote{Type: fmt.Sprintf("%T", p)})
			}
		}
		m.Content = strings.Join(text, "")
		out = append(out, m)
	}
	return out
}

func toolUseOf(c llms.ToolCall) toolUse {
	u := toolUse{ID: c.ID}
	if c.FunctionCall != nil {
		u.Name, u.Input = c.FunctionCall.Name, argsValue(c.FunctionCall.Arguments)
	}
	return u
}

// toolResponses returns the tool responses among msgs by tool call id,
// each as the output of the call it answers.
func toolResponses(msgs []message) map[string]trace.Value {
	var out map[string]trace.Value
	for _, m := range msgs {
		if m.Role == "tool" && m.ToolCallID != "" {
			if out == nil {
				out = map[string]trace.Value{}
			}
			out[m.ToolCallID] = trace.Text(m.Content)
		}
	}
	return out
}

// requestValue encodes a model call's input as Loupe's runtime does: the
// number of messages and the messages since the last assistant turn (the
// earlier ones are in earlier records).
func requestValue(msgs []message) trace.Value {
	i := len(msgs)
	for i > 0 && msgs[i-1].Role != "assistant" {
		i--
	}
	return safeJSON(struct {
		Messages int       `json:"messages"`
		New      []message `json:"new"`
	}{len(msgs), msgs[i:]})
}

// response is what a model call's record takes from a ContentResponse.
type response struct {
	output   trace.Value
	thinking trace.Value
	finish   string
	usage    trace.Usage
	model    string
}

// responseOf reads res. The output is the first choice (the one
// langchaingo's agents act on) as Loupe's runtime records a response: its
// text, or {"content","tool_calls"}; when there are several choices, all of
// them under "choices". Reasoning text, usage and the model's name come
// from any choice that has them (Anthropic's responses repeat the usage in
// every content block).
func responseOf(res *llms.ContentResponse) response {
	var r response
	var outs []trace.Value
	var thinking []string
	for _, c := range res.Choices {
		if c == nil {
			continue
		}
		outs = append(outs, choiceValue(c))
		if r.finish == "" {
			r.finish = c.StopReason
		}
		t := c.ReasoningContent
		if t == "" {
			t, _ = c.GenerationInfo["ThinkingContent"].(string)
		}
		if t != "" {
			thinking = append(thinking, t)
		}
		if r.usage == (trace.Usage{}) {
			r.usage = usageOf(c.GenerationInfo)
		}
		if r.model == "" {
			r.model, _ = c.GenerationInfo["model"].(string)
		}
	}
	switch len(outs) {
	case 0:
	case 1:
		r.output = outs[0]
	default:
		r.output = safeJSON(map[string][]trace.Value{"choices": outs})
	}
	if len(thinking) > 0 {
		r.thinking = trace.Text(strings.Join(thinking, "\n"))
	}
	return r
}

func choiceValue(c *llms.ContentChoice) trace.Value {
	calls := make([]toolUse, 0, len(c.ToolCalls))
	for _, tc := range c.ToolCalls {
		calls = append(calls, toolUseOf(tc))
	}
	if len(calls) == 0 && c.FuncCall != nil {
		calls = append(calls, toolUse{Name: c.FuncCall.Name, Input: argsValue(c.FuncCall.Arguments)})
	}
	if len(calls) == 0 {
		if c.Content == "" {
			return nil
		}
		return trace.Text(c.Content)
	}
	return safeJSON(struct {
		Content   string    `json:"content,omitempty"`
		ToolCalls []toolUse `json:"tool_calls"`
	}{c.Content, calls})
}

// Keys of GenerationInfo that hold token counts, by what they count, in
// the spellings of langchaingo's providers (OpenAI and compatible ones,
// Anthropic, Google AI and Vertex, Bedrock, Ollama, …), most specific
// first.
var (
	inputKeys     = []string{"PromptTokens", "InputTokens", "input_tokens", "prompt_tokens", "promptTokenCount", "prompt_eval_count"}
	outputKeys    = []string{"CompletionTokens", "OutputTokens", "output_tokens", "completion_tokens", "candidatesTokenCount", "eval_count"}
	reasoningKeys = []string{"ReasoningTokens", "CompletionReasoningTokens", "ThinkingTokens", "reasoning_tokens"}
	cachedKeys    = []string{"PromptCachedTokens", "CachedTokens", "CacheReadInputTokens", "cached_tokens", "cache_read_input_tokens"}
	// Anthropic counts cache reads and writes apart from its input
	// tokens, under these keys; trace.Usage counts them in. (Google AI
	// also sets CacheReadInputTokens, but its PromptTokens include them.)
	cacheReadKeys  = []string{"CacheReadInputTokens", "cache_read_input_tokens"}
	cacheWriteKeys = []string{"CacheCreationInputTokens", "cache_creation_input_tokens"}
)

// usageOf reads token counts from a choice's GenerationInfo. Counts that
// are missing, negative or not numbers are left out.
func usageOf(info map[string]any) trace.Usage {
	if len(info) == 0 {
		return trace.Usage{}
	}
	in, key := first(info, inputKeys)
	u := trace.Usage{InputTokens: in}
	u.OutputTokens, _ = first(info, outputKeys)
	u.ReasoningTokens, _ = first(info, reasoningKeys)
	u.CachedTokens, _ = first(info, cachedKeys)
	read, _ := first(info, cacheReadKeys)
	write, _ := first(info, cacheWriteKeys)
	// Anthropic's provider reports InputTokens, its raw API input_tokens
	// beside cache_…_input_tokens: both without the cached part.
	if key == "InputTokens" || key == "input_tokens" && (info["cache_read_input_tokens"] != nil || info["cache_creation_input_tokens"] != nil) {
		u.InputTokens = min(u.InputTokens+read+write, maxTokens)
		u.CachedTokens = read
	}
	u.ReasoningTokens = min(u.ReasoningTokens, u.OutputTokens)
	u.CachedTokens = min(u.CachedTokens, u.InputTokens)
	return u
}

// maxTokens bounds a token count read from a response: larger numbers are
// not token counts.
const maxTokens = 1 << 40

// first returns the first of keys in info that holds a token count, and
// that key.
func first(info map[string]any, keys []string) (int64, string) {
	for _, k := range keys {
		if n, ok := count(info[k]); ok {
			return n, k
		}
	}
	return 0, ""
}

// count reads a non-negative token count of any numeric type.
func count(v any) (int64, bool) {
	var n int64
	switch v := v.(type) {
	case int:
		n = int64(v)
	case int32:
		n = int64(v)
	case int64:
		n = v
	case uint:
		if uint64(v) > maxTokens {
			return 0, false
		}
		n = int64(v)
	case uint32:
		n = int64(v)
	case uint64:
		if v > maxTokens {
			return 0, false
		}
		n = int64(v)
	case float64:
		if math.IsNaN(v) || v < 0 || v > maxTokens {
			return 0, false
		}
		n = int64(v)
	case float32:
		if math.IsNaN(float64(v)) || v < 0 || v > maxTokens {
			return 0, false
		}
		n = int64(v)
	case json.Number:
		i, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, false
		}
		n = i
	default:
		return 0, false
	}
	if n < 0 || n > maxTokens {
		return 0, false
	}
	return n, true
}

// argsValue records a tool's input: the JSON value when it is one (a
// functions agent's arguments, a one-shot agent's JSON action input),
// else the text as a JSON string.
func argsValue(s string) trace.Value {
	t := strings.TrimSpace(s)
	if t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		return trace.Value(t)
	}
	return trace.Text(s)
}

// inputValue records a chain's input values: the string when there is one
// string value, else the values as a JSON object.
func inputValue(inputs map[string]any) trace.Value {
	if len(inputs) == 1 {
		for _, v := range inputs {
			if s, ok := v.(string); ok {
				return trace.Text(s)
			}
		}
	}
	if len(inputs) == 0 {
		return nil
	}
	return safeJSON(inputs)
}

// outputValue records a chain's output values: the "output" or "text"
// string, or the only string value, when there is one; else the values as
// a JSON object.
func outputValue(outputs map[string]any) trace.Value {
	for _, k := range []string{"output", "text"} {
		if s, ok := outputs[k].(string); ok && (len(outputs) == 1 || k == "output") {
			return trace.Text(s)
		}
	}
	return inputValue(outputs)
}

// documentsValue records a retriever's documents.
func documentsValue(docs []schema.Document) trace.Value {
	type doc struct {
		PageContent string         `json:"page_content"`
		Metadata    map[string]any `json:"metadata,omitempty"`
		Score       float32        `json:"score,omitempty"`
	}
	out := make([]doc, len(docs))
	for i, d := range docs {
		s := d.Score
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			s = 0 // not encodable as JSON
		}
		out[i] = doc{d.PageContent, d.Metadata, s}
	}
	return safeJSON(out)
}

// safeJSON is trace.JSON, with a panic in a value's MarshalJSON recorded
// as a note instead of escaping into langchaingo.
func safeJSON(v any) (out trace.Value) {
	defer func() {
		if p := recover(); p != nil {
			out = trace.Text(fmt.Sprintf("<unencodable %T: its encoding panicked: %v>", v, p))
		}
	}()
	return trace.JSON(v)
}
