package online

import (
	"testing"
	"time"
)

// TestDropLog: drops are counted per minute over the last day; a window
// counts the minutes it covers, and a slot reused a day later starts
// again.
func TestDropLog(t *testing.T) {
	var l dropLog
	t0 := time.Date(2026, 11, 25, 12, 0, 30, 0, time.UTC)
	for i, at := range []time.Duration{0, 10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute} {
		for range i + 1 {
			l.add(t0.Add(-at))
		}
	}
	// Drops: now 1+2 = 3 (this minute), 1 min ago 3, 5 min ago 4, 30 min ago 5.
	for _, tc := range []struct {
		window time.Duration
		want   int64
	}{
		{time.Minute, 3}, {2 * time.Minute, 6}, {10 * time.Minute, 10}, {time.Hour, 15}, {48 * time.Hour, 15}, {0, 0},
	} {
		if got := l.count(t0, tc.window); got != tc.want {
			t.Errorf("window %s: %d, want %d", tc.window, got, tc.want)
		}
	}
	// A day later the old minutes no longer count, and their slots
	// count anew.
	later := t0.Add(24 * time.Hour)
	l.add(later)
	if got := l.count(later, time.Hour); got != 1 {
		t.Errorf("a day later: %d, want 1", got)
	}
}
