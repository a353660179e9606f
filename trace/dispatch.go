package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// A Sink receives records, in the spirit of slog.Handler: small, and the
// one thing an exporter implements. A Dispatcher calls WriteRecords from one
// goroutine at a time, in the order the records were made (records made
// concurrently may arrive out of Seq order; Seq is authoritative). The slice is reused
// after the call returns; the records in it may be kept, since their
// Values are never modified once recorded. A Sink that also implements
// io.Closer is closed by Dispatcher.Shutdown.
type Sink interface {
	WriteRecords(ctx context.Context, recs []Record) error
}

// SinkFunc adapts a function to the Sink interface.
type SinkFunc func(ctx context.Context, recs []Record) error

// WriteRecords calls f(ctx, recs).
func (f SinkFunc) WriteRecords(ctx context.Context, recs []Record) error { return f(ctx, recs) }

// FullPolicy says what Emit does when the background queue is full.
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
	// Inline delivers each record to the sinks before Emit returns, in the
	// calling goroutine: deterministic, for tests and short programs.
	Inline bool
	// QueueSize bounds the background queue (default DefaultQueueSize).
	QueueSize int
	// BatchSize bounds one WriteRecords call (default DefaultBatchSize).
	BatchSize int
	// OnFull is the policy when the queue is full.
	OnFull FullPolicy
	// Linger is how long the background goroutine waits for more records
	// after writing a batch smaller than BatchSize (default DefaultLinger).
	// Waiting lets records pile up so that a busy program hands the
	// goroutine whole batches instead of waking it for every record; it
	// bounds how stale a sink can be, and how long Flush may wait.
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
	Emitted    uint64 // records accepted by Emit
	Written    uint64 // records handed to the sinks
	Dropped    uint64 // records discarded: queue full, or emitted after Shutdown
	SinkErrors uint64 // errors returned by sinks
	Listeners  uint64 // records a stream listener missed because it was behind
}

// A Dispatcher delivers records to sinks and to stream listeners. It is safe
// for concurrent use. Create one with NewDispatcher; stop it with Shutdown.
type Dispatcher struct {
	opts  DispatchOptions
	sinks []Sink

	mu     sync.RWMutex // guards closed and sends on queue
	closed bool
	queue  chan Record
	done   chan struct{}

	inlineMu sync.Mutex

	emitted, written, dropped, sinkErrs, listenerDrops atomic.Uint64

	progressMu sync.Mutex
	progress   chan struct{} // closed and replaced after each batch
	wake       chan struct{} // cuts a linger short, for Flush

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
	d := &Dispatcher{opts: opts, sinks: sinks, progress: make(chan struct{}), wake: make(chan struct{}, 1)}
	if !opts.Inline {
		d.queue = make(chan Record, opts.QueueSize)
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
	d.mu.RLock()
	if d.closed {
		d.mu.RUnlock()
		d.dropped.Add(1)
		return
	}
	if d.opts.OnFull == Block {
		d.queue <- r
		d.emitted.Add(1)
	} else {
		select {
		case d.queue <- r:
			d.emitted.Add(1)
		default:
			d.dropped.Add(1)
		}
	}
	d.mu.RUnlock()
}

func (d *Dispatcher) emitInline(r Record) {
	d.inlineMu.Lock()
	defer d.inlineMu.Unlock()
	if d.closed {
		d.dropped.Add(1)
		return
	}
	d.emitted.Add(1)
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
	d.progressMu.Lock()
	close(d.progress)
	d.progress = make(chan struct{})
	d.progressMu.Unlock()
}

func (d *Dispatcher) run() {
	defer close(d.done)
	batch := make([]Record, 0, d.opts.BatchSize)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for r := range d.queue {
		batch = append(batch, r)
	fill:
		for len(batch) < cap(batch) {
			select {
			case r, ok := <-d.queue:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		d.write(batch)
		// A small batch means records trickle in: wait for more rather
		// than wake for each one. A large one means the queue is filling:
		// go straight back to it.
		small := len(batch) < min(cap(batch), cap(d.queue))/2
		clear(batch) // drop references to values
		batch = batch[:0]
		if small {
			linger.Reset(d.opts.Linger)
			select {
			case <-linger.C:
			case <-d.wake:
				linger.Stop()
			}
		}
	}
}

// Flush waits until every record emitted before the call has been handed
// to the sinks, or ctx is done. Sinks that buffer implement their own
// flushing at the end of each WriteRecords call, so a nil error means the
// records reached each sink's destination.
func (d *Dispatcher) Flush(ctx context.Context) error {
	target := d.emitted.Load()
	if d.written.Load() >= target {
		return nil
	}
	select { // end the worker's linger: someone is waiting
	case d.wake <- struct{}{}:
	default:
	}
	for {
		d.progressMu.Lock()
		ch := d.progress
		d.progressMu.Unlock()
		if d.written.Load() >= target {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("trace: flush: %d records not yet written: %w", target-d.written.Load(), ctx.Err())
		}
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
		d.mu.Lock()
		already := d.closed
		if !already {
			d.closed = true
			close(d.queue)
		}
		d.mu.Unlock()
		if already {
			return nil
		}
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
	return DispatchStats{
		Emitted:    d.emitted.Load(),
		Written:    d.written.Load(),
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
