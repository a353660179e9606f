package trace

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// TerminationReason says why a run ended.
type TerminationReason string

// Termination reasons. A limit names itself in the guardrail record that
// precedes the run.end record.
const (
	TerminationSuccess         TerminationReason = "success"
	TerminationError           TerminationReason = "error"
	TerminationMaxIterations   TerminationReason = "max_iterations"
	TerminationLimitExceeded   TerminationReason = "limit_exceeded"
	TerminationContextCanceled TerminationReason = "context_canceled"
	TerminationTimeout         TerminationReason = "timeout"
	TerminationHookAbort       TerminationReason = "hook_abort"
)

// Options configure a Tracer. The zero value records everything in full
// (values up to DefaultMaxValueBytes) and sends records nowhere but to the
// ExecutionContext itself.
//
// Memory: each run keeps every record it makes (values copied, see
// MaxValueBytes) for as long as its ExecutionContext is reachable, so that
// Records and Stats can answer after the run; dropping the context frees
// them. A run started with RunOptions.StreamOnly keeps none (see there).
// Between runs the Tracer keeps only two numbers, the sizes of the last two
// root runs, used to size the next run's log (see Tracer.Start).
type Options struct {
	// Sinks receive every record through a Dispatcher built from Dispatch.
	Sinks []Sink
	// Dispatch configures that Dispatcher.
	Dispatch DispatchOptions
	// Capture says how much of each value to keep.
	Capture Capture
	// MaxValueBytes bounds one recorded value; a longer one is replaced by
	// a truncation marker. Zero means DefaultMaxValueBytes; negative means
	// no limit.
	MaxValueBytes int
	// Redact, if set, sees every value (FieldInput, FieldOutput,
	// FieldThinking) before it is recorded, after RedactString has seen
	// the record's strings, and returns what to keep (nil to drop it). It
	// must not modify v or r: return a new Value instead. It runs in the
	// recording goroutine, possibly concurrently, so it must be safe for
	// concurrent use. Like slog's ReplaceAttr, Redact and RedactString
	// together are the one place to scrub secrets; the redact package
	// provides both.
	Redact func(r *Record, f Field, v Value) Value
	// RedactString, if set, sees every string a record carries before it
	// is recorded (FieldName, FieldStatus, FieldErrorText, FieldProvider,
	// FieldSession, FieldUser and each of FieldTag) and returns what to
	// keep; it runs whatever the
	// Capture policy, since names and errors are always kept. Set it with
	// Redact (for example both from the redact package): a secret in an
	// error message never passes through Redact. The same concurrency
	// rules apply.
	RedactString func(r *Record, f Field, s string) string
	// Now returns the current time; nil means the system clock (the wall
	// time read once a second, plus monotonic time elapsed since). Tests
	// set it for deterministic output.
	Now func() time.Time
}

// A Tracer starts traced runs and owns the dispatcher that delivers their
// records. It is safe for concurrent use. A nil *Tracer is valid and
// disabled: Start returns a nil *ExecutionContext, whose methods do nothing.
type Tracer struct {
	opts Options
	disp *Dispatcher
	now  func() time.Time
	clk  clock
	// lastRun and prevRun are how many records the last two root runs
	// made: the next run's log starts as big as the smaller of the two
	// (at most maxPresize), so that a service running the same agent over
	// and over does not grow its logs chunk by chunk, while one huge run
	// does not make the runs after it allocate for its size.
	lastRun, prevRun atomic.Int64
}

// New returns a Tracer. If opts has sinks it starts a Dispatcher; call
// Shutdown to drain it.
func New(opts Options) *Tracer {
	t := &Tracer{opts: opts, now: opts.Now}
	if t.now == nil {
		t.now = t.clk.now
	}
	if t.opts.MaxValueBytes == 0 {
		t.opts.MaxValueBytes = DefaultMaxValueBytes
	}
	if len(opts.Sinks) > 0 {
		t.disp = NewDispatcher(opts.Dispatch, opts.Sinks...)
	}
	return t
}

