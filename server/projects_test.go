package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loupe-dev/loupe/internal/mcpserver"
	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/store"
	_ "github.com/loupe-dev/loupe/store/sqlite" // store.Open of SQLite files
	"github.com/loupe-dev/loupe/trace"
)

// projectsEnv is a collector with keys required and two projects, a and
// b, besides the default one, each a SQLite store of its own opened the
// way loupe serve opens them (store, rules, MCP).
type projectsEnv struct {
	*env
	dsn  string
	keys map[string]string // "adminA", "readA", "ingestA", "adminB", "ingestB", "readB", "all", "default"
}

func newProjectsEnv(t *testing.T, o Options) *projectsEnv {
	t.Helper()
	return newProjectsEnvAt(t, o, "")
}

// newProjectsEnvAt is newProjectsEnv on the store at dsn (a SQLite file
// of its own when ""), which deletes projects with store.DropProject
// unless o says otherwise.
func newProjectsEnvAt(t *testing.T, o Options, dsn string) *projectsEnv {
	t.Helper()
	ctx := context.Background()
	if dsn == "" {
		dsn = filepath.Join(t.TempDir(), "loupe.db")
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if o.DropProject == nil {
		o.DropProject = func(ctx context.Context, name string) error { return store.DropProject(ctx, dsn, name) }
	}
	t.Cleanup(func() { st.Close() })
	for _, p := range []string{"a", "b"} {
		if _, err := CreateProject(ctx, st, p, t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := CreateProject(ctx, st, "a", t0); err == nil {
		t.Fatal("a project was made twice")
	}
	pe := &projectsEnv{dsn: dsn, keys: map[string]string{}}
	for name, spec := range map[string]struct {
		sc Scope
		ps []string
	}{
		"adminA": {ScopeAdmin, []string{"a"}}, "readA": {ScopeRead, []string{"a"}}, "ingestA": {ScopeIngest, []string{"a"}},
		"adminB": {ScopeAdmin, []string{"b"}}, "readB": {ScopeRead, []string{"b"}}, "ingestB": {ScopeIngest, []string{"b"}},
		"all": {ScopeAdmin, []string{AllProjects}}, "default": {ScopeAdmin, nil}, "ab": {ScopeIngest, []string{"a", "b"}},
	} {
		tok, _, err := CreateKey(ctx, st, spec.sc, name, t0, spec.ps...)
		if err != nil {
			t.Fatal(err)
		}
		pe.keys[name] = tok
	}
	o.Store = st
	o.RequireKeys = true
	o.Projects = func(ctx context.Context, name string) (*Project, error) {
		pdsn, err := store.ProjectDSN(dsn, name)
		if err != nil {
			return nil, err
		}
		pst, err := store.Open(ctx, pdsn)
		if err != nil {
			return nil, err
		}
		eng, err := online.New(online.Options{Store: pst})
		if err != nil {
			pst.Close()
			return nil, err
		}
		ms, err := mcpserver.New(ctx, mcpserver.Options{Store: pst})
		if err != nil {
			pst.Close()
			return nil, err
		}
		return &Project{Store: pst, Online: eng, MCP: ms.Handler(), Close: func() error {
			ms.Close()
			eng.Close(context.Background())
			return pst.Close()
		}}, nil
	}
	ms, err := mcpserver.New(ctx, mcpserver.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	o.MCP = ms.Handler()
	pe.env = newEnv(t, o)
	return pe
}

// as sends a request with the key named k.
func (pe *projectsEnv) as(k, method, path, ctype string, body []byte, hdr ...string) (int, []byte) {
	pe.t.Helper()
	pe.key = pe.keys[k]
	code, b, _ := pe.do(method, path, ctype, body, hdr...)
	pe.key = ""
	return code, b
}

// withSession returns ndjson of recs with session and user set on the
// run.start record, as the wire format carries them.
func withSession(recs []trace.Record, session, user string) []byte {
	b := ndjson(recs)
	return bytes.Replace(b, []byte(`"type":"run.start"`), fmt.Appendf(nil, `"type":"run.start","session":%q,"user":%q`, session, user), 1)
}

// Everything of project b, ingested and made through b's keys, stays out
// of every answer to a's keys: every endpoint the server has (the route
// table, walked with b's ids and names), search, the live stream and the
// MCP tools. b's ids are answered 404, a's keys cannot name b, and what a's
// admin key deletes with b's ids is not b's.
func TestProjectIsolation(t *testing.T) {
	pe := newProjectsEnv(t, Options{})
	const bMarker = "bravo"
	bRun, aRun := run(0xb1, "bravo-run"), run(0xa1, "alpha-run")
	bID, aID := bRun[0].TraceID.String(), aRun[0].TraceID.String()

	// a's trace goes in with a's ingest key naming no project (its home);
	// b's with b's key, and another through OTLP's resource attribute with
	// a key allowed both.
	if code, b := pe.as("ingestA", "POST", "/v1/records", "application/x-ndjson", withSession(aRun, "sess-alpha", "user-alpha")); code != 200 {
		t.Fatalf("ingest a: %d %s", code, b)
	}
	if code, b := pe.as("ingestB", "POST", "/v1/records", "application/x-ndjson", withSession(bRun, "sess-bravo", "user-bravo")); code != 200 {
		t.Fatalf("ingest b: %d %s", code, b)
	}
	td, _ := otlpFile(t, "genai.json")
	td.ResourceSpans().At(0).Resource().Attributes().PutStr(ProjectAttribute, "b")
	var pm ptrace.ProtoMarshaler
	otlpB, err := pm.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	if code, b := pe.as("ab", "POST", "/v1/traces", "application/x-protobuf", otlpB); code != 200 {
		t.Fatalf("OTLP into b by resource attribute: %d %s", code, b)
	}
	if code, b := pe.as("ingestA", "POST", "/v1/traces", "application/x-protobuf", otlpB); code != 403 {
		t.Fatalf("OTLP naming b with a's key: %d %s, want 403", code, b)
	}
	otlpIDs := traceIDsOf(t, pe, "readB")
	if len(otlpIDs) != 2 {
		t.Fatalf("b holds %v, want its run and the OTLP trace", otlpIDs)
	}
	// b's score, dataset, rule, monitor and retention.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/scores", `{"scores":[{"trace_id":"` + bID + `","name":"bravo_quality","value":0.25,"comment":"bravo comment"}]}`},
		{"POST", "/api/v1/datasets/bravo_set/cases", `{"traces":["` + bID + `"]}`},
		{"POST", "/api/v1/rules", `{"name":"bravo-rule","filter":"tool:lookup","sample":1,"assertions":[{"type":"tool-trajectory","mode":"any_order","minimums":{"lookup":1}}]}`},
		{"POST", "/api/v1/monitors", `{"name":"bravo-monitor","metric":"cost","window":"5m","threshold":1}`},
		{"PUT", "/api/v1/retention", `{"period":"87600h"}`},
		{"PUT", "/api/v1/score-configs", `{"name":"bravo_quality","kind":"numeric","min":0,"max":1}`},
	} {
		if code, b := pe.as("adminB", c.method, c.path, "application/json", []byte(c.body)); code/100 != 2 {
			t.Fatalf("%s %s in b: %d %s", c.method, c.path, code, b)
		}
	}
	bSecrets := append([]string{bMarker, bID[:16], "sess-bravo", "user-bravo"}, otlpIDs...)

	// Every route, as a's admin key, with b's ids and names in the path.
	fill := strings.NewReplacer("{id}", bID, "{name}", "bravo_set")
	for _, rt := range pe.srv.routes() {
		method, path, _ := strings.Cut(rt.pattern, " ")
		if path == "/healthz" || strings.HasSuffix(path, "/stream") {
			continue // streams last: the live stream is read below
		}
		paths := []string{fill.Replace(path)}
		if strings.Contains(path, "{name}") {
			paths = append(paths, strings.ReplaceAll(path, "{name}", "bravo-rule"), strings.ReplaceAll(path, "{name}", "bravo-monitor"))
		}
		if strings.Contains(path, "{id}") && strings.HasPrefix(path, "/api/v1/sessions/") {
			paths = append(paths, strings.ReplaceAll(path, "{id}", "sess-bravo"))
		}
		for _, p := range paths {
			for _, q := range []string{"", "?q=bravo", "?session=sess-bravo", "?a=" + bID + "&b=" + bID} {
				if method != "GET" && q != "" {
					continue
				}
				var body []byte
				if method != "GET" {
					body = []byte(`{}`)
				}
				code, b := pe.as("adminA", method, p+q, "application/json", body)
				if code >= 500 {
					t.Errorf("%s %s: %d %s", method, p+q, code, b)
				}
				for _, s := range bSecrets {
					if strings.Contains(string(b), s) && !strings.Contains(p+q, s) { // not the request's own words echoed
						t.Errorf("%s %s as a's admin answered b's %q: %d %.300s", method, p+q, s, code, b)
					}
				}
			}
		}
	}
	// b's ids are not found; a's key cannot name b, however it tries; a
	// cookie naming b is not honoured for a's key.
	for _, path := range []string{"/api/v1/traces/" + bID, "/api/v1/traces/" + bID[:8], "/api/v1/sessions/sess-bravo", "/api/v1/datasets/bravo_set"} {
		if code, b := pe.as("readA", "GET", path, "", nil); code != 404 {
			t.Errorf("GET %s as a: %d %s, want 404", path, code, b)
		}
	}
	for _, h := range [][]string{{ProjectHeader, "b"}, {"X-Ignored", ""}} {
		path := "/api/v1/traces"
		if h[0] == "X-Ignored" {
			path += "?project=b"
		}
		if code, b := pe.as("readA", "GET", path, "", nil, h...); code != 403 || !strings.Contains(string(b), "may not use project") {
			t.Errorf("a's key naming b (%v %s): %d %s", h, path, code, b)
		}
	}
	if code, b := pe.as("readA", "GET", "/api/v1/traces", "", nil, "Cookie", ProjectCookie+"=b"); code != 200 || strings.Contains(string(b), bID) || !strings.Contains(string(b), aID) {
		t.Errorf("a's key with a cookie naming b: %d %s", code, b)
	}
	if code, b := pe.as("readA", "GET", "/api/v1/traces", "", nil, ProjectHeader, "nosuch"); code != 403 {
		t.Errorf("a's key naming a project that does not exist: %d %s, want the same 403 as for b", code, b)
	}
	if code, b := pe.as("all", "GET", "/api/v1/traces", "", nil, ProjectHeader, "nosuch"); code != 404 {
		t.Errorf("an all-projects key naming a project that does not exist: %d %s, want 404", code, b)
	}
	// The default project's key sees neither.
	if code, b := pe.as("default", "GET", "/api/v1/traces", "", nil); code != 200 || strings.Contains(string(b), bID) || strings.Contains(string(b), aID) {
		t.Errorf("default project's traces: %d %s", code, b)
	}
	// b is intact after a's admin tried to delete with b's ids.
	if got := traceIDsOf(t, pe, "readB"); len(got) != 2 {
		t.Errorf("b after a's deletes: %v", got)
	}
	if code, b := pe.as("readB", "GET", "/api/v1/scores?trace="+bID, "", nil); code != 200 || !strings.Contains(string(b), "bravo_quality") {
		t.Errorf("b's score after a's deletes: %d %s", code, b)
	}
	if code, b := pe.as("readB", "GET", "/api/v1/datasets/bravo_set", "", nil); code != 200 {
		t.Errorf("b's dataset after a's deletes: %d %s", code, b)
	}
	if code, b := pe.as("readB", "GET", "/api/v1/rules", "", nil); code != 200 || !strings.Contains(string(b), "bravo-rule") {
		t.Errorf("b's rule after a's deletes: %d %s", code, b)
	}

	// The live stream of a sees a's new trace and none of b's.
	pe.key = pe.keys["readA"]
	sse := pe.stream(t, "/api/v1/stream", "")
	pe.key = ""
	if code, b := pe.as("ingestB", "POST", "/v1/records", "application/x-ndjson", ndjson(run(0xb2, "bravo-live"))); code != 200 {
		t.Fatalf("ingest b: %d %s", code, b)
	}
	if code, b := pe.as("ingestA", "POST", "/v1/records", "application/x-ndjson", ndjson(run(0xa2, "alpha-live"))); code != 200 {
		t.Fatalf("ingest a: %d %s", code, b)
	}
	b2, a2 := run(0xb2, "")[0].TraceID.String(), run(0xa2, "")[0].TraceID.String()
	for {
		ev := sse.next()
		if strings.Contains(ev.data, b2) || strings.Contains(ev.data, bMarker) {
			t.Fatalf("a's stream carried b's trace: %s", ev.data)
		}
		if strings.Contains(ev.data, a2) {
			break
		}
	}

	// MCP, as a's read key: b's trace is not found, and lists and
	// searches hold nothing of b's.
	cs := mcpClient(t, pe.ts.URL+"/mcp", pe.keys["readA"])
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"list_traces", map[string]any{}},
		{"search_traces", map[string]any{"query": "bravo"}},
		{"get_execution_trace", map[string]any{"trace_id": bID}},
		{"list_sessions", map[string]any{}},
		{"list_scores", map[string]any{}},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("MCP %s: %v", c.tool, err)
		}
		b, _ := json.Marshal(res)
		args, _ := json.Marshal(c.args)
		for _, s := range bSecrets {
			if strings.Contains(string(b), s) && !strings.Contains(string(args), s) {
				t.Errorf("MCP %s as a answered b's %q: %.300s", c.tool, s, b)
			}
		}
		if c.tool == "get_execution_trace" && !res.IsError {
			t.Errorf("MCP get_execution_trace of b's trace as a: %s", b)
		}
		if c.tool == "list_traces" && !strings.Contains(string(b), aID) {
			t.Errorf("MCP list_traces as a misses a's trace: %.300s", b)
		}
	}
}

