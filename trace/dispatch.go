package trace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// A Sink receives records, in the spirit of slog.Handler: small, and the
// one thing an exporter implements. A Dispatcher calls WriteRecords from one
// goroutine at a time. The records of one run arrive in the order they were
// made; records of runs recording at the same time may interleave (Seq is
// the order within a trace). The slice and its records are read-only (it
// may be the run's own record log, shared to avoid a copy); the records,
// and their values, may be kept, since records never change once made, but
// the slice itself may be reused once WriteRecords returns.
//
// ctx is cancelled when the dispatcher gives up on the sinks: when
// Shutdown's context ends before the queue is drained, and once Shutdown is
// done. A Sink that can block (on a disk, a network, a lock) should return
// soon after ctx is done, with an error. A Sink that also implements
// io.Closer is closed once, after its last WriteRecords, when the
// dispatcher shuts down.
//
// A Sink that panics does not take the process down: the dispatcher
// recovers the panic, counts it and reports it to OnError as that call's
// error (a *PanicError, with the value and where it was raised); the other
// sinks still receive the batch, and the panicking sink the next one.
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
	// Dropped, by Stats, to OnError and by Shutdown's error, and the sinks
	// receive a TypeDropped marker record for the trace that lost it.
	// Recording never waits on a slow sink. This is the default.
	Drop FullPolicy = iota
	// Block waits for room in the queue, so that a slow sink slows the
	// recording goroutine down rather than lose records. The wait ends
	// when Shutdown is called or the run's context (the one given to
	// Tracer.Start or SpawnChild) is done, and then the record is dropped
	// and reported as under Drop: a stuck sink never holds a run forever.
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
	// OnError is called with each error a sink returns or panics with
	// (see Sink), an error from a sink's Close, and, for records dropped
	// for the sinks, a *DropError with the number dropped since the last
	// report: once per delivery round at most, and while drops go on at
	// most once per second, never once per record. It is called from the
	// dispatcher's goroutine (in the Inline mode, from the recording
	// goroutine, one call at a time). The default logs through log/slog's
	// default logger: drops as warnings, sink errors as errors. Errors are
	// never silent.
	OnError func(error)
}

// Defaults for DispatchOptions.
const (
	DefaultQueueSize = 8192
	DefaultBatchSize = 512
	DefaultLinger    = time.Millisecond
)

// DispatchStats counts what a Dispatcher did. Records count once, as
// emitted or dropped; the TypeDropped markers the dispatcher makes are not
// counted.
type DispatchStats struct {
	Emitted    uint64 // records accepted for the sinks
	Written    uint64 // records handed to the sinks
	Dropped    uint64 // records discarded: queue full, a Block wait given up, or made after Shutdown
	SinkErrors uint64 // errors returned by sinks, and sink panics
}

// A Dispatcher delivers records to sinks. It is safe for concurrent use.
// Create one with NewDispatcher; stop it with Shutdown.
//
// In the background mode, records made through an ExecutionContext are not
// copied into a queue: the run's own log is the queue. A run with records
// not yet delivered registers itself once; after Linger the dispatcher's
// goroutine takes the new part of each registered run's log and hands it
// to the sinks. Recording a record thus costs an atomic add, not a channel
// send, and the goroutines share memory once per batch instead of once per
// record. Records given to Emit are copied into a queue of their own.
//
// A trace whose records were dropped gets a TypeDropped marker record in
// the next delivery (see TypeDropped), so that whoever reads the trace
// sees that it is incomplete and by how much.
type Dispatcher struct {
	// Read by every recording goroutine for every record: kept apart from
	// what the dispatcher's goroutine writes, so that the cache line stays
	// in each core's cache.
	opts  DispatchOptions
	sinks []Sink
	shut  atomic.Bool // Shutdown was called: later records are dropped (both modes)
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

	// lost are the records given to Emit that were dropped, by trace,
	// not yet reported by a marker. Guarded by pmu.
	lost []mark

	// stop is closed by Shutdown: producers waiting for room give up.
	stop chan struct{}
	// abort is set when Shutdown's context ended first: the goroutine
	// hands nothing more to the sinks.
	abort atomic.Bool
	// sinkCtx is what sinks receive; cancelSinks cancels it when Shutdown
	// gives up or is done.
	sinkCtx     context.Context
	cancelSinks context.CancelFunc
	// closeErr is what closing the sinks returned; written before fin is
	// closed.
	closeErr error
	fin      chan struct{} // closed once the sinks are closed

	inlineMu sync.Mutex // one inline delivery at a time

	inlineEmitted              atomic.Uint64
	written, dropped, sinkErrs atomic.Uint64

	progressMu sync.Mutex
	progress   chan struct{} // closed and replaced after each batch
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
		opts.OnError = logError
	}
	d := &Dispatcher{opts: opts, sinks: sinks, progress: make(chan struct{}), work: make(chan struct{}, 1), parked: true,
		stop: make(chan struct{}), fin: make(chan struct{})}
	d.sinkCtx, d.cancelSinks = context.WithCancel(context.Background())
	if !opts.Inline {
		d.done = make(chan struct{})
		go d.run()
	}
	return d
}

