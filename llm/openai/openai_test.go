package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/loupe-dev/loupe/llm/internal/llmtest"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/openai"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/tool"
	"github.com/loupe-dev/loupe/trace"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// A reply is one canned HTTP answer of the fake server.
type reply struct {
	status int
	sse    []string // data lines of a text/event-stream answer; "[DONE]" included as sent
	body   string   // a JSON answer
}

// server is an httptest server speaking the Chat Completions and
// Responses wire formats:
// it answers the i-th request with replies[i] and keeps each request.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	replies []reply
	bodies  []map[string]any
	headers []http.Header
	paths   []string
}

func newServer(t *testing.T, replies ...reply) *server {
	s := &server{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/v1/responses") || r.Method != http.MethodPost {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body is not JSON: %v: %s", err, b)
		}
		s.mu.Lock()
		i := len(s.bodies)
		s.bodies = append(s.bodies, body)
		s.headers = append(s.headers, r.Header.Clone())
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		if i >= len(s.replies) {
			t.Errorf("unexpected request %d: %s", i+1, b)
			http.Error(w, "no reply left", http.StatusInternalServerError)
			return
		}
		rep := s.replies[i]
		if rep.sse != nil {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, d := range rep.sse {
				// The Responses API names each event's type on an
				// event line too, as its stream does.
				var ev struct{ Type string }
				if json.Unmarshal([]byte(d), &ev) == nil && ev.Type != "" {
					io.WriteString(w, "event: "+ev.Type+"\n")
				}
				io.WriteString(w, "data: "+d+"\n\n")
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After-Ms", "1") // keep the SDK's retries quick
		if rep.status != 0 {
			w.WriteHeader(rep.status)
		}
		io.WriteString(w, rep.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) body(i int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[i]
}

// Chunks as the OpenAI API streams them (API reference, "The chat
// completion chunk object"): usage is null until the last chunk, which has
// no choices when stream_options.include_usage is set.
const (
	chunkHead = `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"o4-mini-2025-04-16","service_tier":"default","system_fingerprint":"fp_129a36352a","usage":null,"choices":[`
	chunkTail = `]}`
)

func chunk(choice string) string { return chunkHead + choice + chunkTail }

// toolCallStream streams two parallel tool calls whose arguments are split
// across chunks, then usage with cached and reasoning tokens.
var toolCallStream = []string{
	chunk(`{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}`),
	chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}`),
	chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Paris\"}"}}]},"logprobs":null,"finish_reason":null}`),
	chunk(`{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_ABaZCHNRt7PL5Ybgs5bJ07pn","type":"function","function":{"name":"weather","arguments":""}}]},"logprobs":null,"finish_reason":null}`),
	chunk(`{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"city\": \"Oslo\"}"}}]},"logprobs":null,"finish_reason":null}`),
	chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}`),
	`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"o4-mini-2025-04-16","service_tier":"default","system_fingerprint":"fp_129a36352a","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":300,"total_tokens":1300,"prompt_tokens_details":{"cached_tokens":600,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":200,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
	`[DONE]`,
}

