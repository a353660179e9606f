package otlp

import (
	"encoding/json"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Dialects: which instrumentation wrote a span, and what the span is.
//
// A span's kind is decided by what the span IS, in this order: an explicit
// kind (openinference.span.kind, gen_ai.operation.name,
// traceloop.span.kind, the Vercel AI SDK's operation id, Genkit's action
// subtype), then what only a run span carries (Pydantic AI's agent_name,
// final_result, all messages), then the attributes that only hint at a
// kind (a model name or token counts: a model call; a tool name: a tool;
// an agent name: an agent). Hints come last because instrumentations copy
// them onto spans that are not what they hint: Pydantic AI and OpenLLMetry
// put the agent's name on every span inside an agent, and Pydantic AI puts
// the run's token totals on its run span (which alone has agent_name with
// model_name, final_result and all its messages).
//
// Two more rules look beyond one attribute. LangChain's OpenInference
// instrumentation calls every run with "agent" in its name an AGENT; a
// LangGraph node so named (its metadata's langgraph_node is the span's
// name) is one step of the graph's run, not a child agent. And a model
// span with a model span under it that carries tokens is a step (Map's
// nestedCalls, in otlp.go): one request seen by a framework and by its
// client library.

// dialect is the instrumentation that wrote a span, as far as reading its
// fields goes.
type dialect uint8

const (
	dialectNone dialect = iota
	dialectOpenInference
	dialectGenAI
	dialectVercel    // Vercel AI SDK, ai.* attributes
	dialectPydantic  // Pydantic AI (and Logfire, which exports it)
	dialectGenkit    // Firebase Genkit, genkit:* attributes
	dialectTraceloop // Traceloop OpenLLMetry, traceloop.* attributes
	dialectADK       // Google Agent Development Kit, gcp.vertex.agent.*
	dialectStrands   // Strands Agents, GenAI spans with content in events
	dialectEino      // Eino's apmplus callback, gen_ai.span.kind
)

// dialectNames are the convention names Classify returns.
var dialectNames = [...]string{
	dialectNone:          "",
	dialectOpenInference: "openinference",
	dialectGenAI:         "gen_ai",
	dialectVercel:        "vercel_ai",
	dialectPydantic:      "pydantic_ai",
	dialectGenkit:        "genkit",
	dialectTraceloop:     "traceloop",
	dialectADK:           "adk",
	dialectStrands:       "strands",
	dialectEino:          "eino",
}

// Instrumentation scope names that identify a dialect.
const (
	scopePydantic = "pydantic-ai"                                     // pydantic_ai/models/instrumented.py
	scopeADK      = "gcp.vertex.agent"                                // google/adk telemetry.py
	scopeStrands  = "strands.telemetry.tracer"                        // strands/telemetry/tracer.py
	scopeEino     = "github.com/cloudwego/eino-ext/callbacks/apmplus" // callbacks/apmplus/apmplus.go
	systemStrands = "strands-agents"                                  // its gen_ai.system / gen_ai.provider.name
	systemEino    = "eino"                                            // its gen_ai.system
)

// marks is what one pass over a span's attributes found: the values that
// say what the span is, and which of the keys mapping reads are present.
type marks struct {
	oiKind, genaiOp, tlKind string // openinference.span.kind, gen_ai.operation.name, traceloop.span.kind
	vercelOp                string // ai.operationId, or the operation.name an ai.* span carries
	genkitType, genkitSub   string // genkit:type, genkit:metadata:subtype
	genkitPath              string // genkit:path, whose last step names the subtype too
	system                  string // gen_ai.system or gen_ai.provider.name: a framework's own name for some
	einoKind                string // gen_ai.span.kind (Eino's apmplus callback)
	metadata                string // metadata (OpenInference: LangChain's run metadata, as JSON)

	hasOI, hasOp, hasTL bool

	modelHint    bool // a model name, a prompt or token counts (older GenAI, OpenLLMetry)
	tokens       bool // input token counts (GenAI, OpenInference, the AI SDK)
	toolName     bool // gen_ai.tool.name
	agentName    bool // gen_ai.agent.name
	pydanticRun  bool // final_result, pydantic_ai.all_messages or all_messages_events (or agentName and modelName below)
	pydAgentName bool // agent_name
	pydModelName bool // model_name
	pydantic     bool // tool_arguments / tool_response (Pydantic AI ≤ v2 tool spans)
	vercelTool   bool // ai.toolCall.name
	vercelModel  bool // ai.model.id
	tlPropagated bool // traceloop.workflow.name / traceloop.entity.path: copied onto every span of a workflow
	adk          bool // gcp.vertex.agent.* attributes
	sysInstr     bool // gen_ai.system_instructions
	genkit       bool // any genkit:* attribute
}

// scanMarks reads a span's attributes once.
func scanMarks(attrs pcommon.Map) marks {
	var m marks
	attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case "openinference.span.kind":
			m.oiKind, m.hasOI = v.AsString(), true
		case "gen_ai.operation.name":
			m.genaiOp, m.hasOp = v.AsString(), true
		case "traceloop.span.kind":
			m.tlKind, m.hasTL = v.AsString(), true
		case "ai.operationId":
			m.vercelOp = v.AsString()
		case "operation.name":
			if m.vercelOp == "" {
				if s := v.AsString(); strings.HasPrefix(s, "ai.") {
					m.vercelOp, _, _ = strings.Cut(s, " ") // "ai.generateText myFunctionId"
				}
			}
		case "ai.toolCall.name":
			m.vercelTool = true
		case "ai.model.id":
			m.vercelModel = true
		case "genkit:type":
			m.genkitType, m.genkit = v.AsString(), true
		case "genkit:metadata:subtype":
			m.genkitSub, m.genkit = v.AsString(), true
		case "genkit:path":
			m.genkitPath, m.genkit = v.AsString(), true
		case "genkit:name", "genkit:input", "genkit:output", "genkit:state":
			m.genkit = true
		case "gen_ai.system", "gen_ai.provider.name":
			if v.Type() == pcommon.ValueTypeStr {
				m.system = v.Str()
			}
			m.modelHint = m.modelHint || k == "gen_ai.system"
		case "gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens":
			m.modelHint, m.tokens = true, true
		case "llm.token_count.prompt", "ai.usage.inputTokens", "ai.usage.promptTokens":
			m.tokens = true
		case "gen_ai.request.model", "gen_ai.response.model", "gen_ai.prompt.0.content", "llm.request.type":
			m.modelHint = true
		case "gen_ai.span.kind":
			m.einoKind = v.AsString()
		case "metadata":
			if v.Type() == pcommon.ValueTypeStr {
				m.metadata = v.Str()
			}
		case "gen_ai.tool.name":
			m.toolName = true
		case "gen_ai.agent.name":
			m.agentName = true
		case "final_result", "pydantic_ai.all_messages", "all_messages_events":
			m.pydanticRun = true
		case "agent_name":
			m.pydAgentName = true
		case "model_name":
			m.pydModelName = true
		case "tool_arguments", "tool_response":
			m.pydantic = true
		case "traceloop.workflow.name", "traceloop.entity.path":
			m.tlPropagated = true
		case "gen_ai.system_instructions":
			m.sysInstr = true
		default:
			if strings.HasPrefix(k, "gcp.vertex.agent.") {
				m.adk = true
			}
		}
		return true
	})
	// Pydantic AI starts its run span with both (the others come at its end).
	m.pydanticRun = m.pydanticRun || m.pydAgentName && m.pydModelName
	return m
}