// Dispatcher returns the tracer's dispatcher, or nil if it has no sinks.
func (t *Tracer) Dispatcher() *Dispatcher {
	if t == nil {
		return nil
	}
	return t.disp
}

// Flush waits until every record so far reached the sinks (see
// Dispatcher.Flush).
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil || t.disp == nil {
		return nil
	}
	return t.disp.Flush(ctx)
}

// Shutdown drains and stops the dispatcher (see Dispatcher.Shutdown).
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil || t.disp == nil {
		return nil
	}
	return t.disp.Shutdown(ctx)
}

// RunOptions describe a run to Tracer.Start. The zero value starts a new
// trace with no input and no tags, whose records are kept in memory.
type RunOptions struct {
	Input   Value    // what the run was asked
	Tags    []string // labels to search by, e.g. "env:ci"
	TraceID TraceID  // continue this trace instead of starting one (for example from an incoming traceparent)
	Parent  SpanID   // the remote span this run is a child of
	Data    any      // the loop's own state, returned by ExecutionContext.Data

	// Session and User, if set, are recorded on run.start (Record.Run,
	// with Tags): the conversation, or task across runs, the run belongs
	// to, and whose it is. Stores group runs by them. Each is kept as at
	// most MaxSessionBytes of valid UTF-8 without NUL bytes (longer ones
	// are cut at a character boundary, invalid bytes become U+FFFD),
	// which is what stores accept; Options.RedactString sees them
	// (FieldSession, FieldUser).
	Session string
	User    string

	// StreamOnly, if set, makes the run (and the runs nested in it) send
	// its records to the tracer's sinks without keeping them: Records
	// returns nil, and so do callers that return a run's records (such as
	// agent.Result.Records). Stats, Termination, Result and Duration still
	// work. With a background dispatcher a record is held only until the
	// dispatcher takes it for the sinks; with an inline one or no sinks,
	// not at all. Use it for long runs, or services, that stream to sinks
	// and never read the records back from the run.
	StreamOnly bool
}

// Start begins a root run named name, records run.start, and returns a
// context carrying its ExecutionContext. End the run with its End method.
//
// The run's log is allocated up front for as many records as the smaller
// of the tracer's last two root runs made (not at all for the first two
// runs), and at most 16384 records (5.5 MB); it grows in small chunks past
// that. So one large run does not make the runs after it allocate for its
// size, and a service running the same agent over and over allocates each
// run's log once.
func (t *Tracer) Start(ctx context.Context, name string, o RunOptions) (context.Context, *ExecutionContext) {
	if t == nil {
		return ctx, nil
	}
	tid := o.TraceID
	if tid.IsZero() {
		tid = NewTraceID()
	}
	ec := &ExecutionContext{
		t:      t,
		ctx:    ctx,
		trace:  &traceState{id: tid},
		name:   name,
		span:   NewSpanID(),
		data:   o.Data,
		start:  t.now(),
		stream: o.StreamOnly,
	}
	if n := min(t.lastRun.Load(), t.prevRun.Load()); n > 0 && !o.StreamOnly {
		ec.records.head = make([]Record, 0, min(n, maxPresize))
	}
	var run *RunInfo // the record's own: one allocation, and one for the tags' copy
	if len(o.Tags) > 0 || o.Session != "" || o.User != "" {
		run = &RunInfo{Tags: slices.Clone(o.Tags), Session: BoundID(o.Session), User: BoundID(o.User)}
	}
	ec.record(ec.ctx, Record{Type: TypeRunStart, SpanID: ec.span, ParentID: o.Parent, Name: name, Input: o.Input, Run: run, Time: ec.start})
	return NewContext(ctx, ec), ec
}

// MaxSessionBytes bounds a record's session and user (RunInfo.Session,
// RunInfo.User): they are ids, and stores index them.
const MaxSessionBytes = 256

// BoundID returns s as an id a store accepts in RunInfo.Session or
// RunInfo.User: invalid UTF-8 and NUL bytes become U+FFFD, and the result
// is cut at a character boundary to at most MaxSessionBytes. An id that
// needs nothing is returned as it is.
func BoundID(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return TruncateUTF8(s, MaxSessionBytes)
}

