package trace

import (
	"testing"
	"time"
)

func TestClockFollowsTheSystemClock(t *testing.T) {
	var c clock
	prev := c.now()
	for range 1000 {
		before := time.Now()
		got := c.now()
		after := time.Now()
		// The anchor's wall time plus monotonic time may differ from a
		// fresh wall reading only by what the system clock was corrected
		// by within a second; here, by nothing measurable.
		if got.Before(before.Add(-time.Millisecond)) || got.After(after.Add(time.Millisecond)) {
			t.Fatalf("clock = %v, system clock between %v and %v", got, before, after)
		}
		if got.Sub(prev) < 0 {
			t.Fatalf("clock went back: %v after %v", got, prev)
		}
		prev = got
	}
}

func BenchmarkClock(b *testing.B) {
	var c clock
	b.Run("clock", func(b *testing.B) {
		for b.Loop() {
			_ = c.now()
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
}

// BenchmarkIterationFloor does the least any recorder must do for one
// agent iteration while every run returns its records: read the clock for
// each of the iteration's 6 timestamps and write its 5 records, with their
// small values copied, into a log that is kept (a new one every 1,000
// iterations, as runs are). No locks, ids, stats, encoding or delivery: a
// lower bound for BenchmarkIteration, to hold against the 1 % budget of
// the agent benchmark in BENCHMARKS.md.
var floorLog []Record

func BenchmarkIterationFloor(b *testing.B) {
	var c clock
	in, out := []byte(`{"expr":"6*7"}`), []byte(`42`)
	req := []byte(`{"messages":3,"tools":1,"new":[{"role":"tool","content":"42","tool_call_id":"c1","name":"calculator"}]}`)
	resp := []byte(`{"tool_calls":[{"id":"c2","name":"calculator","input":{"expr":"6*7"}}]}`)
	var log []Record
	var arena []byte
	keep := func(v []byte) Value {
		if cap(arena)-len(arena) < len(v) {
			arena = make([]byte, 0, 64<<10)
		}
		s := len(arena)
		arena = append(arena, v...)
		return Value(arena[s:len(arena):len(arena)])
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n%1000 == 0 {
			floorLog = log // the finished run's records, kept as Result.Records keeps them
			log = make([]Record, 0, 5000)
		}
		n++
		t0 := c.now()
		log = append(log, Record{Type: TypeIterationStart, Time: t0})
		t1 := c.now()
		t2 := c.now()
		log = append(log, Record{Type: TypeModelCall, Time: t2, Duration: t2.Sub(t1), Input: keep(req), Output: keep(resp)})
		t3 := c.now()
		log = append(log, Record{Type: TypeToolStart, Time: t3, Input: keep(in)})
		t4 := c.now()
		log = append(log, Record{Type: TypeToolEnd, Time: t4, Duration: t4.Sub(t3), Output: keep(out)})
		t5 := c.now()
		log = append(log, Record{Type: TypeIterationEnd, Time: t5, Duration: t5.Sub(t0)})
	}
	floorLog = log
}
