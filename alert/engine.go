package alert

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// A Clock is the time an Engine runs on: Now for evaluations, and a
// ticker for Run. Tests pass one they drive; the zero Options use the
// system clock.
type Clock interface {
	Now() time.Time
	// NewTicker returns a ticker that delivers ticks every d on C until
	// stop is called.
	NewTicker(d time.Duration) (c <-chan time.Time, stop func())
}

// SystemClock is the Clock of time.Now and time.NewTicker.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTicker returns a time.Ticker's channel and its Stop.
func (SystemClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// A Source is a metric a program provides (an online rule's drop count,
// a queue's depth): its value over the window that ends now. NaN means no
// value. It must be safe for concurrent use.
type Source func(ctx context.Context, window time.Duration) (float64, error)

// Options configure an Engine. Store is required; the zero value of
// every other field is useful.
type Options struct {
	// Store holds the traces, the monitors' definitions (it must
	// implement store.Settings) and their firings (store.Alerts).
	Store store.Store
	// Clock is the engine's time; nil means SystemClock.
	Clock Clock
	// Tick is how often Run looks for monitors that are due; 0 means a
	// second.
	Tick time.Duration
	// Sources are metrics by name, besides the built-in ones.
	Sources map[string]Source
	// UIURL is the web UI's base URL ("http://127.0.0.1:4318/"), for the
	// links to the runs in notifications; "" leaves them relative.
	UIURL string
	// Client posts to webhooks; nil means a client that follows no
	// redirects. Its CheckRedirect is replaced so that none is followed:
	// a webhook that moved answers an error, it is not chased.
	Client *http.Client
	// Timeout bounds each delivery attempt; 0 means 10 s.
	Timeout time.Duration
	// Attempts bounds the tries of one delivery (0: 5). Between tries
	// the engine waits a random time (full jitter) under a ceiling that
	// starts at MinBackoff (0: 1 s) and doubles up to MaxBackoff (0: 1
	// min), or what the webhook's Retry-After asks.
	Attempts               int
	MinBackoff, MaxBackoff time.Duration
	// Logger receives what happens (firings, failed deliveries); nil
	// means slog.Default(). Webhook URLs are redacted in it.
	Logger *slog.Logger
}

// Engine evaluates the monitors kept in a store and notifies their
// webhooks. Create it with New; it is safe for concurrent use. Run (or
// calls to Evaluate) drive it; Close stops the deliveries in flight.
type Engine struct {
	o      Options
	st     store.Store
	set    store.Settings
	al     store.Alerts
	clock  Clock
	log    *slog.Logger
	client *http.Client

	ctx    context.Context // the deliveries'; ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // deliveries in flight

	evalMu sync.Mutex // one evaluation pass at a time
	mu     sync.Mutex // guards the fields below
	states map[string]*state
	src    map[string]Source
	// inFlight holds, by firing id and webhook URL, the delivery of a
	// firing, which the delivery of its resolution waits for.
	inFlight map[string]chan struct{}
}

// state is what the engine knows of one monitor between evaluations.
type state struct {
	def       string // the definition's JSON it was last evaluated with
	next      time.Time
	breach    int // evaluations in a row the condition held (while quiet)
	clear     int // evaluations in a row it was clear (while firing)
	firing    *store.Firing
	value     float64 // NaN: none
	evaluated time.Time
	err       string
}

// New returns an Engine over o.Store, which must keep settings and
// alerts (the SQLite and PostgreSQL backends do).
func New(o Options) (*Engine, error) {
	if o.Store == nil {
		return nil, errors.New("alert: Options.Store is nil")
	}
	set, ok := o.Store.(store.Settings)
	if !ok {
		return nil, fmt.Errorf("alert: store %T keeps no settings, where monitors are defined", o.Store)
	}
	al, ok := o.Store.(store.Alerts)
	if !ok {
		return nil, fmt.Errorf("alert: store %T keeps no firings (store.Alerts)", o.Store)
	}
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	e := &Engine{o: o, st: o.Store, set: set, al: al, clock: o.Clock, log: o.Logger, states: map[string]*state{}, src: map[string]Source{}, inFlight: map[string]chan struct{}{}}
	if e.log == nil {
		e.log = slog.Default()
	}
	c := http.Client{}
	if o.Client != nil {
		c = *o.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	e.client = &c
	for name, s := range o.Sources {
		e.src[name] = s
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

// Register adds (or replaces) the Source of a metric name, which
// monitors may then watch. name must not be a built-in metric.
func (e *Engine) Register(name string, s Source) error {
	if builtin(name) {
		return fmt.Errorf("alert: %q is a built-in metric", name)
	}
	if err := checkName(name); err != nil {
		return fmt.Errorf("alert: source name %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.src[name] = s
	return nil
}

func (e *Engine) hasSource(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.src[name]
	return ok
}

// Put validates m and stores it as a monitor for every collector on the
// store, replacing the monitor of that name. A webhook URL given as it is
// shown redacted (RedactURL) keeps the stored URL at the same position,
// so that a definition read from the API can be written back.
func (e *Engine) Put(ctx context.Context, m Monitor) error {
	if err := m.Validate(e.hasSource); err != nil {
		return err
	}
	if old, err := e.Get(ctx, m.Name); err == nil {
		for i := range m.Webhooks {
			if i < len(old.Webhooks) && m.Webhooks[i].URL == RedactURL(old.Webhooks[i].URL) {
				m.Webhooks[i].URL = old.Webhooks[i].URL
			}
		}
	}
	all, err := e.set.Settings(ctx, settingsKey)
	if err != nil {
		return err
	}
	if _, ok := all[settingsKey+m.Name]; !ok && len(all) >= MaxMonitors {
		return fmt.Errorf("alert: the store holds %d monitors, the limit; delete one first", len(all))
	}
	v, err := encode(&m)
	if err != nil {
		return err
	}
	return e.set.PutSetting(ctx, settingsKey+m.Name, v)
}

// ErrNoMonitor is wrapped by the errors of Get and Delete for a monitor
// the store does not define.
var ErrNoMonitor = errors.New("no such monitor")

// Get returns the monitor named name, webhook URLs included.
func (e *Engine) Get(ctx context.Context, name string) (Monitor, error) {
	all, err := e.set.Settings(ctx, settingsKey+name)
	if err != nil {
		return Monitor{}, err
	}
	v, ok := all[settingsKey+name]
	if !ok {
		return Monitor{}, fmt.Errorf("monitor %q: %w", name, ErrNoMonitor)
	}
	var m Monitor
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return Monitor{}, fmt.Errorf("monitor %q: the stored definition is unreadable: %v", name, err)
	}
	return m, nil
}

// Delete removes the monitor named name. Its firings stay in the store;
// one still open is marked resolved now (with value 0, and no
// notification), so that a monitor defined again under the name starts
// quiet.
func (e *Engine) Delete(ctx context.Context, name string) error {
	ok, err := e.set.DeleteSetting(ctx, settingsKey+name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("monitor %q: %w", name, ErrNoMonitor)
	}
	open, err := e.al.Firings(ctx, store.FiringFilter{Monitor: name, Open: true, Limit: 1})
	if err != nil {
		return err
	}
	for _, f := range open {
		if _, err := e.al.ResolveFiring(ctx, f.ID, e.clock.Now(), 0); err != nil {
			return err
		}
	}
	return nil
}

// monitors reads every stored definition, sorted by name; bad ones come
// back with their error.
func (e *Engine) monitors(ctx context.Context) ([]Monitor, map[string]string, map[string]error, error) {
	all, err := e.set.Settings(ctx, settingsKey)
	if err != nil {
		return nil, nil, nil, err
	}
	var ms []Monitor
	defs := map[string]string{}
	bad := map[string]error{}
	for k, v := range all {
		var m Monitor
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			bad[strings.TrimPrefix(k, settingsKey)] = err
			continue
		}
		if err := m.Validate(e.hasSource); err != nil {
			bad[m.Name] = err
		}
		ms = append(ms, m)
		defs[m.Name] = v
	}
	slices.SortFunc(ms, func(a, b Monitor) int { return strings.Compare(a.Name, b.Name) })
	return ms, defs, bad, nil
}

// The states of a monitor, as Status reports them.
const (
	StateOK        = "ok"        // quiet
	StatePending   = "pending"   // the condition holds, not yet For times in a row
	StateFiring    = "firing"    // fired and not resolved
	StateResolving = "resolving" // firing, clear, not yet ResolveFor times in a row
	StateNoData    = "nodata"    // quiet, and the last window had no value
	StateUnknown   = "unknown"   // not evaluated by this collector yet
	StateError     = "error"     // the definition or the last evaluation failed
)

// Status is a monitor with what the engine knows of it.
type Status struct {
	Monitor Monitor `json:"monitor"` // webhook URLs redacted
	State   string  `json:"state"`
	// Value is the last value this collector computed; nil before the
	// first evaluation or when the window had none.
	Value     *float64      `json:"value"`
	Evaluated time.Time     `json:"evaluated,omitzero"`
	Error     string        `json:"error,omitempty"`
	Firing    *store.Firing `json:"firing,omitempty"` // the open firing, from the store
}

// Statuses returns every monitor of the store with its state, sorted by
// name. The firing state comes from the store (whichever collector
// opened it); the value from this engine's last evaluation.
func (e *Engine) Statuses(ctx context.Context) ([]Status, error) {
	ms, _, bad, err := e.monitors(ctx)
	if err != nil {
		return nil, err
	}
	open, err := e.al.Firings(ctx, store.FiringFilter{Open: true, Limit: 1000})
	if err != nil {
		return nil, err
	}
	openBy := map[string]*store.Firing{}
	for i := range open {
		openBy[open[i].Monitor] = &open[i]
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Status, 0, len(ms))
	for _, m := range ms {
		s := Status{Monitor: m.Redacted(), State: StateUnknown, Firing: openBy[m.Name]}
		if st := e.states[m.Name]; st != nil {
			s.Evaluated, s.Error = st.evaluated, st.err
			if !math.IsNaN(st.value) {
				v := st.value
				s.Value = &v
			}
			switch {
			case st.err != "":
				s.State = StateError
			case st.firing != nil && st.clear > 0:
				s.State = StateResolving
			case st.breach > 0:
				s.State = StatePending
			case math.IsNaN(st.value):
				s.State = StateNoData
			default:
				s.State = StateOK
			}
		}
		if s.Firing != nil && s.State != StateResolving && s.State != StateError {
			s.State = StateFiring
		}
		if err := bad[m.Name]; err != nil {
			s.State, s.Error = StateError, err.Error()
		}
		out = append(out, s)
	}
	return out, nil
}

// Firings returns stored firings with their deliveries (store.Alerts).
func (e *Engine) Firings(ctx context.Context, f store.FiringFilter) ([]store.Firing, error) {
	return e.al.Firings(ctx, f)
}

// Run evaluates the monitors that are due at every tick of the clock
// (Options.Tick) until ctx ends, then returns ctx's error. Evaluation
// errors are logged, not returned.
func (e *Engine) Run(ctx context.Context) error {
	c, stop := e.clock.NewTicker(e.o.Tick)
	defer stop()
	for {
		if err := e.Evaluate(ctx, e.clock.Now()); err != nil && ctx.Err() == nil {
			e.log.Error("alert: evaluation failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c:
		}
	}
}

// Evaluate evaluates, as of now, every monitor that is due (never
// evaluated, or Every has passed since its last evaluation), opens and
// resolves firings, and starts the deliveries of their notifications
// (Wait waits for them). It returns the first error of a monitor's
// evaluation; the other monitors are evaluated regardless.
func (e *Engine) Evaluate(ctx context.Context, now time.Time) error {
	e.evalMu.Lock()
	defer e.evalMu.Unlock()
	ms, defs, bad, err := e.monitors(ctx)
	if err != nil {
		return err
	}
	e.mu.Lock()
	for name := range e.states {
		if _, ok := defs[name]; !ok {
			delete(e.states, name) // deleted
		}
	}
	e.mu.Unlock()
	var first error
	for _, m := range ms {
		if bad[m.Name] != nil {
			continue
		}
		e.mu.Lock()
		st := e.states[m.Name]
		if st == nil || st.def != defs[m.Name] {
			// New, or redefined: count afresh (an open firing is kept).
			old := st
			st = &state{def: defs[m.Name], value: math.NaN()}
			if old != nil {
				st.firing = old.firing
			}
			e.states[m.Name] = st
		}
		due := !now.Before(st.next)
		e.mu.Unlock()
		if !due {
			continue
		}
		if err := e.evaluate(ctx, &m, st, now); err != nil {
			e.mu.Lock()
			st.err = err.Error()
			e.mu.Unlock()
			if first == nil {
				first = fmt.Errorf("monitor %s: %w", m.Name, err)
			}
		}
	}
	return first
}

// evaluate evaluates one monitor as of now and moves its state.
func (e *Engine) evaluate(ctx context.Context, m *Monitor, st *state, now time.Time) error {
	e.mu.Lock()
	st.next = now.Add(m.every())
	firing := st.firing
	e.mu.Unlock()
	value, sample, err := e.value(ctx, m, now)
	if err != nil {
		return err
	}
	if firing == nil {
		// Another collector on the store may have opened one.
		open, err := e.al.Firings(ctx, store.FiringFilter{Monitor: m.Name, Open: true, Limit: 1})
		if err != nil {
			return err
		}
		if len(open) > 0 {
			firing = &open[0]
		}
	}
	has := !math.IsNaN(value)
	breach := has && m.holds(value, m.Threshold)
	clear := !has || !m.holds(value, m.resolveAt())
	var fire, resolve bool
	e.mu.Lock()
	st.value, st.evaluated, st.err, st.firing = value, now, "", firing
	if firing == nil {
		st.clear = 0
		if breach {
			st.breach++
		} else {
			st.breach = 0
		}
		fire = st.breach >= m.forN()
	} else {
		st.breach = 0
		if clear {
			st.clear++
		} else {
			st.clear = 0
		}
		resolve = st.clear >= m.resolveForN()
	}
	e.mu.Unlock()
	switch {
	case fire:
		f := store.Firing{ID: newID(), Monitor: m.Name, Metric: m.Metric, Filter: m.Filter, Started: now, Value: value,
			Threshold: m.Threshold, Window: time.Duration(m.Window), TraceIDs: sample}
		open, opened, err := e.al.OpenFiring(ctx, f)
		if err != nil {
			return err
		}
		e.mu.Lock()
		st.firing, st.breach = &open, 0
		e.mu.Unlock()
		if opened {
			e.log.Warn("alert: monitor fired", "monitor", m.Name, "metric", m.Metric, "value", value, "threshold", m.Threshold)
			e.notify(m, open, store.AlertFiring, value, now)
		}
	case resolve:
		ok, err := e.al.ResolveFiring(ctx, firing.ID, now, orZero(value))
		if err != nil {
			return err
		}
		e.mu.Lock()
		st.firing, st.clear = nil, 0
		e.mu.Unlock()
		if ok {
			e.log.Info("alert: monitor resolved", "monitor", m.Name, "metric", m.Metric, "value", value)
			f := *firing
			f.Resolved, f.ResolvedValue = now, orZero(value)
			e.notify(m, f, store.AlertResolved, value, now)
		}
	}
	return nil
}

func orZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// value computes m's metric over the window that ends at now, and a
// sample of the traces behind it. NaN is no value.
func (e *Engine) value(ctx context.Context, m *Monitor, now time.Time) (float64, []trace.TraceID, error) {
	window := time.Duration(m.Window)
	switch m.Metric {
	case ScoreMean, ScorePassRate:
		return e.scoreValue(ctx, m, now)
	}
	if !TraceMetric(m.Metric) {
		e.mu.Lock()
		src := e.src[m.Metric]
		e.mu.Unlock()
		if src == nil {
			return math.NaN(), nil, fmt.Errorf("no source is registered for metric %q", m.Metric)
		}
		v, err := src(ctx, window)
		return v, nil, err
	}
	q, err := m.query(now)
	if err != nil {
		return math.NaN(), nil, err
	}
	f := q.Filter
	f.Since, f.Until = now.Add(-window), now.Add(1) // [now-window, now]
	w, err := store.Window(ctx, e.st, store.WindowQuery{Filter: f, Sample: store.MaxSample, SampleBy: m.sampleBy()})
	if err != nil {
		return math.NaN(), nil, err
	}
	if w.Traces < m.minRuns() {
		return math.NaN(), nil, nil
	}
	var v float64
	switch m.Metric {
	case ErrorRate:
		v = float64(w.ErrorTraces) / float64(w.Traces)
	case P95Latency:
		v = w.P95.Seconds()
	case Cost:
		v = w.CostUSD
	case Tokens:
		v = float64(w.InputTokens) + float64(w.OutputTokens)
	case RunsPerMinute:
		v = float64(w.Traces) / window.Minutes()
	}
	return v, w.Sample, nil
}

// maxScores bounds the scores one evaluation reads.
const maxScores = 100_000

// scoreValue is the mean or pass rate of m.Score's scores given in the
// window, read a page at a time from the store's store.Scorer.
func (e *Engine) scoreValue(ctx context.Context, m *Monitor, now time.Time) (float64, []trace.TraceID, error) {
	sc, ok := e.st.(store.Scorer)
	if !ok {
		return math.NaN(), nil, fmt.Errorf("the store keeps no scores (store.Scorer), which %s needs", m.Metric)
	}
	pass := 1.0
	if m.Pass != nil {
		pass = *m.Pass
	}
	f := store.ScoreFilter{Name: m.Score, Since: now.Add(-time.Duration(m.Window)), Until: now.Add(1), Limit: 1000}
	var n, passed int64
	var sum float64
	var sample []trace.TraceID
	for n < maxScores {
		page, err := sc.Scores(ctx, f)
		if err != nil {
			return math.NaN(), nil, err
		}
		for _, s := range page.Scores {
			if s.Kind == store.ScoreCategorical {
				continue
			}
			n++
			sum += s.Value
			ok := s.Value >= pass
			if ok {
				passed++
			}
			// The traces behind the value: those that failed (pass
			// rate) or scored lowest first would need a sort; the
			// newest failing ones are what a reader wants to open.
			if !ok && !s.TraceID.IsZero() && len(sample) < store.MaxSample && !slices.Contains(sample, s.TraceID) {
				sample = append(sample, s.TraceID)
			}
		}
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	if n == 0 {
		return math.NaN(), nil, nil
	}
	if m.Metric == ScoreMean {
		return sum / float64(n), sample, nil
	}
	return float64(passed) / float64(n), sample, nil
}

// Wait waits for the deliveries in flight.
func (e *Engine) Wait() { e.wg.Wait() }

// Close stops the deliveries in flight (their attempts so far are
// stored) and waits for them. Evaluate and Run may not be called after.
func (e *Engine) Close() {
	e.cancel()
	e.wg.Wait()
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
