package lctrace_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	lctrace "github.com/loupe-dev/loupe/adapters/langchaingo"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/tracetest"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/prompts"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/tools"
)

// collector is a sink that keeps every record, by trace.
type collector struct {
	mu     sync.Mutex
	traces map[trace.TraceID][]trace.Record
	order  []trace.TraceID
}

func (c *collector) WriteRecords(_ context.Context, recs []trace.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		if _, ok := c.traces[r.TraceID]; !ok {
			c.order = append(c.order, r.TraceID)
		}
		c.traces[r.TraceID] = append(c.traces[r.TraceID], r)
	}
	return nil
}

// all returns the records of every trace, a trace at a time in the order
// they began.
func (c *collector) all() [][]trace.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][]trace.Record, 0, len(c.order))
	for _, id := range c.order {
		out = append(out, slices.Clone(c.traces[id]))
	}
	return out
}

// newTracer returns a tracer whose records reach the returned collector
// as they are made.
func newTracer() (*trace.Tracer, *collector) {
	c := &collector{traces: map[trace.TraceID][]trace.Record{}}
	return trace.New(trace.Options{Sinks: []trace.Sink{c}, Dispatch: trace.DispatchOptions{Inline: true}}), c
}

// one returns the only trace recorded, checked.
func one(t *testing.T, c *collector) []trace.Record {
	t.Helper()
	all := c.all()
	if len(all) != 1 {
		t.Fatalf("recorded %d traces, want 1", len(all))
	}
	check(t, all[0])
	return all[0]
}

// check holds a trace to what stores accept and to well-formed spans:
// every record valid, every end closing a start, no span left open.
func check(t *testing.T, recs []trace.Record) {
	t.Helper()
	for i := range recs {
		if err := store.ValidateRecord(i, &recs[i]); err != nil {
			t.Errorf("record %d (%s) is invalid: %v", i, recs[i].Type, err)
		}
	}
	open := map[trace.SpanID]trace.Type{}
	for _, r := range recs {
		switch r.Type {
		case trace.TypeRunStart, trace.TypeIterationStart, trace.TypeToolStart, trace.TypeChildSpawn:
			open[r.SpanID] = r.Type
		case trace.TypeRunEnd, trace.TypeIterationEnd, trace.TypeToolEnd, trace.TypeToolError, trace.TypeChildEnd:
			if _, ok := open[r.SpanID]; !ok && r.Type != trace.TypeToolEnd && r.Type != trace.TypeToolError {
				t.Errorf("seq %d: %s closes span %s, which was never opened", r.Seq, r.Type, r.SpanID)
			}
			delete(open, r.SpanID)
		}
	}
	for id, typ := range open {
		t.Errorf("span %s (%s) was never closed", id, typ)
	}
}

// outline draws a trace's span tree, one span a line, indented by depth:
// "type name" of the span's first record, then "→ type status" of its end
// record, and the error, if any.
func outline(recs []trace.Record) string {
	var b strings.Builder
	var walk func(ns []*trace.Node, depth int)
	walk = func(ns []*trace.Node, depth int) {
		for _, n := range ns {
			r := n.Start
			b.WriteString(strings.Repeat("  ", depth))
			b.WriteString(string(r.Type))
			if r.Name != "" {
				b.WriteString(" " + r.Name)
			}
			if r.Type == trace.TypeModelCall && r.Status != "" {
				b.WriteString(" " + r.Status)
			}
			if e := n.End; e != nil {
				b.WriteString(" → " + string(e.Type))
				if e.Status != "" {
					b.WriteString(" " + e.Status)
				}
			}
			if e := n.Record(); e.Error != "" {
				b.WriteString(" !" + e.Error)
			}
			b.WriteByte('\n')
			walk(n.Children, depth+1)
		}
	}
	walk(trace.Tree(recs), 0)
	return b.String()
}

