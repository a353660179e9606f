package otlp

import (
	"bytes"
	"encoding/json"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/trace"
)

// spanInfo is what a span says, read in its dialect.
type spanInfo struct {
	name              string
	in, out, thinking trace.Value
	usage             trace.Usage // model calls
	finish            string      // model calls: the finish reason
	errMsg            string      // a failure the span's status does not carry
}

// read reads a span of the given kind: first in its own dialect, then, for
// whatever that left empty, in the GenAI and OpenInference conventions.
func read(kind Kind, d dialect, m *marks, sp ptrace.Span) spanInfo {
	a := sp.Attributes()
	var v spanInfo
	switch d {
	case dialectVercel:
		readVercel(&v, kind, a)
	case dialectPydantic:
		readPydantic(&v, kind, a)
	case dialectGenkit:
		readGenkit(&v, kind, a)
	case dialectTraceloop:
		readTraceloop(&v, kind, a)
	case dialectADK:
		readADK(&v, kind, a, sp.Name())
	case dialectOpenInference:
		readOpenInference(&v, kind, a, sp.ParentSpanID().IsEmpty())
	case dialectStrands:
		readStrands(&v, kind, sp)
	case dialectEino:
		readEino(&v, kind, a, sp)
	}
	if v.in == nil || v.out == nil {
		in, out := ioValues(kind, sp, m.sysInstr)
		if v.in == nil {
			v.in = in
		}
		if v.out == nil {
			v.out = out
		}
	}
	if kind == KindAgent || kind == KindGeneric && sp.ParentSpanID().IsEmpty() {
		v.out = textAnswer(v.out) // a run's answer, as Loupe's runtime records it
	}
	if v.name == "" {
		switch kind {
		case KindModel:
			v.name = firstStr(a, "gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
		case KindTool:
			v.name = firstStr(a, "gen_ai.tool.name", "tool.name")
		case KindAgent:
			v.name = firstStr(a, "gen_ai.agent.name", "agent.name", "graph.node.id") // graph.node.id: CrewAI's agent role
		}
		if v.name == "" {
			v.name = sp.Name()
		}
	}
	if kind != KindModel {
		return v
	}
	fillUsage(&v.usage, usage(a))
	u := &v.usage
	if u.OutputTokens == 0 && u.InputTokens > 0 {
		// Only a total (OpenLLMetry's llm.usage.total_tokens, for one).
		if t := firstInt(a, "llm.usage.total_tokens", "gen_ai.usage.total_tokens", "llm.token_count.total"); t > u.InputTokens {
			u.OutputTokens = t - u.InputTokens
		}
	}
	if d == dialectADK && u.Provider == scopeADK || d == dialectStrands && u.Provider == systemStrands || d == dialectEino && u.Provider == systemEino {
		u.Provider = "" // the framework's own name in gen_ai.system, not the model's provider
	}
	if v.finish == "" {
		v.finish = finishReason(a)
	}
	if v.thinking == nil {
		v.thinking = partsThinking(v.out)
	}
	if v.thinking == nil {
		if r := str(a, "gen_ai.content.reasoning"); r != "" {
			v.thinking = trace.Text(r) // OpenLIT
		}
	}
	return v
}

// textAnswer returns the text of GenAI output messages that are one
// assistant message of text parts (an invoke_agent span's answer), or out
// as it is.
func textAnswer(out trace.Value) trace.Value {
	if len(out) == 0 || out[0] != '[' || !bytes.Contains(out, []byte(`"parts"`)) {
		return out
	}
	var ms []struct {
		Role  string `json:"role"`
		Parts []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		} `json:"parts"`
	}
	if json.Unmarshal(out, &ms) != nil || len(ms) != 1 || ms[0].Role != "assistant" || len(ms[0].Parts) == 0 {
		return out
	}
	texts := make([]string, 0, len(ms[0].Parts))
	for _, p := range ms[0].Parts {
		if p.Type != "text" || len(p.Content) == 0 || p.Content[0] != '"' {
			return out
		}
		texts = append(texts, rawText(p.Content))
	}
	return trace.Text(strings.Join(texts, ""))
}

// fillUsage sets the fields of dst that are zero from src.
func fillUsage(dst *trace.Usage, src trace.Usage) {
	if dst.Provider == "" {
		dst.Provider = src.Provider
	}
	if dst.InputTokens == 0 {
		dst.InputTokens = src.InputTokens
	}
	if dst.OutputTokens == 0 {
		dst.OutputTokens = src.OutputTokens
	}
	if dst.CachedTokens == 0 {
		dst.CachedTokens = src.CachedTokens
	}
	if dst.ReasoningTokens == 0 {
		dst.ReasoningTokens = src.ReasoningTokens
	}
	if dst.CostUSD == 0 {
		dst.CostUSD = src.CostUSD
	}
	if !dst.CostUnknown && dst.CostUSD == 0 {
		dst.CostUnknown = src.CostUnknown
	}
}

// --- shared shapes -----------------------------------------------------------

// toolCall is a tool call a model asked for, as Loupe's agent runtime
// records it in a model call's Output.
type toolCall struct {
	ID    string
	Name  string
	Input []byte // JSON
}

