package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
)

type scoresAnswer struct {
	Scores  []store.Score `json:"scores"`
	Skipped int           `json:"skipped"`
	Next    string        `json:"next"`
}

func decodeAnswer(t *testing.T, b []byte) scoresAnswer {
	t.Helper()
	var a scoresAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return a
}

// TestScoresAPI adds, lists, filters, summarizes and deletes scores
// through the API of a real server on a real store.
func TestScoresAPI(t *testing.T) {
	e := newEnv(t, Options{})
	id := e.seed(1, "scored")
	other := e.seed(2, "other")
	span := "0102000000000000"
	body := fmt.Sprintf(`{"scores": [
		{"trace_id": %q, "name": "helpfulness", "value": 0.9, "comment": "clear"},
		{"trace_id": %q, "span_id": %q, "name": "thumbs", "value": false, "source": "human"},
		{"trace_id": %q, "name": "label", "category": "good"},
		{"session": "chat-1", "name": "label", "category": "bad", "author": "ci"},
		{"trace_id": %q, "name": "helpfulness", "value": 0.2, "id": "00000000000000000000000000000001"}
	]}`, id, id, span, id, other)
	code, b, _ := e.do("POST", "/api/v1/scores", "application/json", []byte(body))
	if code != 200 {
		t.Fatalf("POST: %d %s", code, b)
	}
	a := decodeAnswer(t, b)
	if len(a.Scores) != 5 || a.Skipped != 0 {
		t.Fatalf("POST stored %d, skipped %d", len(a.Scores), a.Skipped)
	}
	if s := a.Scores[1]; s.Kind != store.ScoreBoolean || s.Value != 0 || s.Source != store.SourceHuman || s.SpanID.String() != span {
		t.Errorf("thumbs stored as %+v", s)
	}
	if s := a.Scores[0]; s.Kind != store.ScoreNumeric || s.Source != store.SourceAPI || s.Comment != "clear" {
		t.Errorf("helpfulness stored as %+v", s)
	}
	if s := a.Scores[2]; s.Kind != store.ScoreCategorical || s.Author != "" {
		t.Errorf("label stored as %+v", s)
	}
	// The same id again is skipped: first write wins.
	code, b, _ = e.do("POST", "/api/v1/scores", "application/json", fmt.Appendf(nil, `{"scores":[{"trace_id":%q,"name":"helpfulness","value":0.5,"id":"00000000000000000000000000000001"}]}`, other))
	if a := decodeAnswer(t, b); code != 200 || len(a.Scores) != 0 || a.Skipped != 1 {
		t.Errorf("second write of an id: %d %s", code, b)
	}

	code, b, _ = e.do("GET", "/api/v1/scores?trace="+id.String(), "", nil)
	if a := decodeAnswer(t, b); code != 200 || len(a.Scores) != 3 {
		t.Fatalf("GET by trace: %d %s", code, b)
	}
	code, b, _ = e.do("GET", "/api/v1/scores?trace="+id.String()+"&span="+span, "", nil)
	if a := decodeAnswer(t, b); code != 200 || len(a.Scores) != 1 || a.Scores[0].Name != "thumbs" {
		t.Errorf("GET by span: %d %s", code, b)
	}
	code, b, _ = e.do("GET", "/api/v1/scores?session=chat-1&limit=1", "", nil)
	if a := decodeAnswer(t, b); code != 200 || len(a.Scores) != 1 || a.Scores[0].Author != "ci" {
		t.Errorf("GET by session: %d %s", code, b)
	}
	// Traces filtered by score, in the list and in search.
	code, b, _ = e.do("GET", "/api/v1/traces?score=helpfulness>=0.8", "", nil)
	var page store.ListPage
	if json.Unmarshal(b, &page); code != 200 || len(page.Traces) != 1 || page.Traces[0].ID != id {
		t.Errorf("traces with helpfulness>=0.8: %d %s", code, b)
	}
	code, b, _ = e.do("GET", "/api/v1/search?q=score:helpfulness<0.5", "", nil)
	if code != 200 || !strings.Contains(string(b), other.String()) || strings.Contains(string(b), id.String()) {
		t.Errorf("search score:helpfulness<0.5: %d %s", code, b)
	}
	for _, bad := range []string{"/api/v1/traces?score=helpfulness", "/api/v1/search?q=score:x<good", "/api/v1/scores?limit=0", "/api/v1/scores?trace=abc", "/api/v1/scores?cursor=zz", "/api/v1/scores/stats?bucket=1s&since=30d"} {
		if code, b, _ := e.do("GET", bad, "", nil); code != 400 {
			t.Errorf("GET %s: %d %s, want 400", bad, code, b)
		}
	}

	code, b, _ = e.do("GET", "/api/v1/scores/stats?since=3650d", "", nil)
	var stats struct {
		Scores []store.ScoreStats `json:"scores"`
	}
	if json.Unmarshal(b, &stats); code != 200 || len(stats.Scores) != 3 {
		t.Fatalf("stats: %d %s", code, b)
	}
	if h := stats.Scores[0]; h.Name != "helpfulness" || h.Count != 2 || len(h.Trend) == 0 {
		t.Errorf("stats of helpfulness: %+v", h)
	}

	code, b, _ = e.do("DELETE", "/api/v1/scores/00000000000000000000000000000001", "", nil)
	if code != 200 || !strings.Contains(string(b), `"deleted":1`) {
		t.Errorf("DELETE: %d %s", code, b)
	}
	if code, b, _ := e.do("DELETE", "/api/v1/scores/00000000000000000000000000000001", "", nil); code != 404 {
		t.Errorf("DELETE again: %d %s", code, b)
	}
	if code, b, _ := e.do("DELETE", "/api/v1/scores/nope", "", nil); code != 400 {
		t.Errorf("DELETE a bad id: %d %s", code, b)
	}
}

