package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// slowStore holds every Append until release is closed.
type slowStore struct {
	store.Store
	started chan struct{}
	release chan struct{}
}

func (s *slowStore) Append(ctx context.Context, recs []trace.Record) (int, error) {
	close(s.started)
	<-s.release
	return s.Store.Append(ctx, recs)
}

// TestServeShutdownCommitsInFlight: when Serve's context ends (SIGTERM in
// loupe serve), a request being committed finishes and is acknowledged,
// new connections are refused, and Serve returns nil only after.
func TestServeShutdownCommitsInFlight(t *testing.T) {
	st := &slowStore{Store: openStore(t), started: make(chan struct{}), release: make(chan struct{})}
	srv, err := New(Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, "127.0.0.1:0", srv, func(a net.Addr) { addrc <- a.String() }) }()
	addr := <-addrc
	recs := run(12, "inflight")
	answer := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+addr+"/v1/records", "application/x-ndjson", bytes.NewReader(ndjson(recs)))
		if err != nil {
			t.Error(err)
			answer <- 0
			return
		}
		resp.Body.Close()
		answer <- resp.StatusCode
	}()
	<-st.started // the request is inside Append
	cancel()     // the signal
	select {
	case err := <-served:
		t.Fatalf("Serve returned with a request in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("new connections are still accepted after shutdown began")
	}
	close(st.release)
	if code := <-answer; code != 200 {
		t.Errorf("the in-flight request got %d", code)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if n := stored(t, st.Store, recs[0].TraceID); n != 4 {
		t.Errorf("%d records committed", n)
	}
}
