package online

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/store"
)

// Rule origins, in Status.Origin.
const (
	OriginFile = "file" // the rules file; changed by editing it
	OriginAPI  = "api"  // made through the API; kept in the store's settings
)

// Status is a rule as the API shows it: its definition, whether it runs,
// and its statistics.
type Status struct {
	Name             string          `json:"name"`
	Origin           string          `json:"origin"`
	Filter           string          `json:"filter"`
	Sample           float64         `json:"sample"`
	BudgetUSDPerHour float64         `json:"budget_usd_per_hour,omitempty"`
	Graders          []string        `json:"graders"`
	Definition       json.RawMessage `json:"definition,omitempty"`
	// State is "active" or "paused"; Reason says why a rule is paused
	// (by whom, or the budget it went over).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Stats  Stats  `json:"stats"`
}

// Stats are a rule's counters since this engine started (each collector
// counts its own) and, from the stored scores, its results over the
// last day.
type Stats struct {
	Matched   int64 `json:"matched"`   // ended traces its filter selected
	Sampled   int64 `json:"sampled"`   // of those, the ones sampling kept
	Evaluated int64 `json:"evaluated"` // graded and stored
	Dropped   int64 `json:"dropped"`   // ended while the settling set was full: not evaluated
	Errors    int64 `json:"errors"`    // a grader could not run, or the store failed
	// JudgeCalls counts the judge's calls; JudgeCostUSDHour is what they
	// cost in the last hour; UnpricedJudgeCalls were of unknown cost (the
	// price table has no price for the judge model), not in the cost.
	JudgeCalls         int64   `json:"judge_calls"`
	JudgeCostUSDHour   float64 `json:"judge_cost_usd_hour"`
	UnpricedJudgeCalls int64   `json:"unpriced_judge_calls"`
	// Scored, MeanScore and PassRate are over the rule's stored overall
	// scores of the last 24 hours (every collector's); History is the
	// same per hour, oldest first, hours without scores left out.
	Scored    int64    `json:"scored"`
	MeanScore float64  `json:"mean_score"`
	PassRate  float64  `json:"pass_rate"`
	History   []Bucket `json:"history"`
}

// Bucket is one hour of a rule's results.
type Bucket struct {
	Start     time.Time `json:"start"`
	Count     int64     `json:"count"`
	MeanScore float64   `json:"mean_score"`
	PassRate  float64   `json:"pass_rate"`
}

// maxStatScores bounds the scores read for one rule's statistics.
const maxStatScores = 10_000

