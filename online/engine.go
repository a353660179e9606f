package online

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/eval/fromtrace"
	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/llm"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Defaults of Options.
const (
	// DefaultQueueSize holds the traces that end within the settle period
	// of a busy collector (16384 in 5 s is over 3000 runs a second), at
	// about 100 bytes each.
	DefaultQueueSize     = 16384
	DefaultWorkers       = 2
	DefaultShare         = 0.05
	DefaultSweepEvery    = time.Minute
	DefaultRefreshEvery  = 10 * time.Second
	DefaultCatchUpWindow = 24 * time.Hour
	DefaultCatchUpMargin = 30 * time.Minute
	checkpointEvery      = 5 * time.Second
	// maxBatch bounds the traces a worker takes from the queue at once.
	maxBatch = 32
	// The score writer commits what the workers graded after at most
	// writeDelay, or writeDelayBusy while ingest is busy, or at once when
	// it holds store.MaxScoreBatch scores or a judge's; each commit waits
	// at most writeTimeout.
	writeDelay     = 100 * time.Millisecond
	writeDelayBusy = time.Second
	writeTimeout   = 10 * time.Second
)

// DefaultSettle is how long a trace whose root run ended must receive no
// record before it is graded (Options.Settle); MaxSettle bounds
// Options.Settle and a rules file's settle:.
const (
	DefaultSettle = 5 * time.Second
	MaxSettle     = 10 * time.Minute
)

// Settings keys: API-made rules under RulePrefix+name, the checkpoint
// under CheckpointKey.
const (
	RulePrefix    = "rule:"
	CheckpointKey = "online:checkpoint"
)

// Errors of the rule management methods; test with errors.Is.
var (
	ErrNoRule   = errors.New("no such rule")
	ErrConflict = errors.New("conflict")
)

// Options configure an Engine. Store is required; the zero value of
// every other field is useful.
type Options struct {
	// Store holds the traces. It must also keep settings
	// (store.Settings) for rules made through the API and for the
	// checkpoint; without, only the file's rules run, and a restart does
	// not catch up.
	Store store.Store
	// Scores receives the scores; nil means Store, which must then be a
	// store.Scorer.
	Scores store.Scorer
	// Config holds the rules file's rules and judge; nil means no file.
	Config *Config
	// Judge, if set, grades the LLM graders instead of the model
	// Config.Judge names (a Go program's own judge). Config.Judge's
	// concurrency still applies.
	Judge eval.Judge
	// Prices prices the judge's calls; nil means price.Default.
	Prices *price.Table
	// QueueSize bounds the traces whose root run ended and that wait to
	// settle (see Settle); when that set is full, a trace that ends is
	// not evaluated, and counted as dropped by every active rule. It
	// also bounds the settled traces waiting for a worker: while that
	// queue is full, settled traces wait in the set, which then fills.
	// Zero means DefaultQueueSize.
	QueueSize int
	// Settle is how long a trace whose root run ended must receive no
	// record before it is graded, measured on this collector's clock
	// (Now) from the last commit that brought one of its records, so
	// that spans exported after their root (an OpenTelemetry
	// SimpleSpanProcessor exports each span in its own request, several
	// at once; a trace crosses services) are graded with it. Zero means
	// Config.Settle, or DefaultSettle when that is zero too; negative
	// grades a trace as soon as its root run.end is committed. At most
	// MaxSettle.
	Settle time.Duration
	// Workers is how many traces are evaluated at once; zero means
	// DefaultWorkers.
	Workers int
	// Share is the share of one CPU that evaluation may take while
	// ingest is busy (a commit in the last quarter second), in (0, 1]:
	// after each batch a worker rests for as long as the batch's work
	// (its waits for the judge not counted) takes at that share, so that
	// evaluation never competes with ingest for more than Share of a
	// CPU; work that waits too long then finds the queue full and is
	// dropped and counted. While ingest is idle, workers do not rest.
	// Zero means DefaultShare; 1 never rests.
	Share float64
	// SweepEvery is how often the engine looks for traces that went
	// stale without ending (store.StatusIncomplete); zero means
	// DefaultSweepEvery, negative turns the sweep off.
	SweepEvery time.Duration
	// RefreshEvery is how often rules made through the API (perhaps by
	// another collector) are read from the store; zero means
	// DefaultRefreshEvery.
	RefreshEvery time.Duration
	// CatchUpWindow is how far back, before the checkpoint, a restarted
	// engine looks for traces (by start time); zero means
	// DefaultCatchUpWindow. CatchUpMargin is how long before the
	// checkpoint a trace may have ended and still be looked at (clocks
	// differ; it should exceed the store's StaleAfter); zero means
	// DefaultCatchUpMargin.
	CatchUpWindow, CatchUpMargin time.Duration
	// Logger receives what goes wrong in the background; nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests set it.
	Now func() time.Time
}

