package retry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	p := Policy{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	if got := p.Wait(3, 7*time.Second); got != 7*time.Second {
		t.Errorf("Wait with Retry-After 7s = %v, want 7s (beyond MaxBackoff, as given)", got)
	}
	for n, ceil := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 100: time.Second} {
		for range 100 {
			if got := p.Wait(n, 0); got <= 0 || got > ceil {
				t.Fatalf("Wait(%d) = %v, want in (0, %v]", n, got, ceil)
			}
		}
	}
	unbounded := Policy{MinBackoff: time.Hour}
	if got := unbounded.Wait(1000, 0); got <= 0 {
		t.Errorf("Wait(1000) with no MaxBackoff = %v, want positive", got)
	}
}

// fakeAfter returns an After that fires at once and records the waits.
func fakeAfter(waits *[]time.Duration) func(time.Duration) <-chan time.Time {
	return func(d time.Duration) <-chan time.Time {
		*waits = append(*waits, d)
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
}

func TestDo(t *testing.T) {
	busy := errors.New("busy")
	t.Run("attempts", func(t *testing.T) {
		var waits []time.Duration
		p := Policy{Attempts: 3, MinBackoff: time.Millisecond, After: fakeAfter(&waits)}
		tries := 0
		err := p.Do(context.Background(), func(n int) error {
			tries++
			if n != tries {
				t.Errorf("try %d numbered %d", tries, n)
			}
			return Later(busy, 5*time.Second)
		})
		if err != busy || tries != 3 || len(waits) != 2 || waits[0] != 5*time.Second {
			t.Errorf("Do = %v after %d tries, waits %v: want busy after 3 tries, two waits of 5s", err, tries, waits)
		}
	})
	t.Run("until done", func(t *testing.T) {
		var waits []time.Duration
		p := Policy{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, After: fakeAfter(&waits)}
		err := p.Do(context.Background(), func(n int) error {
			if n < 10 {
				return Later(busy, 0)
			}
			return nil
		})
		if err != nil || len(waits) != 9 {
			t.Fatalf("Do = %v with %d waits, want nil after 9", err, len(waits))
		}
		for _, w := range waits {
			if w <= 0 || w > 4*time.Millisecond {
				t.Errorf("wait %v, want in (0, 4ms]", w)
			}
		}
	})
	t.Run("for good", func(t *testing.T) {
		bad := errors.New("bad request")
		tries := 0
		err := Policy{}.Do(context.Background(), func(int) error { tries++; return bad })
		if err != bad || tries != 1 {
			t.Errorf("Do = %v after %d tries, want bad request after 1", err, tries)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p := Policy{MinBackoff: time.Hour}
		err := p.Do(ctx, func(int) error { return Later(busy, 0) })
		if !errors.Is(err, context.Canceled) || err.Error() != "context canceled (last: busy)" {
			t.Errorf("Do = %v, want context canceled (last: busy)", err)
		}
	})
}

func TestParseAfter(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "7": 7 * time.Second, " 3 ": 3 * time.Second, "-1": 0, "soon": 0,
		time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat): 0} {
		if got := ParseAfter(v); got != want {
			t.Errorf("ParseAfter(%q) = %v, want %v", v, got, want)
		}
	}
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if got := ParseAfter(future); got < 59*time.Minute || got > time.Hour {
		t.Errorf("ParseAfter(an hour from now) = %v", got)
	}
}
