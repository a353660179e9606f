package einotrace_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/tracetest"
)

// TestReActAgent runs Eino's ReAct agent, which calls two tools at once and
// then answers, by Generate and by Stream, with a model that leaves its
// callbacks to the graph and with one that reports its own (as eino-ext's
// providers do), and checks the trace against what Loupe's own runtime
// records.
func TestReActAgent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		own    bool   // the model reports its own callbacks
		stream bool   // Stream instead of Generate
		model  string // the model.call records' name
	}{
		{name: "generate", model: "Scripted"},
		{name: "generate, model's own callbacks", own: true, model: "scripted-1"},
		{name: "stream", stream: true, model: "Scripted"},
		{name: "stream, model's own callbacks", own: true, stream: true, model: "scripted-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, col := newHandler(t)
			a := newAgent(t, newModel(tc.own, "scripted-1", weatherScript()), react.AgentConfig{})
			answer, err := run(t, a, h, tc.stream, "What's the weather in Paris, and the time?")
			if err != nil {
				t.Fatal(err)
			}
			if answer != weatherAnswer {
				t.Fatalf("answer %q, want %q", answer, weatherAnswer)
			}
			wait(t, h)
			recs := col.one(t)

			// The trajectory, graded as loupe eval grades it.
			tracetest.New(t, recs).
				Called("get_weather", "get_time").
				Args("get_weather", map[string]any{"city": "Paris"}, tracetest.Exact).
				Args("get_time", map[string]any{"zone": "Europe/Paris"}, tracetest.Exact).
				MaxToolCalls(2).
				MaxLLMCalls(2).
				MaxTokens(120 + 30 + 200 + 18).
				NoErrors().
				OutputContains("sunny and 21°C")

			// One root run, everything else directly under it, its end last.
			start := oneOf(t, recs, trace.TypeRunStart, "ReActAgent")
			end := oneOf(t, recs, trace.TypeRunEnd, "ReActAgent")
			if end.Seq != recs[len(recs)-1].Seq {
				t.Errorf("run.end is not the last record:\n%s", dump(recs))
			}
			if end.Status != string(trace.TerminationSuccess) || trace.Value(end.Output).Text() != weatherAnswer {
				t.Errorf("run.end status %q output %s", end.Status, end.Output)
			}
			if !tc.stream && !strings.Contains(string(start.Input), "What's the weather in Paris") {
				t.Errorf("run.start input %s", start.Input)
			}
			for _, r := range recs {
				if r.Depth != 0 {
					t.Errorf("%s %s at depth %d", r.Type, r.Name, r.Depth)
				}
				switch r.Type {
				case trace.TypeModelCall, trace.TypeToolStart, trace.TypeToolEnd, trace.TypeMessage, trace.TypeToolDiscovered:
					if r.ParentID != start.SpanID {
						t.Errorf("%s %s hangs under %s, not the run %s", r.Type, r.Name, r.ParentID, start.SpanID)
					}
				}
			}

			// The model calls: name, tokens, thinking, finish, output.
			calls := named(recs, trace.TypeModelCall, tc.model)
			if len(calls) != 2 {
				t.Fatalf("got %d model.call records named %q, want 2:\n%s", len(calls), tc.model, dump(recs))
			}
			first, second := calls[0], calls[1]
			want := trace.Usage{Provider: "scripted", InputTokens: 120, OutputTokens: 30, CachedTokens: 100, ReasoningTokens: 12, CostUnknown: true}
			if first.Usage != want {
				t.Errorf("first call's usage %+v, want %+v", first.Usage, want)
			}
			if want := (trace.Usage{Provider: "scripted", InputTokens: 200, OutputTokens: 18, CostUnknown: true}); second.Usage != want {
				t.Errorf("second call's usage %+v, want %+v", second.Usage, want)
			}
			if first.Status != "tool_calls" || second.Status != "stop" {
				t.Errorf("finish reasons %q, %q", first.Status, second.Status)
			}
			if trace.Value(first.Thinking).Text() != "I need the weather and the time." {
				t.Errorf("thinking %s", first.Thinking)
			}
			out := decode(t, first.Output).(map[string]any)
			tcs, _ := out["tool_calls"].([]any)
			if len(tcs) != 2 || tcs[0].(map[string]any)["name"] != "get_weather" ||
				tcs[0].(map[string]any)["input"].(map[string]any)["city"] != "Paris" {
				t.Errorf("first call's output %s", first.Output)
			}
			if trace.Value(second.Output).Text() != weatherAnswer {
				t.Errorf("second call's output %s", second.Output)
			}
			// The second call's request shows the tool results it was sent.
			var req struct {
				Messages int
				New      []struct{ Role, Content, Name string }
			}
			if err := trace.Value(second.Input).Decode(&req); err != nil {
				t.Fatal(err)
			}
			if req.Messages != 4 || len(req.New) != 2 || req.New[0].Role != "tool" || req.New[0].Name != "get_weather" ||
				!strings.Contains(req.New[0].Content, `"temp_c":21`) || req.New[1].Content != "10:00" {
				t.Errorf("second call's request %s", second.Input)
			}

			// The tool calls: after the model call that asked for them,
			// arguments and results as JSON.
			for _, name := range []string{"get_weather", "get_time"} {
				if s := oneOf(t, recs, trace.TypeToolStart, name); s.Seq < first.Seq || s.Seq > second.Seq {
					t.Errorf("%s's tool.start (seq %d) is not between the model calls (%d, %d)", name, s.Seq, first.Seq, second.Seq)
				}
			}
			weather := oneOf(t, recs, trace.TypeToolEnd, "get_weather")
			if got := decode(t, weather.Output).(map[string]any); got["sky"] != "sunny" || got["temp_c"] != 21.0 {
				t.Errorf("get_weather output %s", weather.Output)
			}
			if got := oneOf(t, recs, trace.TypeToolStart, "get_weather"); string(got.Input) != `{"city":"Paris"}` {
				t.Errorf("get_weather input %s", got.Input)
			}
			if got := oneOf(t, recs, trace.TypeToolEnd, "get_time"); trace.Value(got.Output).Text() != "10:00" {
				t.Errorf("get_time output %s", got.Output)
			}

			// Messages: the question and the answer.
			msgs := ofType(recs, trace.TypeMessage)
			if len(msgs) != 2 || msgs[len(msgs)-1].Name != "assistant" || trace.Value(msgs[len(msgs)-1].Output).Text() != weatherAnswer {
				t.Errorf("message records:\n%s", dump(msgs))
			}
			if named(msgs, trace.TypeMessage, "user") == nil {
				t.Errorf("no user message record:\n%s", dump(recs))
			}

			// Tools offered: known only when the model reports them.
			disc := ofType(recs, trace.TypeToolDiscovered)
			if tc.own {
				if len(disc) != 3 || !strings.Contains(string(disc[0].Input), `"city"`) {
					t.Errorf("tool.discovered records:\n%s", dump(disc))
				}
			} else if len(disc) != 0 {
				t.Errorf("tool.discovered without tools offered:\n%s", dump(disc))
			}

			// Streamed: every chunk of text and reasoning, under its call, before it.
			deltas := ofType(recs, trace.TypeModelDelta)
			if !tc.stream {
				if len(deltas) != 0 {
					t.Errorf("%d model.delta records without streaming", len(deltas))
				}
				return
			}
			var text strings.Builder
			thinking := 0
			for _, d := range deltas {
				switch d.ParentID {
				case second.SpanID:
					if d.Status != "text" || d.Seq > second.Seq {
						t.Errorf("delta %s %s of the second call", d.Status, d.Output)
					}
					text.WriteString(trace.Value(d.Output).Text())
				case first.SpanID:
					if d.Status == "thinking" {
						thinking++
					}
				default:
					t.Errorf("delta under %s, no model call", d.ParentID)
				}
			}
			if text.String() != weatherAnswer || thinking != 1 {
				t.Errorf("deltas: text %q, %d thinking", text.String(), thinking)
			}
		})
	}
}

