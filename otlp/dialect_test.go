package otlp

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/trace"
)

// A want* string is compared whole, or, when it starts with "~", as a part
// of the value; "" is not checked.
func matches(got, want string) bool {
	if want == "" {
		return true
	}
	if rest, ok := strings.CutPrefix(want, "~"); ok {
		return strings.Contains(got, rest)
	}
	return got == want
}

type wantRun struct {
	name, parent string // parent: "" for the root run (run.start/run.end), else a child run's parent span id
	in, out      string
	status       string
}

type wantCall struct {
	parent          string // parent span id (hex)
	name            string
	usage           trace.Usage
	finish          string
	in, out, think  string
	err             string
	mustHaveNoThink bool
}

type wantTool struct {
	parent, name, in, out, err string
}

type dialectCase struct {
	file        string
	runs        []wantRun  // run.start/run.end and child.spawn/child.end, in order
	models      []wantCall // model.call, in order
	tools       []wantTool // tool.start + tool.end/tool.error, in order
	nodes       []string   // node.start names, in order
	inputTokens int64      // trace.StatsOf: the model calls' input tokens, each counted once
	toolErrors  int
}

// dialectCases are the dialect fixtures and what each must map to. The
// fixtures are written from each framework's own instrumentation code and
// documentation (docs/otlp-mapping.md names the files).
var dialectCases = []dialectCase{{
	// Vercel AI SDK: ai.generateText / ai.streamText are runs, their
	// doGenerate / doStream steps the model calls, ai.toolCall the tools.
	// Three SDK generations: 5/6 (ai.usage.inputTokens, reasoning, cached,
	// tools under the step), 4 (promptTokens, args as a JSON string, tools
	// under the call) and 3 (no ai.operationId, ai.result.*).
	file: "vercel.json",
	runs: []wantRun{
		{name: "weather-agent", in: `{"system":"You are a weather assistant.","prompt":"Weather in Paris and Oslo?"}`,
			out: `"Paris is 18°C and sunny; the Oslo forecast service failed."`, status: "success"},
		{name: "ai.streamText", in: `{"prompt":"What is 17*23? Use the calculator."}`, out: `"17 × 23 = 391."`, status: "success"},
		{name: "ai.generateText", in: `{"prompt":"Greet Ada"}`, out: `"Hello, Ada!"`, status: "success"},
	},
	models: []wantCall{
		{parent: "1000000000000001", name: "gpt-5-mini-2025-08-07", finish: "tool-calls",
			usage: trace.Usage{Provider: "openai", InputTokens: 600, OutputTokens: 150, ReasoningTokens: 64},
			in:    `~{"role":"user","content":[{"type":"text","text":"Weather in Paris and Oslo?"}]}`,
			out:   `{"tool_calls":[{"id":"call_1","name":"weather","input":{"city":"Paris"}},{"id":"call_2","name":"weather","input":{"city":"Oslo"}}]}`,
			think: `"Two cities: call weather for each."`},
		{parent: "1000000000000001", name: "gpt-5-mini-2025-08-07", finish: "stop",
			usage: trace.Usage{Provider: "openai", InputTokens: 750, OutputTokens: 80, CachedTokens: 512, ReasoningTokens: 32},
			out:   `"Paris is 18°C and sunny; the Oslo forecast service failed."`, mustHaveNoThink: true},
		{parent: "2000000000000001", name: "claude-sonnet-4-20250514", finish: "tool-calls",
			usage: trace.Usage{Provider: "anthropic", InputTokens: 400, OutputTokens: 40},
			out:   `{"tool_calls":[{"id":"toolu_1","name":"calculator","input":{"expression":"17*23"}}]}`},
		{parent: "2000000000000001", name: "claude-sonnet-4-20250514", finish: "stop",
			usage: trace.Usage{Provider: "anthropic", InputTokens: 500, OutputTokens: 20}, out: `"17 × 23 = 391."`},
		{parent: "3000000000000001", name: "gpt-4o", finish: "tool-calls",
			usage: trace.Usage{Provider: "openai", InputTokens: 50, OutputTokens: 14},
			in:    `[{"role":"user","content":[{"type":"text","text":"Greet Ada"}]}]`,
			out:   `{"tool_calls":[{"id":"call_9","name":"greet","input":{"name":"Ada"}}]}`},
		{parent: "3000000000000001", name: "gpt-4o", finish: "stop",
			usage: trace.Usage{Provider: "openai", InputTokens: 60, OutputTokens: 5}, out: `"Hello, Ada!"`},
	},
	tools: []wantTool{
		{parent: "1000000000000002", name: "weather", in: `{"city":"Paris"}`, out: `{"city":"Paris","tempC":18,"sky":"sunny"}`},
		{parent: "1000000000000002", name: "weather", in: `{"city":"Oslo"}`, err: "forecast service unavailable"},
		{parent: "2000000000000001", name: "calculator", in: `{"expression":"17*23"}`, out: `391`},
		{parent: "3000000000000001", name: "greet", in: `{"name":"Ada"}`, out: `"Hello, Ada!"`},
	},
	inputTokens: 600 + 750 + 400 + 500 + 50 + 60, // not the outer spans' totals again
	toolErrors:  1,
}, {
	// Pydantic AI: the agent run span (with the run's token totals) is the
	// run; chat spans are the model calls; running tool / execute_tool the
	// tools, a ToolRetryError a tool error. Version 2 and version 5.
	file: "pydantic_ai.json",
	runs: []wantRun{
		{name: "support", in: `[{"role":"system","parts":[{"type":"text","content":"Be brief."}]},{"role":"user","parts":[{"type":"text","content":"Where is order 17? Refund it."}]}]`,
			out: `"Order 17 shipped on 2025-11-20; the refund needs approval."`, status: "success"},
		{name: "researcher", in: `[{"role":"user","parts":[{"type":"text","content":"What is the answer to everything?"}]}]`,
			out: `{"answer":"42","confidence":0.9}`, status: "success"},
	},
	models: []wantCall{
		{parent: "4000000000000001", name: "gpt-4o-2024-08-06", finish: "tool_call",
			usage: trace.Usage{Provider: "openai", InputTokens: 800, OutputTokens: 60, ReasoningTokens: 12, CostUSD: 0.0026},
			in:    `[{"role":"system","parts":[{"type":"text","content":"Be brief."}]},{"role":"user","parts":[{"type":"text","content":"Where is order 17? Refund it."}]}]`,
			out:   `~{"type":"tool_call","id":"call_b","name":"refund","arguments":{"id":17}}`,
			think: `"Look the order up, then refund."`},
		{parent: "4000000000000001", name: "gpt-4o-2024-08-06", finish: "stop",
			usage: trace.Usage{Provider: "openai", InputTokens: 1100, OutputTokens: 35, CachedTokens: 768},
			in:    `~{"type":"tool_call_response","id":"call_a"`, out: `~Order 17 shipped on 2025-11-20`, mustHaveNoThink: true},
		{parent: "5000000000000001", name: "claude-sonnet-4-5-20250929", finish: "tool_call",
			usage: trace.Usage{Provider: "anthropic", InputTokens: 300, OutputTokens: 20, CachedTokens: 100}},
		{parent: "5000000000000001", name: "claude-sonnet-4-5-20250929", finish: "tool_call",
			usage: trace.Usage{Provider: "anthropic", InputTokens: 420, OutputTokens: 30}},
	},
	tools: []wantTool{
		{parent: "4000000000000001", name: "lookup_order", in: `{"id":17}`, out: `{"status":"shipped","date":"2025-11-20"}`},
		{parent: "4000000000000001", name: "refund", in: `{"id":17}`, out: `"refunds need approval\n\nFix the errors and try again."`,
			err: "pydantic_ai.exceptions.ToolRetryError: refunds need approval"},
		{parent: "5000000000000001", name: "search", in: `{"q":"answer to everything"}`, out: `"42, per Douglas Adams"`},
		{parent: "5000000000000001", name: "final_result", in: `{"answer":"42","confidence":0.9}`},
	},
	inputTokens: 800 + 1100 + 300 + 420, // the agent runs' totals are not model calls
	toolErrors:  1,
}, {
	// The current GenAI conventions: parts, reasoning → thinking, system
	// instructions in front of the history, cache and reasoning tokens;
	// the agent span's totals are not a model call.
	file: "genai_parts.json",
	runs: []wantRun{{name: "planner",
		in:     `[{"role":"system","parts":[{"type":"text","content":"Plan trips. Check opening hours."}]},{"role":"user","parts":[{"type":"text","content":"Plan a morning in Rome"}]}]`,
		out:    `"Be at the Colosseum at 09:00, then walk to the Forum."`, // the one text answer, as text
		status: "success"}},
	models: []wantCall{
		{parent: "6000000000000002", name: "o4-mini-2025-04-16", finish: "tool_call",
			usage: trace.Usage{Provider: "openai", InputTokens: 900, OutputTokens: 250, ReasoningTokens: 192},
			in:    `[{"role":"system","parts":[{"type":"text","content":"Plan trips. Check opening hours."}]},{"role":"user","parts":[{"type":"text","content":"Plan a morning in Rome"}]}]`,
			out:   `~{"type":"tool_call","id":"call_h","name":"opening_hours","arguments":{"site":"Colosseum"}}`,
			think: `"I need the Colosseum's hours first."`},
		{parent: "6000000000000005", name: "o4-mini-2025-04-16", finish: "stop",
			usage: trace.Usage{Provider: "openai", InputTokens: 1200, OutputTokens: 150, CachedTokens: 896, ReasoningTokens: 64},
			in:    `~[{"role":"system","parts":[{"type":"text","content":"Plan trips. Check opening hours."}]},{"role":"user"`,
			think: `"Opens at nine.\nThe Forum is next door."`},
	},
	tools:       []wantTool{{parent: "6000000000000002", name: "opening_hours", in: `{"site":"Colosseum"}`, out: `{"opens":"09:00"}`}},
	nodes:       []string{"step 1", "step 2"},
	inputTokens: 900 + 1200,
}, {
	// Genkit: the flow is the run, model actions the model calls (usage in
	// genkit:output; Gemini's thoughts counted in the output), tool and
	// retriever actions tools, the generate util a step whose aggregated
	// usage is not counted again; genkit:state error a tool error.
	file: "genkit.json",
	runs: []wantRun{{name: "menuSuggestionFlow", in: `"vegetarian"`, out: `"Try the mushroom risotto."`, status: "success"}},
	models: []wantCall{
		{parent: "7000000000000003", name: "googleai/gemini-2.5-flash", finish: "stop",
			usage: trace.Usage{Provider: "googleai", InputTokens: 600, OutputTokens: 60, ReasoningTokens: 40},
			in:    `~"messages":[{"role":"system","content":[{"text":"You suggest dishes."}]}`,
			out:   `{"tool_calls":[{"id":"r1","name":"menuLookup","input":{"diet":"vegetarian"}},{"id":"r2","name":"allergyCheck","input":{"dish":"mushroom risotto"}}]}`,
			think: `"Check today's menu, then allergens."`},
		{parent: "7000000000000003", name: "googleai/gemini-2.5-flash", finish: "stop",
			usage: trace.Usage{Provider: "googleai", InputTokens: 900, OutputTokens: 12, CachedTokens: 512},
			out:   `"Try the mushroom risotto."`, mustHaveNoThink: true},
	},
	tools: []wantTool{
		{parent: "7000000000000001", name: "menuRetriever", in: `~"vegetarian"`, out: `~"documents"`},
		{parent: "7000000000000003", name: "menuLookup", in: `{"diet":"vegetarian"}`, out: `["mushroom risotto","caprese"]`},
		{parent: "7000000000000003", name: "allergyCheck", in: `{"dish":"mushroom risotto"}`, err: "allergy service timeout"},
	},
	nodes:       []string{"generate"},
	inputTokens: 600 + 900,
	toolErrors:  1,
}, {
	// OpenLLMetry: workflow → run, agent → child run, task → step, tool →
	// tool (kwargs as the input); chat spans from its instrumentation; an
	// HTTP span carrying the copied gen_ai.agent.name stays a step.
	file: "traceloop.json",
	runs: []wantRun{
		{name: "joke_workflow", in: `{"topic":"otters"}`, out: `"Why do otters hold hands? So they don't drift apart."`, status: "success"},
		{name: "joke_agent", parent: "8000000000000001", in: `{"args":["otters"],"kwargs":{}}`, out: `"Why do otters hold hands? So they don't drift apart."`, status: "success"},
	},
	models: []wantCall{
		{parent: "8000000000000003", name: "gpt-4o-mini-2024-07-18", finish: "tool_calls",
			usage: trace.Usage{Provider: "openai", InputTokens: 55, OutputTokens: 18},
			in:    `[{"role":"system","content":"You are funny."},{"role":"user","content":"Tell a joke about otters"}]`,
			out:   `~"tool_calls":[{"id":"call_t","name":"get_fact"`},
		{parent: "8000000000000003", name: "gpt-4o-mini-2024-07-18", finish: "stop",
			usage: trace.Usage{Provider: "openai", InputTokens: 90, OutputTokens: 22, CachedTokens: 64}, // output = total − input
			out:   `~"content":"Why do otters hold hands? So they don't drift apart."`},
	},
	tools: []wantTool{
		{parent: "8000000000000003", name: "get_fact", in: `{"animal":"otter"}`, out: `"Otters hold hands while sleeping."`},
		{parent: "8000000000000003", name: "translate", in: `{"args":["Otters hold hands","de"],"kwargs":{}}`, err: "DeepL quota exceeded"},
	},
	nodes:       []string{"create_joke", "POST"},
	inputTokens: 55 + 90,
	toolErrors:  1,
}, {
	// Google ADK: invoke_agent (and the older agent_run [name]) are child
	// runs under the invocation; call_llm spans the model calls, read from
	// the LlmRequest / LlmResponse JSON (thought parts → thinking, Gemini
	// usage); execute_tool the tools.
	file: "adk.json",
	runs: []wantRun{
		{name: "invocation", status: "success"},
		{name: "weather_agent", parent: "9000000000000001", status: "success"},
		{name: "forecast_agent", parent: "9000000000000002", status: "success"},
	},
	models: []wantCall{
		{parent: "9000000000000002", name: "gemini-2.5-flash", finish: "stop",
			usage: trace.Usage{InputTokens: 420, OutputTokens: 45, ReasoningTokens: 30},
			in:    `~"contents":[{"role":"user","parts":[{"text":"Weather in Lima, and tomorrow's forecast?"}]}]`,
			out:   `{"tool_calls":[{"id":"adk-1","name":"get_weather","input":{"city":"Lima"}}]}`,
			think: `"The weather tool first."`},
		{parent: "9000000000000005", name: "gemini-2.5-flash", finish: "stop",
			usage: trace.Usage{InputTokens: 300, OutputTokens: 12},
			out:   `{"tool_calls":[{"id":"adk-2","name":"get_forecast","input":{"city":"Lima","days":1}}]}`},
		{parent: "9000000000000002", name: "gemini-2.5-flash", finish: "stop",
			usage: trace.Usage{InputTokens: 520, OutputTokens: 25, CachedTokens: 256},
			out:   `"Lima: 19°C and overcast. The forecast service is down."`, mustHaveNoThink: true},
	},
	tools: []wantTool{
		{parent: "9000000000000002", name: "get_weather", in: `{"city":"Lima"}`, out: `{"temp_c":19,"sky":"overcast"}`},
		{parent: "9000000000000005", name: "get_forecast", in: `{"city":"Lima","days":1}`, err: "forecast API down"},
	},
	inputTokens: 420 + 300 + 520,
	toolErrors:  1,
}, {
	// OpenAI Agents SDK (OpenInference): the trace's root and each agent
	// are runs; response spans the model calls (reasoning summaries →
	// thinking, tool calls from the output messages, cached and reasoning
	// tokens); function and handoff spans tools; a guardrail a step. The
	// OpenAI client's span under the SDK's response span is the same call:
	// the response span becomes a step and the call is counted once.
	file: "openai_agents.json",
	runs: []wantRun{
		{name: "Agent workflow", status: "success"},
		{name: "Triage", parent: "a100000000000001", status: "success"},
		{name: "Weather", parent: "a100000000000001", status: "success"},
	},
	models: []wantCall{
		{parent: "a100000000000007", name: "o4-mini-2025-04-16",
			usage: trace.Usage{Provider: "openai", InputTokens: 410, OutputTokens: 96, CachedTokens: 256, ReasoningTokens: 64},
			in:    `~{"role":"user","content":"What's the weather in Tokyo?"}`,
			out:   `{"tool_calls":[{"id":"call_w1","name":"get_weather","input":{"city":"Tokyo"}},{"id":"call_w2","name":"get_forecast","input":{"city":"Tokyo","days":2}}]}`,
			think: `"Tokyo: ask the weather tool, and the forecast."`},
		{parent: "a100000000000007", name: "o4-mini-2025-04-16",
			usage: trace.Usage{Provider: "openai", InputTokens: 620, OutputTokens: 40, CachedTokens: 384},
			out:   `"Tokyo is sunny at 22°C; the forecast service timed out."`, mustHaveNoThink: true},
		{parent: "a100000000000004", name: "gpt-4.1-2025-04-14",
			usage: trace.Usage{Provider: "openai", InputTokens: 320, OutputTokens: 18},
			in:    `[{"role":"system","content":"Route the user to the right agent."},{"role":"user","content":"What's the weather in Tokyo?"}]`,
			out:   `{"tool_calls":[{"id":"call_h1","name":"transfer_to_weather","input":{}}]}`},
	},
	tools: []wantTool{
		{parent: "a100000000000002", name: "handoff to Weather", in: `"Triage"`, out: `"Weather"`},
		{parent: "a100000000000007", name: "get_weather", in: `{"city":"Tokyo"}`, out: `{"temp_c":22,"sky":"sunny"}`},
		{parent: "a100000000000007", name: "get_forecast", in: `{"city":"Tokyo","days":2}`,
			err: "Error running tool: {'tool_name': 'get_forecast', 'error': 'forecast API timed out'}"},
	},
	nodes:       []string{"pii_check", "response"},
	inputTokens: 410 + 620 + 320,
	toolErrors:  1,
}, {
	// LangGraph's prebuilt ReAct agent (OpenInference's LangChain
	// instrumentation): the graph is the run, its answer the last AI
	// message; the "agent" node (an AGENT span by its name) and a chain
	// carrying token counts are steps; ChatOpenAI spans the model calls; a
	// tool's ToolMessage is its content.
	file: "langgraph.json",
	runs: []wantRun{{name: "LangGraph", in: `{"messages":[["user","What is 2**10? Then greet Ada."]]}`, out: `"2**10 is 1024. Hello, Ada!"`, status: "success"}},
	models: []wantCall{
		{parent: "b100000000000002", name: "gpt-4o-mini-2024-07-18", finish: "tool_calls",
			usage: trace.Usage{Provider: "openai", InputTokens: 150, OutputTokens: 22},
			in:    `[{"role":"user","content":"What is 2**10? Then greet Ada."}]`,
			out:   `{"tool_calls":[{"id":"call_p1","name":"power","input":{"base":2,"exp":10}}]}`},
		{parent: "b100000000000007", name: "gpt-4o-mini-2024-07-18", finish: "stop",
			usage: trace.Usage{Provider: "openai", InputTokens: 210, OutputTokens: 12, CachedTokens: 128},
			in:    `~{"role":"tool","content":"1024","tool_call_id":"call_p1"}`, out: `"2**10 is 1024. Hello, Ada!"`},
	},
	tools:       []wantTool{{parent: "b100000000000005", name: "power", in: `{"base":2,"exp":10}`, out: `"1024"`}},
	nodes:       []string{"agent", "should_continue", "tools", "agent"},
	inputTokens: 150 + 210,
}, {
	// CrewAI (OpenInference): the crew's kickoff is the run, a task an
	// agent's child run (named by the agent's role), LiteLLM's completion
	// spans the model calls, tool runs the tools.
	file: "crewai.json",
	runs: []wantRun{
		{name: "Crew.kickoff", in: `{"topic":"Artemis II"}`, out: `"Artemis II is planned for April 2026."`, status: "success"},
		{name: "Space Researcher", parent: "c100000000000001", out: `"Artemis II is planned for April 2026."`, status: "success"},
	},
	models: []wantCall{
		{parent: "c100000000000002", name: "gpt-4o-mini", usage: trace.Usage{Provider: "openai", InputTokens: 410, OutputTokens: 38},
			out: `~Action: search_web`},
		{parent: "c100000000000002", name: "gpt-4o-mini", usage: trace.Usage{Provider: "openai", InputTokens: 480, OutputTokens: 25, CachedTokens: 384},
			out: `~Final Answer: Artemis II is planned for April 2026.`},
	},
	tools: []wantTool{
		{parent: "c100000000000002", name: "search_web", in: `{"query":"Artemis II launch date"}`, out: `"NASA: Artemis II no earlier than April 2026."`},
		{parent: "c100000000000002", name: "fetch_page", in: `{"url":"https://example.org/artemis"}`, err: "HTTP 503 from example.org"},
	},
	inputTokens: 410 + 480,
	toolErrors:  1,
}, {
	// smolagents (OpenInference): the agent's run span carries the run's
	// token totals and is the run, not a model call; steps are steps;
	// generate spans the model calls; tools (final_answer too) with their
	// keyword arguments.
	file: "smolagents.json",
	runs: []wantRun{{name: "math_agent.run", in: `~"task":"How many seconds are in a leap year?"`, out: `31622400`, status: "success"}},
	models: []wantCall{
		{parent: "d100000000000002", name: "gpt-4.1-mini", usage: trace.Usage{Provider: "openai", InputTokens: 850, OutputTokens: 30},
			out: `{"tool_calls":[{"id":"call_c1","name":"calculator","input":{"expression":"366*24*3600"}}]}`},
		{parent: "d100000000000005", name: "gpt-4.1-mini", usage: trace.Usage{Provider: "openai", InputTokens: 980, OutputTokens: 28},
			out: `{"tool_calls":[{"id":"call_f1","name":"final_answer","input":{"answer":"31622400"}}]}`},
	},
	tools: []wantTool{
		{parent: "d100000000000002", name: "calculator", in: `{"expression":"366*24*3600"}`, out: `"31622400"`},
		{parent: "d100000000000005", name: "final_answer", in: `{"answer":"31622400"}`, out: `"31622400"`},
	},
	nodes:       []string{"Step 1", "Step 2"},
	inputTokens: 850 + 980, // not the run's totals again
}, {
	// LlamaIndex (OpenInference): the workflow is the run; achat_with_tools
	// wraps achat, two LLM spans for one request: the inner one is the call.
	file: "llamaindex.json",
	runs: []wantRun{{name: "AgentWorkflow.run", in: `{"user_msg":"What is 20% of 45 EUR in USD?"}`, out: `"20% of 45 EUR is 9 EUR, about 9.72 USD."`, status: "success"}},
	models: []wantCall{
		{parent: "e100000000000003", name: "gpt-4o-2024-08-06", usage: trace.Usage{Provider: "openai", InputTokens: 240, OutputTokens: 25},
			out: `{"tool_calls":[{"id":"call_x1","name":"convert","input":{"amount":9,"src":"EUR","dst":"USD"}}]}`},
		{parent: "e100000000000006", name: "gpt-4o-2024-08-06", usage: trace.Usage{Provider: "openai", InputTokens: 290, OutputTokens: 18, CachedTokens: 192},
			out: `"20% of 45 EUR is 9 EUR, about 9.72 USD."`},
	},
	tools:       []wantTool{{parent: "e100000000000001", name: "convert", in: `{"amount":9,"src":"EUR","dst":"USD"}`, out: `9.72`}},
	nodes:       []string{"FunctionAgent.take_step", "OpenAI.achat_with_tools", "FunctionAgent.take_step"},
	inputTokens: 240 + 290,
}, {
	// OpenLIT: GenAI spans with its cost (gen_ai.usage.cost), reasoning
	// text (gen_ai.content.reasoning) and tokens; the workflow's input and
	// output; an older version's content events.
	file: "openlit.json",
	runs: []wantRun{
		{name: "invoke_workflow research_crew", in: `{"topic":"AI papers"}`, out: `"The top paper proposes sparse routers."`, status: "success"},
		{name: "researcher", parent: "f100000000000001", out: `"The top paper proposes sparse routers."`, status: "success"},
	},
	models: []wantCall{
		{parent: "f100000000000002", name: "o4-mini-2025-04-16", finish: "tool_calls",
			usage: trace.Usage{Provider: "openai", InputTokens: 700, OutputTokens: 140, CachedTokens: 512, ReasoningTokens: 96, CostUSD: 0.00139},
			out:   `~{"type":"tool_call","id":"call_o1","name":"fetch_papers","arguments":{"day":"today"}}`,
			think: `"Fetch today's papers, then pick the most cited."`},
		{parent: "f100000000000002", name: "gpt-4o-mini-2024-07-18", finish: "stop",
			usage: trace.Usage{Provider: "openai", InputTokens: 900, OutputTokens: 35, CostUSD: 0.000156},
			in:    `~user: Summarise today's top AI paper.`, out: `"The top paper proposes sparse routers."`},
	},
	tools:       []wantTool{{parent: "f100000000000002", name: "fetch_papers", in: `{"day":"today"}`, out: `[{"title":"Sparse Routers","citations":41}]`}},
	inputTokens: 700 + 900,
}, {
	// Semantic Kernel: chat.completions / chat.streaming_completions are
	// model calls (gen_ai.response.finish_reason), execute_tool the kernel
	// functions, invoke_agent the run. Its messages go to logs, not spans.
	file: "semantic_kernel.json",
	runs: []wantRun{{name: "HostAgent", status: "success"}},
	models: []wantCall{
		{parent: "1200000000000001", name: "gpt-4o", finish: "tool_calls", usage: trace.Usage{Provider: "openai", InputTokens: 260, OutputTokens: 41}},
		{parent: "1200000000000001", name: "gpt-4o", finish: "stop", usage: trace.Usage{Provider: "openai", InputTokens: 420, OutputTokens: 33}},
	},
	tools: []wantTool{
		{parent: "1200000000000001", name: "MenuPlugin-get_specials"},
		{parent: "1200000000000001", name: "MenuPlugin-get_item_price", err: "KernelFunctionInvocationError('price service unavailable')"},
	},
	inputTokens: 260 + 420,
	toolErrors:  1,
}, {
	// Strands Agents: invoke_agent (with the run's totals) is the run,
	// event loop cycles steps, chat the model calls (content blocks from
	// gen_ai.choice, reasoningContent → thinking), execute_tool the tools;
	// the default per-message events and the latest conventions' details
	// events; provider left empty (gen_ai.system is Strands' own name).
	file: "strands.json",
	runs: []wantRun{
		{name: "weather_agent", in: `[{"role":"user","content":[{"text":"What's the weather in Oslo?"}]}]`, out: `"It's 4°C and cloudy in Oslo.\n"`, status: "success"},
		{name: "math_agent", in: `[{"role":"user","parts":[{"type":"text","content":"What is 7 divided by 0, and 7 times 6?"}]}]`,
			out: `"7 ÷ 0 is undefined; 7 × 6 = 42."`, status: "success"},
	},
	models: []wantCall{
		{parent: "1300000000000002", name: "us.anthropic.claude-sonnet-4-20250514-v1:0", finish: "tool_use",
			usage: trace.Usage{InputTokens: 730, OutputTokens: 120},
			in:    `[{"role":"system","content":[{"text":"You report the weather."}]},{"role":"user","content":[{"text":"What's the weather in Oslo?"}]}]`,
			out:   `{"content":"Let me check.","tool_calls":[{"id":"tooluse_w1","name":"get_weather","input":{"city":"Oslo"}}]}`,
			think: `"The user wants Oslo's weather: call get_weather."`},
		{parent: "1300000000000005", name: "us.anthropic.claude-sonnet-4-20250514-v1:0", finish: "end_turn",
			usage: trace.Usage{InputTokens: 900, OutputTokens: 40, CachedTokens: 1024},
			out:   `"It's 4°C and cloudy in Oslo.\n"`, mustHaveNoThink: true},
		{parent: "1400000000000002", name: "us.anthropic.claude-sonnet-4-20250514-v1:0", finish: "tool_use",
			usage: trace.Usage{InputTokens: 640, OutputTokens: 70},
			out:   `~{"type":"tool_call","name":"calculator","id":"tooluse_c1","arguments":{"expression":"7/0"}}`,
			think: `"Two calculator calls."`},
		{parent: "1400000000000006", name: "us.anthropic.claude-sonnet-4-20250514-v1:0", finish: "end_turn",
			usage: trace.Usage{InputTokens: 860, OutputTokens: 20, CachedTokens: 512}, mustHaveNoThink: true},
	},
	tools: []wantTool{
		{parent: "1300000000000002", name: "get_weather", in: `{"city":"Oslo"}`, out: `"4°C, cloudy"`},
		{parent: "1400000000000002", name: "calculator", in: `{"expression":"7/0"}`, out: `"Error: division by zero"`, err: "Error: division by zero"},
		{parent: "1400000000000002", name: "calculator", in: `{"expression":"7*6"}`, out: `"42"`},
	},
	nodes:       []string{"execute_event_loop_cycle", "execute_event_loop_cycle", "execute_event_loop_cycle", "execute_event_loop_cycle"},
	inputTokens: 730 + 900 + 640 + 860, // not the agents' totals again
	toolErrors:  1,
}, {
	// Eino through its apmplus callback: the graph is the run (its one
	// answer as text), chat models the model calls (tool calls and
	// reasoning from the messages written whole), tools with the
	// arguments and response unwrapped, ToolsNode a step.
	file: "eino.json",
	runs: []wantRun{{name: "WeatherAgent", in: `[{"role":"user","content":"Weather in Hangzhou?"}]`, out: `"Hangzhou: sunny, 25°C."`, status: "success"}},
	models: []wantCall{
		{parent: "1500000000000001", name: "gpt-4o-mini-2024-07-18", finish: "tool_calls",
			usage: trace.Usage{InputTokens: 180, OutputTokens: 24},
			in:    `[{"role":"system","content":"You answer weather questions."},{"role":"user","content":"Weather in Hangzhou?"}]`,
			out:   `{"tool_calls":[{"id":"call_e1","name":"get_weather","input":{"city":"Hangzhou"}}]}`,
			think: `"Use the weather tool for Hangzhou."`},
		{parent: "1500000000000001", name: "gpt-4o-mini-2024-07-18", finish: "stop",
			usage: trace.Usage{InputTokens: 250, OutputTokens: 11}, out: `"Hangzhou: sunny, 25°C."`},
	},
	tools:       []wantTool{{parent: "1500000000000003", name: "get_weather", in: `{"city":"Hangzhou"}`, out: `{"sky":"sunny","temp_c":25}`}},
	nodes:       []string{"ToolsNode"},
	inputTokens: 180 + 250,
}}

