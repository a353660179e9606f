package trace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A Sink receives records, in the spirit of slog.Handler: small, and the
// one thing an exporter implements. A Dispatcher calls WriteRecords from one
// goroutine at a time. The records of one run arrive in the order they were
// made; records of runs recording at the same time may interleave (Seq is
// the order within a trace). The slice and its records are read-only (it
// may be the run's own record log, shared to avoid a copy) and may be kept:
// records never change once made. A Sink that also implements io.Closer is
// closed by Dispatcher.Shutdown.
type Sink interface {
	WriteRecords(ctx context.Context, recs []Record) error
}

// SinkFunc adapts a function to the Sink interface.
type SinkFunc func(ctx context.Context, recs []Record) error

// WriteRecords calls f(ctx, recs).
func (f SinkFunc) WriteRecords(ctx context.Context, recs []Record) error { return f(ctx, recs) }

// FullPolicy says what happens to a new record when the background queue
// is full.
type FullPolicy int

const (
	// Drop discards the record and counts it; the count is reported by
	// Dropped, by Stats and by Shutdown's error. Recording never waits on a
	// slow sink. This is the default.
	Drop FullPolicy = iota
	// Block waits for room in the queue, so nothing is lost and a slow sink
	// slows the recording goroutine down.
	Block
)

// DispatchOptions configure a Dispatcher. The zero value is a background
// queue of DefaultQueueSize records, batches of up to DefaultBatchSize, and
// the Drop policy.
type DispatchOptions struct {
	// Inline delivers each record to the sinks before Emit (or the
	// recording call) returns, in the calling goroutine: deterministic, for
	// tests and short programs.
	Inline bool
	// QueueSize bounds how many records may wait for the sinks (default
	// DefaultQueueSize); OnFull says what happens beyond it.
	QueueSize int
	// BatchSize bounds one WriteRecords call (default DefaultBatchSize).
	BatchSize int
	// OnFull is the policy when the queue is full.
	OnFull FullPolicy
	// Linger is how long the background goroutine lets records pile up
	// after the first one arrives before it delivers them (default
	// DefaultLinger). Waiting hands sinks whole batches instead of waking
	// the goroutine for every record; it bounds how stale a sink can be.
	// Flush, Shutdown and a full queue cut it short.
	Linger time.Duration
	// OnError is called with each error a sink returns. The default
	// prints it to standard error; errors are never silent.
	OnError func(error)
}

// Defaults for DispatchOptions.
const (
	DefaultQueueSize = 8192
	DefaultBatchSize = 512
	DefaultLinger    = time.Millisecond
)

// DispatchStats counts what a Dispatcher did.
type DispatchStats struct {
	Emitted    uint64 // records accepted for the sinks
	Written    uint64 // records handed to the sinks
	Dropped    uint64 // records discarded: queue full, or made after Shutdown
	SinkErrors uint64 // errors returned by sinks
	Listeners  uint64 // records a stream listener missed because it was behind
}

// A Dispatcher delivers records to sinks and to stream listeners. It is safe
// for concurrent use. Create one with NewDispatcher; stop it with Shutdown.
//
// In the background mode, records made through an ExecutionContext are not
// copied into a queue: the run's own log is the queue. A run with records
// not yet delivered registers itself once; after Linger the dispatcher's
// goroutine takes the new part of each registered run's log and hands it
// to the sinks. Recording a record thus costs an atomic add, not a channel
// send, and the goroutines share memory once per batch instead of once per
// record. Records given to Emit are copied into a queue of their own.
type Dispatcher struct {
	// Read by every recording goroutine for every record: kept apart from
	// what the dispatcher's goroutine writes, so that the cache line stays
	// in each core's cache.
	opts  DispatchOptions
	sinks []Sink
	shut  atomic.Bool // Shutdown was called: later records are dropped
	_     [64]byte

	// backlog counts records accepted but not yet written; it is what
	// QueueSize bounds. Recording goroutines add to it, the dispatcher's
	// goroutine subtracts once per batch.
	backlog atomic.Int64
	_       [64]byte

	pmu      sync.Mutex
	pending  []*ExecutionContext // runs with records not yet taken
	extra    []Record            // records given to Emit, not yet taken
	waiters  []chan struct{}     // Flush calls, released after the next delivery
	hurry    bool                // someone waits: do not linger
	stopping bool                // Shutdown: deliver what is left and exit
	parked   bool                // the goroutine sleeps until work signals it
	work     chan struct{}       // capacity 1: wakes the goroutine
	done     chan struct{}       // closed when the goroutine exits

	inlineMu sync.Mutex
	closed   bool // Inline mode: Shutdown was called

	inlineEmitted                             atomic.Uint64
	written, dropped, sinkErrs, listenerDrops atomic.Uint64

	progressMu sync.Mutex
	progress   chan struct{} // closed and replaced after each batch

	listeners atomic.Pointer[[]*listener]
	lmu       sync.Mutex
}

