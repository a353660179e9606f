package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/loupe-dev/loupe/llm/internal/llmtest"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/openai"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/trace"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// respObject is a Responses API response object (API reference, "The
// response object") with the given status, incomplete details, output
// items and usage.
func respObject(model, status, incomplete, output, usage string) string {
	return `{"id":"resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b","object":"response","created_at":1741476542,` +
		`"status":"` + status + `","error":null,"incomplete_details":` + incomplete + `,"instructions":null,"max_output_tokens":null,` +
		`"model":"` + model + `","output":` + output + `,"parallel_tool_calls":true,"previous_response_id":null,` +
		`"reasoning":{"effort":"medium","summary":"auto"},"store":false,"temperature":1.0,"text":{"format":{"type":"text"}},` +
		`"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":` + usage + `,"user":null,"metadata":{}}`
}

const (
	rCreated    = `{"type":"response.created","sequence_number":0,"response":` // + respObject + `}`
	usageCalls  = `{"input_tokens":1000,"input_tokens_details":{"cached_tokens":600},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":200},"total_tokens":1300}`
	usageAnswer = `{"input_tokens":1400,"input_tokens_details":{"cached_tokens":1024},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":10},"total_tokens":1450}`
	callParis   = `{"type":"function_call","id":"fc_67ccd2c0a3c08190a6a8a4e1","call_id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","name":"weather","arguments":"{\"city\": \"Paris\"}","status":"completed"}`
	callOslo    = `{"type":"function_call","id":"fc_67ccd2c0b1d48190b7c1e2f3","call_id":"call_ABaZCHNRt7PL5Ybgs5bJ07pn","name":"weather","arguments":"{\"city\": \"Oslo\"}","status":"completed"}`
)

// responsesToolStream streams two parallel function calls whose arguments
// are split across response.function_call_arguments.delta events, then
// response.completed with usage, as the Responses API streams them.
var responsesToolStream = []string{
	rCreated + respObject("o4-mini-2025-04-16", "in_progress", "null", "[]", "null") + `}`,
	`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_67ccd2c0a3c08190a6a8a4e1","call_id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","name":"weather","arguments":"","status":"in_progress"}}`,
	`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_67ccd2c0a3c08190a6a8a4e1","output_index":0,"delta":"{\"ci"}`,
	`{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_67ccd2c0a3c08190a6a8a4e1","output_index":0,"delta":"ty\": \"Paris\"}"}`,
	`{"type":"response.function_call_arguments.done","sequence_number":4,"item_id":"fc_67ccd2c0a3c08190a6a8a4e1","output_index":0,"arguments":"{\"city\": \"Paris\"}"}`,
	`{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":` + callParis + `}`,
	`{"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"type":"function_call","id":"fc_67ccd2c0b1d48190b7c1e2f3","call_id":"call_ABaZCHNRt7PL5Ybgs5bJ07pn","name":"weather","arguments":"","status":"in_progress"}}`,
	`{"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_67ccd2c0b1d48190b7c1e2f3","output_index":1,"delta":"{\"city\": "}`,
	`{"type":"response.function_call_arguments.delta","sequence_number":8,"item_id":"fc_67ccd2c0b1d48190b7c1e2f3","output_index":1,"delta":"\"Oslo\"}"}`,
	`{"type":"response.function_call_arguments.done","sequence_number":9,"item_id":"fc_67ccd2c0b1d48190b7c1e2f3","output_index":1,"arguments":"{\"city\": \"Oslo\"}"}`,
	`{"type":"response.output_item.done","sequence_number":10,"output_index":1,"item":` + callOslo + `}`,
	`{"type":"response.completed","sequence_number":11,"response":` + respObject("o4-mini-2025-04-16", "completed", "null", `[`+callParis+`,`+callOslo+`]`, usageCalls) + `}`,
}

