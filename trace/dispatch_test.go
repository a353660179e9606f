package trace_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

type collect struct {
	mu   sync.Mutex
	recs []trace.Record
	gate chan struct{} // if set, each write waits for a token
	fail error
}

func (c *collect) WriteRecords(_ context.Context, rs []trace.Record) error {
	if c.gate != nil {
		<-c.gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, rs...)
	return c.fail
}

func (c *collect) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
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

func TestSubscribe(t *testing.T) {
	d := trace.NewDispatcher(trace.DispatchOptions{})
	ch, cancel := d.Subscribe(4)
	slow, _ := d.Subscribe(1)
	for i := range 3 {
		d.Emit(rec(i))
	}
	for i := range 3 {
		if r := <-ch; r.Seq != uint64(i) {
			t.Fatalf("listener got seq %d, want %d", r.Seq, i)
		}
	}
	if got := d.Stats().Listeners; got != 2 {
		t.Errorf("slow listener missed %d records, want 2 counted", got)
	}
	<-slow
	cancel()
	if _, ok := <-ch; ok {
		t.Error("channel open after cancel")
	}
	d.Emit(rec(9)) // no panic after a listener left
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for range slow { // ends only if Shutdown closed it
		n++
	}
	if n != 1 {
		t.Errorf("slow listener had %d records after the first, want 1 (seq 9)", n)
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
}

// TestDispatchDeliversWithoutFlush checks that records reach the sink
// after Linger on their own, also once the goroutine went to sleep for
// lack of work.
func TestDispatchDeliversWithoutFlush(t *testing.T) {
	c := &collect{}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{c}, Dispatch: trace.DispatchOptions{Linger: time.Millisecond}})
	defer tr.Shutdown(context.Background())
	_, ec := tr.Start(context.Background(), "run", trace.RunOptions{})
	for want := 1; want <= 3; want++ {
		deadline := time.Now().Add(5 * time.Second)
		for c.len() < want {
			if time.Now().After(deadline) {
				t.Fatalf("record %d not delivered within 5s without Flush", want)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // long enough for the goroutine to park
		ec.Custom("next", nil)
	}
}

// TestDispatchAccountingUnderLoad records from many goroutines and nested
// runs into a small queue with the Drop policy and a slow sink, flushing
// and subscribing along the way: every record is either written once or
// counted as dropped, and the sink never sees one twice.
func TestDispatchAccountingUnderLoad(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]int{}
	slow := trace.SinkFunc(func(_ context.Context, rs []trace.Record) error {
		time.Sleep(50 * time.Microsecond)
		mu.Lock()
		for _, r := range rs {
			seen[r.Seq]++
		}
		mu.Unlock()
		return nil
	})
	tr := trace.New(trace.Options{Sinks: []trace.Sink{slow}, Dispatch: trace.DispatchOptions{QueueSize: 32, BatchSize: 8, Linger: 100 * time.Microsecond}})
	live, stop := tr.Dispatcher().Subscribe(16)
	go func() {
		for range live {
		}
	}()
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
	stop()
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
	if uint64(len(seen)) != st.Written {
		t.Fatalf("sink saw %d distinct records, %d written", len(seen), st.Written)
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
