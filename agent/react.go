package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe/trace"
)

// ReAct is a ready AgentLoop in the ReAct style: each iteration asks the
// model for its next turn; tool calls are run (in parallel unless
// Sequential is set) and their results become observations in the
// history; an answer without tool calls ends the run. A tool error is an
// observation too, so the model can recover from it; only limits, hook
// aborts and model errors end the run early.
//
// A ReAct holds one conversation: use a new one for each run. Set the
// exported fields before the run starts.
type ReAct struct {
	Model      Model
	Tools      ToolChain // nil for a model without tools
	System     string    // the system prompt; empty for none
	Sequential bool      // run a turn's tool calls one after another
	// Compaction, if set, summarises old messages in a nested run when
	// the history grows past its threshold.
	Compaction *Compaction

	messages []Message
	history  []Message
}

// Messages returns the messages the model sees next (after compaction,
// the summary replaces older ones). The caller must not modify them.
func (l *ReAct) Messages() []Message { return l.messages }

// History returns every message of the conversation, compacted ones
// included. The caller must not modify them.
func (l *ReAct) History() []Message { return l.history }

// Start records the tools offered (tool.discovered) and the system prompt
// and input as message records, and starts the history with them.
func (l *ReAct) Start(ctx context.Context, ec *trace.ExecutionContext, input string) error {
	if l.Model == nil {
		return errors.New("agent.ReAct: Model is nil; set it before the run")
	}
	DiscoverTools(ec, l.Tools)
	if l.System != "" {
		l.add(ec, Message{Role: RoleSystem, Content: l.System})
	}
	l.add(ec, Message{Role: RoleUser, Content: input})
	return nil
}

func (l *ReAct) add(ec *trace.ExecutionContext, m Message) {
	l.messages = append(l.messages, m)
	l.history = append(l.history, m)
	if ec != nil && (m.Role == RoleSystem || m.Role == RoleUser) {
		ec.Message(m.Role, trace.Text(m.Content))
	}
}

// Next runs one model turn and the tool calls it asks for.
func (l *ReAct) Next(ctx context.Context, ec *trace.ExecutionContext) Step {
	if l.Compaction != nil && l.Compaction.due(l.messages) {
		if err := l.compact(ctx, ec); err != nil {
			return Fail(err)
		}
	}
	var defs []ToolDef
	if l.Tools != nil {
		defs = l.Tools.Definitions()
	}
	resp, err := Generate(ctx, l.Model, Request{Messages: l.messages, Tools: defs})
	if err != nil {
		return Fail(err)
	}
	l.add(ec, Message{Role: RoleAssistant, Content: resp.Content, Thinking: resp.Thinking, ToolCalls: resp.ToolCalls})
	if len(resp.ToolCalls) == 0 {
		// The answer; model.call has it too, but a message record makes
		// the conversation readable from message records alone.
		ec.Message(RoleAssistant, trace.Text(resp.Content))
		return Final(resp.Content)
	}
	for _, res := range CallTools(ctx, l.Tools, resp.ToolCalls, !l.Sequential) {
		if IsStop(res.Err) {
			return Fail(res.Err)
		}
		l.add(ec, res.Message())
	}
	return Continue()
}

// Compaction summarises older messages of a ReAct conversation in a
// nested run (a child of the ReAct's run named "compaction"), replacing
// them with one user message holding the summary. Its tokens and cost
// count towards the parent run's stats and budgets.
type Compaction struct {
	// Model writes the summary; it is asked once, without tools.
	Model Model
	// Executor runs the nested run (its hooks and limits apply); nil
	// means a zero Executor.
	Executor *Executor
	// Prompt is the summariser's system prompt; empty means a default.
	Prompt string
	// MaxMessages triggers compaction when the history holds more
	// messages than this (0 means 40).
	MaxMessages int
	// Keep is how many of the latest messages stay as they are (0 means
	// 4). The kept part never starts with a tool result, so a tool call
	// and its result are never split.
	Keep int
}

// DefaultCompactionPrompt is the summariser's system prompt when
// Compaction.Prompt is empty.
const DefaultCompactionPrompt = "Summarise the conversation below for an assistant that will continue it: keep facts, tool results and open questions; drop chatter."

