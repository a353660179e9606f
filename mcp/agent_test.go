package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/mcp"
	"github.com/loupe-dev/loupe/trace"
)

// TestAgentRun runs a scripted agent whose tools come from the Go SDK test
// server, over each transport, and checks what the trace holds: the tools
// discovered with their schemas, each call's arguments, result, isError,
// failure and duration, and a run that goes on past failed calls.
func TestAgentRun(t *testing.T) {
	script, err := scripted.Parse([]byte(`
model: scripted-mcp
turns:
  - tool_calls:
      - {name: echo, input: {message: hi}}
  - tool_calls:
      - {name: fail, input: {message: Atlantis}}
      - {name: hang, input: {}}
  - when: "no such city: Atlantis"
    answer: Atlantis is not a city.
  - answer: the model never saw the failure
`), "mcp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			s := p.server(t)
			s.CallTimeout = time.Second // bounds every call: leave room on a loaded machine
			c := connect(t, s)
			loop := &agent.ReAct{Model: script.NewModel(), Tools: c}
			exec := &agent.Executor{Tracer: trace.New(trace.Options{}), Limits: agent.Limits{MaxIterations: 5}}
			res := exec.Run(context.Background(), loop, "Is Atlantis a city?")
			if res.Err != nil || res.Termination != trace.TerminationSuccess || res.Answer != "Atlantis is not a city." {
				t.Fatalf("run: %q, %s, %v", res.Answer, res.Termination, res.Err)
			}

			var discovered []string
			byType := map[trace.Type][]trace.Record{}
			for _, r := range res.Records {
				byType[r.Type] = append(byType[r.Type], r)
				if r.Type == trace.TypeToolDiscovered {
					discovered = append(discovered, r.Name)
					if r.Name == "echo" && !strings.Contains(string(r.Input), `"description":"what to echo"`) {
						t.Errorf("tool.discovered echo: schema %s is not the server's", r.Input)
					}
				}
			}
			slices.Sort(discovered)
			if want := []string{"big", "die", "echo", "fail", "hang", "image", "proc", "weather"}; !slices.Equal(discovered, want) {
				t.Errorf("tool.discovered %v, want %v", discovered, want)
			}

			starts := byType[trace.TypeToolStart]
			if len(starts) != 3 || starts[0].Name != "echo" || string(starts[0].Input) != `{"message":"hi"}` ||
				starts[1].Name != "fail" || string(starts[1].Input) != `{"message":"Atlantis"}` || starts[2].Name != "hang" {
				t.Errorf("tool.start records: %v", starts)
			}
			ends := byType[trace.TypeToolEnd]
			if len(ends) != 1 || ends[0].Name != "echo" || ends[0].SpanID != starts[0].SpanID ||
				string(ends[0].Output) != `{"server":"gotest","tool":"echo","text":"echo: hi"}` || ends[0].Duration <= 0 {
				t.Errorf("tool.end records: %v", ends)
			}
			errs := byType[trace.TypeToolError]
			if len(errs) != 2 {
				t.Fatalf("tool.error records: %v", errs)
			}
			fail, hang := errs[0], errs[1]
			if fail.Name != "fail" || fail.Error != `mcp server "gotest", tool "fail": no such city: Atlantis` ||
				string(fail.Output) != `{"server":"gotest","tool":"fail","text":"no such city: Atlantis","isError":true}` || fail.Duration <= 0 {
				t.Errorf("tool.error for the isError result: %+v (output %s)", fail, fail.Output)
			}
			if hang.Name != "hang" || !strings.HasPrefix(hang.Error, `mcp server "gotest", tool "hang": no answer within 1s`) ||
				hang.Output != nil || hang.Duration < time.Second {
				t.Errorf("tool.error for the timeout: %+v", hang)
			}
			if res.Stats.ToolCalls != 3 || res.Stats.ByTool["fail"].Errors != 1 {
				t.Errorf("stats: %d tool calls, by tool %+v", res.Stats.ToolCalls, res.Stats.ByTool)
			}

			// The model was given the failures as error results.
			var toolMsgs []agent.Message
			for _, m := range loop.History() {
				if m.Role == agent.RoleTool {
					toolMsgs = append(toolMsgs, m)
				}
			}
			if len(toolMsgs) != 3 || toolMsgs[0].IsError || !toolMsgs[1].IsError || !toolMsgs[2].IsError ||
				!strings.Contains(toolMsgs[1].Content, "no such city: Atlantis") {
				t.Errorf("tool messages the model saw: %+v", toolMsgs)
			}
		})
	}
}

// TestConnectInRun checks that connecting inside a traced run records the
// tools it found there.
func TestConnectInRun(t *testing.T) {
	tr := trace.New(trace.Options{})
	ctx, ec := tr.Start(context.Background(), "setup", trace.RunOptions{})
	c, err := mcp.Connect(ctx, stdioServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ec.End(nil, nil)
	var got []string
	for _, r := range ec.Records() {
		if r.Type == trace.TypeToolDiscovered {
			got = append(got, r.Name)
			var schema map[string]any
			if err := json.Unmarshal(r.Input, &schema); err != nil || schema["type"] != "object" {
				t.Errorf("tool.discovered %s: schema %s", r.Name, r.Input)
			}
			if r.Name == "echo" && string(r.Output) != `"Echo a message."` {
				t.Errorf("tool.discovered echo: description %s", r.Output)
			}
		}
	}
	if len(got) != len(c.Definitions()) {
		t.Errorf("tool.discovered %v, want one per tool of %v", got, c.Definitions())
	}
}
