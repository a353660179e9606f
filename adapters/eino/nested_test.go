package einotrace_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cloudwego/eino/components/prompt"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	einotrace "github.com/loupe-dev/loupe/adapters/eino"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/tracetest"
)

type researchIn struct {
	Topic string `json:"topic"`
}

type lookupIn struct {
	Q string `json:"q"`
}

const innerAnswer = "Eino is CloudWeGo's framework for LLM applications in Go."

// TestAgentAsTool: an agent whose tool runs another agent. The inner
// agent's graph is a nested run under the tool call that ran it, its
// records one level deeper, its tokens and calls part of the trace.
func TestAgentAsTool(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "generate", true: "stream"}[stream], func(t *testing.T) {
			h, col := newHandler(t)
			lookup, err := utils.InferTool("lookup", "Looks a term up.", func(_ context.Context, in lookupIn) (string, error) {
				return "CloudWeGo's LLM framework", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			inner := newAgent(t, newModel(false, "", []turn{
				{msg: &schema.Message{Role: schema.Assistant, ToolCalls: []schema.ToolCall{call("c1", "lookup", `{"q":"eino"}`)},
					ResponseMeta: &schema.ResponseMeta{FinishReason: "tool_calls", Usage: usage(40, 8, 0, 0)}}},
				{msg: &schema.Message{Role: schema.Assistant, Content: innerAnswer,
					ResponseMeta: &schema.ResponseMeta{FinishReason: "stop", Usage: usage(60, 14, 0, 0)}}},
			}), react.AgentConfig{GraphName: "researcher", ToolsConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{lookup}}})
			research, err := utils.InferTool("research", "Researches a topic.", func(ctx context.Context, in researchIn) (string, error) {
				// The tool's context carries the callbacks: the inner agent is recorded too.
				msg, err := inner.Generate(ctx, []*schema.Message{schema.UserMessage(in.Topic)})
				if err != nil {
					return "", err
				}
				return msg.Content, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			outer := newAgent(t, newModel(false, "", []turn{
				{msg: &schema.Message{Role: schema.Assistant, ToolCalls: []schema.ToolCall{call("c1", "research", `{"topic":"eino"}`)},
					ResponseMeta: &schema.ResponseMeta{FinishReason: "tool_calls", Usage: usage(100, 10, 0, 0)}}},
				{msg: &schema.Message{Role: schema.Assistant, Content: "Eino is a Go framework.",
					ResponseMeta: &schema.ResponseMeta{FinishReason: "stop", Usage: usage(150, 9, 0, 0)}}},
			}), react.AgentConfig{ToolsConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{research}}})

			if _, err := run(t, outer, h, stream, "What is Eino?"); err != nil {
				t.Fatal(err)
			}
			wait(t, h)
			recs := col.one(t)

			tracetest.New(t, recs).
				CalledExactly("research", "lookup").
				Args("lookup", map[string]any{"q": "eino"}, tracetest.Exact).
				MaxLLMCalls(4).
				NoErrors().
				OutputContains("Go framework")

			root := oneOf(t, recs, trace.TypeRunStart, "ReActAgent")
			tool := oneOf(t, recs, trace.TypeToolStart, "research")
			spawn := oneOf(t, recs, trace.TypeChildSpawn, "researcher")
			end := oneOf(t, recs, trace.TypeChildEnd, "researcher")
			if tool.ParentID != root.SpanID || spawn.ParentID != tool.SpanID || end.SpanID != spawn.SpanID {
				t.Errorf("the nested run does not hang under the tool call:\n%s", dump(recs))
			}
			if end.Status != string(trace.TerminationSuccess) || trace.Value(end.Output).Text() != innerAnswer {
				t.Errorf("child.end %q %s", end.Status, end.Output)
			}
			toolEnd := oneOf(t, recs, trace.TypeToolEnd, "research")
			if toolEnd.Seq < end.Seq || trace.Value(toolEnd.Output).Text() != innerAnswer {
				t.Errorf("research's tool.end (seq %d, %s) and child.end (seq %d)", toolEnd.Seq, toolEnd.Output, end.Seq)
			}
			// The inner agent's records: depth 1, under its run's span.
			for _, r := range recs {
				inner := r.Seq > spawn.Seq && r.Seq < end.Seq
				if inner != (r.Depth == 1) {
					t.Errorf("%s %s (seq %d) at depth %d:\n%s", r.Type, r.Name, r.Seq, r.Depth, dump(recs))
				}
			}
			if got := oneOf(t, recs, trace.TypeToolStart, "lookup"); got.ParentID != spawn.SpanID || got.Depth != 1 {
				t.Errorf("lookup hangs under %s at depth %d", got.ParentID, got.Depth)
			}
			st := trace.StatsOf(recs)
			if st.ModelCalls != 4 || st.Children != 1 || st.InputTokens != 350 || st.OutputTokens != 41 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestGraphWithSubgraph: a graph with a chat template node and the ReAct
// agent's graph as a node of its own. The template is a node span, the
// agent's graph a nested run.
func TestGraphWithSubgraph(t *testing.T) {
	ctx := context.Background()
	h, col := newHandler(t)
	a := newAgent(t, newModel(true, "scripted-1", weatherScript()), react.AgentConfig{})
	sub, subOpts := a.ExportGraph()

	g := compose.NewGraph[map[string]any, *schema.Message]()
	tpl := prompt.FromMessages(schema.FString, schema.SystemMessage("You are a weather assistant."), schema.UserMessage("What's the weather in {city}, and the time?"))
	if err := g.AddChatTemplateNode("prompt", tpl, compose.WithNodeName("prompt")); err != nil {
		t.Fatal(err)
	}
	if err := g.AddGraphNode("agent", sub, append(subOpts, compose.WithNodeName("weather_agent"))...); err != nil {
		t.Fatal(err)
	}
	for _, e := range [][2]string{{compose.START, "prompt"}, {"prompt", "agent"}, {"agent", compose.END}} {
		if err := g.AddEdge(e[0], e[1]); err != nil {
			t.Fatal(err)
		}
	}
	r, err := g.Compile(ctx, compose.WithGraphName("pipeline"))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := r.Invoke(ctx, map[string]any{"city": "Paris"}, compose.WithCallbacks(h))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content != weatherAnswer {
		t.Fatalf("answer %q", msg.Content)
	}
	wait(t, h)
	recs := col.one(t)

	root := oneOf(t, recs, trace.TypeRunStart, "pipeline")
	if string(root.Input) != `{"city":"Paris"}` {
		t.Errorf("run.start input %s", root.Input)
	}
	node := oneOf(t, recs, trace.TypeNodeStart, "prompt")
	nodeEnd := oneOf(t, recs, trace.TypeNodeEnd, "prompt")
	if node.ParentID != root.SpanID || !strings.Contains(string(nodeEnd.Output), "What's the weather in Paris") {
		t.Errorf("prompt node: under %s, output %s", node.ParentID, nodeEnd.Output)
	}
	spawns := ofType(recs, trace.TypeChildSpawn)
	if len(spawns) != 1 || spawns[0].ParentID != root.SpanID {
		t.Fatalf("child.spawn records:\n%s", dump(recs))
	}
	child := spawns[0].SpanID
	calls := ofType(recs, trace.TypeModelCall)
	if len(calls) != 2 {
		t.Fatalf("%d model calls:\n%s", len(calls), dump(recs))
	}
	for _, c := range calls {
		if c.Depth != 1 || c.ParentID != child || c.Name != "scripted-1" {
			t.Errorf("model.call %s at depth %d under %s", c.Name, c.Depth, c.ParentID)
		}
	}
	// The nested run's input messages are message records in it.
	var roles []string
	for _, m := range ofType(recs, trace.TypeMessage) {
		if m.Depth == 1 {
			roles = append(roles, m.Name)
		}
	}
	if strings.Join(roles, ",") != "system,user,assistant" {
		t.Errorf("nested message records %v:\n%s", roles, dump(recs))
	}
	if end := oneOf(t, recs, trace.TypeRunEnd, "pipeline"); trace.Value(end.Output).Text() != weatherAnswer {
		t.Errorf("run.end output %s", end.Output)
	}
}

// TestInsideLoupeRun: without a tracer of its own, the Handler records an
// Eino agent into the Loupe run its context carries, as a nested run.
func TestInsideLoupeRun(t *testing.T) {
	h, err := einotrace.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, newModel(false, "", weatherScript()), react.AgentConfig{})
	traj := tracetest.Run(t, "assistant", "weather?", func(ctx context.Context) (string, error) {
		msg, err := a.Generate(ctx, []*schema.Message{schema.UserMessage("What's the weather in Paris?")},
			agent.WithComposeOptions(compose.WithCallbacks(h)))
		if err != nil {
			return "", err
		}
		return msg.Content, h.Wait(ctx)
	})
	traj.Called("get_weather", "get_time").NoErrors().MaxLLMCalls(2).OutputContains("sunny")
	recs := traj.Records()
	root := oneOf(t, recs, trace.TypeRunStart, "assistant")
	spawn := oneOf(t, recs, trace.TypeChildSpawn, "ReActAgent")
	if spawn.ParentID != root.SpanID {
		t.Errorf("child.spawn under %s", spawn.ParentID)
	}
	for _, c := range ofType(recs, trace.TypeModelCall) {
		if c.Depth != 1 {
			t.Errorf("model.call at depth %d", c.Depth)
		}
	}

	// And with no Loupe run in the context, nothing is recorded and nothing breaks.
	b := newAgent(t, newModel(false, "", weatherScript()), react.AgentConfig{})
	if _, err := run(t, b, h, false, "What's the weather in Paris?"); err != nil {
		t.Fatal(err)
	}
}