// nativeOutput returns a model's answer the way Loupe's own recorder
// writes it: the text as a JSON string, or {"content":…,"tool_calls":
// [{"id","name","input"}]} when the model asked for tools.
func nativeOutput(text string, calls []toolCall) trace.Value {
	if len(calls) == 0 {
		if text == "" {
			return nil
		}
		return trace.Text(text)
	}
	b := []byte{'{'}
	if text != "" {
		b = append(b, `"content":`...)
		b = trace.AppendString(b, text)
		b = append(b, ',')
	}
	b = append(b, `"tool_calls":[`...)
	for i, c := range calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = trace.AppendString(b, c.ID)
		b = append(b, `,"name":`...)
		b = trace.AppendString(b, c.Name)
		b = append(b, `,"input":`...)
		b = append(b, argsJSON(c.Input)...)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// argsJSON returns tool arguments as one JSON value: a JSON string that
// holds JSON (arguments as the provider sent them) is unwrapped; nothing
// is null.
func argsJSON(raw []byte) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return []byte("null")
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if t := bytes.TrimSpace([]byte(s)); len(t) > 0 && (t[0] == '{' || t[0] == '[') && trace.ValidJSON(t) {
				return t
			}
		}
	}
	if !trace.ValidJSON(raw) {
		return trace.Text(string(raw))
	}
	return raw
}

// rawText returns a JSON string's text, or other JSON as it is.
func rawText(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// partsThinking returns the reasoning in GenAI output messages (parts of
// type "reasoning", or "thinking" as Pydantic AI writes them) as text, or
// nil.
func partsThinking(out trace.Value) trace.Value {
	if len(out) == 0 || out[0] != '[' || !bytes.Contains(out, []byte(`"reasoning"`)) && !bytes.Contains(out, []byte(`"thinking"`)) {
		return nil
	}
	var msgs []struct {
		Parts []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		} `json:"parts"`
	}
	if json.Unmarshal(out, &msgs) != nil {
		return nil
	}
	var texts []string
	for _, m := range msgs {
		for _, p := range m.Parts {
			if (p.Type == "reasoning" || p.Type == "thinking") && len(p.Content) > 0 {
				texts = append(texts, rawText(p.Content))
			}
		}
	}
	if len(texts) == 0 {
		return nil
	}
	return trace.Text(strings.Join(texts, "\n"))
}

// withSystem puts gen_ai.system_instructions, which the GenAI conventions
// keep apart from the chat history, in front of the input messages as a
// system message.
func withSystem(in trace.Value, a pcommon.Map) trace.Value {
	si := norm(firstJSON(a, "gen_ai.system_instructions"))
	if len(si) == 0 || len(in) > 0 && in[0] != '[' {
		return in
	}
	b := []byte(`[{"role":"system","parts":`)
	switch si[0] {
	case '[':
		b = append(b, si...)
	case '"':
		b = append(b, `[{"type":"text","content":`...)
		b = append(b, si...)
		b = append(b, "}]"...)
	default:
		b = append(b, '[')
		b = append(b, si...)
		b = append(b, ']')
	}
	b = append(b, '}')
	rest := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(in), []byte{'['}))
	if len(rest) == 0 || rest[0] == ']' {
		return append(b, ']')
	}
	b = append(b, ',')
	return append(b, rest...)
}

// geminiUsage reads Gemini's token counts, whose output count leaves the
// thinking tokens out (candidatesTokenCount); Loupe's includes them. A
// total that already covers them says the output count did too.
func geminiUsage(in, out, thoughts, cached, total int64) trace.Usage {
	if thoughts > 0 && (total == 0 || total >= in+out+thoughts) {
		out += thoughts
	}
	return trace.Usage{InputTokens: in, OutputTokens: out, CachedTokens: cached, ReasoningTokens: thoughts}
}

// nonEmpty returns the attribute as JSON unless it is missing or "{}",
// which ADK writes where it recorded nothing.
func nonEmpty(a pcommon.Map, k string) trace.Value {
	v := firstJSON(a, k)
	if s := strings.TrimSpace(string(v)); s == "{}" || s == "" {
		return nil
	}
	return v
}

// --- Vercel AI SDK -------------------------------------------------------------