// An Engine runs online evaluation rules over the traces of a store as
// they end. Create it with New and stop it with Close. Its methods are
// safe for concurrent use.
type Engine struct {
	o        Options
	st       store.Store
	scores   store.Scorer
	settings store.Settings // nil when the store keeps none
	judge    eval.Judge     // nil when there is none
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex
	rules   map[string]*ruleState
	order   []string // rule names: the file's in file order, then the API's by name
	pending map[trace.TraceID]pend
	holdCP  time.Time // while catching up: the checkpoint to keep
	closed  bool
	active  atomic.Int32 // rules that are not paused
	stale   map[trace.TraceID]struct{}

	queue   chan item
	stop    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // workers
	bg      sync.WaitGroup // the background loop
	dropped atomic.Int64
	drops   dropLog // when they were dropped, for DroppedIn
	// lastIngest is when Ended was last called (unix nanoseconds).
	lastIngest atomic.Int64

	// settling holds the traces whose root ended and that wait to settle:
	// when a commit last brought one of their records (Now's clock).
	// Guarded by mu; at most QueueSize; each is also in pending.
	settling map[trace.TraceID]time.Time
	wake     chan struct{} // tells the settler that settling is no longer empty
	settle   time.Duration // Options.Settle, resolved; 0 waits for nothing

	// The score writer (writeLoop) takes what the workers hand it on
	// writes and commits the scores of many traces and rules in one
	// store transaction; wdone is closed when it has ended. Its delays
	// are writeDelay and writeDelayBusy, set before the first write
	// (tests lengthen them). unwritten
	// counts, by rule and trace, the evaluations it holds that are not
	// committed yet, so that a trace queued again meanwhile is not
	// graded again.
	writes    chan scoreWrite
	wdone     chan struct{}
	delay     [2]time.Duration // writeDelay, writeDelayBusy
	writeBusy atomic.Int64     // the writer's time committing while ingest was busy, not yet rested for
	umu       sync.Mutex
	unwritten map[ruleTrace]int
}

// A scoreWrite is what a worker hands the score writer: a rule's graded
// traces to store (urgent when a judge graded them: they are committed at
// once), or the traces of a batch that are done once everything handed
// before them is committed.
type scoreWrite struct {
	rs      *ruleState
	gs      []graded
	urgent  bool
	release []trace.TraceID
}

type ruleTrace struct {
	rule string
	id   trace.TraceID
}

type item struct {
	id    trace.TraceID
	since time.Time // when the trace was seen to end (or the checkpoint it was caught up from)
}

type pend struct {
	n     int
	since time.Time
}

// ruleState is a rule and what the engine knows of it.
type ruleState struct {
	rule    *Rule
	origin  string // "file" or "api"
	stored  string // api: the setting's value, to tell a change
	paused  bool
	reason  string
	created time.Time

	matched, sampled, evaluated, dropped, errors atomic.Int64
	judgeCalls, unpriced                         atomic.Int64
	costs                                        []costEntry // guarded by Engine.mu
}

type costEntry struct {
	at  time.Time
	usd float64
}

