package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/pgtest"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/trace"
)

// twoCollectors returns two servers, each with a Store of its own on one
// PostgreSQL schema, as two `loupe serve` processes behind a balancer
// are, and the schema's DSN.
func twoCollectors(t *testing.T) (a, b *env, dsn string) {
	dsn = pgtest.Schema(t)
	var envs [2]*env
	for i := range envs {
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		envs[i] = newEnv(t, Options{Store: st})
	}
	return envs[0], envs[1], dsn
}

// ended waits for the server to end r's stream.
func (r *sseReader) ended() {
	r.t.Helper()
	timer := time.AfterFunc(15*time.Second, func() { r.resp.Body.Close() })
	defer timer.Stop()
	for r.sc.Scan() {
		if l := r.sc.Text(); strings.HasPrefix(l, "data: ") {
			r.t.Logf("before the end: %s", l)
		}
	}
	if err := r.sc.Err(); err != nil {
		r.t.Fatalf("stream not ended by the server in 15 s: %v", err)
	}
}

// nextFor returns the next event naming s, skipping others.
func (r *sseReader) nextFor(s string) sseEvent {
	r.t.Helper()
	for range 20 {
		if ev := r.next(); strings.Contains(ev.data, s) {
			return ev
		}
	}
	r.t.Fatalf("no event with %s in 20", s)
	return sseEvent{}
}

func wantSeq(t *testing.T, ev sseEvent, seq uint64) {
	t.Helper()
	if ev.kind != "record" || !strings.Contains(ev.data, fmt.Sprintf(`"seq":%d,`, seq)) {
		t.Fatalf("want record seq %d, got %+v", seq, ev)
	}
}

// TestStreamsAcrossCollectors: a client streaming from collector A sees
// the records that senders post to collector B, on /api/v1/stream and on
// a trace's stream; it resumes with Last-Event-ID on A; and when A's
// listening connection is killed, its trace streams end, their clients
// catch up from the store, and records posted to B after A listens again
// are streamed live.
func TestStreamsAcrossCollectors(t *testing.T) {
	a, b, dsn := twoCollectors(t)
	recs := run(0x51, "shared")
	id := recs[0].TraceID.String()
	post := func(e *env, rs []trace.Record) {
		t.Helper()
		if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(rs)); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}

	all := a.stream(t, "/api/v1/stream", "")
	one := a.stream(t, "/api/v1/traces/"+id+"/stream", "")
	post(b, recs[:2])
	wantSeq(t, one.next(), 1)
	wantSeq(t, one.next(), 2)
	if ev := all.next(); ev.kind != "trace" || !strings.Contains(ev.data, id) || !strings.Contains(ev.data, `"state":"started"`) || !strings.Contains(ev.data, `"records":2`) {
		t.Fatalf("trace event from B: %+v", ev)
	}
	post(a, recs[2:3]) // A's own commit: streamed once
	ev3 := one.next()
	wantSeq(t, ev3, 3)
	if ev := all.next(); !strings.Contains(ev.data, `"state":"updated"`) {
		t.Fatalf("trace event from A: %+v", ev)
	}

	// Resuming on A: only what was missed, B's record included.
	one.resp.Body.Close()
	post(b, recs[3:])
	again := a.stream(t, "/api/v1/traces/"+id+"/stream", ev3.id)
	ev4 := again.next()
	wantSeq(t, ev4, 4)
	if ev := all.next(); !strings.Contains(ev.data, `"state":"ended"`) || !strings.Contains(ev.data, `"status":"success"`) {
		t.Fatalf("end event from B: %+v", ev)
	}

	// The listening connections are killed. A ends its trace streams
	// once it listens again; their clients catch up from the store (what
	// B stored meanwhile included) and then stream live again.
	late := run(0x52, "late")
	lateID := late[0].TraceID.String()
	lateStream := a.stream(t, "/api/v1/traces/"+lateID+"/stream", "")
	if n := pgtest.TerminateListeners(t, dsn); n != 2 {
		t.Fatalf("%d listening connections killed, want 2", n)
	}
	post(b, late[:1]) // most likely before A listens again
	lateStream.ended()
	again.ended()
	resumed := a.stream(t, "/api/v1/traces/"+lateID+"/stream", ev4.id) // an id from before: from the store
	wantSeq(t, resumed.next(), 1)
	post(b, late[1:])
	for seq := uint64(2); seq <= 4; seq++ {
		wantSeq(t, resumed.next(), seq)
	}
	if ev := all.nextFor(lateID); ev.kind != "trace" {
		t.Fatalf("all: %+v", ev)
	}
}

