package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/dataset"
	"github.com/loupe-dev/loupe/store"
)

// TestDatasetsAPI walks the dataset and experiment endpoints on a real
// server and store: a case pre-filled from a stored run, edited and added,
// versions, the export, a conflict, the comparison of two experiments,
// the diff of two traces, and the scopes of API keys.
func TestDatasetsAPI(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	e := newEnv(t, Options{Store: st})
	if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", append(ndjson(run(1, "triage")), ndjson(run(2, "triage"))...)); code != 200 {
		t.Fatalf("ingest: %d %s", code, b)
	}
	id1, id2 := "01010000000000000000000000000000", "02010000000000000000000000000000"

	code, b, _ := e.do("GET", "/api/v1/traces/0101/case", "", nil)
	var c dataset.Case
	if code != 200 || json.Unmarshal(b, &c) != nil || c.Trace != id1 || c.Trajectory == nil || len(c.Trajectory.Expected) != 1 || c.Trajectory.Expected[0].Tool != "lookup" {
		t.Fatalf("pre-filled case: %d %s", code, b)
	}
	// The client edits the expected trajectory before adding the case.
	c.Trajectory.Expected[0].Args = map[string]any{"q": "time zone"}
	c.Criteria = "looks the time zone up"
	body, _ := json.Marshal(AddCasesJSON{Cases: []dataset.Case{c}})
	code, b, _ = e.do("POST", "/api/v1/datasets/triage/cases", "application/json", body)
	if code != 200 || !strings.Contains(string(b), `"version":1`) {
		t.Fatalf("add: %d %s", code, b)
	}
	code, b, _ = e.do("POST", "/api/v1/datasets/triage/cases", "application/json", []byte(`{"traces":["0201"]}`))
	if code != 200 || !strings.Contains(string(b), `"version":2`) {
		t.Fatalf("add from a trace: %d %s", code, b)
	}
	base := 1
	body, _ = json.Marshal(AddCasesJSON{Base: &base, Cases: []dataset.Case{{ID: "late", Input: "x"}}})
	if code, b, _ = e.do("POST", "/api/v1/datasets/triage/cases", "application/json", body); code != http.StatusConflict {
		t.Fatalf("an edit of version 1 after version 2: %d %s", code, b)
	}
	for _, bad := range []string{`{}`, `{"cases":[{"id":"bad id","input":""}]}`, `{"nope":1}`, `[`} {
		if code, b, _ = e.do("POST", "/api/v1/datasets/triage/cases", "application/json", []byte(bad)); code != 400 {
			t.Errorf("body %s: %d %s, want 400", bad, code, b)
		}
	}
	if code, b, _ = e.do("POST", "/api/v1/datasets/triage/cases", "application/json", []byte(`{"traces":["ffff"]}`)); code != 404 {
		t.Errorf("unknown trace: %d %s", code, b)
	}
	code, b, _ = e.do("GET", "/api/v1/datasets/triage?version=1", "", nil)
	var dj struct {
		Version  int                    `json:"version"`
		Cases    []dataset.Case         `json:"cases"`
		Versions []store.DatasetVersion `json:"versions"`
	}
	if code != 200 || json.Unmarshal(b, &dj) != nil || dj.Version != 1 || len(dj.Cases) != 1 || len(dj.Versions) != 2 || dj.Cases[0].Criteria != "looks the time zone up" {
		t.Fatalf("version 1: %d %s", code, b)
	}
	code, b, resp := e.do("GET", "/api/v1/datasets/triage/export", "", nil)
	if code != 200 || resp.Header.Get("Content-Type") != "application/yaml" || !strings.Contains(string(b), id2) {
		t.Fatalf("export: %d %s", code, b)
	}
	if _, err := dataset.Import("export.yaml", b); err != nil {
		t.Fatalf("the export does not import: %v\n%s", err, b)
	}
	code, b, _ = e.do("GET", "/api/v1/datasets", "", nil)
	if code != 200 || !strings.Contains(string(b), `"name":"triage","version":2`) {
		t.Fatalf("list: %d %s", code, b)
	}
	for _, p := range []string{"/api/v1/datasets/nope", "/api/v1/experiments/nope", "/api/v1/experiments/compare?a=x&b=y"} {
		if code, b, _ = e.do("GET", p, "", nil); code != 404 {
			t.Errorf("%s: %d %s, want 404", p, code, b)
		}
	}
	if code, b, _ = e.do("GET", "/api/v1/datasets/triage?version=zero", "", nil); code != 400 {
		t.Errorf("bad version: %d %s", code, b)
	}

	// Two experiments: case b regressed, case a was fixed.
	ds := st.(store.Datasets)
	put := func(name string, a, bv string) {
		ex := &dataset.Experiment{Name: name, Dataset: "triage", Version: 2, Created: t0, Cases: []dataset.CaseResult{
			{ID: "a", Verdict: a, Score: score(a), Trace: id1, LatencyMs: 10},
			{ID: "b", Verdict: bv, Score: score(bv), Trace: id2, LatencyMs: 30},
		}}
		if _, err := dataset.SaveExperiment(ctx, ds, ex, false); err != nil {
			t.Fatal(err)
		}
	}
	put("before", "fail", "pass")
	put("after", "pass", "fail")
	code, b, _ = e.do("GET", "/api/v1/experiments/compare?a=before&b=after", "", nil)
	var cmp dataset.Comparison
	if code != 200 || json.Unmarshal(b, &cmp) != nil {
		t.Fatalf("compare: %d %s", code, b)
	}
	if cmp.Regressions != 1 || cmp.Fixes != 1 || cmp.Rows[0].ID != "b" || cmp.Rows[0].Change != dataset.Regression || cmp.Rows[1].Change != dataset.Fix {
		t.Fatalf("compare: %s", b)
	}
	if code, b, _ = e.do("GET", "/api/v1/experiments", "", nil); code != 200 || !strings.Contains(string(b), `"name":"after"`) {
		t.Fatalf("experiments: %d %s", code, b)
	}
	if code, b, _ = e.do("GET", "/api/v1/experiments/after", "", nil); code != 200 || !strings.Contains(string(b), `"verdict":"fail"`) {
		t.Fatalf("experiment: %d %s", code, b)
	}
	code, b, _ = e.do("GET", "/api/v1/traces/diff?a=0101&b=0201", "", nil)
	if code != 200 || !strings.Contains(string(b), `"steps"`) {
		t.Fatalf("diff: %d %s", code, b)
	}
	if code, b, _ = e.do("GET", "/api/v1/traces/diff?a=0101", "", nil); code != 400 {
		t.Fatalf("diff of one trace: %d %s", code, b)
	}
	if code, b, _ = e.do("DELETE", "/api/v1/datasets/triage", "", nil); code != 200 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code, b, _ = e.do("DELETE", "/api/v1/datasets/triage", "", nil); code != 404 {
		t.Fatalf("delete again: %d %s", code, b)
	}

	// Scopes: reading takes a read key, adding and deleting an admin key.
	keys := map[Scope]string{}
	for _, sc := range []Scope{ScopeIngest, ScopeRead, ScopeAdmin} {
		tok, _, err := CreateKey(ctx, st, sc, string(sc), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keys[sc] = tok
	}
	ek := newEnv(t, Options{Store: st, RequireKeys: true})
	add := `{"cases":[{"id":"k","input":"x"}]}`
	for _, tt := range []struct {
		sc           Scope
		method, path string
		code         int
	}{
		{ScopeRead, "GET", "/api/v1/datasets", 200},
		{ScopeIngest, "GET", "/api/v1/datasets", 403},
		{ScopeRead, "POST", "/api/v1/datasets/k/cases", 403},
		{ScopeIngest, "POST", "/api/v1/datasets/k/cases", 403},
		{ScopeAdmin, "POST", "/api/v1/datasets/k/cases", 200},
		{ScopeRead, "GET", "/api/v1/experiments/compare?a=before&b=after", 200},
		{ScopeRead, "DELETE", "/api/v1/datasets/k", 403},
		{ScopeAdmin, "DELETE", "/api/v1/datasets/k", 200},
	} {
		ek.key = keys[tt.sc]
		var body []byte
		if tt.method == "POST" {
			body = []byte(add)
		}
		if code, b, _ := ek.do(tt.method, tt.path, "application/json", body); code != tt.code {
			t.Errorf("%s %s %s: %d %s, want %d", tt.sc, tt.method, tt.path, code, b, tt.code)
		}
	}
}

