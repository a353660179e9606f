package llm_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm"
)

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"", "no model given"},
		{"gpt-4o-mini", "e.g. openai:gpt-4o-mini"},
		{"claude-sonnet-4-5", "e.g. anthropic:claude-sonnet-4-5"},
		{"llama3.2", "e.g. ollama:llama3.2"},
		{"turns.yaml", "e.g. scripted:turns.yaml"},
		{"openai:", "names no model after the colon"},
		{"openai-responses:", "names no model after the colon"},
		{"mistral:large", `unknown provider "mistral"`},
		{"scripted:/nonexistent/turns.yaml", "turns.yaml"},
	} {
		_, err := llm.Open(tc.spec, llm.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
}

func TestOpenNames(t *testing.T) {
	script := filepath.Join(t.TempDir(), "turns.yaml")
	if err := os.WriteFile(script, []byte("model: judge\nturns:\n  - answer: ok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ spec, name string }{
		{"openai:gpt-4o-mini", "gpt-4o-mini"},
		{"OpenAI:gpt-4o", "gpt-4o"},
		{"openai-responses:gpt-5-mini", "gpt-5-mini"},
		{"anthropic:claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"ollama:llama3.2:3b", "llama3.2:3b"},
		{"openrouter:meta-llama/llama-3.1-8b-instruct", "meta-llama/llama-3.1-8b-instruct"},
		{"scripted:" + script, "judge"},
	} {
		m, err := llm.Open(tc.spec, llm.Options{APIKey: "k"})
		if err != nil {
			t.Errorf("Open(%q): %v", tc.spec, err)
			continue
		}
		if m.Name() != tc.name {
			t.Errorf("Open(%q).Name() = %q, want %q", tc.spec, m.Name(), tc.name)
		}
	}
}

// TestOpenReachesServer checks that each OpenAI-compatible provider sends
// its calls where the options and environment say, with the key they say.
func TestOpenReachesServer(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	for _, tc := range []struct {
		spec string
		opts llm.Options
		want string
	}{
		{"openai:gpt-4o-mini", llm.Options{BaseURL: srv.URL + "/v1", APIKey: "sk-test"}, "/v1/chat/completions Bearer sk-test"},
		{"ollama:llama3.2", llm.Options{Getenv: func(k string) string {
			if k == "OLLAMA_HOST" {
				return host
			}
			return ""
		}}, "/v1/chat/completions Bearer ollama"},
		{"openrouter:x/y", llm.Options{BaseURL: srv.URL + "/api/v1", Getenv: func(k string) string {
			if k == "OPENROUTER_API_KEY" {
				return "or-key"
			}
			return ""
		}}, "/api/v1/chat/completions Bearer or-key"},
	} {
		m, err := llm.Open(tc.spec, tc.opts)
		if err != nil {
			t.Fatalf("Open(%q): %v", tc.spec, err)
		}
		resp, err := agent.Generate(context.Background(), m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hello"}}})
		if err != nil {
			t.Fatalf("%s: Generate: %v", tc.spec, err)
		}
		if resp.Content != "hi" {
			t.Errorf("%s: answer %q, want hi", tc.spec, resp.Content)
		}
		mu.Lock()
		last := got[len(got)-1]
		mu.Unlock()
		if last != tc.want {
			t.Errorf("%s: server saw %q, want %q", tc.spec, last, tc.want)
		}
	}
}

func TestHelpListsProviders(t *testing.T) {
	h := llm.Help()
	for _, p := range llm.Providers() {
		if !strings.Contains(h, p) {
			t.Errorf("Help() lacks %q:\n%s", p, h)
		}
	}
}

// TestOpenResponses checks that "openai-responses:MODEL" calls the
// Responses API at the base URL with the key given.
func TestOpenResponses(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: response.output_text.delta\n"+`data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"hi","logprobs":[]}`+"\n\n")
		fmt.Fprint(w, "event: response.completed\n"+`data: {"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-5-mini","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]}],"usage":{"input_tokens":3,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":4}}}`+"\n\n")
	}))
	defer srv.Close()
	m, err := llm.Open("openai-responses:gpt-5-mini", llm.Options{BaseURL: srv.URL + "/v1", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := agent.Generate(context.Background(), m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hello"}}})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Content != "hi" || resp.FinishReason != "stop" || resp.Usage.InputTokens != 3 {
		t.Errorf("response %+v", resp)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "POST /v1/responses Bearer sk-test" {
		t.Errorf("server saw %q, want one POST /v1/responses Bearer sk-test", got)
	}
}