// readVercel reads the AI SDK's ai.* attributes (content/docs/03-ai-sdk-
// core/60-telemetry.mdx; packages/otel/src/legacy-open-telemetry.ts and,
// before 5.0, packages/ai/core/generate-text/generate-text.ts).
func readVercel(v *spanInfo, kind Kind, a pcommon.Map) {
	switch kind {
	case KindModel:
		v.name = firstStr(a, "ai.response.model", "gen_ai.response.model", "ai.model.id")
		v.in = firstJSON(a, "ai.prompt.messages", "ai.values")
		v.out = vercelOutput(a)
		if r := str(a, "ai.response.reasoning"); r != "" {
			v.thinking = trace.Text(r)
		}
		v.finish = firstStr(a, "ai.response.finishReason", "ai.finishReason")
		provider, _, _ := strings.Cut(str(a, "ai.model.provider"), ".") // "openai.chat" → "openai"
		v.usage = trace.Usage{
			Provider:        provider,
			InputTokens:     firstInt(a, "ai.usage.inputTokens", "ai.usage.promptTokens", "ai.usage.tokens"),
			OutputTokens:    firstInt(a, "ai.usage.outputTokens", "ai.usage.completionTokens"),
			CachedTokens:    firstInt(a, "ai.usage.cachedInputTokens", "ai.usage.inputTokenDetails.cacheReadTokens"),
			ReasoningTokens: firstInt(a, "ai.usage.reasoningTokens", "ai.usage.outputTokenDetails.reasoningTokens"),
		}
	case KindTool:
		v.name = str(a, "ai.toolCall.name")
		v.in = firstJSON(a, "ai.toolCall.args", "ai.toolCall.input")
		v.out = firstJSON(a, "ai.toolCall.result", "ai.toolCall.output")
	case KindAgent:
		// The call an application made: its token totals (ai.usage.*) are
		// the sum of its steps', which are the model calls.
		v.name = firstStr(a, "ai.telemetry.functionId", "resource.name")
		v.in = firstJSON(a, "ai.prompt")
		v.out = vercelOutput(a)
	}
}

// vercelOutput is the text and tool calls of a step or of the whole call.
func vercelOutput(a pcommon.Map) trace.Value {
	text := firstStr(a, "ai.response.text", "ai.result.text")
	var calls []toolCall
	if s := firstStr(a, "ai.response.toolCalls", "ai.result.toolCalls"); s != "" {
		var tcs []struct {
			ID    string          `json:"toolCallId"`
			Name  string          `json:"toolName"`
			Args  json.RawMessage `json:"args"`  // ≤ 4.x
			Input json.RawMessage `json:"input"` // ≥ 5.0
		}
		if json.Unmarshal([]byte(s), &tcs) == nil {
			for _, c := range tcs {
				in := c.Input
				if len(in) == 0 {
					in = c.Args
				}
				calls = append(calls, toolCall{ID: c.ID, Name: c.Name, Input: in})
			}
		}
	}
	if out := nativeOutput(text, calls); out != nil {
		return out
	}
	return firstJSON(a, "ai.response.object", "ai.result.object")
}

// --- Pydantic AI -----------------------------------------------------------------

// readPydantic reads Pydantic AI's own attributes (pydantic_ai/
// _instrumentation.py, capabilities/instrumentation.py, models/
// instrumented.py; before 2026, agent/__init__.py and _tool_manager.py).
func readPydantic(v *spanInfo, kind Kind, a pcommon.Map) {
	switch kind {
	case KindAgent:
		// The run span carries the run's token totals (gen_ai.usage.*);
		// the model calls are its chat spans, so they are not read here.
		v.name = firstStr(a, "gen_ai.agent.name", "agent_name")
		v.in = pydanticRunInput(a)
		v.out = firstJSON(a, "final_result")
	case KindTool:
		v.in = firstJSON(a, "tool_arguments") // instrumentation version ≤ 2
		v.out = firstJSON(a, "tool_response") // also the retry prompt of a failed call
	case KindModel:
		// gen_ai.usage.details.* are the provider's own token details;
		// operation.cost is the price Pydantic AI worked out (genai-prices).
		v.usage.ReasoningTokens = firstInt(a, "gen_ai.usage.details.reasoning_tokens", "gen_ai.usage.details.thoughts_tokens")
		v.usage.CostUSD = firstFloat(a, "operation.cost")
	}
}

// pydanticRunInput returns what the run was asked: the messages of
// pydantic_ai.all_messages (or all_messages_events) from
// pydantic_ai.new_message_index up to the first answer.
func pydanticRunInput(a pcommon.Map) trace.Value {
	all := strings.TrimSpace(firstStr(a, "pydantic_ai.all_messages", "all_messages_events"))
	if all == "" || all[0] != '[' {
		return nil
	}
	var msgs []json.RawMessage
	if json.Unmarshal([]byte(all), &msgs) != nil {
		return nil
	}
	from := int(firstInt(a, "pydantic_ai.new_message_index"))
	if from >= len(msgs) {
		from = 0
	}
	to := from
	for ; to < len(msgs); to++ {
		var m struct {
			Role  string `json:"role"`
			Event string `json:"event.name"`
		}
		if json.Unmarshal(msgs[to], &m) != nil || m.Role == "assistant" || m.Event == "gen_ai.choice" {
			break
		}
	}
	if to == from {
		return nil
	}
	b := []byte{'['}
	for i, m := range msgs[from:to] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	return append(b, ']')
}

// --- Genkit ------------------------------------------------------------------------

