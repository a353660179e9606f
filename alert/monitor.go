// Package alert watches the runs a Loupe store holds and says when
// something is wrong: a Monitor is a metric (error rate, p95 latency,
// cost, tokens, runs per minute, a score's mean or pass rate, or a Source a
// program registers, such as an online rule's drop count) taken over a
// sliding window of the traces its filter selects, compared with a
// threshold. An Engine evaluates monitors on a Clock its caller controls;
// a monitor fires when its condition has held for For evaluations in a
// row, and resolves when the value has come back past the resolve
// threshold (a hysteresis band, so that a value hovering at the threshold
// does not flap) for ResolveFor evaluations. Firings, with a sample of the
// traces that caused them, and every webhook delivery attempt are stored
// (store.Alerts); webhooks get a JSON or a Slack-shaped body, with retries,
// backoff and jitter.
//
// Monitor definitions live in the store's settings (store.Settings, keys
// "monitor:NAME"), so that every collector on a store evaluates the same
// monitors; the store keeps at most one open firing per monitor, so
// collectors sharing it notify once per crossing.
package alert

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/loupe-dev/loupe/internal/yamlpos"
	"github.com/loupe-dev/loupe/store"
)

// The built-in metrics a Monitor can watch. Others are the names of
// Sources registered with the Engine.
const (
	ErrorRate     = "error_rate"      // failed runs / runs in the window (0 to 1); see store.SummaryFailed
	P95Latency    = "p95_latency"     // the 95th percentile of the runs' durations, in seconds
	Cost          = "cost"            // USD spent by the runs of the window
	Tokens        = "tokens"          // input plus output tokens of the runs of the window
	RunsPerMinute = "runs_per_minute" // runs started in the window, per minute
	ScoreMean     = "score_mean"      // the mean of Score's values given in the window
	ScorePassRate = "score_pass_rate" // the share of Score's values at least Pass (0 to 1)
)

// Limits of a monitor's definition.
const (
	MaxMonitors  = 1000 // monitors in a store
	MaxWebhooks  = 8    // webhooks of one monitor
	MinEvery     = time.Second
	MaxWindow    = 31 * 24 * time.Hour
	MaxFor       = 1000 // For and ResolveFor
	maxURLBytes  = 2048
	settingsKey  = "monitor:"
	defaultEvery = time.Minute
)

// Duration is a time.Duration written as text in JSON and YAML: a Go
// duration ("90s", "5m") or a number of days ("7d").
type Duration time.Duration

// MarshalText writes d as a Go duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration or a number of days.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := store.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q: %v", b, err)
	}
	*d = Duration(v)
	return nil
}

// A Webhook is where a monitor posts when it fires and when it resolves.
type Webhook struct {
	// URL is an http or https URL. It often holds a secret (Slack's
	// incoming webhooks carry their token in the path): logs and API
	// answers show it redacted (RedactURL).
	URL string `json:"url"`
	// Format is the body: "json" (the default; see Notification) or
	// "slack" (Slack's incoming webhooks: {"text": …, "blocks": […]}).
	Format string `json:"format,omitempty"`
}

// A Monitor watches one metric of the stored runs. The zero value is not
// valid; Validate says what is missing. Monitors are values: an Engine
// keeps its own copies.
type Monitor struct {
	// Name identifies the monitor: letters, digits and . _ - : (at most
	// 128 bytes).
	Name string `json:"name"`
	// Metric is one of the constants above, or the name of a registered
	// Source.
	Metric string `json:"metric"`
	// Score is the score name of ScoreMean and ScorePassRate.
	Score string `json:"score,omitempty"`
	// Pass is the value a score must reach to pass, for ScorePassRate;
	// nil means 1 (a boolean score's true).
	Pass *float64 `json:"pass,omitempty"`
	// Filter selects the runs of trace metrics, in the search language
	// (store.ParseQuery): name:, status:, tag:, model:, tool:,
	// min_duration:, max_duration:, has:errors. Text, type:, id:, since:
	// and until: are refused (the window sets the time). Evaluation
	// results (store.TagEvaluation) are left out, as in the runs list.
	Filter string `json:"filter,omitempty"`
	// Window is how far back each evaluation looks (the traces that
	// started in [now-Window, now]); Every is how often it is evaluated
	// (0: a minute, at least MinEvery).
	Window Duration `json:"window"`
	Every  Duration `json:"every,omitempty"`
	// Op compares the value with Threshold: ">", ">=", "<" or "<="
	// ("": ">"). The condition holds when value Op Threshold.
	Op        string  `json:"op,omitempty"`
	Threshold float64 `json:"threshold"`
	// Resolve is the resolve threshold: a firing monitor resolves when
	// value Op Resolve no longer holds. nil means Threshold; a Resolve on
	// the good side of Threshold (below it for > and >=) makes a
	// hysteresis band, in which a firing monitor stays firing and a quiet
	// one stays quiet.
	Resolve *float64 `json:"resolve,omitempty"`
	// For is how many evaluations in a row the condition must hold before
	// the monitor fires (0: 1); ResolveFor how many in a row it must be
	// clear before it resolves (0: For).
	For        int `json:"for,omitempty"`
	ResolveFor int `json:"resolve_for,omitempty"`
	// MinRuns is how many runs the window must hold for a trace metric to
	// have a value (0: 1 for error_rate and p95_latency, none for the
	// others). A window without a value (too few runs, no scores) never
	// fires, and counts as clear for a firing monitor.
	MinRuns int `json:"min_runs,omitempty"`
	// Webhooks are notified of every firing and resolution.
	Webhooks []Webhook `json:"webhooks,omitempty"`
}

