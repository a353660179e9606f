package server

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// conversation returns the records of n runs of session conv (user ada),
// a minute apart, each asked "question i" and answering "answer i" with a
// tool call.
func conversation(conv string, n int, from time.Time) [][]trace.Record {
	var runs [][]trace.Record
	for i := range n {
		tid := trace.NewTraceID()
		root := trace.NewSpanID()
		at := from.Add(time.Duration(i) * time.Minute)
		runs = append(runs, []trace.Record{
			{V: 1, TraceID: tid, SpanID: root, Seq: 1, Time: at, Type: trace.TypeRunStart, Name: "concierge",
				Input: trace.Text("question " + strconv.Itoa(i)), Run: &trace.RunInfo{Session: conv, User: "ada"}},
			{V: 1, TraceID: tid, SpanID: trace.SpanID{9}, ParentID: root, Seq: 2, Time: at.Add(time.Second), Type: trace.TypeToolEnd,
				Name: "lookup", Input: trace.Text("q"), Output: trace.Text("found"), Duration: time.Second},
			{V: 1, TraceID: tid, SpanID: root, Seq: 3, Time: at.Add(2 * time.Second), Type: trace.TypeRunEnd, Name: "concierge",
				Status: "success", Output: trace.Text("answer " + strconv.Itoa(i)), Duration: 2 * time.Second},
		})
	}
	return runs
}

func TestSessionsAPI(t *testing.T) {
	e := newEnv(t, Options{})
	for _, recs := range append(conversation("conv-1", 3, t0), conversation("conv-2", 1, t0.Add(time.Hour))...) {
		if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
			t.Fatalf("ingest: %d %s", code, b)
		}
	}
	var page store.SessionPage
	e.getJSON(t, "/api/v1/sessions", &page)
	if len(page.Sessions) != 2 || page.Sessions[0].ID != "conv-2" || page.Sessions[1].Runs != 3 || page.Sessions[1].User != "ada" {
		t.Fatalf("GET /api/v1/sessions: %+v", page)
	}
	e.getJSON(t, "/api/v1/sessions?limit=1", &page)
	if len(page.Sessions) != 1 || page.Next == "" {
		t.Fatalf("first page: %+v", page)
	}
	next := page.Next
	page = store.SessionPage{}
	e.getJSON(t, "/api/v1/sessions?limit=1&cursor="+url.QueryEscape(next), &page)
	if len(page.Sessions) != 1 || page.Sessions[0].ID != "conv-1" || page.Next != "" {
		t.Fatalf("second page: %+v", page)
	}
	e.getJSON(t, "/api/v1/sessions?user=bob", &page)
	if len(page.Sessions) != 0 {
		t.Errorf("user=bob: %+v", page)
	}
	var one store.SessionView
	e.getJSON(t, "/api/v1/sessions/conv-1", &one)
	if one.Session.Runs != 3 || len(one.Turns) != 3 {
		t.Fatalf("GET /api/v1/sessions/conv-1: %+v", one)
	}
	for i, turn := range one.Turns {
		if turn.Input.Text() != "question "+strconv.Itoa(i) || turn.Output.Text() != "answer "+strconv.Itoa(i) ||
			len(turn.Tools) != 1 || turn.Tools[0].Name != "lookup" || turn.Summary.Session != "conv-1" {
			t.Errorf("turn %d: %+v", i, turn)
		}
	}
	e.getJSON(t, "/api/v1/sessions/conv-1?runs=1", &one)
	if one.Session.Runs != 3 || len(one.Turns) != 1 || one.Turns[0].Output.Text() != "answer 2" {
		t.Errorf("runs=1: %+v", one)
	}
	// Any id, slashes and spaces included, in one path segment.
	for _, recs := range conversation("team/a b?#", 2, t0) {
		if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
			t.Fatalf("ingest: %d %s", code, b)
		}
	}
	e.getJSON(t, "/api/v1/sessions/"+url.PathEscape("team/a b?#"), &one)
	if one.Session.ID != "team/a b?#" || len(one.Turns) != 2 {
		t.Errorf("session with a slash: %+v", one.Session)
	}
	var list store.ListPage
	e.getJSON(t, "/api/v1/traces?session=conv-1&user=ada", &list)
	if len(list.Traces) != 3 || list.Traces[0].Session != "conv-1" {
		t.Errorf("GET /api/v1/traces?session=conv-1: %+v", list)
	}

	// What openapi.json says each of these may answer.
	ops := openAPIOps(t)
	for _, tt := range []struct {
		op, url string
		code    int
	}{
		{"get /api/v1/sessions", "/api/v1/sessions?since=7d", 200},
		{"get /api/v1/sessions", "/api/v1/sessions?limit=0", 400},
		{"get /api/v1/sessions", "/api/v1/sessions?since=yesterday", 400},
		{"get /api/v1/sessions", "/api/v1/sessions?cursor=nope", 400},
		{"get /api/v1/sessions/{id}", "/api/v1/sessions/conv-1", 200},
		{"get /api/v1/sessions/{id}", "/api/v1/sessions/nope", 404},
		{"get /api/v1/sessions/{id}", "/api/v1/sessions/conv-1?runs=201", 400},
		{"get /api/v1/traces", "/api/v1/traces?session=%00", 400},
	} {
		code, b, _ := e.do("GET", tt.url, "", nil)
		if code != tt.code {
			t.Errorf("GET %s: %d %s, want %d", tt.url, code, b, tt.code)
		}
		if _, ok := ops[tt.op].Responses[strconv.Itoa(code)]; !ok {
			t.Errorf("GET %s: status %d is not documented for %s", tt.url, code, tt.op)
		}
	}
}

