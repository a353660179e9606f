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
