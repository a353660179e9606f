package server

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type openAPIDocument struct {
	OpenAPI string `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage
}

type operation struct {
	Responses map[string]json.RawMessage `json:"responses"`
}

// TestOpenAPI checks the handlers against openapi.json: every route is
// documented with its method, every documented operation is a route, and
// requests of each kind answer only status codes their operation lists.
func TestOpenAPI(t *testing.T) {
	var doc openAPIDocument
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	srv, err := New(Options{Store: openStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	for _, rt := range srv.routes() {
		method, path, _ := strings.Cut(rt.pattern, " ")
		routes[strings.ToLower(method)+" "+path] = true
		if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("route %s is not in openapi.json", rt.pattern)
		}
	}
	ops := map[string]operation{}
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			if !routes[method+" "+path] {
				t.Errorf("openapi.json documents %s %s, which is not a route", method, path)
			}
			var op operation
			if err := json.Unmarshal(raw, &op); err != nil || len(op.Responses) == 0 {
				t.Errorf("%s %s: no responses (%v)", method, path, err)
			}
			ops[method+" "+path] = op
		}
	}

	e := newEnv(t, Options{})
	rec := ndjson(run(9, "doc"))
	id := "09010000000000000000000000000000"
	for _, tt := range []struct{ op, method, url, ctype, body string }{
		{"post /v1/records", "POST", "/v1/records", "application/x-ndjson", string(rec)},
		{"post /v1/records", "POST", "/v1/records", "application/json", "[1]"},
		{"post /v1/traces", "POST", "/v1/traces", "application/json", "{}"},
		{"post /v1/traces", "POST", "/v1/traces", "application/json", "{"},
		{"post /v1/traces", "POST", "/v1/traces", "text/plain", ""},
		{"get /api/v1/traces", "GET", "/api/v1/traces?limit=1", "", ""},
		{"get /api/v1/traces", "GET", "/api/v1/traces?limit=-1", "", ""},
		{"get /api/v1/traces/{id}", "GET", "/api/v1/traces/" + id, "", ""},
		{"get /api/v1/traces/{id}", "GET", "/api/v1/traces/ffff", "", ""},
		{"get /api/v1/traces/{id}", "GET", "/api/v1/traces/zz", "", ""},
		{"get /api/v1/search", "GET", "/api/v1/search?q=doc", "", ""},
		{"get /api/v1/search", "GET", "/api/v1/search?q=nope:1", "", ""},
		{"get /api/v1/aggregates", "GET", "/api/v1/aggregates", "", ""},
		{"get /api/v1/evaluations", "GET", "/api/v1/evaluations?limit=5", "", ""},
		{"get /api/v1/evaluations/{id}", "GET", "/api/v1/evaluations/" + id, "", ""},
		{"get /api/v1/evaluations/{id}", "GET", "/api/v1/evaluations/abcd", "", ""},
		{"get /api/v1/openapi.json", "GET", "/api/v1/openapi.json", "", ""},
		{"post /api/v1/monitors", "POST", "/api/v1/monitors", "application/json", `{"name":"m","metric":"cost","window":"5m","threshold":1}`},
		{"post /api/v1/monitors", "POST", "/api/v1/monitors", "application/json", `{"name":"m","metric":"cost","window":"5m","threshold":1}`},
		{"post /api/v1/monitors", "POST", "/api/v1/monitors", "application/json", `{"name":"m"}`},
		{"get /api/v1/monitors", "GET", "/api/v1/monitors", "", ""},
		{"put /api/v1/monitors/{name}", "PUT", "/api/v1/monitors/m", "application/json", `{"metric":"cost","window":"1h","threshold":2}`},
		{"put /api/v1/monitors/{name}", "PUT", "/api/v1/monitors/m", "application/json", `{`},
		{"get /api/v1/alerts", "GET", "/api/v1/alerts?open=true", "", ""},
		{"get /api/v1/alerts", "GET", "/api/v1/alerts?open=maybe", "", ""},
		{"delete /api/v1/monitors/{name}", "DELETE", "/api/v1/monitors/m", "", ""},
		{"delete /api/v1/monitors/{name}", "DELETE", "/api/v1/monitors/m", "", ""},
		{"get /healthz", "GET", "/healthz", "", ""},
		{"get /api/v1/session", "GET", "/api/v1/session", "", ""},
		{"post /api/v1/session", "POST", "/api/v1/session", "application/json", `{"key":"lk_0000000000000000_x"}`},
		{"delete /api/v1/session", "DELETE", "/api/v1/session", "", ""},
		{"post /api/v1/scores", "POST", "/api/v1/scores", "application/json", `{"scores":[{"trace_id":"` + id + `","name":"q","value":1}]}`},
		{"post /api/v1/scores", "POST", "/api/v1/scores", "application/json", `{"scores":[{"trace_id":"` + id + `","name":"q","value":"x"}]}`},
		{"post /api/v1/scores", "POST", "/api/v1/scores", "text/plain", ""},
		{"get /api/v1/scores", "GET", "/api/v1/scores?trace=" + id, "", ""},
		{"get /api/v1/scores", "GET", "/api/v1/scores?limit=0", "", ""},
		{"get /api/v1/scores/stats", "GET", "/api/v1/scores/stats?since=7d", "", ""},
		{"get /api/v1/scores/stats", "GET", "/api/v1/scores/stats?bucket=x", "", ""},
		{"get /api/v1/score-configs", "GET", "/api/v1/score-configs", "", ""},
		{"put /api/v1/score-configs", "PUT", "/api/v1/score-configs", "application/json", `{"name":"q","kind":"numeric"}`},
		{"put /api/v1/score-configs", "PUT", "/api/v1/score-configs", "application/json", `{"name":"q"}`},
		{"delete /api/v1/scores/{id}", "DELETE", "/api/v1/scores/" + id, "", ""},
		{"delete /api/v1/scores/{id}", "DELETE", "/api/v1/scores/x", "", ""},
		{"delete /api/v1/traces/{id}", "DELETE", "/api/v1/traces/" + id, "", ""},
		{"delete /api/v1/traces/{id}", "DELETE", "/api/v1/traces/" + id, "", ""},
		{"get /api/v1/traces/diff", "GET", "/api/v1/traces/diff?a=" + id, "", ""},
		{"get /api/v1/traces/diff", "GET", "/api/v1/traces/diff?a=" + id + "&b=" + id, "", ""},
		{"get /api/v1/branch", "GET", "/api/v1/branch", "", ""},
		{"post /api/v1/traces/{id}/branch", "POST", "/api/v1/traces/" + id + "/branch", "application/json", `{"step": 1, "model": "openai:x"}`},
		{"post /api/v1/traces/{id}/branch", "POST", "/api/v1/traces/" + id + "/branch", "text/plain", ""},

		// Without online evaluation (package online's tests cover it on).
		{"get /api/v1/rules", "GET", "/api/v1/rules", "", ""},
		{"post /api/v1/rules", "POST", "/api/v1/rules", "application/json", `{"name":"r","assertions":["x"]}`},
		{"post /api/v1/rules/{name}/pause", "POST", "/api/v1/rules/r/pause", "", ""},
		{"post /api/v1/rules/{name}/resume", "POST", "/api/v1/rules/r/resume", "", ""},
		{"delete /api/v1/rules/{name}", "DELETE", "/api/v1/rules/r", "", ""},
	} {
		code, body, resp := e.do(tt.method, tt.url, tt.ctype, []byte(tt.body))
		op, ok := ops[tt.op]
		if !ok {
			t.Fatalf("no operation %s", tt.op)
		}
		if _, ok := op.Responses[strconv.Itoa(code)]; !ok {
			t.Errorf("%s %s: status %d is not documented (%s)", tt.method, tt.url, code, body)
		}
		if code == 200 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && len(body) > 0 && !json.Valid(body) {
			t.Errorf("%s %s: invalid JSON", tt.method, tt.url)
		}
	}
	// Streams answer 200 with an event stream.
	for _, p := range []string{"/api/v1/stream", "/api/v1/traces/" + id + "/stream"} {
		s := e.stream(t, p, "")
		s.resp.Body.Close()
	}
	if !slices.Contains([]string{"3.0.3"}, doc.OpenAPI) {
		t.Errorf("openapi %s", doc.OpenAPI)
	}
}
