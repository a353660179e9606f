package trace_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loupe-dev/loupe/schema"
	"github.com/loupe-dev/loupe/trace"
)

// collect is a sink that keeps what it receives: records in recs,
// TypeDropped markers in marks.
type collect struct {
	mu    sync.Mutex
	recs  []trace.Record
	marks []trace.Record
	order []trace.Record // both, as received
	gate  chan struct{}  // if set, each write waits for a token
	fail  error
}

func (c *collect) WriteRecords(_ context.Context, rs []trace.Record) error {
	if c.gate != nil {
		<-c.gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order = append(c.order, rs...)
	for _, r := range rs {
		if r.Type == trace.TypeDropped {
			c.marks = append(c.marks, r)
		} else {
			c.recs = append(c.recs, r)
		}
	}
	return c.fail
}

// delivered returns everything the sink received, markers included, in
// the order it received it.
func (c *collect) delivered() []trace.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.order)
}

// len returns how many records, markers aside, the sink received.
func (c *collect) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

// lost returns the sum of the counts of the markers the sink received,
// by trace.
func (c *collect) lost(t *testing.T) map[trace.TraceID]uint64 {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	return markerCounts(t, c.marks)
}

// markerCounts checks each marker against the contract of TypeDropped and
// sums their counts by trace.
func markerCounts(t *testing.T, marks []trace.Record) map[trace.TraceID]uint64 {
	t.Helper()
	sum := map[trace.TraceID]uint64{}
	for _, m := range marks {
		var out struct{ Count uint64 }
		if err := json.Unmarshal(m.Output, &out); err != nil || out.Count == 0 || string(m.Output) != `{"count":`+strconv.FormatUint(out.Count, 10)+`}` {
			t.Fatalf("marker output %s: want {\"count\":N}, N > 0 (%v)", m.Output, err)
		}
		if m.Name != "records" || m.V != trace.Version || m.TraceID.IsZero() || m.SpanID.IsZero() || m.Seq == 0 || m.Time.IsZero() {
			t.Fatalf("marker %s breaks the TypeDropped contract", m.AppendJSON(nil))
		}
		if _, err := trace.DecodeRecord(m.AppendJSON(nil)); err != nil {
			t.Fatalf("marker %s does not decode: %v", m.AppendJSON(nil), err)
		}
		sum[m.TraceID] += out.Count
	}
	return sum
}

func rec(i int) trace.Record {
	return trace.Record{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Seq: uint64(i), Type: trace.TypeCustom, Name: "x"}
}

