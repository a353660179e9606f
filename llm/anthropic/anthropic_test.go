package anthropic_test

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

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm/anthropic"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/tool"
	"github.com/loupe-dev/loupe/trace"
)

// A reply is one canned HTTP answer of the fake server.
type reply struct {
	status int
	events [][2]string // event name, data: a text/event-stream answer
	body   string      // a JSON answer
}

// server is an httptest server speaking the Messages API wire format: it
// answers the i-th request with replies[i] and keeps each request body.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	replies []reply
	bodies  []map[string]any
	headers []http.Header
}

func newServer(t *testing.T, replies ...reply) *server {
	s := &server{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
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
		s.mu.Unlock()
		if i >= len(s.replies) {
			t.Errorf("unexpected request %d: %s", i+1, b)
			http.Error(w, "no reply left", http.StatusInternalServerError)
			return
		}
		rep := s.replies[i]
		w.Header().Set("Request-Id", "req_011CPvWzqbVuDqMuFQT7YNaT")
		if rep.events != nil {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, e := range rep.events {
				io.WriteString(w, "event: "+e[0]+"\ndata: "+e[1]+"\n\n")
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

// thinkingToolStream is a streamed answer as the Messages API sends it
// with extended thinking (docs: "Streaming Messages", "Streaming with
// thinking"): a thinking block with its signature, text, two tool_use
// blocks whose input arrives as partial JSON, usage with cache reads and
// writes, stop reason tool_use.
var thinkingToolStream = [][2]string{
	{"message_start", `{"type":"message_start","message":{"id":"msg_01JjJpDc7WSo4QHFcvsWyCkJ","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":200,"cache_creation_input_tokens":1000,"cache_read_input_tokens":3000,"output_tokens":1,"service_tier":"standard"}}}`},
	{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`},
	{"ping", `{"type": "ping"}`},
	{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"I need the weather "}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"in both cities."}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}`},
	{"content_block_stop", `{"type":"content_block_stop","index":0}`},
	{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking "}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"both."}}`},
	{"content_block_stop", `{"type":"content_block_stop","index":1}`},
	{"content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"weather","input":{}}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Pa"}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ris\"}"}}`},
	{"content_block_stop", `{"type":"content_block_stop","index":2}`},
	{"content_block_start", `{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_01VoC3h6kZ8yuWcVj6ZAq9Hx","name":"weather","input":{}}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Oslo\"}"}}`},
	{"content_block_stop", `{"type":"content_block_stop","index":3}`},
	{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":150}}`},
	{"message_stop", `{"type":"message_stop"}`},
}

var answerStream = [][2]string{
	{"message_start", `{"type":"message_start","message":{"id":"msg_02","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":4000,"output_tokens":1}}}`},
	{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Paris is sunny, "}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Oslo is cold."}}`},
	{"content_block_stop", `{"type":"content_block_stop","index":0}`},
	{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20}}`},
	{"message_stop", `{"type":"message_stop"}`},
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

