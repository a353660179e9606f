// Package jsonl is a trace.Sink that writes records as JSON lines: one
// record per line, in the encoding trace.DecodeRecord reads (package
// traceio reads such files back, with errors naming file, line and field).
package jsonl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// Sink writes records to an io.Writer as JSON lines. Each WriteRecords call
// is buffered and flushed before it returns, so a batch costs one write
// call and nothing waits in memory between batches. It is safe for
// concurrent use.
type Sink struct {
	mu     sync.Mutex
	w      *bufio.Writer
	dl     deadliner // the destination, if a blocked write can be interrupted
	c      io.Closer // nil unless the sink owns the destination
	buf    []byte
	path   string
	closed bool
}

// deadliner is a destination whose writes can be given a deadline:
// *os.File on a pipe or terminal, net.Conn.
type deadliner interface {
	SetWriteDeadline(t time.Time) error
}

// NewSink returns a Sink writing to w. The caller keeps ownership of w:
// Close flushes but does not close it.
func NewSink(w io.Writer) *Sink {
	s := &Sink{w: bufio.NewWriterSize(w, 64<<10), buf: make([]byte, 0, 1024)}
	s.dl, _ = w.(deadliner)
	return s
}

// Create creates (or truncates) the file at path, making its directory if
// needed, and returns a Sink that writes to it and closes it on Close.
func Create(path string) (*Sink, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	s := NewSink(f)
	s.c, s.path = f, path
	return s, nil
}

// Path returns the file the sink writes to, or "" if it was made with NewSink.
func (s *Sink) Path() string { return s.path }

// WriteRecords implements trace.Sink. It honours ctx: once ctx is done it
// writes nothing, and if ctx ends during the call it stops between two
// records and returns an error wrapping ctx's. If the destination has a
// SetWriteDeadline method (an *os.File on a pipe or a terminal, a
// net.Conn), a write blocked in it is interrupted when ctx ends (the line
// being written may be cut short), after which the destination's writes
// fail: ctx ending means the caller gave up on this sink. A write blocked in another kind of io.Writer cannot be
// interrupted; the dispatcher does not wait for it past its deadline.
func (s *Sink) WriteRecords(ctx context.Context, recs []trace.Record) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jsonl: %s: %d records not written: %w", s.name(), len(recs), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("jsonl: write to closed sink %s", s.name())
	}
	if s.dl != nil && ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { _ = s.dl.SetWriteDeadline(time.Now()) })
		defer stop()
	}
	for i := range recs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("jsonl: %s: stopped after %d of %d records: %w", s.name(), i, len(recs), err)
		}
		s.buf = recs[i].AppendJSON(s.buf[:0])
		s.buf = append(s.buf, '\n')
		if _, err := s.w.Write(s.buf); err != nil {
			return s.writeErr(ctx, err)
		}
	}
	if err := s.w.Flush(); err != nil {
		return s.writeErr(ctx, err)
	}
	return nil
}

// writeErr describes a failed write, with ctx's error if ctx ending caused it.
func (s *Sink) writeErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("jsonl: %s: %w (%w)", s.name(), err, cerr)
	}
	return fmt.Errorf("jsonl: %s: %w", s.name(), err)
}

// name names the destination in errors.
func (s *Sink) name() string {
	if s.path != "" {
		return s.path
	}
	return "writer"
}

// Close flushes the sink and closes the file if Create opened it. Later
// writes fail.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.w.Flush()
	if s.c != nil {
		if cerr := s.c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