// responsesAnswerStream streams a reasoning summary and a text answer.
var responsesAnswerStream = []string{
	rCreated + respObject("o4-mini-2025-04-16", "in_progress", "null", "[]", "null") + `}`,
	`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}}`,
	`{"type":"response.reasoning_summary_part.added","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`,
	`{"type":"response.reasoning_summary_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Both cities "}`,
	`{"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"answered."}`,
	`{"type":"response.reasoning_summary_part.added","sequence_number":5,"item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}}`,
	`{"type":"response.reasoning_summary_text.delta","sequence_number":5,"item_id":"rs_1","output_index":0,"summary_index":1,"delta":"Done."}`,
	`{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Both cities answered."},{"type":"summary_text","text":"Done."}]}}`,
	`{"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"id":"msg_1","status":"in_progress","type":"message","role":"assistant","content":[]}}`,
	`{"type":"response.content_part.added","sequence_number":7,"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`,
	`{"type":"response.output_text.delta","sequence_number":8,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Paris is sunny, ","logprobs":[]}`,
	`{"type":"response.output_text.delta","sequence_number":9,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Oslo is cold.","logprobs":[]}`,
	`{"type":"response.output_text.done","sequence_number":10,"item_id":"msg_1","output_index":1,"content_index":0,"text":"Paris is sunny, Oslo is cold.","logprobs":[]}`,
	`{"type":"response.output_item.done","sequence_number":11,"output_index":1,"item":{"id":"msg_1","status":"completed","type":"message","role":"assistant","content":[{"type":"output_text","text":"Paris is sunny, Oslo is cold.","annotations":[]}]}}`,
	`{"type":"response.completed","sequence_number":12,"response":` + respObject("o4-mini-2025-04-16", "completed", "null", `[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Both cities answered."}]},{"id":"msg_1","status":"completed","type":"message","role":"assistant","content":[{"type":"output_text","text":"Paris is sunny, Oslo is cold.","annotations":[]}]}]`, usageAnswer) + `}`,
}