// readGenkit reads genkit:* attributes (js/core/src/tracing/
// instrumentation.ts, go/core/tracing/tracing.go): genkit:name, and
// genkit:input / genkit:output as JSON; a model's output is a
// GenerateResponseData with its usage (js/ai/src/model-types.ts).
func readGenkit(v *spanInfo, kind Kind, a pcommon.Map) {
	v.name = str(a, "genkit:name")
	v.in = firstJSON(a, "genkit:input")
	if str(a, "genkit:state") == "error" {
		v.errMsg = "genkit:state is error"
	}
	if kind == KindModel {
		genkitResponse(v, str(a, "genkit:output"))
		if p, _, ok := strings.Cut(v.name, "/"); ok {
			v.usage.Provider = p // "googleai/gemini-2.5-flash"
		}
	}
	if v.out == nil {
		v.out = firstJSON(a, "genkit:output")
	}
	if kind == KindTool && str(a, "genkit:metadata:subtype") == "tool.v2" {
		v.out = toolV2Output(v.out)
	}
}

// toolV2Output is the result a Genkit Go tool gave the model: a tool.v2
// action's output is a MultipartToolResponse ({"output": …, "content":
// [parts]}, go/ai/tools.go), whose output is the tool's own when it
// returned no content parts. With parts, the whole response is kept.
func toolV2Output(out trace.Value) trace.Value {
	var mp struct {
		Output  json.RawMessage   `json:"output"`
		Content []json.RawMessage `json:"content"`
	}
	if len(out) == 0 || out[0] != '{' || json.Unmarshal(out, &mp) != nil || len(mp.Content) > 0 || len(mp.Output) == 0 {
		return out
	}
	return trace.Value(mp.Output)
}

