package server

import (
	"context"
	"strings"
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

// TestRetentionAPI: an admin key sets the retention period through the
// API for every collector on the store: the collector that took it
// applies it at once, another one at its next pass; null goes back to
// each collector's flag; read keys may look but not change, and a bad
// period is a 400 that says what to send.
func TestRetentionAPI(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()
	st := openStore(t)
	e := newEnv(t, Options{Store: st, RequireKeys: true})
	keys := map[Scope]string{}
	for _, sc := range []Scope{ScopeRead, ScopeAdmin, ScopeIngest} {
		k, _, err := CreateKey(ctx, st, sc, string(sc), now)
		if err != nil {
			t.Fatal(err)
		}
		keys[sc] = k
	}
	e.key = keys[ScopeIngest]
	old, recent, kept := runAt(1, now.Add(-10*24*time.Hour)), runAt(2, now.Add(-24*time.Hour)), runAt(3, now.Add(-24*time.Hour))
	recs := append(append(old, recent...), kept...)
	if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
		t.Fatalf("storing: %d %s", code, b)
	}
	// A second collector on the same store, without --retain.
	other := newEnv(t, Options{Store: st, RequireKeys: true})
	for _, tc := range []struct {
		key, method, body string
		code              int
		want              string
	}{
		{keys[ScopeRead], "GET", "", 200, `"period":"0s","source":"flag"`},
		{keys[ScopeRead], "PUT", `{"period":"7d"}`, 403, ""},
		{keys[ScopeIngest], "PUT", `{"period":"7d"}`, 403, ""},
		{keys[ScopeAdmin], "PUT", `{"period":"soon"}`, 400, "90s, 24h or 7d"},
		{keys[ScopeAdmin], "PUT", `{"period":"5m"}`, 400, "under an hour"},
		{keys[ScopeAdmin], "PUT", `{"days":7}`, 400, "unknown field"},
		{keys[ScopeAdmin], "PUT", `{"period":"7d"}`, 200, `"period":"168h0m0s","source":"api"`},
	} {
		e.key = tc.key
		var body []byte
		ctype := ""
		if tc.body != "" {
			body, ctype = []byte(tc.body), "application/json"
		}
		code, b, _ := e.do(tc.method, "/api/v1/retention", ctype, body)
		if code != tc.code || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s %s %s: %d %s, want %d with %q", tc.key[:6], tc.method, tc.body, code, b, tc.code, tc.want)
		}
	}
	// The collector that took the period runs a pass at once.
	for deadline := time.Now().Add(10 * time.Second); stored(t, st, old[0].TraceID) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) { // a hang, not a timing claim
			t.Fatal("the 10-day-old trace is still there 10s after the period was set")
		}
	}
	// The other one follows the same period at its next pass.
	res, err := other.srv.ApplyRetention(ctx, now.Add(6*24*time.Hour+time.Hour))
	if err != nil || len(res.Traces) != 2 {
		t.Fatalf("the other collector's pass 7 days on removed %v, %v; want the two 1-day-old traces", res.Traces, err)
	}
	if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(kept)); code != 200 {
		t.Fatalf("storing again: %d %s", code, b)
	}
	e.key = keys[ScopeAdmin]
	if code, b, _ := e.do("PUT", "/api/v1/retention", "application/json", []byte(`{"period":null}`)); code != 200 || !strings.Contains(string(b), `"period":"0s","source":"flag"`) {
		t.Errorf("back to the flag: %d %s", code, b)
	}
	if res, err := other.srv.ApplyRetention(ctx, now.Add(365*24*time.Hour)); err != nil || len(res.Traces) != 0 {
		t.Errorf("with retention off a pass removed %v, %v", res.Traces, err)
	}
}