var hexID = regexp.MustCompile(`"trace_id":"([0-9a-f]{32})"`)

// traceIDsOf lists the trace ids the key named k sees.
func traceIDsOf(t *testing.T, pe *projectsEnv, k string) []string {
	t.Helper()
	code, b := pe.as(k, "GET", "/api/v1/traces", "", nil)
	if code != 200 {
		t.Fatalf("list as %s: %d %s", k, code, b)
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range hexID.FindAllStringSubmatch(string(b), -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

// mcpClient connects to the MCP endpoint at url with a Bearer key.
func mcpClient(t *testing.T, url, key string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Each project keeps its own retention period, set through the API with
// the project named, and a pass (with a controlled clock) removes only
// what each project's period says.
func TestProjectRetention(t *testing.T) {
	pe := newProjectsEnv(t, Options{})
	now := time.Now().UTC()
	for _, c := range []struct{ key, project string }{{"adminA", "a"}, {"adminB", "b"}} {
		recs := run(0x10, "old-"+c.project)
		for i := range recs {
			recs[i].Time = now.Add(recs[i].Time.Sub(t0) - time.Hour)
		}
		if code, b := pe.as(c.key, "POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
			t.Fatalf("ingest %s: %d %s", c.project, code, b)
		}
	}
	if code, b := pe.as("all", "PUT", "/api/v1/retention", "application/json", []byte(`{"period":"48h"}`), ProjectHeader, "a"); code != 200 {
		t.Fatalf("retention of a: %d %s", code, b)
	}
	if code, b := pe.as("all", "PUT", "/api/v1/retention", "application/json", []byte(`{"period":"240h"}`), ProjectHeader, "b"); code != 200 {
		t.Fatalf("retention of b: %d %s", code, b)
	}
	if code, b := pe.as("readB", "GET", "/api/v1/retention", "", nil); code != 200 || !strings.Contains(string(b), `"period":"240h0m0s"`) {
		t.Fatalf("b's retention: %d %s", code, b)
	}
	// Three days on: a's period (2 days) has passed, b's (10 days) has not.
	res, err := pe.srv.ApplyRetention(context.Background(), now.Add(72*time.Hour))
	if err != nil || len(res.Traces) != 1 {
		t.Fatalf("pass at +3d: %+v %v, want a's one trace", res, err)
	}
	if got := traceIDsOf(t, pe, "readA"); len(got) != 0 {
		t.Errorf("a after its retention: %v", got)
	}
	if got := traceIDsOf(t, pe, "readB"); len(got) != 1 {
		t.Errorf("b after a's retention: %v", got)
	}
	res, err = pe.srv.ApplyRetention(context.Background(), now.Add(11*24*time.Hour))
	if err != nil || len(res.Traces) != 1 {
		t.Fatalf("pass at +11d: %+v %v, want b's one trace", res, err)
	}
}

// Projects are listed to the keys that may use them and made only by an
// admin key for every project; OTLP/gRPC chooses its project by metadata.
func TestProjectsAPI(t *testing.T) {
	pe := newProjectsEnv(t, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	code, b := pe.as("readA", "GET", "/api/v1/projects", "", nil)
	var pj ProjectsJSON
	if code != 200 || json.Unmarshal(b, &pj) != nil || len(pj.Projects) != 1 || pj.Projects[0].Name != "a" || pj.Current != "a" {
		t.Fatalf("projects as a: %d %s", code, b)
	}
	code, b = pe.as("all", "GET", "/api/v1/projects?project=b", "", nil)
	if code != 200 || json.Unmarshal(b, &pj) != nil || len(pj.Projects) != 3 || pj.Current != "b" {
		t.Fatalf("projects as all: %d %s", code, b)
	}
	for _, c := range []struct {
		key, body string
		code      int
	}{
		{"adminA", `{"name":"c"}`, 403},
		{"all", `{"name":"Bad-Name"}`, 400},
		{"all", `{"name":"a"}`, 409},
		{"all", `{"name":"c","x":1}`, 400},
		{"all", `{"name":"c"}`, 201},
	} {
		if code, b := pe.as(c.key, "POST", "/api/v1/projects", "application/json", []byte(c.body)); code != c.code {
			t.Errorf("POST projects %s as %s: %d %s, want %d", c.body, c.key, code, b, c.code)
		}
	}
	if code, b := pe.as("all", "POST", "/v1/records", "application/x-ndjson", ndjson(run(0xc1, "charlie")), ProjectHeader, "c"); code != 200 {
		t.Fatalf("ingest into the new project: %d %s", code, b)
	}
	if code, b := pe.as("all", "GET", "/api/v1/traces?project=c", "", nil); code != 200 || !strings.Contains(string(b), "charlie") {
		t.Fatalf("the new project's traces: %d %s", code, b)
	}
}

// OTLP/gRPC names its project by the loupe-project metadata or the
// resource attribute, within what its key allows.
func TestGRPCProjects(t *testing.T) {
	pe := newProjectsEnv(t, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeGRPCListener(ctx, ln, pe.srv, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := ptraceotlp.NewGRPCClient(conn)
	export := func(key, project string, attr string) error {
		td, _ := otlpFile(t, "genai.json")
		if attr != "" {
			td.ResourceSpans().At(0).Resource().Attributes().PutStr(ProjectAttribute, attr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+pe.keys[key])
		if project != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "loupe-project", project)
		}
		_, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
		return err
	}
	for _, c := range []struct {
		key, project, attr string
		code               codes.Code
		lands              string // the key that then sees a trace
	}{
		{"ingestA", "", "", codes.OK, "readA"},
		{"ab", "b", "", codes.OK, "readB"},
		{"ab", "", "b", codes.OK, "readB"},
		{"ingestA", "b", "", codes.PermissionDenied, ""},
		{"ingestA", "", "b", codes.PermissionDenied, ""},
		{"all", "nosuch", "", codes.NotFound, ""},
	} {
		err := export(c.key, c.project, c.attr)
		if status.Code(err) != c.code {
			t.Errorf("export as %s into %q/%q: %v, want %s", c.key, c.project, c.attr, err, c.code)
		}
		if c.lands != "" {
			if ids := traceIDsOf(t, pe, c.lands); len(ids) != 1 {
				t.Errorf("after export as %s into %q/%q, %s sees %v", c.key, c.project, c.attr, c.lands, ids)
			}
		}
	}
	if ids := traceIDsOf(t, pe, "default"); len(ids) != 0 {
		t.Errorf("the default project got %v", ids)
	}
}