// without returns events minus those whose type is one of types.
func without(events []string, types ...string) []string {
	var out []string
next:
	for _, e := range events {
		for _, t := range types {
			if strings.HasPrefix(e, `{"type":"`+t+`"`) {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}

// A run through agent.Executor in Responses mode: parallel function calls
// streamed in pieces, the tools run, their results sent back as
// function_call_output items, the answer streamed with a reasoning
// summary; usage and cost as in the Chat path. The "deltas only" case
// drops the events that carry whole arguments, so the calls can only
// come from the deltas.
func TestResponsesExecutorToolRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls []string
	}{
		{"full stream", responsesToolStream},
		{"deltas only", without(responsesToolStream, "response.output_item.done", "response.function_call_arguments.done")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, reply{sse: tc.calls}, reply{sse: responsesAnswerStream})
			exec := &agent.Executor{Tracer: trace.New(trace.Options{}), Limits: agent.Limits{MaxIterations: 4}}
			res := exec.Run(context.Background(), &agent.ReAct{Model: newModel(t, s, openai.WithResponsesAPI()), System: "Be brief.",
				Tools: agent.NewToolbox(weatherTool())}, "Weather in Paris and Oslo?")
			if res.Err != nil {
				t.Fatalf("run failed: %v", res.Err)
			}
			if res.Answer != "Paris is sunny, Oslo is cold." {
				t.Errorf("answer %q", res.Answer)
			}
			var calls, deltas, toolEnds []trace.Record
			for _, r := range res.Records {
				switch r.Type {
				case trace.TypeModelCall:
					calls = append(calls, r)
				case trace.TypeModelDelta:
					deltas = append(deltas, r)
				case trace.TypeToolEnd:
					toolEnds = append(toolEnds, r)
				}
			}
			if len(calls) != 2 {
				t.Fatalf("%d model.call records, want 2", len(calls))
			}
			// The same tokens as the Chat test, priced the same way (o4-mini).
			want1 := trace.Usage{Provider: "openai", InputTokens: 1000, OutputTokens: 300, CachedTokens: 600, ReasoningTokens: 200,
				CostUSD: (400*1.1 + 600*0.275 + 100*4.4 + 200*4.4) / 1e6}
			want2 := trace.Usage{Provider: "openai", InputTokens: 1400, OutputTokens: 50, CachedTokens: 1024, ReasoningTokens: 10,
				CostUSD: (376*1.1 + 1024*0.275 + 40*4.4 + 10*4.4) / 1e6}
			for i, w := range []trace.Usage{want1, want2} {
				got := calls[i].Usage
				if !near(got.CostUSD, w.CostUSD) {
					t.Errorf("call %d cost %v, want %v", i+1, got.CostUSD, w.CostUSD)
				}
				got.CostUSD, w.CostUSD = 0, 0
				if got != w {
					t.Errorf("call %d usage %+v, want %+v", i+1, got, w)
				}
			}
			if calls[0].Status != "tool_calls" || calls[1].Status != "stop" {
				t.Errorf("finish reasons %q, %q", calls[0].Status, calls[1].Status)
			}
			var out struct {
				ToolCalls []agent.ToolCall `json:"tool_calls"`
			}
			if err := json.Unmarshal(calls[0].Output, &out); err != nil {
				t.Fatalf("call 1 output %s: %v", calls[0].Output, err)
			}
			if len(out.ToolCalls) != 2 || out.ToolCalls[0].ID != "call_DdmO9pD3xa9XTPNJ32zg2hcA" || out.ToolCalls[1].ID != "call_ABaZCHNRt7PL5Ybgs5bJ07pn" ||
				out.ToolCalls[0].Name != "weather" || string(out.ToolCalls[0].Input) != `{"city": "Paris"}` || string(out.ToolCalls[1].Input) != `{"city": "Oslo"}` {
				t.Errorf("call 1 tool calls %s", calls[0].Output)
			}
			if got := string(calls[1].Thinking); got != `"Both cities answered.\n\nDone."` {
				t.Errorf("call 2 thinking %s", got)
			}
			if len(toolEnds) != 2 || string(toolEnds[0].Output) != `"sunny"` || string(toolEnds[1].Output) != `"cold"` {
				t.Errorf("tool ends %v", toolEnds)
			}
			var kinds []string
			for _, d := range deltas {
				kinds = append(kinds, d.Status+":"+string(d.Output))
			}
			if got := strings.Join(kinds, " "); got != `thinking:"Both cities " thinking:"answered." thinking:"\n\n" thinking:"Done." text:"Paris is sunny, " text:"Oslo is cold."` {
				t.Errorf("deltas %s", got)
			}

			// What went over the wire.
			if strings.Join(s.paths, " ") != "/v1/responses /v1/responses" {
				t.Errorf("paths %v", s.paths)
			}
			b1 := s.body(0)
			if b1["stream"] != true || b1["model"] != "o4-mini" || b1["store"] != false {
				t.Errorf("request 1: stream %v model %v store %v", b1["stream"], b1["model"], b1["store"])
			}
			tools, _ := b1["tools"].([]any)
			if len(tools) != 1 {
				t.Fatalf("request 1 tools %v", b1["tools"])
			}
			fn := tools[0].(map[string]any)
			if fn["type"] != "function" || fn["name"] != "weather" || fn["description"] != "The weather in a city." ||
				fn["parameters"].(map[string]any)["properties"].(map[string]any)["city"] == nil {
				t.Errorf("tool definition %v", fn)
			}
			items, _ := s.body(1)["input"].([]any)
			var shape []string
			for _, it := range items {
				m := it.(map[string]any)
				k, _ := m["type"].(string)
				if r, ok := m["role"].(string); ok {
					k += "/" + r
				}
				shape = append(shape, k)
			}
			if got := strings.Join(shape, ","); got != "message/system,message/user,function_call,function_call,function_call_output,function_call_output" {
				t.Fatalf("request 2 input %v", got)
			}
			if m := items[0].(map[string]any); m["content"] != "Be brief." {
				t.Errorf("system item %v", m)
			}
			if fc := items[3].(map[string]any); fc["call_id"] != "call_ABaZCHNRt7PL5Ybgs5bJ07pn" || fc["name"] != "weather" || fc["arguments"] != `{"city": "Oslo"}` {
				t.Errorf("function_call item %v", fc)
			}
			if fo := items[5].(map[string]any); fo["call_id"] != "call_ABaZCHNRt7PL5Ybgs5bJ07pn" || fo["output"] != "cold" {
				t.Errorf("function_call_output item %v", fo)
			}
		})
	}
}