func (c *Compaction) limits() (max, keep int) {
	max, keep = c.MaxMessages, c.Keep
	if max <= 0 {
		max = 40
	}
	if keep <= 0 {
		keep = 4
	}
	return max, keep
}

func (c *Compaction) due(msgs []Message) bool {
	max, keep := c.limits()
	return len(msgs) > max && len(msgs) > keep+2
}

// compact replaces the older messages (after the system prompt) by a
// summary written in a nested run.
func (l *ReAct) compact(ctx context.Context, ec *trace.ExecutionContext) error {
	c := l.Compaction
	_, keep := c.limits()
	first := 0
	if len(l.messages) > 0 && l.messages[0].Role == RoleSystem {
		first = 1
	}
	cut := len(l.messages) - keep
	for cut > first && l.messages[cut].Role == RoleTool {
		cut--
	}
	if cut-first < 2 {
		return nil
	}
	var transcript strings.Builder
	for _, m := range l.messages[first:cut] {
		writeTranscript(&transcript, m)
	}
	exec := c.Executor
	if exec == nil {
		exec = &Executor{}
	}
	prompt := c.Prompt
	if prompt == "" {
		prompt = DefaultCompactionPrompt
	}
	res := exec.RunChild(ctx, "compaction", &ReAct{Model: c.Model, System: prompt}, transcript.String())
	if res.Err != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		// The nested run's own limits are its business; to this run it is
		// a failed step.
		return fmt.Errorf("compaction failed: %v", res.Err)
	}
	old := len(l.messages)
	msgs := make([]Message, 0, first+1+len(l.messages)-cut)
	msgs = append(msgs, l.messages[:first]...)
	msgs = append(msgs, Message{Role: RoleUser, Content: "Summary of the conversation so far:\n" + res.Answer})
	msgs = append(msgs, l.messages[cut:]...)
	l.messages = msgs
	ec.StateUpdate("messages", trace.JSON(old), trace.JSON(len(msgs)))
	return nil
}

func writeTranscript(b *strings.Builder, m Message) {
	b.WriteString(m.Role)
	if m.Name != "" {
		b.WriteString(" (" + m.Name + ")")
	}
	b.WriteString(": ")
	b.WriteString(m.Content)
	for _, c := range m.ToolCalls {
		fmt.Fprintf(b, " [call %s %s]", c.Name, c.Input)
	}
	b.WriteByte('\n')
}

// SubAgent is a Tool that runs another agent as a nested run of the
// calling run: the model delegates a task and gets the sub-agent's answer
// as the tool's output. The nested run is a child of the caller's trace,
// and its tokens, cost and tool calls roll up into the caller's stats.
type SubAgent struct {
	ToolName    string // the tool's name, also the nested run's name
	Description string // the tool's description, shown to the calling model
	// Executor runs the nested run (its hooks and limits apply); nil
	// means a zero Executor.
	Executor *Executor
	// NewLoop returns a fresh loop for each call.
	NewLoop func() AgentLoop
}

var subAgentSchema = json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"what the sub-agent should do"}},"required":["task"],"additionalProperties":false}`)

// Definition describes the sub-agent as a tool taking {"task": "..."}.
func (s *SubAgent) Definition() ToolDef {
	return ToolDef{Name: s.ToolName, Description: s.Description, Schema: subAgentSchema}
}

// Call runs the sub-agent on the task and returns its answer as a JSON
// string. A failed nested run is the call's error.
func (s *SubAgent) Call(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Task *string `json:"task"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("%s: input must be an object {\"task\": string}: %v", s.ToolName, err)
	}
	if in.Task == nil {
		return nil, fmt.Errorf("%s: input is missing the required field \"task\"", s.ToolName)
	}
	exec := s.Executor
	if exec == nil {
		exec = &Executor{}
	}
	res := exec.RunChild(ctx, s.ToolName, s.NewLoop(), *in.Task)
	if res.Err != nil {
		// %v, not %w: a limit that stopped the nested run must not stop
		// the caller, which sees an ordinary tool error. Limits of the
		// caller itself stop it on their own.
		return nil, fmt.Errorf("%s failed (%s): %v", s.ToolName, res.Termination, res.Err)
	}
	return json.Marshal(res.Answer)
}