// classify tells what a span is (see the comment at the top of this file)
// and which dialect to read its fields in. scope is the instrumentation
// scope's name and spanName the span's, both "" when unknown.
func (m *marks) classify(scope, spanName string) (Kind, dialect) {
	// The dialect to read fields in, from the attributes only one
	// instrumentation writes (or its scope).
	d := dialectNone
	switch {
	case m.vercelOp != "" || m.vercelTool:
		d = dialectVercel
	case m.genkit:
		d = dialectGenkit
	case m.hasTL || m.tlPropagated:
		d = dialectTraceloop
	case m.pydanticRun || m.pydantic || scope == scopePydantic:
		d = dialectPydantic
	case m.adk || scope == scopeADK:
		d = dialectADK
	case scope == scopeStrands || m.system == systemStrands:
		d = dialectStrands
	case m.einoKind != "" && (scope == scopeEino || m.system == systemEino):
		d = dialectEino
	}
	or := func(fallback dialect) dialect {
		if d != dialectNone {
			return d
		}
		return fallback
	}

	if m.hasOI {
		switch strings.ToUpper(m.oiKind) {
		case "LLM", "EMBEDDING":
			return KindModel, dialectOpenInference
		case "TOOL", "RETRIEVER", "RERANKER":
			return KindTool, dialectOpenInference
		case "AGENT":
			if langGraphNode(m.metadata, spanName) {
				// LangChain's instrumentation calls every run with "agent"
				// in its name an agent: a LangGraph node named so is one
				// step of the graph's run (create_react_agent's model node).
				return KindGeneric, dialectOpenInference
			}
			return KindAgent, dialectOpenInference
		}
		return KindGeneric, dialectOpenInference
	}
	if d == dialectEino {
		return einoKind(m.einoKind), d
	}
	if m.hasOp {
		switch m.genaiOp {
		case "chat", "text_completion", "generate_content", "completion", "embeddings",
			"chat.completions", "chat.streaming_completions", "text.completions", "text.streaming_completions": // Semantic Kernel
			return KindModel, or(dialectGenAI)
		case "retrieval": // OpenLIT's vector stores and retrievers
			return KindTool, or(dialectGenAI)
		case "execute_tool":
			return KindTool, or(dialectGenAI)
		case "invoke_agent", "create_agent":
			return KindAgent, or(dialectGenAI)
		}
		return KindGeneric, or(dialectGenAI)
	}
	if m.hasTL {
		switch strings.ToLower(m.tlKind) {
		case "agent":
			return KindAgent, dialectTraceloop
		case "tool":
			return KindTool, dialectTraceloop
		}
		return KindGeneric, dialectTraceloop // workflow, task, unknown
	}
	switch d {
	case dialectVercel:
		return vercelKind(m.vercelOp, m.vercelTool, m.vercelModel, spanName), d
	case dialectGenkit:
		return genkitKind(m), d
	}
	if m.pydanticRun {
		return KindAgent, dialectPydantic // a run span, whatever token totals it carries
	}
	if d == dialectADK && strings.HasPrefix(spanName, "agent_run [") {
		return KindAgent, d // ADK before the GenAI conventions: the span's name is all it has
	}
	// Older GenAI spans carry no operation name.
	if m.modelHint {
		return KindModel, or(dialectGenAI)
	}
	if m.toolName {
		return KindTool, or(dialectGenAI)
	}
	// gen_ai.agent.name alone says an agent ran the span, not that the span
	// is the agent's run, when it was copied onto every span of a workflow.
	if m.agentName && !m.tlPropagated {
		return KindAgent, or(dialectGenAI)
	}
	return KindGeneric, d
}