// TestHubWant: notices are read back only for what is watched, the
// traces of trace streams apart from the others, and one read in part
// leaves a gap, so that a client resuming from before it starts again
// from the store.
func TestHubWant(t *testing.T) {
	x, y := trace.TraceID{1}, trace.TraceID{2}
	cts := []store.CommitTrace{{TraceID: x}, {TraceID: y}}
	h := newHub(16)
	if w, a := h.want(cts); len(w)+len(a) != 0 {
		t.Errorf("nobody watches: %v %v", w, a)
	}
	sx, _, _, _ := h.subscribe(x, "")
	h.publish(run(1, "x"))
	last := h.id(h.n)
	if w, a := h.want(cts); len(w) != 1 || w[0].TraceID != x || len(a) != 0 {
		t.Errorf("x watched: %v %v", w, a)
	}
	if _, _, found, _ := h.subscribe(x, last); found {
		t.Error("an id from before a gap is found")
	}
	last = h.id(h.n)
	sa, _, _, _ := h.subscribe(trace.TraceID{}, "")
	if w, a := h.want(cts); len(w) != 1 || w[0].TraceID != x || len(a) != 1 || a[0].TraceID != y {
		t.Errorf("all watched: %v %v", w, a)
	}
	if _, _, found, _ := h.subscribe(x, last); !found {
		t.Error("nothing left out, yet the id is unknown")
	}
	// Lost notices: the trace streams end, /api/v1/stream goes on.
	h.resync()
	if !sx.gone || sa.gone {
		t.Errorf("after resync: trace stream gone %v, all stream gone %v", sx.gone, sa.gone)
	}
	if _, _, found, _ := h.subscribe(x, last); found {
		t.Error("an id from before a resync is found")
	}
}

// TestStreamsAcrossCollectorsRanges: a request to B whose records of a
// trace are not consecutive (seqs 1, 2 and 4, of two traces) is one
// trace event per trace on A, and exactly those records on the trace's
// stream.
func TestStreamsAcrossCollectorsRanges(t *testing.T) {
	a, b, _ := twoCollectors(t)
	x, y := run(0x61, "x"), run(0x62, "y")
	all := a.stream(t, "/api/v1/stream", "")
	one := a.stream(t, "/api/v1/traces/"+x[0].TraceID.String()+"/stream", "")
	batch := []trace.Record{x[0], x[1], x[3], y[0]}
	if code, body, _ := b.do("POST", "/v1/records", "application/x-ndjson", ndjson(batch)); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	for _, seq := range []uint64{1, 2, 4} {
		wantSeq(t, one.next(), seq)
	}
	got := map[string]string{}
	for range 2 {
		ev := all.next()
		for _, id := range []trace.TraceID{x[0].TraceID, y[0].TraceID} {
			if strings.Contains(ev.data, id.String()) {
				got[id.String()] = ev.data
			}
		}
	}
	if d := got[x[0].TraceID.String()]; !strings.Contains(d, `"records":3`) || !strings.Contains(d, `"state":"ended"`) {
		t.Errorf("trace event of x: %s", d)
	}
	if d := got[y[0].TraceID.String()]; !strings.Contains(d, `"records":1`) || !strings.Contains(d, `"state":"started"`) {
		t.Errorf("trace event of y: %s", d)
	}
}

// TestStreamsAcrossCollectorsLaggingReplica: a collector that reads from
// a replica reads back another collector's records from the primary, so
// a replica that has not caught up (here one that never does: another
// store) does not lose them from its live streams.
func TestStreamsAcrossCollectorsLaggingReplica(t *testing.T) {
	dsn := pgtest.Schema(t)
	open := func() store.Store {
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	sp, err := store.Split(open(), openStore(t))
	if err != nil {
		t.Fatal(err)
	}
	a, b := newEnv(t, Options{Store: sp}), newEnv(t, Options{Store: open()})
	recs := run(0x71, "lagging")
	id := recs[0].TraceID.String()
	all := a.stream(t, "/api/v1/stream", "")
	one := a.stream(t, "/api/v1/traces/"+id+"/stream", "")
	if code, body, _ := b.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	for seq := uint64(1); seq <= uint64(len(recs)); seq++ {
		wantSeq(t, one.next(), seq)
	}
	if ev := all.nextFor(id); ev.kind != "trace" || !strings.Contains(ev.data, `"state":"ended"`) {
		t.Fatalf("trace event from B: %+v", ev)
	}
	if _, err := sp.Trace(context.Background(), recs[0].TraceID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the replica has the trace (%v): the test proves nothing", err)
	}
}