type genkitMessage struct {
	Content []struct {
		Text        *string `json:"text"`
		Reasoning   *string `json:"reasoning"`
		ToolRequest *struct {
			Ref   string          `json:"ref"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"toolRequest"`
	} `json:"content"`
}

type genkitUsage struct {
	InputTokens         float64 `json:"inputTokens"`
	OutputTokens        float64 `json:"outputTokens"`
	TotalTokens         float64 `json:"totalTokens"`
	ThoughtsTokens      float64 `json:"thoughtsTokens"`
	CachedContentTokens float64 `json:"cachedContentTokens"`
}

// genkitResponse reads a model action's GenerateResponseData (JSON text):
// message (or the older candidates[0].message), finishReason and usage.
func genkitResponse(v *spanInfo, out string) {
	if out = strings.TrimSpace(out); out == "" || out[0] != '{' {
		return
	}
	var r struct {
		Message      *genkitMessage `json:"message"`
		FinishReason string         `json:"finishReason"`
		Usage        *genkitUsage   `json:"usage"`
		Candidates   []struct {
			Message      *genkitMessage `json:"message"`
			FinishReason string         `json:"finishReason"`
			Usage        *genkitUsage   `json:"usage"`
		} `json:"candidates"`
	}
	if json.Unmarshal([]byte(out), &r) != nil {
		return
	}
	if len(r.Candidates) > 0 {
		c := r.Candidates[0]
		r.Message = firstNonNil(r.Message, c.Message)
		r.Usage = firstNonNil(r.Usage, c.Usage)
		if r.FinishReason == "" {
			r.FinishReason = c.FinishReason
		}
	}
	v.finish = r.FinishReason
	if u := r.Usage; u != nil {
		v.usage = geminiUsage(int64(u.InputTokens), int64(u.OutputTokens), int64(u.ThoughtsTokens), int64(u.CachedContentTokens), int64(u.TotalTokens))
	}
	if r.Message == nil {
		return
	}
	var text, thinking strings.Builder
	var calls []toolCall
	for _, p := range r.Message.Content {
		switch {
		case p.Text != nil:
			text.WriteString(*p.Text)
		case p.Reasoning != nil:
			if thinking.Len() > 0 {
				thinking.WriteByte('\n')
			}
			thinking.WriteString(*p.Reasoning)
		case p.ToolRequest != nil:
			calls = append(calls, toolCall{ID: p.ToolRequest.Ref, Name: p.ToolRequest.Name, Input: p.ToolRequest.Input})
		}
	}
	v.out = nativeOutput(text.String(), calls)
	if thinking.Len() > 0 {
		v.thinking = trace.Text(thinking.String())
	}
}

func firstNonNil[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// --- Traceloop OpenLLMetry -------------------------------------------------------

// readTraceloop reads the traceloop.entity.* attributes its decorators
// write on workflow, task, agent and tool spans (traceloop-sdk/traceloop/
// sdk/decorators/base.py). Its model spans are read as GenAI spans (the
// older gen_ai.prompt.N.* / gen_ai.completion.N.* attributes, or the
// current ones).
func readTraceloop(v *spanInfo, kind Kind, a pcommon.Map) {
	if kind == KindModel {
		return
	}
	v.name = str(a, "traceloop.entity.name")
	v.in = traceloopInput(firstJSON(a, "traceloop.entity.input"))
	v.out = firstJSON(a, "traceloop.entity.output")
}

// traceloopInput simplifies a decorated function's {"args":[],"kwargs":{…}}
// to its keyword arguments when it had no positional ones.
func traceloopInput(in trace.Value) trace.Value {
	if len(in) == 0 || in[0] != '{' || !bytes.Contains(in, []byte(`"kwargs"`)) {
		return in
	}
	var call map[string]json.RawMessage
	if json.Unmarshal(in, &call) != nil || len(call) != 2 {
		return in
	}
	args, kwargs := bytes.TrimSpace(call["args"]), bytes.TrimSpace(call["kwargs"])
	if string(args) != "[]" || len(kwargs) == 0 {
		return in
	}
	return trace.Value(kwargs)
}

// --- Google ADK -----------------------------------------------------------------

// readADK reads the gcp.vertex.agent.* attributes of Google ADK's spans
// (src/google/adk/telemetry.py, later telemetry/tracing.py): the request
// and response of a call_llm span as JSON (LlmRequest, LlmResponse), and a
// tool's arguments and response.
func readADK(v *spanInfo, kind Kind, a pcommon.Map, spanName string) {
	switch kind {
	case KindModel:
		v.in = nonEmpty(a, "gcp.vertex.agent.llm_request")
		if s := strings.TrimSpace(str(a, "gcp.vertex.agent.llm_response")); s != "" && s != "{}" {
			adkResponse(v, s)
		}
	case KindTool:
		v.in = nonEmpty(a, "gcp.vertex.agent.tool_call_args")
		v.out = nonEmpty(a, "gcp.vertex.agent.tool_response")
	case KindAgent:
		if n, ok := strings.CutPrefix(spanName, "agent_run ["); ok {
			v.name = strings.TrimSuffix(n, "]")
		}
	}
}

// adkResponse reads an LlmResponse (JSON text): content.parts (text,
// thought text, function_call), usage_metadata, finish_reason and
// error_code / error_message. Output is the response as it is when it has
// no content to read.
func adkResponse(v *spanInfo, s string) {
	var r struct {
		Content *struct {
			Parts []struct {
				Text         *string `json:"text"`
				Thought      bool    `json:"thought"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"function_call"`
			} `json:"parts"`
		} `json:"content"`
		Usage *struct {
			Prompt     float64 `json:"prompt_token_count"`
			Candidates float64 `json:"candidates_token_count"`
			Thoughts   float64 `json:"thoughts_token_count"`
			Cached     float64 `json:"cached_content_token_count"`
			Total      float64 `json:"total_token_count"`
		} `json:"usage_metadata"`
		FinishReason string `json:"finish_reason"`
		ErrorCode    string `json:"error_code"`
		ErrorMessage string `json:"error_message"`
	}
	if s[0] != '{' || json.Unmarshal([]byte(s), &r) != nil {
		v.out = trace.Raw([]byte(s))
		return
	}
	v.finish = strings.ToLower(r.FinishReason)
	if u := r.Usage; u != nil {
		v.usage = geminiUsage(int64(u.Prompt), int64(u.Candidates), int64(u.Thoughts), int64(u.Cached), int64(u.Total))
	}
	if r.ErrorCode != "" || r.ErrorMessage != "" {
		v.errMsg = strings.TrimPrefix(r.ErrorCode+": "+r.ErrorMessage, ": ")
		v.errMsg = strings.TrimSuffix(v.errMsg, ": ")
	}
	if r.Content == nil {
		v.out = trace.Raw([]byte(s))
		return
	}
	var text, thinking strings.Builder
	var calls []toolCall
	for _, p := range r.Content.Parts {
		switch {
		case p.FunctionCall != nil:
			calls = append(calls, toolCall{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Input: p.FunctionCall.Args})
		case p.Text != nil && p.Thought:
			if thinking.Len() > 0 {
				thinking.WriteByte('\n')
			}
			thinking.WriteString(*p.Text)
		case p.Text != nil:
			text.WriteString(*p.Text)
		}
	}
	v.out = nativeOutput(text.String(), calls)
	if v.out == nil {
		v.out = trace.Raw([]byte(s))
	}
	if thinking.Len() > 0 {
		v.thinking = trace.Text(thinking.String())
	}
}

// --- OpenInference ---------------------------------------------------------------

// readOpenInference reads a model span's llm.output_messages.N.message.*
// (openinference-semantic-conventions: message.content, message.contents.M.
// message_content.{type,text}, message.tool_calls.M.tool_call.{id,
// function.name,function.arguments}) as Loupe's recorder writes a model's
// answer: text and tool calls, with the "reasoning" contents (the OpenAI
// Agents instrumentation's reasoning summaries) as Thinking. Other kinds
// are read by the generic rules (input.value / output.value, tool.name).
func readOpenInference(v *spanInfo, kind Kind, a pcommon.Map, root bool) {
	switch {
	case kind == KindTool:
		v.in = kwargsInput(openInferenceValue(a, "input"))
		v.out = lcContent(openInferenceValue(a, "output"))
		return
	case kind != KindModel:
		if root {
			v.out = lastAnswer(openInferenceValue(a, "output"))
		}
		return
	}
	msgs := indexed(a, "llm.output_messages.")
	if msgs == nil {
		return
	}
	var ms []struct {
		Role     string          `json:"role"`
		Content  json.RawMessage `json:"content"`
		Contents []struct {
			C struct {
				Type string          `json:"type"`
				Text json.RawMessage `json:"text"`
			} `json:"message_content"`
		} `json:"contents"`
		ToolCalls []struct {
			TC struct {
				ID       string `json:"id"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_call"`
		} `json:"tool_calls"`
	}
	if json.Unmarshal(msgs, &ms) != nil {
		v.out = msgs
		return
	}
	var text, thinking []string
	var calls []toolCall
	for _, m := range ms {
		if m.Role != "" && m.Role != "assistant" && m.Role != "model" {
			continue
		}
		hasText := false
		for _, c := range m.Contents {
			switch {
			case c.C.Type == "reasoning" && len(c.C.Text) > 0:
				thinking = append(thinking, rawText(c.C.Text))
			case (c.C.Type == "text" || c.C.Type == "") && len(c.C.Text) > 0:
				text, hasText = append(text, rawText(c.C.Text)), true
			}
		}
		if !hasText && len(m.Content) > 0 {
			text = append(text, rawText(m.Content))
		}
		for _, tc := range m.ToolCalls {
			args := tc.TC.Function.Arguments
			if len(args) == 0 {
				args = json.RawMessage("{}") // the OpenAI Agents instrumentation leaves "{}" out
			}
			calls = append(calls, toolCall{ID: tc.TC.ID, Name: tc.TC.Function.Name, Input: args})
		}
	}
	if out := nativeOutput(strings.Join(text, "\n"), calls); out != nil {
		v.out = out
	} else {
		v.out = msgs
	}
	if len(thinking) > 0 {
		v.thinking = trace.Text(strings.Join(thinking, "\n"))
	}
}

// kwargsInput simplifies a tool call's bound arguments as LlamaIndex and
// smolagents record them ({"args":[],"kwargs":{…}}, smolagents with its
// own sanitize_inputs_outputs flag beside) to the keyword arguments, the
// arguments the model sent.
func kwargsInput(in trace.Value) trace.Value {
	if len(in) == 0 || in[0] != '{' || !bytes.Contains(in, []byte(`"kwargs"`)) {
		return in
	}
	var call map[string]json.RawMessage
	if json.Unmarshal(in, &call) != nil {
		return in
	}
	args, kwargs := bytes.TrimSpace(call["args"]), bytes.TrimSpace(call["kwargs"])
	if string(args) != "[]" || len(kwargs) == 0 || kwargs[0] != '{' {
		return in
	}
	for k := range call {
		if k != "args" && k != "kwargs" && k != "sanitize_inputs_outputs" {
			return in
		}
	}
	return trace.Value(kwargs)
}

// lcMessage is a LangChain message as its serializer writes it
// ({"lc":1,"type":"constructor","id":[…,"AIMessage"],"kwargs":{…}}), or
// as a plain {"role","content"} / {"type","content"} object.
type lcMessage struct {
	LC     int      `json:"lc"`
	ID     []string `json:"id"`
	Kwargs *struct {
		Content json.RawMessage `json:"content"`
		Type    string          `json:"type"`
	} `json:"kwargs"`
	Role    string          `json:"role"`
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
}

// content returns the message's role ("ai" for the model's) and content.
func (m *lcMessage) content() (role string, content json.RawMessage) {
	if m.Kwargs != nil {
		role = m.Kwargs.Type
		if role == "" && len(m.ID) > 0 {
			role = strings.ToLower(strings.TrimSuffix(m.ID[len(m.ID)-1], "Message"))
		}
		return role, m.Kwargs.Content
	}
	role = m.Role
	if role == "" {
		role = m.Type
	}
	return role, m.Content
}

// lcContent returns a LangChain ToolMessage's content (what a tool
// returned to the model), or v as it is.
func lcContent(v trace.Value) trace.Value {
	if len(v) == 0 || v[0] != '{' || !bytes.Contains(v, []byte(`"lc"`)) {
		return v
	}
	var m lcMessage
	if json.Unmarshal(v, &m) != nil || m.LC == 0 || m.Kwargs == nil || len(m.Kwargs.Content) == 0 {
		return v
	}
	return trace.Value(m.Kwargs.Content)
}

// lastAnswer returns the content of the last message of a LangGraph
// state's messages ({"messages":[…]}, the graph's output) when the model
// wrote it: the run's answer. Anything else is returned as it is.
func lastAnswer(v trace.Value) trace.Value {
	if len(v) == 0 || v[0] != '{' || !bytes.Contains(v, []byte(`"messages"`)) {
		return v
	}
	var st struct {
		Messages []lcMessage `json:"messages"`
	}
	if json.Unmarshal(v, &st) != nil || len(st.Messages) == 0 {
		return v
	}
	last := st.Messages[len(st.Messages)-1]
	role, content := last.content()
	if role != "ai" && role != "assistant" || len(content) == 0 || string(content) == `""` {
		return v
	}
	return trace.Value(content)
}

// --- Strands Agents ----------------------------------------------------------------

// evDetails is the event the GenAI conventions (and Strands with
// OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental) put a call's
// messages in.
const evDetails = "gen_ai.client.inference.operation.details"

// readStrands reads Strands Agents' spans (strands/telemetry/tracer.py),
// whose content is in events: by default gen_ai.{system,user,assistant,
// tool}.message events ({"content": content blocks as JSON}) and a
// gen_ai.choice event ({"message", "finish_reason"}, and "id" for tools);
// with the latest conventions one gen_ai.client.inference.operation.details
// event with gen_ai.input.messages / gen_ai.output.messages.
func readStrands(v *spanInfo, kind Kind, sp ptrace.Span) {
	var choice pcommon.Map
	var toolMsg, details pcommon.Map
	var haveChoice, haveTool bool
	var detailsIn, detailsOut trace.Value
	evs := sp.Events()
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		switch e.Name() {
		case "gen_ai.choice":
			choice, haveChoice = e.Attributes(), true
		case "gen_ai.tool.message":
			toolMsg, haveTool = e.Attributes(), true
		case evDetails:
			details = e.Attributes()
			if in := firstJSON(details, "gen_ai.input.messages"); in != nil {
				detailsIn = in
			}
			if out := firstJSON(details, "gen_ai.output.messages"); out != nil {
				detailsOut = out
			}
		}
	}
	a := sp.Attributes()
	if kind == KindTool && str(a, "gen_ai.tool.status") == "error" {
		v.errMsg = "gen_ai.tool.status is error"
	}
	switch kind {
	case KindModel:
		if haveChoice {
			v.finish = str(choice, "finish_reason")
			strandsAnswer(v, firstJSON(choice, "message"))
		} else if detailsOut != nil {
			v.out = detailsOut
			v.finish, v.thinking = strandsParts(detailsOut)
		}
	case KindTool:
		if haveTool {
			v.in = firstJSON(toolMsg, "content")
		} else if detailsIn != nil {
			v.in = partField(detailsIn, "arguments")
		}
		if haveChoice {
			v.out = strandsResult(firstJSON(choice, "message"))
		} else if detailsOut != nil {
			v.out = strandsResult(partField(detailsOut, "response"))
		}
	case KindAgent:
		v.name = str(a, "gen_ai.agent.name")
		if detailsIn != nil {
			v.in = detailsIn
		} else {
			v.in, _ = eventMessages(sp)
		}
		if haveChoice {
			v.out = firstJSON(choice, "message")
		} else if detailsOut != nil {
			v.out = partField(detailsOut, "content")
		}
	}
}

// strandsBlock is a Strands (Bedrock Converse) content block.
type strandsBlock struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ID    string          `json:"toolUseId"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"toolUse"`
	Reasoning *struct {
		Text *struct {
			Text string `json:"text"`
		} `json:"reasoningText"`
	} `json:"reasoningContent"`
	JSON json.RawMessage `json:"json"`
}

// strandsAnswer reads a model's answer as content blocks: text, toolUse
// (tool calls) and reasoningContent (Thinking).
func strandsAnswer(v *spanInfo, msg trace.Value) {
	var blocks []strandsBlock
	if len(msg) == 0 || msg[0] != '[' || json.Unmarshal(msg, &blocks) != nil {
		v.out = msg
		return
	}
	var text, thinking strings.Builder
	var calls []toolCall
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			text.WriteString(*b.Text)
		case b.ToolUse != nil:
			calls = append(calls, toolCall{ID: b.ToolUse.ID, Name: b.ToolUse.Name, Input: b.ToolUse.Input})
		case b.Reasoning != nil && b.Reasoning.Text != nil:
			if thinking.Len() > 0 {
				thinking.WriteByte('\n')
			}
			thinking.WriteString(b.Reasoning.Text.Text)
		}
	}
	v.out = nativeOutput(text.String(), calls)
	if thinking.Len() > 0 {
		v.thinking = trace.Text(thinking.String())
	}
}

