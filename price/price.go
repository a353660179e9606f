// Package price prices model calls: a table of per-model token prices
// (USD per million tokens, with the date each price took effect), embedded
// in the binary and overridable by a user file, and the cost of a call
// computed from its token counts.
//
// A model the table does not know has an unknown cost: Cost reports it
// with ok false, never as $0. A model that is truly free (a local Ollama
// model, say) is priced at zero by listing it in a user file with all
// prices 0.
//
// Model names are matched leniently, the way providers spell them: case is
// ignored, a routing prefix ("openai/gpt-4o", "us.anthropic.claude-…") and
// version suffixes ("-2024-08-06", "-20250929", "@20250929", "-latest",
// "-v1:0") are stripped, and each entry may list aliases.
package price

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

//go:embed prices.json
var builtin []byte

// EnvFile names the environment variable that points at a user price file
// read by Default on top of the built-in table.
const EnvFile = "LOUPE_PRICES"

// A Price is what one model's tokens cost from a date on, in USD per
// million tokens. A zero CachedInput or CacheWrite means the input price;
// a zero Reasoning means the output price (both OpenAI and Anthropic bill
// reasoning tokens as output).
type Price struct {
	Model       string   `json:"model"`                  // the canonical name, e.g. "gpt-4o"
	Provider    string   `json:"provider,omitempty"`     // "openai", "anthropic", …; informational
	Aliases     []string `json:"aliases,omitempty"`      // other names the provider accepts for it
	ValidFrom   string   `json:"valid_from,omitempty"`   // YYYY-MM-DD the price took effect; empty: always
	Input       float64  `json:"input"`                  // uncached input tokens
	Output      float64  `json:"output"`                 // output tokens other than reasoning
	CachedInput float64  `json:"cached_input,omitempty"` // input tokens read from the prompt cache
	CacheWrite  float64  `json:"cache_write,omitempty"`  // input tokens written to the prompt cache
	Reasoning   float64  `json:"reasoning,omitempty"`    // reasoning (thinking) output tokens

	from time.Time
}

// Tokens are the token counts of one model call, split the way prices are.
// CachedRead and CacheWrite are parts of Input, Reasoning a part of
// Output, as trace.Usage counts them: a provider that reports them apart
// (Anthropic) adds them in before pricing.
type Tokens struct {
	Input      int64 // all input tokens, cached and cache writes included
	Output     int64 // all output tokens, reasoning included
	CachedRead int64 // input tokens read from the prompt cache
	CacheWrite int64 // input tokens written to the prompt cache
	Reasoning  int64 // output tokens spent reasoning
}

// Cost returns what t costs at p, in USD. Counts that contradict each
// other (more cached than input tokens) are clamped rather than priced
// negative.
func (p *Price) Cost(t Tokens) float64 {
	cached, write := max(t.CachedRead, 0), max(t.CacheWrite, 0)
	plain := max(t.Input-cached-write, 0)
	reasoning := max(t.Reasoning, 0)
	out := max(t.Output-reasoning, 0)
	c := float64(plain)*p.Input +
		float64(cached)*or(p.CachedInput, p.Input) +
		float64(write)*or(p.CacheWrite, p.Input) +
		float64(out)*p.Output +
		float64(reasoning)*or(p.Reasoning, p.Output)
	return c / 1e6
}

func or(v, fallback float64) float64 {
	if v == 0 {
		return fallback
	}
	return v
}

// A Table maps model names to prices. It is immutable once made and safe
// for concurrent use. The zero Table knows no model.
type Table struct {
	byName map[string][]*Price // canonical names and aliases → prices, newest first
	list   []*Price            // every entry, sorted by model then date
}

// file is the JSON form of a price file.
type file struct {
	Note   string  `json:"note,omitempty"`
	Models []Price `json:"models"`
}

// Parse reads a price file: a JSON object {"models": [Price, …]}. Unknown
// fields are refused so a misspelt price is not silently read as 0. name
// is used in error messages.
func Parse(data []byte, name string) (*Table, error) {
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("price file %s: %w (want {\"models\": [{\"model\": \"gpt-4o\", \"input\": 2.5, \"output\": 10, …}]})", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("price file %s: more than one JSON value; write one object", name)
	}
	t := &Table{}
	if err := t.add(f.Models, name); err != nil {
		return nil, err
	}
	return t, nil
}

// add validates ps and adds them, replacing entries of the same model and
// valid_from date.
func (t *Table) add(ps []Price, name string) error {
	seen := map[string]bool{}
	for i := range ps {
		p := ps[i]
		at := fmt.Sprintf("price file %s: models[%d]", name, i)
		p.Model = strings.TrimSpace(p.Model)
		if p.Model == "" {
			return fmt.Errorf("%s: \"model\" is missing; name the model the price is for", at)
		}
		at += " (" + p.Model + ")"
		for _, v := range []struct {
			field string
			v     float64
		}{{"input", p.Input}, {"output", p.Output}, {"cached_input", p.CachedInput}, {"cache_write", p.CacheWrite}, {"reasoning", p.Reasoning}} {
			if v.v < 0 || math.IsNaN(v.v) || math.IsInf(v.v, 0) {
				return fmt.Errorf("%s: %q is %v; a price is a non-negative number of USD per million tokens", at, v.field, v.v)
			}
		}
		if p.ValidFrom != "" {
			d, err := time.Parse(time.DateOnly, p.ValidFrom)
			if err != nil {
				return fmt.Errorf("%s: \"valid_from\" %q is not a date; write YYYY-MM-DD", at, p.ValidFrom)
			}
			p.from = d
		}
		key := normalize(p.Model) + "@" + p.ValidFrom
		if seen[key] {
			return fmt.Errorf("%s: listed twice with valid_from %q; keep one", at, p.ValidFrom)
		}
		seen[key] = true
		p.Aliases = slices.Clone(p.Aliases)
		t.list = slices.DeleteFunc(t.list, func(q *Price) bool { return normalize(q.Model)+"@"+q.ValidFrom == key })
		t.list = append(t.list, &p)
	}
	slices.SortStableFunc(t.list, func(a, b *Price) int {
		if c := strings.Compare(a.Model, b.Model); c != 0 {
			return c
		}
		return a.from.Compare(b.from)
	})
	t.byName = map[string][]*Price{}
	for _, p := range t.list {
		names := append([]string{p.Model}, p.Aliases...)
		for _, n := range names {
			k := normalize(n)
			if k != "" && !slices.Contains(t.byName[k], p) {
				t.byName[k] = append(t.byName[k], p)
			}
		}
	}
	for _, ps := range t.byName {
		slices.SortStableFunc(ps, func(a, b *Price) int { return b.from.Compare(a.from) })
	}
	return nil
}

