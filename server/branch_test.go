package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/replay"
	"github.com/loupe-dev/loupe/trace"
)

// The live model of the branches: at step 2 it answers at once, where the
// demo asked the clock for Mars's time.
const branchScript = `model: other-model
provider: scripted
price: {input_per_mtok: 1, output_per_mtok: 2}
turns:
  - answer: Branched without the clock.
    usage: {input_tokens: 700, output_tokens: 10}
`

// A live model that spends $5 on its first call.
const costlyScript = `model: costly-model
provider: scripted
turns:
  - tool_calls:
      - name: clock
        input: {zone: "UTC"}
    usage: {input_tokens: 700, output_tokens: 10}
    cost_usd: 5
  - answer: too late
`

// writeScript writes a scripted model's file and returns its llm spec.
func writeScript(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return "scripted:" + p
}

// postDemo records the demo agent's run and ingests it; it returns the
// trace id.
func (e *env) postDemo(t *testing.T) trace.TraceID {
	t.Helper()
	res, err := demo.Run(context.Background(), trace.New(trace.Options{}), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(res.Records)); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	return res.TraceID
}

// branch posts a branch request and decodes a 202 answer.
func (e *env) branch(t *testing.T, id trace.TraceID, body string) (int, BranchStarted, string) {
	t.Helper()
	code, b, _ := e.do("POST", "/api/v1/traces/"+id.String()+"/branch", "application/json", []byte(body))
	var bs BranchStarted
	if code == 202 {
		if err := json.Unmarshal(b, &bs); err != nil {
			t.Fatalf("202 answer %s: %v", b, err)
		}
	}
	documented(t, "post /api/v1/traces/{id}/branch", code)
	return code, bs, string(b)
}

func TestBranch(t *testing.T) {
	live := writeScript(t, "live.yaml", branchScript)
	e := newEnv(t, Options{BranchModels: []string{live, "openai:gpt-4o-mini"}, BranchMaxCostUSD: 1})
	orig := e.postDemo(t)

	// The allowed models, for the UI's picker.
	code, b, _ := e.do("GET", "/api/v1/branch", "", nil)
	var cfg BranchConfig
	if code != 200 || json.Unmarshal(b, &cfg) != nil || !slices.Equal(cfg.Models, []string{live, "openai:gpt-4o-mini"}) || cfg.MaxCostUSD != 1 || cfg.MaxSteps != BranchMaxSteps {
		t.Fatalf("GET /api/v1/branch: %d %s", code, b)
	}

	// Follow the original's stream: the branch's records arrive on the
	// global one as they are stored.
	all := e.stream(t, "/api/v1/stream", "")
	defer all.resp.Body.Close()

	code, bs, body := e.branch(t, orig, `{"step": 2, "model": "`+live+`", "system": "You are terse."}`)
	if code != 202 {
		t.Fatalf("branch: %d %s", code, body)
	}
	if bs.Original != orig || bs.TraceID.IsZero() || bs.TraceID == orig || bs.FromStep != 2 || bs.Model != live ||
		bs.Stream != "/api/v1/traces/"+bs.TraceID.String()+"/stream" || !strings.Contains(bs.Compare, "b="+bs.TraceID.String()) {
		t.Fatalf("answer %+v", bs)
	}
	// The trace exists as soon as the answer is given.
	if n := stored(t, e.st, bs.TraceID); n == 0 {
		t.Fatal("the branch's trace is not stored when the answer comes")
	}
	for {
		ev := all.next()
		if strings.Contains(ev.data, bs.TraceID.String()) {
			break
		}
	}
	e.srv.branches.wg.Wait()

	tr, err := e.st.Trace(context.Background(), bs.TraceID)
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Summary
	if s.Status != "success" || !slices.Contains(s.Tags, replay.TagOf+orig.String()) || !slices.Contains(s.Tags, replay.TagFromStep+"2") {
		t.Fatalf("branch summary: status %q, tags %v", s.Status, s.Tags)
	}
	var answer string
	for _, r := range tr.Records {
		if r.Type == trace.TypeRunEnd && r.ParentID.IsZero() {
			answer = string(r.Output)
		}
	}
	if !strings.Contains(answer, "Branched without the clock.") {
		t.Errorf("branch answer %s", answer)
	}

	// The comparison, as loupe traces diff computes it.
	code, b, _ = e.do("GET", "/api/v1/traces/diff?a="+orig.String()[:8]+"&b="+bs.TraceID.String(), "", nil)
	documented(t, "get /api/v1/traces/diff", code)
	var c replay.Comparison
	if code != 200 || json.Unmarshal(b, &c) != nil {
		t.Fatalf("diff: %d %s", code, b)
	}
	if c.A.TraceID != orig || c.B.TraceID != bs.TraceID || c.Divergence == nil || c.Divergence.Step != 2 {
		t.Fatalf("diff: a %s b %s divergence %+v", c.A.TraceID, c.B.TraceID, c.Divergence)
	}
	marked := 0
	for _, sp := range c.Steps {
		for _, row := range sp.Rows {
			if row.Diverged {
				marked++
				if sp.Step != 2 || row.B == nil || row.B.Name != "other-model" {
					t.Errorf("diverged row at step %d: %+v", sp.Step, row.B)
				}
			}
		}
	}
	if marked != 1 {
		t.Errorf("%d rows marked diverged, want 1", marked)
	}
	want, err := replay.CompareStored(context.Background(), e.st, orig.String(), bs.TraceID.String())
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(&c)
	if string(wb) != string(gb) {
		t.Errorf("the API's comparison is not the library's:\n%s\n%s", gb, wb)
	}
}

