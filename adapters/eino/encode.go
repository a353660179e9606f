package einotrace

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/indexer"
	"github.com/cloudwego/eino/components/retriever"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/schema"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/trace"
)

// Values are recorded in the shapes Loupe's agent runtime records them,
// so that views, replay and evaluation read an Eino trace like any other:
// messages as agent.Message, tool calls as agent.ToolCall.

// encode returns v as a trace value: messages and documents in Loupe's
// shapes, strings as JSON strings, anything else with encoding/json. A
// value that cannot be encoded (or whose MarshalJSON panics) is recorded
// as a string saying so.
func encode(v any) (out trace.Value) {
	defer func() {
		if p := recover(); p != nil {
			out = trace.Text(fmt.Sprintf("<unencodable %T: panic: %v>", v, p))
		}
	}()
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return trace.Text(x)
	case *schema.Message:
		if x == nil {
			return nil
		}
		return trace.JSON(messageOf(x))
	case []*schema.Message:
		msgs := make([]agent.Message, 0, len(x))
		for _, m := range x {
			if m != nil {
				msgs = append(msgs, messageOf(m))
			}
		}
		return trace.JSON(msgs)
	case []*schema.Document:
		return trace.JSON(documents(x))
	}
	return trace.JSON(v)
}

// roleOf returns a message's role, "unknown" for none.
func roleOf(m *schema.Message) string {
	if m.Role == "" {
		return "unknown"
	}
	return string(m.Role)
}