func TestDispatchInline(t *testing.T) {
	c := &collect{}
	d := trace.NewDispatcher(trace.DispatchOptions{Inline: true}, c)
	for i := range 10 {
		d.Emit(rec(i))
		if c.len() != i+1 {
			t.Fatalf("inline dispatch did not deliver record %d before Emit returned", i)
		}
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.Emit(rec(11))
	if d.Stats().Dropped != 1 {
		t.Error("emit after shutdown not counted as dropped")
	}
}

func TestDispatchBackgroundDrainsOnShutdown(t *testing.T) {
	c := &collect{}
	d := trace.NewDispatcher(trace.DispatchOptions{OnFull: trace.Block, QueueSize: 16, BatchSize: 4}, c)
	for i := range 1000 {
		d.Emit(rec(i))
	}
	if err := d.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.len() != 1000 {
		t.Fatalf("after Flush the sink has %d of 1000 records", c.len())
	}
	for i := range 500 {
		d.Emit(rec(i))
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.len() != 1500 {
		t.Fatalf("Shutdown left %d of 1500 records undelivered", 1500-c.len())
	}
	for i, r := range c.recs[:1000] {
		if r.Seq != uint64(i) {
			t.Fatalf("record %d delivered out of order (seq %d)", i, r.Seq)
		}
	}
}

func TestDispatchDropIsCountedAndReported(t *testing.T) {
	c := &collect{gate: make(chan struct{})}
	d := trace.NewDispatcher(trace.DispatchOptions{QueueSize: 8, BatchSize: 1}, c)
	for i := range 100 {
		d.Emit(rec(i)) // the sink is stuck, so the queue fills
	}
	st := d.Stats()
	if st.Dropped == 0 || st.Emitted+st.Dropped != 100 {
		t.Fatalf("stats %+v: want drops, and emitted+dropped = 100", st)
	}
	close(c.gate)
	err := d.Shutdown(context.Background())
	var de *trace.DropError
	if !errors.As(err, &de) || de.Dropped != st.Dropped {
		t.Fatalf("Shutdown = %v, want a DropError with %d dropped", err, st.Dropped)
	}
	if !strings.Contains(err.Error(), "dropped") || c.len() != int(st.Emitted) {
		t.Errorf("error %q; sink got %d of %d accepted", err, c.len(), st.Emitted)
	}
	if lost := c.lost(t); lost[trace.TraceID{1}] != st.Dropped {
		t.Errorf("markers count %v lost, want %d for the trace", lost, st.Dropped)
	}
}

func TestDispatchShutdownDeadlineSaysWhatIsLeft(t *testing.T) {
	c := &collect{gate: make(chan struct{})}
	d := trace.NewDispatcher(trace.DispatchOptions{QueueSize: 64, BatchSize: 1}, c)
	for i := range 10 {
		d.Emit(rec(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := d.Flush(ctx); err == nil {
		t.Fatal("Flush succeeded while the sink was stuck")
	}
	err := d.Shutdown(ctx)
	var de *trace.DropError
	if !errors.As(err, &de) || de.Unsent != 10 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want 10 unsent and the deadline", err)
	}
	close(c.gate)
}

func TestDispatchSinkErrorsAreNotSilent(t *testing.T) {
	var reported atomic.Int32
	c := &collect{fail: errors.New("disk full")}
	d := trace.NewDispatcher(trace.DispatchOptions{Inline: true, OnError: func(error) { reported.Add(1) }}, c)
	d.Emit(rec(1))
	d.Emit(rec(2))
	if reported.Load() != 2 {
		t.Errorf("OnError called %d times, want 2", reported.Load())
	}
	err := d.Shutdown(context.Background())
	var de *trace.DropError
	if !errors.As(err, &de) || de.SinkErrs != 2 {
		t.Errorf("Shutdown = %v, want 2 sink errors", err)
	}
}

// TestDispatchRunsInSeqOrder records a run with nested runs while the
// dispatcher delivers every few microseconds, and checks that the sink saw
// every record once, in Seq order: a run's log is handed over in parts,
// and a part of the parent never overtakes a part of a child.
func TestDispatchRunsInSeqOrder(t *testing.T) {
	c := &collect{}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{c}, Dispatch: trace.DispatchOptions{Linger: time.Microsecond, BatchSize: 7, OnFull: trace.Block}})
	ctx, ec := tr.Start(context.Background(), "root", trace.RunOptions{})
	for i := range 300 {
		ec.StartIteration()
		_, child := trace.SpawnChild(ctx, "sub", nil)
		for range i % 4 {
			child.Custom("step", trace.JSON(i))
			_, grand := trace.SpawnChild(trace.NewContext(ctx, child), "grand", nil)
			grand.Custom("leaf", nil)
			grand.End(nil, nil)
		}
		child.End(nil, nil)
		ec.EndIteration("continue")
	}
	ec.End(nil, nil)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := ec.Records()
	if len(c.recs) != len(want) {
		t.Fatalf("sink got %d records, the run made %d", len(c.recs), len(want))
	}
	for i, r := range c.recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d reached the sink with seq %d: out of order", i, r.Seq)
		}
	}
}

// TestDispatchRunRecordsDrop fills the queue from a run while the sink is
// stuck: records beyond QueueSize are dropped for the sinks and counted,
// and the run itself keeps every record.
func TestDispatchRunRecordsDrop(t *testing.T) {
	c := &collect{gate: make(chan struct{})}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{c}, Dispatch: trace.DispatchOptions{QueueSize: 8, BatchSize: 1}})
	_, ec := tr.Start(context.Background(), "run", trace.RunOptions{})
	for i := range 99 {
		ec.Custom("x", trace.JSON(i))
	}
	st := tr.Dispatcher().Stats()
	if st.Dropped == 0 || st.Emitted+st.Dropped != 100 {
		t.Fatalf("stats %+v: want drops, and emitted+dropped = 100", st)
	}
	if n := len(ec.Records()); n != 100 {
		t.Fatalf("the run kept %d of its 100 records", n)
	}
	close(c.gate)
	err := tr.Shutdown(context.Background())
	var de *trace.DropError
	if !errors.As(err, &de) || de.Dropped != st.Dropped || c.len() != int(st.Emitted) {
		t.Fatalf("Shutdown = %v; sink got %d of %d accepted", err, c.len(), st.Emitted)
	}
	if lost := c.lost(t); len(lost) != 1 || lost[ec.TraceID()] != st.Dropped {
		t.Fatalf("markers count %v lost, want %d for trace %s", lost, st.Dropped, ec.TraceID())
	}
	// The markers take the Seq of a lost record: with the records
	// delivered, every Seq of the run appears once, in order.
	all := append(slices.Clone(c.recs), c.marks...)
	slices.SortFunc(all, func(a, b trace.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	for i := 1; i < len(all); i++ {
		if all[i].Seq == all[i-1].Seq {
			t.Fatalf("seq %d delivered twice (a marker collides with a record)", all[i].Seq)
		}
	}
}

// TestDispatchDeliversWithoutFlush checks that records reach the sink
// after Linger on their own, also once the goroutine went to sleep for
// lack of work. It runs on synctest's fake clock: once the clock has
// moved past every linger timer and every goroutine is blocked, the
// dispatcher's goroutine can only be parked waiting for work.
func TestDispatchDeliversWithoutFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &collect{}
		tr := trace.New(trace.Options{Sinks: []trace.Sink{c}, Dispatch: trace.DispatchOptions{Linger: time.Millisecond}})
		defer tr.Shutdown(context.Background())
		_, ec := tr.Start(context.Background(), "run", trace.RunOptions{})
		for want := 1; want <= 3; want++ {
			if want > 1 {
				ec.Custom("next", nil)
			}
			time.Sleep(time.Second) // fake time: the linger timers fire, then the goroutine parks
			synctest.Wait()
			if n := c.len(); n != want {
				t.Fatalf("record %d not delivered after Linger without Flush: the sink has %d", want, n)
			}
		}
	})
}

