package online

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/internal/yamlpos"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Limits on a rules file and on one rule, so that a file or an API
// request is small whatever it holds.
const (
	MaxRulesFileBytes = 1 << 20
	MaxRuleBytes      = 64 << 10
	MaxRules          = 200
	MaxRuleNameBytes  = 64
)

// Config is a parsed rules file: the judge its LLM graders use, how long
// a trace must stay quiet before it is graded, and its rules. The zero
// value has no rules and no judge.
type Config struct {
	// Judge is the model that grades the LLM graders of every rule.
	Judge JudgeConfig
	// Settle is the file's settle: how long after the last record of a
	// trace whose root run ended the trace is graded (see
	// Options.Settle); 0 means DefaultSettle.
	Settle time.Duration
	// Rules are the file's rules, in file order.
	Rules []*Rule
}

// JudgeConfig says which model grades the LLM graders (llm-grader,
// rubrics, bare criterion strings...) and how calls to it are bounded.
type JudgeConfig struct {
	// Model is a spec for llm.Open ("openai:gpt-4o-mini",
	// "anthropic:...", "ollama:llama3.2"), as loupe eval's --judge-model
	// takes it; "" means no judge (rules with LLM graders are refused).
	Model string `json:"model,omitempty"`
	// BaseURL replaces the provider's endpoint (an OpenAI-compatible
	// server); the API key is read from the provider's usual environment
	// variable.
	BaseURL string `json:"base_url,omitempty"`
	// APIKeyEnv names the environment variable that holds the judge's
	// API key; "" means the provider's usual one (OPENAI_API_KEY...).
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// Timeout bounds one judge call; 0 means DefaultJudgeTimeout.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	// Concurrency bounds the judge calls in flight, across rules; 0
	// means DefaultJudgeConcurrency.
	Concurrency int `json:"concurrency,omitempty"`
}

// Defaults of JudgeConfig.
const (
	DefaultJudgeTimeout     = 60 * time.Second
	DefaultJudgeConcurrency = 4
)

// A Rule evaluates the traces it selects when they end: those its Filter
// matches, sampled at Sample, are graded by its Assertions, and the
// results are stored as scores (see Engine). A Rule is immutable once
// parsed and safe to share.
type Rule struct {
	// Name identifies the rule: letters, digits, '.', '_' and '-', at
	// most MaxRuleNameBytes. Scores the rule gives are named after it.
	Name string
	// Filter selects the traces in Loupe's search language
	// (store.ParseQuery): "name:checkout tag:env:prod tool:search".
	// Empty selects every agent run. Traces that hold loupe eval results
	// are left out unless the filter asks for them (tag:loupe:eval).
	Filter string
	// Sample is the share of matching traces evaluated, in (0, 1]. Which
	// ones is decided by a hash of the rule's name and the trace id, so
	// the decision is the same after a restart and on every collector.
	Sample float64
	// BudgetUSDPerHour bounds what the rule's judge calls may cost in
	// any hour (from each call's recorded usage and the price table);
	// a rule that goes over pauses itself. 0 means no bound.
	BudgetUSDPerHour float64
	// Criteria is what the LLM graders grade the answer against (an eval
	// case's criteria).
	Criteria string
	// Threshold is the pass mark of the overall score in (0, 1]; 0 means
	// eval.DefaultThreshold.
	Threshold float64
	// Assertions are the graders, parsed exactly as an AgentV eval
	// file's assertions: list.
	Assertions []eval.Assertion
	// Definition is the rule as written, as JSON, for the API.
	Definition json.RawMessage

	judges  bool // some assertion needs the judge
	scripts bool // some assertion runs a command (code-grader)
}

// rawRule is a rule as a file or an API request writes it.
type rawRule struct {
	Name             string   `yaml:"name"`
	Filter           string   `yaml:"filter"`
	Sample           *float64 `yaml:"sample"`
	BudgetUSDPerHour float64  `yaml:"budget_usd_per_hour"`
	Criteria         string   `yaml:"criteria"`
	Threshold        float64  `yaml:"threshold"`
	Assertions       any      `yaml:"assertions"`
}

type rawJudge struct {
	Model       string `yaml:"model"`
	BaseURL     string `yaml:"base_url"`
	APIKeyEnv   string `yaml:"api_key_env"`
	Timeout     string `yaml:"timeout"`
	Concurrency int    `yaml:"concurrency"`
}

type rawFile struct {
	Judge  *rawJudge `yaml:"judge"`
	Settle string    `yaml:"settle"`
	Rules  []rawRule `yaml:"rules"`
}

const keysHint = "a rules file holds judge: (model, base_url, api_key_env, timeout, concurrency), settle: and rules:, each rule name, filter, sample, budget_usd_per_hour, criteria, threshold and assertions"

const fileHint = `write "rules:", a list of rules with name:, filter:, sample: and assertions: (and "judge:" with model: for LLM graders)`