// NewDispatcher starts a dispatcher that delivers to sinks. In the
// background mode (the default) it starts one goroutine, which Shutdown
// stops.
func NewDispatcher(opts DispatchOptions, sinks ...Sink) *Dispatcher {
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	if opts.OnError == nil {
		opts.OnError = func(err error) { fmt.Fprintln(os.Stderr, "loupe: trace sink:", err) }
	}
	d := &Dispatcher{opts: opts, sinks: sinks, progress: make(chan struct{}), work: make(chan struct{}, 1), parked: true}
	if !opts.Inline {
		d.done = make(chan struct{})
		go d.run()
	}
	return d
}

// Emit hands r to the sinks and listeners. In the background mode it never
// waits for a sink unless the policy is Block and the queue is full. Emit
// after Shutdown drops r and counts it.
func (d *Dispatcher) Emit(r Record) {
	if ls := d.listeners.Load(); ls != nil {
		d.notify(*ls, &r)
	}
	if d.opts.Inline {
		d.emitInline(r)
		return
	}
	ok, full := d.reserve()
	if !ok {
		return
	}
	d.pmu.Lock()
	wake := d.wakeLocked()
	d.extra = append(d.extra, r)
	d.pmu.Unlock()
	if wake {
		d.signal()
	}
	if full {
		d.waitRoom()
	}
}

// reserve counts one record into the backlog. It reports whether the
// record may go to the sinks, and whether the queue is over its size, in
// which case a Block caller must call waitRoom once it holds no locks.
func (d *Dispatcher) reserve() (ok, full bool) {
	if d.shut.Load() {
		d.dropped.Add(1)
		return false, false
	}
	if d.backlog.Add(1) > int64(d.opts.QueueSize) {
		if d.opts.OnFull == Drop {
			d.backlog.Add(-1)
			d.dropped.Add(1)
			return false, false
		}
		return true, true
	}
	return true, false
}

// waitRoom blocks until the backlog is within QueueSize again.
func (d *Dispatcher) waitRoom() {
	for d.backlog.Load() > int64(d.opts.QueueSize) && !d.shut.Load() {
		d.progressMu.Lock()
		ch := d.progress
		d.progressMu.Unlock()
		if d.backlog.Load() <= int64(d.opts.QueueSize) {
			return
		}
		d.pmu.Lock()
		d.hurry = true
		d.pmu.Unlock()
		d.signal()
		<-ch
	}
}

// idleLocked reports whether nothing is waiting to be taken. d.pmu must
// be held.
func (d *Dispatcher) idleLocked() bool { return len(d.pending) == 0 && len(d.extra) == 0 }

// wakeLocked reports whether the caller, which just added work, must
// signal the goroutine: only if it is parked. While records keep coming
// the goroutine wakes itself on its linger timer, so that recording
// goroutines do not pay for waking it. d.pmu must be held.
func (d *Dispatcher) wakeLocked() bool {
	w := d.parked
	d.parked = false
	return w
}

// signal wakes the dispatcher's goroutine, or leaves it a token if it is
// busy.
func (d *Dispatcher) signal() {
	select {
	case d.work <- struct{}{}:
	default:
	}
}

// register puts ec, which has records not yet taken, on the list the
// goroutine takes from. A run registers once until its records are taken.
func (d *Dispatcher) register(ec *ExecutionContext) {
	d.pmu.Lock()
	wake := d.wakeLocked()
	d.pending = append(d.pending, ec)
	d.pmu.Unlock()
	if wake {
		d.signal()
	}
}