// answerStream is a final answer from an OpenAI-compatible server that
// streams its reasoning as "reasoning_content" (vLLM, DeepSeek,
// llama.cpp).
var answerStream = []string{
	chunk(`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`),
	chunk(`{"index":0,"delta":{"reasoning_content":"Both cities "},"logprobs":null,"finish_reason":null}`),
	chunk(`{"index":0,"delta":{"reasoning_content":"answered."},"logprobs":null,"finish_reason":null}`),
	chunk(`{"index":0,"delta":{"content":"Paris is sunny, "},"logprobs":null,"finish_reason":null}`),
	chunk(`{"index":0,"delta":{"content":"Oslo is cold."},"logprobs":null,"finish_reason":null}`),
	chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`),
	`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"o4-mini-2025-04-16","choices":[],"usage":{"prompt_tokens":1400,"completion_tokens":50,"total_tokens":1450,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":10}}}`,
	`[DONE]`,
}

func weatherTool() agent.Tool {
	type in struct {
		City string `json:"city" jsonschema:"the city"`
	}
	return tool.Func("weather", "The weather in a city.", func(_ context.Context, in in) (string, error) {
		if in.City == "Paris" {
			return "sunny", nil
		}
		return "cold", nil
	})
}

func newModel(t *testing.T, s *server, opts ...openai.Option) *openai.Model {
	t.Helper()
	opts = append([]openai.Option{openai.WithBaseURL(s.URL + "/v1"), openai.WithAPIKey("sk-test"),
		openai.WithRequestOptions(option.WithMaxRetries(0)), openai.WithPrices(price.Builtin())}, opts...)
	m, err := openai.New("o4-mini", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// A run through agent.Executor: parallel tool calls streamed in pieces,
// the tools run, the answer streamed with reasoning; the trace holds each
// call's tokens, cost, finish reason, thinking and deltas.
func TestExecutorToolRoundTrip(t *testing.T) {
	s := newServer(t, reply{sse: toolCallStream}, reply{sse: answerStream})
	exec := &agent.Executor{Tracer: trace.New(trace.Options{}), Limits: agent.Limits{MaxIterations: 4}}
	res := exec.Run(context.Background(), &agent.ReAct{Model: newModel(t, s), System: "Be brief.",
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
	// o4-mini: input 1.10, cached 0.275, output and reasoning 4.40 per MTok.
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
		if calls[i].Name != "o4-mini" || calls[i].Error != "" {
			t.Errorf("call %d: name %q error %q", i+1, calls[i].Name, calls[i].Error)
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
	if len(out.ToolCalls) != 2 || out.ToolCalls[0].ID != "call_DdmO9pD3xa9XTPNJ32zg2hcA" ||
		string(out.ToolCalls[0].Input) != `{"city": "Paris"}` || string(out.ToolCalls[1].Input) != `{"city": "Oslo"}` {
		t.Errorf("call 1 tool calls %s", calls[0].Output)
	}
	if got := string(calls[1].Thinking); got != `"Both cities answered."` {
		t.Errorf("call 2 thinking %s", got)
	}
	if len(toolEnds) != 2 || string(toolEnds[0].Output) != `"sunny"` || string(toolEnds[1].Output) != `"cold"` {
		t.Errorf("tool ends %v", toolEnds)
	}
	// Each streamed chunk is a model.delta; the first one's time is the
	// call's time to first token, inside the call.
	var kinds []string
	for _, d := range deltas {
		kinds = append(kinds, d.Status+":"+string(d.Output))
	}
	if got := strings.Join(kinds, " "); got != `thinking:"Both cities " thinking:"answered." text:"Paris is sunny, " text:"Oslo is cold."` {
		t.Errorf("deltas %s", got)
	}
	if len(deltas) > 0 {
		ttft := deltas[0].Time.Sub(calls[1].Start())
		if ttft < 0 || ttft > calls[1].Duration {
			t.Errorf("first token %v after the call began, outside its %v", ttft, calls[1].Duration)
		}
	}
	if !near(res.Stats.CostUSD, want1.CostUSD+want2.CostUSD) {
		t.Errorf("run cost %v", res.Stats.CostUSD)
	}

	// What went over the wire: streaming with usage, the tool, and on the
	// second call the assistant's tool calls and both results.
	b1 := s.body(0)
	if b1["stream"] != true || b1["model"] != "o4-mini" {
		t.Errorf("request 1: stream %v model %v", b1["stream"], b1["model"])
	}
	if so, _ := b1["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("request 1 stream_options %v", b1["stream_options"])
	}
	tools, _ := b1["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("request 1 tools %v", b1["tools"])
	}
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "weather" || fn["parameters"].(map[string]any)["type"] != "object" {
		t.Errorf("tool definition %v", fn)
	}
	msgs, _ := s.body(1)["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,tool" {
		t.Fatalf("request 2 roles %v", roles)
	}
	asst := msgs[2].(map[string]any)
	tcs := asst["tool_calls"].([]any)
	tc0 := tcs[1].(map[string]any)
	if len(tcs) != 2 || tc0["id"] != "call_ABaZCHNRt7PL5Ybgs5bJ07pn" || tc0["function"].(map[string]any)["arguments"] != `{"city": "Oslo"}` {
		t.Errorf("assistant message %v", asst)
	}
	if m := msgs[4].(map[string]any); m["tool_call_id"] != "call_ABaZCHNRt7PL5Ybgs5bJ07pn" || m["content"] != "cold" {
		t.Errorf("tool message %v", m)
	}
}

// The non-streaming answer, as in the API reference's function-calling
// example, with usage details.
func TestGenerateNoStream(t *testing.T) {
	s := newServer(t, reply{body: `{
  "id": "chatcmpl-abc123",
  "object": "chat.completion",
  "created": 1699896916,
  "model": "gpt-4o-mini-2024-07-18",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": null,
        "tool_calls": [
          {"id": "call_abc123", "type": "function", "function": {"name": "weather", "arguments": "{\n\"city\": \"Boston\"\n}"}}
        ],
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "tool_calls"
    }
  ],
  "usage": {
    "prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_44709d6fcb"
}`})
	m := newModel(t, s, openai.WithStream(false))
	resp, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "Boston?"}},
		Tools: []agent.ToolDef{{Name: "weather", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "weather" || !json.Valid(resp.ToolCalls[0].Input) || resp.FinishReason != "tool_calls" {
		t.Errorf("response %+v", resp)
	}
	// Priced by the dated name the server answered with (gpt-4o-mini), not
	// the configured one (o4-mini).
	if want := (82*0.15 + 17*0.6) / 1e6; !near(resp.Usage.CostUSD, want) || resp.Usage.InputTokens != 82 || resp.Usage.OutputTokens != 17 {
		t.Errorf("usage %+v, want cost %v", resp.Usage, want)
	}
	if s.body(0)["stream"] != nil {
		t.Errorf("stream sent in a non-streaming request: %v", s.body(0)["stream"])
	}
}

// A local server (Ollama's OpenAI-compatible endpoint) with a model the
// price table does not know: tokens are recorded, the cost is unknown
// (marked unknown, not a made-up price or $0), and Ollama's "reasoning" field is thinking.
func TestLocalServerUnknownCost(t *testing.T) {
	s := newServer(t, reply{sse: []string{
		`{"id":"chatcmpl-412","object":"chat.completion.chunk","created":1750000000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Short."},"finish_reason":null}]}`,
		`{"id":"chatcmpl-412","object":"chat.completion.chunk","created":1750000000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi."},"finish_reason":null}]}`,
		`{"id":"chatcmpl-412","object":"chat.completion.chunk","created":1750000000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`,
		`{"id":"chatcmpl-412","object":"chat.completion.chunk","created":1750000000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`,
		`[DONE]`}})
	m, err := openai.New("qwen3:8b", openai.WithBaseURL(s.URL+"/v1"), openai.WithAPIKey("ollama"), openai.WithProvider("ollama"), openai.WithPrices(price.Builtin()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "Hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := trace.Usage{Provider: "ollama", InputTokens: 12, OutputTokens: 3, CostUnknown: true}
	if resp.Usage != want || resp.Content != "Hi." || resp.Thinking != "Short." || resp.FinishReason != "stop" {
		t.Errorf("response %+v", resp)
	}
	if _, known := price.Builtin().Lookup(m.Name()); known {
		t.Error("qwen3:8b has a built-in price; the test needs an unknown model")
	}
}

// A configured client passed in is the one used: its middleware runs.
func TestUserClient(t *testing.T) {
	s := newServer(t, reply{body: `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`})
	client := oai.NewClient(option.WithBaseURL(s.URL+"/v1"), option.WithAPIKey("sk-mine"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			r.Header.Set("X-Mine", "yes")
			return next(r)
		}))
	m, err := openai.New("gpt-4o", openai.WithClient(client), openai.WithStream(false), openai.WithPrices(price.Builtin()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if h := s.headers[0]; h.Get("X-Mine") != "yes" || h.Get("Authorization") != "Bearer sk-mine" {
		t.Errorf("headers %v", h)
	}
}

// Errors say what went wrong; through the executor they end the model call
// with the error on its record.
func TestErrors(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	for _, tc := range []struct {
		name  string
		rep   reply
		url   string
		want  []string
		check func(error) bool
	}{
		{name: "rate limit", rep: reply{status: 429, body: `{"error":{"message":"Rate limit reached for o4-mini in organization org-x on tokens per min (TPM): Limit 30000, Used 30000, Requested 1300.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`},
			want:  []string{"HTTP 429 rate_limit_exceeded", "Rate limit reached", "rate limited"},
			check: func(err error) bool { var ae *oai.Error; return errors.As(err, &ae) && ae.StatusCode == 429 }},
		{name: "context length", rep: reply{status: 400, body: `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130012 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
			want: []string{"HTTP 400 context_length_exceeded", "maximum context length is 128000", "shorten it"}},
		{name: "bad key", rep: reply{status: 401, body: `{"error":{"message":"Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
			want: []string{"HTTP 401 invalid_api_key", "OPENAI_API_KEY"}},
		{name: "refusal", rep: reply{sse: []string{
			chunk(`{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}`),
			chunk(`{"index":0,"delta":{"refusal":"I'm sorry, I can't help with that."},"logprobs":null,"finish_reason":null}`),
			chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`), `[DONE]`}},
			want:  []string{"refused: I'm sorry, I can't help with that."},
			check: func(err error) bool { var re *openai.RefusalError; return errors.As(err, &re) }},
		{name: "content filter", rep: reply{sse: []string{
			chunk(`{"index":0,"delta":{"content":"Well"},"logprobs":null,"finish_reason":null}`),
			chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"content_filter"}`), `[DONE]`}},
			want: []string{"content filter"}},
		{name: "error in stream", rep: reply{sse: []string{
			chunk(`{"index":0,"delta":{"content":"Par"},"logprobs":null,"finish_reason":null}`),
			`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`}},
			want: []string{"HTTP 500 server_error: The server had an error", "retry later", "sent inside the stream"}},
		// Errors that arrive inside a stream read like the same error as
		// an HTTP answer (the cases above): status, code, the
		// provider's message and the same hint, not raw JSON.
		{name: "rate limit in stream", rep: reply{sse: []string{
			`{"error":{"message":"Rate limit reached for o4-mini in organization org-x on tokens per min (TPM): Limit 30000, Used 30000, Requested 1300.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`}},
			want:  []string{"HTTP 429 rate_limit_exceeded: Rate limit reached", "rate limited", "sent inside the stream"},
			check: func(err error) bool { var ae *oai.Error; return errors.As(err, &ae) && ae.StatusCode == 429 }},
		{name: "bad key in stream", rep: reply{sse: []string{
			`{"error":{"message":"Incorrect API key provided: sk-test.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`}},
			want:  []string{"HTTP 401 invalid_api_key: Incorrect API key", "OPENAI_API_KEY"},
			check: func(err error) bool { var ae *oai.Error; return errors.As(err, &ae) && ae.StatusCode == 401 }},
		// vLLM and LiteLLM put the HTTP status in code.
		{name: "numeric code in stream", rep: reply{sse: []string{
			`{"error":{"object":"error","message":"This model's maximum context length is 8192 tokens.","type":"BadRequestError","param":null,"code":400}}`}},
			want:  []string{"HTTP 400 BadRequestError: This model's maximum context length", "shorten it"},
			check: func(err error) bool { var ae *oai.Error; return errors.As(err, &ae) && ae.StatusCode == 400 }},
		{name: "cut-off tool call", rep: reply{sse: []string{
			chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\": \"Par"}}]},"logprobs":null,"finish_reason":null}`),
			chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}`), `[DONE]`}},
			want: []string{"not valid JSON", "raise max_completion_tokens"}},
		{name: "network", url: closedURL, want: []string{"could not reach the server"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.url
			if base == "" {
				base = newServer(t, tc.rep).URL
			}
			m, err := openai.New("o4-mini", openai.WithBaseURL(base+"/v1"), openai.WithAPIKey("sk-test"),
				openai.WithRequestOptions(option.WithMaxRetries(0)), openai.WithPrices(price.Builtin()))
			if err != nil {
				t.Fatal(err)
			}
			llmtest.FailedCall(t, m, tc.check, tc.want)
		})
	}
}

func TestCanceled(t *testing.T) {
	s := newServer(t, reply{sse: toolCallStream})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := newModel(t, s).Generate(ctx, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}}); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := openai.New(" "); err == nil {
		t.Error("empty model name accepted")
	}
	t.Setenv(price.EnvFile, "/nonexistent/prices.json")
	if _, err := openai.New("gpt-4o"); err == nil || !strings.Contains(err.Error(), price.EnvFile) {
		t.Errorf("bad price file: %v", err)
	}
}

// The SDK's own retries show in the error recorded for the call.
func TestRetriesInError(t *testing.T) {
	busy := reply{status: 503, body: `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`}
	s := newServer(t, busy, busy)
	m := newModel(t, s, openai.WithRequestOptions(option.WithMaxRetries(1)))
	_, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}})
	if err == nil || !strings.Contains(err.Error(), "(after 2 attempts)") || !strings.Contains(err.Error(), "HTTP 503") {
		t.Errorf("err %v, want an HTTP 503 after 2 attempts", err)
	}
}
