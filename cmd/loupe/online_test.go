package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// TestOnlineKill9: `loupe serve --rules` with an LLM judge (an
// OpenAI-compatible server on 127.0.0.1) is killed with SIGKILL while it
// judges the traces it committed, and started again on the same store.
// Every committed trace is then evaluated, none is stored twice (one
// overall score per trace), and the judge is called again only for the
// traces whose score was not committed at the kill: those whose call was
// in flight, and those answered whose score the score writer still held.
func TestOnlineKill9(t *testing.T) {
	const traces, concurrency = 12, 2
	answerRE := regexp.MustCompile(`answer-\d+`)
	var (
		mu    sync.Mutex
		calls = map[string]int{}
		total atomic.Int64
	)
	judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		key := answerRE.FindString(string(b))
		mu.Lock()
		calls[key]++
		mu.Unlock()
		total.Add(1)
		select { // a slow judge, so that the kill finds calls in flight
		case <-time.After(150 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		content, _ := json.Marshal(`{"score": 1, "assertions": [{"text": "answers", "passed": true, "evidence": "it does"}]}`)
		head := `{"id":"c","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini","choices":[`
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", head, content)
		fmt.Fprintf(w, "data: %s{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", head)
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer judge.Close()
	t.Setenv("LOUPE_TEST_JUDGE_KEY", "judge-key")
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, fmt.Appendf(nil, `
judge:
  model: openai:gpt-4o-mini
  base_url: %s/v1
  api_key_env: LOUPE_TEST_JUDGE_KEY
  timeout: 30s
  concurrency: %d
rules:
  - name: quality
    criteria: Answers the question.
    assertions:
      - type: llm-grader
`, judge.URL, concurrency), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "online.db")
	args := []string{"--db", db, "serve", "--addr", "127.0.0.1:0", "--grpc-addr", "", "--rules", rules}
	cmd, url := startChild(t, args...)

	var body []byte
	t0 := time.Now().UTC()
	for i := range traces {
		tid, root := trace.TraceID{0x0e, byte(i + 1)}, trace.SpanID{0x0e, byte(i + 1)}
		for _, r := range []trace.Record{
			{V: 1, TraceID: tid, SpanID: root, Seq: 1, Time: t0, Type: trace.TypeRunStart, Name: "support", Input: trace.Text(fmt.Sprintf("Where is order %d?", i))},
			{V: 1, TraceID: tid, SpanID: root, Seq: 2, Time: t0.Add(time.Second), Type: trace.TypeRunEnd, Name: "support", Status: "success", Output: trace.Text(fmt.Sprintf("answer-%d", i)), Duration: time.Second},
		} {
			body = append(r.AppendJSON(body), '\n')
		}
	}
	if code, msg := post(t, url, "", body); code != 200 {
		t.Fatalf("ingest: %d %s", code, msg)
	}
	// Kill it while it judges: after the first calls, before the last.
	for deadline := time.Now().Add(60 * time.Second); total.Load() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) { // a hang, not a timing claim
			t.Fatalf("the judge was called %d times in 60s", total.Load())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	before := total.Load()
	if before >= traces {
		t.Fatalf("every trace was judged before the kill (%d calls); the test needs a slower judge", before)
	}
	// The answers whose overall score was committed before the kill: the
	// only ones that must not be judged again.
	committed := map[string]bool{}
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	page, err := st.Scores(context.Background(), store.ScoreFilter{Rule: "quality", Name: "quality/pass", Limit: 1000})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range page.Scores {
		committed[fmt.Sprintf("answer-%d", sc.TraceID[1]-1)] = true
	}

	_, url = startChild(t, args...)
	type score struct {
		TraceID string `json:"trace_id"`
		Name    string `json:"name"`
	}
	var pass []score
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(url + "/api/v1/scores?rule=quality&name=quality/pass&limit=1000")
		if err != nil {
			t.Fatal(err)
		}
		var page struct{ Scores []score }
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if pass = page.Scores; len(pass) >= traces || time.Now().After(deadline) {
			break
		}
	}
	seen := map[string]int{}
	for _, s := range pass {
		seen[s.TraceID]++
	}
	if len(pass) != traces || len(seen) != traces {
		t.Errorf("%d overall scores over %d traces after the restart, want one for each of %d", len(pass), len(seen), traces)
	}
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for key, n := range calls {
		if n > 2 || n == 2 && committed[key] {
			t.Errorf("%s judged %d times (its score committed before the kill: %v)", key, n, committed[key])
		}
		again += n - 1
	}
	if len(calls) != traces || again > int(before)-len(committed) {
		t.Errorf("judge calls %v: %d answers judged (want %d), %d judged again (at most the %d called before the kill whose score was not committed)", calls, len(calls), traces, again, int(before)-len(committed))
	}
	t.Logf("%d judge calls before the kill, %d scores committed then, %d calls in all, %d repeated", before, len(committed), total.Load(), again)
}