// vercelKind: ai.generateText / ai.streamText / ai.generateObject /
// ai.streamObject are the calls an application makes (agents: they loop
// over steps and tools); their .doGenerate / .doStream steps, and the
// .doEmbed steps of ai.embed / ai.embedMany, are the provider calls;
// ai.toolCall is a tool (packages/ai/core/telemetry, packages/otel's
// legacy-open-telemetry.ts, content/docs/03-ai-sdk-core/60-telemetry.mdx).
func vercelKind(op string, tool, model bool, spanName string) Kind {
	if op == "" && strings.HasPrefix(spanName, "ai.") && (tool || model) {
		op = spanName // AI SDK 3.x spans carry no operation id
	}
	switch op {
	case "ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject":
		return KindAgent
	case "ai.toolCall":
		return KindTool
	}
	if strings.HasSuffix(op, ".doGenerate") || strings.HasSuffix(op, ".doStream") || strings.HasSuffix(op, ".doEmbed") {
		return KindModel
	}
	if op == "" && tool {
		return KindTool
	}
	return KindGeneric
}

// genkitKind: an action span (genkit:type action) is what its subtype says
// (js/core/src/action.ts, go/core/tracing/tracing.go); flows are the runs
// applications start, so agents; util, flowStep, promptTemplate and the
// other span types are steps.
func genkitKind(m *marks) Kind {
	sub := m.genkitSub
	if sub == "" {
		// The path's last step is "{name,t:action,s:model}" (or t:flow).
		if i := strings.LastIndex(m.genkitPath, "/{"); i >= 0 {
			last := m.genkitPath[i:]
			if j := strings.Index(last, ",s:"); j >= 0 {
				sub = strings.TrimRight(last[j+3:], "}")
				sub, _, _ = strings.Cut(sub, ",")
			} else if strings.Contains(last, ",t:flow") {
				sub = "flow"
			}
		}
	}
	switch sub {
	case "flow":
		return KindAgent
	case "model", "background-model", "embedder":
		return KindModel
	case "tool", "tool.v2", "retriever", "indexer", "reranker":
		// Genkit Go runs every tool as a tool.v2 action (go/ai/tools.go).
		return KindTool
	}
	return KindGeneric
}

// langGraphNode tells whether an OpenInference span is a LangGraph node:
// LangChain's run metadata (the metadata attribute, JSON) names the node
// in langgraph_node, and the node's run is named after it.
func langGraphNode(metadata, spanName string) bool {
	if metadata == "" || !strings.Contains(metadata, `"langgraph_node"`) {
		return false
	}
	var md struct {
		Node string `json:"langgraph_node"`
	}
	return json.Unmarshal([]byte(metadata), &md) == nil && md.Node != "" && md.Node == spanName
}

// einoKind: Eino's apmplus callback names each span's component in
// gen_ai.span.kind, lowercased (eino components/types.go, compose's
// Graph, Chain, Lambda, ToolsNode), and "workflow" at the root
// (cloudwego/eino-ext callbacks/apmplus/apmplus.go).
func einoKind(k string) Kind {
	switch k {
	case "chatmodel", "agenticmodel", "embedding":
		return KindModel
	case "tool", "retriever":
		return KindTool
	case "agent", "agenticagent": // eino/adk ComponentOfAgent, ComponentOfAgenticAgent
		return KindAgent
	}
	return KindGeneric // workflow, graph, chain, lambda, toolsnode, chattemplate, …
}
