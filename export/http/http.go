// Package httpsink (import path export/http) is a trace.Sink that sends
// records to a Loupe collector (`loupe serve`, POST /v1/records).
//
// WriteRecords never waits on the network: records go into a bounded
// buffer and one background goroutine sends them in batches (NDJSON,
// gzip), so an agent runs at full speed while the collector is slow or
// down. Failed sends — network errors, 408, 429 and 5xx — are retried
// with exponential backoff and full jitter, honouring Retry-After; the
// collector's store is idempotent on (trace id, seq), so a resend after a
// lost acknowledgement stores nothing twice. A record is dropped only
// when the buffer is full (the newest records are refused), when the
// collector rejects it for good (a 4xx other than 408/429: with an index,
// only that record; otherwise the batch), or when Shutdown's deadline
// passes before it could be sent. Every drop is counted by reason
// (Dropped) and reported by Flush and Shutdown as a *DropError.
package httpsink

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/internal/retry"
	"github.com/loupe-dev/loupe/trace"
)

// Options configure a Sink. URL is required; the zero value of every other
// field is useful.
type Options struct {
	// URL is the collector's base URL, e.g. http://127.0.0.1:4318; records
	// are posted to URL + "/v1/records".
	URL string
	// APIKey, if set, is sent as Authorization: Bearer (an ingest key).
	APIKey string
	// Project, if set, names the collector's project the records go to
	// (the Loupe-Project header); empty means the key's first project.
	Project string
	// Client sends the requests; nil means a client with a 30 s timeout.
	Client *http.Client
	// BatchSize bounds the records of one request (default 1000).
	BatchSize int
	// BufferSize bounds the records waiting to be sent, including those
	// being retried (default 100000). Beyond it new records are dropped
	// and counted as DropError.BufferFull.
	BufferSize int
	// BufferBytes bounds the approximate memory of the buffered records
	// (their values plus a fixed overhead each; default 64 MiB), so that
	// large values cannot make the buffer unbounded in memory. Beyond it
	// new records are dropped and counted as DropError.BufferFull.
	BufferBytes int
	// Linger is how long records wait for a batch to fill before they are
	// sent (default 200 ms); Flush and Shutdown cut it short.
	Linger time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries (defaults
	// 100 ms and 30 s); the wait doubles each time, with full jitter. A
	// Retry-After longer than MaxBackoff is honoured as given.
	MinBackoff, MaxBackoff time.Duration
	// NoGzip sends bodies uncompressed.
	NoGzip bool
	// OnError, if set, is called with each failed attempt (the Sink goes
	// on retrying); it must not block.
	OnError func(error)

	// after is time.After, replaced in tests to see the waits.
	after func(time.Duration) <-chan time.Time
}

// DropError reports records the Sink gave up on, by reason. Counts are
// cumulative since the Sink was made.
type DropError struct {
	BufferFull int64  // refused by WriteRecords: the buffer was full (collector down or too slow)
	Rejected   int64  // refused by the collector for good (bad record, bad key)
	Unsent     int64  // still buffered when Shutdown's deadline passed
	Closed     int64  // written after Shutdown
	LastReason string // the collector's last rejection message, if any
}

// Total returns the number of records dropped.
func (e *DropError) Total() int64 { return e.BufferFull + e.Rejected + e.Unsent + e.Closed }

// Error says how many records were dropped, for which reasons.
func (e *DropError) Error() string {
	var parts []string
	for _, p := range []struct {
		n    int64
		what string
	}{{e.BufferFull, "the buffer was full"}, {e.Rejected, "the collector rejected them"}, {e.Unsent, "unsent at shutdown"}, {e.Closed, "written after shutdown"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d because %s", p.n, p.what))
		}
	}
	msg := fmt.Sprintf("export/http: %d records dropped: %s", e.Total(), strings.Join(parts, ", "))
	if e.LastReason != "" {
		msg += " (last rejection: " + e.LastReason + ")"
	}
	return msg
}

// Sink sends records to a collector. It is safe for concurrent use. Make
// it with New; stop it with Shutdown (or Close, which a trace.Dispatcher
// calls on shutdown).
type Sink struct {
	o       Options
	url     string
	mu      sync.Mutex
	cond    *sync.Cond // signalled when records arrive, are done, or on shutdown
	buf     []trace.Record
	bytes   int    // recordSize of the records in buf
	queued  uint64 // records ever accepted into buf
	done    uint64 // of those, sent or dropped
	drops   DropError
	closed  bool // Shutdown called: refuse new records
	abort   bool // Shutdown's deadline passed: stop sending
	urgent  int  // Flush/Shutdown calls waiting: send without lingering
	exited  chan struct{}
	aborted context.Context    // done when Shutdown's deadline passes
	stop    context.CancelFunc // ends aborted
	wake    chan struct{}      // Flush or Shutdown wants the records sent now
}

// New returns a Sink for o and starts its sending goroutine.
func New(o Options) (*Sink, error) {
	if o.URL == "" {
		return nil, errors.New("export/http: Options.URL is empty (want the collector's base URL, e.g. http://127.0.0.1:4318)")
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 1000
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 100000
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = 64 << 20
	}
	if o.Linger <= 0 {
		o.Linger = 200 * time.Millisecond
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.after == nil {
		o.after = time.After
	}
	s := &Sink{o: o, url: strings.TrimSuffix(o.URL, "/") + "/v1/records", exited: make(chan struct{}),
		wake: make(chan struct{}, 1)}
	s.aborted, s.stop = context.WithCancel(context.Background())
	s.cond = sync.NewCond(&s.mu)
	go s.loop()
	return s, nil
}

// WriteRecords implements trace.Sink: it buffers recs and returns at once.
// Records beyond the buffer's room are dropped and counted; WriteRecords
// itself returns an error only after Shutdown.
func (s *Sink) WriteRecords(_ context.Context, recs []trace.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.drops.Closed += int64(len(recs))
		return errors.New("export/http: WriteRecords after Shutdown; records dropped")
	}
	room := s.o.BufferSize - len(s.buf)
	n := 0
	for n < min(room, len(recs)) {
		sz := recordSize(&recs[n])
		if s.bytes+sz > s.o.BufferBytes {
			break
		}
		s.bytes += sz
		n++
	}
	s.buf = append(s.buf, recs[:n]...)
	s.queued += uint64(n)
	s.drops.BufferFull += int64(len(recs) - n)
	if n > 0 {
		s.cond.Broadcast()
	}
	return nil
}

// Dropped returns the drops so far.
func (s *Sink) Dropped() DropError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drops
}

