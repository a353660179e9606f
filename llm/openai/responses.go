package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/loupe-dev/loupe/agent"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// WithResponsesAPI makes the Model call OpenAI's Responses API
// (POST /responses) instead of Chat Completions. Everything else stays
// the same: the conversation and tools sent, streaming to
// Request.OnDelta (text as "text", reasoning summaries as "thinking"),
// parallel tool calls, usage with cached and reasoning tokens, cost and
// errors. The finish reason is reported in Chat Completions' terms
// ("stop", "tool_calls", "length", "content_filter") so traces from both
// modes compare. Each request is stateless (the whole conversation is
// sent, store is false); WithResponsesParams changes that. OpenAI
// returns reasoning summaries only when asked, and rejects the question
// for models that do not reason, so Loupe does not ask by default: set
// p.Reasoning.Summary = shared.ReasoningSummaryAuto with
// WithResponsesParams to record them.
//
// Use it for OpenAI models that are only, or better, served there (the
// reasoning summaries of o-series and GPT-5 models); most
// OpenAI-compatible servers speak only Chat Completions.
func WithResponsesAPI() Option { return func(m *Model) { m.responses = true } }

// WithResponsesParams lets the caller set Responses API parameters Loupe
// does not (reasoning effort and summary, max_output_tokens, store, …).
// f is called on every request after Loupe fills in the model, input and
// tools. It has effect only with WithResponsesAPI.
func WithResponsesParams(f func(*responses.ResponseNewParams)) Option {
	return func(m *Model) { m.rparams = f }
}

// responsesRequest builds the Responses API parameters for req: system,
// user and assistant messages as input messages (a system message keeps
// its place in the conversation, which the single instructions field
// would not), assistant tool calls as function_call items and tool
// results as function_call_output items, tools as function tools with the
// same JSON Schema as the Chat path.
func (m *Model) responsesRequest(req agent.Request) (responses.ResponseNewParams, error) {
	p := responses.ResponseNewParams{Model: m.name, Store: oai.Bool(false)}
	var items responses.ResponseInputParam
	for i, msg := range req.Messages {
		switch msg.Role {
		case agent.RoleSystem:
			items = append(items, inputMessage(msg.Content, responses.EasyInputMessageRoleSystem))
		case agent.RoleUser:
			items = append(items, inputMessage(msg.Content, responses.EasyInputMessageRoleUser))
		case agent.RoleTool:
			it := responses.ResponseInputItemParamOfFunctionCallOutput(msg.Content)
			it.OfFunctionCallOutput.CallID = oai.String(msg.ToolCallID)
			items = append(items, it)
		case agent.RoleAssistant:
			if msg.Content != "" {
				items = append(items, inputMessage(msg.Content, responses.EasyInputMessageRoleAssistant))
			}
			for _, c := range msg.ToolCalls {
				items = append(items, responses.ResponseInputItemParamOfFunctionCall(callArgs(c), c.ID, c.Name))
			}
		default:
			return p, fmt.Errorf("openai: message %d has role %q; want system, user, assistant or tool", i, msg.Role)
		}
	}
	p.Input.OfInputItemList = items
	for _, t := range req.Tools {
		schema, err := toolSchema(t)
		if err != nil {
			return p, err
		}
		ft := responses.FunctionToolParam{Name: t.Name, Parameters: schema, Strict: oai.Bool(false)}
		if t.Description != "" {
			ft.Description = oai.String(t.Description)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: &ft})
	}
	if m.rparams != nil {
		m.rparams(&p)
	}
	return p, nil
}

// summarySep separates the parts of reasoning summaries in Thinking.
const summarySep = "\n\n"

// inputMessage is a message input item. Its type, optional in the API,
// is sent so that servers stricter than OpenAI's accept it.
func inputMessage(content string, role responses.EasyInputMessageRole) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfMessage(content, role)
	it.OfMessage.Type = responses.EasyInputMessageTypeMessage
	return it
}

func (m *Model) responsesOnce(ctx context.Context, p responses.ResponseNewParams, opts []option.RequestOption) (agent.Response, error) {
	r, err := m.client.Responses.New(ctx, p, opts...)
	if err != nil {
		return agent.Response{}, err
	}
	var (
		resp                       agent.Response
		content, thinking, refusal strings.Builder
	)
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch c.Type {
				case "output_text":
					content.WriteString(c.Text)
				case "refusal":
					refusal.WriteString(c.Refusal)
				}
			}
		case "reasoning":
			for _, s := range it.Summary {
				if thinking.Len() > 0 {
					thinking.WriteString(summarySep)
				}
				thinking.WriteString(s.Text)
			}
		case "function_call":
			resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: it.CallID, Name: it.Name, Input: json.RawMessage(it.Arguments.OfString)})
		}
	}
	resp.Content, resp.Thinking = content.String(), thinking.String()
	return resp, m.responsesEnd(r, &resp, refusal.String())
}

