package server

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// The live streams. Every committed ingest batch is published to a hub:
// one "record" event per record (for /api/v1/traces/{id}/stream) and one
// "trace" event per trace in the batch (for /api/v1/stream). The hub keeps
// the last events in a ring so that a client reconnecting with
// Last-Event-ID gets what it missed; event ids are "<boot>.<n>", boot
// being random per process, so an id from another process (a restart, or
// another server behind a balancer) is recognized as unknown, and the
// trace stream then starts again from the store.

// event is one published event.
type event struct {
	n     uint64
	trace trace.TraceID
	kind  string // "record" or "trace"
	seq   uint64 // for records
	data  []byte
}

// TraceEvent is the data of a "trace" event on /api/v1/stream.
type TraceEvent struct {
	TraceID trace.TraceID `json:"trace_id"`
	State   string        `json:"state"`            // "started" (its root run.start arrived), "ended" (its root run.end arrived) or "updated"
	Name    string        `json:"name,omitempty"`   // the root run's name, when this batch had it
	Status  string        `json:"status,omitempty"` // the termination reason, when ended
	Records int           `json:"records"`          // records of the trace in this batch
	Time    time.Time     `json:"time"`             // the latest record time in the batch
}

type hub struct {
	boot string
	mu   sync.Mutex
	n    uint64  // last event number
	gap  uint64  // events up to this number were not kept
	ring []event // the last len(ring) events, ring[i%len] = event i
	subs map[*sub]struct{}
	shut bool
}

type sub struct {
	trace trace.TraceID // zero: trace events; otherwise this trace's records
	ch    chan event
	gone  bool // closed by the hub: too slow, or shutting down
}

func newHub(size int) *hub {
	var b [4]byte
	rand.Read(b[:])
	return &hub{boot: hex.EncodeToString(b[:]), ring: make([]event, size), subs: map[*sub]struct{}{}}
}

func (h *hub) id(n uint64) string { return h.boot + "." + strconv.FormatUint(n, 10) }