// Emit hands a copy of r to the sinks: its values and Run are copied,
// so the caller may reuse their buffers once Emit returns.
// Unlike ExecutionContext.Record, Emit sets nothing: r goes out as it is.
// In the background mode it never waits for a sink unless the policy is
// Block and the queue is full, and then no longer than until Shutdown.
// Emit after Shutdown drops r and counts it.
func (d *Dispatcher) Emit(r Record) {
	copyValues(&r)
	d.emit(r)
}

// copyValues gives r copies of its values (in one allocation) and of its
// Run, tags included.
func copyValues(r *Record) {
	if n := len(r.Input) + len(r.Output) + len(r.Thinking); n > 0 {
		buf := make([]byte, 0, n)
		for _, v := range [...]*Value{&r.Input, &r.Output, &r.Thinking} {
			if len(*v) == 0 {
				continue
			}
			start := len(buf)
			buf = append(buf, *v...)
			*v = Value(buf[start:len(buf):len(buf)])
		}
	}
	if r.Run != nil {
		r.EditRun()
	}
}

// emit is Emit without the copy, for records whose values nothing else
// will change (the run's own).
func (d *Dispatcher) emit(r Record) {
	if d.opts.Inline {
		d.emitInline(r)
		return
	}
	if !d.reserve(context.Background()) {
		if !d.shut.Load() {
			d.pmu.Lock()
			d.lost = addMark(d.lost, mark{id: r.TraceID, parent: r.ParentID, depth: r.Depth, loss: loss{n: 1, seq: r.Seq, time: r.Time}})
			wake := d.wakeLocked()
			d.pmu.Unlock()
			if wake {
				d.signal()
			}
		}
		return
	}
	d.pmu.Lock()
	wake := d.wakeLocked()
	d.extra = append(d.extra, r)
	d.pmu.Unlock()
	if wake {
		d.signal()
	}
}

// reserve counts one record into the backlog, and reports whether it may
// go to the sinks. When the queue is full, under Drop it counts the record
// as dropped; under Block it waits for room first, and gives up (and
// counts a drop) when Shutdown is called or ctx (the run's context; nil
// for none) is done. The caller must hold no locks.
func (d *Dispatcher) reserve(ctx context.Context) bool {
	q := int64(d.opts.QueueSize)
	for {
		if d.shut.Load() {
			d.dropped.Add(1)
			return false
		}
		// A waiting record is not counted in: the backlog is records the
		// goroutine will deliver, so that waiting never holds room.
		b := d.backlog.Load()
		if b < q {
			if d.backlog.CompareAndSwap(b, b+1) {
				return true
			}
			continue
		}
		if d.opts.OnFull == Drop || !d.waitRoom(ctx) {
			d.dropped.Add(1)
			return false
		}
	}
}

