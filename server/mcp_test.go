package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/internal/mcpserver"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// bearer adds an API key to every request of an MCP client.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPEndpoint: /mcp serves Loupe's MCP server, open on loopback
// (RequireKeys false) and, with keys required, to read keys for the
// read-only tools and to admin keys for all (the others run agents and
// delete traces).
func TestMCPEndpoint(t *testing.T) {
	st := openStore(t)
	ms, err := mcpserver.New(context.Background(), mcpserver.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	admin, _, err := CreateKey(context.Background(), st, ScopeAdmin, "mcp", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	read, _, err := CreateKey(context.Background(), st, ScopeRead, "r", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ingest, _, err := CreateKey(context.Background(), st, ScopeIngest, "i", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	hdr := []string{"Accept", "application/json, text/event-stream"}

	e := newEnv(t, Options{Store: st, RequireKeys: true, MCP: ms.Handler()})
	for _, tt := range []struct {
		name, key string
		code      int
		says      string
	}{
		{"no key", "", http.StatusUnauthorized, "requires an API key"},
		{"bad key", "lk_0123456789abcdef_nope", http.StatusUnauthorized, "API key"},
		{"read key", read, http.StatusOK, `"serverInfo"`},
		{"ingest key", ingest, http.StatusForbidden, "scope ingest"},
		{"admin key", admin, http.StatusOK, `"serverInfo"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e.key = tt.key
			code, body, _ := e.do("POST", "/mcp", "application/json", []byte(initialize), hdr...)
			if code != tt.code || !strings.Contains(string(body), tt.says) {
				t.Errorf("POST /mcp: %d %s, want %d saying %s", code, body, tt.code, tt.says)
			}
		})
	}

	// A real client with an admin key runs the tools.
	connect := func(url string, rt http.RoundTripper) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	cs := connect(e.ts.URL+"/mcp", bearer{admin})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_traces", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_traces with an admin key: %v %+v", err, res)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_trace", Arguments: map[string]any{"trace_id": "0123456789abcdef0123456789abcdef"}})
	if err != nil || !res.IsError || strings.Contains(res.Content[0].(*mcp.TextContent).Text, "admin key") {
		t.Errorf("delete_trace with an admin key: %v %+v, want the tool's own not-found error", err, res)
	}

	// A read key reads, and is refused the tools that run or delete.
	rs := connect(e.ts.URL+"/mcp", bearer{read})
	for _, call := range []*mcp.CallToolParams{
		{Name: "list_traces", Arguments: map[string]any{}},
		{Name: "search_traces", Arguments: map[string]any{}},
		{Name: "list_sessions", Arguments: map[string]any{}},
		{Name: "list_scores", Arguments: map[string]any{"session": "conv-1"}},
	} {
		res, err := rs.CallTool(context.Background(), call)
		if err != nil || res.IsError {
			t.Errorf("%s with a read key: %v %+v", call.Name, err, res)
		}
	}
	for _, call := range []*mcp.CallToolParams{
		{Name: "delete_trace", Arguments: map[string]any{"trace_id": "0123456789abcdef0123456789abcdef"}},
		{Name: "run_agent_with_trace", Arguments: map[string]any{"query": "hi"}},
		{Name: "run_eval", Arguments: map[string]any{"file": "x.yaml"}},
	} {
		res, err := rs.CallTool(context.Background(), call)
		if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "needs an admin key") {
			t.Errorf("%s with a read key: %v %+v, want refused for needing an admin key", call.Name, err, res)
		}
	}
	n, err := st.List(context.Background(), store.ListQuery{})
	if err != nil || len(n.Traces) != 0 {
		t.Errorf("a read key's refused calls stored %d traces (%v)", len(n.Traces), err)
	}

	// add_score: an admin key scores a stored trace, as itself; a read
	// key is refused and stores nothing.
	id := trace.TraceID{0xad, 0xd5}
	if _, err := st.Append(context.Background(), []trace.Record{
		{V: trace.Version, TraceID: id, SpanID: trace.SpanID{1}, Seq: 1, Time: time.Now(), Type: trace.TypeRunStart, Name: "scored"},
		{V: trace.Version, TraceID: id, SpanID: trace.SpanID{1}, Seq: 2, Time: time.Now(), Type: trace.TypeRunEnd, Name: "scored", Status: "success"},
	}); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"trace_id": id.String(), "name": "resolved", "value": true, "comment": "closed the ticket"}
	res, err = rs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add_score", Arguments: args})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "needs an admin key") {
		t.Errorf("add_score with a read key: %v %+v, want refused for needing an admin key", err, res)
	}
	sc := st.(store.Scorer)
	if page, err := sc.Scores(context.Background(), store.ScoreFilter{}); err != nil || len(page.Scores) != 0 {
		t.Fatalf("a read key's refused add_score stored %+v (%v)", page.Scores, err)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add_score", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("add_score with an admin key: %v %+v", err, res)
	}
	page, err := sc.Scores(context.Background(), store.ScoreFilter{TraceIDs: []trace.TraceID{id}})
	if err != nil || len(page.Scores) != 1 {
		t.Fatalf("stored scores: %+v (%v)", page.Scores, err)
	}
	if s := page.Scores[0]; s.Name != "resolved" || s.Kind != store.ScoreBoolean || s.Value != 1 || s.Source != store.SourceAPI || s.Author != "mcp" || s.Comment != "closed the ticket" {
		t.Errorf("the admin key's score: %+v, want source api by the key named mcp", s)
	}

	// On loopback without RequireKeys, no key is needed.
	open := newEnv(t, Options{Store: st, MCP: ms.Handler()})
	cs = connect(open.ts.URL+"/mcp", http.DefaultTransport)
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_agent_with_trace", Arguments: map[string]any{"query": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("run_agent_with_trace without keys on loopback: %v %+v", err, res)
	}

	// Without Options.MCP there is no /mcp.
	none := newEnv(t, Options{Store: st})
	if code, _, _ := none.do("POST", "/mcp", "application/json", []byte(initialize), hdr...); code != http.StatusNotFound {
		t.Errorf("POST /mcp without MCP: %d", code)
	}
}