// TestDispatchAccountingUnderLoad records from many goroutines and nested
// runs into a small queue with the Drop policy and a slow sink, flushing
// along the way: every record is either written once or counted as
// dropped, and the sink never sees one twice.
func TestDispatchAccountingUnderLoad(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]int{}
	var marks []trace.Record
	slow := trace.SinkFunc(func(_ context.Context, rs []trace.Record) error {
		time.Sleep(50 * time.Microsecond)
		mu.Lock()
		for _, r := range rs {
			seen[r.Seq]++ // a marker's Seq is that of a lost record
			if r.Type == trace.TypeDropped {
				marks = append(marks, r)
			}
		}
		mu.Unlock()
		return nil
	})
	tr := trace.New(trace.Options{Sinks: []trace.Sink{slow}, Dispatch: trace.DispatchOptions{QueueSize: 32, BatchSize: 8, Linger: 100 * time.Microsecond}})
	ctx, ec := tr.Start(context.Background(), "load", trace.RunOptions{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 200 {
				if i%50 == 0 {
					_ = tr.Flush(context.Background())
				}
				if w%4 == 0 {
					_, child := trace.SpawnChild(ctx, "sub", nil)
					child.Custom("x", trace.JSON(i))
					child.End(nil, nil)
					continue
				}
				ec.Custom("y", trace.JSON(i))
			}
		})
	}
	wg.Wait()
	ec.End(nil, nil)
	err := tr.Shutdown(context.Background())
	st := tr.Dispatcher().Stats()
	total := uint64(len(ec.Records()))
	if st.Emitted+st.Dropped != total || st.Written != st.Emitted {
		t.Fatalf("stats %+v for %d records: want emitted+dropped = records, written = emitted", st, total)
	}
	var de *trace.DropError
	if st.Dropped > 0 && (!errors.As(err, &de) || de.Dropped != st.Dropped) {
		t.Fatalf("Shutdown = %v, want a DropError with %d dropped", err, st.Dropped)
	}
	for seq, n := range seen {
		if n != 1 {
			t.Fatalf("seq %d reached the sink %d times", seq, n)
		}
	}
	if uint64(len(seen)) != st.Written+uint64(len(marks)) {
		t.Fatalf("sink saw %d distinct records and %d markers, %d written", len(seen), len(marks), st.Written)
	}
	if lost := markerCounts(t, marks)[ec.TraceID()]; lost != st.Dropped {
		t.Fatalf("markers count %d lost, %d dropped", lost, st.Dropped)
	}
}

// TestDispatchConcurrentTracesInSeqOrder runs several traces at once, each
// with nested runs, and checks that the sink saw each trace's records
// once and in Seq order.
func TestDispatchConcurrentTracesInSeqOrder(t *testing.T) {
	c := &collect{}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{c}, Dispatch: trace.DispatchOptions{Linger: time.Microsecond, BatchSize: 5, OnFull: trace.Block}})
	var wg sync.WaitGroup
	made := make([]int, 8)
	for g := range made {
		wg.Go(func() {
			ctx, ec := tr.Start(context.Background(), "root", trace.RunOptions{})
			for i := range 100 {
				ec.StartIteration()
				_, child := trace.SpawnChild(ctx, "sub", nil)
				for range i % 3 {
					child.Custom("step", nil)
				}
				child.End(nil, nil)
				ec.EndIteration("continue")
			}
			ec.End(nil, nil)
			made[g] = len(ec.Records())
		})
	}
	wg.Wait()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := map[trace.TraceID]uint64{}
	for _, r := range c.recs {
		if r.Seq != last[r.TraceID]+1 {
			t.Fatalf("trace %s: seq %d after %d", r.TraceID, r.Seq, last[r.TraceID])
		}
		last[r.TraceID] = r.Seq
	}
	total := 0
	for _, n := range made {
		total += n
	}
	if len(last) != len(made) || len(c.recs) != total {
		t.Fatalf("sink saw %d traces and %d records; the runs made %d and %d", len(last), len(c.recs), len(made), total)
	}
}

