package online_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// openSQLite opens (or reopens) the SQLite store at path, closed at the
// end of the test.
func openSQLite(t testing.TB, path string) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// collector is a real loupe serve handler over st with eng, on 127.0.0.1.
func collector(t testing.TB, st store.Store, eng *online.Engine, o server.Options) *httptest.Server {
	t.Helper()
	o.Store, o.Online = st, eng
	srv, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return ts
}

// startEngine starts an engine, closed at the end of the test.
func startEngine(t testing.TB, o online.Options) *online.Engine {
	t.Helper()
	eng, err := online.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	return eng
}

// parseRules parses a rules file given as text.
func parseRules(t testing.TB, text string) *online.Config {
	t.Helper()
	cfg, err := online.Parse("rules.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// call is one tool call of a generated trace.
type call struct {
	tool string
	args string // JSON
}

// agentTraces returns OTLP spans of n agent runs, as the OpenTelemetry
// GenAI conventions write them: a root invoke_agent span whose input is
// "Where is order N?" and whose output is answer(N), with one
// execute_tool span per call of calls(N). Trace ids are salt, N.
func agentTraces(salt byte, n int, calls func(i int) []call, answer func(i int) string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-bot")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	t0 := time.Now().Add(-time.Second)
	for i := range n {
		tid := traceID(salt, i)
		root := spans.AppendEmpty()
		root.SetTraceID(pcommon.TraceID(tid))
		root.SetSpanID(pcommon.SpanID{1, byte(i >> 8), byte(i), 1})
		root.SetName("invoke_agent support")
		root.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
		root.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(500 * time.Millisecond)))
		a := root.Attributes()
		a.PutStr("gen_ai.operation.name", "invoke_agent")
		a.PutStr("gen_ai.agent.name", "support")
		a.PutStr("gen_ai.input.messages", fmt.Sprintf(`[{"role":"user","parts":[{"type":"text","content":"Where is order %d?"}]}]`, i))
		out, _ := json.Marshal(answer(i))
		a.PutStr("gen_ai.output.messages", fmt.Sprintf(`[{"role":"assistant","parts":[{"type":"text","content":%s}],"finish_reason":"stop"}]`, out))
		for k, c := range calls(i) {
			sp := spans.AppendEmpty()
			sp.SetTraceID(pcommon.TraceID(tid))
			sp.SetSpanID(pcommon.SpanID{2, byte(i >> 8), byte(i), byte(k + 1)})
			sp.SetParentSpanID(root.SpanID())
			sp.SetName("execute_tool " + c.tool)
			st := t0.Add(time.Duration(k+1) * 10 * time.Millisecond)
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(st))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(st.Add(5 * time.Millisecond)))
			sa := sp.Attributes()
			sa.PutStr("gen_ai.operation.name", "execute_tool")
			sa.PutStr("gen_ai.tool.name", c.tool)
			sa.PutStr("gen_ai.tool.call.arguments", c.args)
			sa.PutStr("gen_ai.tool.call.result", `{"status":"shipped"}`)
		}
	}
	return td
}

func traceID(salt byte, i int) trace.TraceID {
	return trace.TraceID{salt, byte(i >> 16), byte(i >> 8), byte(i), 0xa}
}

// postOTLP posts td to the collector as OTLP/HTTP protobuf.
func postOTLP(t testing.TB, url string, td ptrace.Traces) { t.Helper(); postOTLPWith(t, url, "", td) }

// postOTLPWith posts td with an API key (none when key is "").
func postOTLPWith(t testing.TB, url, key string, td ptrace.Traces) {
	t.Helper()
	var pm ptrace.ProtoMarshaler
	raw, err := pm.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", url+"/v1/traces", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /v1/traces: %d %s", resp.StatusCode, b)
	}
}

// judgeServer is an OpenAI-compatible server on 127.0.0.1 answering
// /v1/chat/completions (streamed, as the openai provider asks) with a
// grade: score 1 when the answer it is shown says "shipped", else 0.
// It counts the calls per answer graded.
type judgeServer struct {
	*httptest.Server
	delay   time.Duration
	gate    chan struct{} // when set, every call waits for it to close
	total   atomic.Int64
	mu      sync.Mutex
	byOrder map[string]int // calls per answer shown
	prompts []string
}

var answerRE = regexp.MustCompile(`(?s)\[\[ ## answer ## \]\]\n(.*?)\n`)

func newJudge(t testing.TB, delay time.Duration, gate chan struct{}) *judgeServer {
	j := &judgeServer{delay: delay, gate: gate, byOrder: map[string]int{}}
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer judge-key" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusNotFound)
			return
		}
		var body struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil || len(body.Messages) != 2 {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		user := body.Messages[1].Content
		key := ""
		if m := answerRE.FindStringSubmatch(user + "\n"); m != nil {
			key = m[1]
		}
		j.total.Add(1)
		j.mu.Lock()
		j.byOrder[key]++
		j.prompts = append(j.prompts, user)
		j.mu.Unlock()
		if j.gate != nil {
			select {
			case <-j.gate:
			case <-r.Context().Done():
				return
			}
		}
		if j.delay > 0 {
			time.Sleep(j.delay)
		}
		grade := `{"score": 0, "assertions": [{"text": "says where the order is", "passed": false, "evidence": "no status given"}]}`
		if bytes.Contains([]byte(key), []byte("shipped")) {
			grade = `{"score": 1, "assertions": [{"text": "says where the order is", "passed": true, "evidence": "it has shipped"}]}`
		}
		content, _ := json.Marshal(grade)
		w.Header().Set("Content-Type", "text/event-stream")
		head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini-2024-07-18","choices":[`
		fmt.Fprintf(w, "data: %s{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", head, content)
		fmt.Fprintf(w, "data: %s{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", head)
		io.WriteString(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050}}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(j.Close)
	return j
}

// calls returns how many judge calls graded each answer.
func (j *judgeServer) calls() map[string]int {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[string]int{}
	for k, v := range j.byOrder {
		out[k] = v
	}
	return out
}

// scoresOf returns every online score of rule, through the Scorer
// interface.
func scoresOf(t testing.TB, sc store.Scorer, rule string) []store.Score {
	t.Helper()
	var out []store.Score
	f := store.ScoreFilter{Rule: rule, Source: store.SourceOnline, Limit: 1000}
	for {
		p, err := sc.Scores(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Scores...)
		if p.Next == "" {
			return out
		}
		f.Cursor = p.Next
	}
}

// waitFor polls cond until it holds (the engine works in the background;
// the test waits for its result, it does not time it).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dbPath(t testing.TB) string { return filepath.Join(t.TempDir(), "loupe.db") }

func storeList(n int) store.ListQuery { return store.ListQuery{Limit: n} }