// waitRoom waits until the goroutine delivered a batch and reports true,
// or until Shutdown is called or ctx is done and reports false.
func (d *Dispatcher) waitRoom(ctx context.Context) bool {
	d.progressMu.Lock()
	ch := d.progress
	d.progressMu.Unlock()
	if d.backlog.Load() < int64(d.opts.QueueSize) {
		return true // room was made before ch was taken
	}
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	d.pmu.Lock()
	d.hurry = true
	d.pmu.Unlock()
	d.signal()
	select {
	case <-ch:
		return true
	case <-d.stop:
		return false
	case <-done:
		return false
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
	if d.shut.Load() {
		d.dropped.Add(1)
		return
	}
	d.inlineEmitted.Add(1)
	d.write([]Record{r}, 0)
}

// write hands batch to every sink. markers of its records are the
// dispatcher's TypeDropped markers, which were never counted as emitted.
func (d *Dispatcher) write(batch []Record, markers int) {
	for i, s := range d.sinks {
		if err := d.writeSink(i, s, batch); err != nil {
			d.sinkErrs.Add(1)
			d.report(err)
		}
	}
	n := len(batch) - markers
	d.written.Add(uint64(n))
	if !d.opts.Inline {
		d.backlog.Add(-int64(n))
	}
	d.progressMu.Lock()
	close(d.progress)
	d.progress = make(chan struct{})
	d.progressMu.Unlock()
}

// writeSink hands batch to sink i, turning a panic into its error.
func (d *Dispatcher) writeSink(i int, s Sink, batch []Record) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("trace: sink %d (%T) panicked: %w", i, s, NewPanicError(v))
		}
	}()
	return s.WriteRecords(d.sinkCtx, batch)
}

// report calls OnError with err. A panic in OnError is logged rather than
// allowed to take the dispatcher's goroutine down.
func (d *Dispatcher) report(err error) {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("loupe: trace: DispatchOptions.OnError panicked", "panic", NewPanicError(v).Error(), "reporting", err.Error())
		}
	}()
	d.opts.OnError(err)
}

// logError is the default OnError: drops are warnings, anything else
// (a sink failed) an error.
func logError(err error) {
	if de := (*DropError)(nil); errors.As(err, &de) {
		slog.Warn("loupe: trace records dropped", "err", err.Error())
		return
	}
	slog.Error("loupe: trace sink failed", "err", err.Error())
}