type traceState struct {
	id  TraceID
	seq atomic.Uint64
}

// An ExecutionContext is one run, or one nested run inside another: the
// append-only log of its records, its stats (children included), its
// iteration, its children and how it ended. It travels in a
// context.Context (see FromContext), so code anywhere down the call stack
// can record into it.
//
// All methods are safe for concurrent use: tools running in parallel
// goroutines may record into the same context. A nil *ExecutionContext is
// valid and records nothing, which is how disabled tracing costs next to
// nothing.
type ExecutionContext struct {
	t      *Tracer
	ctx    context.Context // the run's: a record waiting for room under Block gives up when it is done
	trace  *traceState
	name   string
	span   SpanID
	parent *ExecutionContext
	under  SpanID // for a child run: the span its child.spawn record hangs under
	depth  int
	data   any
	start  time.Time
	stream bool // RunOptions.StreamOnly: the log holds only records the dispatcher has yet to take

	mu        sync.Mutex
	records   recordLog
	stats     Stats
	children  []*ExecutionContext
	iteration int
	iterSpan  SpanID
	iterStart time.Time
	arena     []byte     // holds copies of small recorded values; see keep
	unsent    []logRange // records not yet taken by the dispatcher
	lost      loss       // records dropped for the sinks, not yet in a marker
	queued    bool       // registered with the dispatcher, not yet taken
	end       time.Time
	ended     bool
	reason    TerminationReason
	err       error
	result    Value
}

type ctxKey struct{}

// NewContext returns a copy of ctx that carries ec.
func NewContext(ctx context.Context, ec *ExecutionContext) context.Context {
	return context.WithValue(ctx, ctxKey{}, ec)
}

// FromContext returns the ExecutionContext carried by ctx, or nil (a valid,
// disabled context) if there is none.
func FromContext(ctx context.Context) *ExecutionContext {
	ec, _ := ctx.Value(ctxKey{}).(*ExecutionContext)
	return ec
}

// Enabled reports whether ec records anything.
func (ec *ExecutionContext) Enabled() bool { return ec != nil }

// TraceID returns the id of the trace ec belongs to.
func (ec *ExecutionContext) TraceID() TraceID {
	if ec == nil {
		return TraceID{}
	}
	return ec.trace.id
}

// SpanID returns the span of ec's run.
func (ec *ExecutionContext) SpanID() SpanID {
	if ec == nil {
		return SpanID{}
	}
	return ec.span
}

// Name returns the run's name ("main", "compaction", …).
func (ec *ExecutionContext) Name() string {
	if ec == nil {
		return ""
	}
	return ec.name
}

// Depth returns the nesting depth: 0 for a root run.
func (ec *ExecutionContext) Depth() int {
	if ec == nil {
		return 0
	}
	return ec.depth
}

// Parent returns the run that spawned ec, or nil for a root run.
func (ec *ExecutionContext) Parent() *ExecutionContext {
	if ec == nil {
		return nil
	}
	return ec.parent
}

// Data returns the loop state given at Start or SpawnChild.
func (ec *ExecutionContext) Data() any {
	if ec == nil {
		return nil
	}
	return ec.data
}

// Tracer returns the tracer ec records through.
func (ec *ExecutionContext) Tracer() *Tracer {
	if ec == nil {
		return nil
	}
	return ec.t
}

// Record appends r to the run and delivers it to the sinks. V, TraceID,
// Depth and Seq are always set by the run; Time, Iteration, SpanID (a new
// span) and ParentID (the current iteration's span, or the run's) are
// filled in when left zero.
// Values and Run (with its tags) are copied and pass through the capture
// policy and the redaction hooks first, so the caller may reuse them.
// Stats, its own and its ancestors', are updated before Record returns.
func (ec *ExecutionContext) Record(r Record) {
	if ec != nil {
		if r.Run != nil {
			r.EditRun() // the caller's: a copy, tags included
		}
		ec.record(ec.ctx, r)
	}
}

