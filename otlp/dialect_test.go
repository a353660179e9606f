package otlp

import (
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

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
		out:    `~"content":"Be at the Colosseum at 09:00, then walk to the Forum."`,
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