func (d *Dispatcher) emitInline(r Record) {
	d.inlineMu.Lock()
	defer d.inlineMu.Unlock()
	if d.closed {
		d.dropped.Add(1)
		return
	}
	d.inlineEmitted.Add(1)
	d.write([]Record{r})
}

func (d *Dispatcher) write(batch []Record) {
	for _, s := range d.sinks {
		if err := s.WriteRecords(context.Background(), batch); err != nil {
			d.sinkErrs.Add(1)
			d.opts.OnError(err)
		}
	}
	d.written.Add(uint64(len(batch)))
	if !d.opts.Inline {
		d.backlog.Add(-int64(len(batch)))
	}
	d.progressMu.Lock()
	close(d.progress)
	d.progress = make(chan struct{})
	d.progressMu.Unlock()
}

// cut is the highest Seq of one trace at the start of a delivery.
type cut struct {
	trace *traceState
	seq   uint64
}

// take swaps out everything waiting to be delivered. For each trace of the
// runs taken it notes the trace's last Seq (appending to cuts): the
// delivery takes the records up to it and leaves later ones for the next.
// Since a run registers before its record gets a Seq, every record up to
// a cut belongs to a run taken now or earlier, so a delivery never hands
// over a record while an earlier one of its trace waits for the next:
// sinks see each trace in Seq order, nested runs included.
func (d *Dispatcher) take(cuts []cut) (runs []*ExecutionContext, extra []Record, waiters []chan struct{}, stopping bool, _ []cut) {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	cuts = cuts[:0]
next:
	for _, ec := range d.pending {
		for _, c := range cuts {
			if c.trace == ec.trace {
				continue next
			}
		}
		cuts = append(cuts, cut{ec.trace, ec.trace.seq.Load()})
	}
	runs, extra, waiters = d.pending, d.extra, d.waiters
	d.pending, d.extra, d.waiters = nil, nil, nil
	d.hurry = false
	return runs, extra, waiters, d.stopping, cuts
}

// requeue puts back runs that had records after their trace's cut.
func (d *Dispatcher) requeue(runs []*ExecutionContext) {
	if len(runs) == 0 {
		return
	}
	d.pmu.Lock()
	d.pending = append(d.pending, runs...)
	d.pmu.Unlock()
}

// park decides whether the goroutine sleeps until signalled (nothing to
// do, and quiet for a while) and marks it parked if so.
func (d *Dispatcher) park(quiet int) bool {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if d.hurry || d.stopping || len(d.waiters) > 0 || !d.idleLocked() || quiet < 2 {
		return false
	}
	d.parked = true
	return true
}

func (d *Dispatcher) urgent() bool {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	d.parked = false
	return d.hurry || d.stopping || len(d.waiters) > 0
}

func (d *Dispatcher) run() {
	defer close(d.done)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	var w worker
	quiet := 0 // rounds in a row that found nothing
	for {
		if d.park(quiet) {
			<-d.work
		}
		if !d.urgent() {
			// Let records pile up so that the sinks get batches.
			linger.Reset(d.opts.Linger)
			select {
			case <-linger.C:
			case <-d.work:
				linger.Stop()
			}
		}
		for {
			n, stopping := d.round(&w)
			if n == 0 {
				quiet++
			} else {
				quiet = 0
			}
			if stopping {
				d.pmu.Lock()
				empty := d.idleLocked()
				d.pmu.Unlock()
				if empty {
					return
				}
				continue
			}
			// Go straight on while the queue is filling; otherwise wait
			// for the next record.
			if n == 0 || d.backlog.Load() < int64(d.opts.BatchSize) {
				break
			}
		}
	}
}

// worker is the dispatcher goroutine's scratch space, reused every round.
type worker struct {
	segs  [][]Record
	parts []part
	batch []Record
	cuts  []cut
	again []*ExecutionContext
}

// part is what one run (or Emit) contributed to a round: segs[lo:hi].
type part struct {
	trace  *traceState // nil for Emit's records
	lo, hi int
	done   bool
}