// TestFailingTool: a tool that fails is a tool.error, whether the error
// fails the agent (Eino's ToolsNode default) or a tool middleware hands it
// to the model as the call's result, after which the agent answers.
func TestFailingTool(t *testing.T) {
	ask := turn{msg: &schema.Message{Role: schema.Assistant, ToolCalls: []schema.ToolCall{call("call_1", "get_stock", `{"symbol":"ACME"}`)},
		ResponseMeta: &schema.ResponseMeta{FinishReason: "tool_calls", Usage: usage(50, 10, 0, 0)}}}
	answer := turn{msg: &schema.Message{Role: schema.Assistant, Content: "The stock service is down; try again later.",
		ResponseMeta: &schema.ResponseMeta{FinishReason: "stop", Usage: usage(70, 12, 0, 0)}}}
	for _, tc := range []struct {
		name       string
		middleware bool
		turns      []turn
		status     trace.TerminationReason
	}{
		{name: "fails the agent", turns: []turn{ask}, status: trace.TerminationError},
		{name: "observed by the model", middleware: true, turns: []turn{ask, answer}, status: trace.TerminationSuccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, col := newHandler(t)
			var cfg react.AgentConfig
			if tc.middleware {
				cfg.ToolsConfig.ToolCallMiddlewares = []compose.ToolMiddleware{{Invokable: errorAsResult}}
			}
			a := newAgent(t, newModel(false, "", tc.turns), cfg)
			_, err := run(t, a, h, false, "What does ACME trade at?")
			if (err != nil) != (tc.status == trace.TerminationError) {
				t.Fatalf("agent error %v", err)
			}
			wait(t, h)
			recs := col.one(t)

			if got := oneOf(t, recs, trace.TypeToolStart, "get_stock"); string(got.Input) != `{"symbol":"ACME"}` {
				t.Errorf("tool.start input %s", got.Input)
			}
			failed := oneOf(t, recs, trace.TypeToolError, "get_stock")
			if !strings.Contains(failed.Error, errStockDown.Error()) {
				t.Errorf("tool.error %q", failed.Error)
			}
			end := oneOf(t, recs, trace.TypeRunEnd, "ReActAgent")
			if end.Status != string(tc.status) {
				t.Errorf("run.end status %q, want %q", end.Status, tc.status)
			}
			st := trace.StatsOf(recs)
			if st.Errors != 1 || st.ByTool["get_stock"].Errors != 1 {
				t.Errorf("stats: %d errors, get_stock %+v", st.Errors, st.ByTool["get_stock"])
			}
			traj := tracetest.New(t, recs).Called("get_stock").Trajectory()
			if len(traj.Calls) != 1 || !strings.Contains(traj.Calls[0].Err, errStockDown.Error()) {
				t.Errorf("trajectory calls %+v", traj.Calls)
			}
			if tc.status == trace.TerminationError {
				if !strings.Contains(end.Error, errStockDown.Error()) {
					t.Errorf("run.end error %q", end.Error)
				}
				return
			}
			calls := ofType(recs, trace.TypeModelCall)
			if len(calls) != 2 || !strings.Contains(string(calls[1].Input), "error: ") {
				t.Errorf("the model did not see the error:\n%s", dump(recs))
			}
		})
	}
}