// TestDialects maps each dialect fixture and checks the records: types,
// names, nesting, tokens (cached and reasoning included), tool arguments
// and results, errors, thinking and each run's input and final output.
func TestDialects(t *testing.T) {
	for _, c := range dialectCases {
		t.Run(strings.TrimSuffix(c.file, ".json"), func(t *testing.T) {
			res := Map(decodeFile(t, "testdata/"+c.file), nil)
			if len(res.Rejected) > 0 {
				t.Fatalf("rejected: %v", res.Rejected)
			}
			checkWellFormed(t, res.Records)
			var runs, models, tools []*trace.Record
			var nodes []string
			ends := map[trace.SpanID]*trace.Record{}
			for i := range res.Records {
				r := &res.Records[i]
				switch r.Type {
				case trace.TypeRunStart, trace.TypeChildSpawn:
					runs = append(runs, r)
				case trace.TypeModelCall:
					models = append(models, r)
				case trace.TypeToolStart:
					tools = append(tools, r)
				case trace.TypeNodeStart:
					nodes = append(nodes, r.Name)
				case trace.TypeRunEnd, trace.TypeChildEnd, trace.TypeToolEnd, trace.TypeToolError:
					ends[r.SpanID] = r
				}
			}

			if len(runs) != len(c.runs) {
				t.Errorf("%d runs, want %d", len(runs), len(c.runs))
			}
			for i, w := range c.runs[:min(len(runs), len(c.runs))] {
				r, e := runs[i], ends[runs[i].SpanID]
				wantType := trace.TypeRunStart
				if w.parent != "" {
					wantType = trace.TypeChildSpawn
				}
				if e == nil {
					t.Errorf("run %q: no end", r.Name)
					continue
				}
				if r.Type != wantType || r.Name != w.name || r.ParentID.String() != cmpOrStr(w.parent, "0000000000000000") ||
					!matches(string(r.Input), w.in) || !matches(string(e.Output), w.out) || e.Status != w.status {
					t.Errorf("run %d:\n got %s %q parent %s in %s out %s status %q\nwant %s %q parent %s in %s out %s status %q",
						i, r.Type, r.Name, r.ParentID, r.Input, e.Output, e.Status, wantType, w.name, w.parent, w.in, w.out, w.status)
				}
			}

			if len(models) != len(c.models) {
				t.Errorf("%d model calls, want %d", len(models), len(c.models))
			}
			for i, w := range c.models[:min(len(models), len(c.models))] {
				r := models[i]
				ok := r.Name == w.name && r.ParentID.String() == w.parent && r.Usage == w.usage && r.Status == w.finish &&
					matches(string(r.Input), w.in) && matches(string(r.Output), w.out) && matches(string(r.Thinking), w.think) &&
					r.Error == w.err && (!w.mustHaveNoThink || r.Thinking == nil)
				if !ok {
					t.Errorf("model call %d:\n got %q parent %s usage %+v finish %q err %q\n     in %.300s\n     out %.300s\n     thinking %s\nwant %q parent %s usage %+v finish %q err %q\n     in %s\n     out %s\n     thinking %s",
						i, r.Name, r.ParentID, r.Usage, r.Status, r.Error, r.Input, r.Output, r.Thinking,
						w.name, w.parent, w.usage, w.finish, w.err, w.in, w.out, w.think)
				}
			}

			if len(tools) != len(c.tools) {
				t.Errorf("%d tool calls, want %d", len(tools), len(c.tools))
			}
			for i, w := range c.tools[:min(len(tools), len(c.tools))] {
				r, e := tools[i], ends[tools[i].SpanID]
				if e == nil {
					t.Errorf("tool %q: no end", r.Name)
					continue
				}
				wantEnd := trace.TypeToolEnd
				if w.err != "" {
					wantEnd = trace.TypeToolError
				}
				if r.Name != w.name || r.ParentID.String() != w.parent || !matches(string(r.Input), w.in) ||
					!matches(string(e.Output), w.out) || e.Type != wantEnd || e.Error != w.err {
					t.Errorf("tool %d:\n got %q parent %s in %s → %s out %s err %q\nwant %q parent %s in %s → %s out %s err %q",
						i, r.Name, r.ParentID, r.Input, e.Type, e.Output, e.Error, w.name, w.parent, w.in, wantEnd, w.out, w.err)
				}
			}

			if fmt.Sprint(nodes) != fmt.Sprint(c.nodes) && len(nodes)+len(c.nodes) > 0 {
				t.Errorf("steps %q, want %q", nodes, c.nodes)
			}
			st := trace.StatsOf(res.Records)
			if st.InputTokens != c.inputTokens || st.ModelCalls != len(c.models) || st.ToolCalls != len(c.tools) {
				t.Errorf("stats: %d input tokens, %d model calls, %d tool calls; want %d, %d, %d",
					st.InputTokens, st.ModelCalls, st.ToolCalls, c.inputTokens, len(c.models), len(c.tools))
			}
			errs := 0
			for _, e := range ends {
				if e.Type == trace.TypeToolError {
					errs++
				}
			}
			if errs != c.toolErrors {
				t.Errorf("%d tool errors, want %d", errs, c.toolErrors)
			}
			// Every record hangs in one tree under the run(s).
			roots := trace.Tree(res.Records)
			if len(roots) != len(c.runs)-countChildren(c.runs) {
				t.Errorf("%d roots, want one per trace", len(roots))
			}
		})
	}
}

