// Package otlpsink is a trace.Sink that sends Loupe's runs to any
// OpenTelemetry backend (an OTel Collector, Jaeger, Langfuse, Phoenix,
// `loupe serve`) as OTLP/HTTP protobuf spans following the GenAI
// conventions: invoke_agent for runs, chat for model calls, execute_tool
// for tool calls (see otlp.Spans). Message content, tool arguments and
// results are sent only when Options.Content is set.
//
// A span is sent once it has ended: records of spans still open wait in
// the Sink until their end record arrives (Shutdown sends what is left as
// ended spans). WriteRecords sends synchronously, retrying network errors,
// 429 and 5xx a few times (Retry-After honoured) within its context; use
// the Sink behind a trace.Dispatcher's background queue (the default), so
// that the agent never waits on the network.
package otlpsink

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/internal/retry"
	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/trace"
)

// Options configure a Sink. Endpoint is required.
type Options struct {
	// Endpoint is the OTLP/HTTP traces URL, e.g.
	// http://127.0.0.1:4318/v1/traces (as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
	Endpoint string
	// Headers are sent with every request (e.g. Authorization).
	Headers map[string]string
	// Content exports inputs, outputs and messages; off by default.
	Content bool
	// ServiceName is the service.name resource attribute (default "loupe").
	ServiceName string
	// Client sends the requests; nil means a client with a 30 s timeout.
	Client *http.Client
	// Attempts bounds the tries of one request (default 5).
	Attempts int
	// MaxPending bounds the records of open spans held back (default
	// 100000); beyond it the oldest are sent as if they had ended.
	MaxPending int
}

// Sink sends records as OTLP spans. It is safe for concurrent use.
type Sink struct {
	o       Options
	mu      sync.Mutex
	pending []trace.Record // records of open spans
	dropped int            // spans given up on
}

// New returns a Sink for o.
func New(o Options) (*Sink, error) {
	if o.Endpoint == "" {
		return nil, errors.New("export/otlpsink: Options.Endpoint is empty (want an OTLP/HTTP traces URL such as http://127.0.0.1:4318/v1/traces)")
	}
	if o.ServiceName == "" {
		o.ServiceName = "loupe"
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 100000
	}
	return &Sink{o: o}, nil
}

// WriteRecords implements trace.Sink: it sends the spans that recs
// complete, and keeps the records of spans still open.
func (s *Sink) WriteRecords(ctx context.Context, recs []trace.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := append(s.pending, recs...)
	complete, waiting := otlp.SplitOpen(all)
	if len(waiting) > s.o.MaxPending {
		complete = append(complete, waiting...)
		waiting = nil
	}
	s.pending = waiting
	return s.send(ctx, complete, false)
}

// Dropped returns how many spans could not be sent.
func (s *Sink) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Shutdown sends the spans still open, ended at their last record.
func (s *Sink) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := s.pending
	s.pending = nil
	return s.send(ctx, recs, true)
}

// Close is Shutdown with a 10 s bound (trace.Dispatcher.Shutdown calls it).
func (s *Sink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}

func (s *Sink) send(ctx context.Context, recs []trace.Record, open bool) error {
	if len(recs) == 0 {
		return nil
	}
	td, _, _ := otlp.Spans(recs, otlp.SpanOptions{Content: s.o.Content, Open: open, Resource: map[string]string{"service.name": s.o.ServiceName}})
	n := td.SpanCount()
	if n == 0 {
		return nil
	}
	if err := s.post(ctx, td); err != nil {
		s.dropped += n
		return fmt.Errorf("export/otlpsink: %d spans not sent: %w", n, err)
	}
	return nil
}

// post sends td, retrying what OTLP/HTTP says is retryable.
func (s *Sink) post(ctx context.Context, td ptrace.Traces) error {
	var pm ptrace.ProtoMarshaler
	raw, err := pm.MarshalTraces(td)
	if err != nil {
		return err
	}
	var body bytes.Buffer
	zw := gzip.NewWriter(&body)
	zw.Write(raw)
	zw.Close()
	// The first retry waits up to 200 ms, each one after twice as long at
	// most, with no upper bound: Attempts keeps the waits short.
	p := retry.Policy{Attempts: s.o.Attempts, MinBackoff: 200 * time.Millisecond}
	return p.Do(ctx, func(int) error {
		req, err := http.NewRequestWithContext(ctx, "POST", s.o.Endpoint, bytes.NewReader(body.Bytes()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "gzip")
		for k, v := range s.o.Headers {
			req.Header.Set(k, v)
		}
		resp, err := s.o.Client.Do(req)
		if err != nil {
			return retry.Later(err, 0)
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		switch c := resp.StatusCode; {
		case c >= 200 && c < 300:
			return nil
		case c == 429 || c == 502 || c == 503 || c == 504:
			return retry.Later(fmt.Errorf("%s answered %s", s.o.Endpoint, resp.Status), retry.ParseAfter(resp.Header.Get("Retry-After")))
		default:
			return fmt.Errorf("%s answered %s: %s", s.o.Endpoint, resp.Status, strings.TrimSpace(string(msg)))
		}
	})
}

var _ trace.Sink = (*Sink)(nil)
var _ io.Closer = (*Sink)(nil)
