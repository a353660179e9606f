package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// IsLoopback reports whether addr (host:port, as --addr takes it) listens
// on loopback only: 127.0.0.0/8, ::1 or localhost. An empty host (":4318")
// listens on every interface and is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ShutdownTimeout bounds how long Serve waits for in-flight requests once
// ctx is done.
const ShutdownTimeout = 30 * time.Second

// Serve listens on addr and serves s until ctx is done; then it stops
// accepting connections, ends the live streams, lets in-flight requests
// finish (their records are committed and acknowledged, up to
// ShutdownTimeout) and returns nil. ready, if not nil, is called with the
// address actually listened on (useful with port 0) once connections are
// accepted.
func Serve(ctx context.Context, addr string, s *Server, ready func(addr net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	hs := NewHTTPServer(addr, s)
	hs.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Close() // streams never go idle; Shutdown would wait for them
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}