func countChildren(rs []wantRun) int {
	n := 0
	for _, r := range rs {
		if r.parent != "" {
			n++
		}
	}
	return n
}

func cmpOrStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestPrecedence: a span is classified by what it is, not by the first
// attribute that hints at a kind.
func TestPrecedence(t *testing.T) {
	type kv = [2]string
	cases := []struct {
		what        string
		scope, name string
		attrs       []kv
		kind        Kind
		dialect     string
	}{
		{"a Pydantic AI run with the run's token totals is a run, not a model call", "pydantic-ai", "agent run",
			[]kv{{"agent_name", "a"}, {"gen_ai.agent.name", "a"}, {"model_name", "gpt-4o"}, {"gen_ai.usage.input_tokens", "100"}, {"final_result", "x"}}, KindAgent, "pydantic_ai"},
		{"…even seen without its scope", "", "agent run",
			[]kv{{"gen_ai.usage.input_tokens", "100"}, {"gen_ai.agent.name", "a"}, {"pydantic_ai.all_messages", "[]"}}, KindAgent, "pydantic_ai"},
		{"…or only started (agent_name with model_name)", "", "agent run",
			[]kv{{"agent_name", "a"}, {"model_name", "m"}, {"gen_ai.usage.input_tokens", "100"}}, KindAgent, "pydantic_ai"},
		{"agent_name alone is another framework's attribute", "", "step",
			[]kv{{"agent_name", "a"}}, KindGeneric, ""},
		{"a Pydantic AI tool span carries the agent's name too", "pydantic-ai", "running tool",
			[]kv{{"gen_ai.tool.name", "t"}, {"gen_ai.agent.name", "a"}, {"tool_arguments", "{}"}}, KindTool, "pydantic_ai"},
		{"an explicit operation name wins over run markers", "pydantic-ai", "invoke_agent a",
			[]kv{{"gen_ai.operation.name", "invoke_agent"}, {"gen_ai.usage.input_tokens", "100"}, {"final_result", "x"}}, KindAgent, "pydantic_ai"},
		{"an OpenLLMetry chat span with the workflow's agent name copied on is a model call", "opentelemetry.instrumentation.openai.v1", "openai.chat",
			[]kv{{"gen_ai.agent.name", "a"}, {"traceloop.workflow.name", "w"}, {"gen_ai.system", "openai"}, {"gen_ai.usage.prompt_tokens", "5"}}, KindModel, "traceloop"},
		{"an HTTP span with the copied agent name stays a step", "opentelemetry.instrumentation.requests", "POST",
			[]kv{{"gen_ai.agent.name", "a"}, {"traceloop.workflow.name", "w"}, {"http.request.method", "POST"}}, KindGeneric, "traceloop"},
		{"gen_ai.agent.name alone still names an agent (unchanged)", "", "x",
			[]kv{{"gen_ai.agent.name", "a"}}, KindAgent, "gen_ai"},
		{"a Vercel call span with the steps' totals is an agent, not a model call", "ai", "ai.generateText",
			[]kv{{"ai.operationId", "ai.generateText"}, {"ai.usage.inputTokens", "100"}, {"ai.model.id", "m"}, {"gen_ai.usage.input_tokens", "100"}}, KindAgent, "vercel_ai"},
		{"a Vercel step is the model call", "ai", "ai.streamText.doStream",
			[]kv{{"operation.name", "ai.streamText.doStream fn"}, {"gen_ai.system", "openai.chat"}}, KindModel, "vercel_ai"},
		{"AI SDK 3 tool spans: ai.toolCall.name", "ai", "ai.toolCall",
			[]kv{{"ai.toolCall.name", "t"}}, KindTool, "vercel_ai"},
		{"Vercel embeddings: the call is a step, doEmbed the model call", "ai", "ai.embedMany",
			[]kv{{"ai.operationId", "ai.embedMany"}, {"ai.usage.tokens", "10"}}, KindGeneric, "vercel_ai"},
		{"Genkit's generate util carries the aggregated usage but is a step", "genkit-tracer", "generate",
			[]kv{{"genkit:type", "util"}, {"genkit:name", "generate"}, {"genkit:output", `{"usage":{"inputTokens":1}}`}}, KindGeneric, "genkit"},
		{"Genkit: the subtype from the path when the label is missing", "genkit-tracer", "m",
			[]kv{{"genkit:type", "action"}, {"genkit:path", "/{f,t:flow}/{generate,t:util}/{googleai/m,t:action,s:model}"}}, KindModel, "genkit"},
		{"Genkit: a flow is a run", "genkit-tracer", "f",
			[]kv{{"genkit:type", "action"}, {"genkit:path", "/{f,t:flow}"}}, KindAgent, "genkit"},
		{"Traceloop's kind wins over the tool name", "traceloop.tracer", "x.task",
			[]kv{{"traceloop.span.kind", "task"}, {"gen_ai.tool.name", "x"}}, KindGeneric, "traceloop"},
		{"ADK's call_llm", "gcp.vertex.agent", "call_llm",
			[]kv{{"gen_ai.system", "gcp.vertex.agent"}, {"gcp.vertex.agent.llm_request", "{}"}}, KindModel, "adk"},
		{"ADK's older agent spans have only their name", "gcp.vertex.agent", "agent_run [a]", nil, KindAgent, "adk"},
		{"…which means nothing from another scope", "other", "agent_run [a]", nil, KindGeneric, ""},
		{"OpenInference wins over everything", "ai", "ai.generateText",
			[]kv{{"openinference.span.kind", "CHAIN"}, {"ai.operationId", "ai.generateText"}}, KindGeneric, "openinference"},
		{"LangChain calls a LangGraph node named agent an AGENT: it is one step of the graph", "openinference.instrumentation.langchain", "agent",
			[]kv{{"openinference.span.kind", "AGENT"}, {"metadata", `{"langgraph_step":1,"langgraph_node":"agent"}`}}, KindGeneric, "openinference"},
		{"…a LangChain agent outside a graph stays an agent", "openinference.instrumentation.langchain", "AgentExecutor",
			[]kv{{"openinference.span.kind", "AGENT"}, {"metadata", `{"ls_run_depth":0}`}}, KindAgent, "openinference"},
		{"…and so does a graph's agent whose node has another name", "openinference.instrumentation.langchain", "research_agent",
			[]kv{{"openinference.span.kind", "AGENT"}, {"metadata", `{"langgraph_node":"supervisor"}`}}, KindAgent, "openinference"},
		{"a LangChain chain carrying token counts is a chain, not a model call", "openinference.instrumentation.langchain", "RunnableSequence",
			[]kv{{"openinference.span.kind", "CHAIN"}, {"llm.token_count.prompt", "150"}, {"llm.model_name", "gpt-4o-mini"}}, KindGeneric, "openinference"},
		{"a smolagents run with the run's token totals is a run", "openinference.instrumentation.smolagents", "agent.run",
			[]kv{{"openinference.span.kind", "AGENT"}, {"llm.token_count.prompt", "1830"}, {"llm.token_count.completion", "58"}}, KindAgent, "openinference"},
		{"an OpenAI Agents guardrail is a step", "openinference.instrumentation.openai_agents", "pii_check",
			[]kv{{"openinference.span.kind", "GUARDRAIL"}}, KindGeneric, "openinference"},
		{"Semantic Kernel's chat.completions is a model call", "semantic_kernel.utils.telemetry.model_diagnostics.decorators", "chat.completions gpt-4o",
			[]kv{{"gen_ai.operation.name", "chat.completions"}, {"gen_ai.system", "openai"}}, KindModel, "gen_ai"},
		{"…and so is its streaming variant", "", "chat.streaming_completions gpt-4o",
			[]kv{{"gen_ai.operation.name", "chat.streaming_completions"}}, KindModel, "gen_ai"},
		{"OpenLIT's retrieval is a tool", "openlit.otel.tracing", "retrieval kb",
			[]kv{{"gen_ai.operation.name", "retrieval"}}, KindTool, "gen_ai"},
		{"OpenLIT's invoke_workflow is a step (the run at the root)", "openlit.otel.tracing", "invoke_workflow crew",
			[]kv{{"gen_ai.operation.name", "invoke_workflow"}, {"gen_ai.system", "crewai"}}, KindGeneric, "gen_ai"},
		{"a Strands agent span with the run's totals is a run", "strands.telemetry.tracer", "invoke_agent a",
			[]kv{{"gen_ai.operation.name", "invoke_agent"}, {"gen_ai.system", "strands-agents"}, {"gen_ai.usage.input_tokens", "1630"}}, KindAgent, "strands"},
		{"…its event loop cycle is a step", "strands.telemetry.tracer", "execute_event_loop_cycle",
			[]kv{{"gen_ai.operation.name", "execute_event_loop_cycle"}, {"gen_ai.system", "strands-agents"}}, KindGeneric, "strands"},
		{"…its chat span a model call, known by its provider name without the scope", "", "chat",
			[]kv{{"gen_ai.operation.name", "chat"}, {"gen_ai.provider.name", "strands-agents"}}, KindModel, "strands"},
		{"Eino's root carries a prompt and gen_ai.system but is a workflow", "github.com/cloudwego/eino-ext/callbacks/apmplus", "graph",
			[]kv{{"gen_ai.span.kind", "workflow"}, {"gen_ai.system", "eino"}, {"gen_ai.prompt.0.content", "hi"}}, KindGeneric, "eino"},
		{"…its chat model a model call", "", "OpenAI ChatModel",
			[]kv{{"gen_ai.span.kind", "chatmodel"}, {"gen_ai.system", "eino"}}, KindModel, "eino"},
		{"…its tool a tool, whatever the copied prompt hints", "", "get_weather",
			[]kv{{"gen_ai.span.kind", "tool"}, {"gen_ai.system", "eino"}, {"gen_ai.prompt.0.content", "{}"}}, KindTool, "eino"},
		{"…its lambda a step", "", "Lambda",
			[]kv{{"gen_ai.span.kind", "lambda"}, {"gen_ai.system", "eino"}, {"gen_ai.prompt.0.content", "{}"}}, KindGeneric, "eino"},
		{"…an ADK agent an agent", "", "Agent",
			[]kv{{"gen_ai.span.kind", "agent"}, {"gen_ai.system", "eino"}}, KindAgent, "eino"},
		{"a Genkit Go tool (a tool.v2 action) is a tool", "genkit-tracer", "weather",
			[]kv{{"genkit:type", "action"}, {"genkit:metadata:subtype", "tool.v2"}, {"genkit:name", "weather"}}, KindTool, "genkit"},
		{"gen_ai.span.kind alone is not Eino's", "", "x",
			[]kv{{"gen_ai.span.kind", "tool"}, {"gen_ai.request.model", "m"}}, KindModel, "gen_ai"},
	}
	for _, c := range cases {
		td := attrMap(c.attrs)
		m := scanMarks(td)
		k, d := m.classify(c.scope, c.name)
		if k != c.kind || dialectNames[d] != c.dialect {
			t.Errorf("%s: got %s/%q, want %s/%q", c.what, k, dialectNames[d], c.kind, c.dialect)
		}
	}
}