// FieldError is a monitor's definition at fault: Field names the field as
// JSON and YAML write it ("window", "webhooks[0].url").
type FieldError struct {
	Field string
	Err   error
}

// Error says which field is wrong and why.
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// TraceMetric reports whether metric is read from the traces' summaries.
func TraceMetric(metric string) bool {
	switch metric {
	case ErrorRate, P95Latency, Cost, Tokens, RunsPerMinute:
		return true
	}
	return false
}

// builtin reports whether metric is a built-in one.
func builtin(metric string) bool {
	return TraceMetric(metric) || metric == ScoreMean || metric == ScorePassRate
}

// Validate checks m, with sources the names of the registered Sources
// (nil: any name that is not built in is taken as a source). The error
// is a *FieldError.
func (m *Monitor) Validate(sources func(name string) bool) error {
	if err := checkName(m.Name); err != nil {
		return &FieldError{Field: "name", Err: err}
	}
	switch {
	case m.Metric == "":
		return fieldErr("metric", "is empty; use one of %s, or a registered source", strings.Join(Metrics(), ", "))
	case !builtin(m.Metric) && sources != nil && !sources(m.Metric):
		return fieldErr("metric", "%q is neither built in (%s) nor a registered source", m.Metric, strings.Join(Metrics(), ", "))
	case !builtin(m.Metric) && checkName(m.Metric) != nil:
		return fieldErr("metric", "%q is not a metric name (letters, digits and . _ - :)", m.Metric)
	}
	if m.Metric == ScoreMean || m.Metric == ScorePassRate {
		if err := checkName(m.Score); err != nil {
			return &FieldError{Field: "score", Err: fmt.Errorf("%s needs the score's name: %v", m.Metric, err)}
		}
		if m.Filter != "" {
			return fieldErr("filter", "score metrics take no filter yet: a score is selected by its name")
		}
	} else if m.Score != "" || m.Pass != nil {
		return fieldErr("score", "is only for %s and %s", ScoreMean, ScorePassRate)
	}
	if !TraceMetric(m.Metric) && m.MinRuns != 0 {
		return fieldErr("min_runs", "is only for metrics of runs (%s, %s, %s, %s, %s)", ErrorRate, P95Latency, Cost, Tokens, RunsPerMinute)
	}
	if _, err := m.query(time.Now()); err != nil {
		return err
	}
	switch w := time.Duration(m.Window); {
	case w <= 0:
		return fieldErr("window", "is missing; say how far back to look, e.g. 5m")
	case w > MaxWindow:
		return fieldErr("window", "%s is longer than %s", w, MaxWindow)
	}
	if e := time.Duration(m.Every); e != 0 && (e < MinEvery || e > MaxWindow) {
		return fieldErr("every", "%s is out of range (%s to %s)", e, MinEvery, MaxWindow)
	}
	switch m.Op {
	case "", ">", ">=", "<", "<=":
	default:
		return fieldErr("op", "%q is not one of >, >=, <, <=", m.Op)
	}
	if !finite(m.Threshold) {
		return fieldErr("threshold", "is not a finite number")
	}
	if m.Pass != nil && !finite(*m.Pass) {
		return fieldErr("pass", "is not a finite number")
	}
	if r := m.Resolve; r != nil {
		switch {
		case !finite(*r):
			return fieldErr("resolve", "is not a finite number")
		case m.above() && *r > m.Threshold:
			return fieldErr("resolve", "%v is above the threshold %v; for %s it must be at or below it (the value must come back under it)", *r, m.Threshold, m.op())
		case !m.above() && *r < m.Threshold:
			return fieldErr("resolve", "%v is below the threshold %v; for %s it must be at or above it", *r, m.Threshold, m.op())
		}
	}
	for _, f := range [...]struct {
		name string
		v    int
	}{{"for", m.For}, {"resolve_for", m.ResolveFor}, {"min_runs", m.MinRuns}} {
		if f.v < 0 || f.v > MaxFor && f.name != "min_runs" || f.v > math.MaxInt32 {
			return fieldErr(f.name, "%d is out of range (0 to %d)", f.v, MaxFor)
		}
	}
	if len(m.Webhooks) > MaxWebhooks {
		return fieldErr("webhooks", "%d webhooks are more than %d", len(m.Webhooks), MaxWebhooks)
	}
	for i, h := range m.Webhooks {
		field := fmt.Sprintf("webhooks[%d]", i)
		if err := checkURL(h.URL); err != nil {
			return &FieldError{Field: field + ".url", Err: err}
		}
		if h.Format != "" && h.Format != "json" && h.Format != "slack" {
			return fieldErr(field+".format", "%q is not json or slack", h.Format)
		}
	}
	return nil
}

