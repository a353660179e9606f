package trace

import (
	"context"
	"testing"
)

// TestPresizeBounded: a run's log is pre-sized from the smaller of the
// last two root runs, so one huge run does not make the next small run
// allocate for its size.
func TestPresizeBounded(t *testing.T) {
	tr := New(Options{})
	run := func(n int) *ExecutionContext {
		_, ec := tr.Start(context.Background(), "r", RunOptions{})
		for range n {
			ec.ToolCall("t", nil, nil, 0, nil)
		}
		ec.End(nil, nil)
		return ec
	}
	if c := cap(run(3).records.head); c != 0 {
		t.Errorf("first run pre-sized to %d records", c)
	}
	if c := cap(run(3).records.head); c != 0 {
		t.Errorf("second run pre-sized to %d records, want none before two runs ended", c)
	}
	if c := cap(run(100_000).records.head); c != 5 {
		t.Errorf("a run after two 5-record runs pre-sized to %d records, want 5", c)
	}
	if c := cap(run(3).records.head); c != 5 {
		t.Errorf("a small run right after a 100k-record run pre-sized to %d records, want 5", c)
	}
	run(100_000)
	run(100_000)
	if c := cap(run(3).records.head); c != maxPresize {
		t.Errorf("after two huge runs in a row, pre-sized to %d records, want the bound %d", c, maxPresize)
	}
	if c := cap(run(3).records.head); c != 5 {
		t.Errorf("the next small run pre-sized to %d records, want 5", c)
	}
}

// TestStreamOnlyReleasesTakenRecords: with a background dispatcher a
// StreamOnly run holds a record only until the dispatcher took it.
func TestStreamOnlyReleasesTakenRecords(t *testing.T) {
	tr := New(Options{Sinks: []Sink{SinkFunc(func(context.Context, []Record) error { return nil })}, Dispatch: DispatchOptions{OnFull: Block}})
	_, ec := tr.Start(context.Background(), "r", RunOptions{StreamOnly: true})
	for range 10_000 {
		ec.ToolCall("t", nil, nil, 0, nil)
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ec.mu.Lock()
	held := 0
	for _, c := range ec.records.chunks {
		held += len(c)
	}
	ec.mu.Unlock()
	if held > maxChunk {
		t.Errorf("after Flush the run still holds %d of its %d records", held, ec.records.n)
	}
	ec.End(nil, nil)
	_ = tr.Shutdown(context.Background())
}