// TestScoresAPIRefuses checks the answers to bad bodies: each names the
// score and the field at fault, and nothing is stored.
func TestScoresAPIRefuses(t *testing.T) {
	e := newEnv(t, Options{})
	id := e.seed(1, "scored").String()
	if code, b, _ := e.do("PUT", "/api/v1/score-configs", "application/json", []byte(`{"name":"helpfulness","kind":"numeric","min":0,"max":1}`)); code != 200 {
		t.Fatalf("PUT config: %d %s", code, b)
	}
	for _, tt := range []struct {
		name, body string
		code       int
		index      int
		field      string
	}{
		{"unknown field", `{"scores":[{"trace_id":"` + id + `","name":"x","value":1,"colour":"red"}]}`, 400, 0, "colour"},
		{"value of the wrong type", `{"scores":[{"trace_id":"` + id + `","name":"x","value":1},{"trace_id":"` + id + `","name":"y","value":"good"}]}`, 400, 1, "value"},
		{"name of the wrong type", `{"scores":[{"trace_id":"` + id + `","name":7,"value":1}]}`, 400, 0, "name"},
		{"bad trace id", `{"scores":[{"trace_id":"xyz","name":"x","value":1}]}`, 400, 0, "trace_id"},
		{"unknown trace", `{"scores":[{"trace_id":"ffff0000000000000000000000000000","name":"x","value":1}]}`, 400, 0, "trace_id"},
		{"no target", `{"scores":[{"name":"x","value":1}]}`, 400, 0, "trace_id"},
		{"bad name", `{"scores":[{"trace_id":"` + id + `","name":"a b","value":1}]}`, 400, 0, "name"},
		{"outside the configured range", `{"scores":[{"trace_id":"` + id + `","name":"helpfulness","value":3}]}`, 400, 0, "value"},
		{"a boolean for a numeric name", `{"scores":[{"trace_id":"` + id + `","name":"helpfulness","value":true}]}`, 400, 0, "kind"},
		{"bad source", `{"scores":[{"trace_id":"` + id + `","name":"x","value":1,"source":"robot"}]}`, 400, 0, "source"},
		{"no scores", `{"scores":[]}`, 400, -1, "scores"},
		{"not an object", `[1]`, 400, -1, "body"},
		{"trailing data", `{"scores":[{"trace_id":"` + id + `","name":"x","value":1}]} {}`, 400, -1, "body"},
		{"unknown top-level field", `{"score":[]}`, 400, -1, "score"},
		{"too large", `{"scores":[{"trace_id":"` + id + `","name":"x","value":1,"comment":"` + strings.Repeat("a", maxScoreBody) + `"}]}`, 413, -1, ""},
	} {
		code, b, _ := e.do("POST", "/api/v1/scores", "application/json", []byte(tt.body))
		var eb errorBody
		json.Unmarshal(b, &eb)
		idx := -1
		if eb.Index != nil {
			idx = *eb.Index
		}
		if code != tt.code || tt.field != "" && (eb.Field != tt.field || idx != tt.index) {
			t.Errorf("%s: %d %s; want %d, index %d, field %q", tt.name, code, b, tt.code, tt.index, tt.field)
		}
	}
	if code, b, _ := e.do("POST", "/api/v1/scores", "text/plain", []byte(`{}`)); code != 415 {
		t.Errorf("text/plain: %d %s", code, b)
	}
	if n := len(mustScores(t, e.st)); n != 0 {
		t.Errorf("%d scores stored by refused requests", n)
	}
	for _, tt := range []struct{ body, field string }{
		{`{"name":"x","kind":"numeric","min":2,"max":1}`, "max"},
		{`{"name":"x","kind":"boolean","categories":["a"]}`, "categories"},
		{`{"name":"x","kind":"numeric","unit":"s"}`, "unit"},
		{`{"name":"helpfulness","kind":"numeric","min":"0"}`, "min"},
	} {
		code, b, _ := e.do("PUT", "/api/v1/score-configs", "application/json", []byte(tt.body))
		var eb errorBody
		if json.Unmarshal(b, &eb); code != 400 || eb.Field != tt.field {
			t.Errorf("PUT %s: %d %s, want 400 on %s", tt.body, code, b, tt.field)
		}
	}
	code, b, _ := e.do("GET", "/api/v1/score-configs", "", nil)
	if code != 200 || !strings.Contains(string(b), `"configs":[{"name":"helpfulness","kind":"numeric","min":0,"max":1}]`) {
		t.Errorf("GET configs: %d %s", code, b)
	}
}