// Buffered returns how many records wait to be sent.
func (s *Sink) Buffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf)
}

// Flush waits until every record buffered before the call has been sent
// (or dropped), or ctx is done. It returns ctx's error if it gave up
// waiting, else a *DropError if any record was ever dropped, else nil.
func (s *Sink) Flush(ctx context.Context) error {
	s.mu.Lock()
	target := s.queued
	s.mu.Unlock()
	if err := s.wait(ctx, func() bool { return s.done >= target }); err != nil {
		return err
	}
	return s.dropErr()
}

// wait waits, with s.urgent raised, until cond holds (checked under s.mu)
// or ctx is done.
func (s *Sink) wait(ctx context.Context, cond func() bool) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.urgent++
	s.cond.Broadcast()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	defer func() { s.urgent-- }()
	for !cond() {
		if ctx.Err() != nil {
			return fmt.Errorf("export/http: %d records not yet sent: %w", len(s.buf), ctx.Err())
		}
		s.cond.Wait()
	}
	return nil
}

func (s *Sink) dropErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drops.Total() == 0 {
		return nil
	}
	d := s.drops
	return &d
}

// Shutdown refuses new records, sends what is buffered until ctx is done,
// then drops the rest (counted as Unsent) and stops the goroutine. It
// returns a *DropError if any record was ever dropped, else nil. Calling
// it again returns the same report.
func (s *Sink) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	_ = s.wait(ctx, func() bool { return len(s.buf) == 0 && s.done == s.queued })
	s.mu.Lock()
	s.abort = true
	s.stop()
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.exited
	return s.dropErr()
}

// Close shuts the Sink down, waiting up to 10 seconds to send what is
// buffered (trace.Dispatcher.Shutdown calls it).
func (s *Sink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}

