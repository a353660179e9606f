package server

import (
	"context"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// runAt is run(id, name) moved to start at start.
func runAt(id byte, start time.Time) []trace.Record {
	recs := run(id, "r")
	for i := range recs {
		recs[i].Time = start.Add(recs[i].Time.Sub(t0))
	}
	return recs
}

// TestRetentionPass: a pass with a controlled clock removes exactly the
// traces older than Retain, in batches, and counts them.
func TestRetentionPass(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, Options{Retain: 30 * 24 * time.Hour, RetainEvery: time.Hour})
	// The pass at New ran before anything was stored; store 250 old runs
	// (more than a batch) and 3 recent ones.
	var recs []trace.Record
	for i := range 250 {
		tid := byte(i % 250)
		rs := runAt(tid, now.Add(-31*24*time.Hour-time.Duration(i)*time.Minute))
		for j := range rs {
			rs[j].TraceID = trace.TraceID{tid, byte(i / 250), 7}
		}
		recs = append(recs, rs...)
	}
	for i := range 3 {
		rs := runAt(byte(i), now.Add(-29*24*time.Hour))
		for j := range rs {
			rs[j].TraceID = trace.TraceID{byte(i), 9, 9}
		}
		recs = append(recs, rs...)
	}
	if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
		t.Fatalf("storing: %d %s", code, b)
	}
	if n := count(t, e.st); n != 253 {
		t.Fatalf("%d traces stored, want 253", n)
	}
	before := e.srv.Retention()
	res, err := e.srv.ApplyRetention(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Traces) != 250 || res.Records != 250*4 {
		t.Errorf("the pass removed %d traces, %d records; want 250, 1000", len(res.Traces), res.Records)
	}
	if n := count(t, e.st); n != 3 {
		t.Errorf("%d traces left, want the 3 recent ones", n)
	}
	after := e.srv.Retention()
	if after.Passes != before.Passes+1 || after.Traces != before.Traces+250 || after.Records != before.Records+1000 || after.LastErr != "" {
		t.Errorf("retention stats %+v, then %+v", before, after)
	}
	// A later clock removes the rest.
	if res, _ := e.srv.ApplyRetention(context.Background(), now.Add(2*24*time.Hour)); len(res.Traces) != 3 {
		t.Errorf("two days later the pass removed %d traces, want 3", len(res.Traces))
	}
}

// TestRetentionScheduled: with Retain set, passes run on their own, and
// Close stops them.
func TestRetentionScheduled(t *testing.T) {
	e := newEnv(t, Options{Retain: time.Hour, RetainEvery: 20 * time.Millisecond})
	old := runAt(1, time.Now().Add(-2*time.Hour))
	if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(old)); code != 200 {
		t.Fatalf("storing: %d %s", code, b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count(t, e.st) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the old trace is still there after 10 s of 20 ms passes (stats %+v)", e.srv.Retention())
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.srv.Close()
	n := e.srv.Retention().Passes
	time.Sleep(100 * time.Millisecond)
	if m := e.srv.Retention().Passes; m != n {
		t.Errorf("passes went on after Close: %d, then %d", n, m)
	}
	if _, err := New(Options{Store: e.st, Retain: -time.Hour}); err == nil {
		t.Error("a negative Retain was accepted")
	}
}