func TestBranchRefused(t *testing.T) {
	live := writeScript(t, "live.yaml", branchScript)
	e := newEnv(t, Options{BranchModels: []string{live}})
	orig := e.postDemo(t)
	unfinished := run(7, "unfinished")[:3]
	if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(unfinished)); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	for _, tt := range []struct {
		name, id, ctype, body string
		code                  int
		want                  string
	}{
		{"model not allowed", orig.String(), "application/json", `{"step": 2, "model": "openai:gpt-5"}`, 403, "allowed: " + live},
		{"no model", orig.String(), "application/json", `{"step": 2}`, 400, "model: missing"},
		{"step 0", orig.String(), "application/json", `{"step": 0, "model": "` + live + `"}`, 400, "from 1"},
		{"step past the end", orig.String(), "application/json", `{"step": 9, "model": "` + live + `"}`, 400, "has 5 steps"},
		{"unknown field", orig.String(), "application/json", `{"step": 2, "model": "` + live + `", "temperature": 2}`, 400, "temperature"},
		{"not JSON", orig.String(), "text/plain", `step=2`, 415, "application/json"},
		{"no such trace", "abcdef0123", "application/json", `{"step": 2, "model": "` + live + `"}`, 404, "not found"},
		{"a run that never ended", trace.TraceID{7, 1}.String(), "application/json", `{"step": 1, "model": "` + live + `"}`, 422, "cannot be replayed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := e.do("POST", "/api/v1/traces/"+tt.id+"/branch", tt.ctype, []byte(tt.body))
			documented(t, "post /api/v1/traces/{id}/branch", code)
			if code != tt.code || !strings.Contains(string(body), tt.want) {
				t.Errorf("%d %s, want %d with %q", code, body, tt.code, tt.want)
			}
		})
	}
	// Without --branch-models nothing may be branched, and the 403 says
	// how to allow it.
	off := newEnv(t, Options{Store: e.st})
	code, body, _ := off.do("POST", "/api/v1/traces/"+orig.String()+"/branch", "application/json", []byte(`{"step": 2, "model": "`+live+`"}`))
	if code != 403 || !strings.Contains(string(body), "--branch-models") {
		t.Errorf("branching off: %d %s", code, body)
	}
	for _, q := range []string{"?a=" + orig.String(), "?a=" + orig.String() + "&b=zz", "?a=" + orig.String() + "&b=abcdef01"} {
		code, body, _ := e.do("GET", "/api/v1/traces/diff"+q, "", nil)
		documented(t, "get /api/v1/traces/diff", code)
		if code != 400 && code != 404 {
			t.Errorf("diff%s: %d %s", q, code, body)
		}
	}
}