// The non-streamed response object: a reasoning summary and a text
// answer, priced by the dated name the server answered with; an answer
// cut off by max_output_tokens has finish reason "length".
func TestResponsesNoStream(t *testing.T) {
	answer := `[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Easy."},{"type":"summary_text","text":"Short."}]},` +
		`{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello there.","annotations":[]}]}]`
	s := newServer(t,
		reply{body: respObject("gpt-4o-mini-2024-07-18", "completed", "null", answer,
			`{"input_tokens":82,"input_tokens_details":{"cached_tokens":0},"output_tokens":17,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":99}`)},
		reply{body: respObject("gpt-4o-mini-2024-07-18", "incomplete", `{"reason":"max_output_tokens"}`,
			`[{"type":"message","id":"msg_2","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"Hel","annotations":[]}]}]`,
			`{"input_tokens":82,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":83}`)})
	var seen *responses.ResponseNewParams
	m := newModel(t, s, openai.WithResponsesAPI(), openai.WithStream(false),
		openai.WithResponsesParams(func(p *responses.ResponseNewParams) { p.MaxOutputTokens = oai.Int(64); seen = p }))
	req := agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "Hi"}}}
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Hello there." || resp.Thinking != "Easy.\n\nShort." || resp.FinishReason != "stop" || len(resp.ToolCalls) != 0 {
		t.Errorf("response %+v", resp)
	}
	if want := (82*0.15 + 17*0.6) / 1e6; !near(resp.Usage.CostUSD, want) || resp.Usage.InputTokens != 82 || resp.Usage.OutputTokens != 17 || resp.Usage.CostUnknown {
		t.Errorf("usage %+v, want cost %v", resp.Usage, want)
	}
	b := s.body(0)
	if b["stream"] != nil || b["max_output_tokens"] != float64(64) || seen == nil {
		t.Errorf("request %v", b)
	}
	resp, err = m.Generate(context.Background(), req)
	if err != nil || resp.FinishReason != "length" || resp.Content != "Hel" {
		t.Errorf("cut-off answer: %+v, %v", resp, err)
	}
}

// A model the price table does not know has unknown cost, not $0.
func TestResponsesUnknownCost(t *testing.T) {
	s := newServer(t, reply{body: respObject("my-finetune", "completed", "null",
		`[{"type":"message","id":"m","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}]`,
		`{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":6}`)})
	m, err := openai.New("my-finetune", openai.WithBaseURL(s.URL+"/v1"), openai.WithAPIKey("sk-test"), openai.WithPrices(price.Builtin()),
		openai.WithResponsesAPI(), openai.WithStream(false))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (trace.Usage{Provider: "openai", InputTokens: 5, OutputTokens: 1, CostUnknown: true}); resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
}