// Merge returns a table with t's prices and then over's, an entry of over
// replacing t's entry for the same model and valid_from date.
func (t *Table) Merge(over *Table) *Table {
	m := &Table{}
	var ps []Price
	for _, src := range []*Table{t, over} {
		if src == nil {
			continue
		}
		for _, p := range src.list {
			ps = append(ps, *p)
		}
	}
	// Entries were validated when parsed; duplicates across the two
	// tables are meant (overrides), so add them one table at a time.
	n := 0
	if t != nil {
		n = len(t.list)
	}
	_ = m.add(ps[:n], "")
	_ = m.add(ps[n:], "")
	return m
}

// Builtin returns the table embedded in the binary.
func Builtin() *Table {
	builtinOnce.Do(func() {
		var err error
		builtinTable, err = Parse(builtin, "prices.json (built in)")
		if err != nil {
			panic("price: the embedded price table is invalid: " + err.Error()) // caught by TestBuiltin
		}
	})
	return builtinTable
}

var (
	builtinOnce  sync.Once
	builtinTable *Table
)

// Load returns the built-in table overridden by the price file at path;
// an empty path means the built-in table alone.
func Load(path string) (*Table, error) {
	if path == "" {
		return Builtin(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price file: %w (set by %s or --prices)", err, EnvFile)
	}
	over, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	return Builtin().Merge(over), nil
}

// Default returns the built-in table overridden by the file $LOUPE_PRICES
// names, if set. It reads the file each time it is called.
func Default() (*Table, error) { return Load(os.Getenv(EnvFile)) }

// Lookup returns the price of model in effect now; see LookupAt.
func (t *Table) Lookup(model string) (Price, bool) { return t.LookupAt(model, time.Now()) }

// LookupAt returns the price of model in effect at when: the entry with
// the latest valid_from not after when (or, if every entry is later, the
// earliest). ok is false if the table does not know model.
func (t *Table) LookupAt(model string, when time.Time) (Price, bool) {
	if t == nil {
		return Price{}, false
	}
	for _, n := range candidates(model) {
		ps := t.byName[n]
		if len(ps) == 0 {
			continue
		}
		for _, p := range ps {
			if !p.from.After(when) {
				return *p, true
			}
		}
		return *ps[len(ps)-1], true
	}
	return Price{}, false
}

// Cost returns what tokens of a call to model cost now, in USD, and
// whether the table knows model. When it does not, cost is 0 and ok
// false: the cost is unknown, not free.
func (t *Table) Cost(model string, tokens Tokens) (cost float64, ok bool) {
	p, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	return p.Cost(tokens), true
}

// All returns every entry, sorted by model name then valid_from date, in
// a new slice.
func (t *Table) All() []Price {
	if t == nil {
		return nil
	}
	out := make([]Price, len(t.list))
	for i, p := range t.list {
		out[i] = *p
		out[i].Aliases = slices.Clone(p.Aliases)
	}
	return out
}

func normalize(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// candidates returns the names to look model up by, most specific first:
// as given, without a routing prefix, then with version suffixes stripped
// one at a time.
func candidates(model string) []string {
	s := normalize(model)
	out := []string{s}
	if i := strings.LastIndexByte(s, '/'); i >= 0 { // "openai/gpt-4o" (OpenRouter, LiteLLM)
		s = s[i+1:]
		out = append(out, s)
	}
	if i := strings.Index(s, "claude-"); i > 0 && s[i-1] == '.' { // Bedrock "us.anthropic.claude-…"
		s = s[i:]
		out = append(out, s)
	}
	for {
		t := stripSuffix(s)
		if t == s || t == "" {
			return out
		}
		s = t
		out = append(out, s)
	}
}

// stripSuffix removes one version suffix from s, or returns s.
func stripSuffix(s string) string {
	if t, ok := strings.CutSuffix(s, "-latest"); ok {
		return t
	}
	// Bedrock "-v1:0", "-v2".
	if i := strings.LastIndex(s, "-v"); i > 0 && allIn(s[i+2:], "0123456789:") && len(s) > i+2 {
		return s[:i]
	}
	// "@20250929" (Vertex), "-20250929", "-2024-08-06".
	if i := strings.LastIndexAny(s, "-@"); i > 0 {
		tail := s[i+1:]
		if len(tail) == 8 && allIn(tail, "0123456789") {
			return s[:i]
		}
		if len(s) > 11 && s[len(s)-11] == '-' {
			if _, err := time.Parse(time.DateOnly, s[len(s)-10:]); err == nil {
				return s[:len(s)-11]
			}
		}
	}
	return s
}

func allIn(s, set string) bool {
	for _, r := range s {
		if !strings.ContainsRune(set, r) {
			return false
		}
	}
	return true
}
