package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/trace"
)

// TestImportPricesCalls: `loupe traces import` prices the model calls of a
// real AgentV results file (tokens, no cost per call) from the built-in
// table, from --prices, and from $LOUPE_PRICES, as `loupe serve` does; a
// model no table knows is imported with an unknown cost, shown as such.
func TestImportPricesCalls(t *testing.T) {
	file := testrepo.Real(t, "agentv/multi-agent.eval.results.jsonl")
	const wantCalls = "6 model calls priced"
	dir := t.TempDir()
	cheap := filepath.Join(dir, "prices.json")
	// gpt-4o at $1 per million tokens from a date before the file's runs.
	if err := os.WriteFile(cheap, []byte(`{"models":[{"model":"gpt-4o","valid_from":"2026-01-01","input":1,"output":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	gpt4o, ok := price.Builtin().LookupAt("gpt-4o", time.Date(2026, 2, 22, 10, 0, 0, 0, time.UTC)) // the file's runs
	if !ok {
		t.Fatal("the built-in table has no gpt-4o")
	}
	tests := []struct {
		name string
		args []string
		env  string
		rate func(in, out int64) float64
	}{
		{"built-in", nil, "", func(in, out int64) float64 { return gpt4o.Cost(price.Tokens{Input: in, Output: out}) }},
		{"--prices", []string{"--prices", cheap}, "", func(in, out int64) float64 { return float64(in+out) / 1e6 }},
		{"LOUPE_PRICES", nil, cheap, func(in, out int64) float64 { return float64(in+out) / 1e6 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(price.EnvFile, tt.env)
			db := filepath.Join(t.TempDir(), "loupe.db")
			out := mustRun(t, db, append([]string{"traces", "import", file}, tt.args...)...)
			if !strings.Contains(out, wantCalls) {
				t.Errorf("import says %q, want %q", out, wantCalls)
			}
			n := 0
			for _, line := range strings.Split(strings.TrimSpace(mustRun(t, db, "traces", "export")), "\n") {
				r, err := trace.DecodeRecord([]byte(line))
				if err != nil {
					t.Fatal(err)
				}
				if r.Type != trace.TypeModelCall {
					continue
				}
				n++
				want := tt.rate(r.Usage.InputTokens, r.Usage.OutputTokens)
				if r.Usage.CostUnknown || r.Usage.CostUSD == 0 || diff(r.Usage.CostUSD, want) > 1e-12 {
					t.Errorf("seq %d (%s, %d/%d tokens): cost %v (unknown %v), want %v", r.Seq, r.Name, r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.CostUSD, r.Usage.CostUnknown, want)
				}
			}
			if n != 6 {
				t.Errorf("%d model calls stored, want 6", n)
			}
			if ls := mustRun(t, db, "traces", "ls"); !strings.Contains(ls, "research-question") || strings.Contains(ls, "unknown") {
				t.Errorf("traces ls:\n%s", ls)
			}
		})
	}

	// A model that no table prices: unknown, in the import, ls and show.
	t.Setenv(price.EnvFile, "")
	db := filepath.Join(t.TempDir(), "loupe.db")
	jsonl := filepath.Join(dir, "mystery.jsonl")
	recs := `{"v":1,"trace_id":"0a000000000000000000000000000001","span_id":"0a00000000000001","seq":1,"time":"2026-02-22T10:00:00Z","type":"run.start","name":"mystery-run"}
{"v":1,"trace_id":"0a000000000000000000000000000001","span_id":"0a00000000000002","parent_id":"0a00000000000001","seq":2,"time":"2026-02-22T10:00:01Z","type":"model.call","name":"mystery-model-9","duration_ns":1000000,"usage":{"input_tokens":100,"output_tokens":10}}
{"v":1,"trace_id":"0a000000000000000000000000000001","span_id":"0a00000000000001","seq":3,"time":"2026-02-22T10:00:02Z","type":"run.end","name":"mystery-run","duration_ns":2000000000}
`
	if err := os.WriteFile(jsonl, []byte(recs), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, db, "traces", "import", jsonl); !strings.Contains(out, "1 of unknown cost") {
		t.Errorf("import says %q, want it to count the call of unknown cost", out)
	}
	ls := mustRun(t, db, "traces", "ls")
	if !strings.Contains(ls, "mystery-run") || !strings.Contains(ls, "unknown") || strings.Contains(ls, "$0.0000") {
		t.Errorf("traces ls does not show the unknown cost:\n%s", ls)
	}
	show := mustRun(t, db, "traces", "show", "0a0000000000")
	if !strings.Contains(show, "cost unknown") || !strings.Contains(show, "  unknown  ") || strings.Contains(show, "$0.0000") {
		t.Errorf("traces show does not show the unknown cost:\n%s", show)
	}
}

func diff(a, b float64) float64 {
	if a > b {
		return a - b
	}
	return b - a
}
