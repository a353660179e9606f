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

	"github.com/loupe-dev/loupe/trace"
)

// Sink writes records to an io.Writer as JSON lines. Each WriteRecords call
// is buffered and flushed before it returns, so a batch costs one write
// call and nothing waits in memory between batches. It is safe for
// concurrent use.
type Sink struct {
	mu     sync.Mutex
	w      *bufio.Writer
	c      io.Closer // nil unless the sink owns the destination
	buf    []byte
	path   string
	closed bool
}

// NewSink returns a Sink writing to w. The caller keeps ownership of w:
// Close flushes but does not close it.
func NewSink(w io.Writer) *Sink {
	return &Sink{w: bufio.NewWriterSize(w, 64<<10), buf: make([]byte, 0, 1024)}
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

// WriteRecords implements trace.Sink.
func (s *Sink) WriteRecords(_ context.Context, recs []trace.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("jsonl: write to closed sink %s", s.path)
	}
	for i := range recs {
		s.buf = recs[i].AppendJSON(s.buf[:0])
		s.buf = append(s.buf, '\n')
		if _, err := s.w.Write(s.buf); err != nil {
			return fmt.Errorf("jsonl: %w", err)
		}
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("jsonl: %w", err)
	}
	return nil
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