// Metrics returns the built-in metrics' names.
func Metrics() []string {
	return []string{ErrorRate, P95Latency, Cost, Tokens, RunsPerMinute, ScoreMean, ScorePassRate}
}

func checkName(name string) error {
	if name == "" {
		return errors.New("is empty")
	}
	if len(name) > store.MaxMonitorNameBytes {
		return fmt.Errorf("is %d bytes; at most %d", len(name), store.MaxMonitorNameBytes)
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-:", r))
	}); i >= 0 {
		return fmt.Errorf("%q has %q at byte %d; use letters, digits, '.', '_', '-' and ':'", name, name[i], i)
	}
	return nil
}

func checkURL(s string) error {
	if len(s) > maxURLBytes {
		return fmt.Errorf("is %d bytes; at most %d", len(s), maxURLBytes)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("is not a URL (%s)", RedactURL(s))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%s is not an http or https URL with a host", RedactURL(s))
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// op returns m's comparison, ">" by default.
func (m *Monitor) op() string {
	if m.Op == "" {
		return ">"
	}
	return m.Op
}

// above reports whether m fires on high values.
func (m *Monitor) above() bool { return m.op() == ">" || m.op() == ">=" }

// holds reports whether v op t.
func (m *Monitor) holds(v, t float64) bool {
	switch m.op() {
	case ">":
		return v > t
	case ">=":
		return v >= t
	case "<":
		return v < t
	default:
		return v <= t
	}
}

// resolveAt returns the resolve threshold.
func (m *Monitor) resolveAt() float64 {
	if m.Resolve != nil {
		return *m.Resolve
	}
	return m.Threshold
}

func (m *Monitor) every() time.Duration {
	if m.Every == 0 {
		return defaultEvery
	}
	return time.Duration(m.Every)
}

func (m *Monitor) forN() int { return max(m.For, 1) }

func (m *Monitor) resolveForN() int {
	if m.ResolveFor > 0 {
		return m.ResolveFor
	}
	return m.forN()
}

func (m *Monitor) minRuns() int64 {
	if m.MinRuns == 0 && (m.Metric == ErrorRate || m.Metric == P95Latency) {
		return 1
	}
	return int64(m.MinRuns)
}

// query returns the store query m's Filter means, relative to now (the
// evaluation rule applied), without its window.
func (m *Monitor) query(now time.Time) (store.Query, error) {
	q, err := store.ParseQueryAt(m.Filter, now)
	if err != nil {
		return q, &FieldError{Field: "filter", Err: err}
	}
	switch {
	case q.HasText():
		return q, fieldErr("filter", "free text (%q) selects records, not runs; use filters such as tag:, name:, status:, tool:", strings.Join(append(q.Words, q.Phrases...), " "))
	case len(q.Types) > 0:
		return q, fieldErr("filter", "type: selects records, not runs")
	case len(q.IDs) > 0:
		return q, fieldErr("filter", "id: would watch fixed runs; use tag: or name:")
	case !q.Since.IsZero() || !q.Until.IsZero():
		return q, fieldErr("filter", "since: and until: are set by the window; leave them out")
	}
	return store.Criteria{}.AgentRunsQuery(q, now)
}

// sampleBy is the order of the traces a firing of m names: those that
// made the value what it is first.
func (m *Monitor) sampleBy() string {
	switch m.Metric {
	case ErrorRate:
		return store.SampleErrors
	case P95Latency:
		return store.SampleDuration
	case Cost:
		return store.SampleCost
	case Tokens:
		return store.SampleTokens
	}
	return store.SampleNewest
}

// Redacted returns a copy of m whose webhook URLs are redacted
// (RedactURL), for logs and API answers.
func (m Monitor) Redacted() Monitor {
	hooks := make([]Webhook, len(m.Webhooks))
	for i, h := range m.Webhooks {
		hooks[i] = Webhook{URL: RedactURL(h.URL), Format: h.Format}
	}
	m.Webhooks = hooks
	return m
}

// RedactURL returns u without what may be a secret: user info, the path
// (after the first segment, which often names the kind of hook), the
// query and the fragment; "https://hooks.slack.com/services/…". It is how
// webhook URLs appear in logs, stored deliveries and API answers.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "(a malformed URL)"
	}
	out := p.Scheme + "://" + p.Host
	path := strings.TrimPrefix(p.EscapedPath(), "/")
	first, rest, _ := strings.Cut(path, "/")
	if first != "" {
		if len(first) > 24 || rest == "" && p.RawQuery == "" && len(first) > 16 {
			return out + "/…"
		}
		out += "/" + first
	}
	if rest != "" || p.RawQuery != "" || p.User != nil || p.Fragment != "" {
		out += "/…"
	}
	return out
}