// TestNestedCalls: a model span with a model span under it that carries
// tokens is a wrapper around the same call (a framework's span around its
// client library's): it becomes a step, and the call is counted once.
func TestNestedCalls(t *testing.T) {
	type sp struct {
		tid, id, parent string
		attrs           [][2]string
	}
	llm := func(tokens bool) [][2]string {
		a := [][2]string{{"openinference.span.kind", "LLM"}}
		if tokens {
			a = append(a, [2]string{"llm.token_count.prompt", "10"})
		}
		return a
	}
	const t1, t2 = "0102030405060708090a0b0c0d0e0f10", "1102030405060708090a0b0c0d0e0f10"
	cases := []struct {
		what  string
		spans []sp
		kinds string // the kinds of the spans, in order
	}{
		{"the OpenAI client's span under the Agents SDK's response span", []sp{
			{t1, "0000000000000001", "", llm(true)}, {t1, "0000000000000002", "0000000000000001", llm(true)}}, "generic model"},
		{"an OpenAI Agents SDK response span under its generation span", []sp{
			{t1, "0000000000000001", "", [][2]string{{"openinference.span.kind", "LLM"}, {"llm.token_count.prompt", "10"}}},
			{t1, "0000000000000002", "0000000000000001", [][2]string{{"openinference.span.kind", "LLM"}, {"llm.token_count.prompt", "10"}, {"llm.token_count.prompt_details.cache_read", "8"}}}}, "generic model"},
		{"GenAI chat spans nested (a framework's chat around the client's)", []sp{
			{t1, "0000000000000001", "", [][2]string{{"gen_ai.operation.name", "chat"}, {"gen_ai.usage.input_tokens", "10"}}},
			{t1, "0000000000000002", "0000000000000001", [][2]string{{"gen_ai.operation.name", "chat"}, {"gen_ai.usage.input_tokens", "10"}}}}, "generic model"},
		{"the inner span arrives first", []sp{
			{t1, "0000000000000002", "0000000000000001", llm(true)}, {t1, "0000000000000001", "", llm(true)}}, "model generic"},
		{"three levels, innermost first", []sp{
			{t1, "0000000000000003", "0000000000000002", llm(true)}, {t1, "0000000000000002", "0000000000000001", llm(true)},
			{t1, "0000000000000001", "", llm(true)}}, "model generic generic"},
		{"an inner span without tokens is an attempt: both stay calls", []sp{
			{t1, "0000000000000001", "", llm(true)}, {t1, "0000000000000002", "0000000000000001", llm(false)}}, "model model"},
		{"three levels: only the innermost is the call", []sp{
			{t1, "0000000000000001", "", llm(true)}, {t1, "0000000000000002", "0000000000000001", llm(true)},
			{t1, "0000000000000003", "0000000000000002", llm(true)}}, "generic generic model"},
		{"a chain around an LLM span is a step anyway", []sp{
			{t1, "0000000000000001", "", [][2]string{{"openinference.span.kind", "CHAIN"}, {"llm.token_count.prompt", "10"}}},
			{t1, "0000000000000002", "0000000000000001", llm(true)}}, "generic model"},
		{"a model call under a tool is its own call", []sp{
			{t1, "0000000000000001", "", [][2]string{{"openinference.span.kind", "TOOL"}}},
			{t1, "0000000000000002", "0000000000000001", llm(true)}}, "tool model"},
		{"the same span id in another trace is another span", []sp{
			{t1, "0000000000000001", "", llm(true)}, {t2, "0000000000000002", "0000000000000001", llm(true)}}, "model model"},
		{"sibling calls stay calls", []sp{
			{t1, "0000000000000001", "", [][2]string{{"gen_ai.operation.name", "invoke_agent"}, {"gen_ai.usage.input_tokens", "30"}}},
			{t1, "0000000000000002", "0000000000000001", [][2]string{{"gen_ai.operation.name", "chat"}, {"gen_ai.usage.input_tokens", "10"}}},
			{t1, "0000000000000003", "0000000000000001", [][2]string{{"gen_ai.operation.name", "chat"}, {"gen_ai.usage.input_tokens", "20"}}}}, "agent model model"},
	}
	for _, c := range cases {
		td := ptrace.NewTraces()
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
		for _, s := range c.spans {
			span := ss.Spans().AppendEmpty()
			var tid pcommon.TraceID
			var id, parent pcommon.SpanID
			hex.Decode(tid[:], []byte(s.tid))
			hex.Decode(id[:], []byte(s.id))
			span.SetTraceID(tid)
			span.SetSpanID(id)
			if s.parent != "" {
				hex.Decode(parent[:], []byte(s.parent))
				span.SetParentSpanID(parent)
			}
			span.SetStartTimestamp(1)
			attrMap(s.attrs).CopyTo(span.Attributes())
		}
		spans, _ := classify(td, nil)
		var kinds []string
		for _, s := range spans {
			kinds = append(kinds, string(s.kind))
		}
		if got := strings.Join(kinds, " "); got != c.kinds {
			t.Errorf("%s: %s, want %s", c.what, got, c.kinds)
		}
	}
}

