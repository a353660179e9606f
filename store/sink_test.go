package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// stuckStore is a Store whose Append waits until its context is done and
// then fails with an error of its own that does not mention the context,
// as a backend blocked on a lock or a network might.
type stuckStore struct {
	store.Store // nil: only Append is called
	calls       atomic.Int32
	entered     chan struct{} // if set, closed by the first Append
	once        sync.Once
}

func (s *stuckStore) Append(ctx context.Context, recs []trace.Record) (int, error) {
	s.calls.Add(1)
	if s.entered != nil {
		s.once.Do(func() { close(s.entered) })
	}
	<-ctx.Done()
	return 0, errors.New("backend: connection reset")
}

func TestSinkHonoursContext(t *testing.T) {
	recs := []trace.Record{{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Seq: 1, Time: time.Now(), Type: trace.TypeCustom, Name: "x"}}

	t.Run("done before the call", func(t *testing.T) {
		s := &stuckStore{}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := store.NewSink(s).WriteRecords(ctx, recs)
		if !errors.Is(err, context.Canceled) || s.calls.Load() != 0 {
			t.Fatalf("WriteRecords = %v after %d Append calls; want context.Canceled and no call", err, s.calls.Load())
		}
	})

	t.Run("ends during the call", func(t *testing.T) {
		// The context ends only once Append has started, however slow the
		// machine, so that the sink is cancelled during the call.
		s := &stuckStore{entered: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { <-s.entered; cancel() }()
		err := store.NewSink(s).WriteRecords(ctx, recs)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("WriteRecords = %v; want the backend's error and the deadline", err)
		}
	})

	t.Run("sqlite rolls back", func(t *testing.T) {
		db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := store.NewSink(db).WriteRecords(ctx, recs); !errors.Is(err, context.Canceled) {
			t.Fatalf("WriteRecords with a cancelled context = %v", err)
		}
		if _, err := db.Trace(context.Background(), recs[0].TraceID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the store holds the trace after a cancelled write (%v)", err)
		}
	})
}

// TestSinkShutdownDeadline puts a store that never finishes a batch
// behind a dispatcher: Shutdown returns by its deadline, cancels the
// sink's context (which ends the stuck Append), and says how many records
// were not stored.
func TestSinkShutdownDeadline(t *testing.T) {
	s := &stuckStore{entered: make(chan struct{})}
	var sinkErrs atomic.Int32
	tr := trace.New(trace.Options{Sinks: []trace.Sink{store.NewSink(s)}, Dispatch: trace.DispatchOptions{
		OnFull: trace.Block, QueueSize: 64, BatchSize: 1, OnError: func(error) { sinkErrs.Add(1) },
	}})
	_, ec := tr.Start(context.Background(), "run", trace.RunOptions{})
	for range 10 {
		ec.Custom("x", nil)
	}
	ec.End(nil, nil)
	<-s.entered // the dispatcher is stuck in the store
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tr.Shutdown(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second): // a hang, not a timing claim
		t.Fatal("Shutdown did not return after its deadline")
	}
	var de *trace.DropError
	// 12 records (run.start, 10 custom, run.end), one a batch: the first
	// batch is stuck, and may have failed before Shutdown counts.
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &de) || de.Unsent < 11 {
		t.Fatalf("Shutdown = %v; want the deadline and a DropError with at least 11 records unsent", err)
	}
	if n := s.calls.Load(); n != 1 {
		t.Fatalf("the store was asked to append %d times; want once, none after Shutdown gave up", n)
	}
}

// TestSinkStoresDropMarkers drops records on the way to a SQLite store
// and checks that the store keeps the TypeDropped markers, whose counts
// add up to the records dropped.
func TestSinkStoresDropMarkers(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	gate := make(chan struct{})
	sink := store.NewSink(db)
	slow := trace.SinkFunc(func(ctx context.Context, recs []trace.Record) error {
		<-gate
		return sink.WriteRecords(ctx, recs)
	})
	tr := trace.New(trace.Options{Sinks: []trace.Sink{slow}, Dispatch: trace.DispatchOptions{QueueSize: 4, BatchSize: 2, OnError: func(error) {}}})
	_, ec := tr.Start(context.Background(), "run", trace.RunOptions{})
	for range 50 {
		ec.Custom("x", nil)
	}
	ec.End(nil, nil)
	close(gate)
	_ = tr.Shutdown(context.Background())
	dropped := tr.Dispatcher().Stats().Dropped
	if dropped == 0 {
		t.Fatal("nothing was dropped; the test needs drops")
	}
	got, err := db.Trace(context.Background(), ec.TraceID())
	if err != nil {
		t.Fatal(err)
	}
	var lost, kept int
	for _, r := range got.Records {
		if r.Type != trace.TypeDropped {
			kept++
			continue
		}
		var out struct{ Count int }
		if err := json.Unmarshal(r.Output, &out); err != nil || out.Count <= 0 {
			t.Fatalf("marker output %s: %v", r.Output, err)
		}
		lost += out.Count
	}
	if uint64(lost) != dropped || kept+lost != len(ec.Records()) {
		t.Fatalf("store has %d records and markers for %d lost; the run made %d and %d were dropped", kept, lost, len(ec.Records()), dropped)
	}
}