// record records r; a Block wait for room gives up when ctx is done: the
// context of the run whose code makes r (a child's for its child.spawn
// and child.end records, which go in the parent's log). r.Run, if any,
// is the record's own (the redaction hooks write into it): Record copies
// the caller's, Start makes one.
func (ec *ExecutionContext) record(ctx context.Context, r Record) {
	t := ec.t
	r.V = Version
	r.TraceID = ec.trace.id
	r.Depth = ec.depth
	if r.Time.IsZero() {
		r.Time = t.now()
	}
	r.Time = r.Time.UTC()
	if r.SpanID.IsZero() {
		r.SpanID = NewSpanID()
	}
	fresh := ec.capture(&r)
	d := t.disp
	background := d != nil && !d.opts.Inline
	// Before the lock, so that a Block policy waiting for room in the
	// queue holds up only this goroutine.
	sent := background && d.reserve(ctx)

	ec.mu.Lock()
	ec.keep(&r, fresh)
	if r.Iteration == 0 {
		r.Iteration = ec.iteration
	}
	if r.ParentID.IsZero() && r.SpanID != ec.span {
		r.ParentID = ec.span
		if !ec.iterSpan.IsZero() && r.SpanID != ec.iterSpan {
			r.ParentID = ec.iterSpan
		}
	}
	if background && !ec.queued {
		// Registered before the record gets its Seq, so that a delivery
		// that saw this Seq also sees this run: see Dispatcher.take.
		ec.queued = true
		d.register(ec)
	}
	r.Seq = ec.trace.seq.Add(1)
	if idx := ec.records.n; sent {
		ec.records.append(r)
		ec.addUnsent(idx)
	} else {
		if !ec.stream {
			ec.records.append(r)
		}
		if background {
			ec.lost.add(r.Seq, r.Time) // reported by a marker: see Dispatcher.round
		}
	}
	ec.stats.Add(&r)
	ec.mu.Unlock()
	if d != nil && d.opts.Inline {
		d.emit(r)
	}

	for p := ec.parent; p != nil; p = p.parent {
		p.mu.Lock()
		p.stats.Add(&r)
		p.mu.Unlock()
	}
}