// errorAsResult is a tool middleware that hands a tool's error to the
// model as the call's result, outside the tool's callbacks.
func errorAsResult(next compose.InvokableToolEndpoint) compose.InvokableToolEndpoint {
	return func(ctx context.Context, in *compose.ToolInput) (*compose.ToolOutput, error) {
		out, err := next(ctx, in)
		if err != nil {
			return &compose.ToolOutput{Result: "error: " + err.Error()}, nil
		}
		return out, nil
	}
}

// TestFailingModel: a model call that fails is a model.call with its
// error, and the agent's run ends in error, by Generate and by Stream
// (where the stream fails after its first chunk).
func TestFailingModel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		turn   turn
	}{
		{name: "generate", turn: turn{err: errors.New("rate limited")}},
		{name: "stream", stream: true, turn: turn{streamErr: errors.New("rate limited"),
			msg: &schema.Message{Role: schema.Assistant, Content: "Partial answer"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, col := newHandler(t)
			a := newAgent(t, newModel(false, "", []turn{tc.turn}), react.AgentConfig{})
			_, err := run(t, a, h, tc.stream, "Hi")
			if err == nil || !strings.Contains(err.Error(), "rate limited") {
				t.Fatalf("agent error %v", err)
			}
			wait(t, h)
			recs := col.one(t)
			c := oneOf(t, recs, trace.TypeModelCall, "Scripted")
			if !strings.Contains(c.Error, "rate limited") {
				t.Errorf("model.call error %q", c.Error)
			}
			end := oneOf(t, recs, trace.TypeRunEnd, "ReActAgent")
			if end.Status != string(trace.TerminationError) || !strings.Contains(end.Error, "rate limited") || end.Seq != recs[len(recs)-1].Seq {
				t.Errorf("run.end %q %q:\n%s", end.Status, end.Error, dump(recs))
			}
			if st := trace.StatsOf(recs); st.Errors != 1 {
				t.Errorf("%d errors counted, want 1 (the model call's):\n%s", st.Errors, dump(recs))
			}
		})
	}
}