// crashEnv names the case a re-executed test binary runs: crash cases run
// in a subprocess, so that a panic that escapes fails the test instead of
// killing the whole suite.
const crashEnv = "LOUPE_DISPATCH_CRASH_CASE"

// inSubprocess runs the subtest t in a fresh copy of the test binary with
// crashEnv set to its name, and fails t if that process fails or dies. In
// the copy, it returns true: the caller then runs the case itself.
func inSubprocess(t *testing.T, name string) bool {
	t.Helper()
	if c := os.Getenv(crashEnv); c != "" {
		if c != name {
			t.Skip("another case runs in this process")
		}
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+strings.Split(t.Name(), "/")[0]+"$/^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+name)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("case %s in a subprocess: %v\n%s", name, err, out)
	}
	return false
}

// panicky is a sink that panics on every write, and on Close.
type panicky struct {
	value  func() any
	closed atomic.Int32
}

func (p *panicky) WriteRecords(context.Context, []trace.Record) error { panic(p.value()) }

func (p *panicky) Close() error {
	p.closed.Add(1)
	panic("close exploded")
}

// errorLog collects what OnError receives.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *errorLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// TestSinkPanicIsRecovered records runs into a sink that panics, next to
// one that does not, in the background and the Inline modes: the process
// lives, the other sink gets every record, and each panic reaches OnError
// as a sink error naming the value and the line that panicked.
func TestSinkPanicIsRecovered(t *testing.T) {
	for _, c := range []struct {
		name   string
		inline bool
		value  func() any
		want   string // in the error
	}{
		{"background", false, func() any { return "sink exploded" }, "sink exploded"},
		{"inline", true, func() any { return "sink exploded" }, "sink exploded"},
		{"background-runtime-error", false, func() any { return []int{}[len(os.Args)] }, "index out of range"},
		{"inline-error-value", true, func() any { return context.Canceled }, "context canceled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !inSubprocess(t, c.name) {
				return
			}
			var log errorLog
			bad, good := &panicky{value: c.value}, &collect{}
			tr := trace.New(trace.Options{Sinks: []trace.Sink{bad, good}, Dispatch: trace.DispatchOptions{Inline: c.inline, OnError: log.add}})
			ctx, ec := tr.Start(context.Background(), "run", trace.RunOptions{})
			for i := range 20 {
				_, _ = trace.Tool(ctx, "t", i, func(context.Context) (int, error) { return i, nil })
			}
			ec.End(nil, nil)
			err := tr.Shutdown(context.Background())
			if n := good.len(); n != len(ec.Records()) {
				t.Fatalf("the healthy sink got %d of %d records", n, len(ec.Records()))
			}
			st := tr.Dispatcher().Stats()
			errs := log.all()
			if st.SinkErrors == 0 || uint64(len(errs)) != st.SinkErrors {
				t.Fatalf("%d sink errors counted, %d reported", st.SinkErrors, len(errs))
			}
			for _, e := range errs {
				var pe *trace.PanicError
				if !errors.As(e, &pe) || !strings.Contains(e.Error(), c.want) || !strings.Contains(e.Error(), "dispatch_test.go:") || !strings.Contains(e.Error(), "*trace_test.panicky") {
					t.Fatalf("OnError got %v; want a *trace.PanicError naming the sink, %q and the line", e, c.want)
				}
				if len(pe.Stack) == 0 {
					t.Fatal("the PanicError has no stack")
				}
			}
			// Close panicked too: Shutdown says so, and says nothing was
			// delivered to the panicking sink.
			var de *trace.DropError
			if bad.closed.Load() != 1 || err == nil || !strings.Contains(err.Error(), "close exploded") || !errors.As(err, &de) || de.SinkErrs != st.SinkErrors {
				t.Fatalf("Shutdown = %v after %d Close calls; want the Close panic and the sink errors", err, bad.closed.Load())
			}
		})
	}
}

