package evalcli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/loupe-dev/loupe/internal/evalcli"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

const (
	judgeSuite  = realAgentV + "/trace-evaluation.suite.yaml"
	judgeScript = "scripted:evalrun/testdata/judges/trace-evaluation.yaml"
)

// rubricScore returns the "rubrics" entry of a row's scores.
func rubricScore(t *testing.T, row map[string]any) map[string]any {
	t.Helper()
	for _, s := range asList(row["scores"]) {
		if m := s.(map[string]any); m["name"] == "rubrics" {
			return m
		}
	}
	t.Fatalf("row %v has no rubrics score", row["test_id"])
	return nil
}

// The real AgentV suite with judge graders, graded by a scripted judge:
// each case's rubric is graded from the judge's answer (a pass, a fail, an
// unreadable answer kept raw, a provider error), the rows carry the
// judge's reasoning and usage, and every judge call is stored as a
// model.call record under its case's result.
func TestEvalJudgeOnRealSuite(t *testing.T) {
	testrepo.Chdir(t)
	db := filepath.Join(t.TempDir(), "loupe.db")
	open := func(ctx context.Context, dsn string) (store.Store, error) { return sqlite.Open(ctx, dsn) }
	cfg := evalcli.Config{Files: []string{judgeSuite}, Command: "cat " + staticTrace, JudgeModel: judgeScript,
		DB: db, OpenStore: open, Out: filepath.Join(t.TempDir(), "r.jsonl")}
	code, stdout, stderr, err := execute(t, cfg)
	// The suite's code graders need bun, which is not installed here:
	// they could not run, so the evaluation is incomplete whatever the
	// judge says.
	if err != nil || code != evalrun.ExitNotGraded {
		t.Fatalf("exit %d, err %v\n%s%s", code, err, stdout, stderr)
	}
	if !strings.Contains(stdout, "judge gpt-4o-mini-judge: 5 call(s), 3580 in / 130 out tokens, $0.0006; 2 failed or unreadable") {
		t.Errorf("summary lacks the judge's usage:\n%s", stdout)
	}
	if strings.Contains(stdout, "LLM graders skipped") {
		t.Errorf("judge graders reported skipped:\n%s", stdout)
	}
	rows := readRows(t, cfg.Out)
	if len(rows) != 5 {
		t.Fatalf("%d rows", len(rows))
	}
	want := []struct {
		verdict string
		score   float64
		text    string // in the reason, reasoning or evidence
	}{
		{"pass", 1, "Two tool calls and one answer: reasonable."},
		{"fail", 0, "the answer is about laptops"},
		{"error", 0, `raw answer: "I cannot grade this without more context."`},
		{"error", 0, "judge call failed: judge model gpt-4o-mini-judge: scripted model \"gpt-4o-mini-judge\": turn 4"},
		{"pass", 1, "Fine."},
	}
	var spans []string
	for i, w := range want {
		s := rubricScore(t, rows[i])
		b, _ := json.Marshal(s)
		if s["verdict"] != w.verdict || s["score"] != w.score || !strings.Contains(fmt.Sprint(s["reason"])+string(b), w.text) {
			t.Errorf("case %d rubrics = %s, want %s %v with %q", i+1, b, w.verdict, w.score, w.text)
		}
		j, _ := s["judge"].(map[string]any)
		if j == nil || j["model"] != "gpt-4o-mini-judge" || len(asList(j["calls"])) != 1 {
			t.Fatalf("case %d judge = %v", i+1, s["judge"])
		}
		call := asList(j["calls"])[0].(map[string]any)
		spans = append(spans, call["span_id"].(string))
		if i == 2 && call["answer"] != "I cannot grade this without more context." {
			t.Errorf("unreadable answer not kept in the row: %v", call)
		}
		if i == 0 && (j["cost_usd"] == nil || j["input_tokens"] != 900.0) {
			t.Errorf("judge usage = %v", j)
		}
	}
	if r := rubricScore(t, rows[0]); r["reasoning"] != "Efficient run." {
		t.Errorf("reasoning = %v", r["reasoning"])
	}

	// The stored evaluation holds each judge call as a model.call under
	// its case's result record, with the prompt, the answer and the cost.
	m := regexp.MustCompile(`results stored as trace ([0-9a-f]{32})`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no results trace in %q", stderr)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, _ := trace.ParseTraceID(m[1])
	tr, err := st.Trace(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	results := map[trace.SpanID]bool{}
	var calls []trace.Record
	for _, r := range tr.Records {
		switch {
		case r.Type == trace.TypeCustom && r.Name == evalrun.ResultRecord:
			results[r.SpanID] = true
		case r.Type == trace.TypeModelCall:
			calls = append(calls, r)
		}
	}
	if len(calls) != 5 {
		t.Fatalf("%d model.call records stored, want 5", len(calls))
	}
	for i, c := range calls {
		if !results[c.ParentID] || c.SpanID.String() != spans[i] || c.Name != "gpt-4o-mini-judge" {
			t.Errorf("call %d: span %s parent %s name %q; want span %s under a result record", i, c.SpanID, c.ParentID, c.Name, spans[i])
		}
		if in := string(c.Input); !strings.Contains(in, `[[ ## rubrics ## ]]`) || !strings.Contains(in, `"role":"system"`) {
			t.Errorf("call %d input lacks the prompt: %.300s", i, in)
		}
	}
	if calls[0].Usage.CostUSD <= 0 || calls[0].Usage.InputTokens != 900 || !strings.Contains(string(calls[0].Output), "Efficient run.") {
		t.Errorf("first call = %+v", calls[0])
	}
	if !strings.Contains(calls[2].Error, "could not be read") || !strings.Contains(string(calls[2].Output), "I cannot grade this") {
		t.Errorf("unreadable call = error %q output %s", calls[2].Error, calls[2].Output)
	}
	if !strings.Contains(calls[3].Error, "429 Too Many Requests") {
		t.Errorf("failed call error = %q", calls[3].Error)
	}
}

// Without a judge model the judge graders are skipped, and the summary
// names the cases and the flag that runs them; a bad spec stops the
// evaluation before anything runs.
func TestEvalJudgeMissingOrBad(t *testing.T) {
	testrepo.Chdir(t)
	_, stdout, _, err := execute(t, evalcli.Config{Files: []string{judgeSuite}, Command: "cat " + staticTrace})
	if err != nil || !strings.Contains(stdout, "LLM graders skipped in 5 case(s) (span-count-check, error-free-execution, no-forbidden-tools, duration-check, comprehensive-trace-check): no judge model; run them with --judge-model") {
		t.Errorf("err %v\n%s", err, stdout)
	}
	for _, tt := range []struct {
		cfg  evalcli.Config
		want string
	}{
		{evalcli.Config{JudgeModel: "gpt-4o-mini"}, `--judge-model: llm: model "gpt-4o-mini" has no provider; write provider:model, e.g. openai:gpt-4o-mini`},
		{evalcli.Config{JudgeModel: "scripted:nowhere.yaml"}, "--judge-model: scripted:"},
		{evalcli.Config{JudgeBaseURL: "http://localhost:1"}, "without --judge-model"},
	} {
		tt.cfg.Files, tt.cfg.Command = []string{judgeSuite}, "cat "+staticTrace
		code, _, _, err := execute(t, tt.cfg)
		if code != evalrun.ExitNotGraded || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: exit %d, err %v; want %q", tt.cfg, code, err, tt.want)
		}
	}
}

// The flag path with a real provider package: --judge-model openai:… with
// a base URL reaches an OpenAI-compatible server (httptest, speaking the
// streamed Chat Completions wire format) through llm.Open and the official
// SDK; its answer grades the case, its usage is priced, and its rate-limit
// error fails the other case's grader clearly.
func TestEvalJudgeOpenAICompatible(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer judge-key" {
			http.Error(w, "unexpected "+r.URL.Path+" "+r.Header.Get("Authorization"), http.StatusNotFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		if strings.Contains(string(b), "What is 2+2?") {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After-Ms", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","usage":null,"choices":[`
		for _, part := range []string{`{\"score\": 0.`, `9, \"assertions\": [{\"text\": \"names Paris\", \"passed\": true, \"evidence\": \"It says Paris.\"}]}`} {
			fmt.Fprintf(w, "data: %s{\"index\":0,\"delta\":{\"content\":\"%s\"},\"finish_reason\":null}]}\n\n", head, part)
		}
		fmt.Fprintf(w, "data: %s{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", head)
		io.WriteString(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":50,"total_tokens":1250}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()

	dir := t.TempDir()
	suite := filepath.Join(dir, "judge.yaml")
	os.WriteFile(suite, []byte(`tests:
  - id: capital
    criteria: Names the capital of France.
    input: What is the capital of France?
    assertions:
      - type: llm-grader
  - id: sum
    input: What is 2+2?
    assertions:
      - The answer is 4.
`), 0o644)
	cfg := evalcli.Config{Files: []string{suite}, Command: "echo 'The capital of France is Paris.'",
		JudgeModel: "openai:gpt-4o-mini", JudgeBaseURL: srv.URL + "/v1", JudgeAPIKey: "judge-key",
		Out: filepath.Join(dir, "r.jsonl")}
	code, stdout, stderr, err := execute(t, cfg)
	if err != nil || code != evalrun.ExitNotGraded {
		t.Fatalf("exit %d, err %v\n%s%s", code, err, stdout, stderr)
	}
	rows := readRows(t, cfg.Out)
	g := asList(rows[0]["scores"])[0].(map[string]any)
	j := g["judge"].(map[string]any)
	if rows[0]["verdict"] != "pass" || g["score"] != 0.9 || j["model"] != "gpt-4o-mini" || j["input_tokens"] != 1200.0 || j["cost_usd"] == nil {
		t.Errorf("capital: row verdict %v, grader %v", rows[0]["verdict"], g)
	}
	if ev := asList(g["assertions"])[0].(map[string]any)["evidence"]; ev != "It says Paris." {
		t.Errorf("evidence = %v", ev)
	}
	g = asList(rows[1]["scores"])[0].(map[string]any)
	if g["verdict"] != "error" || !strings.Contains(g["reason"].(string), "judge call failed") || !strings.Contains(g["reason"].(string), "429") {
		t.Errorf("sum: grader %v", g)
	}
	mu.Lock()
	defer mu.Unlock()
	msgs := asList(bodies[0]["messages"])
	if bodies[0]["model"] != "gpt-4o-mini" || len(msgs) != 2 ||
		!strings.Contains(msgs[0].(map[string]any)["content"].(string), `"score": <number between 0.0 and 1.0>`) ||
		!strings.Contains(msgs[1].(map[string]any)["content"].(string), "[[ ## criteria ## ]]\nNames the capital of France.") {
		t.Errorf("first request = %v", bodies[0])
	}
}

// A judge server that never answers fails the grader after --judge-timeout
// instead of hanging the evaluation.
func TestEvalJudgeTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	dir := t.TempDir()
	suite := filepath.Join(dir, "judge.yaml")
	if err := os.WriteFile(suite, []byte("tests:\n  - id: slow\n    input: hi\n    assertions:\n      - Says hello.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := evalcli.Config{Files: []string{suite}, Command: "echo hello", JudgeModel: "openai:gpt-4o-mini",
		JudgeBaseURL: srv.URL + "/v1", JudgeAPIKey: "k", JudgeTimeout: 300 * time.Millisecond}
	code, stdout, stderr, err := execute(t, cfg)
	if err != nil || code != evalrun.ExitNotGraded || !strings.Contains(stdout, "no answer within 300ms (--judge-timeout)") {
		t.Errorf("exit %d, err %v\n%s%s", code, err, stdout, stderr)
	}
}