// storedRule is an API-made rule as the store's settings keep it.
type storedRule struct {
	Definition json.RawMessage `json:"definition"`
	Paused     bool            `json:"paused,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Created    time.Time       `json:"created"`
}

// New starts an Engine for o: it opens the judge, loads the rules made
// through the API, and starts the workers, the sweep and, when the store
// holds a checkpoint, the catch-up on the traces that ended after it.
func New(o Options) (*Engine, error) {
	if o.Store == nil {
		return nil, errors.New("online: Options.Store is nil")
	}
	e := &Engine{o: o, st: o.Store, log: o.Logger, now: o.Now, rules: map[string]*ruleState{},
		pending: map[trace.TraceID]pend{}, stale: map[trace.TraceID]struct{}{}, unwritten: map[ruleTrace]int{},
		settling: map[trace.TraceID]time.Time{}, wake: make(chan struct{}, 1)}
	if e.scores = o.Scores; e.scores == nil {
		sc, ok := o.Store.(store.Scorer)
		if !ok {
			return nil, fmt.Errorf("online: the store (%T) cannot keep scores (it does not implement store.Scorer); online evaluation needs a store that does", o.Store)
		}
		e.scores = sc
	}
	e.settings, _ = o.Store.(store.Settings)
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.o.QueueSize <= 0 {
		e.o.QueueSize = DefaultQueueSize
	}
	if e.o.Workers <= 0 {
		e.o.Workers = DefaultWorkers
	}
	if !(e.o.Share > 0 && e.o.Share <= 1) {
		e.o.Share = DefaultShare
	}
	if e.o.SweepEvery == 0 {
		e.o.SweepEvery = DefaultSweepEvery
	}
	if e.o.RefreshEvery <= 0 {
		e.o.RefreshEvery = DefaultRefreshEvery
	}
	if e.o.CatchUpWindow <= 0 {
		e.o.CatchUpWindow = DefaultCatchUpWindow
	}
	if e.o.CatchUpMargin <= 0 {
		e.o.CatchUpMargin = DefaultCatchUpMargin
	}
	cfg := o.Config
	if cfg == nil {
		cfg = &Config{}
	}
	switch e.settle = o.Settle; {
	case e.settle < 0:
		e.settle = 0
	case e.settle == 0 && cfg.Settle > 0:
		e.settle = cfg.Settle
	case e.settle == 0:
		e.settle = DefaultSettle
	}
	if e.settle > MaxSettle {
		return nil, fmt.Errorf("online: Options.Settle %s is longer than %s; a trace that waits that long holds the checkpoint and memory", e.settle, MaxSettle)
	}
	jc := cfg.Judge
	if jc.Timeout <= 0 {
		jc.Timeout = DefaultJudgeTimeout
	}
	if jc.Concurrency <= 0 {
		jc.Concurrency = DefaultJudgeConcurrency
	}
	j := o.Judge
	if j == nil && jc.Model != "" {
		lo := llm.Options{BaseURL: jc.BaseURL, Prices: o.Prices}
		if jc.APIKeyEnv != "" {
			if lo.APIKey = os.Getenv(jc.APIKeyEnv); lo.APIKey == "" {
				return nil, fmt.Errorf("online: the rules' judge: the environment variable %s (judge: api_key_env) is empty; export the judge's API key in it", jc.APIKeyEnv)
			}
		}
		mj, err := evalrun.OpenJudge(jc.Model, lo)
		if err != nil {
			return nil, fmt.Errorf("online: the rules' judge: %w", err)
		}
		mj.Timeout = jc.Timeout
		j = mj
	}
	if j != nil {
		e.judge = &limitedJudge{j: j, slots: make(chan struct{}, jc.Concurrency)}
	}
	now := e.now()
	for _, r := range cfg.Rules {
		if r.judges && e.judge == nil {
			return nil, fmt.Errorf("online: rule %q has an LLM grader and there is no judge; add judge: with model: to the rules file", r.Name)
		}
		e.rules[r.Name] = &ruleState{rule: r, origin: "file", created: now}
		e.order = append(e.order, r.Name)
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.queue = make(chan item, e.o.QueueSize)
	e.stop = make(chan struct{})
	if err := e.refresh(e.ctx); err != nil {
		e.log.Warn("loupe serve: online rules: cannot read the rules made through the API", "err", err)
	}
	e.countActive()
	cp, haveCP := e.loadCheckpoint(e.ctx)
	if haveCP {
		e.holdCP = cp
	}
	e.writes = make(chan scoreWrite, 4*e.o.Workers)
	e.delay = [2]time.Duration{writeDelay, writeDelayBusy}
	e.wdone = make(chan struct{})
	go e.writeLoop()
	for range e.o.Workers {
		e.wg.Add(1)
		go e.worker()
	}
	e.wg.Add(1)
	go e.settler()
	e.bg.Add(1)
	go e.background(cp, haveCP)
	return e, nil
}

// Ended takes the records just committed by the collector (every
// commit's, so that it sees the traces' late records). A trace whose
// root run ended among them starts to settle: it is queued for
// evaluation once it has received no record for Options.Settle, each
// commit that brings one of its records restarting the wait. Ended
// never blocks and does no I/O: when the settling set is full, the trace
// is dropped and counted by every active rule. recs are only read,
// during the call.
func (e *Engine) Ended(recs []trace.Record) {
	if e.active.Load() == 0 || len(recs) == 0 {
		return
	}
	e.lastIngest.Store(time.Now().UnixNano())
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	var prev trace.TraceID
	for i := range recs {
		r := &recs[i]
		if r.Type == trace.TypeRunEnd && r.ParentID.IsZero() {
			e.admit(r.TraceID, now)
		} else if i > 0 && r.TraceID == prev {
			continue // a commit's records come trace by trace: one look-up a run of them
		} else if _, ok := e.settling[r.TraceID]; ok {
			e.settling[r.TraceID] = now
		}
		prev = r.TraceID
	}
}

// admit starts id settling at now, restarts its wait when it already
// settles, or drops it when the settling set is full; e.mu is held.
func (e *Engine) admit(id trace.TraceID, now time.Time) {
	if _, ok := e.settling[id]; ok {
		e.settling[id] = now
		return
	}
	if len(e.settling) >= e.o.QueueSize {
		e.dropped.Add(1)
		e.drops.add(now)
		for _, rs := range e.rules {
			if !rs.paused {
				rs.dropped.Add(1)
			}
		}
		return
	}
	e.settling[id] = now
	e.addPending(item{id: id, since: now})
	if len(e.settling) == 1 {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// settler queues the traces that settled: those that received no record
// for e.settle. It waits for room in the queue (the workers' pace), and
// stops when the engine does; what it has not queued stays pending, so
// the checkpoint stays before it and a restart catches up.
func (e *Engine) settler() {
	defer e.wg.Done()
	// Deadlines closer together than tick are served by one pass over
	// the set, so that a busy set is scanned a bounded number of times
	// per settle period.
	tick := max(e.settle/16, 10*time.Millisecond)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next := e.settled()
		for _, it := range due {
			select {
			case e.queue <- it:
			case <-e.stop:
				return
			}
		}
		var wait <-chan time.Time
		if !next.IsZero() {
			timer.Reset(max(next.Sub(e.now()), tick))
			wait = timer.C
		}
		select {
		case <-e.stop:
			return
		case <-e.wake:
		case <-wait:
		}
		timer.Stop()
	}
}

// settled takes out of the settling set the traces that settled, oldest
// first, and returns them with the earliest deadline of those left
// (zero when none is left).
func (e *Engine) settled() (due []item, next time.Time) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, last := range e.settling {
		if dl := last.Add(e.settle); !dl.After(now) {
			due = append(due, item{id: id, since: last})
			delete(e.settling, id)
		} else if next.IsZero() || dl.Before(next) {
			next = dl
		}
	}
	slices.SortFunc(due, func(a, b item) int {
		if c := a.since.Compare(b.since); c != 0 {
			return c
		}
		return strings.Compare(string(a.id[:]), string(b.id[:]))
	})
	return due, next
}

// addPending registers it; e.mu is held.
func (e *Engine) addPending(it item) {
	p := e.pending[it.id]
	if p.n == 0 || it.since.Before(p.since) {
		p.since = it.since
	}
	p.n++
	e.pending[it.id] = p
}

func (e *Engine) donePending(id trace.TraceID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.pending[id]
	if p.n <= 1 {
		delete(e.pending, id)
		return
	}
	p.n--
	e.pending[id] = p
}

// enqueueWait queues id, waiting for room (the catch-up and the sweep,
// which may wait; ingest never does). It reports false when the engine
// stops first.
func (e *Engine) enqueueWait(id trace.TraceID, since time.Time) bool {
	it := item{id: id, since: since}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false
	}
	e.addPending(it)
	e.mu.Unlock()
	select {
	case e.queue <- it:
		return true
	case <-e.stop:
		e.donePending(id)
		return false
	}
}

// Close stops the engine: no trace is queued any more, the workers end
// once their current evaluation is done (or, when ctx ends first, are
// canceled), the scores they made are committed, and the checkpoint is
// written so that a restart catches up on what was queued but not
// evaluated. It returns ctx's error when the workers had to be canceled.
// Close is idempotent.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.stop)
	e.mu.Unlock()
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		e.bg.Wait()
		close(e.writes) // the writer commits what the workers handed it, then ends
		<-e.wdone
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		e.cancel()
		<-done
	}
	// Queued items stay pending: the checkpoint stays before them.
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.writeCheckpoint(wctx)
	e.cancel()
	return err
}

func (e *Engine) worker() {
	defer e.wg.Done()
	for {
		select {
		case <-e.stop:
			return
		default:
		}
		select {
		case <-e.stop:
			return
		case it := <-e.queue:
			// Take what else waits, up to maxBatch: one query per rule
			// serves them all.
			ids := []trace.TraceID{it.id}
		more:
			for len(ids) < maxBatch {
				select {
				case it := <-e.queue:
					ids = append(ids, it.id)
				default:
					break more
				}
			}
			start := time.Now()
			ok, judged := e.process(e.ctx, ids)
			if !ok {
				// Stopped midway: the batch stays pending, so the
				// checkpoint stays before it and a restart catches up
				// (what was scored is not graded again).
				return
			}
			// The batch is done once its scores are committed: the
			// writer releases it then, and only then may the
			// checkpoint pass it.
			e.writes <- scoreWrite{release: ids}
			e.rest(time.Since(start) - judged)
		}
	}
}

// rest makes a worker that worked for busy wait, while ingest is busy,
// long enough that its work, and the writer's commits made while ingest
// was busy since a worker last rested, stay within its part of
// Options.Share.
func (e *Engine) rest(busy time.Duration) {
	share := e.o.Share / float64(e.o.Workers)
	busy += time.Duration(e.writeBusy.Swap(0))
	if share >= 1 || busy <= 0 || !e.ingestBusy() {
		return
	}
	d := min(time.Duration(float64(busy)*(1-share)/share), 5*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.stop:
	}
}

// background runs the catch-up, then the sweep, the refresh of API rules
// and the checkpoint's writes until the engine stops.
func (e *Engine) background(cp time.Time, haveCP bool) {
	defer e.bg.Done()
	if haveCP {
		e.catchUp(cp)
	}
	e.mu.Lock()
	e.holdCP = time.Time{}
	e.mu.Unlock()
	e.writeCheckpoint(e.ctx)
	ckpt := time.NewTicker(checkpointEvery)
	defer ckpt.Stop()
	refresh := time.NewTicker(e.o.RefreshEvery)
	defer refresh.Stop()
	var sweep <-chan time.Time
	if e.o.SweepEvery > 0 {
		t := time.NewTicker(e.o.SweepEvery)
		defer t.Stop()
		sweep = t.C
	}
	for {
		select {
		case <-e.stop:
			return
		case <-ckpt.C:
			e.writeCheckpoint(e.ctx)
		case <-refresh.C:
			if err := e.refresh(e.ctx); err != nil {
				e.log.Warn("loupe serve: online rules: cannot read the rules made through the API", "err", err)
			}
		case <-sweep:
			e.Sweep(e.ctx)
		}
	}
}

// catchUp queues the traces that ended after the checkpoint cp (less the
// margin) and that started within the catch-up window before it.
func (e *Engine) catchUp(cp time.Time) {
	if e.active.Load() == 0 {
		return
	}
	cutoff := cp.Add(-e.o.CatchUpMargin)
	q := store.ListQuery{Filter: store.Filter{Since: cp.Add(-e.o.CatchUpWindow)}, Limit: 500}
	n := 0
	for {
		page, err := e.st.List(e.ctx, q)
		if err != nil {
			if e.ctx.Err() == nil {
				e.log.Error("loupe serve: online rules: catching up failed; traces that ended while the server was down may not be evaluated", "err", err)
			}
			return
		}
		for _, s := range page.Traces {
			if s.Status == store.StatusRunning || s.Started.Add(s.Duration).Before(cutoff) {
				continue
			}
			if !e.enqueueWait(s.ID, cp) {
				return
			}
			n++
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	if n > 0 {
		e.log.Info("loupe serve: online rules: catching up", "traces", n, "since", cp)
	}
}

// Sweep queues the traces that went stale without ending
// (store.StatusIncomplete) and that this engine has not queued yet. It
// runs every Options.SweepEvery; tests call it directly.
func (e *Engine) Sweep(ctx context.Context) {
	if e.active.Load() == 0 {
		return
	}
	now := e.now()
	q := store.ListQuery{Filter: store.Filter{Status: store.StatusIncomplete, Since: now.Add(-e.o.CatchUpWindow)}, Limit: 500}
	for range 20 {
		page, err := e.st.List(ctx, q)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Error("loupe serve: online rules: looking for stale traces failed", "err", err)
			}
			return
		}
		for _, s := range page.Traces {
			e.mu.Lock()
			_, seen := e.stale[s.ID]
			if !seen {
				if len(e.stale) >= 100_000 {
					clear(e.stale) // the scores say what was done; this only saves queries
				}
				e.stale[s.ID] = struct{}{}
			}
			e.mu.Unlock()
			if !seen && !e.enqueueWait(s.ID, now) {
				return
			}
		}
		if page.Next == "" {
			return
		}
		q.Cursor = page.Next
	}
}

// checkpoint is the time before which every trace that ended was
// evaluated (or dropped, or not selected): the earliest pending trace's,
// else now. While catching up it stays at the checkpoint caught up from.
func (e *Engine) checkpoint() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.holdCP.IsZero() {
		return e.holdCP
	}
	cp := e.now()
	for _, p := range e.pending {
		if p.since.Before(cp) {
			cp = p.since
		}
	}
	return cp
}

func (e *Engine) loadCheckpoint(ctx context.Context) (time.Time, bool) {
	if e.settings == nil {
		return time.Time{}, false
	}
	m, err := e.settings.Settings(ctx, CheckpointKey)
	if err != nil {
		e.log.Warn("loupe serve: online rules: cannot read the checkpoint; not catching up", "err", err)
		return time.Time{}, false
	}
	v, ok := m[CheckpointKey]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		e.log.Warn("loupe serve: online rules: the checkpoint is unreadable; not catching up", "value", v)
		return time.Time{}, false
	}
	return t, true
}

func (e *Engine) writeCheckpoint(ctx context.Context) {
	if e.settings == nil {
		return
	}
	cp := e.checkpoint()
	if err := e.settings.PutSetting(ctx, CheckpointKey, cp.UTC().Format(time.RFC3339Nano)); err != nil && ctx.Err() == nil {
		e.log.Warn("loupe serve: online rules: cannot write the checkpoint", "err", err)
	}
}

// snapshot returns the rules in order.
func (e *Engine) snapshot() []*ruleState {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*ruleState, 0, len(e.order))
	for _, n := range e.order {
		out = append(out, e.rules[n])
	}
	return out
}

func (e *Engine) isPaused(rs *ruleState) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return rs.paused
}

// process evaluates a batch of traces by every active rule that selects
// them. Each rule asks the store once per batch which traces its filter
// selects and which it already scored, so that evaluation costs few
// queries when many traces end at once; each trace is loaded once. It
// reports false when the engine stopped (or ctx ended) before the batch
// was done: Close lets the evaluation in flight finish, not the batch.
// judged is the time spent waiting for the judge.
func (e *Engine) process(ctx context.Context, ids []trace.TraceID) (ok bool, judged time.Duration) {
	ids = uniqueIDs(ids)
	loaded := map[trace.TraceID]*store.Trace{}
	for _, rs := range e.snapshot() {
		if e.stopping(ctx) {
			return false, judged
		}
		if e.isPaused(rs) {
			continue
		}
		r := rs.rule
		matched, err := e.matches(ctx, r, ids)
		if err != nil {
			rs.errors.Add(1)
			e.log.Warn("loupe serve: online rule: filter failed", "rule", r.Name, "err", err)
			continue
		}
		var sampled []trace.TraceID
		for _, id := range ids {
			if !matched[id] {
				continue
			}
			rs.matched.Add(1)
			if Sampled(r, id) {
				rs.sampled.Add(1)
				sampled = append(sampled, id)
			}
		}
		if len(sampled) == 0 {
			continue
		}
		if r.judges && e.judge == nil {
			rs.errors.Add(int64(len(sampled))) // an API rule made on a collector with a judge
			continue
		}
		// A trace the rule already scored is not graded again: no judge
		// call is repeated (a restart, a second queueing).
		done, err := e.scored(ctx, r.Name, sampled)
		if err != nil {
			rs.errors.Add(1)
			e.log.Warn("loupe serve: online rule: reading scores failed", "rule", r.Name, "err", err)
			continue
		}
		// The scores go to the writer, which commits those of many
		// batches and rules in one transaction: a rule without a judge
		// hands the batch's at the end; a judge's are handed as each
		// call returns, and committed at once, so that a kill loses at
		// most the calls in flight.
		var batch []graded
		for _, id := range sampled {
			if e.stopping(ctx) {
				e.hand(rs, batch, false)
				return false, judged
			}
			if done[id] {
				continue
			}
			tr := loaded[id]
			if tr == nil {
				if tr, err = e.st.Trace(ctx, id); err != nil {
					rs.errors.Add(1)
					e.log.Warn("loupe serve: online rule: loading the trace failed", "rule", r.Name, "trace", id, "err", err)
					continue
				}
				loaded[id] = tr
			}
			if e.isPaused(rs) || r.judges && e.overBudget(rs) {
				break
			}
			g, d := e.evaluate(ctx, rs, tr)
			judged += d
			if g == nil {
				continue
			}
			if batch = append(batch, *g); r.judges {
				e.hand(rs, batch, true)
				batch = nil
			}
		}
		e.hand(rs, batch, false)
	}
	return !e.stopping(ctx), judged
}

// stopping reports whether Close was called or ctx ended.
func (e *Engine) stopping(ctx context.Context) bool {
	select {
	case <-e.stop:
		return true
	default:
		return ctx.Err() != nil
	}
}

func uniqueIDs(ids []trace.TraceID) []trace.TraceID {
	seen := make(map[trace.TraceID]bool, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// matches returns which of ids r's filter selects, asking the store (the
// one query layer), so that a rule selects what loupe traces search
// would: one listing for the batch, or for a filter with text or record
// types, one search per trace.
func (e *Engine) matches(ctx context.Context, r *Rule, ids []trace.TraceID) (map[trace.TraceID]bool, error) {
	now := e.now()
	q, err := store.ParseQueryAt(r.Filter, now)
	if err != nil {
		return nil, err
	}
	if q, err = (store.Criteria{}).AgentRunsQuery(q, now); err != nil {
		return nil, err
	}
	out := map[trace.TraceID]bool{}
	if q.HasText() || len(q.Types) > 0 {
		for _, id := range ids {
			q.IDs, q.Limit = []trace.TraceID{id}, 1
			page, err := e.st.Search(ctx, q)
			if err != nil {
				return nil, err
			}
			out[id] = len(page.Hits) > 0
		}
		return out, nil
	}
	f := q.Filter
	f.IDs = ids
	page, err := e.st.List(ctx, store.ListQuery{Filter: f, Limit: len(ids)})
	if err != nil {
		return nil, err
	}
	for _, s := range page.Traces {
		out[s.ID] = true
	}
	return out, nil
}

// scored returns which of ids the rule has scored (its overall score is
// stored, or is with the writer).
func (e *Engine) scored(ctx context.Context, rule string, ids []trace.TraceID) (map[trace.TraceID]bool, error) {
	out := map[trace.TraceID]bool{}
	e.umu.Lock()
	for _, id := range ids {
		if e.unwritten[ruleTrace{rule, id}] > 0 {
			out[id] = true
		}
	}
	e.umu.Unlock()
	f := store.ScoreFilter{TraceIDs: ids, Rule: rule, Source: store.SourceOnline, Name: scoreName(rule, "score"), Limit: 1000}
	for {
		page, err := e.scores.Scores(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, s := range page.Scores {
			out[s.TraceID] = true
		}
		if page.Next == "" {
			return out, nil
		}
		f.Cursor = page.Next
	}
}

// graded is one trace graded by a rule, its scores not yet stored.
type graded struct {
	id     trace.TraceID
	scores []store.Score
	failed bool // a grader could not run: the overall scores are left out
}

// evaluate grades tr by rs's rule. It returns the scores to store (nil
// when ctx ended: nothing is stored, and the catch-up grades the trace
// again) and the time spent waiting for the judge.
func (e *Engine) evaluate(ctx context.Context, rs *ruleState, tr *store.Trace) (g *graded, judged time.Duration) {
	r := rs.rule
	t := fromtrace.Trajectory(tr.Records)
	c := eval.Case{ID: r.Name, Criteria: r.Criteria, Assertions: r.Assertions}
	for _, m := range t.Messages {
		if m.Role == "user" {
			c.Input, c.Question = m.Content, strings.TrimSpace(m.Content)
			break
		}
	}
	res := eval.Evaluate(ctx, c, t, eval.Options{Judge: e.judge, Threshold: r.Threshold})
	for _, a := range res.Assertions {
		for _, jc := range a.JudgeCalls {
			judged += jc.Duration
		}
	}
	e.addCosts(rs, res)
	if ctx.Err() != nil {
		return nil, judged
	}
	scores, failed := resultScores(r, tr.Summary.ID, res, e.now())
	return &graded{id: tr.Summary.ID, scores: scores, failed: failed}, judged
}

// hand gives the writer gs, rs's graded traces, to store.
func (e *Engine) hand(rs *ruleState, gs []graded, urgent bool) {
	if len(gs) == 0 {
		return
	}
	e.umu.Lock()
	for _, g := range gs {
		if !g.failed {
			e.unwritten[ruleTrace{rs.rule.Name, g.id}]++
		}
	}
	e.umu.Unlock()
	e.writes <- scoreWrite{rs: rs, gs: gs, urgent: urgent}
}

// writeLoop is the score writer: it gathers what the workers hand it
// and commits it (flush) after writeDelay, or writeDelayBusy while
// ingest is busy (so that scores take the store's writer from ingest
// about once a second, however many batches are evaluated), or at once
// when it holds store.MaxScoreBatch scores or a judge's (or nothing but
// batches to release). It ends, having
// committed everything, when e.writes is closed.
func (e *Engine) writeLoop() {
	defer close(e.wdone)
	var (
		buf    []scoreWrite
		n      int       // scores in buf
		oldest time.Time // when buf's first write came
		timer  = time.NewTimer(time.Hour)
	)
	timer.Stop()
	flush := func() {
		timer.Stop()
		e.flush(buf)
		buf, n = nil, 0
	}
	for {
		select {
		case w, ok := <-e.writes:
			if !ok {
				flush()
				return
			}
			if len(buf) == 0 {
				oldest = time.Now()
				timer.Reset(e.delay[0])
			}
			buf = append(buf, w)
			for _, g := range w.gs {
				n += len(g.scores)
			}
			// Releases with no scores before them need no commit.
			if w.urgent || n == 0 || n >= store.MaxScoreBatch {
				flush()
			}
		case <-timer.C:
			if wait := time.Until(oldest.Add(e.delay[1])); wait > 0 && e.ingestBusy() {
				timer.Reset(min(wait, e.delay[0]))
				continue
			}
			flush()
		}
	}
}

// ingestBusy reports whether the collector committed records in the
// last quarter second.
func (e *Engine) ingestBusy() bool {
	return time.Since(time.Unix(0, e.lastIngest.Load())) <= 250*time.Millisecond
}

// flush commits the scores of ws in as few transactions as
// store.MaxScoreBatch allows, counts the traces evaluated (or failed),
// then releases the batches of ws. When a transaction fails, each
// rule's scores in it are tried alone, so that one rule's bad score
// (a name another source gave another kind) does not cost the others
// theirs. A failure while the engine stops keeps the batches pending,
// so that the checkpoint stays before them.
func (e *Engine) flush(ws []scoreWrite) {
	type item struct {
		rs *ruleState
		g  graded
	}
	var items []item
	for _, w := range ws {
		for _, g := range w.gs {
			items = append(items, item{w.rs, g})
		}
	}
	failed := false
	for len(items) > 0 {
		n, total := 0, 0
		for n < len(items) && (n == 0 || total+len(items[n].g.scores) <= store.MaxScoreBatch) {
			total += len(items[n].g.scores)
			n++
		}
		chunk := items[:n]
		items = items[n:]
		var all []store.Score
		rules := map[*ruleState][]item{}
		var order []*ruleState
		for _, it := range chunk {
			all = append(all, it.g.scores...)
			if rules[it.rs] == nil {
				order = append(order, it.rs)
			}
			rules[it.rs] = append(rules[it.rs], it)
		}
		busy := e.ingestBusy()
		start := time.Now()
		err := e.addScores(all)
		if busy {
			// Committing is evaluation's work too: the workers rest
			// for it (rest), so that it counts against Options.Share.
			e.writeBusy.Add(int64(time.Since(start)))
		}
		for _, rs := range order {
			its := rules[rs]
			rerr := err
			if err != nil && len(order) > 1 {
				var scores []store.Score
				for _, it := range its {
					scores = append(scores, it.g.scores...)
				}
				rerr = e.addScores(scores)
			}
			if rerr != nil {
				failed = true
				rs.errors.Add(int64(len(its)))
				e.log.Warn("loupe serve: online rule: storing scores failed", "rule", rs.rule.Name, "traces", len(its), "err", rerr)
			} else {
				for _, it := range its {
					if it.g.failed {
						rs.errors.Add(1)
					} else {
						rs.evaluated.Add(1)
					}
				}
			}
			e.umu.Lock()
			for _, it := range its {
				k := ruleTrace{rs.rule.Name, it.g.id}
				if !it.g.failed {
					if e.unwritten[k]--; e.unwritten[k] <= 0 {
						delete(e.unwritten, k)
					}
				}
			}
			e.umu.Unlock()
		}
	}
	if failed && e.isClosed() {
		return
	}
	for _, w := range ws {
		for _, id := range w.release {
			e.donePending(id)
		}
	}
}

func (e *Engine) addScores(scores []store.Score) error {
	if len(scores) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	_, err := e.scores.AddScores(ctx, scores)
	return err
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// resultScores turns a case result into scores: one per grader that ran
// (named RULE/GRADER), then RULE/score and RULE/pass, the overall ones,
// which say the trace is done. When a grader could not run (a judge that
// failed), the overall scores are left out (failed is true) so that a
// later catch-up grades the trace again.
func resultScores(r *Rule, id trace.TraceID, res eval.CaseResult, now time.Time) (scores []store.Score, failed bool) {
	used := map[string]int{}
	for _, a := range res.Assertions {
		if a.Verdict == eval.CouldNotRun {
			failed = true
			continue
		}
		if a.Verdict == eval.Skip {
			continue
		}
		g := graderName(a.Name)
		if used[g]++; used[g] > 1 {
			g = fmt.Sprintf("%s-%d", g, used[g])
		}
		name := scoreName(r.Name, g)
		scores = append(scores, store.Score{
			ID: scoreID(r.Name, id, name), TraceID: id, Name: name, Kind: store.ScoreNumeric, Value: a.Score,
			Comment: graderComment(a),
			Source:  store.SourceOnline, Author: trace.TruncateUTF8(a.Name, store.MaxScoreAuthorBytes), Rule: r.Name, Time: now,
		})
	}
	if failed {
		return scores, true
	}
	summary := overallComment(res)
	pass := 0.0
	if res.Verdict == eval.Pass {
		pass = 1
	}
	for _, s := range []struct {
		name  string
		kind  store.ScoreKind
		value float64
	}{{"score", store.ScoreNumeric, res.Score}, {"pass", store.ScoreBoolean, pass}} {
		name := scoreName(r.Name, s.name)
		scores = append(scores, store.Score{
			ID: scoreID(r.Name, id, name), TraceID: id, Name: name, Kind: s.kind, Value: s.value, Comment: summary,
			Source: store.SourceOnline, Author: "loupe-online", Rule: r.Name, Time: now,
		})
	}
	return scores, false
}

// graderComment is a grader's explanation (eval's, as loupe eval prints
// it): for a failure, which call is missing and which argument differs;
// for a pass, which checks held and the judge's evidence too.
func graderComment(a eval.AssertionResult) string {
	var b strings.Builder
	b.WriteString(a.Explain())
	if a.Verdict == eval.Pass {
		for _, c := range a.Checks {
			fmt.Fprintf(&b, "      ✓ %s\n", c.Text)
			if c.Evidence != "" {
				fmt.Fprintf(&b, "          judge: %s\n", c.Evidence)
			}
		}
		if a.Reasoning != "" {
			fmt.Fprintf(&b, "      judge's reasoning: %s\n", a.Reasoning)
		}
	}
	return trace.TruncateUTF8(strings.TrimSpace(b.String()), store.MaxScoreCommentBytes)
}

func overallComment(res eval.CaseResult) string {
	var failing []string
	passed := 0
	for _, a := range res.Assertions {
		switch a.Verdict {
		case eval.Pass:
			passed++
		case eval.Fail:
			failing = append(failing, a.Name)
		}
	}
	s := fmt.Sprintf("%s score %.3f (threshold %.2f): %d of %d graders passed", strings.ToUpper(string(res.Verdict)), res.Score, res.Threshold, passed, len(res.Assertions))
	if len(failing) > 0 {
		s += "; failed: " + strings.Join(failing, ", ")
	}
	if res.RequiredFailed != "" {
		s += fmt.Sprintf("; required grader %q is below its bar, so the score is 0", res.RequiredFailed)
	}
	return trace.TruncateUTF8(s, store.MaxScoreCommentBytes)
}

// graderName makes a grader's name fit a score name: characters other
// than letters, digits and "._-:" become '-'; "score" and "pass", the
// overall scores' names, get a "-grader" suffix.
func graderName(n string) string {
	b := []byte(n)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':') {
			b[i] = '-'
		}
	}
	s := string(b)
	if s == "" {
		s = "grader"
	}
	if s == "score" || s == "pass" {
		s += "-grader"
	}
	return s
}

// scoreName is RULE/NAME, cut to store.MaxScoreNameBytes.
func scoreName(rule, name string) string {
	s := rule + "/" + name
	if len(s) > store.MaxScoreNameBytes {
		s = s[:store.MaxScoreNameBytes]
	}
	return s
}

// scoreID is the deterministic id of a score: a hash of the rule, the
// trace and the score's name, so that storing an evaluation twice stores
// it once.
func scoreID(rule string, id trace.TraceID, name string) string {
	h := sha256.New()
	h.Write([]byte("loupe-online\x00" + rule + "\x00"))
	h.Write(id[:])
	h.Write([]byte("\x00" + name))
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// addCosts records what res's judge calls cost against rs's budget, and
// pauses the rule when it goes over.
func (e *Engine) addCosts(rs *ruleState, res eval.CaseResult) {
	var usd float64
	calls := 0
	for _, a := range res.Assertions {
		for _, c := range a.JudgeCalls {
			calls++
			usd += c.Reply.CostUSD
			if c.Reply.CostUSD == 0 && !c.CallFailed && c.Reply.InputTokens+c.Reply.OutputTokens > 0 {
				rs.unpriced.Add(1)
			}
		}
	}
	if calls == 0 {
		return
	}
	rs.judgeCalls.Add(int64(calls))
	if usd > 0 {
		e.mu.Lock()
		rs.costs = append(rs.costs, costEntry{e.now(), usd})
		e.mu.Unlock()
	}
	e.overBudget(rs)
}

// spent returns what rs's judge calls cost in the last hour; e.mu held.
func (e *Engine) spent(rs *ruleState, now time.Time) float64 {
	cut := now.Add(-time.Hour)
	i := 0
	for i < len(rs.costs) && !rs.costs[i].at.After(cut) {
		i++
	}
	rs.costs = rs.costs[i:]
	var sum float64
	for _, c := range rs.costs {
		sum += c.usd
	}
	return sum
}

// overBudget reports whether rs's judge calls of the last hour reached
// its budget, and pauses the rule (saying why) when they did.
func (e *Engine) overBudget(rs *ruleState) bool {
	b := rs.rule.BudgetUSDPerHour
	if b <= 0 {
		return false
	}
	now := e.now()
	e.mu.Lock()
	spent := e.spent(rs, now)
	e.mu.Unlock()
	if spent < b {
		return false
	}
	reason := fmt.Sprintf("judge calls cost $%.4f in the hour before %s, over the budget of $%.4f per hour; resume the rule (POST /api/v1/rules/%s/resume) or raise budget_usd_per_hour", spent, now.UTC().Format(time.RFC3339), b, rs.rule.Name)
	if err := e.setPaused(e.ctx, rs.rule.Name, true, reason); err != nil {
		e.log.Warn("loupe serve: online rule: cannot pause the rule", "rule", rs.rule.Name, "err", err)
	}
	e.log.Warn("loupe serve: online rule paused: over budget", "rule", rs.rule.Name, "reason", reason)
	return true
}

// limitedJudge bounds the calls in flight to a judge.
type limitedJudge struct {
	j     eval.Judge
	slots chan struct{}
}

func (l *limitedJudge) Judge(ctx context.Context, p eval.JudgePrompt) (eval.JudgeReply, error) {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return eval.JudgeReply{}, ctx.Err()
	}
	defer func() { <-l.slots }()
	return l.j.Judge(ctx, p)
}

func (e *Engine) countActive() {
	n := 0
	for _, rs := range e.rules {
		if !rs.paused {
			n++
		}
	}
	e.active.Store(int32(n))
}

// sortOrder puts the file's rules first (in file order), then the API's
// by name; e.mu held.
func (e *Engine) sortOrder() {
	var file, api []string
	for _, n := range e.order {
		if rs, ok := e.rules[n]; ok && rs.origin == "file" {
			file = append(file, n)
		}
	}
	for n, rs := range e.rules {
		if rs.origin == "api" {
			api = append(api, n)
		}
	}
	slices.Sort(api)
	e.order = append(file, api...)
}