// TestOnErrorPanicIsRecovered: even an OnError that panics does not take
// the dispatcher's goroutine, and the process, down.
func TestOnErrorPanicIsRecovered(t *testing.T) {
	if !inSubprocess(t, "onerror") {
		return
	}
	c := &collect{fail: errors.New("disk full")}
	d := trace.NewDispatcher(trace.DispatchOptions{OnError: func(error) { panic("OnError exploded") }}, c)
	for i := range 5 {
		d.Emit(rec(i + 1))
		if err := d.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	_ = d.Shutdown(context.Background())
	if c.len() != 5 {
		t.Fatalf("sink got %d of 5 records", c.len())
	}
}

// blockingSink blocks every write until release is closed; if honour is
// set it returns early, with ctx's error, when ctx is done.
type blockingSink struct {
	release  chan struct{}
	honour   bool
	entered  chan struct{} // closed at the first write
	once     sync.Once
	canceled atomic.Bool // a write saw its context done
	closes   atomic.Int32
	writes   atomic.Int32
}

func newBlockingSink(honour bool) *blockingSink {
	return &blockingSink{release: make(chan struct{}), entered: make(chan struct{}), honour: honour}
}

func (s *blockingSink) WriteRecords(ctx context.Context, _ []trace.Record) error {
	s.writes.Add(1)
	s.once.Do(func() { close(s.entered) })
	if s.honour {
		select {
		case <-s.release:
			return nil
		case <-ctx.Done():
			s.canceled.Store(true)
			return ctx.Err()
		}
	}
	<-s.release
	s.canceled.Store(ctx.Err() != nil)
	return nil
}

func (s *blockingSink) Close() error {
	s.closes.Add(1)
	return nil
}

// returnsIn calls f in a goroutine and returns its result; it fails t if
// f has not returned within a minute: a hang, not a timing claim.
func returnsIn[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return", what)
		panic("unreachable")
	}
}

// TestShutdownDeadlineHolds gives Shutdown a short deadline while a sink is
// stuck, in both modes, with a sink that ignores its context and one that
// honours it: Shutdown returns, with the deadline's error and the count of
// records not delivered, and the sinks' context is cancelled.
func TestShutdownDeadlineHolds(t *testing.T) {
	for _, c := range []struct {
		name           string
		inline, honour bool
	}{
		{"background", false, false},
		{"background-honours-ctx", false, true},
		{"inline", true, false},
		{"inline-honours-ctx", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newBlockingSink(c.honour)
			d := trace.NewDispatcher(trace.DispatchOptions{Inline: c.inline, QueueSize: 64, BatchSize: 1, OnError: func(error) {}}, s)
			go func() {
				for i := range 10 {
					d.Emit(rec(i + 1))
				}
			}()
			<-s.entered
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			err := returnsIn(t, "Shutdown", func() error { return d.Shutdown(ctx) })
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Shutdown = %v, want the deadline", err)
			}
			var de *trace.DropError
			// A sink that honours its context may return the stuck write
			// (with an error) before Shutdown counts: then 9 are unsent.
			if !errors.As(err, &de) || (!c.inline && de.Unsent != 10 && !(c.honour && de.Unsent == 9)) {
				t.Fatalf("Shutdown = %v; want a DropError with the 10 records (9 if the sink gave up first) unsent", err)
			}
			if c.honour {
				// The stuck write returns once its context is cancelled,
				// and the sink is closed after it, once.
				deadline := time.Now().Add(time.Minute)
				for s.closes.Load() == 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if !s.canceled.Load() || s.closes.Load() != 1 {
					t.Fatalf("sink: cancelled %v, closed %d times; want its context cancelled and one Close", s.canceled.Load(), s.closes.Load())
				}
				if w := s.writes.Load(); !c.inline && w != 1 {
					t.Fatalf("%d writes after Shutdown gave up; want none after the stuck one", w-1)
				}
			}
			close(s.release)
			// A second Shutdown reports the same loss.
			if err := d.Shutdown(context.Background()); !errors.As(err, &de) {
				t.Fatalf("second Shutdown = %v, want the DropError again", err)
			}
		})
	}
}

// TestFlushDeadlineHolds: Flush returns by its deadline while a sink is
// stuck, and says how many records are not written.
func TestFlushDeadlineHolds(t *testing.T) {
	s := newBlockingSink(false)
	defer close(s.release)
	d := trace.NewDispatcher(trace.DispatchOptions{QueueSize: 64, BatchSize: 1, OnError: func(error) {}}, s)
	for i := range 5 {
		d.Emit(rec(i + 1))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := returnsIn(t, "Flush", func() error { return d.Flush(ctx) })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "5 records not yet written") {
		t.Fatalf("Flush = %v; want the deadline and 5 records not written", err)
	}
}