func attrMap(kvs [][2]string) pcommon.Map {
	m := pcommon.NewMap()
	for _, kv := range kvs {
		m.PutStr(kv[0], kv[1])
	}
	return m
}

func TestReadHelpers(t *testing.T) {
	// Gemini's output count leaves thinking out unless the total says so.
	if u := geminiUsage(100, 10, 30, 5, 140); u.OutputTokens != 40 || u.ReasoningTokens != 30 || u.CachedTokens != 5 {
		t.Errorf("thoughts outside the output count: %+v", u)
	}
	if u := geminiUsage(100, 40, 30, 0, 140); u.OutputTokens != 40 {
		t.Errorf("thoughts inside the output count: %+v", u)
	}
	if u := geminiUsage(100, 10, 30, 0, 0); u.OutputTokens != 40 {
		t.Errorf("no total: %+v", u)
	}
	for _, c := range [][2]string{
		{`"{\"a\":1}"`, `{"a":1}`}, // arguments as the provider sent them
		{`{"a":1}`, `{"a":1}`},
		{`"plain"`, `"plain"`},
		{`not json`, `"not json"`},
		{``, `null`},
	} {
		if got := string(argsJSON([]byte(c[0]))); got != c[1] {
			t.Errorf("argsJSON(%s) = %s, want %s", c[0], got, c[1])
		}
	}
	for _, c := range [][2]string{
		{`{"args":[],"kwargs":{"x":1}}`, `{"x":1}`},
		{`{"args":[1],"kwargs":{}}`, `{"args":[1],"kwargs":{}}`},
		{`{"kwargs":{"x":1}}`, `{"kwargs":{"x":1}}`},
		{`"text"`, `"text"`},
	} {
		if got := string(traceloopInput(trace.Value(c[0]))); got != c[1] {
			t.Errorf("traceloopInput(%s) = %s, want %s", c[0], got, c[1])
		}
	}
	if th := partsThinking(trace.Value(`[{"role":"assistant","parts":[{"type":"text","content":"thinking about it"}]}]`)); th != nil {
		t.Errorf("a text part is not thinking: %s", th)
	}
	if th := partsThinking(trace.Value(`[{"role":"assistant","parts":[{"type":"reasoning","content":{"summary":"s"}}]}]`)); string(th) != `"{\"summary\":\"s\"}"` {
		t.Errorf("structured reasoning: %s", th)
	}
	a := pcommon.NewMap()
	a.PutStr("gen_ai.system_instructions", `{"type":"text","content":"be kind"}`)
	for _, c := range [][2]string{
		{``, `[{"role":"system","parts":[{"type":"text","content":"be kind"}]}]`},
		{`[]`, `[{"role":"system","parts":[{"type":"text","content":"be kind"}]}]`},
		{`[{"role":"user"}]`, `[{"role":"system","parts":[{"type":"text","content":"be kind"}]},{"role":"user"}]`},
		{`{"$loupe":"truncated","bytes":9}`, `{"$loupe":"truncated","bytes":9}`}, // not messages: left alone
	} {
		var in trace.Value
		if c[0] != "" {
			in = trace.Value(c[0])
		}
		if got := string(withSystem(in, a)); got != c[1] {
			t.Errorf("withSystem(%s) = %s, want %s", c[0], got, c[1])
		}
	}
}