func mustScores(t *testing.T, st store.Store) []store.Score {
	t.Helper()
	p, err := st.(store.Scorer).Scores(context.Background(), store.ScoreFilter{Limit: store.MaxScoreLimit})
	if err != nil {
		t.Fatal(err)
	}
	return p.Scores
}

// TestScoresAPIScopes checks every score endpoint against every key
// scope: ingest keys add, read keys read, admin keys do everything, and
// the author of a score is the key's name.
func TestScoresAPIScopes(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	keys := map[Scope]string{}
	for _, sc := range []Scope{ScopeIngest, ScopeRead, ScopeAdmin} {
		k, _, err := CreateKey(ctx, st, sc, string(sc)+"-bot", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keys[sc] = k
	}
	e := newEnv(t, Options{Store: st, RequireKeys: true})
	e.key = keys[ScopeIngest]
	id := e.seed(1, "scored")
	add := func() []byte {
		return fmt.Appendf(nil, `{"scores":[{"trace_id":%q,"name":"q","value":1,"id":%q}]}`, id, store.NewScoreID())
	}
	config := []byte(`{"name":"q","kind":"numeric"}`)
	for _, tt := range []struct {
		method, path string
		body         func() []byte
		allowed      []Scope
	}{
		{"POST", "/api/v1/scores", add, []Scope{ScopeIngest, ScopeAdmin}},
		{"GET", "/api/v1/scores", nil, []Scope{ScopeRead, ScopeAdmin}},
		{"GET", "/api/v1/scores/stats", nil, []Scope{ScopeRead, ScopeAdmin}},
		{"GET", "/api/v1/score-configs", nil, []Scope{ScopeRead, ScopeAdmin}},
		{"PUT", "/api/v1/score-configs", func() []byte { return config }, []Scope{ScopeAdmin}},
		{"DELETE", "/api/v1/scores/" + "0123456789abcdef0123456789abcdef", nil, []Scope{ScopeAdmin}},
	} {
		for _, sc := range []Scope{ScopeIngest, ScopeRead, ScopeAdmin, ""} {
			e.key = keys[sc]
			var body []byte
			ctype := ""
			if tt.body != nil {
				body, ctype = tt.body(), "application/json"
			}
			code, b, _ := e.do(tt.method, tt.path, ctype, body)
			want := 403
			switch {
			case sc == "":
				want = 401
			case tt.method == "DELETE" && sc == ScopeAdmin:
				want = 404 // allowed; no such score
			case slicesContains(tt.allowed, sc):
				want = 200
			}
			if code != want {
				t.Errorf("%s %s with a %q key: %d %s, want %d", tt.method, tt.path, sc, code, b, want)
			}
		}
	}
	got := mustScores(t, st)
	if len(got) != 2 {
		t.Fatalf("%d scores stored, want 2 (the ingest and admin keys')", len(got))
	}
	authors := map[string]bool{}
	for _, s := range got {
		authors[s.Author] = true
	}
	if !authors["ingest-bot"] || !authors["admin-bot"] {
		t.Errorf("authors %v, want the keys' names", authors)
	}
}

func slicesContains(s []Scope, v Scope) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
