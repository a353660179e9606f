package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Answers are written so that a client cannot make the server send a
// success status it then fails to honour, and so that a client that
// stops reading cannot hold memory for long:
//
//   - the body is encoded before the status line goes out: an answer that
//     does not encode is a 500, never a 200 with an empty body;
//   - a small answer is buffered and written at once; a large one is
//     encoded twice, once to count its bytes (Content-Length) and once
//     straight onto the connection, so it is never held whole;
//   - every write has a deadline (Options.WriteTimeout): a client that
//     reads nothing for that long is cut off;
//   - large answers in flight share a byte budget (Options.MaxResponseBytes):
//     past it, a large answer waits for room, and then is refused with 503.

// smallAnswer is the size up to which an answer is buffered whole.
const smallAnswer = 64 << 10

// Defaults of the response limits; see Options.
const (
	DefaultWriteTimeout     = 15 * time.Second
	DefaultMaxResponseBytes = 256 << 20
)

// budgetWait bounds how long a large answer waits for room in the byte
// budget before it is refused.
const budgetWait = 10 * time.Second

// spill buffers up to smallAnswer bytes and then only counts.
type spill struct {
	buf  bytes.Buffer
	n    int64
	over bool
}

func (s *spill) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	if !s.over && s.buf.Len()+len(p) <= smallAnswer {
		s.buf.Write(p)
	} else if !s.over {
		s.over = true
		s.buf = bytes.Buffer{}
	}
	return len(p), nil
}

// deadlineWriter sets a write deadline before each write, so that a
// client that stops reading fails the write instead of blocking it.
type deadlineWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func newDeadlineWriter(w http.ResponseWriter, d time.Duration) *deadlineWriter {
	return &deadlineWriter{w: w, rc: http.NewResponseController(w), d: d}
}

func (dw *deadlineWriter) Write(p []byte) (int, error) {
	_ = dw.rc.SetWriteDeadline(time.Now().Add(dw.d)) // ErrNotSupported off a real connection
	return dw.w.Write(p)
}

// flush sends what the response has buffered, within the deadline.
func (dw *deadlineWriter) flush() error {
	_ = dw.rc.SetWriteDeadline(time.Now().Add(dw.d))
	return dw.rc.Flush()
}

// writeJSON answers v as JSON with status code (see the rules above).
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, code int, v any) {
	var sp spill
	if err := json.NewEncoder(&sp).Encode(v); err != nil {
		s.log.Error("loupe serve: answer does not encode as JSON", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSONBytes(w, http.StatusInternalServerError, errorJSON("the answer could not be encoded as JSON (the server logged why); this is a bug in loupe, please report it"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.FormatInt(sp.n, 10))
	dw := newDeadlineWriter(w, s.o.WriteTimeout)
	if !sp.over {
		leaveSlot(r) // from here on the pace is the client's
		w.WriteHeader(code)
		dw.Write(sp.buf.Bytes())
		return
	}
	release, err := s.budget.acquire(r.Context(), sp.n)
	leaveSlot(r)
	if err != nil {
		h.Del("Content-Length")
		if r.Context().Err() != nil {
			return // the client left
		}
		h.Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "the server is busy sending other large answers; retry in a few seconds")
		return
	}
	defer release()
	w.WriteHeader(code)
	bw := bufio.NewWriterSize(dw, 32<<10)
	// A failure here is the client's connection (deadline, reset): the
	// short body and Content-Length tell it the answer is incomplete, and
	// net/http closes the connection.
	if json.NewEncoder(bw).Encode(v) == nil {
		bw.Flush()
	}
}

// writeError answers an error: {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSONBytes(w, code, errorJSON(msg))
}

// maxErrorText bounds an error message: many quote what the client sent.
const maxErrorText = 1024

func errorJSON(msg string) []byte {
	b, _ := json.Marshal(errorBody{Error: clip(msg, maxErrorText)}) // a string always encodes
	return append(b, '\n')
}

// writeJSON answers a small value that always encodes (error bodies, a
// count), buffered whole.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, code = errorJSON("the answer could not be encoded as JSON"), http.StatusInternalServerError
	}
	writeJSONBytes(w, code, append(b, '\n'))
}

func writeJSONBytes(w http.ResponseWriter, code int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	newDeadlineWriter(w, DefaultWriteTimeout).Write(b)
}

// byteBudget bounds the bytes of large answers in flight. Unlike a FIFO
// semaphore, an answer that fits goes ahead of a larger one that waits,
// and one answer larger than the whole budget may go alone.
type byteBudget struct {
	mu    sync.Mutex
	used  int64
	max   int64
	freed chan struct{} // closed and replaced whenever bytes are released
}

func newByteBudget(max int64) *byteBudget {
	return &byteBudget{max: max, freed: make(chan struct{})}
}

// acquire takes n bytes of the budget, waiting up to budgetWait for room.
func (b *byteBudget) acquire(ctx context.Context, n int64) (release func(), err error) {
	timer := time.NewTimer(budgetWait)
	defer timer.Stop()
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					b.mu.Lock()
					b.used -= n
					close(b.freed)
					b.freed = make(chan struct{})
					b.mu.Unlock()
				})
			}, nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, errors.New("no room in the response budget")
		}
	}
}

// slots bounds the requests that load or compute much at once, and so
// the memory their loaded data takes. A request keeps its slot until its
// answer is encoded and has room in the byte budget; then the pace is the
// client's, and the budget bounds what slow clients hold.
type slots chan struct{}

// slotWait bounds how long a request waits for a slot.
const slotWait = 30 * time.Second

// enter takes a slot, waiting while ctx lasts, up to slotWait.
func (sl slots) enter(ctx context.Context) error {
	timer := time.NewTimer(slotWait)
	defer timer.Stop()
	select {
	case sl <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return errors.New("no free slot")
	}
}

func (sl slots) leave() { <-sl }

// slotKey is the context key of the request's *slotHold.
type slotKey struct{}

// slotHold is the slot an expensive request holds; the answer releases it
// before it waits for the client.
type slotHold struct {
	once  sync.Once
	leave func()
}

func (h *slotHold) release() { h.once.Do(h.leave) }

// leaveSlot releases r's slot, if it holds one.
func leaveSlot(r *http.Request) {
	if h, ok := r.Context().Value(slotKey{}).(*slotHold); ok {
		h.release()
	}
}