func ofType(recs []trace.Record, typ trace.Type) []trace.Record {
	var out []trace.Record
	for _, r := range recs {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// jsonEq reports whether two JSON texts hold equal values.
func jsonEq(t *testing.T, got trace.Value, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("recorded value %s is not JSON: %v", got, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expected JSON %s: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return string(gb) == string(wb)
}

// toolWant is an expected tool call record.
type toolWant struct {
	name, input, output, err string // input and output as JSON
}

// TestExecutor runs real langchaingo executors, over a one-shot (MRKL
// text) agent and an OpenAI functions agent, with langchaingo's calculator
// and a tool that fails, and checks the trace each one leaves.
func TestExecutor(t *testing.T) {
	mrklUsage := map[string]any{"PromptTokens": 120, "CompletionTokens": 18, "TotalTokens": 138}
	anthropicUsage := map[string]any{"InputTokens": 40, "OutputTokens": 25, "CacheReadInputTokens": 60, "CacheCreationInputTokens": 0}
	openaiUsage := map[string]any{"PromptTokens": int32(150), "CompletionTokens": int32(30), "TotalTokens": int32(180), "ReasoningTokens": int32(12), "PromptCachedTokens": int32(100)}
	tests := []struct {
		name      string
		functions bool // an OpenAI functions agent, else a one-shot agent
		callbacks bool // the tools report to the handler
		maxIter   int
		parserErr bool // the executor shows parse errors to the agent
		question  string
		turns     []turn

		answer  string // "" when the run fails
		errText string
		outline string
		tools   []toolWant
		tokens  [2]int64 // input, output
		cached  int64
		reason  int64
		deltas  []string
		thought string
	}{{
		name:      "one-shot agent, calculator reporting",
		callbacks: true,
		question:  "What is 2 + 3 * 4?",
		turns: []turn{
			{content: "Thought: I should compute it.\nAction: calculator\nAction Input: 2 + 3 * 4", info: mrklUsage,
				chunks: []string{"Thought: I should compute it.\n", "Action: calculator\n", "Action Input: 2 + 3 * 4"}},
			{content: "Thought: I now know the final answer\nFinal Answer: 14", info: mrklUsage},
		},
		answer: "14",
		outline: `run.start langchaingo → run.end success
  message user
  iteration.start → iteration.end continue
    model.call llm stop
      model.delta llm
      model.delta llm
      model.delta llm
    tool.start calculator → tool.end
  iteration.start → iteration.end terminate
    model.call llm stop
    message assistant
`,
		tools:  []toolWant{{name: "calculator", input: `"2 + 3 * 4"`, output: `"14"`}},
		tokens: [2]int64{240, 36},
		deltas: []string{"Thought: I should compute it.\n", "Action: calculator\n", "Action Input: 2 + 3 * 4"},
	}, {
		name:     "one-shot agent, calculator silent: the observation comes from the scratchpad",
		question: "What is 7 * 6?",
		turns: []turn{
			{content: "Thought: multiply.\nAction: calculator\nAction Input: 7 * 6", info: mrklUsage},
			{content: "Final Answer: 42", info: mrklUsage},
		},
		answer: "42",
		outline: `run.start langchaingo → run.end success
  message user
  iteration.start → iteration.end continue
    model.call llm stop
    tool.start calculator → tool.end
  iteration.start → iteration.end terminate
    model.call llm stop
    message assistant
`,
		tools:  []toolWant{{name: "calculator", input: `"7 * 6"`, output: `"42"`}},
		tokens: [2]int64{240, 36},
	}, {
		name:      "one-shot agent, unparsable answer shown to the agent",
		callbacks: true,
		parserErr: true,
		question:  "What is 1 + 1?",
		turns: []turn{
			{content: "I think it is two."},
			{content: "Thought: I now know the final answer\nFinal Answer: 2"},
		},
		answer: "2",
		outline: `run.start langchaingo → run.end success
  message user
  iteration.start → iteration.end continue
    model.call llm stop
  iteration.start → iteration.end terminate
    model.call llm stop
    message assistant
`,
	}, {
		name:      "one-shot agent, failing tool ends the run",
		callbacks: true,
		question:  "Weather in Paris?",
		turns: []turn{
			{content: "Thought: look it up.\nAction: weather\nAction Input: {\"city\": \"Paris\"}", info: mrklUsage},
		},
		errText: errWeather.Error(),
		outline: `run.start langchaingo → run.end error !weather service unavailable: connection refused
  message user
  iteration.start → iteration.end terminate
    model.call llm stop
    tool.start weather → tool.error !weather service unavailable: connection refused
  error !weather service unavailable: connection refused
`,
		tools:  []toolWant{{name: "weather", input: `{"city": "Paris"}`, err: errWeather.Error()}},
		tokens: [2]int64{120, 18},
	}, {
		name:     "one-shot agent, silent failing tool: failed by the executor's error",
		question: "Weather in Oslo?",
		turns: []turn{
			{content: "Action: weather\nAction Input: {\"city\": \"Oslo\"}"},
		},
		errText: errWeather.Error(),
		outline: `run.start langchaingo → run.end error !weather service unavailable: connection refused
  message user
  iteration.start → iteration.end terminate
    model.call llm stop
    tool.start weather → tool.error !weather service unavailable: connection refused
  error !weather service unavailable: connection refused
`,
		tools: []toolWant{{name: "weather", input: `{"city": "Oslo"}`, err: errWeather.Error()}},
	}, {
		name:      "functions agent, tool calls with reasoning and cached tokens",
		functions: true,
		callbacks: true,
		question:  "What is 6 * 7, and then 2 * 512?",
		turns: []turn{
			{reasoning: "Two products: call the calculator twice.", info: anthropicUsage, calls: []llms.ToolCall{
				funcCall("call_1", "calculator", `{"__arg1":"6 * 7"}`), funcCall("call_2", "calculator", `{"__arg1":"2 * 512"}`)}},
			{content: "6 * 7 is 42 and 2 * 512 is 1024.", info: openaiUsage},
		},
		answer: "6 * 7 is 42 and 2 * 512 is 1024.",
		outline: `run.start langchaingo → run.end success
  message user
  iteration.start → iteration.end continue
    model.call llm tool_calls
    tool.start calculator → tool.end
    tool.start calculator → tool.end
  iteration.start → iteration.end terminate
    model.call llm stop
    message assistant
`,
		tools: []toolWant{
			{name: "calculator", input: `"6 * 7"`, output: `"42"`},
			{name: "calculator", input: `"2 * 512"`, output: `"1024"`},
		},
		tokens:  [2]int64{100 + 150, 25 + 30},
		cached:  60 + 100,
		reason:  12,
		thought: "Two products: call the calculator twice.",
	}, {
		name:      "functions agent, silent tool: the output comes from the tool message",
		functions: true,
		question:  "What is 9 * 9?",
		turns: []turn{
			{calls: []llms.ToolCall{funcCall("c9", "calculator", `{"__arg1":"9 * 9"}`)}},
			{content: "81"},
		},
		answer: "81",
		outline: `run.start langchaingo → run.end success
  message user
  iteration.start → iteration.end continue
    model.call llm tool_calls
    tool.start calculator → tool.end
  iteration.start → iteration.end terminate
    model.call llm stop
    message assistant
`,
		tools: []toolWant{{name: "calculator", input: `"9 * 9"`, output: `"81"`}},
	}, {
		name:      "functions agent, out of iterations",
		functions: true,
		callbacks: true,
		maxIter:   1,
		question:  "Loop forever",
		turns: []turn{
			{calls: []llms.ToolCall{funcCall("c1", "calculator", `{"__arg1":"1 + 1"}`)}},
		},
		errText: "agent not finished before max iterations",
		outline: `run.start langchaingo → run.end max_iterations !agent not finished before max iterations
  message user
  iteration.start → iteration.end terminate
    model.call llm tool_calls
    tool.start calculator → tool.end
  guardrail max_iterations !max_iterations: the agent did not finish within the executor's iterations; raise agents.WithMaxIterations or make the agent finish sooner
  error !agent not finished before max iterations
`,
		tools: []toolWant{{name: "calculator", input: `"1 + 1"`, output: `"2"`}},
	}, {
		name:      "functions agent, model error",
		functions: true,
		question:  "Anything",
		turns:     []turn{{err: errors.New("429 rate limited: retry after 20s")}},
		errText:   "429 rate limited: retry after 20s",
		outline: `run.start langchaingo → run.end error !429 rate limited: retry after 20s
  message user
  iteration.start → iteration.end terminate
    model.call llm !429 rate limited: retry after 20s
  error !429 rate limited: retry after 20s
`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, c := newTracer()
			h := lctrace.New(tr, lctrace.Options{})
			model := newScripted(h, tc.turns...)
			var th = h
			if !tc.callbacks {
				th = nil
			}
			var tls []tools.Tool
			if th != nil {
				tls = []tools.Tool{tools.Calculator{CallbacksHandler: th}, weather{CallbacksHandler: th}}
			} else {
				tls = []tools.Tool{tools.Calculator{}, weather{}}
			}
			var agent agents.Agent
			if tc.functions {
				agent = agents.NewOpenAIFunctionsAgent(model, tls, agents.WithCallbacksHandler(h))
			} else {
				agent = agents.NewOneShotAgent(model, tls, agents.WithCallbacksHandler(h))
			}
			opts := []agents.Option{agents.WithCallbacksHandler(h)}
			if tc.maxIter > 0 {
				opts = append(opts, agents.WithMaxIterations(tc.maxIter))
			}
			if tc.parserErr {
				opts = append(opts, agents.WithParserErrorHandler(agents.NewParserErrorHandler(nil)))
			}
			exec := agents.NewExecutor(agent, opts...)

			answer, err := chains.Run(context.Background(), exec, tc.question)
			if tc.errText == "" && err != nil {
				t.Fatalf("run failed: %v", err)
			}
			if tc.errText != "" && (err == nil || err.Error() != tc.errText) {
				t.Fatalf("run returned error %v, want %q", err, tc.errText)
			}
			if answer != tc.answer {
				t.Errorf("answer %q, want %q", answer, tc.answer)
			}

			recs := one(t, c)
			if got := outline(recs); got != tc.outline {
				t.Errorf("trace tree:\n%s\nwant:\n%s", got, tc.outline)
			}
			start, end := recs[0], recs[len(recs)-1]
			if start.Type != trace.TypeRunStart || start.Input.Text() != tc.question {
				t.Errorf("first record %s with input %s, want run.start with the question", start.Type, start.Input)
			}
			if end.Type != trace.TypeRunEnd {
				t.Fatalf("last record is %s, want run.end", end.Type)
			}
			if tc.answer != "" && end.Output.Text() != tc.answer {
				t.Errorf("run.end output %s, want %q", end.Output, tc.answer)
			}
			if end.Error != tc.errText {
				t.Errorf("run.end error %q, want %q", end.Error, tc.errText)
			}

			// Tool calls: names, arguments, results and errors.
			var calls []trace.Record
			starts := map[trace.SpanID]trace.Record{}
			for _, r := range recs {
				switch r.Type {
				case trace.TypeToolStart:
					starts[r.SpanID] = r
				case trace.TypeToolEnd, trace.TypeToolError:
					calls = append(calls, r)
				}
			}
			if len(calls) != len(tc.tools) {
				t.Fatalf("%d tool calls ended, want %d", len(calls), len(tc.tools))
			}
			for i, w := range tc.tools {
				got, st := calls[i], starts[calls[i].SpanID]
				if got.Name != w.name || st.Name != w.name {
					t.Errorf("tool call %d named %q (start %q), want %q", i, got.Name, st.Name, w.name)
				}
				if !jsonEq(t, st.Input, w.input) {
					t.Errorf("tool call %d input %s, want %s", i, st.Input, w.input)
				}
				if w.output != "" && !jsonEq(t, got.Output, w.output) {
					t.Errorf("tool call %d output %s, want %s", i, got.Output, w.output)
				}
				if got.Error != w.err {
					t.Errorf("tool call %d error %q, want %q", i, got.Error, w.err)
				}
			}

			// Model calls: tokens, thinking, deltas under the call.
			st := trace.StatsOf(recs)
			if st.InputTokens != tc.tokens[0] || st.OutputTokens != tc.tokens[1] {
				t.Errorf("tokens in/out %d/%d, want %d/%d", st.InputTokens, st.OutputTokens, tc.tokens[0], tc.tokens[1])
			}
			if st.CachedTokens != tc.cached || st.ReasoningTokens != tc.reason {
				t.Errorf("cached/reasoning tokens %d/%d, want %d/%d", st.CachedTokens, st.ReasoningTokens, tc.cached, tc.reason)
			}
			calls = ofType(recs, trace.TypeModelCall)
			if len(calls) == 0 {
				t.Fatal("no model.call recorded")
			}
			if tc.tokens[0] > 0 && !calls[0].Usage.CostUnknown {
				t.Errorf("a call to an unnamed model is priced: %+v", calls[0].Usage)
			}
			if got := calls[0].Thinking.Text(); tc.thought != "" && got != tc.thought {
				t.Errorf("thinking %q, want %q", got, tc.thought)
			}
			var deltas []string
			for _, d := range ofType(recs, trace.TypeModelDelta) {
				if d.ParentID != calls[0].SpanID || d.Status != "text" {
					t.Errorf("delta %s under %s with status %q, want under the first model call %s as text", d.Output, d.ParentID, d.Status, calls[0].SpanID)
				}
				deltas = append(deltas, d.Output.Text())
			}
			if !slices.Equal(deltas, tc.deltas) {
				t.Errorf("deltas %q, want %q", deltas, tc.deltas)
			}
			for _, m := range calls {
				var in struct {
					Messages int               `json:"messages"`
					New      []json.RawMessage `json:"new"`
				}
				if err := json.Unmarshal(m.Input, &in); err != nil || in.Messages == 0 || len(in.New) == 0 {
					t.Errorf("model.call input %s: want {\"messages\":N,\"new\":[…]} (%v)", m.Input, err)
				}
			}

			// The same run graded as Loupe's eval grades it.
			tj := tracetest.New(t, recs)
			names := make([]string, len(tc.tools))
			for i, w := range tc.tools {
				names[i] = w.name
			}
			tj.CalledExactly(names...).MaxLLMCalls(len(tc.turns))
			for _, w := range tc.tools {
				var args map[string]any
				if json.Unmarshal([]byte(w.input), &args) == nil {
					tj.Args(w.name, args, tracetest.Exact)
				}
			}
			if tc.errText == "" {
				tj.NoErrors().OutputContains(tc.answer).MaxSteps(len(tc.turns))
			}
		})
	}
}

// TestFunctionsAgentRecords checks what the functions agent's model calls
// record: the tool calls the model asked for, with their arguments, and the
// tool results it was shown next.
func TestFunctionsAgentRecords(t *testing.T) {
	tr, c := newTracer()
	h := lctrace.New(tr, lctrace.Options{Model: "gpt-4o-mini", Provider: "openai", Name: "calc-agent", Tags: []string{"env:test"}})
	model := newScripted(h,
		turn{content: "Let me compute.", calls: []llms.ToolCall{funcCall("call_a", "calculator", `{"__arg1":"6 * 7"}`)},
			info: map[string]any{"PromptTokens": 1000, "CompletionTokens": 100}},
		turn{content: "42", info: map[string]any{"PromptTokens": 1200, "CompletionTokens": 5}},
	)
	calc := tools.Calculator{CallbacksHandler: h}
	exec := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(model, []tools.Tool{calc}, agents.WithCallbacksHandler(h)), agents.WithCallbacksHandler(h))
	if _, err := chains.Run(context.Background(), exec, "6 * 7?"); err != nil {
		t.Fatal(err)
	}
	recs := one(t, c)
	if recs[0].Name != "calc-agent" || !slices.Equal(recs[0].Tags(), []string{"env:test"}) {
		t.Errorf("run.start named %q tagged %q, want calc-agent tagged env:test", recs[0].Name, recs[0].Tags())
	}
	calls := ofType(recs, trace.TypeModelCall)
	if len(calls) != 2 {
		t.Fatalf("%d model calls, want 2", len(calls))
	}
	for i, want := range []struct{ output, input string }{
		{`{"content":"Let me compute.","tool_calls":[{"id":"call_a","name":"calculator","input":{"__arg1":"6 * 7"}}]}`,
			`{"messages":2,"new":[{"role":"system","content":"You are a helpful AI assistant."},{"role":"user","content":"6 * 7?"}]}`},
		{`"42"`, `{"messages":4,"new":[{"role":"tool","content":"42","tool_call_id":"call_a"}]}`},
	} {
		m := calls[i]
		if m.Name != "gpt-4o-mini" || m.Usage.Provider != "openai" {
			t.Errorf("call %d: model %q provider %q", i, m.Name, m.Usage.Provider)
		}
		if m.Usage.CostUnknown || m.Usage.CostUSD <= 0 {
			t.Errorf("call %d: gpt-4o-mini is priced, got %+v", i, m.Usage)
		}
		if !jsonEq(t, m.Output, want.output) {
			t.Errorf("call %d output %s, want %s", i, m.Output, want.output)
		}
		if !jsonEq(t, m.Input, want.input) {
			t.Errorf("call %d input %s, want %s", i, m.Input, want.input)
		}
		if m.Duration < 0 {
			t.Errorf("call %d duration %v", i, m.Duration)
		}
	}
	tracetest.New(t, recs).CalledExactly("calculator").MaxCost(1).NoErrors()
}

// TestChains records plain chains: an LLMChain on its own (streamed), one
// inside a Loupe run (a nested run), and one run by a tool of an agent (a
// nested run under the tool call).
func TestChains(t *testing.T) {
	prompt := prompts.NewPromptTemplate("Translate to French: {{.text}}", []string{"text"})

	t.Run("llm chain streamed", func(t *testing.T) {
		tr, c := newTracer()
		h := lctrace.New(tr, lctrace.Options{})
		model := newScripted(h, turn{content: "Bonjour", chunks: []string{"Bon", "jour"}, info: map[string]any{"input_tokens": 9, "output_tokens": 2}})
		chain := chains.NewLLMChain(model, prompt, chains.WithCallback(h))
		out, err := chains.Run(context.Background(), chain, "Hello", chains.WithCallback(h))
		if err != nil || out != "Bonjour" {
			t.Fatalf("chain returned %q, %v", out, err)
		}
		recs := one(t, c)
		want := `run.start langchaingo → run.end success
  message user
  iteration.start → iteration.end terminate
    model.call llm stop
      model.delta llm
      model.delta llm
`
		if got := outline(recs); got != want {
			t.Errorf("trace tree:\n%s\nwant:\n%s", got, want)
		}
		if st := trace.StatsOf(recs); st.InputTokens != 9 || st.OutputTokens != 2 {
			t.Errorf("tokens %d/%d, want 9/2", st.InputTokens, st.OutputTokens)
		}
		m := ofType(recs, trace.TypeModelCall)[0]
		if !jsonEq(t, m.Input, `{"messages":1,"new":[{"role":"user","content":"Translate to French: Hello"}]}`) {
			t.Errorf("model.call input %s", m.Input)
		}
	})

	t.Run("inside a Loupe run", func(t *testing.T) {
		tr, c := newTracer()
		h := lctrace.New(nil, lctrace.Options{Name: "translate"}) // records only into the run the context carries
		model := newScripted(h, turn{content: "Salut"})
		chain := chains.NewLLMChain(model, prompt, chains.WithCallback(h))
		ctx, run := tr.Start(context.Background(), "job", trace.RunOptions{})
		if _, err := chains.Run(ctx, chain, "Hi"); err != nil {
			t.Fatal(err)
		}
		// A model call outside any chain records straight into the run.
		if _, err := model.GenerateContent(ctx, []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "ping")}); err == nil {
			t.Fatal("the script is out of turns: the call should fail")
		}
		run.End(nil, nil)
		recs := one(t, c)
		want := `run.start job → run.end success
  child.spawn translate → child.end success
    message user
    iteration.start → iteration.end terminate
      model.call llm stop
  model.call llm !scripted model: the script has no more turns
`
		if got := outline(recs); got != want {
			t.Errorf("trace tree:\n%s\nwant:\n%s", got, want)
		}
	})

	t.Run("run by a tool", func(t *testing.T) {
		tr, c := newTracer()
		h := lctrace.New(tr, lctrace.Options{})
		// One script for the agent and the chain its tool runs, in the
		// order they are asked.
		model := newScripted(h,
			turn{calls: []llms.ToolCall{funcCall("t1", "translate", `{"__arg1":"Good night"}`)}},
			turn{content: "Bonne nuit"},
			turn{content: "It is \"Bonne nuit\"."},
		)
		translate := chainTool{name: "translate", chain: chains.NewLLMChain(model, prompt, chains.WithCallback(h)), h: h}
		exec := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(model, []tools.Tool{translate}, agents.WithCallbacksHandler(h)), agents.WithCallbacksHandler(h))
		if _, err := chains.Run(context.Background(), exec, "Say good night in French"); err != nil {
			t.Fatal(err)
		}
		recs := one(t, c)
		want := `run.start langchaingo → run.end success
  message user
  iteration.start → iteration.end continue
    model.call llm tool_calls
    tool.start translate → tool.end
      child.spawn chain → child.end success
        message user
        iteration.start → iteration.end terminate
          model.call llm stop
  iteration.start → iteration.end terminate
    model.call llm stop
    message assistant
`
		if got := outline(recs); got != want {
			t.Errorf("trace tree:\n%s\nwant:\n%s", got, want)
		}
		for _, r := range ofType(recs, trace.TypeModelCall) {
			want := 0
			if r.Output.Text() == "Bonne nuit" { // the chain's call
				want = 1
			}
			if r.Depth != want {
				t.Errorf("model.call %s at depth %d, want %d", r.Output, r.Depth, want)
			}
		}
		tracetest.New(t, recs).CalledExactly("translate").NoErrors().MaxLLMCalls(3)
	})

	t.Run("model called by a tool", func(t *testing.T) {
		tr, c := newTracer()
		h := lctrace.New(tr, lctrace.Options{})
		model := newScripted(h,
			turn{calls: []llms.ToolCall{funcCall("s1", "summarize", `{"__arg1":"a long text"}`)}},
			turn{content: "short"},
			turn{content: "Summary: short"},
		)
		summarize := modelTool{model: model, h: h}
		exec := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(model, []tools.Tool{summarize}, agents.WithCallbacksHandler(h)), agents.WithCallbacksHandler(h))
		if _, err := chains.Run(context.Background(), exec, "Summarise a long text"); err != nil {
			t.Fatal(err)
		}
		want := `run.start langchaingo → run.end success
  message user
  iteration.start → iteration.end continue
    model.call llm tool_calls
    tool.start summarize → tool.end
      model.call llm stop
  iteration.start → iteration.end terminate
    model.call llm stop
    message assistant
`
		if got := outline(one(t, c)); got != want {
			t.Errorf("trace tree:\n%s\nwant:\n%s", got, want)
		}
	})

	t.Run("agent run by a tool", func(t *testing.T) {
		tr, c := newTracer()
		h := lctrace.New(tr, lctrace.Options{})
		model := newScripted(h,
			turn{calls: []llms.ToolCall{funcCall("m1", "math_agent", `{"__arg1":"What is 12 * 12?"}`)}},
			turn{content: "Action: calculator\nAction Input: 12 * 12"},
			turn{content: "Final Answer: 144"},
			turn{content: "The math agent says 144."},
		)
		inner := agents.NewExecutor(agents.NewOneShotAgent(model, []tools.Tool{tools.Calculator{CallbacksHandler: h}}, agents.WithCallbacksHandler(h)), agents.WithCallbacksHandler(h))
		sub := chainTool{name: "math_agent", chain: inner, h: h}
		exec := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(model, []tools.Tool{sub}, agents.WithCallbacksHandler(h)), agents.WithCallbacksHandler(h))
		out, err := chains.Run(context.Background(), exec, "Ask the math agent for 12 * 12")
		if err != nil || out != "The math agent says 144." {
			t.Fatalf("run returned %q, %v", out, err)
		}
		recs := one(t, c)
		want := `run.start langchaingo → run.end success
  message user
  iteration.start → iteration.end continue
    model.call llm tool_calls
    tool.start math_agent → tool.end
      child.spawn chain → child.end success
        message user
        iteration.start → iteration.end continue
          model.call llm stop
          tool.start calculator → tool.end
        iteration.start → iteration.end terminate
          model.call llm stop
          message assistant
  iteration.start → iteration.end terminate
    model.call llm stop
    message assistant
`
		if got := outline(recs); got != want {
			t.Errorf("trace tree:\n%s\nwant:\n%s", got, want)
		}
		st := trace.StatsOf(recs)
		if st.Iterations != 4 || st.Children != 1 {
			t.Errorf("stats: %d iterations, %d nested runs; want 4 and 1", st.Iterations, st.Children)
		}
		tracetest.New(t, recs).CalledInOrder("math_agent", "calculator").NoErrors().OutputContains("144")
	})
}