// round takes what is waiting (see take) and delivers it, then releases
// the Flush calls taken with it. It returns how many records it delivered
// and whether Shutdown asked the goroutine to stop.
func (d *Dispatcher) round(w *worker) (n int, stopping bool) {
	var (
		runs    []*ExecutionContext
		extra   []Record
		waiters []chan struct{}
	)
	runs, extra, waiters, stopping, w.cuts = d.take(w.cuts)
	w.segs, w.parts, w.again = w.segs[:0], w.parts[:0], w.again[:0]
	for _, ec := range runs {
		var c uint64
		for _, x := range w.cuts {
			if x.trace == ec.trace {
				c = x.seq
			}
		}
		k := len(w.segs)
		var left bool
		if w.segs, left = ec.takeUnsent(w.segs, c); len(w.segs) > k {
			w.parts = append(w.parts, part{trace: ec.trace, lo: k, hi: len(w.segs)})
		}
		if left {
			w.again = append(w.again, ec)
		}
	}
	d.requeue(w.again)
	clear(w.again)
	if len(extra) > 0 {
		w.segs = append(w.segs, extra)
		w.parts = append(w.parts, part{lo: len(w.segs) - 1, hi: len(w.segs)})
	}
	for _, s := range w.segs {
		n += len(s)
	}
	d.deliver(w, n)
	for _, ch := range waiters {
		close(ch)
	}
	return n, stopping
}

// deliver writes the n records of the round in w to the sinks, in batches
// of at most BatchSize. A single slice goes as it is. Otherwise the parts
// are merged into w.batch, grouped by trace; a trace to which several runs
// (a run and the runs nested in it) contributed is put in Seq order, so
// that the sinks see every trace in the order it happened. Only those
// groups are sorted: the records of one run are in order already.
func (d *Dispatcher) deliver(w *worker, n int) {
	bs := d.opts.BatchSize
	write := func(s []Record) {
		for len(s) > 0 {
			k := min(len(s), bs)
			d.write(s[:k])
			s = s[k:]
		}
	}
	defer clear(w.segs)
	if len(w.segs) == 1 {
		write(w.segs[0])
		return
	}
	if n == 0 {
		return
	}
	b := w.batch[:0]
	for i := range w.parts {
		p := &w.parts[i]
		if p.done {
			continue
		}
		start, runs := len(b), 0
		for j := i; j < len(w.parts); j++ {
			q := &w.parts[j]
			if q.done || q.trace != p.trace || p.trace == nil && j != i {
				continue
			}
			q.done = true
			runs++
			for _, s := range w.segs[q.lo:q.hi] {
				b = append(b, s...)
			}
		}
		if runs > 1 {
			slices.SortFunc(b[start:], func(x, y Record) int { return cmp.Compare(x.Seq, y.Seq) })
		}
	}
	write(b)
	clear(b) // drop references to values
	w.batch = b[:0]
}

// Flush waits until every record made or emitted before the call has
// been handed to the sinks, or ctx is done. Sinks that buffer implement
// their own flushing at the end of each WriteRecords call, so a nil error
// means the records reached each sink's destination.
func (d *Dispatcher) Flush(ctx context.Context) error {
	if d.opts.Inline || d.backlog.Load() <= 0 {
		return nil
	}
	ch := make(chan struct{})
	d.pmu.Lock()
	d.waiters = append(d.waiters, ch)
	d.pmu.Unlock()
	d.signal()
	select {
	case <-ch:
		return nil
	case <-d.done:
		// Shutdown stopped the goroutine with records left (its context
		// ended first): nothing will write them now.
		return fmt.Errorf("trace: flush: the dispatcher was shut down with %d records not written", max(d.backlog.Load(), 0))
	case <-ctx.Done():
		return fmt.Errorf("trace: flush: %d records not yet written: %w", max(d.backlog.Load(), 0), ctx.Err())
	}
}

// DropError is returned by Shutdown when records were lost.
type DropError struct {
	Dropped  uint64 // discarded because the queue was full or after shutdown
	Unsent   uint64 // still queued when the shutdown context ended
	SinkErrs uint64 // write errors returned by sinks
}

