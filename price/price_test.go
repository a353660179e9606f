package price

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBuiltin(t *testing.T) {
	tb, err := Parse(builtin, "prices.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.All()) < 15 {
		t.Fatalf("built-in table has %d entries", len(tb.All()))
	}
	for _, p := range tb.All() {
		if p.Input <= 0 || p.Output <= 0 || p.ValidFrom == "" || p.Provider == "" {
			t.Errorf("%s: incomplete entry %+v", p.Model, p)
		}
	}
}

// One test per priced token kind: each prices only its own tokens, at its
// own rate, and falls back as documented when the rate is left out.
func TestCostPerTokenKind(t *testing.T) {
	full := Price{Input: 3, Output: 15, CachedInput: 0.3, CacheWrite: 3.75, Reasoning: 20}
	bare := Price{Input: 3, Output: 15}
	const M = 1_000_000
	for _, tc := range []struct {
		name string
		p    Price
		tok  Tokens
		want float64
	}{
		{"input", full, Tokens{Input: M}, 3},
		{"output", full, Tokens{Output: M}, 15},
		{"cached input read", full, Tokens{Input: M, CachedRead: M}, 0.3},
		{"cache write", full, Tokens{Input: M, CacheWrite: M}, 3.75},
		{"reasoning", full, Tokens{Output: M, Reasoning: M}, 20},
		{"cached read falls back to input", bare, Tokens{Input: M, CachedRead: M}, 3},
		{"cache write falls back to input", bare, Tokens{Input: M, CacheWrite: M}, 3},
		{"reasoning falls back to output", bare, Tokens{Output: M, Reasoning: M}, 15},
		{"mixed", full, Tokens{Input: 1000, CachedRead: 600, CacheWrite: 100, Output: 500, Reasoning: 200},
			(300*3 + 600*0.3 + 100*3.75 + 300*15 + 200*20) / 1e6},
		{"contradictory counts clamp", full, Tokens{Input: 10, CachedRead: 50, Output: 5, Reasoning: 9}, (50*0.3 + 9*20) / 1e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Cost(tc.tok); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Cost(%+v) = %v, want %v", tc.tok, got, tc.want)
			}
		})
	}
}

func TestLookupNames(t *testing.T) {
	tb := Builtin()
	for _, tc := range []struct{ name, want string }{
		{"gpt-4o", "gpt-4o"},
		{"GPT-4o", "gpt-4o"},
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"openai/gpt-4.1-mini", "gpt-4.1-mini"},
		{"chatgpt-4o-latest", "gpt-4o"},
		{"gpt-5-chat-latest", "gpt-5"},
		{"o3-mini-2025-01-31", "o3-mini"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"claude-sonnet-4-0", "claude-sonnet-4"},
		{"claude-sonnet-4-20250514", "claude-sonnet-4"},
		{"claude-3-7-sonnet-latest", "claude-3-7-sonnet"},
		{"claude-haiku-4-5@20251001", "claude-haiku-4-5"},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"},
		{"anthropic/claude-opus-4-1", "claude-opus-4-1"},
	} {
		p, ok := tb.Lookup(tc.name)
		if !ok || p.Model != tc.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tc.name, p.Model, ok, tc.want)
		}
	}
	for _, name := range []string{"", "llama3.2:3b", "gpt-4o-audio-preview", "claude", "gpt-4", "mistral-large-latest"} {
		if p, ok := tb.Lookup(name); ok {
			t.Errorf("Lookup(%q) = %q, want unknown", name, p.Model)
		}
	}
}

func TestUnknownIsNotFree(t *testing.T) {
	c, ok := Builtin().Cost("my-local-model", Tokens{Input: 100, Output: 100})
	if ok || c != 0 {
		t.Fatalf("Cost of an unknown model = %v, %v; want 0, false (unknown)", c, ok)
	}
	// A user who says a model is free gets a known $0.
	free, err := Parse([]byte(`{"models":[{"model":"llama3.2","input":0,"output":0}]}`), "t")
	if err != nil {
		t.Fatal(err)
	}
	c, ok = Builtin().Merge(free).Cost("llama3.2", Tokens{Input: 100, Output: 100})
	if !ok || c != 0 {
		t.Fatalf("Cost of a model priced free = %v, %v; want 0, true", c, ok)
	}
}

