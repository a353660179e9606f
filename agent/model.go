package agent

import (
	"context"
	"encoding/json"

	"github.com/loupe-dev/loupe/trace"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// A Message is one turn of a conversation with a model.
type Message struct {
	Role       string     `json:"role"`                   // RoleSystem, RoleUser, RoleAssistant or RoleTool
	Content    string     `json:"content,omitempty"`      // the text
	Thinking   string     `json:"thinking,omitempty"`     // an assistant's reasoning, when the model shows it
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // an assistant's requested tool calls
	ToolCallID string     `json:"tool_call_id,omitempty"` // RoleTool: the call this message answers
	Name       string     `json:"name,omitempty"`         // RoleTool: the tool's name
	IsError    bool       `json:"is_error,omitempty"`     // RoleTool: the call failed and Content is the error
}

// A ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID    string          `json:"id"`    // the model's id for the call, echoed in the answering Message
	Name  string          `json:"name"`  // the tool's name
	Input json.RawMessage `json:"input"` // the arguments, one JSON value (usually an object)
}

// A ToolDef describes a tool to a model: its name, what it does and the
// JSON Schema its input must satisfy.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"input_schema,omitempty"`
}

// A Request is what a Model is asked. A Model must not modify it or keep
// its slices after Generate returns.
type Request struct {
	Messages []Message // the conversation so far, oldest first
	Tools    []ToolDef // the tools the model may call; empty for none
	// OnDelta, if not nil, receives streamed chunks as the model produces
	// them: kind is "text" or "thinking". A Model that does not stream
	// ignores it. The runtime sets it when the run is traced, so each
	// chunk is recorded as a model.delta record.
	OnDelta func(kind, chunk string)
}

// A Response is what a Model answered: text, tool calls, or both.
type Response struct {
	Content      string      // the answer text, or text alongside tool calls
	Thinking     string      // reasoning text, when the provider returns it
	ToolCalls    []ToolCall  // tools the model asks to call; none means a final answer
	Usage        trace.Usage // tokens and cost of this call
	FinishReason string      // as the provider says it: "stop", "tool_calls", "length", …
}

// A Model generates the next assistant turn of a conversation. Calls made
// through Generate are traced, checked against the run's token and cost
// budgets and surrounded by the model hooks; a Model itself does not
// trace. Implementations must be safe for use by one run at a time; a
// Model shared by concurrent runs must be safe for concurrent use.
type Model interface {
	// Name is the model's name as recorded in traces and stats.
	Name() string
	// Generate returns the model's answer to req. It should return
	// promptly with ctx's error when ctx is done.
	Generate(ctx context.Context, req Request) (Response, error)
}