// textOf returns a message's text: its Content, else the text parts of
// its multimodal content.
func textOf(m *schema.Message) string {
	if m.Content != "" {
		return m.Content
	}
	var parts []string
	for _, p := range m.UserInputMultiContent {
		if p.Type == schema.ChatMessagePartTypeText && p.Text != "" {
			parts = append(parts, p.Text)
		}
	}
	for _, p := range m.AssistantGenMultiContent {
		if p.Type == schema.ChatMessagePartTypeText && p.Text != "" {
			parts = append(parts, p.Text)
		}
	}
	for _, p := range m.MultiContent {
		if p.Type == schema.ChatMessagePartTypeText && p.Text != "" {
			parts = append(parts, p.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// messageOf returns m as Loupe's runtime records a message.
func messageOf(m *schema.Message) agent.Message {
	am := agent.Message{
		Role:       string(m.Role),
		Content:    textOf(m),
		Thinking:   m.ReasoningContent,
		ToolCalls:  toolCalls(m.ToolCalls),
		ToolCallID: m.ToolCallID,
		Name:       m.ToolName,
	}
	return am
}

func toolCalls(tcs []schema.ToolCall) []agent.ToolCall {
	if len(tcs) == 0 {
		return nil
	}
	out := make([]agent.ToolCall, len(tcs))
	for i, tc := range tcs {
		out[i] = agent.ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: rawJSON(tc.Function.Arguments)}
	}
	return out
}

// rawJSON returns s as JSON: itself when it is JSON, else a JSON string;
// nil for "".
func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(trace.Raw([]byte(s)))
}

// requestValue is what a model.call records of the request, as Loupe's
// runtime does: how many messages and tools, and the messages added since
// the model's last turn (earlier model.call records hold the rest).
func requestValue(msgs []*schema.Message, tools int) trace.Value {
	i := len(msgs)
	for i > 0 && (msgs[i-1] == nil || msgs[i-1].Role != schema.Assistant) {
		i--
	}
	req := struct {
		Messages int             `json:"messages"`
		Tools    int             `json:"tools,omitempty"`
		New      []agent.Message `json:"new"`
	}{Messages: len(msgs), Tools: tools, New: []agent.Message{}}
	for _, m := range msgs[i:] {
		if m != nil {
			req.New = append(req.New, messageOf(m))
		}
	}
	return encode(req)
}

// responseValue is a model.call's output, as Loupe's runtime records it:
// the text alone (nothing for no text), or the text and the tool calls.
func responseValue(m *schema.Message) trace.Value {
	text := textOf(m)
	if len(m.ToolCalls) == 0 {
		if text == "" {
			return nil
		}
		return trace.Text(text)
	}
	return encode(struct {
		Content   string           `json:"content,omitempty"`
		ToolCalls []agent.ToolCall `json:"tool_calls"`
	}{text, toolCalls(m.ToolCalls)})
}

// document is a retrieved or indexed document as recorded.
type document struct {
	ID       string         `json:"id,omitempty"`
	Content  string         `json:"content"`
	Score    float64        `json:"score,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

func documents(docs []*schema.Document) []document {
	out := make([]document, 0, len(docs))
	for _, d := range docs {
		if d == nil {
			continue
		}
		out = append(out, document{ID: d.ID, Content: d.Content, Score: d.Score(), Metadata: d.MetaData})
	}
	return out
}

// toolInput is a tool.start's input: a tool's arguments (JSON as it is),
// a retriever's query and options, an indexer's documents.
func toolInput(c components.Component, input any) trace.Value {
	switch c {
	case components.ComponentOfTool:
		if in := tool.ConvCallbackInput(input); in != nil {
			return trace.Value(rawJSON(in.ArgumentsInJSON))
		}
	case components.ComponentOfRetriever:
		if in := retriever.ConvCallbackInput(input); in != nil {
			return encode(struct {
				Query          string   `json:"query"`
				TopK           int      `json:"top_k,omitempty"`
				Filter         string   `json:"filter,omitempty"`
				ScoreThreshold *float64 `json:"score_threshold,omitempty"`
			}{in.Query, in.TopK, in.Filter, in.ScoreThreshold})
		}
	case components.ComponentOfIndexer:
		if in := indexer.ConvCallbackInput(input); in != nil {
			return encode(map[string]any{"documents": documents(in.Docs)})
		}
	}
	return encode(input)
}

// toolOutput is a tool.end's output: a tool's result (JSON as it is, else
// a string; the text of a multimodal result), a retriever's documents, an
// indexer's ids.
func toolOutput(c components.Component, output any) trace.Value {
	switch c {
	case components.ComponentOfTool:
		if out := tool.ConvCallbackOutput(output); out != nil {
			if out.Response != "" || out.ToolOutput == nil {
				return trace.Value(rawJSON(out.Response))
			}
			return encode(out.ToolOutput)
		}
	case components.ComponentOfRetriever:
		if out := retriever.ConvCallbackOutput(output); out != nil {
			return encode(documents(out.Docs))
		}
	case components.ComponentOfIndexer:
		if out := indexer.ConvCallbackOutput(output); out != nil {
			return encode(map[string]any{"ids": out.IDs})
		}
	}
	return encode(output)
}

// joinChunks puts a stream's chunks back together: one chunk is itself;
// strings are joined; message chunks are concatenated (one message) or
// appended (message lists); tool call outputs are joined by their text;
// anything else is the list of chunks.
func joinChunks(chunks []any) any {
	switch len(chunks) {
	case 0:
		return nil
	case 1:
		return chunks[0]
	}
	switch chunks[0].(type) {
	case string:
		var b strings.Builder
		for _, c := range chunks {
			s, ok := c.(string)
			if !ok {
				return chunks
			}
			b.WriteString(s)
		}
		return b.String()
	case *schema.Message:
		msgs := make([]*schema.Message, 0, len(chunks))
		for _, c := range chunks {
			m, ok := c.(*schema.Message)
			if !ok {
				return chunks
			}
			if m != nil {
				msgs = append(msgs, m)
			}
		}
		return concatMessages(msgs)
	case []*schema.Message:
		var msgs []*schema.Message
		for _, c := range chunks {
			ms, ok := c.([]*schema.Message)
			if !ok {
				return chunks
			}
			msgs = append(msgs, ms...)
		}
		return msgs
	case *tool.CallbackOutput:
		var b strings.Builder
		for _, c := range chunks {
			o, ok := c.(*tool.CallbackOutput)
			if !ok || o == nil {
				return chunks
			}
			b.WriteString(o.Response)
		}
		return b.String()
	}
	return chunks
}