// TestBlockGivesUp fills the queue of a Block dispatcher whose sink is
// stuck and checks that a recording goroutine waiting for room returns
// when the tracer shuts down, or when its run's context ends (cancelled,
// or its deadline passed), with the record counted as dropped; and that
// the trace gets a marker for it once the sink recovers.
func TestBlockGivesUp(t *testing.T) {
	for _, how := range []string{"shutdown", "cancel", "timeout", "child-cancel"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newBlockingSink(false)
				c := &collect{}
				var log errorLog
				tr := trace.New(trace.Options{Sinks: []trace.Sink{s, c}, Dispatch: trace.DispatchOptions{OnFull: trace.Block, QueueSize: 4, BatchSize: 1, OnError: log.add}})
				release := sync.OnceFunc(func() { close(s.release) })
				defer func() { release(); tr.Shutdown(context.Background()) }() // no goroutine left in the bubble, even on failure
				runCtx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if how == "timeout" {
					runCtx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
					defer cancel()
				}
				ctx, ec := tr.Start(runCtx, "run", trace.RunOptions{})
				rec := ec
				if how == "child-cancel" {
					cctx, ccancel := context.WithCancel(ctx)
					cancel = ccancel
					_, rec = trace.SpawnChild(cctx, "child", nil)
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					for i := range 20 { // far more than the queue holds
						rec.Custom("x", trace.JSON(i))
					}
				}()
				<-s.entered
				synctest.Wait() // the producer is blocked: on a full queue, nothing dropped yet
				if st := tr.Dispatcher().Stats(); st.Emitted != 4 || st.Dropped != 0 {
					t.Fatalf("stats %+v with the sink stuck; want the queue of 4 full and nothing dropped", st)
				}
				select {
				case <-done:
					t.Fatal("the recording goroutine returned before it had to wait for room")
				default:
				}
				switch how {
				case "shutdown":
					sctx, scancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
					defer scancel()
					_ = tr.Shutdown(sctx)
				case "cancel", "child-cancel":
					cancel()
				}
				returnsIn(t, "the recording goroutine", func() bool { <-done; return true })
				st := tr.Dispatcher().Stats()
				if st.Dropped == 0 {
					t.Fatalf("stats %+v: the records that could not wait are not counted as dropped", st)
				}
				release()
				err := tr.Shutdown(context.Background())
				var de *trace.DropError
				if !errors.As(err, &de) || de.Dropped != st.Dropped {
					t.Fatalf("Shutdown = %v, want a DropError with %d dropped", err, st.Dropped)
				}
				if how == "shutdown" {
					return // the dispatcher stopped before it could deliver a marker
				}
				if lost := c.lost(t)[ec.TraceID()]; lost != st.Dropped {
					t.Fatalf("markers count %d lost, %d dropped", lost, st.Dropped)
				}
				var reported uint64
				for _, e := range log.all() {
					if errors.As(e, &de) {
						reported += de.Dropped
					}
				}
				if reported != st.Dropped {
					t.Fatalf("OnError heard of %d drops, %d dropped", reported, st.Dropped)
				}
			})
		})
	}
}