// chainTool is a langchaingo tool that runs a chain, the way a sub-agent
// or a translation step is offered to an agent.
type chainTool struct {
	name  string
	chain chains.Chain
	h     *lctrace.Handler
}

func (c chainTool) Name() string      { return c.name }
func (chainTool) Description() string { return "Runs a chain on its input." }
func (c chainTool) Call(ctx context.Context, input string) (string, error) {
	c.h.HandleToolStart(ctx, input)
	out, err := chains.Run(ctx, c.chain, input)
	if err != nil {
		c.h.HandleToolError(ctx, err)
		return "", err
	}
	c.h.HandleToolEnd(ctx, out)
	return out, nil
}

// modelTool is a langchaingo tool that asks a model itself.
type modelTool struct {
	model llms.Model
	h     *lctrace.Handler
}

func (modelTool) Name() string        { return "summarize" }
func (modelTool) Description() string { return "Summarises a text." }
func (m modelTool) Call(ctx context.Context, input string) (string, error) {
	m.h.HandleToolStart(ctx, input)
	out, err := llms.GenerateFromSinglePrompt(ctx, m.model, "Summarise: "+input)
	if err != nil {
		m.h.HandleToolError(ctx, err)
		return "", err
	}
	m.h.HandleToolEnd(ctx, out)
	return out, nil
}