// strandsResult simplifies a tool result's content blocks to the one
// block's text or JSON when there is one.
func strandsResult(content trace.Value) trace.Value {
	var blocks []strandsBlock
	if len(content) == 0 || content[0] != '[' || json.Unmarshal(content, &blocks) != nil || len(blocks) != 1 {
		return content
	}
	switch b := blocks[0]; {
	case b.Text != nil:
		return trace.Text(*b.Text)
	case len(b.JSON) > 0:
		return trace.Value(b.JSON)
	}
	return content
}

// strandsParts reads the finish reason and the reasoning of GenAI output
// messages as Strands writes them (a reasoningContent block becomes a part
// of type "reasoningContent").
func strandsParts(out trace.Value) (finish string, thinking trace.Value) {
	var msgs []struct {
		Finish string `json:"finish_reason"`
		Parts  []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		} `json:"parts"`
	}
	if json.Unmarshal(out, &msgs) != nil {
		return "", nil
	}
	var texts []string
	for _, m := range msgs {
		if finish == "" {
			finish = m.Finish
		}
		for _, p := range m.Parts {
			var r struct {
				Text *struct {
					Text string `json:"text"`
				} `json:"reasoningText"`
			}
			if p.Type == "reasoningContent" && json.Unmarshal(p.Content, &r) == nil && r.Text != nil {
				texts = append(texts, r.Text.Text)
			}
		}
	}
	if len(texts) > 0 {
		thinking = trace.Text(strings.Join(texts, "\n"))
	}
	return finish, thinking
}