// ParseFile reads and parses the rules file at path. See Parse.
func ParseFile(path string) (*Config, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rules file: %w", err)
	}
	if fi.Size() > MaxRulesFileBytes {
		return nil, fmt.Errorf("%s: the rules file is %d bytes, more than %d; split it or shorten it", path, fi.Size(), MaxRulesFileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules file: %w", err)
	}
	return Parse(path, data)
}

// Parse parses a rules file: a judge: block (model, base_url, timeout,
// concurrency), settle: (a duration up to MaxSettle) and a rules: list, each rule a name, a filter, a sample
// rate, a budget, criteria, a threshold and assertions written as in an
// AgentV eval file. name is the file as errors name it. Every error
// begins with file:line:column and says what to do; all of a file's
// problems are reported, joined. Parse never panics.
func Parse(name string, data []byte) (*Config, error) {
	if len(data) > MaxRulesFileBytes {
		return nil, fmt.Errorf("%s: the rules file is %d bytes, more than %d; split it or shorten it", name, len(data), MaxRulesFileBytes)
	}
	var raw rawFile
	f, err := yamlpos.DecodeFile(data, name, "rules file", fileHint, &raw)
	if err != nil {
		if strings.Contains(err.Error(), "unknown field") {
			return nil, fmt.Errorf("%w (%s)", err, keysHint)
		}
		return nil, fmt.Errorf("%w; fix the YAML at this position", err)
	}
	at := func(path string) string { return yamlpos.At(f, name, path) }
	c := &Config{}
	var errs []error
	if j := raw.Judge; j != nil {
		c.Judge = JudgeConfig{Model: strings.TrimSpace(j.Model), BaseURL: j.BaseURL, APIKeyEnv: j.APIKeyEnv, Concurrency: j.Concurrency}
		if j.Timeout != "" {
			d, err := store.ParseDuration(j.Timeout)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("%s: judge timeout %q is not a positive duration; write e.g. 30s or 2m", at("$.judge.timeout"), j.Timeout))
			}
			c.Judge.Timeout = d
		}
		if j.Concurrency < 0 || j.Concurrency > 256 {
			errs = append(errs, fmt.Errorf("%s: judge concurrency %d is out of range; write 1 to 256 (calls in flight)", at("$.judge.concurrency"), j.Concurrency))
		}
		if c.Judge.Model == "" {
			errs = append(errs, fmt.Errorf("%s: judge has no model; write model: PROVIDER:MODEL (e.g. openai:gpt-4o-mini), as loupe eval --judge-model takes it", at("$.judge")))
		}
	}
	if raw.Settle != "" {
		d, err := store.ParseDuration(raw.Settle)
		if err != nil || d <= 0 || d > MaxSettle {
			errs = append(errs, fmt.Errorf("%s: settle %q is not a positive duration of at most %s; write how long a trace must receive nothing after its root run ended before it is graded, e.g. 5s", at("$.settle"), raw.Settle, MaxSettle))
		} else {
			c.Settle = d
		}
	}
	if len(raw.Rules) == 0 {
		errs = append(errs, fmt.Errorf("%s: no rules; %s", at("$"), fileHint))
	}
	if len(raw.Rules) > MaxRules {
		errs = append(errs, fmt.Errorf("%s: %d rules, more than %d; keep fewer rules in one file", at("$.rules"), len(raw.Rules), MaxRules))
		raw.Rules = raw.Rules[:MaxRules]
	}
	seen := map[string]string{}
	for i, rr := range raw.Rules {
		path := fmt.Sprintf("$.rules[%d]", i)
		r, err := buildRule(f, name, data, path, rr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[r.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: rule name %q is taken (first at %s); give every rule its own name", at(path+".name"), r.Name, prev))
			continue
		}
		seen[r.Name] = at(path + ".name")
		if r.judges && c.Judge.Model == "" {
			errs = append(errs, fmt.Errorf("%s: rule %q has an LLM grader but the file has no judge; add judge: with model: PROVIDER:MODEL (e.g. openai:gpt-4o-mini)", at(path+".assertions"), r.Name))
			continue
		}
		c.Rules = append(c.Rules, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// ParseRule parses one rule, as the API takes it: a JSON (or YAML)
// object with the keys of a rules file's rule. name names the input in
// errors ("request"). A rule made this way may not run commands: code
// graders are refused (an API key must not be able to run programs on
// the server; put them in the rules file).
func ParseRule(name string, data []byte) (*Rule, error) {
	if len(data) > MaxRuleBytes {
		return nil, fmt.Errorf("%s: the rule is %d bytes, more than %d; shorten it", name, len(data), MaxRuleBytes)
	}
	var rr rawRule
	f, err := yamlpos.DecodeFile(data, name, "rule", `write an object with "name", "filter", "sample" and "assertions"`, &rr)
	if err != nil {
		return nil, fmt.Errorf("%w (a rule has name, filter, sample, budget_usd_per_hour, criteria, threshold and assertions)", err)
	}
	r, err := buildRule(f, name, data, "$", rr)
	if err != nil {
		return nil, err
	}
	if r.scripts {
		return nil, fmt.Errorf("%s: rule %q has a code-grader, which runs a command on the server; rules made through the API may not run commands: define this rule in the rules file (loupe serve --rules)", yamlpos.At(f, name, "$.assertions"), r.Name)
	}
	return r, nil
}

// buildRule checks one raw rule at path of f.
func buildRule(f *ast.File, name string, data []byte, path string, rr rawRule) (*Rule, error) {
	at := func(p string) string { return yamlpos.At(f, name, p) }
	r := &Rule{Name: rr.Name, Filter: strings.TrimSpace(rr.Filter), Sample: 1, BudgetUSDPerHour: rr.BudgetUSDPerHour,
		Criteria: rr.Criteria, Threshold: rr.Threshold}
	if err := checkRuleName(r.Name); err != nil {
		where := at(path)
		if r.Name != "" {
			where = at(path + ".name")
		}
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	if rr.Assertions == nil {
		return nil, fmt.Errorf("%s: rule %q has no assertions; add assertions: with at least one grader, written as in an AgentV eval file", at(path), r.Name)
	}
	if r.Filter != "" {
		if _, err := store.ParseQuery(r.Filter); err != nil {
			return nil, fmt.Errorf("%s: rule %q: filter: %v; write it as in loupe traces search (name:NAME tag:TAG tool:NAME status:error ...)", at(path+".filter"), r.Name, err)
		}
	}
	if s := rr.Sample; s != nil {
		if !(*s > 0 && *s <= 1) {
			return nil, fmt.Errorf("%s: rule %q: sample %v is not in (0, 1]; write the share of matching traces to evaluate (0.1 for 10%%), or pause the rule", at(path+".sample"), r.Name, *s)
		}
		r.Sample = *s
	}
	if !(r.BudgetUSDPerHour >= 0 && r.BudgetUSDPerHour < 1e6) {
		return nil, fmt.Errorf("%s: rule %q: budget_usd_per_hour %v is out of range; write dollars per hour (0 for no bound)", at(path+".budget_usd_per_hour"), r.Name, r.BudgetUSDPerHour)
	}
	if !(r.Threshold >= 0 && r.Threshold <= 1) {
		return nil, fmt.Errorf("%s: rule %q: threshold %v is not in [0, 1]; write the overall score that passes (0.8 by default)", at(path+".threshold"), r.Name, r.Threshold)
	}
	as, err := eval.ParseAssertions(name, data, path+".assertions", "rule "+quote(r.Name))
	if err != nil {
		return nil, err
	}
	r.Assertions = as
	for _, a := range as {
		switch {
		case a.Judge != nil:
			r.judges = true
		case a.Script != nil:
			r.scripts = true
		}
	}
	if def, err := definition(f, path); err == nil {
		r.Definition = def
	}
	return r, nil
}

// definition returns the node at path of f as JSON.
func definition(f *ast.File, path string) (json.RawMessage, error) {
	p, err := yaml.PathString(path)
	if err != nil {
		return nil, err
	}
	n, err := p.FilterFile(f)
	if err != nil {
		return nil, err
	}
	var v any
	if err := yaml.NodeToValue(n, &v); err != nil {
		return nil, err
	}
	return json.Marshal(jsonable(v, 0))
}

// jsonable turns what go-yaml decodes (maps with any keys) into values
// encoding/json takes.
func jsonable(v any, depth int) any {
	if depth > 100 {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e, depth+1)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e, depth+1)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e, depth+1)
		}
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x)
		}
	}
	return v
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// checkRuleName accepts letters, digits, '.', '_' and '-', 1 to
// MaxRuleNameBytes bytes: a rule's name becomes part of score names, a
// settings key and a URL path segment.
func checkRuleName(name string) error {
	if name == "" {
		return errors.New("rule has no name; add name: (letters, digits, . _ -)")
	}
	if len(name) > MaxRuleNameBytes {
		return fmt.Errorf("rule name %q is %d bytes; use at most %d", trace.TruncateUTF8(name, MaxRuleNameBytes), len(name), MaxRuleNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("rule name %q has %q at byte %d; use letters, digits, . _ and -", name, name[i:i+1], i)
		}
	}
	return nil
}

// Sampled reports whether rule r evaluates trace id: a hash of the
// rule's name and the trace id, read as a number in [0, 1), is below
// r.Sample. The decision depends on nothing else, so it is the same after
// a restart and on every collector.
func Sampled(r *Rule, id trace.TraceID) bool {
	if r.Sample >= 1 {
		return true
	}
	h := sha256.New()
	h.Write([]byte(r.Name))
	h.Write([]byte{0})
	h.Write(id[:])
	var sum [sha256.Size]byte
	x := binary.BigEndian.Uint64(h.Sum(sum[:0]))
	return float64(x>>11)/float64(1<<53) < r.Sample
}