// File is a monitors file (loupe serve --monitors):
//
//	monitors:
//	  - name: agent-errors
//	    metric: error_rate
//	    filter: tag:env:prod
//	    window: 10m
//	    every: 1m
//	    threshold: 0.2
//	    resolve: 0.1
//	    for: 2
//	    webhooks:
//	      - url: https://hooks.slack.com/services/…
//	        format: slack
type File struct {
	Monitors []Monitor `json:"monitors"`
}

// MaxFileBytes bounds a monitors file.
const MaxFileBytes = 1 << 20

// ParseFile reads a monitors file and validates every monitor (with
// sources as Validate takes it). Errors begin with filename:line:column.
func ParseFile(data []byte, filename string, sources func(string) bool) ([]Monitor, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: is %d bytes, more than the limit of %d", filename, len(data), MaxFileBytes)
	}
	var f File
	af, err := yamlpos.DecodeFile(data, filename, "monitors file", "write a list under monitors:", &f)
	if err != nil {
		if perr := durationError(data, filename); perr != nil {
			return nil, perr
		}
		return nil, err
	}
	if len(f.Monitors) > MaxMonitors {
		return nil, fmt.Errorf("%s: %d monitors are more than the limit of %d", yamlpos.At(af, filename, "$.monitors"), len(f.Monitors), MaxMonitors)
	}
	seen := map[string]bool{}
	for i := range f.Monitors {
		m := &f.Monitors[i]
		if err := m.Validate(sources); err != nil {
			path := fmt.Sprintf("$.monitors[%d]", i)
			at := yamlpos.At(af, filename, path)
			var fe *FieldError
			if errors.As(err, &fe) {
				if p := yamlpos.At(af, filename, path+"."+fe.Field); p != filename {
					at = p
				}
			}
			return nil, fmt.Errorf("%s: monitor %q: %v", at, m.Name, err)
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("%s: monitor %q is defined twice", yamlpos.At(af, filename, fmt.Sprintf("$.monitors[%d].name", i)), m.Name)
		}
		seen[m.Name] = true
	}
	return f.Monitors, nil
}

// durationError finds a window or every that is not a duration, which
// go-yaml reports without a position, and says where it is; nil if none.
func durationError(data []byte, filename string) error {
	af, err := yamlpos.Parse(data)
	if err != nil || len(af.Docs) != 1 {
		return nil
	}
	var raw struct {
		Monitors []map[string]any `yaml:"monitors"`
	}
	if yaml.Unmarshal(data, &raw) != nil {
		return nil
	}
	for i, m := range raw.Monitors {
		for _, k := range []string{"window", "every"} {
			v, ok := m[k]
			if !ok {
				continue
			}
			var d Duration
			if err := d.UnmarshalText(fmt.Append(nil, v)); err != nil {
				name, _ := m["name"].(string)
				return fmt.Errorf("%s: monitor %q: %s: %v", yamlpos.At(af, filename, fmt.Sprintf("$.monitors[%d].%s", i, k)), name, k, err)
			}
		}
	}
	return nil
}

// encode is the JSON of m kept in the store's settings.
func encode(m *Monitor) (string, error) {
	b, err := json.Marshal(m)
	return string(b), err
}