// partField returns field of the first part of the first GenAI message
// (a tool_call part's arguments, a tool_call_response part's response, a
// text part's content), or the messages as they are.
func partField(msgs trace.Value, field string) trace.Value {
	var ms []struct {
		Parts []map[string]json.RawMessage `json:"parts"`
	}
	if json.Unmarshal(msgs, &ms) != nil || len(ms) == 0 || len(ms[0].Parts) == 0 {
		return msgs
	}
	if f, ok := ms[0].Parts[0][field]; ok {
		return trace.Value(f)
	}
	return msgs
}

// --- Eino ------------------------------------------------------------------------

// readEino reads the spans of Eino's apmplus callback (cloudwego/eino-ext
// callbacks/apmplus/apmplus.go): the callback's input and output as
// gen_ai.prompt.N.* / gen_ai.completion.N.* (a message's content, or the
// whole callback value as JSON in gen_ai.prompt.0.content /
// gen_ai.completion.0.content), gen_ai.input / gen_ai.output on the root,
// the component's name in runinfo.name.
func readEino(v *spanInfo, kind Kind, a pcommon.Map, sp ptrace.Span) {
	v.name = firstStr(a, "runinfo.name")
	switch kind {
	case KindModel:
		v.in = indexed(a, "gen_ai.prompt.")
		if _, ok := a.Get("gen_ai.completion.1.content"); ok {
			return // several messages: read as GenAI
		}
		c := strings.TrimSpace(str(a, "gen_ai.completion.0.content"))
		switch {
		case c == "":
		case c[0] == '[':
			einoMessages(v, c) // messages without text (tool calls) are written whole
		default:
			v.out = trace.Text(c)
		}
	case KindTool:
		v.in = einoField(firstJSON(a, "gen_ai.prompt.0.content"), "ArgumentsInJSON")
		v.out = einoField(firstJSON(a, "gen_ai.completion.0.content"), "Response")
	default:
		if sp.ParentSpanID().IsEmpty() {
			v.in, v.out = nonEmpty(a, "gen_ai.input"), einoAnswer(nonEmpty(a, "gen_ai.output"))
		}
		if v.in == nil {
			v.in = firstJSON(a, "gen_ai.prompt.0.content")
		}
		if v.out == nil {
			v.out = firstJSON(a, "gen_ai.completion.0.content")
		}
	}
}