func newModel(t *testing.T, s *server, opts ...anthropic.Option) *anthropic.Model {
	t.Helper()
	opts = append([]anthropic.Option{anthropic.WithBaseURL(s.URL), anthropic.WithAPIKey("sk-ant-test"),
		anthropic.WithRequestOptions(option.WithMaxRetries(0)), anthropic.WithPrices(price.Builtin())}, opts...)
	m, err := anthropic.New("claude-sonnet-4-5", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// A run through agent.Executor with extended thinking: the trace holds the
// thinking, the deltas, tokens with cache reads and writes, their cost and
// the stop reasons; the second request sends the thinking block back with
// its signature before the tool calls, and both results in one user turn.
func TestExecutorToolRoundTrip(t *testing.T) {
	s := newServer(t, reply{events: thinkingToolStream}, reply{events: answerStream})
	exec := &agent.Executor{Tracer: trace.New(trace.Options{}), Limits: agent.Limits{MaxIterations: 4}}
	res := exec.Run(context.Background(), &agent.ReAct{Model: newModel(t, s, anthropic.WithMaxTokens(8000), anthropic.WithThinking(2048)),
		System: "Be brief.", Tools: agent.NewToolbox(weatherTool())}, "Weather in Paris and Oslo?")
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
	// claude-sonnet-4-5: input 3, cache read 0.30, cache write 3.75, output 15 per MTok.
	want := []trace.Usage{
		{Provider: "anthropic", InputTokens: 4200, OutputTokens: 150, CachedTokens: 3000, CostUSD: (200*3 + 3000*0.3 + 1000*3.75 + 150*15) / 1e6},
		{Provider: "anthropic", InputTokens: 4100, OutputTokens: 20, CachedTokens: 4000, CostUSD: (100*3 + 4000*0.3 + 20*15) / 1e6},
	}
	for i, w := range want {
		got := calls[i].Usage
		if !near(got.CostUSD, w.CostUSD) {
			t.Errorf("call %d cost %v, want %v", i+1, got.CostUSD, w.CostUSD)
		}
		got.CostUSD, w.CostUSD = 0, 0
		if got != w {
			t.Errorf("call %d usage %+v, want %+v", i+1, got, w)
		}
	}
	if calls[0].Status != "tool_use" || calls[1].Status != "end_turn" {
		t.Errorf("finish reasons %q, %q", calls[0].Status, calls[1].Status)
	}
	if got := string(calls[0].Thinking); got != `"I need the weather in both cities."` {
		t.Errorf("thinking %s", got)
	}
	var kinds []string
	for _, d := range deltas {
		kinds = append(kinds, d.Status+":"+string(d.Output))
	}
	if got := strings.Join(kinds, " "); got != `thinking:"I need the weather " thinking:"in both cities." text:"Checking " text:"both." text:"Paris is sunny, " text:"Oslo is cold."` {
		t.Errorf("deltas %s", got)
	}
	if ttft := deltas[0].Time.Sub(calls[0].Start()); ttft < 0 || ttft > calls[0].Duration {
		t.Errorf("first token %v after the call began, outside its %v", ttft, calls[0].Duration)
	}
	if len(toolEnds) != 2 || string(toolEnds[0].Output) != `"sunny"` || string(toolEnds[1].Output) != `"cold"` {
		t.Errorf("tool ends %v", toolEnds)
	}

	b1 := s.body(0)
	if b1["stream"] != true || b1["model"] != "claude-sonnet-4-5" || b1["max_tokens"] != 8000.0 {
		t.Errorf("request 1: %v %v %v", b1["stream"], b1["model"], b1["max_tokens"])
	}
	if th := b1["thinking"].(map[string]any); th["type"] != "enabled" || th["budget_tokens"] != 2048.0 {
		t.Errorf("thinking %v", th)
	}
	if sys := b1["system"].([]any); sys[0].(map[string]any)["text"] != "Be brief." {
		t.Errorf("system %v", sys)
	}
	tl := b1["tools"].([]any)[0].(map[string]any)
	if tl["name"] != "weather" || tl["input_schema"].(map[string]any)["properties"].(map[string]any)["city"] == nil {
		t.Errorf("tool %v", tl)
	}
	msgs := s.body(1)["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("request 2 has %d messages, want user, assistant, user: %v", len(msgs), msgs)
	}
	var types []string
	for _, b := range msgs[1].(map[string]any)["content"].([]any) {
		types = append(types, b.(map[string]any)["type"].(string))
	}
	if strings.Join(types, ",") != "thinking,text,tool_use,tool_use" {
		t.Errorf("assistant blocks %v", types)
	}
	th := msgs[1].(map[string]any)["content"].([]any)[0].(map[string]any)
	if th["signature"] != "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds" || th["thinking"] != "I need the weather in both cities." {
		t.Errorf("thinking block sent back %v", th)
	}
	results := msgs[2].(map[string]any)["content"].([]any)
	if len(results) != 2 || results[1].(map[string]any)["tool_use_id"] != "toolu_01VoC3h6kZ8yuWcVj6ZAq9Hx" || results[1].(map[string]any)["type"] != "tool_result" {
		t.Errorf("tool results %v", results)
	}
}

// The non-streaming answer as the API reference shows it.
func TestGenerateNoStream(t *testing.T) {
	s := newServer(t, reply{body: `{
  "content": [{"text": "Hi! My name is Claude.", "type": "text"}],
  "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
  "model": "claude-haiku-4-5-20251001",
  "role": "assistant",
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "type": "message",
  "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}`})
	m := newModel(t, s, anthropic.WithStream(false))
	resp, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "Hello"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Hi! My name is Claude." || resp.FinishReason != "end_turn" {
		t.Errorf("response %+v", resp)
	}
	// Priced by the model the API answered with (haiku), not the one asked.
	if w := (2095*1.0 + 503*5.0) / 1e6; !near(resp.Usage.CostUSD, w) || resp.Usage.InputTokens != 2095 {
		t.Errorf("usage %+v, want cost %v", resp.Usage, w)
	}
	if s.body(0)["stream"] != nil || s.body(0)["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
		t.Errorf("request %v", s.body(0))
	}
}

func TestUnknownModelCost(t *testing.T) {
	s := newServer(t, reply{body: `{"content":[{"type":"text","text":"ok"}],"id":"msg_1","model":"claude-future-9","role":"assistant","stop_reason":"end_turn","stop_sequence":null,"type":"message","usage":{"input_tokens":10,"output_tokens":2}}`})
	m, err := anthropic.New("claude-future-9", anthropic.WithBaseURL(s.URL), anthropic.WithAPIKey("k"), anthropic.WithStream(false), anthropic.WithPrices(price.Builtin()))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != (trace.Usage{Provider: "anthropic", InputTokens: 10, OutputTokens: 2, CostUnknown: true}) {
		t.Errorf("usage %+v: an unknown model's cost must be marked unknown, not $0", resp.Usage)
	}
}

func TestUserClient(t *testing.T) {
	s := newServer(t, reply{body: `{"content":[{"type":"text","text":"ok"}],"id":"msg_1","model":"claude-sonnet-4-5","role":"assistant","stop_reason":"end_turn","stop_sequence":null,"type":"message","usage":{"input_tokens":1,"output_tokens":1}}`})
	client := sdk.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("sk-mine"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			r.Header.Set("X-Mine", "yes")
			return next(r)
		}))
	m, err := anthropic.New("claude-sonnet-4-5", anthropic.WithClient(client), anthropic.WithStream(false), anthropic.WithPrices(price.Builtin()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if h := s.headers[0]; h.Get("X-Mine") != "yes" || h.Get("X-Api-Key") != "sk-mine" {
		t.Errorf("headers %v", h)
	}
}

// Errors say what went wrong; through the executor they end the model call
// with the error on its record. Bodies as in the API's "Errors" page.
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
		{name: "rate limit", rep: reply{status: 429, body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50,000 input tokens per minute."},"request_id":"req_011CPvWzqbVuDqMuFQT7YNaT"}`},
			want:  []string{"HTTP 429 rate_limit_error", "exceed the rate limit", "rate limited", "req_011CPvWzqbVuDqMuFQT7YNaT"},
			check: func(err error) bool { var ae *sdk.Error; return errors.As(err, &ae) && ae.StatusCode == 429 }},
		{name: "prompt too long", rep: reply{status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`},
			want: []string{"HTTP 400 invalid_request_error", "208310 tokens > 200000", "shorten it"}},
		{name: "overloaded in stream", rep: reply{events: [][2]string{
			thinkingToolStream[0],
			{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}}},
			want: []string{"HTTP 529 overloaded_error: Overloaded", "retry later", "sent inside the stream"}},
		// Errors inside a stream read like the same error as an HTTP
		// answer: status, type, the API's message and the same hint.
		{name: "rate limit in stream", rep: reply{events: [][2]string{
			thinkingToolStream[0],
			{"error", `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50,000 input tokens per minute."}}`}}},
			want: []string{"HTTP 429 rate_limit_error: This request would exceed the rate limit", "rate limited", "sent inside the stream"}},
		{name: "bad key in stream", rep: reply{events: [][2]string{
			{"error", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`}}},
			want: []string{"HTTP 401 authentication_error: invalid x-api-key", "ANTHROPIC_API_KEY", "sent inside the stream"}},
		{name: "refusal", rep: reply{events: [][2]string{
			answerStream[0],
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null},"usage":{"output_tokens":3}}`},
			{"message_stop", `{"type":"message_stop"}`}}},
			want:  []string{"refused to answer (stop reason refusal)"},
			check: func(err error) bool { var re *anthropic.RefusalError; return errors.As(err, &re) }},
		{name: "network", url: closedURL, want: []string{"could not reach the API"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.url
			if base == "" {
				base = newServer(t, tc.rep).URL
			}
			m, err := anthropic.New("claude-sonnet-4-5", anthropic.WithBaseURL(base), anthropic.WithAPIKey("k"),
				anthropic.WithRequestOptions(option.WithMaxRetries(0)), anthropic.WithPrices(price.Builtin()))
			if err != nil {
				t.Fatal(err)
			}
			llmtest.FailedCall(t, m, tc.check, tc.want)
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, opts := range [][]anthropic.Option{
		{anthropic.WithThinking(512)},
		{anthropic.WithThinking(4096), anthropic.WithMaxTokens(4096)},
		{anthropic.WithMaxTokens(0)},
	} {
		if _, err := anthropic.New("claude-sonnet-4-5", append(opts, anthropic.WithAPIKey("k"))...); err == nil {
			t.Errorf("options %d accepted", len(opts))
		}
	}
	if _, err := anthropic.New(""); err == nil {
		t.Error("empty model name accepted")
	}
}

// The SDK's own retries show in the error recorded for the call.
func TestRetriesInError(t *testing.T) {
	busy := reply{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}
	s := newServer(t, busy, busy)
	m := newModel(t, s, anthropic.WithRequestOptions(option.WithMaxRetries(1)))
	_, err := m.Generate(context.Background(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "x"}}})
	if err == nil || !strings.Contains(err.Error(), "(after 2 attempts)") || !strings.Contains(err.Error(), "overloaded_error") {
		t.Errorf("err %v, want overloaded_error after 2 attempts", err)
	}
}