// publish hands committed records to the subscribers. A subscriber that
// cannot keep up is disconnected (its client reconnects and catches up
// from the ring or the store) rather than slowing ingest down.
func (h *hub) publish(recs []trace.Record) {
	// Nobody watches (the usual case): skip the encoding and leave a gap
	// in the ring; a client resuming from before the gap is answered as
	// if its id were unknown (the trace stream restarts from the store).
	h.mu.Lock()
	if len(h.subs) == 0 {
		traces := 0
		var last trace.TraceID
		for i := range recs {
			if i == 0 || recs[i].TraceID != last {
				traces++ // counts runs of one trace, at least the distinct ones
				last = recs[i].TraceID
			}
		}
		h.n += uint64(len(recs) + traces)
		h.gap = h.n
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	type agg struct{ ev TraceEvent }
	traces := map[trace.TraceID]*agg{}
	var order []trace.TraceID
	evs := make([]event, 0, len(recs)+1)
	for i := range recs {
		r := &recs[i]
		evs = append(evs, event{trace: r.TraceID, kind: "record", seq: r.Seq, data: r.AppendJSON(nil)})
		a := traces[r.TraceID]
		if a == nil {
			a = &agg{ev: TraceEvent{TraceID: r.TraceID, State: "updated"}}
			traces[r.TraceID] = a
			order = append(order, r.TraceID)
		}
		a.ev.Records++
		if r.Time.After(a.ev.Time) {
			a.ev.Time = r.Time
		}
		if r.ParentID.IsZero() && r.Type == trace.TypeRunStart {
			a.ev.Name = r.Name
			if a.ev.State != "ended" {
				a.ev.State = "started"
			}
		}
		if r.ParentID.IsZero() && r.Type == trace.TypeRunEnd {
			a.ev.Name, a.ev.State, a.ev.Status = r.Name, "ended", r.Status
		}
	}
	for _, id := range order {
		b, _ := json.Marshal(traces[id].ev)
		evs = append(evs, event{trace: id, kind: "trace", data: b})
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shut {
		return
	}
	for i := range evs {
		h.n++
		evs[i].n = h.n
		h.ring[h.n%uint64(len(h.ring))] = evs[i]
	}
	for s := range h.subs {
		for _, e := range evs {
			if !s.wants(e) {
				continue
			}
			select {
			case s.ch <- e:
			default:
				h.drop(s)
			}
			if s.gone {
				break
			}
		}
	}
}

func (s *sub) wants(e event) bool {
	if s.trace.IsZero() {
		return e.kind == "trace"
	}
	return e.kind == "record" && e.trace == s.trace
}

// drop disconnects s; h.mu is held.
func (h *hub) drop(s *sub) {
	if !s.gone {
		s.gone = true
		close(s.ch)
		delete(h.subs, s)
	}
}

// subscribe registers a subscriber and returns it with the events after
// last (an event id from Last-Event-ID) still in the ring, and whether
// last was found (false: unknown, too old, or empty). now is the number
// of the latest event at subscription, for ids of backlog events.
func (h *hub) subscribe(t trace.TraceID, last string) (s *sub, missed []event, found bool, now string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s = &sub{trace: t, ch: make(chan event, 1024)}
	if h.shut {
		s.gone = true
		close(s.ch)
		return s, nil, false, h.id(h.n)
	}
	h.subs[s] = struct{}{}
	if boot, num, ok := strings.Cut(last, "."); ok && boot == h.boot {
		if n, err := strconv.ParseUint(num, 10, 64); err == nil && n >= h.gap && n <= h.n && h.n-n < uint64(len(h.ring)) {
			found = true
			for i := n + 1; i <= h.n; i++ {
				if e := h.ring[i%uint64(len(h.ring))]; s.wants(e) {
					missed = append(missed, e)
				}
			}
		}
	}
	return s, missed, found, h.id(h.n)
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(s)
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shut = true
	for s := range h.subs {
		h.drop(s)
	}
}

// heartbeat is how often an idle stream sends a comment, so that proxies
// and clients see it alive.
const heartbeat = 15 * time.Second

// sse prepares w for an event stream. Writes to the returned writer
// have a deadline each (Options.WriteTimeout), so a client that stops
// reading ends its stream rather than holding it.
func (s *Server) sse(w http.ResponseWriter) (*deadlineWriter, bool) {
	if _, ok := w.(http.Flusher); !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported by this connection")
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	dw := newDeadlineWriter(w, s.o.WriteTimeout)
	// Tell clients how soon to reconnect.
	fmt.Fprint(dw, "retry: 1000\n\n")
	return dw, dw.flush() == nil
}

func writeEvent(w io.Writer, id, kind string, data []byte) error {
	_, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", id, kind, data)
	return err
}

// streamAll is /api/v1/stream: a "trace" event (TraceEvent) each time
// records of a trace are committed. With Last-Event-ID, the events missed
// since are sent first, if the server still has them.
func (s *Server) streamAll(w http.ResponseWriter, r *http.Request) {
	sb, missed, _, _ := s.hub.subscribe(trace.TraceID{}, lastEventID(r))
	defer s.hub.unsubscribe(sb)
	dw, ok := s.sse(w)
	if !ok {
		return
	}
	for _, e := range missed {
		if writeEvent(dw, s.hub.id(e.n), e.kind, e.data) != nil {
			return
		}
	}
	if dw.flush() != nil {
		return
	}
	s.pump(dw, r, sb, nil)
}

// streamTrace is /api/v1/traces/{id}/stream: the trace's records, one
// "record" event each, as they are committed. It starts with the records
// already stored (unless Last-Event-ID names an event the server still
// has, in which case only the missed ones are sent); a client may see a
// record twice around a reconnection and should key records by seq.
func (s *Server) streamTrace(w http.ResponseWriter, r *http.Request) {
	id, err := trace.ParseTraceID(r.PathValue("id"))
	if err != nil || id.IsZero() {
		writeError(w, http.StatusBadRequest, "trace id: want 32 hex digits (the full id; list traces to find it)")
		return
	}
	sb, missed, found, now := s.hub.subscribe(id, lastEventID(r))
	defer s.hub.unsubscribe(sb)
	sent := map[uint64]bool{}
	var backlog []trace.Record
	if !found {
		t, err := s.o.Store.Trace(r.Context(), id)
		switch {
		case err == nil:
			backlog = t.Records
		case isNotFound(err):
		default:
			s.storeError(w, r, err)
			return
		}
	}
	dw, ok := s.sse(w)
	if !ok {
		return
	}
	bw := bufio.NewWriterSize(dw, 32<<10)
	for i := range backlog {
		sent[backlog[i].Seq] = true
		if writeEvent(bw, now, "record", backlog[i].AppendJSON(nil)) != nil {
			return
		}
	}
	backlog = nil // the live part may last: let the collector have it
	for _, e := range missed {
		sent[e.seq] = true
		if writeEvent(bw, s.hub.id(e.n), e.kind, e.data) != nil {
			return
		}
	}
	if bw.Flush() != nil || dw.flush() != nil {
		return
	}
	s.pump(dw, r, sb, sent)
}

// pump writes live events until the client leaves or the hub drops the
// subscriber; sent (if not nil) skips records already written.
func (s *Server) pump(w *deadlineWriter, r *http.Request, sb *sub, sent map[uint64]bool) {
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || w.flush() != nil {
				return
			}
		case e, ok := <-sb.ch:
			if !ok {
				return // dropped or shutting down: the client reconnects
			}
			if sent != nil {
				if sent[e.seq] {
					continue
				}
				sent[e.seq] = true
			}
			if writeEvent(w, s.hub.id(e.n), e.kind, e.data) != nil || w.flush() != nil {
				return
			}
		}
	}
}

func lastEventID(r *http.Request) string {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		return v
	}
	return r.URL.Query().Get("last_event_id")
}