// loop sends batches until Shutdown.
func (s *Sink) loop() {
	defer close(s.exited)
	p := retry.Policy{MinBackoff: s.o.MinBackoff, MaxBackoff: s.o.MaxBackoff, After: s.o.after}
	for {
		s.mu.Lock()
		for len(s.buf) == 0 && !s.abort && !s.closed {
			s.cond.Wait()
		}
		if s.abort || len(s.buf) == 0 && s.closed {
			s.drops.Unsent += int64(len(s.buf))
			s.done += uint64(len(s.buf))
			s.buf, s.bytes = nil, 0
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
		// Let a batch fill unless someone waits or it is full already.
		linger := len(s.buf) < s.o.BatchSize && s.urgent == 0 && !s.closed
		s.mu.Unlock()
		if linger {
			s.linger(s.o.Linger)
		}
		// Until the batch at the head is done with, or Shutdown aborts.
		_ = p.Do(s.aborted, func(n int) error { return s.sendHead(n > 1) })
	}
}

// errAborted ends the retries of a batch when Shutdown's deadline passes.
var errAborted = errors.New("export/http: shut down")

// sendHead sends the batch at the head of the buffer once. It returns nil
// when that batch is done with (sent, rejected for good, or one bad record
// dropped so that the others go again at once), a retry.Later error when
// it is to be sent again after a wait, and errAborted when Shutdown's
// deadline has passed: before a retry (again), or during the send.
func (s *Sink) sendHead(again bool) error {
	s.mu.Lock()
	if again && s.abort {
		s.mu.Unlock()
		return errAborted
	}
	n := min(len(s.buf), s.o.BatchSize)
	batch := s.buf[:n:n]
	s.mu.Unlock()

	res := s.send(batch)

	s.mu.Lock()
	done := true
	switch {
	case res.ok:
		s.remove(n)
	case res.badIndex >= 0 && res.badIndex < n:
		// One bad record: drop it, send the others again at once.
		s.drops.Rejected++
		s.drops.LastReason = res.msg
		s.bytes -= recordSize(&s.buf[res.badIndex])
		s.buf = append(s.buf[:res.badIndex:res.badIndex], s.buf[res.badIndex+1:]...)
		s.done++
	case res.permanent:
		s.drops.Rejected += int64(n)
		s.drops.LastReason = res.msg
		s.remove(n)
	default:
		done = false
	}
	s.cond.Broadcast()
	abort := s.abort
	s.mu.Unlock()
	switch {
	case done:
		return nil
	case abort:
		return errAborted
	}
	if s.o.OnError != nil {
		s.o.OnError(res.err)
	}
	return retry.Later(res.err, res.retryAfter)
}

// remove drops the first n buffered records as done; s.mu is held.
func (s *Sink) remove(n int) {
	for i := range n {
		s.bytes -= recordSize(&s.buf[i])
	}
	// Copy down rather than reslice, so the buffer's memory is reused and
	// sent records are not kept alive.
	m := copy(s.buf, s.buf[n:])
	clear(s.buf[m:])
	s.buf = s.buf[:m]
	s.done += uint64(n)
}

// recordSize approximates the memory a buffered record holds: its values
// and strings, plus a fixed overhead for the struct.
func recordSize(r *trace.Record) int {
	n := 256 + len(r.Input) + len(r.Output) + len(r.Thinking) + len(r.Name) + len(r.Error) + len(r.Status)
	if ri := r.Run; ri != nil {
		n += 64 + len(ri.Session) + len(ri.User)
		for _, t := range ri.Tags {
			n += len(t) + 16
		}
	}
	return n
}

// linger waits d, or less if Flush or Shutdown asks for the records now
// or Shutdown aborts meanwhile.
func (s *Sink) linger(d time.Duration) {
	select {
	case <-s.o.after(d):
	case <-s.aborted.Done():
	case <-s.wake:
	}
}

type sendResult struct {
	ok         bool
	permanent  bool          // do not retry this batch
	badIndex   int           // the collector named one bad record (-1: none)
	retryAfter time.Duration // the collector's Retry-After
	msg        string
	err        error
}

// send posts one batch.
func (s *Sink) send(batch []trace.Record) sendResult {
	var body bytes.Buffer
	var w io.Writer = &body
	var zw *gzip.Writer
	if !s.o.NoGzip {
		zw = gzip.NewWriter(&body)
		w = zw
	}
	var line []byte
	for i := range batch {
		line = append(batch[i].AppendJSON(line[:0]), '\n')
		w.Write(line)
	}
	if zw != nil {
		zw.Close()
	}
	req, err := http.NewRequest("POST", s.url, &body)
	if err != nil {
		return sendResult{permanent: true, badIndex: -1, msg: err.Error(), err: err}
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	if zw != nil {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if s.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.o.APIKey)
	}
	if s.o.Project != "" {
		req.Header.Set("Loupe-Project", s.o.Project)
	}
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return sendResult{badIndex: -1, err: fmt.Errorf("export/http: sending %d records to %s: %w", len(batch), s.url, err)}
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	res := sendResult{badIndex: -1}
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		res.ok = true
		return res
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		res.retryAfter = retry.ParseAfter(resp.Header.Get("Retry-After"))
	default:
		res.permanent = true
		var eb struct {
			Error string `json:"error"`
			Index *int   `json:"index"`
		}
		if json.Unmarshal(msg, &eb) == nil {
			if eb.Index != nil && c == http.StatusBadRequest {
				res.permanent, res.badIndex = false, *eb.Index
			}
			if eb.Error != "" {
				msg = []byte(eb.Error)
			}
		}
	}
	res.msg = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	res.err = fmt.Errorf("export/http: %s answered %s", s.url, res.msg)
	return res
}

var _ trace.Sink = (*Sink)(nil)
var _ io.Closer = (*Sink)(nil)
