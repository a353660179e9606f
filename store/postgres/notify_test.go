package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/pgtest"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/trace"
)

// recsOf returns valid records of trace {id, 7} with the given seqs.
func recsOf(id byte, seqs ...uint64) []trace.Record {
	t0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	out := make([]trace.Record, len(seqs))
	for i, s := range seqs {
		out[i] = trace.Record{V: 1, TraceID: trace.TraceID{id, 7}, SpanID: trace.SpanID{id, 1}, Seq: s, Time: t0.Add(time.Duration(s) * time.Second), Type: trace.TypeCustom, Name: "step"}
	}
	return out
}

// watch starts a to watch its commits and returns what it is told.
func watch(t *testing.T, s *postgres.Store) (notices chan store.CommitNotice, lost chan bool) {
	t.Helper()
	notices, lost = make(chan store.CommitNotice, 100), make(chan bool, 100)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	err := s.WatchCommits(ctx, store.CommitWatch{
		Commit: func(n store.CommitNotice) { notices <- n },
		Lost:   func() { lost <- true },
		Error:  func(err error) { t.Logf("watch: %v", err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return notices, lost
}

func nextNotice(t *testing.T, ch chan store.CommitNotice) store.CommitNotice {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no commit notice in 10 s")
		return store.CommitNotice{}
	}
}

// TestWatchCommits: a Store is told of what another Store of the same
// schema commits (the seqs of the records added, whichever way Append
// took), not of its own commits nor of another schema's, and goes on
// after its listening connection is killed, saying that notices may have
// been lost.
func TestWatchCommits(t *testing.T) {
	dsn := freshSchema(t)
	a, b := open(t, dsn), open(t, dsn)
	other := open(t, freshSchema(t))
	notices, lost := watch(t, a)
	ctx := context.Background()

	if _, err := a.Append(ctx, recsOf(1, 1, 2)); err != nil { // a's own
		t.Fatal(err)
	}
	if _, err := other.Append(ctx, recsOf(1, 1, 2)); err != nil { // another schema
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, append(recsOf(2, 1, 2, 3, 5), recsOf(3, 4)...)); err != nil {
		t.Fatal(err)
	}
	n := nextNotice(t, notices)
	want := []store.CommitTrace{
		{TraceID: trace.TraceID{2, 7}, Seqs: []store.SeqRange{{From: 1, To: 3}, {From: 5, To: 5}}},
		{TraceID: trace.TraceID{3, 7}, Seqs: []store.SeqRange{{From: 4, To: 4}}},
	}
	if len(n.Traces) != 2 || n.Traces[0].TraceID != want[0].TraceID || len(n.Traces[0].Seqs) != 2 || n.Traces[0].Seqs[1] != want[0].Seqs[1] || n.Traces[1].Seqs[0] != want[1].Seqs[0] {
		t.Fatalf("notice %+v, want %+v", n.Traces, want)
	}
	// Some already stored: only the new one is told (the slower way).
	if _, err := b.Append(ctx, recsOf(2, 3, 4, 5)); err != nil {
		t.Fatal(err)
	}
	if n := nextNotice(t, notices); len(n.Traces) != 1 || n.Traces[0].Seqs[0] != (store.SeqRange{From: 4, To: 4}) || len(n.Traces[0].Seqs) != 1 {
		t.Fatalf("notice %+v, want trace 2 seq 4", n.Traces)
	}
	// Nothing new: nothing told. An Append whose context has ended
	// stores and tells nothing either (the next notice is the next
	// commit's).
	if _, err := b.Append(ctx, recsOf(2, 1)); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	b.Append(cctx, recsOf(4, 1))

	if k := pgtest.TerminateListeners(t, dsn); k != 1 {
		t.Fatalf("%d listening connections ended, want 1", k)
	}
	select {
	case <-lost:
	case <-time.After(15 * time.Second):
		t.Fatal("Lost not called after the connection was killed")
	}
	if _, err := b.Append(ctx, recsOf(5, 1)); err != nil {
		t.Fatal(err)
	}
	if n := nextNotice(t, notices); len(n.Traces) != 1 || n.Traces[0].TraceID != (trace.TraceID{5, 7}) {
		t.Fatalf("after listening again: %+v, want trace 5", n.Traces)
	}
	select {
	case n := <-notices:
		t.Errorf("unexpected notice %+v", n.Traces)
	default:
	}
	// A store being closed tells its last commits first.
	if _, err := b.Append(ctx, recsOf(6, 1)); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if n := nextNotice(t, notices); len(n.Traces) != 1 || n.Traces[0].TraceID != (trace.TraceID{6, 7}) {
		t.Fatalf("before Close: %+v, want trace 6", n.Traces)
	}

	// Close stops the watch (and waits for it).
	done := make(chan bool)
	go func() { a.Close(); done <- true }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := a.WatchCommits(ctx, store.CommitWatch{Commit: func(store.CommitNotice) {}}); err == nil {
		t.Error("WatchCommits after Close succeeded")
	}
}

// TestWatchCommitsSlowWatch: a watch that does not keep up slows no
// commit down; the notices beyond the queue are dropped, and the watch is
// told that it lost some.
func TestWatchCommitsSlowWatch(t *testing.T) {
	dsn := freshSchema(t)
	a, b := open(t, dsn), open(t, dsn)
	release := make(chan bool)
	got, lost := make(chan bool, 1000), make(chan bool, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := a.WatchCommits(ctx, store.CommitWatch{
		Commit: func(store.CommitNotice) { <-release; got <- true },
		Lost:   func() { lost <- true },
	})
	if err != nil {
		t.Fatal(err)
	}
	// Commits of many traces each, told in many notices: more than the
	// queue holds.
	const commits = 30
	appended := make(chan error, 1)
	go func() {
		for i := range commits {
			var recs []trace.Record
			for j := range 2000 {
				r := recsOf(byte(i), 1)[0]
				r.TraceID[2], r.TraceID[3] = byte(j>>8), byte(j)
				recs = append(recs, r)
			}
			if _, err := b.Append(ctx, recs); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the commits wait for the watch")
	}
	// The last notices are sent 50 ms after their commit; on a loaded
	// machine the listener takes a while to read them into the full queue.
	// Released before that, the watch would keep up and lose nothing.
	time.Sleep(3 * time.Second)
	close(release)
	select {
	case <-lost:
	case <-time.After(15 * time.Second):
		t.Fatal("Lost not called")
	}
	// The notices queued (and the one being handed over) still come.
	n := 0
	for n < 100 {
		select {
		case <-got:
			n++
			continue
		case <-time.After(5 * time.Second):
		}
		break
	}
	if n < 100 {
		t.Errorf("%d notices delivered, want the queue's", n)
	}
}