// TestRetriever checks the mapping of a retriever's callbacks, made as
// langchaingo's vectorstores.Retriever makes them (every vector store of
// langchaingo needs an external database, so the callbacks are made here
// directly, inside a real chain's run).
func TestRetriever(t *testing.T) {
	tr, c := newTracer()
	h := lctrace.New(tr, lctrace.Options{})
	ctx := context.Background()
	h.HandleChainStart(ctx, map[string]any{"query": "loupe"})
	h.HandleRetrieverStart(ctx, "what is loupe")
	h.HandleRetrieverEnd(ctx, "what is loupe", []schema.Document{
		{PageContent: "Loupe records agent runs.", Metadata: map[string]any{"source": "README.md"}, Score: 0.5},
	})
	h.HandleRetrieverStart(ctx, "never answered")
	h.HandleChainEnd(ctx, map[string]any{"text": "done"})
	recs := one(t, c)
	want := `run.start langchaingo → run.end success
  message user
  tool.start retriever → tool.end
  tool.start retriever → tool.error !langchaingo reported no end for this call
`
	if got := outline(recs); got != want {
		t.Errorf("trace tree:\n%s\nwant:\n%s", got, want)
	}
	ends := ofType(recs, trace.TypeToolEnd)
	if !jsonEq(t, ends[0].Output, `[{"page_content":"Loupe records agent runs.","metadata":{"source":"README.md"},"score":0.5}]`) {
		t.Errorf("retriever output %s", ends[0].Output)
	}
	tracetest.New(t, recs).Args("retriever", map[string]any{"query": "what is loupe"}, tracetest.Exact)
}