// TestNormCompacts: norm compacts exactly the values json.Compact would
// change, whatever spaces their strings hold.
func TestNormCompacts(t *testing.T) {
	for _, c := range [][2]string{
		{`"a b"`, `"a b"`},
		{`{"a": "b c"}`, `{"a":"b c"}`},
		{`["x\" y", 1]`, `["x\" y",1]`},
		{`"tab\there"`, `"tab\there"`},
		{`{"a":"\\","b" : 1}`, `{"a":"\\","b":1}`},
		{"[1,\n2]", `[1,2]`},
		{`not json at all`, `not json at all`},
	} {
		if got := string(norm(trace.Value(c[0]))); got != c[1] {
			t.Errorf("norm(%s) = %s, want %s", c[0], got, c[1])
		}
	}
}

// TestGenkitGoToolOutput: a Genkit Go tool's output, a
// MultipartToolResponse, is recorded as the tool's own output when it
// returned no content parts, and kept whole when it did.
func TestGenkitGoToolOutput(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{`{"output":{"temp":21}}`, `{"temp":21}`},
		{`{"output":"sunny","content":[{"text":"sunny"}]}`, `{"output":"sunny","content":[{"text":"sunny"}]}`},
		{`"plain"`, `"plain"`},
	} {
		td := ptrace.NewTraces()
		sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{1})
		sp.SetSpanID(pcommon.SpanID{2})
		sp.SetName("weather")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(time.Unix(1_700_000_001, 0)))
		a := sp.Attributes()
		a.PutStr("genkit:type", "action")
		a.PutStr("genkit:metadata:subtype", "tool.v2")
		a.PutStr("genkit:name", "weather")
		a.PutStr("genkit:input", `{"city":"Lyon"}`)
		a.PutStr("genkit:output", tc.out)
		var end *trace.Record
		recs := Map(td, nil).Records
		for i := range recs {
			if recs[i].Type == trace.TypeToolEnd {
				end = &recs[i]
			}
		}
		if end == nil || end.Name != "weather" || string(end.Output) != tc.want {
			t.Errorf("output %s: tool.end %+v, want output %s", tc.out, end, tc.want)
		}
	}
}