// closeSinks closes the sinks that are io.Closers, turning a panic into
// that sink's error, and returns their errors joined.
func (d *Dispatcher) closeSinks() error {
	var errs []error
	for i, s := range d.sinks {
		c, ok := s.(io.Closer)
		if !ok {
			continue
		}
		func() {
			defer func() {
				if v := recover(); v != nil {
					errs = append(errs, fmt.Errorf("trace: closing sink %d (%T): panicked: %w", i, s, NewPanicError(v)))
				}
			}()
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		}()
	}
	return errors.Join(errs...)
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
func (d *Dispatcher) take(cuts []cut, marks []mark) (runs []*ExecutionContext, extra []Record, waiters []chan struct{}, stopping bool, _ []cut, _ []mark) {
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
	marks = append(marks[:0], d.lost...)
	d.lost = d.lost[:0]
	return runs, extra, waiters, d.stopping, cuts, marks
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
	var w worker
	defer func() {
		// Closed here, after the last WriteRecords, so that a Close never
		// runs into a write in progress (a sink's Close may wait for it).
		d.closeErr = d.closeSinks()
		if d.abort.Load() {
			// Shutdown returned without waiting for this: nobody else
			// will see these.
			d.reportDrops(&w, true)
			if d.closeErr != nil {
				d.report(d.closeErr)
			}
		}
		d.cancelSinks()
		close(d.fin)
		close(d.done)
	}()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
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
			if d.abort.Load() {
				return
			}
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
	marks []mark   // the round's losses, one per trace
	made  []Record // the round's markers, made from marks

	reported   uint64    // drops reported to OnError so far
	lastReport time.Time // when
}

// part is what one run (or Emit) contributed to a round: segs[lo:hi].
type part struct {
	trace  *traceState // nil for Emit's records
	lo, hi int
	done   bool
}

// round takes what is waiting (see take) and delivers it, with a
// TypeDropped marker for each trace that lost records since its last
// one, then releases the Flush calls taken with it and reports drops. It
// returns how many records it delivered and whether Shutdown asked the
// goroutine to stop.
func (d *Dispatcher) round(w *worker) (n int, stopping bool) {
	var (
		runs    []*ExecutionContext
		extra   []Record
		waiters []chan struct{}
	)
	runs, extra, waiters, stopping, w.cuts, w.marks = d.take(w.cuts, w.marks)
	w.segs, w.parts, w.again = w.segs[:0], w.parts[:0], w.again[:0]
	emitMarks := len(w.marks) // marks from Emit come first, with no trace state
	for _, ec := range runs {
		var c uint64
		for _, x := range w.cuts {
			if x.trace == ec.trace {
				c = x.seq
			}
		}
		k := len(w.segs)
		var (
			left bool
			lost loss
		)
		if w.segs, lost, left = ec.takeUnsent(w.segs, c); len(w.segs) > k {
			w.parts = append(w.parts, part{trace: ec.trace, lo: k, hi: len(w.segs)})
		}
		if lost.n > 0 {
			w.marks = addMark(w.marks, mark{trace: ec.trace, id: ec.trace.id, parent: ec.span, depth: ec.depth, loss: lost})
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
	if len(w.marks) > 0 {
		// A slice of their own: sinks may keep records.
		ms := make([]Record, len(w.marks))
		w.made = ms
		for i := range w.marks {
			m := &w.marks[i]
			ms[i] = m.record()
			w.segs = append(w.segs, ms[i:i+1:i+1])
			p := part{trace: m.trace, lo: len(w.segs) - 1, hi: len(w.segs)}
			if i < emitMarks {
				p.trace = nil
			}
			w.parts = append(w.parts, p)
		}
		clear(w.marks)
		w.marks = w.marks[:0]
	}
	for _, s := range w.segs {
		n += len(s)
	}
	d.deliver(w, n)
	w.made = nil
	if d.abort.Load() {
		// Not delivered: the Flush calls learn it from d.done.
		return n, stopping
	}
	for _, ch := range waiters {
		close(ch)
	}
	d.reportDrops(w, n == 0 || stopping || len(waiters) > 0)
	return n, stopping
}

// countMarkers returns how many of recs are markers made this round.
func (w *worker) countMarkers(recs []Record) int {
	if len(w.made) == 0 {
		return 0
	}
	k := 0
	for i := range recs {
		if recs[i].Type != TypeDropped {
			continue
		}
		for j := range w.made {
			if w.made[j].SpanID == recs[i].SpanID && w.made[j].TraceID == recs[i].TraceID {
				k++
				break
			}
		}
	}
	return k
}

// dropReportInterval is how often, at most, OnError hears of drops while
// they go on; a quiet round, a Flush and Shutdown report at once.
const dropReportInterval = time.Second

// reportDrops calls OnError with the records dropped since the last
// report, if any, unless the last report is less than dropReportInterval
// old and now is false.
func (d *Dispatcher) reportDrops(w *worker, now bool) {
	n := d.dropped.Load()
	if n == w.reported {
		return
	}
	t := time.Now()
	if !now && t.Sub(w.lastReport) < dropReportInterval {
		return
	}
	d.report(&DropError{Dropped: n - w.reported})
	w.reported, w.lastReport = n, t
}

// loss is what a run (or Emit) lost for the sinks since its last marker.
type loss struct {
	n    uint64    // records dropped
	seq  uint64    // the Seq of the first of them
	time time.Time // and its time
}

// add counts the record with seq and time t as lost.
func (l *loss) add(seq uint64, t time.Time) {
	if l.n == 0 || seq < l.seq {
		l.seq, l.time = seq, t
	}
	l.n++
}

// mark is one trace's losses in a round, from which its TypeDropped
// marker is made.
type mark struct {
	trace  *traceState // nil for records given to Emit
	id     TraceID
	parent SpanID // the span the marker hangs under: the run that lost the first record
	depth  int
	loss
}

// addMark adds m's losses to the mark of the same trace in marks, or
// appends m, and returns marks.
func addMark(marks []mark, m mark) []mark {
	for i := range marks {
		x := &marks[i]
		if x.id != m.id || x.trace != m.trace {
			continue
		}
		if m.seq < x.seq {
			x.seq, x.time, x.parent, x.depth = m.seq, m.time, m.parent, m.depth
		}
		x.n += m.n
		return marks
	}
	return append(marks, m)
}

// DroppedName is the Name of every TypeDropped marker record.
const DroppedName = "records"

// record returns the marker: see TypeDropped.
func (m *mark) record() Record {
	out := strconv.AppendUint(append(make([]byte, 0, 32), `{"count":`...), m.n, 10)
	t := m.time
	if t.IsZero() { // a record given to Emit without a time
		t = time.Now().UTC()
	}
	return Record{
		V: Version, TraceID: m.id, SpanID: NewSpanID(), ParentID: m.parent,
		Seq: m.seq, Time: t, Type: TypeDropped, Name: DroppedName, Depth: m.depth,
		Output: Value(append(out, '}')),
	}
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
		for len(s) > 0 && !d.abort.Load() {
			k := min(len(s), bs)
			d.write(s[:k], w.countMarkers(s[:k]))
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
// been handed to the sinks, or ctx is done, whatever the sinks do. Sinks
// that buffer implement their own flushing at the end of each
// WriteRecords call, so a nil error means the records reached each sink's
// destination (or the sink reported an error to OnError). Otherwise the
// error says how many records were not yet written.
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

// A DropError says how many records did not reach the sinks, and why.
// Shutdown returns one (joined with its other errors) when records were
// lost; OnError receives one, with Dropped only, for each report of drops.
type DropError struct {
	Dropped  uint64 // discarded: the queue was full, a Block wait was given up, or made after Shutdown
	Unsent   uint64 // accepted but never handed to the sinks: Shutdown's context ended first
	SinkErrs uint64 // errors returned by sinks, and sink panics
}

func (e *DropError) Error() string {
	msg := "trace: records lost:"
	if e.Dropped > 0 {
		msg += fmt.Sprintf(" %d dropped (the queue was full, or the tracer was shutting down; raise DispatchOptions.QueueSize or use OnFull: Block);", e.Dropped)
	}
	if e.Unsent > 0 {
		msg += fmt.Sprintf(" %d never handed to the sinks (Shutdown's context ended while a sink was busy);", e.Unsent)
	}
	if e.SinkErrs > 0 {
		msg += fmt.Sprintf(" %d sink write errors;", e.SinkErrs)
	}
	return msg[:len(msg)-1]
}

// Shutdown stops accepting records, drains the queue into the sinks and
// closes the sinks that are io.Closers (after their last WriteRecords).
// Producers waiting for room under Block stop waiting; their records
// count as dropped.
//
// Shutdown returns by ctx's deadline whatever the sinks do. If ctx ends
// first, it cancels the context the sinks were given, delivers nothing
// more, and returns without waiting for a write in progress; the sinks
// are closed once that write returns. It returns nil if every record was
// written, and otherwise an error that includes a *DropError saying how
// many records were lost and why (and ctx's error, if it cut the drain
// short). Calling it again waits again, bounded by its own ctx, and
// reports the same way.
func (d *Dispatcher) Shutdown(ctx context.Context) error {
	if !d.shut.Swap(true) {
		close(d.stop)
		if d.opts.Inline {
			go func() {
				d.inlineMu.Lock() // after the delivery in progress, if any
				d.closeErr = d.closeSinks()
				d.inlineMu.Unlock()
				if d.abort.Load() && d.closeErr != nil {
					d.report(d.closeErr)
				}
				d.cancelSinks()
				close(d.fin)
			}()
		} else {
			d.pmu.Lock()
			d.stopping = true
			d.pmu.Unlock()
			d.signal()
		}
	}
	var errs []error
	select {
	case <-d.fin:
	default:
		select {
		case <-d.fin:
		case <-ctx.Done():
			d.abort.Store(true)
			d.cancelSinks()
			errs = append(errs, fmt.Errorf("trace: shutdown: %w (the sinks did not finish; their context was cancelled)", ctx.Err()))
		}
	}
	if len(errs) == 0 && d.closeErr != nil {
		errs = append(errs, d.closeErr)
	}
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
	}
}

// Dropped returns how many records were discarded so far.
func (d *Dispatcher) Dropped() uint64 { return d.dropped.Load() }