func score(v string) float64 {
	if v == "pass" {
		return 1
	}
	return 0.25
}

// BenchmarkCompareExperimentsAPI is GET /api/v1/experiments/compare of two
// experiments of 1,000 cases each, on SQLite, through a real HTTP server:
// both documents read and decoded, compared and encoded.
func BenchmarkCompareExperimentsAPI(b *testing.B) {
	ctx := context.Background()
	st := openStore(b)
	ds := st.(store.Datasets)
	for i, name := range []string{"base", "head"} {
		ex := &dataset.Experiment{Name: name, Dataset: "bench", Version: 1, Created: t0}
		for c := range 1000 {
			v := "pass"
			if (c+i)%7 == 0 {
				v = "fail"
			}
			cost := 0.001 * float64(c%13)
			ex.Cases = append(ex.Cases, dataset.CaseResult{ID: fmt.Sprintf("case-%04d", c), Verdict: v, Score: score(v),
				Trace: fmt.Sprintf("%032x", c+1), LatencyMs: float64(100 + c%250), CostUSD: &cost,
				Scores: map[string]float64{"tool-trajectory": score(v), "contains": 1}})
		}
		if _, err := dataset.SaveExperiment(ctx, ds, ex, false); err != nil {
			b.Fatal(err)
		}
	}
	e := newEnv(b, Options{Store: st})
	b.ResetTimer()
	for b.Loop() {
		code, body, _ := e.do("GET", "/api/v1/experiments/compare?a=base&b=head", "", nil)
		if code != 200 || len(body) < 1000 {
			b.Fatalf("%d %.200s", code, body)
		}
	}
}