// TestDropsReachOnError drops thousands of records and checks that
// OnError hears of every one, in a few aggregated reports rather than one
// per record, and that by default (no OnError) a warning goes through
// log/slog.
func TestDropsReachOnError(t *testing.T) {
	var log errorLog
	gate := make(chan struct{})
	c := &collect{gate: gate}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{c}, Dispatch: trace.DispatchOptions{QueueSize: 8, BatchSize: 4, OnError: log.add}})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, ec := tr.Start(context.Background(), "run", trace.RunOptions{})
			for i := range 1000 {
				ec.Custom("x", trace.JSON(i))
			}
			ec.End(nil, nil)
		})
	}
	wg.Wait()
	close(gate)
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := tr.Dispatcher().Stats()
	var reported uint64
	errs := log.all()
	for _, e := range errs {
		var de *trace.DropError
		if !errors.As(e, &de) || de.Dropped == 0 || !strings.Contains(e.Error(), "dropped") {
			t.Fatalf("OnError got %v, want a *DropError", e)
		}
		reported += de.Dropped
	}
	if st.Dropped < 1000 || reported != st.Dropped || len(errs) > 10 {
		t.Fatalf("%d dropped, %d reported in %d calls; want all reported in a few calls", st.Dropped, reported, len(errs))
	}
	var sum uint64
	for _, n := range c.lost(t) {
		sum += n
	}
	if sum != st.Dropped || len(c.lost(t)) != 4 {
		t.Fatalf("markers for %d traces count %d lost; want 4 traces, %d", len(c.lost(t)), sum, st.Dropped)
	}
	_ = tr.Shutdown(context.Background())

	t.Run("default", func(t *testing.T) {
		var buf syncBuffer
		old := slog.Default()
		slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
		defer slog.SetDefault(old)
		gate := make(chan struct{})
		d := trace.NewDispatcher(trace.DispatchOptions{QueueSize: 2, BatchSize: 1}, &collect{gate: gate})
		for i := range 10 {
			d.Emit(rec(i + 1))
		}
		close(gate)
		_ = d.Shutdown(context.Background())
		if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "dropped") {
			t.Fatalf("slog output %q; want a warning about the drops", out)
		}
	})
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestDropMarkers checks the markers of a trace whose root run and nested
// run both lost records: one marker per trace per delivery, under the span
// of the run that lost the first record, with the Seq of that record, and
// counts that add up to what was dropped.
func TestDropMarkers(t *testing.T) {
	gate := make(chan struct{})
	c := &collect{gate: gate}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{c}, Dispatch: trace.DispatchOptions{QueueSize: 3, BatchSize: 1, OnError: func(error) {}}})
	ctx, ec := tr.Start(context.Background(), "root", trace.RunOptions{})
	_, child := trace.SpawnChild(ctx, "child", nil)
	for i := range 10 {
		child.Custom("c", trace.JSON(i))
		ec.Custom("r", trace.JSON(i))
	}
	child.End(nil, nil)
	ec.End(nil, nil)
	close(gate)
	if err := tr.Shutdown(context.Background()); err == nil {
		t.Fatal("Shutdown reports no loss")
	}
	all := ec.Records()
	bySeq := map[uint64]trace.Record{}
	for _, r := range all {
		bySeq[r.Seq] = r
	}
	delivered := map[uint64]bool{}
	for _, r := range c.recs {
		delivered[r.Seq] = true
	}
	if len(c.marks) == 0 {
		t.Fatal("no marker delivered")
	}
	for _, m := range c.marks {
		lostRec, ok := bySeq[m.Seq]
		if !ok || delivered[m.Seq] {
			t.Fatalf("marker seq %d: not the seq of a lost record", m.Seq)
		}
		if m.TraceID != ec.TraceID() || !m.Time.Equal(lostRec.Time) || m.Depth != lostRec.Depth {
			t.Fatalf("marker %s does not describe lost record %s", m.AppendJSON(nil), lostRec.AppendJSON(nil))
		}
		if want := map[int]trace.SpanID{0: ec.SpanID(), 1: child.SpanID()}[lostRec.Depth]; m.ParentID != want {
			t.Fatalf("marker parent %s, want the span of the run that lost seq %d (%s)", m.ParentID, m.Seq, want)
		}
	}
	total := c.lost(t)[ec.TraceID()]
	if total != tr.Dispatcher().Stats().Dropped || uint64(len(c.recs))+total != uint64(len(all)) {
		t.Fatalf("sink: %d records and markers for %d lost; the runs made %d", len(c.recs), total, len(all))
	}
	// The sink saw the trace in Seq order, markers included.
	var last uint64
	for _, r := range c.delivered() {
		if r.Seq <= last {
			t.Fatalf("seq %d after %d", r.Seq, last)
		}
		last = r.Seq
	}
}

// TestEmitCopiesValues reuses the caller's buffers after Emit, in both
// modes, and checks that the sink got the values as they were.
func TestEmitCopiesValues(t *testing.T) {
	for _, inline := range []bool{false, true} {
		c := &collect{}
		d := trace.NewDispatcher(trace.DispatchOptions{Inline: inline}, c)
		in, out, th := []byte(`{"q":"first"}`), []byte(`"answer"`), []byte(`"why"`)
		tags := []string{"env:a"}
		r := rec(1)
		r.Input, r.Output, r.Thinking = in, out, th
		run := &trace.RunInfo{Tags: tags, Session: "s"}
		r.Run = run
		d.Emit(r)
		copy(in, `{"q":"XXXXX"}`)
		copy(out, `"XXXXXX"`)
		copy(th, `"XXX"`)
		tags[0] = "env:b"
		run.Session = "changed"
		if err := d.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := c.recs[0]
		if string(got.Input) != `{"q":"first"}` || string(got.Output) != `"answer"` || string(got.Thinking) != `"why"` || got.Tags()[0] != "env:a" || got.Session() != "s" {
			t.Fatalf("inline %v: the sink got %s: the caller's buffers were kept", inline, got.AppendJSON(nil))
		}
	}
}