// TestConcurrentRuns runs executors concurrently through one Handler, each
// with its own context, and checks that each run's trace is its own.
func TestConcurrentRuns(t *testing.T) {
	tr, c := newTracer()
	h := lctrace.New(tr, lctrace.Options{})
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			expr := fmt.Sprintf("%d * 10", i)
			model := newScripted(h,
				turn{calls: []llms.ToolCall{funcCall(fmt.Sprint("c", i), "calculator", `{"__arg1":"`+expr+`"}`)}},
				turn{content: fmt.Sprint(i * 10)},
			)
			exec := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(model, []tools.Tool{tools.Calculator{CallbacksHandler: h}}, agents.WithCallbacksHandler(h)), agents.WithCallbacksHandler(h))
			if out, err := chains.Run(ctx, exec, expr); err != nil || out != fmt.Sprint(i*10) {
				t.Errorf("run %d: %q, %v", i, out, err)
			}
		})
	}
	wg.Wait()
	all := c.all()
	if len(all) != n {
		t.Fatalf("%d traces, want %d", len(all), n)
	}
	seen := map[string]bool{}
	for _, recs := range all {
		check(t, recs)
		q := recs[0].Input.Text()
		seen[q] = true
		tools := ofType(recs, trace.TypeToolStart)
		ends := ofType(recs, trace.TypeToolEnd)
		if len(tools) != 1 || len(ends) != 1 || tools[0].Input.Text() != q || ends[0].Output.Text() == "" {
			t.Errorf("run %q: tool calls %d/%d, want one with the run's own input", q, len(tools), len(ends))
			continue
		}
		if end := recs[len(recs)-1]; end.Type != trace.TypeRunEnd || end.Output.Text() != ends[0].Output.Text() {
			t.Errorf("run %q ended %s with %s, want its own tool's result %s", q, end.Type, end.Output, ends[0].Output)
		}
	}
	if len(seen) != n {
		t.Errorf("runs had %d distinct inputs, want %d", len(seen), n)
	}
}

// TestNotFinishedText keeps the text the Handler recognises in step with
// langchaingo's.
func TestNotFinishedText(t *testing.T) {
	tr, c := newTracer()
	h := lctrace.New(tr, lctrace.Options{})
	ctx := context.Background()
	h.HandleChainStart(ctx, map[string]any{"input": "x"})
	h.HandleAgentFinish(ctx, schema.AgentFinish{ReturnValues: map[string]any{"output": agents.ErrNotFinished.Error()}})
	h.HandleChainError(ctx, agents.ErrNotFinished)
	recs := one(t, c)
	if end := recs[len(recs)-1]; end.Status != string(trace.TerminationMaxIterations) {
		t.Errorf("run ended %q, want max_iterations: agents.ErrNotFinished's text changed?", end.Status)
	}
}