// openAPIOps returns openapi.json's operations by "method path".
func openAPIOps(t *testing.T) map[string]operation {
	t.Helper()
	var doc openAPIDocument
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	ops := map[string]operation{}
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op operation
			if method != "parameters" && json.Unmarshal(raw, &op) == nil {
				ops[method+" "+path] = op
			}
		}
	}
	return ops
}

func (e *env) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, b, _ := e.do("GET", path, "", nil)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, b)
	}
}

// TestOTelJSSessions sends the runs of a conversation with the
// OpenTelemetry JS SDK, session.id and user.id on a child span of some
// runs and on the root span of another, span by span (the SDK's simple
// processor exports each span as it ends, so the ids arrive in other
// requests than the runs' roots): they land as one session of three runs,
// in order, which GET /api/v1/sessions lists.
func TestOTelJSSessions(t *testing.T) {
	node := needOTelJS(t)
	st := openStore(t)
	key, _, err := CreateKey(context.Background(), st, ScopeIngest, "js", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Options{Store: st, RequireKeys: true})
	e.key, _, err = CreateKey(context.Background(), st, ScopeRead, "reader", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"proto", "json"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "session.mjs", e.ts.URL, mode, key)
			cmd.Dir = otelJS
			cmd.Env = append(os.Environ(), "OTEL_LOG_LEVEL=none")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node session.mjs %s: %v\n%s", mode, err, stderrOf(err))
			}
			var sent struct {
				Session, User string
				Traces        []string
				Other         string
			}
			if err := json.Unmarshal(out, &sent); err != nil {
				t.Fatalf("session.mjs printed %q: %v", out, err)
			}
			// The second run names its session but no user: user= counts
			// only the runs of the user.
			var page store.SessionPage
			e.getJSON(t, "/api/v1/sessions?user="+url.QueryEscape(sent.User), &page)
			if len(page.Sessions) != 1 || page.Sessions[0].ID != sent.Session || page.Sessions[0].Runs != 2 {
				t.Fatalf("sessions of %s: %+v, want %s with 2 runs", sent.User, page, sent.Session)
			}
			e.getJSON(t, "/api/v1/sessions", &page)
			if len(page.Sessions) == 0 {
				t.Fatal("no sessions")
			}
			x := page.Sessions[0]
			if x.ID != sent.Session || x.Runs != 3 || x.InputTokens != 300 || x.OutputTokens != 30 || x.User != sent.User {
				t.Errorf("session: %+v, want %s with 3 runs of %s, 300 input and 30 output tokens", x, sent.Session, sent.User)
			}
			var one store.SessionView
			e.getJSON(t, "/api/v1/sessions/"+url.PathEscape(sent.Session), &one)
			if len(one.Turns) != 3 {
				t.Fatalf("session %s: %d turns", sent.Session, len(one.Turns))
			}
			for i, turn := range one.Turns {
				if turn.Summary.ID.String() != sent.Traces[i] {
					t.Errorf("turn %d is trace %s, want %s (in the order they ran)", i, turn.Summary.ID, sent.Traces[i])
				}
				if len(turn.Tools) != 1 || turn.Tools[0].Name != "lookup" || !strings.Contains(string(turn.Input), "user") || len(turn.Output) == 0 {
					t.Errorf("turn %d: input %s output %s tools %+v", i, turn.Input, turn.Output, turn.Tools)
				}
			}
			if s := string(one.Turns[2].Output); !strings.Contains(s, "Nora, 12 Harbour St.") {
				t.Errorf("last answer: %s", s)
			}
			var other store.ListPage
			e.getJSON(t, "/api/v1/traces?id_prefix="+sent.Other, &other)
			if len(other.Traces) != 1 || other.Traces[0].Session != "" {
				t.Errorf("the run of no session: %+v", other.Traces)
			}
			for _, tag := range other.Traces[0].Tags {
				if strings.HasPrefix(tag, "session:") || strings.HasPrefix(tag, "user:") {
					t.Errorf("tag %s", tag)
				}
			}
		})
	}
}