func (e *DropError) Error() string {
	msg := "trace: records lost:"
	if e.Dropped > 0 {
		msg += fmt.Sprintf(" %d dropped (queue full; raise DispatchOptions.QueueSize or use OnFull: Block);", e.Dropped)
	}
	if e.Unsent > 0 {
		msg += fmt.Sprintf(" %d still queued when shutdown's context ended;", e.Unsent)
	}
	if e.SinkErrs > 0 {
		msg += fmt.Sprintf(" %d sink write errors;", e.SinkErrs)
	}
	return msg[:len(msg)-1]
}

// Shutdown stops accepting records, drains the queue into the sinks, closes
// sinks that are io.Closers, and stops the stream listeners. It returns nil
// if every emitted record was written, and otherwise a *DropError that says
// exactly how many were lost and why. Calling it twice is safe.
func (d *Dispatcher) Shutdown(ctx context.Context) error {
	var errs []error
	if d.opts.Inline {
		d.inlineMu.Lock()
		already := d.closed
		d.closed = true
		d.inlineMu.Unlock()
		if already {
			return nil
		}
	} else {
		if d.shut.Swap(true) {
			return nil
		}
		d.pmu.Lock()
		d.stopping = true
		d.pmu.Unlock()
		d.signal()
		select {
		case <-d.done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("trace: shutdown: %w", ctx.Err()))
		}
	}
	for _, s := range d.sinks {
		if c, ok := s.(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	d.closeListeners()
	st := d.Stats()
	if st.Dropped > 0 || st.Emitted > st.Written || st.SinkErrors > 0 {
		errs = append(errs, &DropError{Dropped: st.Dropped, Unsent: st.Emitted - st.Written, SinkErrs: st.SinkErrors})
	}
	return errors.Join(errs...)
}

// Stats returns the dispatcher's counters.
func (d *Dispatcher) Stats() DispatchStats {
	written := d.written.Load()
	emitted := d.inlineEmitted.Load()
	if !d.opts.Inline {
		emitted = written + uint64(max(d.backlog.Load(), 0))
	}
	return DispatchStats{
		Emitted:    emitted,
		Written:    written,
		Dropped:    d.dropped.Load(),
		SinkErrors: d.sinkErrs.Load(),
		Listeners:  d.listenerDrops.Load(),
	}
}

// Dropped returns how many records were discarded so far.
func (d *Dispatcher) Dropped() uint64 { return d.dropped.Load() }

type listener struct {
	mu     sync.RWMutex // guards closed against sends racing the close
	closed bool
	ch     chan Record
}

func (l *listener) close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.ch)
	}
	l.mu.Unlock()
}

// Subscribe returns a channel that receives every record emitted from now
// on, as it is emitted, and a function that ends the subscription and
// closes the channel. A listener that falls more than buffer records behind
// misses records rather than slowing recording; misses are counted in
// Stats().Listeners. Shutdown closes all listener channels.
func (d *Dispatcher) Subscribe(buffer int) (<-chan Record, func()) {
	if buffer <= 0 {
		buffer = 256
	}
	l := &listener{ch: make(chan Record, buffer)}
	d.lmu.Lock()
	old := d.listeners.Load()
	var ls []*listener
	if old != nil {
		ls = append(ls, *old...)
	}
	ls = append(ls, l)
	d.listeners.Store(&ls)
	d.lmu.Unlock()
	return l.ch, func() { d.unsubscribe(l) }
}

func (d *Dispatcher) unsubscribe(l *listener) {
	d.lmu.Lock()
	defer d.lmu.Unlock()
	old := d.listeners.Load()
	if old == nil {
		return
	}
	ls := make([]*listener, 0, len(*old))
	for _, x := range *old {
		if x != l {
			ls = append(ls, x)
		}
	}
	d.listeners.Store(&ls)
	l.close()
}

func (d *Dispatcher) closeListeners() {
	d.lmu.Lock()
	defer d.lmu.Unlock()
	if old := d.listeners.Load(); old != nil {
		for _, l := range *old {
			l.close()
		}
	}
	d.listeners.Store(nil)
}

func (d *Dispatcher) notify(ls []*listener, r *Record) {
	for _, l := range ls {
		l.mu.RLock()
		if !l.closed {
			select {
			case l.ch <- *r:
			default:
				d.listenerDrops.Add(1)
			}
		}
		l.mu.RUnlock()
	}
}
