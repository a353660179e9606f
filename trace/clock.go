package trace

import (
	"sync/atomic"
	"time"
)

// A clock reads the time for records: the wall time of an anchor plus the
// monotonic time elapsed since it. Reading the monotonic clock alone costs
// less than time.Now (BenchmarkClock; the numbers are in BENCHMARKS.md),
// and a run reads the clock for almost every record. The anchor is renewed
// every second, so the wall times follow the system clock's corrections
// within a second while durations, taken from the monotonic readings,
// never jump. The zero clock is ready to use; it is safe for concurrent
// use.
type clock struct {
	anchor atomic.Pointer[time.Time]
}

// reanchor is how long an anchor serves before the wall clock is read again.
const reanchor = time.Second

func (c *clock) now() time.Time {
	if a := c.anchor.Load(); a != nil {
		if d := time.Since(*a); d >= 0 && d < reanchor {
			return a.Add(d)
		}
	}
	n := time.Now()
	c.anchor.Store(&n)
	return n
}