// Errors in Responses mode say what went wrong, mapped like the Chat
// path's; through the executor they end the model call with the error.
func TestResponsesErrors(t *testing.T) {
	head := rCreated + respObject("o4-mini-2025-04-16", "in_progress", "null", "[]", "null") + `}`
	for _, tc := range []struct {
		name  string
		rep   reply
		want  []string
		check func(error) bool
	}{
		{name: "rate limit", rep: reply{status: 429, body: `{"error":{"message":"Rate limit reached for o4-mini in organization org-x on tokens per min (TPM): Limit 30000, Used 30000, Requested 1300.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`},
			want:  []string{"HTTP 429 rate_limit_exceeded", "Rate limit reached", "rate limited"},
			check: func(err error) bool { var ae *oai.Error; return errors.As(err, &ae) && ae.StatusCode == 429 }},
		{name: "context length", rep: reply{status: 400, body: `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`},
			want: []string{"HTTP 400 context_length_exceeded", "shorten it"}},
		{name: "error event", rep: reply{sse: []string{head,
			`{"type":"error","sequence_number":1,"code":"server_error","message":"The server had an error while processing your request.","param":null}`}},
			want: []string{"HTTP 500 server_error: The server had an error", "retry later", "sent inside the stream"}},
		{name: "failed", rep: reply{sse: []string{head,
			`{"type":"response.failed","sequence_number":1,"response":` + strings.Replace(respObject("o4-mini-2025-04-16", "failed", "null", "[]", "null"),
				`"error":null`, `"error":{"code":"server_error","message":"The model failed to generate a response."}`, 1) + `}`}},
			want:  []string{"HTTP 500 server_error: The model failed to generate a response.", "retry later", "(the response failed)"},
			check: func(err error) bool { var ae *oai.Error; return errors.As(err, &ae) && ae.StatusCode == 500 }},
		// A rate limit sent as the stream's error event reads like the
		// 429 answer above: status, code, message, hint.
		{name: "rate limit in stream", rep: reply{sse: []string{head,
			`{"type":"error","sequence_number":1,"code":"rate_limit_exceeded","message":"Rate limit reached for o4-mini in organization org-x on tokens per min (TPM): Limit 30000, Used 30000, Requested 1300.","param":null}`}},
			want:  []string{"HTTP 429 rate_limit_exceeded: Rate limit reached", "rate limited", "sent inside the stream"},
			check: func(err error) bool { var ae *oai.Error; return errors.As(err, &ae) && ae.StatusCode == 429 }},
		{name: "refusal", rep: reply{sse: []string{head,
			`{"type":"response.refusal.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"I'm sorry, I can't help with that."}`,
			`{"type":"response.completed","sequence_number":2,"response":` + respObject("o4-mini-2025-04-16", "completed", "null",
				`[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"refusal","refusal":"I'm sorry, I can't help with that."}]}]`, usageCalls) + `}`}},
			want:  []string{"refused: I'm sorry, I can't help with that."},
			check: func(err error) bool { var re *openai.RefusalError; return errors.As(err, &re) }},
		{name: "content filter", rep: reply{sse: []string{head,
			`{"type":"response.incomplete","sequence_number":1,"response":` + respObject("o4-mini-2025-04-16", "incomplete", `{"reason":"content_filter"}`, "[]", usageCalls) + `}`}},
			want: []string{"content filter"}},
		{name: "cut-off tool call", rep: reply{sse: []string{head,
			`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"weather","arguments":"","status":"in_progress"}}`,
			`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"city\": \"Par"}`,
			`{"type":"response.incomplete","sequence_number":3,"response":` + respObject("o4-mini-2025-04-16", "incomplete", `{"reason":"max_output_tokens"}`, "[]", usageCalls) + `}`}},
			want: []string{"not valid JSON", "max_output_tokens"}},
		{name: "stream cut", rep: reply{sse: []string{head,
			`{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Par","logprobs":[]}`}},
			want: []string{"no response.completed event"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, tc.rep)
			m, err := openai.New("o4-mini", openai.WithBaseURL(s.URL+"/v1"), openai.WithAPIKey("sk-test"), openai.WithResponsesAPI(),
				openai.WithRequestOptions(option.WithMaxRetries(0)), openai.WithPrices(price.Builtin()))
			if err != nil {
				t.Fatal(err)
			}
			llmtest.FailedCall(t, m, tc.check, tc.want)
			if len(s.paths) != 1 || s.paths[0] != "/v1/responses" {
				t.Errorf("paths %v", s.paths)
			}
		})
	}
}

// The SDK's own retries show in the error of a Responses call too.
func TestResponsesRetriesInError(t *testing.T) {
	busy := reply{status: 503, body: `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`}
	s := newServer(t, busy, busy)
	m := newModel(t, s, openai.WithResponsesAPI(), openai.WithRequestOptions(option.WithMaxRetries(1)))
	_, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}})
	if err == nil || !strings.Contains(err.Error(), "(after 2 attempts)") || !strings.Contains(err.Error(), "HTTP 503") {
		t.Errorf("err %v, want an HTTP 503 after 2 attempts", err)
	}
	if strings.Join(s.paths, " ") != "/v1/responses /v1/responses" {
		t.Errorf("paths %v", s.paths)
	}
}