// einoAnswer returns the text of the one message a graph answered with,
// or out as it is.
func einoAnswer(out trace.Value) trace.Value {
	if len(out) == 0 || out[0] != '[' {
		return out
	}
	var ms []struct {
		Role      string          `json:"role"`
		Content   string          `json:"content"`
		ToolCalls json.RawMessage `json:"tool_calls"`
	}
	if json.Unmarshal(out, &ms) != nil || len(ms) != 1 || ms[0].Role != "assistant" || ms[0].Content == "" || len(ms[0].ToolCalls) > 0 {
		return out
	}
	return trace.Text(ms[0].Content)
}

// einoMessages reads Eino schema.Messages (JSON): content, tool_calls,
// reasoning_content and response_meta (finish_reason, usage).
func einoMessages(v *spanInfo, s string) {
	var ms []struct {
		Content   string `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		Reasoning string `json:"reasoning_content"`
		Meta      *struct {
			Finish string `json:"finish_reason"`
			Usage  *struct {
				Prompt     int64 `json:"prompt_tokens"`
				Completion int64 `json:"completion_tokens"`
				Details    struct {
					Cached int64 `json:"cached_tokens"`
				} `json:"prompt_token_details"`
				OutDetails struct {
					Reasoning int64 `json:"reasoning_tokens"`
				} `json:"completion_token_details"`
			} `json:"usage"`
		} `json:"response_meta"`
	}
	if json.Unmarshal([]byte(s), &ms) != nil {
		v.out = trace.Raw([]byte(s))
		return
	}
	var text, thinking strings.Builder
	var calls []toolCall
	for _, m := range ms {
		text.WriteString(m.Content)
		if m.Reasoning != "" {
			thinking.WriteString(m.Reasoning)
		}
		for _, c := range m.ToolCalls {
			calls = append(calls, toolCall{ID: c.ID, Name: c.Function.Name, Input: c.Function.Arguments})
		}
		if m.Meta != nil {
			if v.finish == "" {
				v.finish = m.Meta.Finish
			}
			if u := m.Meta.Usage; u != nil {
				v.usage = trace.Usage{InputTokens: u.Prompt, OutputTokens: u.Completion, CachedTokens: u.Details.Cached, ReasoningTokens: u.OutDetails.Reasoning}
			}
		}
	}
	v.out = nativeOutput(text.String(), calls)
	if thinking.Len() > 0 {
		v.thinking = trace.Text(thinking.String())
	}
}

// einoField unwraps a tool's callback value ({"ArgumentsInJSON": "…"},
// {"Response": "…"}): the field, its JSON text unwrapped.
func einoField(v trace.Value, field string) trace.Value {
	if len(v) == 0 || v[0] != '{' || !bytes.Contains(v, []byte(field)) {
		return v
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return v
	}
	f, ok := m[field]
	if !ok {
		return v
	}
	return trace.Value(argsJSON(f))
}