// Records returns the records of ec and of every run nested in it, in Seq
// order. The slice may be the run's own log, shared rather than copied
// (records never change once made, and later records never show through
// it): treat it as read-only. The records stay in memory as long as ec is
// reachable. For a run started with RunOptions.StreamOnly it returns nil.
func (ec *ExecutionContext) Records() []Record {
	if ec == nil || ec.stream {
		return nil
	}
	ec.mu.Lock()
	if len(ec.children) == 0 && len(ec.records.chunks) == 0 {
		recs := ec.records.head
		ec.mu.Unlock()
		return recs[:len(recs):len(recs)]
	}
	ec.mu.Unlock()
	out := make([]Record, 0, ec.Stats().Records)
	nested := ec.collect(&out)
	if nested { // each context's records are in order; together they interleave
		slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	return out
}

// collect appends the records of ec and its children to out, and reports
// whether there were children.
func (ec *ExecutionContext) collect(out *[]Record) bool {
	ec.mu.Lock()
	*out = append(*out, ec.records.head...)
	for _, c := range ec.records.chunks {
		*out = append(*out, c...)
	}
	kids := slices.Clone(ec.children)
	ec.mu.Unlock()
	for _, c := range kids {
		c.collect(out)
	}
	return len(kids) > 0
}

// Stats returns a copy of the aggregates of ec and its children so far.
func (ec *ExecutionContext) Stats() Stats {
	if ec == nil {
		return Stats{}
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return ec.stats.Clone()
}

// Iteration returns the current iteration number, from 1; 0 before the
// first.
func (ec *ExecutionContext) Iteration() int {
	if ec == nil {
		return 0
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return ec.iteration
}

// StartIteration begins the next iteration and records iteration.start.
// Records made until EndIteration are children of the iteration's span.
// It returns the new iteration number.
func (ec *ExecutionContext) StartIteration() int {
	if ec == nil {
		return 0
	}
	now := ec.t.now()
	ec.mu.Lock()
	ec.iteration++
	n := ec.iteration
	ec.iterSpan = NewSpanID()
	ec.iterStart = now
	span := ec.iterSpan
	ec.mu.Unlock()
	ec.Record(Record{Type: TypeIterationStart, SpanID: span, ParentID: ec.span, Iteration: n, Time: now})
	return n
}

// EndIteration records iteration.end for the current iteration with the
// loop's action ("continue", "terminate", …).
func (ec *ExecutionContext) EndIteration(action string) {
	if ec == nil {
		return
	}
	now := ec.t.now()
	ec.mu.Lock()
	span, start, n := ec.iterSpan, ec.iterStart, ec.iteration
	ec.iterSpan = SpanID{}
	ec.mu.Unlock()
	if span.IsZero() {
		return
	}
	ec.Record(Record{Type: TypeIterationEnd, SpanID: span, ParentID: ec.span, Iteration: n, Status: action, Duration: now.Sub(start), Time: now})
}

func (ec *ExecutionContext) spawn(ctx context.Context, name string, data any, under SpanID) *ExecutionContext {
	c := &ExecutionContext{
		t: ec.t, ctx: ctx, trace: ec.trace, name: name, span: NewSpanID(),
		parent: ec, depth: ec.depth + 1, data: data, start: ec.t.now(), stream: ec.stream,
	}
	ec.mu.Lock()
	ec.children = append(ec.children, c)
	c.under = under
	if under.IsZero() {
		c.under = ec.span
		if !ec.iterSpan.IsZero() {
			c.under = ec.iterSpan
		}
	}
	ec.mu.Unlock()
	ec.record(ctx, Record{Type: TypeChildSpawn, SpanID: c.span, ParentID: c.under, Name: name, Time: c.start})
	return c
}

// SpawnChild starts a nested run (a sub-agent, a compaction pass) of the
// run carried by ctx, records child.spawn under the span that ctx carries
// (see Span.Context) or else the current iteration, and returns a context
// carrying the child. The child's stats roll up into its parent as they
// arrive. End the child with its End method, which records child.end:
//
//	ctx, child := trace.SpawnChild(ctx, "compaction", nil)
//	defer child.End(nil, nil)
//
// Without a run in ctx it returns ctx and a nil (disabled) child.
func SpawnChild(ctx context.Context, name string, data any) (context.Context, *ExecutionContext) {
	ec := FromContext(ctx)
	if ec == nil {
		return ctx, nil
	}
	var under SpanID
	if s, ok := ctx.Value(spanKey{}).(spanRef); ok && s.ec == ec {
		under = s.id
	}
	c := ec.spawn(ctx, name, data, under)
	return NewContext(ctx, c), c
}

// SetTermination sets why the run will end and the error, if any, for a
// reason that End cannot infer from an error (a limit, max_iterations, a
// hook's abort). The first reason set wins, so a limit that stops the run
// is not overwritten by the error the stop causes further up. It does not
// end the run and records nothing; End does.
func (ec *ExecutionContext) SetTermination(reason TerminationReason, err error) {
	if ec == nil {
		return
	}
	ec.mu.Lock()
	if ec.reason == "" {
		ec.reason, ec.err = reason, err
	}
	ec.mu.Unlock()
}

// ReasonFor maps an error to a termination reason: nil is success, a
// canceled context is context_canceled, a deadline is timeout, anything
// else is error.
func ReasonFor(err error) TerminationReason {
	switch {
	case err == nil:
		return TerminationSuccess
	case errors.Is(err, context.Canceled):
		return TerminationContextCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return TerminationTimeout
	}
	return TerminationError
}

// End ends the run with its outcome, and is the one way to end a run,
// root or nested. If err is not nil it records err as an error record (so
// that it counts in Stats) and sets the termination reason to
// ReasonFor(err), unless SetTermination set one already; result, if not
// empty, is the run's result. It then records run.end for a root run or
// child.end for a nested one, with the termination reason (success if none
// was set), the result, the error and the duration. Later calls do
// nothing, so a deferred End(nil, nil) is a safe backstop:
//
//	ctx, run := tr.Start(ctx, "agent", trace.RunOptions{})
//	defer run.End(nil, nil) // if a panic skips the End below
//	answer, err := work(ctx)
//	run.End(trace.Text(answer), err)
func (ec *ExecutionContext) End(result Value, err error) {
	if ec == nil {
		return
	}
	if err != nil || len(result) > 0 {
		ec.mu.Lock()
		ended := ec.ended
		ec.mu.Unlock()
		if ended {
			return
		}
		if err != nil {
			ec.Error(err)
			ec.SetTermination(ReasonFor(err), err)
		}
		if len(result) > 0 {
			ec.mu.Lock()
			ec.result = ec.own(result) // a copy: the caller may reuse result's buffer
			ec.mu.Unlock()
		}
	}
	ec.recordEnd()
}

// recordEnd records the run's end record, once.
func (ec *ExecutionContext) recordEnd() {
	now := ec.t.now()
	ec.mu.Lock()
	if ec.ended {
		ec.mu.Unlock()
		return
	}
	ec.ended = true
	ec.end = now
	if ec.reason == "" {
		ec.reason = TerminationSuccess
	}
	r := Record{Type: TypeRunEnd, SpanID: ec.span, Name: ec.name, Status: string(ec.reason), Output: ec.result, Duration: now.Sub(ec.start), Time: now}
	if ec.err != nil {
		r.Error = ec.err.Error()
	}
	ec.mu.Unlock()
	if p := ec.parent; p != nil {
		r.Type, r.ParentID = TypeChildEnd, ec.under
		p.record(ec.ctx, r)
		return
	}
	ec.Record(r)
	if !ec.stream {
		ec.mu.Lock()
		n := int64(ec.records.n)
		ec.mu.Unlock()
		ec.t.prevRun.Store(ec.t.lastRun.Swap(n))
	}
}

// Termination returns why the run ended and its error; the reason is empty
// until End was called, so it also reports whether the run has ended.
func (ec *ExecutionContext) Termination() (TerminationReason, error) {
	if ec == nil {
		return "", nil
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if !ec.ended {
		return "", nil
	}
	return ec.reason, ec.err
}

// Result returns the result the run ended with (see End).
func (ec *ExecutionContext) Result() Value {
	if ec == nil {
		return nil
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return ec.result
}

// Duration returns how long the run took, or has taken so far.
func (ec *ExecutionContext) Duration() time.Duration {
	if ec == nil {
		return 0
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if ec.ended {
		return ec.end.Sub(ec.start)
	}
	return ec.t.now().Sub(ec.start)
}

// recordLog is a run's append-only list of records. It starts with head,
// sized like the tracer's previous run, and goes on in chunks: a run that
// fits in head hands its records out without a copy (records never change
// once appended), and a run that outgrows it never copies what it holds.
// Since no record moves once appended, a slice of the log stays valid and
// unchanged while the log grows: the dispatcher hands such slices to sinks.
type recordLog struct {
	head   []Record
	chunks [][]Record
	n      int // records in head and chunks
	// A StreamOnly run drops its reference to chunks the dispatcher took
	// in full: chunks[:freed] are nil, and held records before freedTo.
	freed, freedTo int
}

// maxPresize bounds the head a new run starts with, whatever the last runs
// made: 16384 records of 352 bytes, 5.5 MB. Past the head a log grows in
// chunks without copying (Records copies it once), so a larger head would
// save little. Since the head follows the smaller of the last two runs,
// a small run pays for this bound only right after two runs at least that
// large in a row, and only once.
const maxPresize = 1 << 14

// maxChunk keeps a chunk (64 × ~300 bytes) below the runtime's large-object
// size, whose allocations take the heap lock and cost far more.
const maxChunk = 64

func (l *recordLog) append(r Record) {
	l.n++
	if len(l.chunks) == 0 && len(l.head) < cap(l.head) {
		l.head = append(l.head, r)
		return
	}
	n := len(l.chunks)
	if n == 0 || len(l.chunks[n-1]) == cap(l.chunks[n-1]) {
		size := firstChunk
		if n > 0 {
			size = min(2*cap(l.chunks[n-1]), maxChunk)
		}
		l.chunks = append(l.chunks, make([]Record, 0, size))
		n++
	}
	l.chunks[n-1] = append(l.chunks[n-1], r)
}

// release forgets the full chunks whose records all come before index
// below, so that the garbage collector can free them once the sinks are
// done with them. The log must have no head (a StreamOnly run's has none);
// the last chunk, still being appended to, is kept.
func (l *recordLog) release(below int) {
	for l.freed < len(l.chunks)-1 {
		c := l.chunks[l.freed]
		if l.freedTo+len(c) > below {
			return
		}
		l.freedTo += len(c)
		l.chunks[l.freed] = nil
		l.freed++
	}
}

// Chunk sizes after the head: firstChunk, then doubling up to maxChunk.
const firstChunk = 16

// locate returns where record i of the log is: in chunk c (-1 for the
// head) at offset off. Chunk sizes are fixed (16, 32, then 64), so this is
// arithmetic, not a walk: the dispatcher locates records in logs of
// millions.
func (l *recordLog) locate(i int) (c, off int) {
	if i < len(l.head) {
		return -1, i
	}
	i -= len(l.head)
	for c, size := 0, firstChunk; ; c, size = c+1, min(2*size, maxChunk) {
		if size == maxChunk {
			return c + i/maxChunk, i % maxChunk
		}
		if i < size {
			return c, i
		}
		i -= size
	}
}

// part returns chunk c of the log (-1 for the head).
func (l *recordLog) part(c int) []Record {
	if c < 0 {
		return l.head
	}
	return l.chunks[c]
}

// at returns the record at index i of the log.
func (l *recordLog) at(i int) *Record {
	c, off := l.locate(i)
	return &l.part(c)[off]
}

// appendSlices appends to segs the slices of the log that hold records
// from (inclusive) to to (exclusive), and returns segs.
func (l *recordLog) appendSlices(segs [][]Record, from, to int) [][]Record {
	if from >= to {
		return segs
	}
	c, off := l.locate(from)
	for n := to - from; n > 0; c, off = c+1, 0 {
		p := l.part(c)
		k := min(len(p)-off, n)
		segs = append(segs, p[off:off+k:off+k])
		n -= k
	}
	return segs
}

// logRange is the records from (inclusive) to to (exclusive) of a log.
type logRange struct{ from, to int }

// addUnsent marks record i of the log as waiting for the dispatcher.
// ec.mu must be held.
func (ec *ExecutionContext) addUnsent(i int) {
	if n := len(ec.unsent); n > 0 && ec.unsent[n-1].to == i {
		ec.unsent[n-1].to++
		return
	}
	ec.unsent = append(ec.unsent, logRange{i, i + 1})
}

// takeUnsent appends to segs the slices of ec's log that wait for the
// dispatcher and have a Seq of at most cut, and marks them taken; it
// returns the records dropped since the last marker if the first of them
// is within the cut. It reports whether records or drops are left (made
// after the cut), in which case ec stays registered and the caller must
// put it back on the pending list.
func (ec *ExecutionContext) takeUnsent(segs [][]Record, cut uint64) ([][]Record, loss, bool) {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	l := &ec.records
	i := 0
	for ; i < len(ec.unsent); i++ {
		r := ec.unsent[i]
		if l.at(r.to-1).Seq <= cut {
			segs = l.appendSlices(segs, r.from, r.to)
			continue
		}
		// Seq grows along the log: take the part up to the cut.
		j := r.from + sort.Search(r.to-r.from, func(k int) bool { return l.at(r.from+k).Seq > cut })
		segs = l.appendSlices(segs, r.from, j)
		ec.unsent[i].from = j
		break
	}
	ec.unsent = append(ec.unsent[:0], ec.unsent[i:]...)
	var lost loss
	if ec.lost.n > 0 && ec.lost.seq <= cut {
		lost, ec.lost = ec.lost, loss{}
	}
	if ec.stream {
		below := l.n
		if len(ec.unsent) > 0 {
			below = ec.unsent[0].from
		}
		l.release(below)
	}
	left := len(ec.unsent) > 0 || ec.lost.n > 0
	ec.queued = left
	return segs, lost, left
}