func TestValidFrom(t *testing.T) {
	tb, err := Parse([]byte(`{"models":[
		{"model":"m","valid_from":"2025-01-01","input":2,"output":2},
		{"model":"m","valid_from":"2024-01-01","input":1,"output":1},
		{"model":"m","valid_from":"2026-01-01","input":3,"output":3}]}`), "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   string
		want float64
	}{{"2023-06-01", 1}, {"2024-01-01", 1}, {"2024-12-31", 1}, {"2025-06-01", 2}, {"2027-01-01", 3}} {
		at, _ := time.Parse(time.DateOnly, tc.at)
		if p, _ := tb.LookupAt("m", at); p.Input != tc.want {
			t.Errorf("at %s: input price %v, want %v", tc.at, p.Input, tc.want)
		}
	}
}

func TestOverrideFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(path, []byte(`{"models":[
		{"model":"gpt-4o","valid_from":"2024-10-01","input":100,"output":200},
		{"model":"qwen3","input":0.1,"output":0.2,"aliases":["qwen3:8b"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvFile, path)
	tb, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := tb.Lookup("gpt-4o-2024-08-06"); p.Input != 100 {
		t.Errorf("override not applied: gpt-4o input %v", p.Input)
	}
	if p, ok := tb.Lookup("qwen3:8b"); !ok || p.Output != 0.2 {
		t.Errorf("added model by alias: %+v %v", p, ok)
	}
	if p, _ := tb.Lookup("claude-sonnet-4-5"); p.Input != 3 {
		t.Errorf("built-in entries lost: %+v", p)
	}
	if p, _ := Builtin().Lookup("gpt-4o"); p.Input != 2.5 {
		t.Errorf("override leaked into the built-in table: %+v", p)
	}
	t.Setenv(EnvFile, filepath.Join(dir, "missing.json"))
	if _, err := Default(); err == nil || !strings.Contains(err.Error(), EnvFile) {
		t.Errorf("missing file: err %v, want one naming %s", err, EnvFile)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"models":[{"model":"m","input":1,"ouptut":2}]}`, `unknown field "ouptut"`},
		{`{"models":[{"input":1}]}`, `"model" is missing`},
		{`{"models":[{"model":"m","input":-1}]}`, `"input" is -1`},
		{`{"models":[{"model":"m","valid_from":"May 2025"}]}`, `write YYYY-MM-DD`},
		{`{"models":[{"model":"m"},{"model":"M"}]}`, `listed twice`},
		{`{"models":[]} {}`, `more than one JSON value`},
		{`[`, `price file t:`},
	} {
		_, err := Parse([]byte(tc.in), "t")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s): err %v, want %q", tc.in, err, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(builtin)
	f.Add([]byte(`{"models":[{"model":"m","valid_from":"2025-01-01","input":1e308,"output":0,"aliases":["a","m"]}]}`))
	f.Add([]byte(`{"models":[{"model":" ","input":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tb, err := Parse(data, "fuzz")
		if err != nil {
			return
		}
		for _, p := range tb.All() {
			if p.Model == "" {
				t.Fatalf("entry without a model name: %+v", p)
			}
			for _, v := range []float64{p.Input, p.Output, p.CachedInput, p.CacheWrite, p.Reasoning} {
				if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("invalid price accepted: %+v", p)
				}
			}
			q, ok := tb.Lookup(p.Model)
			if !ok {
				t.Fatalf("entry %q cannot be looked up", p.Model)
			}
			if c := q.Cost(Tokens{Input: 1e6, Output: 1e6, CachedRead: 5e5, CacheWrite: 1e5, Reasoning: 3e5}); c < 0 || math.IsNaN(c) {
				t.Fatalf("cost %v for %+v", c, q)
			}
		}
		_ = Builtin().Merge(tb)
	})
}