// responsesEnd fills in what the final response object says: usage, cost
// and the finish reason; it returns the error of a failed response or a
// refusal.
func (m *Model) responsesEnd(r *responses.Response, resp *agent.Response, refusal string) error {
	u := r.Usage
	resp.Usage = m.usage(r.Model, oai.CompletionUsage{
		PromptTokens:            u.InputTokens,
		CompletionTokens:        u.OutputTokens,
		PromptTokensDetails:     oai.CompletionUsagePromptTokensDetails{CachedTokens: u.InputTokensDetails.CachedTokens},
		CompletionTokensDetails: oai.CompletionUsageCompletionTokensDetails{ReasoningTokens: u.OutputTokensDetails.ReasoningTokens},
	})
	switch r.Status {
	case "completed":
		resp.FinishReason = "stop"
		if len(resp.ToolCalls) > 0 {
			resp.FinishReason = "tool_calls"
		}
	case "incomplete":
		switch reason := r.IncompleteDetails.Reason; reason {
		case "max_output_tokens":
			resp.FinishReason = "length"
		case "":
			resp.FinishReason = "incomplete"
		default:
			resp.FinishReason = reason // content_filter keeps its name
		}
	case "failed":
		return responseError(string(r.Error.Code), r.Error.Message, "the response failed")
	default:
		resp.FinishReason = string(r.Status)
	}
	if refusal != "" {
		return &RefusalError{Model: m.name, Refusal: refusal}
	}
	return nil
}

func (m *Model) responsesStream(ctx context.Context, p responses.ResponseNewParams, onDelta func(kind, chunk string), opts []option.RequestOption) (agent.Response, error) {
	s := m.client.Responses.NewStreaming(ctx, p, opts...)
	defer s.Close()
	var (
		resp                       agent.Response
		content, thinking, refusal strings.Builder
		calls                      = map[int64]*partial{} // by output index
		final                      *responses.Response
		failure                    error
	)
	call := func(i int64) *partial {
		pc := calls[i]
		if pc == nil {
			pc = &partial{}
			calls[i] = pc
		}
		return pc
	}
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.output_text.delta":
			content.WriteString(ev.Delta)
			if onDelta != nil && ev.Delta != "" {
				onDelta("text", ev.Delta)
			}
		case "response.reasoning_summary_part.added":
			// Parts of a summary (and summaries of several reasoning
			// items) are paragraphs; keep them apart.
			if thinking.Len() > 0 {
				thinking.WriteString(summarySep)
				if onDelta != nil {
					onDelta("thinking", summarySep)
				}
			}
		case "response.reasoning_summary_text.delta":
			thinking.WriteString(ev.Delta)
			if onDelta != nil && ev.Delta != "" {
				onDelta("thinking", ev.Delta)
			}
		case "response.refusal.delta":
			refusal.WriteString(ev.Delta)
		case "response.output_item.added", "response.output_item.done":
			if ev.Item.Type != "function_call" {
				continue
			}
			pc := call(ev.OutputIndex)
			pc.id, pc.name = ev.Item.CallID, ev.Item.Name
			if a := ev.Item.Arguments.OfString; a != "" || ev.Type == "response.output_item.done" {
				// The done item holds the whole arguments: trust
				// it over the deltas.
				pc.args.Reset()
				pc.args.WriteString(a)
			}
		case "response.function_call_arguments.delta":
			call(ev.OutputIndex).args.WriteString(ev.Delta)
		case "response.completed", "response.incomplete", "response.failed":
			r := ev.Response
			final = &r
		case "error":
			failure = responseError(ev.Code, ev.Message, "sent inside the stream")
		}
	}
	resp.Content, resp.Thinking = content.String(), thinking.String()
	for _, i := range slices.Sorted(maps.Keys(calls)) {
		pc := calls[i]
		resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: pc.id, Name: pc.name, Input: json.RawMessage(pc.args.String())})
	}
	if err := s.Err(); err != nil {
		return resp, err
	}
	if failure != nil {
		return resp, failure
	}
	if final == nil {
		return resp, errors.New("the stream ended before the response was complete (no response.completed event)")
	}
	return resp, m.responsesEnd(final, &resp, refusal.String())
}
