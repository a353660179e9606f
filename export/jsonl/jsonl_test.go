package jsonl_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/export/jsonl"
	"github.com/loupe-dev/loupe/internal/tracefix"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

func TestFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "run.jsonl")
	sink, err := jsonl.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}, Now: tracefix.Clock(time.Millisecond)})
	want := tracefix.Record(tr).Records()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, format, err := traceio.ReadFile(path, traceio.FormatAuto)
	if err != nil || format != traceio.FormatLoupe {
		t.Fatalf("reading %s back: format %s, %v", path, format, err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records, wrote %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].AppendJSON(nil), want[i].AppendJSON(nil)) {
			t.Errorf("record %d changed:\n%s\n%s", i, want[i].AppendJSON(nil), got[i].AppendJSON(nil))
		}
	}
	if err := sink.WriteRecords(context.Background(), want[:1]); err == nil {
		t.Error("write after Close succeeded")
	}
}

// stuckWriter blocks every Write until release is closed, like a file on a
// hung network mount.
type stuckWriter struct {
	release chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return len(p), nil
}

// TestShutdownWithStuckWriter is the case: a JSONL sink whose
// writer is stuck, and Shutdown with a short deadline. Shutdown returns by
// then, with the deadline and the count of records not written, instead
// of waiting in the sink's Close for the mutex the stuck write holds.
func TestShutdownWithStuckWriter(t *testing.T) {
	w := &stuckWriter{release: make(chan struct{}), entered: make(chan struct{})}
	defer close(w.release)
	tr := trace.New(trace.Options{Sinks: []trace.Sink{jsonl.NewSink(w)}, Dispatch: trace.DispatchOptions{BatchSize: 1, OnError: func(error) {}}})
	_, ec := tr.Start(context.Background(), "run", trace.RunOptions{})
	for range 5 {
		ec.Custom("x", nil)
	}
	ec.End(nil, nil)
	<-w.entered
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tr.Shutdown(ctx) }()
	select {
	case err := <-done:
		var de *trace.DropError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &de) || de.Unsent == 0 {
			t.Fatalf("Shutdown = %v; want the deadline and the records not written", err)
		}
	case <-time.After(time.Minute): // a hang, not a timing claim
		t.Fatal("Shutdown is still blocked on the stuck writer")
	}
}

// TestWriteRecordsHonoursContext: a cancelled context writes nothing, and
// a write blocked on a pipe nobody reads is interrupted when the context
// ends.
func TestWriteRecordsHonoursContext(t *testing.T) {
	recs := tracefix.Record(trace.New(trace.Options{Now: tracefix.Clock(time.Millisecond)})).Records()

	var buf bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := jsonl.NewSink(&buf).WriteRecords(ctx, recs); !errors.Is(err, context.Canceled) || buf.Len() != 0 {
		t.Fatalf("WriteRecords with a cancelled context = %v, wrote %d bytes", err, buf.Len())
	}

	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer pw.Close()
	big := make([]trace.Record, 0, 64)
	for range 64 { // far more than a pipe buffers
		rec := recs[0]
		rec.Output = trace.Text(strings.Repeat("x", 16<<10))
		big = append(big, rec)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- jsonl.NewSink(pw).WriteRecords(ctx, big) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("WriteRecords on a full pipe = %v; want the write deadline and the context's", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("WriteRecords is still blocked on the pipe after its context ended")
	}
}