// TestBranchCostLimit: the live steps may spend BranchMaxCostUSD, through
// the agent's cost limit; the replayed steps' recorded cost does not count.
func TestBranchCostLimit(t *testing.T) {
	costly := writeScript(t, "costly.yaml", costlyScript)
	e := newEnv(t, Options{BranchModels: []string{costly}, BranchMaxCostUSD: 1, BranchTimeout: time.Minute})
	orig := e.postDemo(t)
	code, bs, body := e.branch(t, orig, `{"step": 3, "model": "`+costly+`"}`)
	if code != 202 {
		t.Fatalf("branch: %d %s", code, body)
	}
	e.srv.branches.wg.Wait()
	tr, err := e.st.Trace(context.Background(), bs.TraceID)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Summary.Status != string(trace.TerminationLimitExceeded) {
		t.Fatalf("status %q, want limit_exceeded", tr.Summary.Status)
	}
	var rule string
	for _, r := range tr.Records {
		if r.Type == trace.TypeGuardrail {
			rule = r.Name
		}
	}
	if rule != "max_cost_usd" {
		t.Errorf("guardrail %q, want max_cost_usd", rule)
	}
}

// TestBranchScopes: only admin keys may branch; read keys may compare.
func TestBranchScopes(t *testing.T) {
	live := writeScript(t, "live.yaml", branchScript)
	st := openStore(t)
	keys := map[Scope]string{}
	for _, sc := range []Scope{ScopeIngest, ScopeRead, ScopeAdmin} {
		tok, _, err := CreateKey(context.Background(), st, sc, string(sc), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keys[sc] = tok
	}
	e := newEnv(t, Options{Store: st, RequireKeys: true, BranchModels: []string{live}})
	e.key = keys[ScopeIngest]
	orig := e.postDemo(t)
	body := `{"step": 2, "model": "` + live + `"}`
	for _, sc := range []Scope{ScopeIngest, ScopeRead} {
		e.key = keys[sc]
		if code, _, b := e.branch(t, orig, body); code != 403 || !strings.Contains(b, "scope "+string(sc)) {
			t.Errorf("%s key: %d %s, want 403", sc, code, b)
		}
	}
	e.key = ""
	if code, _, b := e.branch(t, orig, body); code != 401 {
		t.Errorf("no key: %d %s, want 401", code, b)
	}
	e.key = keys[ScopeAdmin]
	code, bs, b := e.branch(t, orig, body)
	if code != 202 {
		t.Fatalf("admin key: %d %s", code, b)
	}
	e.srv.branches.wg.Wait()
	diff := "/api/v1/traces/diff?a=" + orig.String() + "&b=" + bs.TraceID.String()
	for sc, want := range map[Scope]int{ScopeRead: 200, ScopeAdmin: 200, ScopeIngest: 403} {
		e.key = keys[sc]
		if code, b, _ := e.do("GET", diff, "", nil); code != want {
			t.Errorf("diff with the %s key: %d %s, want %d", sc, code, b, want)
		}
		if code, b, _ := e.do("GET", "/api/v1/branch", "", nil); code != want {
			t.Errorf("branch config with the %s key: %d %s, want %d", sc, code, b, want)
		}
	}
}

// hangingModel is an OpenAI-compatible endpoint that never answers until
// its client gives up; the branches' live model is pointed at it.
func hangingModel(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(done) }) // first: the client may keep a request open
	t.Setenv("OPENAI_BASE_URL", hang.URL)
	t.Setenv("OPENAI_API_KEY", "sk-test")
}

// TestBranchTimeoutAndClose: a branch whose model does not answer ends at
// the timeout, recorded as such; one still running when the server closes
// is canceled and its end stored.
func TestBranchTimeoutAndClose(t *testing.T) {
	hangingModel(t)
	const spec = "openai:gpt-4o-mini"
	for _, tt := range []struct {
		name    string
		timeout time.Duration
		close   bool
		want    trace.TerminationReason
	}{
		{"timeout", 500 * time.Millisecond, false, trace.TerminationTimeout},
		{"server closed", time.Minute, true, trace.TerminationContextCanceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{BranchModels: []string{spec}, BranchTimeout: tt.timeout})
			orig := e.postDemo(t)
			code, bs, body := e.branch(t, orig, `{"step": 2, "model": "`+spec+`"}`)
			if code != 202 {
				t.Fatalf("branch: %d %s", code, body)
			}
			if tt.close {
				e.srv.Close()
			}
			e.srv.branches.wg.Wait()
			tr, err := e.st.Trace(context.Background(), bs.TraceID)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Summary.Status != string(tt.want) {
				t.Errorf("status %q, want %q", tr.Summary.Status, tt.want)
			}
		})
	}
}
