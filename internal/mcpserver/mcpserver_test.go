package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// stdioEnv, when set, makes the test binary serve MCP over stdio with the
// store at its value (see TestMain): the stdio transport is tested against
// a real child process.
const stdioEnv = "LOUPE_MCPSERVER_TEST_STDIO"

func TestMain(m *testing.M) {
	if db := os.Getenv(stdioEnv); db != "" {
		os.Exit(serveStdioForTest(db))
	}
	os.Exit(m.Run())
}

func serveStdioForTest(db string) int {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	s, err := New(ctx, Options{Store: st, EvalRoot: os.Getenv(stdioEnv + "_EVAL"), DemoDir: "testdata"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	if err := s.ServeStdio(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func openStore(t testing.TB) (store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loupe.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

func newServer(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Store == nil {
		o.Store, _ = openStore(t)
	}
	if o.DemoDir == "" {
		o.DemoDir = "testdata"
	}
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// connectMemory connects the Go SDK's client to s over the in-memory
// transport.
func connectMemory(t testing.TB, s *Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, stt := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(ctx, stt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	return connect(t, ct)
}

func connect(t testing.TB, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "loupe-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its result; a protocol error fails the
// test (tool errors come back in the result).
func call(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error: %v", name, args, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// ok calls a tool that must succeed and decodes its structured result
// into out.
func ok(t testing.TB, cs *mcp.ClientSession, name string, args any, out any) {
	t.Helper()
	res := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s(%v): tool error: %s", name, args, text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	// The text content is the same JSON, for clients that read only text.
	var again any
	if err := json.Unmarshal([]byte(text(res)), &again); err != nil {
		t.Errorf("%s: text content is not the result's JSON: %v", name, err)
	}
}

// fails calls a tool that must fail with a tool error whose message holds
// every one of want.
func fails(t testing.TB, cs *mcp.ClientSession, name string, args any, want ...string) string {
	t.Helper()
	res := call(t, cs, name, args)
	msg := text(res)
	if !res.IsError {
		t.Fatalf("%s(%v): succeeded with %s, want a tool error", name, args, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s(%v): error %q does not say %q", name, args, msg, w)
		}
	}
	return msg
}

// writeEval writes an eval file for the demo agent into dir.
func writeEval(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "demo.eval.yaml")
	const body = `description: the demo agent through MCP
tests:
  - id: demo
    input: What is 17% of 2340 plus the square root of 144?
    assertions:
      - type: tool-trajectory
        mode: any_order
        minimums: {calculator: 1, clock: 1}
      - type: contains
        value: "409.8"
`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// exercise runs every tool through cs, as any client would: the same
// checks for every transport.
func exercise(t *testing.T, cs *mcp.ClientSession) {
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.InputSchema == nil || tl.Description == "" {
			t.Errorf("tool %s: no input schema or description", tl.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"add_score", "delete_trace", "get_execution_trace", "list_scores", "list_sessions", "list_traces", "run_agent_with_trace", "run_eval", "search_traces"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	// Bad arguments are refused by the schema before anything runs.
	var before ListTracesOutput
	ok(t, cs, "list_traces", map[string]any{}, &before)
	fails(t, cs, "run_agent_with_trace", map[string]any{}, "query")
	fails(t, cs, "run_agent_with_trace", map[string]any{"query": 42}, "query")
	fails(t, cs, "run_agent_with_trace", map[string]any{"query": "hi", "bogus": true}, "bogus")
	fails(t, cs, "list_traces", map[string]any{"limit": 0}, "limit")
	fails(t, cs, "list_traces", map[string]any{"limit": 5000}, "limit")
	fails(t, cs, "list_traces", map[string]any{"offset": -1}, "offset")
	fails(t, cs, "get_execution_trace", map[string]any{"trace_id": "not hex!"}, "trace_id")
	fails(t, cs, "search_traces", map[string]any{"step_type": "teleport"}, "step_type")
	fails(t, cs, "run_eval", map[string]any{"file": "x.yaml", "target": "moon"}, "target")
	var after ListTracesOutput
	ok(t, cs, "list_traces", map[string]any{}, &after)
	if len(after.Traces) != len(before.Traces) {
		t.Fatalf("a refused call stored a trace: %d traces, then %d", len(before.Traces), len(after.Traces))
	}

	// Run the demo agent.
	var run RunAgentOutput
	ok(t, cs, "run_agent_with_trace", map[string]any{"query": "What is 17% of 2340?", "thread_id": "t-1"}, &run)
	if !run.Success || run.Error != "" || !strings.Contains(run.Result, "409.8") || run.ThreadID != "t-1" || !run.Stored {
		t.Fatalf("run: %+v", run)
	}
	sum := run.TraceSummary
	if len(sum.TraceID) != 32 || sum.StepCount == nil || *sum.StepCount != len(run.Steps) || *sum.StepCount < 10 ||
		sum.ThinkingStepCount == nil || *sum.ThinkingStepCount != len(run.Thinking) || len(run.Thinking) == 0 ||
		sum.ToolCalls == 0 || sum.ModelCalls == 0 || sum.DurationMS <= 0 || !slices.Contains(sum.Tags, "thread:t-1") || !slices.Contains(sum.Tags, TagSource) {
		t.Fatalf("trace summary: %+v", sum)
	}
	if run.Steps[0].Type != "run.start" || run.Steps[0].Depth != 0 || run.Steps[0].Status != "completed" {
		t.Errorf("first step: %+v", run.Steps[0])
	}
	var toolErr bool
	for _, st := range run.Steps {
		if st.Type == "tool.start" && st.Name == "clock" && st.Status == "error" && strings.Contains(st.Error, "unknown time zone") {
			toolErr = true
		}
	}
	if !toolErr {
		t.Errorf("the failed clock call is not an error step: %+v", run.Steps)
	}
	var noThinking RunAgentOutput
	ok(t, cs, "run_agent_with_trace", map[string]any{"query": "again", "enable_thinking": false}, &noThinking)
	if len(noThinking.Thinking) != 0 || !strings.HasPrefix(noThinking.ThreadID, "mcp-") {
		t.Errorf("enable_thinking false: thinking %v, thread %q", noThinking.Thinking, noThinking.ThreadID)
	}
	id := sum.TraceID

	// Read it back, whole and by page.
	var got GetTraceOutput
	ok(t, cs, "get_execution_trace", map[string]any{"trace_id": id}, &got)
	if got.TraceSummary.TraceID != id || got.TotalSteps != *sum.StepCount || len(got.Steps) != got.TotalSteps ||
		got.NextStepOffset != 0 || got.Memory != nil || got.Truncated != "" {
		t.Fatalf("get: %+v", got)
	}
	if q, _ := got.Query.(string); q != "What is 17% of 2340?" {
		t.Errorf("get: query %v", got.Query)
	}
	var withIO bool
	for _, st := range got.Steps {
		if st.Type == "tool.start" && st.Name == "calculator" && st.Input != nil && st.Output != nil {
			withIO = true
		}
	}
	if !withIO {
		t.Errorf("get: no calculator step with input and output")
	}
	var page GetTraceOutput
	ok(t, cs, "get_execution_trace", map[string]any{"trace_id": id[:8], "step_limit": 3, "step_offset": 2, "include_io": false, "include_memory": true}, &page)
	if len(page.Steps) != 3 || page.Steps[0].Index != 2 || page.NextStepOffset != 5 || !strings.Contains(page.Truncated, "step_offset 5") ||
		page.Steps[0].Input != nil || page.Memory == nil {
		t.Errorf("page: %+v", page)
	}
	var noSteps GetTraceOutput
	ok(t, cs, "get_execution_trace", map[string]any{"trace_id": id, "include_steps": false}, &noSteps)
	if len(noSteps.Steps) != 0 || noSteps.TotalSteps != got.TotalSteps {
		t.Errorf("include_steps false: %+v", noSteps)
	}

	// List and search.
	var list ListTracesOutput
	ok(t, cs, "list_traces", map[string]any{"limit": 1}, &list)
	if len(list.Traces) != 1 || list.NextOffset != 1 || list.Traces[0].TraceID != noThinking.TraceSummary.TraceID {
		t.Errorf("list limit 1: %+v", list)
	}
	ok(t, cs, "list_traces", map[string]any{"limit": 1, "offset": 1}, &list)
	if len(list.Traces) != 1 || list.Traces[0].TraceID != id {
		t.Errorf("list offset 1: %+v", list)
	}
	search := func(args map[string]any) []string {
		t.Helper()
		var out SearchTracesOutput
		ok(t, cs, "search_traces", args, &out)
		var ids []string
		for _, r := range out.Traces {
			ids = append(ids, r.TraceID)
		}
		return ids
	}
	if ids := search(map[string]any{"query": "tag:thread:t-1"}); !slices.Equal(ids, []string{id}) {
		t.Errorf("search by thread tag: %v", ids)
	}
	var hits SearchTracesOutput
	ok(t, cs, "search_traces", map[string]any{"query": `"17% of 2340" tag:thread:t-1`}, &hits)
	if len(hits.Traces) != 1 || len(hits.Traces[0].Matches) == 0 || hits.Traces[0].Matches[0].Snippet == "" {
		t.Errorf("search text: %+v", hits)
	}
	if ids := search(map[string]any{"step_type": "tool_end", "query": "tool:clock"}); len(ids) != 2 {
		t.Errorf("search step_type tool_end: %v", ids)
	}
	if ids := search(map[string]any{"success": false}); len(ids) != 0 {
		t.Errorf("search success false: %v", ids)
	}
	if ids := search(map[string]any{"success": true, "min_duration_ms": 0.0, "max_duration_ms": 3600e3}); len(ids) != 2 {
		t.Errorf("search success true: %v", ids)
	}
	if ids := search(map[string]any{"min_duration_ms": 3600e3}); len(ids) != 0 {
		t.Errorf("search min_duration 1h: %v", ids)
	}
	fails(t, cs, "search_traces", map[string]any{"query": "colour:red"}, "colour", "keys")

	// Grade the stored run, then fresh runs of the agent.
	var ev RunEvalOutput
	ok(t, cs, "run_eval", map[string]any{"file": "demo.eval.yaml", "tags": []string{"thread:t-1"}}, &ev)
	if ev.Verdict != "pass" || ev.Passed != 1 || len(ev.Cases) != 1 || ev.Cases[0].TraceID != id || ev.ResultsTraceID == "" || ev.Summary == "" {
		t.Errorf("run_eval store: %+v", ev)
	}
	ev = RunEvalOutput{}
	ok(t, cs, "run_eval", map[string]any{"file": "demo.eval.yaml", "target": "agent", "store_results": false}, &ev)
	if ev.Verdict != "pass" || ev.Passed != 1 || ev.ResultsTraceID != "" || ev.Cases[0].TraceID == "" || ev.Cases[0].TraceID == id {
		t.Errorf("run_eval agent: %+v", ev)
	}
	fails(t, cs, "run_eval", map[string]any{"file": "../outside.yaml"}, "outside.yaml")
	fails(t, cs, "run_eval", map[string]any{"file": "missing.yaml"}, "does not exist")
	fails(t, cs, "run_eval", map[string]any{"file": "demo.eval.yaml", "target": "agent", "limit": 3}, "target agent")

	// Missing ids, delete then get.
	missing := strings.Repeat("ab", 16)
	fails(t, cs, "get_execution_trace", map[string]any{"trace_id": missing}, "no trace", "list_traces")
	fails(t, cs, "delete_trace", map[string]any{"trace_id": missing}, "no trace")
	fails(t, cs, "delete_trace", map[string]any{"trace_id": id[:8]}, "trace_id")
	var del DeleteTraceOutput
	ok(t, cs, "delete_trace", map[string]any{"trace_id": id}, &del)
	if !del.Deleted || del.TraceID != id {
		t.Errorf("delete: %+v", del)
	}
	fails(t, cs, "get_execution_trace", map[string]any{"trace_id": id}, "no trace "+id)
	fails(t, cs, "delete_trace", map[string]any{"trace_id": id}, "no trace")
}

func TestToolsInMemory(t *testing.T) {
	root := t.TempDir()
	writeEval(t, root)
	s := newServer(t, Options{EvalRoot: root})
	exercise(t, connectMemory(t, s))
}

func TestToolsStreamableHTTP(t *testing.T) {
	root := t.TempDir()
	writeEval(t, root)
	s := newServer(t, Options{EvalRoot: root})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close) // after the client session's Close
	exercise(t, connect(t, &mcp.StreamableClientTransport{Endpoint: ts.URL}))
}

func TestToolsStdio(t *testing.T) {
	root := t.TempDir()
	writeEval(t, root)
	_, db := openStore(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), stdioEnv+"="+db, stdioEnv+"_EVAL="+root)
	cmd.Stderr = os.Stderr
	exercise(t, connect(t, &mcp.CommandTransport{Command: cmd}))
}

// TestConcurrentRuns runs agents from several sessions at once (under
// -race): every run's trace is stored whole and readable.
func TestConcurrentRuns(t *testing.T) {
	s := newServer(t, Options{})
	const n = 6
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		cs := connectMemory(t, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out RunAgentOutput
			ok(t, cs, "run_agent_with_trace", map[string]any{"query": fmt.Sprint("run ", i)}, &out)
			ids[i] = out.TraceSummary.TraceID
			var got GetTraceOutput
			ok(t, cs, "get_execution_trace", map[string]any{"trace_id": out.TraceSummary.TraceID}, &got)
			if got.TraceSummary.Records != out.TraceSummary.Records {
				t.Errorf("run %d: stored %d records, ran %d", i, got.TraceSummary.Records, out.TraceSummary.Records)
			}
		}()
	}
	wg.Wait()
	var list ListTracesOutput
	ok(t, connectMemory(t, s), "list_traces", map[string]any{"limit": 50}, &list)
	if len(list.Traces) != n {
		t.Errorf("%d traces stored, want %d", len(list.Traces), n)
	}
}

// storeTrace records a trace with a memory pool, a long value, many steps
// and a secret, straight into st.
func storeTrace(t testing.TB, st store.Store, steps int) trace.TraceID {
	t.Helper()
	tr := trace.New(trace.Options{MaxValueBytes: -1})
	ctx, ec := tr.Start(context.Background(), "big", trace.RunOptions{Input: trace.Text("token ghp_" + strings.Repeat("A", 36))})
	_ = ctx
	ec.MemorySet(trace.ScopeParam, "query", trace.Text("q"))
	ec.MemorySet(trace.ScopeMemory, "memory_answer", trace.Text("one"))
	ec.MemorySet(trace.ScopeMemory, "memory_answer", trace.Text("two"))
	for i := range steps {
		ec.ToolCall("echo", trace.Text(fmt.Sprint(i)), trace.Text(strings.Repeat("x", 10_000)), time.Millisecond, nil)
	}
	ec.End(trace.Text("done"), nil)
	if _, err := st.Append(context.Background(), ec.Records()); err != nil {
		t.Fatal(err)
	}
	return ec.TraceID()
}

func TestGetTraceBoundsAndRedaction(t *testing.T) {
	st, _ := openStore(t)
	id := storeTrace(t, st, 200)
	s := newServer(t, Options{Store: st, MaxResultBytes: 16 << 10, MaxValueBytes: 100})
	cs := connectMemory(t, s)
	var got GetTraceOutput
	ok(t, cs, "get_execution_trace", map[string]any{"trace_id": id.String(), "include_memory": true}, &got)
	b, _ := json.Marshal(got)
	if len(b) > 20<<10 {
		t.Errorf("result is %d bytes, over the 16 KiB bound", len(b))
	}
	if got.NextStepOffset == 0 || len(got.Steps) >= got.TotalSteps || !strings.Contains(got.Truncated, "size limit") {
		t.Errorf("not paged: %d of %d steps, next %d, %q", len(got.Steps), got.TotalSteps, got.NextStepOffset, got.Truncated)
	}
	var cut bool
	for _, st := range got.Steps {
		if o, ok := st.Output.(string); ok && strings.Contains(o, "[truncated: 100 of 10002 bytes shown]") {
			cut = true
		}
	}
	if !cut {
		t.Errorf("long outputs are not cut visibly: %+v", got.Steps)
	}
	if q := fmt.Sprint(got.Query); strings.Contains(q, "ghp_") || !strings.Contains(q, "[REDACTED]") {
		t.Errorf("query not redacted: %s", q)
	}
	if m := got.Memory; m == nil || len(m.History["memory_answer"]) != 2 || m.Params["query"] != "q" {
		t.Errorf("memory: %+v", got.Memory)
	}
	// Paging reaches every step exactly once.
	seen := len(got.Steps)
	for off := got.NextStepOffset; off != 0; {
		var p GetTraceOutput
		ok(t, cs, "get_execution_trace", map[string]any{"trace_id": id.String(), "step_offset": off, "include_io": false}, &p)
		if p.Steps[0].Index != off {
			t.Fatalf("page at %d starts at step %d", off, p.Steps[0].Index)
		}
		seen += len(p.Steps)
		off = p.NextStepOffset
	}
	if seen != got.TotalSteps {
		t.Errorf("paging saw %d steps of %d", seen, got.TotalSteps)
	}
	fails(t, cs, "get_execution_trace", map[string]any{"trace_id": id.String(), "step_offset": 10_000}, "step_offset", "past")

	// Without redaction the secret goes out as stored.
	plain := connectMemory(t, newServer(t, Options{Store: st, NoRedact: true}))
	ok(t, plain, "get_execution_trace", map[string]any{"trace_id": id.String(), "include_steps": false}, &got)
	if !strings.Contains(fmt.Sprint(got.Query), "ghp_") {
		t.Errorf("NoRedact: query %v", got.Query)
	}
}

// TestConfigAgent runs an agent from a config file: a scripted model with
// built-in tools, whose answer holds a secret that must not reach the
// store or the client.
func TestConfigAgent(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("turns.yaml", `turns:
  - thinking: I add.
    tool_calls: [{name: calculator, input: {expression: "1+2"}}]
  - answer: "3, and the key is ghp_`+strings.Repeat("B", 36)+`"
`)
	cfgPath := write("loupe-mcp.yaml", `agent:
  name: adder
  model: scripted:turns.yaml
  system: You add.
  tools: [calculator]
  tags: [env:test]
  limits: {max_iterations: 5, timeout: 1m}
`)
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t)
	cs := connectMemory(t, newServer(t, Options{Store: st, Config: cfg}))
	var out RunAgentOutput
	ok(t, cs, "run_agent_with_trace", map[string]any{"query": "1+2?"}, &out)
	if !out.Success || !strings.HasPrefix(out.Result, "3, and the key is [REDACTED]") || out.TraceSummary.Name != "adder" ||
		!slices.Contains(out.TraceSummary.Tags, "env:test") || out.TraceSummary.ToolCalls != 1 {
		t.Fatalf("run: %+v", out)
	}
	id, _ := trace.ParseTraceID(out.TraceSummary.TraceID)
	stored, err := st.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range stored.Records {
		if b, _ := json.Marshal(r); strings.Contains(string(b), "ghp_") {
			t.Errorf("stored record holds the secret: %s", b)
		}
	}
	fails(t, cs, "run_agent_with_trace", map[string]any{"query": "x", "params": map[string]string{"a": "b"}}, "params are for pipelines")
}

func TestPipelineConfig(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(cfgPath, []byte("pipeline: rag.yaml\nparams: {top_k: \"3\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// The default runner: a file that is not there is a clear tool error
	// pointing at the config line.
	cs := connectMemory(t, newServer(t, Options{Config: cfg}))
	fails(t, cs, "run_agent_with_trace", map[string]any{"query": "x"}, cfgPath+":1:", "rag.yaml")

	// A runner: its run (memory writes included) comes back in the seed's shape.
	var gotFile string
	var gotParams map[string]string
	run := func(ctx context.Context, tr *trace.Tracer, file string, params map[string]string) (agent.Result, error) {
		gotFile, gotParams = file, params
		_, ec := tr.Start(ctx, "rag", trace.RunOptions{Input: trace.Text(params["query"])})
		ec.MemorySet(trace.ScopeMemory, "memory_docs", trace.Text("d1"))
		ec.MemorySet(trace.ScopeMemory, "memory_docs", trace.Text("d2"))
		ec.MemorySet(trace.ScopeGlobal, "answer", trace.Text("42"))
		ec.End(trace.Text("42"), nil)
		return agent.Result{Answer: "42", Records: ec.Records(), Termination: trace.TerminationSuccess, TraceID: ec.TraceID(), Stats: ec.Stats()}, nil
	}
	cs = connectMemory(t, newServer(t, Options{Config: cfg, RunPipeline: run, EvalRoot: dir}))
	var out RunAgentOutput
	ok(t, cs, "run_agent_with_trace", map[string]any{"query": "why?", "params": map[string]string{"top_k": "5"}}, &out)
	if gotFile != filepath.Join(dir, "rag.yaml") || gotParams["top_k"] != "5" || gotParams["query"] != "why?" {
		t.Errorf("pipeline called with %s %v", gotFile, gotParams)
	}
	if !out.Success || out.Result != "42" || out.MemoryPool["memory_docs"] != 2 || out.MemoryPool["answer"] != 1 || !out.Stored {
		t.Errorf("pipeline run: %+v", out)
	}
	writeEval(t, dir)
	fails(t, cs, "run_eval", map[string]any{"file": "demo.eval.yaml", "target": "agent"}, "runs a pipeline", "target store")
}

func TestParseConfigErrors(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"empty", "", "c.yaml:1:1: the config is empty"},
		{"neither", "params: {a: b}\n", "neither \"agent:\" nor \"pipeline:\""},
		{"both", "agent: {model: scripted:x.yaml}\npipeline: p.yaml\n", "c.yaml:2:11: the config has both"},
		{"unknown key", "agent:\n  model: openai:gpt-4o-mini\n  temperature: 0.2\n", "c.yaml:3:3"},
		{"no model", "agent:\n  system: hi\n", "c.yaml:2:3: the agent has no model"},
		{"unknown tool", "agent:\n  model: openai:x\n  tools: [calculator, teleport]\n", "c.yaml:3:23: unknown tool \"teleport\""},
		{"bad timeout", "agent:\n  model: openai:x\n  limits:\n    timeout: soon\n", "c.yaml:4:14: timeout \"soon\""},
		{"negative limit", "agent:\n  model: openai:x\n  limits: {max_iterations: -1}\n", "limits cannot be negative"},
		{"server without name", "agent:\n  model: openai:x\n  mcp_servers:\n    - command: npx\n", "c.yaml:4:7: an MCP server has no name"},
		{"server command and url", "agent:\n  model: openai:x\n  mcp_servers:\n    - {name: a, command: x, url: http://h}\n", "has both command and url"},
		{"server twice", "agent:\n  model: openai:x\n  mcp_servers:\n    - {name: a, command: x}\n    - {name: a, url: http://h}\n", "c.yaml:5:7: two MCP servers are named \"a\""},
		{"params with agent", "agent: {model: openai:x}\nparams: {a: b}\n", "c.yaml:2:9: params are for a pipeline"},
		{"malformed", "agent: [\n", "c.yaml:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.yaml), "c.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestNewFailsEarly: a config whose model or MCP servers cannot work fails
// New, with the config position.
func TestNewFailsEarly(t *testing.T) {
	st, _ := openStore(t)
	cfg, err := ParseConfig([]byte("agent:\n  model: nosuch:model\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), Options{Store: st, Config: cfg}); err == nil || !strings.Contains(err.Error(), "c.yaml:2:10") || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("bad model: %v", err)
	}
	cfg, err = ParseConfig([]byte("agent:\n  model: openai:x\n  mcp_servers:\n    - {name: down, command: /nonexistent/server}\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), Options{Store: st, Config: cfg}); err == nil || !strings.Contains(err.Error(), "c.yaml:4:7") || !strings.Contains(err.Error(), `"down"`) {
		t.Errorf("unreachable MCP server: %v", err)
	}
	if _, err := New(context.Background(), Options{}); err == nil {
		t.Error("New without a store succeeded")
	}
}

// TestConfigAgentWithMCPServer: the configured agent's tools come from an
// MCP server (a Go SDK server over streamable HTTP); the call is a traced
// step of the run.
func TestConfigAgentWithMCPServer(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "upper", Version: "1"}, nil)
	type shoutIn struct {
		Text string `json:"text"`
	}
	type shoutOut struct {
		Loud string `json:"loud"`
	}
	mcp.AddTool(up, &mcp.Tool{Name: "shout", Description: "Upper-case text."}, func(_ context.Context, _ *mcp.CallToolRequest, in shoutIn) (*mcp.CallToolResult, shoutOut, error) {
		return nil, shoutOut{Loud: strings.ToUpper(in.Text)}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	defer hs.Close()

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "turns.yaml"), []byte(`turns:
  - tool_calls: [{name: shout, input: {text: hello}}]
  - answer: HELLO
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte("agent:\n  model: scripted:turns.yaml\n  mcp_servers:\n    - {name: upper, url: \""+hs.URL+"\", call_timeout: 10s}\n"), filepath.Join(dir, "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Options{Config: cfg})
	cs := connectMemory(t, s)
	var out RunAgentOutput
	ok(t, cs, "run_agent_with_trace", map[string]any{"query": "shout hello"}, &out)
	if !out.Success || out.Result != "HELLO" || out.TraceSummary.ToolCalls != 1 {
		t.Fatalf("run: %+v", out)
	}
	var got GetTraceOutput
	ok(t, cs, "get_execution_trace", map[string]any{"trace_id": out.TraceSummary.TraceID}, &got)
	var called bool
	for _, st := range got.Steps {
		if st.Type == "tool.start" && st.Name == "shout" && st.Status == "completed" && strings.Contains(fmt.Sprint(st.Output), "HELLO") {
			called = true
		}
	}
	if !called {
		t.Errorf("no completed shout step with HELLO: %+v", got.Steps)
	}
}

// TestRunResultBounded: run_agent_with_trace's result fits MaxResultBytes,
// dropping thinking and then steps, and says how many steps it left out.
func TestRunResultBounded(t *testing.T) {
	cs := connectMemory(t, newServer(t, Options{MaxResultBytes: 4096}))
	res := call(t, cs, "run_agent_with_trace", map[string]any{"query": "q"})
	if res.IsError {
		t.Fatal(text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out RunAgentOutput
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(b) > 4096 || out.StepsOmitted == 0 || len(out.Steps)+out.StepsOmitted != *out.TraceSummary.StepCount || out.Thinking != nil || !out.Success {
		t.Errorf("%d bytes, %d steps + %d omitted of %d, thinking %v", len(b), len(out.Steps), out.StepsOmitted, *out.TraceSummary.StepCount, out.Thinking)
	}
}

// TestPanicIsToolError: a handler that panics answers with a tool error
// and the session goes on. The panic and its stack go to the log, not to
// the client.
func TestPanicIsToolError(t *testing.T) {
	var log syncBuffer
	s := newServer(t, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	mcp.AddTool(s.MCP(), &mcp.Tool{Name: "boom"}, safe(s.log, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		panic("kaboom")
	}))
	cs := connectMemory(t, s)
	msg := fails(t, cs, "boom", map[string]any{}, "internal error", "logged")
	if strings.Contains(msg, "kaboom") || strings.Contains(msg, "goroutine") {
		t.Errorf("the client was told the panic: %q", msg)
	}
	if l := log.String(); !strings.Contains(l, "kaboom") || !strings.Contains(l, "goroutine") {
		t.Errorf("the log lacks the panic or its stack: %q", l)
	}
	var list ListTracesOutput
	ok(t, cs, "list_traces", map[string]any{}, &list)
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"agent:\n  model: scripted:x.yaml\n  tools: [calculator]\n  limits: {timeout: 1m}\n",
		"pipeline: p.yaml\nparams: {a: b}\n",
		"agent:\n  model: openai:x\n  mcp_servers:\n    - {name: a, command: x, call_timeout: 5s}\n",
		"agent: [\n", "- !!str\n", "{agent: {model: 1}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "f.yaml")
		if err == nil && (c.Agent == nil) == (c.Pipeline == "") {
			t.Errorf("accepted a config with neither or both of agent and pipeline: %q", data)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "f.yaml") {
			t.Errorf("error without the file name: %v", err)
		}
	})
}

// TestPipelineConfigRunsOmniDemo runs a real omni demo pipeline through
// run_agent_with_trace with the default runner (package pipeline, offline)
// and reads its trace back: every step, the branch and the memory writes.
func TestPipelineConfigRunsOmniDemo(t *testing.T) {
	dir := t.TempDir()
	demo := filepath.Join(testrepo.Root(t), "testdata", "real", "omni", "demo-rag.yaml")
	cfgPath := filepath.Join(dir, "p.yaml")
	docs := filepath.Join(dir, "docs")
	if err := os.MkdirAll(docs, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"typing.md": "Typed languages catch mistakes before the program runs and make refactoring safe.",
		"tea.md":    "Green tea is brewed at 80 degrees.",
	} {
		if err := os.WriteFile(filepath.Join(docs, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf("pipeline: %s\nparams: {documents_dir: %q}\n", demo, docs)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cs := connectMemory(t, newServer(t, Options{Config: c}))
	var out RunAgentOutput
	fails(t, cs, "run_agent_with_trace", map[string]any{"query": "x", "params": map[string]string{"documents_dir": "/etc"}}, "documents_dir cannot be given by an MCP client")
	ok(t, cs, "run_agent_with_trace", map[string]any{"query": "why use typed languages?"}, &out)
	if !out.Success || !out.Stored || out.Result == "" {
		t.Fatalf("pipeline run: %+v", out)
	}
	var names []string
	for _, s := range out.Steps {
		names = append(names, s.Name)
	}
	joined := strings.Join(names, " ")
	for _, want := range []string{"retriever.search", "generator.generate", "evaluator.evaluate"} {
		if !strings.Contains(joined, want) {
			t.Errorf("steps %q lack %s", joined, want)
		}
	}
	if out.MemoryPool["query"] == 0 {
		t.Errorf("memory pool %v lacks the query parameter", out.MemoryPool)
	}
}

// TestHandlerRefusesCrossOrigin: a web page in the user's browser cannot
// drive the tools over HTTP; a client that is not a browser can.
func TestHandlerRefusesCrossOrigin(t *testing.T) {
	srv := httptest.NewServer(newServer(t, Options{}).Handler())
	defer srv.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"other origin", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"no browser headers", nil, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}

// TestQualityTools: list_sessions lists the sessions of the stored runs
// with their totals, and list_scores a trace's scores (by id prefix) or a
// session's; bad arguments are the tool's errors, not the protocol's.
func TestQualityTools(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	tr := trace.New(trace.Options{Sinks: []trace.Sink{store.NewSink(st)}, Dispatch: trace.DispatchOptions{OnFull: trace.Block}})
	var ids []trace.TraceID
	for i := range 2 {
		_, run := tr.Start(ctx, "support", trace.RunOptions{Input: trace.Text("hi"), Session: "conv-1", User: "ada"})
		run.End(trace.Text("answer "+strconv.Itoa(i)), nil)
		ids = append(ids, run.TraceID())
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	sc := st.(store.Scorer)
	if _, err := sc.AddScores(ctx, []store.Score{
		{TraceID: ids[0], Name: "thumbs", Kind: store.ScoreBoolean, Value: 1, Source: store.SourceHuman, Author: "ada", Comment: "right"},
		{Session: "conv-1", Name: "resolved", Kind: store.ScoreBoolean, Value: 1, Source: store.SourceAPI},
	}); err != nil {
		t.Fatal(err)
	}
	cs := connectMemory(t, newServer(t, Options{Store: st}))
	call := func(name string, args map[string]any) (*mcp.CallToolResult, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res, res.Content[0].(*mcp.TextContent).Text
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		err  bool
		want []string
	}{
		{"list_sessions", map[string]any{}, false, []string{`"session":"conv-1"`, `"user":"ada"`, `"runs":2`}},
		{"list_sessions", map[string]any{"user": "bob"}, false, []string{`"sessions":[]`}},
		{"list_scores", map[string]any{"trace_id": ids[0].String()[:8]}, false, []string{`"name":"thumbs"`, `"comment":"right"`, `"author":"ada"`}},
		{"list_scores", map[string]any{"session": "conv-1"}, false, []string{`"name":"resolved"`}},
		{"list_scores", map[string]any{}, true, []string{"give the trace_id"}},
		{"list_scores", map[string]any{"trace_id": ids[0].String(), "session": "conv-1"}, true, []string{"not both"}},
		{"list_scores", map[string]any{"trace_id": "abcd0000"}, true, []string{"no trace"}},
	} {
		res, text := call(tc.name, tc.args)
		if res.IsError != tc.err {
			t.Errorf("%s %v: error %v, want %v: %s", tc.name, tc.args, res.IsError, tc.err, text)
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s %v: %s lacks %s", tc.name, tc.args, text, w)
			}
		}
	}
}

// TestAddScore: add_score over the in-memory transport stores scores of
// each kind on a trace (by prefix), a span and a session, with source
// api and the client's name as the author (no API key here), and refuses
// what does not fit: no value, both a value and a category, a trace and
// a session, a span without its trace, a trace that is not stored, a
// value of the wrong type, and a value outside its name's config.
func TestAddScore(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	id := storeTrace(t, st, 2)
	got, err := st.Trace(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	span := got.Records[len(got.Records)-1].SpanID.String()
	lo, hi := 0.0, 1.0
	if err := store.PutScoreConfig(ctx, st.(store.Settings), store.ScoreConfig{Name: "helpfulness", Kind: store.ScoreNumeric, Min: &lo, Max: &hi}); err != nil {
		t.Fatal(err)
	}
	cs := connectMemory(t, newServer(t, Options{Store: st}))
	for _, tc := range []struct {
		args map[string]any
		want Score
	}{
		{map[string]any{"trace_id": id.String()[:8], "name": "helpfulness", "value": 0.75, "comment": "clear answer"},
			Score{TraceID: id.String(), Name: "helpfulness", Kind: "numeric", Value: 0.75, Comment: "clear answer"}},
		{map[string]any{"trace_id": id.String(), "span_id": span, "name": "thumbs", "value": false},
			Score{TraceID: id.String(), SpanID: span, Name: "thumbs", Kind: "boolean", Value: 0}},
		{map[string]any{"session": "conv-9", "name": "outcome", "category": "resolved"},
			Score{Session: "conv-9", Name: "outcome", Kind: "categorical", Category: "resolved"}},
		{map[string]any{"session": "conv-9", "name": "thumbs", "value": true},
			Score{Session: "conv-9", Name: "thumbs", Kind: "boolean", Value: 1}},
	} {
		var out AddScoreOutput
		ok(t, cs, "add_score", tc.args, &out)
		s := out.Score
		tc.want.ID, tc.want.Time = s.ID, s.Time
		tc.want.Source, tc.want.Author = "api", "loupe-test"
		if s != tc.want || len(s.ID) != 32 || s.Time.IsZero() {
			t.Errorf("add_score %v = %+v, want %+v", tc.args, s, tc.want)
		}
	}
	// Stored: list_scores and the store see them.
	var list ListScoresOutput
	ok(t, cs, "list_scores", map[string]any{"trace_id": id.String()}, &list)
	if len(list.Scores) != 2 || list.Scores[0].Name != "thumbs" || list.Scores[1].Name != "helpfulness" || list.Scores[1].Author != "loupe-test" {
		t.Errorf("list_scores of the trace: %+v", list.Scores)
	}
	page, err := st.(store.Scorer).Scores(ctx, store.ScoreFilter{Session: "conv-9"})
	if err != nil || len(page.Scores) != 2 || page.Scores[0].Source != store.SourceAPI {
		t.Errorf("the session's stored scores: %+v (%v)", page.Scores, err)
	}

	missing := strings.Repeat("ab", 16)
	for _, tc := range []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{"trace_id": id.String(), "name": "x"}, []string{"give value", "or category"}},
		{map[string]any{"trace_id": id.String(), "name": "x", "value": 1, "category": "a"}, []string{"not both"}},
		{map[string]any{"trace_id": id.String(), "session": "conv-9", "name": "x", "value": 1}, []string{"trace_id or session, not both"}},
		{map[string]any{"span_id": span, "name": "x", "value": 1}, []string{"span_id needs the trace_id"}},
		{map[string]any{"name": "x", "value": 1}, []string{"give the trace_id"}},
		{map[string]any{"trace_id": missing, "name": "x", "value": 1}, []string{"no trace " + missing}},
		{map[string]any{"trace_id": "ffff0000", "name": "x", "value": 1}, []string{"no trace ffff0000"}},
		{map[string]any{"trace_id": id.String(), "name": "x", "value": "high"}, []string{"value"}},
		{map[string]any{"trace_id": id.String(), "name": "x", "value": 1, "span_id": "nothex"}, []string{"span_id"}},
		{map[string]any{"trace_id": id.String(), "name": "", "value": 1}, []string{"name"}},
		{map[string]any{"trace_id": id.String(), "name": "helpfulness", "value": 5}, []string{"value", "5"}},
		{map[string]any{"trace_id": id.String(), "name": "thumbs", "value": 0.5}, []string{"0.5"}},
		{map[string]any{"trace_id": id.String(), "name": "helpfulness", "value": true}, []string{"boolean"}},
	} {
		fails(t, cs, "add_score", tc.args, tc.want...)
	}
	if page, err := st.(store.Scorer).Scores(ctx, store.ScoreFilter{}); err != nil || len(page.Scores) != 4 {
		t.Errorf("after the refused calls the store holds %d scores (%v), want 4", len(page.Scores), err)
	}
}
