package eval

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"
)

// Trajectory is what a run did, as eval sees it. The zero value is an empty
// run: no output, no calls, and no usage, cost or duration data.
type Trajectory struct {
	// Output is the final answer text: the content of the last assistant
	// message. Text assertions (contains, regex, ...) look only at this.
	Output string
	// Calls are the tool calls in the order they were made.
	Calls []ToolCall
	// Messages is the conversation, optional. Eval does not score it; it is
	// kept so that explanations and judges can show it.
	Messages []Message
	// Usage is the token usage of the whole run; nil when unknown.
	Usage *Usage
	// CostUSD is the cost of the run in US dollars; nil when unknown.
	CostUSD *float64
	// Duration is the wall time of the run; nil when unknown.
	Duration *time.Duration
	// LLMCalls is the number of model calls; nil when unknown.
	LLMCalls *int
	// Errors counts errors recorded during the run.
	Errors int
	// EventCount is the number of recorded events (informational).
	EventCount int
}

// ToolCall is one tool invocation.
type ToolCall struct {
	// Name is the tool name; matching is case-sensitive.
	Name string
	// Args are the call arguments as decoded JSON (map[string]any, []any,
	// string, float64, bool or nil). A nil map means "no input recorded",
	// which differs from an empty object.
	Args map[string]any
	// ArgsOrder lists the keys of Args in the order the call wrote them
	// (a decoded map keeps none); nil when unknown. Judges are shown the
	// arguments in this order, as AgentV shows them (see ObjectKeys).
	ArgsOrder []string
	// ArgsRaw holds the input when it was recorded but is not a JSON object
	// (for example a bare string); Args is nil then.
	ArgsRaw any
	// Output is the tool result as decoded JSON, or nil.
	Output any
	// Duration is how long the call took; nil when unknown.
	Duration *time.Duration
	// Err is the error text when the call failed, empty otherwise.
	Err string
}

// Message is one conversation turn.
type Message struct {
	// Role is system, user, assistant or tool.
	Role string
	// Content is the text content (structured content is flattened).
	Content string
	// Calls is how many of Trajectory.Calls this message made: the next
	// Calls calls after those of the messages before it. Zero when the
	// source does not say (then code graders see every call on the first
	// assistant message).
	Calls int
}

// Usage counts tokens.
type Usage struct {
	Input     int64 // prompt tokens
	Output    int64 // completion tokens
	Cached    int64 // cached prompt tokens, as reported by the provider
	Reasoning int64 // reasoning tokens, as reported by the provider
}

// input returns the recorded input of c: its Args object, its ArgsRaw
// value, or nil when nothing was recorded.
func (c ToolCall) input() any {
	if c.Args != nil {
		return c.Args
	}
	return c.ArgsRaw
}

// ObjectKeys returns the keys of the JSON object raw in the order it
// writes them (a repeated key once, where it first appears), or nil when
// raw is not a JSON object. It keeps what a decoded Go map loses: the
// order a tool call gave its arguments in, which AgentV's judge prompts
// follow.
func ObjectKeys(raw []byte) []string {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	keys := []string{}
	seen := map[string]bool{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil
		}
		k, ok := t.(string)
		if !ok {
			return nil
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return nil
		}
	}
	return keys
}

// argKeys returns the keys of c.Args in the order to show them: ArgsOrder
// (the keys it lists that Args has), then any others sorted.
func (c ToolCall) argKeys() []string {
	var keys []string
	seen := map[string]bool{}
	for _, k := range c.ArgsOrder {
		if _, ok := c.Args[k]; ok && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	var rest []string
	for k := range c.Args {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}