// Rules returns every rule with its state and statistics: the file's
// first, in file order, then those made through the API, by name. It
// reads the API's rules from the store first, so that rules made on
// another collector show.
func (e *Engine) Rules(ctx context.Context) ([]Status, error) {
	if err := e.refresh(ctx); err != nil {
		return nil, err
	}
	var out []Status
	for _, rs := range e.snapshot() {
		st, err := e.status(ctx, rs)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Rule returns one rule's Status, or an error wrapping ErrNoRule.
func (e *Engine) Rule(ctx context.Context, name string) (Status, error) {
	if err := e.refresh(ctx); err != nil {
		return Status{}, err
	}
	e.mu.Lock()
	rs := e.rules[name]
	e.mu.Unlock()
	if rs == nil {
		return Status{}, fmt.Errorf("rule %q: %w", name, ErrNoRule)
	}
	return e.status(ctx, rs)
}

func (e *Engine) status(ctx context.Context, rs *ruleState) (Status, error) {
	r := rs.rule
	st := Status{Name: r.Name, Origin: rs.origin, Filter: r.Filter, Sample: r.Sample, BudgetUSDPerHour: r.BudgetUSDPerHour,
		Definition: r.Definition, State: "active", Graders: []string{}}
	for _, a := range r.Assertions {
		st.Graders = append(st.Graders, a.Name)
	}
	now := e.now()
	e.mu.Lock()
	if rs.paused {
		st.State, st.Reason = "paused", rs.reason
	}
	st.Stats.JudgeCostUSDHour = e.spent(rs, now)
	e.mu.Unlock()
	st.Stats.Matched, st.Stats.Sampled, st.Stats.Evaluated = rs.matched.Load(), rs.sampled.Load(), rs.evaluated.Load()
	st.Stats.Dropped, st.Stats.Errors = rs.dropped.Load(), rs.errors.Load()
	st.Stats.JudgeCalls, st.Stats.UnpricedJudgeCalls = rs.judgeCalls.Load(), rs.unpriced.Load()
	if err := e.history(ctx, r.Name, now, &st.Stats); err != nil {
		return Status{}, err
	}
	return st, nil
}

// history fills the score statistics of s from the rule's stored
// overall scores of the last 24 hours.
func (e *Engine) history(ctx context.Context, rule string, now time.Time, s *Stats) error {
	since := now.UTC().Add(-24 * time.Hour).Truncate(time.Hour)
	type acc struct {
		n            int64
		score, passN float64
	}
	hours := map[time.Time]*acc{}
	var tot acc
	for _, part := range []string{"score", "pass"} {
		f := store.ScoreFilter{Rule: rule, Name: scoreName(rule, part), Source: store.SourceOnline, Since: since, Limit: 1000}
		for read := 0; read < maxStatScores; {
			page, err := e.scores.Scores(ctx, f)
			if err != nil {
				return err
			}
			for _, sc := range page.Scores {
				h := sc.Time.UTC().Truncate(time.Hour)
				a := hours[h]
				if a == nil {
					a = &acc{}
					hours[h] = a
				}
				if part == "score" {
					a.n++
					a.score += sc.Value
					tot.n++
					tot.score += sc.Value
				} else {
					a.passN += sc.Value
					tot.passN += sc.Value
				}
			}
			read += len(page.Scores)
			if page.Next == "" {
				break
			}
			f.Cursor = page.Next
		}
	}
	s.History = []Bucket{}
	if tot.n == 0 {
		return nil
	}
	s.Scored, s.MeanScore, s.PassRate = tot.n, tot.score/float64(tot.n), tot.passN/float64(tot.n)
	for h := since; !h.After(now); h = h.Add(time.Hour) {
		if a := hours[h]; a != nil && a.n > 0 {
			s.History = append(s.History, Bucket{Start: h, Count: a.n, MeanScore: a.score / float64(a.n), PassRate: a.passN / float64(a.n)})
		}
	}
	return nil
}

// AddRule adds r as a rule made through the API, kept in the store's
// settings so that every collector of the store runs it. A rule of the
// same name is an error wrapping ErrConflict; so is a rule with an LLM
// grader when the engine has no judge.
func (e *Engine) AddRule(ctx context.Context, r *Rule) (Status, error) {
	if e.settings == nil {
		return Status{}, fmt.Errorf("this store cannot keep rules (it does not implement store.Settings): %w", ErrConflict)
	}
	if r.judges && e.judge == nil {
		return Status{}, fmt.Errorf("rule %q has an LLM grader and the server has no judge (start loupe serve with a rules file whose judge: names a model): %w", r.Name, ErrConflict)
	}
	if err := e.refresh(ctx); err != nil {
		return Status{}, err
	}
	e.mu.Lock()
	_, taken := e.rules[r.Name]
	e.mu.Unlock()
	if taken {
		return Status{}, fmt.Errorf("a rule named %q exists; delete it first or pick another name: %w", r.Name, ErrConflict)
	}
	v, err := json.Marshal(storedRule{Definition: r.Definition, Created: e.now().UTC()})
	if err != nil {
		return Status{}, err
	}
	if err := e.settings.PutSetting(ctx, RulePrefix+r.Name, string(v)); err != nil {
		return Status{}, err
	}
	if err := e.refresh(ctx); err != nil {
		return Status{}, err
	}
	return e.Rule(ctx, r.Name)
}

// Pause stops a rule from evaluating until Resume; reason is shown with
// it. A rule made through the API stays paused for every collector and
// across restarts; a file rule only in this process.
func (e *Engine) Pause(ctx context.Context, name, reason string) (Status, error) {
	if reason == "" {
		reason = "paused through the API"
	}
	if err := e.setPaused(ctx, name, true, reason); err != nil {
		return Status{}, err
	}
	return e.Rule(ctx, name)
}

// Resume lets a paused rule evaluate again (its hourly budget counts
// from now on the costs of the last hour).
func (e *Engine) Resume(ctx context.Context, name string) (Status, error) {
	if err := e.setPaused(ctx, name, false, ""); err != nil {
		return Status{}, err
	}
	e.mu.Lock()
	if rs := e.rules[name]; rs != nil {
		rs.costs = nil // the budget starts again
	}
	e.mu.Unlock()
	return e.Rule(ctx, name)
}

// DeleteRule removes a rule made through the API. A file rule cannot be
// deleted (ErrConflict: edit the file); an unknown one is ErrNoRule. The
// rule's scores stay.
func (e *Engine) DeleteRule(ctx context.Context, name string) error {
	if err := e.refresh(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	rs := e.rules[name]
	e.mu.Unlock()
	switch {
	case rs == nil:
		return fmt.Errorf("rule %q: %w", name, ErrNoRule)
	case rs.origin == OriginFile:
		return fmt.Errorf("rule %q is defined in the rules file; remove it there and restart loupe serve (or pause it): %w", name, ErrConflict)
	}
	if _, err := e.settings.DeleteSetting(ctx, RulePrefix+name); err != nil {
		return err
	}
	return e.refresh(ctx)
}

// setPaused pauses or resumes a rule; an API rule's state is written to
// the store.
func (e *Engine) setPaused(ctx context.Context, name string, paused bool, reason string) error {
	e.mu.Lock()
	rs := e.rules[name]
	if rs == nil {
		e.mu.Unlock()
		return fmt.Errorf("rule %q: %w", name, ErrNoRule)
	}
	if rs.origin == OriginFile {
		rs.paused, rs.reason = paused, reason
		e.countActive()
		e.mu.Unlock()
		return nil
	}
	sr := storedRule{Definition: rs.rule.Definition, Paused: paused, Reason: reason, Created: rs.created}
	e.mu.Unlock()
	v, err := json.Marshal(sr)
	if err != nil {
		return err
	}
	if err := e.settings.PutSetting(ctx, RulePrefix+name, string(v)); err != nil {
		return err
	}
	return e.refresh(ctx)
}

// refresh reads the API's rules from the store's settings: new ones are
// added, changed ones (paused, resumed) updated with their counters kept,
// deleted ones removed.
func (e *Engine) refresh(ctx context.Context) error {
	if e.settings == nil {
		return nil
	}
	m, err := e.settings.Settings(ctx, RulePrefix)
	if err != nil {
		return fmt.Errorf("reading the rules: %w", err)
	}
	type parsed struct {
		sr    storedRule
		rule  *Rule
		value string
	}
	got := map[string]parsed{}
	e.mu.Lock()
	known := map[string]string{}
	for n, rs := range e.rules {
		if rs.origin == OriginAPI {
			known[n] = rs.stored
		}
	}
	e.mu.Unlock()
	for k, v := range m {
		name := strings.TrimPrefix(k, RulePrefix)
		var sr storedRule
		if err := json.Unmarshal([]byte(v), &sr); err != nil {
			e.log.Warn("loupe serve: online rules: unreadable rule in the store; delete it (DELETE /api/v1/rules/NAME) and add it again", "rule", name, "err", err)
			continue
		}
		p := parsed{sr: sr, value: v}
		if known[name] != v {
			r, err := ParseRule(k, sr.Definition)
			if err != nil || r.Name != name {
				e.log.Warn("loupe serve: online rules: a rule in the store does not parse; delete it and add it again", "rule", name, "err", err)
				continue
			}
			p.rule = r
		}
		got[name] = p
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for n, rs := range e.rules {
		if _, ok := got[n]; rs.origin == OriginAPI && !ok {
			delete(e.rules, n)
		}
	}
	for n, p := range got {
		rs := e.rules[n]
		if rs != nil && rs.origin == OriginFile {
			continue // a file rule's name wins
		}
		if rs == nil {
			if p.rule == nil {
				continue
			}
			rs = &ruleState{origin: OriginAPI}
			e.rules[n] = rs
		}
		if p.rule != nil {
			rs.rule = p.rule
		}
		rs.stored, rs.paused, rs.reason, rs.created = p.value, p.sr.Paused, p.sr.Reason, p.sr.Created
	}
	e.sortOrder()
	e.countActive()
	return nil
}

// Dropped returns how many ended traces were not evaluated because the
// settling set was full (Options.QueueSize), since the engine started.
func (e *Engine) Dropped() int64 { return e.dropped.Load() }

// DroppedIn returns how many ended traces were dropped in the window
// before now (to the minute, at most a day back). Its signature is an
// alert.Source's, so that a monitor can watch the drops
// (`metric: online_dropped`); ctx is not used.
func (e *Engine) DroppedIn(_ context.Context, window time.Duration) (float64, error) {
	return float64(e.drops.count(e.now(), window)), nil
}

// dropLog counts drops per minute over the last day, in a ring.
type dropLog struct {
	mu      sync.Mutex
	minutes [24 * 60]struct {
		at int64 // the minute (Unix minutes) this slot counts
		n  int64
	}
}

func (l *dropLog) add(t time.Time) {
	m := t.Unix() / 60
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.minutes[m%int64(len(l.minutes))]
	if s.at != m {
		s.at, s.n = m, 0
	}
	s.n++
}

// count sums the drops of the minutes in (now-window, now].
func (l *dropLog) count(now time.Time, window time.Duration) int64 {
	to := now.Unix() / 60
	from := to - int64(window/time.Minute)
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for m := max(from+1, to-int64(len(l.minutes))+1); m <= to; m++ {
		if s := l.minutes[m%int64(len(l.minutes))]; s.at == m {
			n += s.n
		}
	}
	return n
}

// Pending returns how many traces wait to settle, are queued or are being
// evaluated.
func (e *Engine) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, p := range e.pending {
		n += p.n
	}
	return n
}
