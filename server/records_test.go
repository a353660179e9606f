package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRecordsPages: GET /api/v1/traces/{id}/records pages a trace's
// records (the summary on the first page, next as a string), reads some
// by seq or by span, leaves the values out when asked, and refuses bad
// parameters with a 400 naming the parameter.
func TestRecordsPages(t *testing.T) {
	e := newEnv(t, Options{})
	id := e.seed(7, "paged").String()
	type page struct {
		Summary *struct {
			Name string `json:"name"`
		} `json:"summary"`
		Records []map[string]any `json:"records"`
		Next    string           `json:"next"`
	}
	get := func(query string) (int, page, string) {
		t.Helper()
		code, body, _ := e.do("GET", "/api/v1/traces/"+id+"/records"+query, "", nil)
		var p page
		if code == 200 {
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		}
		return code, p, string(body)
	}
	seqs := func(p page) string {
		var s []string
		for _, r := range p.Records {
			s = append(s, jsonNum(r["seq"]))
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		query, seqs, next string
		summary, values   bool
	}{
		{query: "", seqs: "1,2,3,4", summary: true, values: true},
		{query: "?limit=3", seqs: "1,2,3", next: "3", summary: true, values: true},
		{query: "?after=3&limit=3", seqs: "4", values: true},
		{query: "?limit=2&values=false", seqs: "1,2", next: "2", summary: true},
		{query: "?seq=4,2,99", seqs: "2,4", values: true},
		{query: "?span=0701000000000000", seqs: "1,4", values: true},
		{query: "?span=0702000000000000&values=false", seqs: "2"},
	} {
		code, p, body := get(tc.query)
		if code != 200 {
			t.Errorf("%q: %d %s", tc.query, code, body)
			continue
		}
		if got := seqs(p); got != tc.seqs || p.Next != tc.next {
			t.Errorf("%q: seqs %s next %q, want %s next %q", tc.query, got, p.Next, tc.seqs, tc.next)
		}
		if (p.Summary != nil) != tc.summary || p.Summary != nil && p.Summary.Name != "paged" {
			t.Errorf("%q: summary %+v", tc.query, p.Summary)
		}
		hasValues := strings.Contains(body, `"input"`) || strings.Contains(body, `"output"`)
		if strings.Contains(tc.seqs, "2") && hasValues != tc.values {
			t.Errorf("%q: values in %s", tc.query, body)
		}
	}
	for _, tc := range []struct{ query, want string }{
		{"?after=x", "after="},
		{"?limit=0", "limit="},
		{"?limit=50001", "limit="},
		{"?seq=1,x", "seq="},
		{"?seq=" + strings.Repeat("1,", 1000) + "1", "at most 1000"},
		{"?span=zz", "span="},
		{"?values=maybe", "values="},
	} {
		if code, _, body := get(tc.query); code != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%q: %d %s, want 400 naming %q", tc.query, code, body, tc.want)
		}
	}
	if code, _, _ := e.do("GET", "/api/v1/traces/"+strings.Repeat("ab", 16)+"/records", "", nil); code != 404 {
		t.Errorf("unknown trace: %d, want 404", code)
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