// TestSchemaKnowsEveryType checks that the JSON Schema's type enum is
// exactly trace.Types, TypeDropped included.
func TestSchemaKnowsEveryType(t *testing.T) {
	var doc struct {
		Properties struct {
			Type struct{ Enum []string } `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema.RecordV1, &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, typ := range trace.Types() {
		want = append(want, string(typ))
	}
	if !slices.Equal(doc.Properties.Type.Enum, want) {
		t.Fatalf("schema types %v\ntrace.Types  %v", doc.Properties.Type.Enum, want)
	}
	if !trace.TypeDropped.Valid() {
		t.Fatal("TypeDropped is not valid")
	}
}

// fuzzSink collects what it gets; while hold is set, writes wait for
// release; fail and explode make its next write return an error or panic.
type fuzzSink struct {
	collect
	hold    atomic.Pointer[chan struct{}]
	fail    atomic.Bool
	explode atomic.Bool
}

func (s *fuzzSink) WriteRecords(ctx context.Context, rs []trace.Record) error {
	if h := s.hold.Load(); h != nil {
		<-*h
	}
	if s.explode.Swap(false) {
		panic("fuzz sink exploded")
	}
	if err := s.collect.WriteRecords(ctx, rs); err != nil {
		return err
	}
	if s.fail.Swap(false) {
		return errors.New("fuzz sink failed")
	}
	return nil
}

// FuzzDispatch drives a dispatcher with a sequence of operations read
// from the input (records in a root run and nested runs, Emit, Flush, a
// stalled, failing or panicking sink, either policy, either mode) and
// checks its accounting after Shutdown: every record made is written or
// counted as dropped, a healthy sink sees each written record once, each
// trace in Seq order with markers in place, and the markers count exactly
// the records dropped.
func FuzzDispatch(f *testing.F) {
	f.Add([]byte{0x00, 3, 2, 1, 1, 1, 4, 1, 1, 6, 1, 2, 3, 1, 7, 1, 1, 1})
	f.Add([]byte{0x01, 1, 1, 6, 1, 1, 1, 1, 1, 1, 2, 1, 1, 3, 7, 5, 0, 8, 9, 1})
	f.Add([]byte{0x02, 8, 4, 1, 2, 1, 1, 3, 4, 4, 1, 5, 8, 1, 9, 1})
	f.Add([]byte{0x03, 2, 1, 6, 1, 1, 1, 1, 1, 1, 1, 1, 7, 1, 1, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) < 3 || len(ops) > 400 {
			return
		}
		block, inline := ops[0]&1 != 0, ops[0]&2 != 0
		opts := trace.DispatchOptions{Inline: inline, QueueSize: int(ops[1]%16) + 1, BatchSize: int(ops[2]%8) + 1, Linger: time.Microsecond, OnError: func(error) {}}
		if block {
			opts.OnFull = trace.Block
		}
		odd, healthy := &fuzzSink{}, &collect{}
		tr := trace.New(trace.Options{Sinks: []trace.Sink{odd, healthy}, Dispatch: opts})
		runCtx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctx, root := tr.Start(runCtx, "root", trace.RunOptions{})
		var (
			child   *trace.ExecutionContext
			release chan struct{}
			emitted uint64
			emitSeq uint64
		)
		unhold := func() {
			if release != nil {
				odd.hold.Store(nil)
				close(release)
				release = nil
			}
		}
		defer unhold()
		for _, op := range ops[3:] {
			switch op % 10 {
			case 0, 1:
				root.Custom("r", trace.JSON(op))
			case 2:
				if child == nil {
					_, child = trace.SpawnChild(ctx, "child", nil)
				} else {
					child.Custom("c", nil)
				}
			case 3:
				if child != nil {
					child.End(nil, nil)
					child = nil
				}
			case 4:
				if block && release != nil {
					continue // Emit has no run context: it would wait for the stalled sink
				}
				emitSeq++
				r := rec(int(emitSeq))
				r.TraceID, r.Time = trace.TraceID{2}, time.Now()
				tr.Dispatcher().Emit(r)
				emitted++
			case 5:
				if release == nil { // a stall with the queue filling
					_ = tr.Flush(context.Background())
				}
			case 6:
				if release == nil && !inline {
					ch := make(chan struct{})
					release = ch
					odd.hold.Store(&ch) // not &release, which unhold writes
					if block {
						cancel() // so that waits for room end: the sink is stalled
					}
				}
			case 7:
				unhold()
			case 8:
				odd.fail.Store(true)
			case 9:
				odd.explode.Store(true)
			}
		}
		if child != nil {
			child.End(nil, nil)
		}
		root.End(nil, nil)
		unhold()
		_ = tr.Shutdown(context.Background())

		st := tr.Dispatcher().Stats()
		made := uint64(len(root.Records())) + emitted
		if st.Emitted+st.Dropped != made || st.Written != st.Emitted {
			t.Fatalf("stats %+v for %d records made: want emitted+dropped = made, written = emitted", st, made)
		}
		if uint64(healthy.len()) != st.Written {
			t.Fatalf("the healthy sink got %d records, %d written", healthy.len(), st.Written)
		}
		lost := healthy.lost(t)
		if lost[root.TraceID()]+lost[trace.TraceID{2}] != st.Dropped {
			t.Fatalf("markers count %v lost, %d dropped", lost, st.Dropped)
		}
		last := map[trace.TraceID]uint64{}
		for _, r := range healthy.delivered() {
			if r.TraceID == root.TraceID() && r.Seq <= last[r.TraceID] {
				t.Fatalf("trace %s: seq %d after %d", r.TraceID, r.Seq, last[r.TraceID])
			}
			last[r.TraceID] = r.Seq
		}
	})
}
