package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

type searchJSON struct {
	Hits []struct {
		TraceID string `json:"trace_id"`
		Seq     uint64 `json:"seq"`
		Type    string `json:"type"`
		Name    string `json:"name"`
	} `json:"hits"`
	Next string `json:"next"`
}

func search(t *testing.T, db string, args ...string) searchJSON {
	t.Helper()
	var res searchJSON
	out := mustRun(t, db, append([]string{"traces", "search", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("search %v: %v\n%s", args, err, out)
	}
	return res
}

// TestSearchRecordFilters: filters that name a kind of record (has:errors,
// model:, tool:) list the records that match them, not other records of
// the matching traces, on every page.
func TestSearchRecordFilters(t *testing.T) {
	db := filepath.Join(t.TempDir(), "loupe.db")
	importAll(t, db)
	for _, tc := range []struct {
		query []string
		ok    func(typ, name string) bool
	}{
		{[]string{"has:errors"}, func(typ, _ string) bool {
			return typ == "tool.error" || typ == "run.end" || typ == "model.call" || typ == "child.end" || typ == "node.end" || typ == "error"
		}},
		{[]string{"model:anthropic.claude-haiku-4-5"}, func(typ, name string) bool {
			return typ == "model.call" && name == "anthropic.claude-haiku-4-5"
		}},
		{[]string{"--model", "generator.generate"}, func(typ, name string) bool { return typ == "model.call" && name == "generator.generate" }},
		{[]string{"tool:Read"}, func(typ, name string) bool { return strings.HasPrefix(typ, "tool.") && name == "Read" }},
		{[]string{"tool:evaluator.evaluate", "has:errors"}, func(typ, name string) bool { return typ == "tool.error" && name == "evaluator.evaluate" }},
	} {
		all := search(t, db, append([]string{"--limit", "1000"}, tc.query...)...)
		if len(all.Hits) == 0 {
			t.Errorf("%v: no hits", tc.query)
		}
		for _, h := range all.Hits {
			if !tc.ok(h.Type, h.Name) {
				t.Errorf("%v: unrelated hit #%d %s %s", tc.query, h.Seq, h.Type, h.Name)
			}
		}
		// Page by page, one hit a page: the same hits.
		var paged []string
		cursor := ""
		for i := 0; i <= len(all.Hits); i++ {
			args := append([]string{"--limit", "1"}, tc.query...)
			if cursor != "" {
				args = append(args, "--cursor", cursor)
			}
			p := search(t, db, args...)
			for _, h := range p.Hits {
				paged = append(paged, h.TraceID+h.Type)
			}
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		var want []string
		for _, h := range all.Hits {
			want = append(want, h.TraceID+h.Type)
		}
		if strings.Join(paged, ",") != strings.Join(want, ",") {
			t.Errorf("%v: pages of 1 give %v, one page %v", tc.query, paged, want)
		}
	}
	// type: names the records itself; has:errors then selects traces.
	starts := search(t, db, "has:errors", "type:run.start")
	if len(starts.Hits) == 0 {
		t.Error("has:errors type:run.start: no hits")
	}
	for _, h := range starts.Hits {
		if h.Type != "run.start" {
			t.Errorf("has:errors type:run.start: hit %s", h.Type)
		}
	}
}
