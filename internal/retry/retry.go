// Package retry is the retry loop of what Loupe posts over HTTP: the sinks
// that send to a server (export/http, export/otlpsink) and the webhooks of
// package alert. A request is tried again after a failure
// that may pass, waiting what the server asks for in Retry-After, or else
// a random time under a ceiling that doubles with each retry (exponential
// backoff with full jitter). Which failures may pass is the caller's to
// say.
package retry

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Policy says how often a request is tried and how long to wait between
// tries.
type Policy struct {
	// Attempts bounds the tries of one request; 0 means no bound.
	Attempts int
	// MinBackoff is the ceiling of the first wait; the ceiling doubles
	// with each retry, up to MaxBackoff (0: no bound). A Retry-After
	// longer than MaxBackoff is honoured as given.
	MinBackoff, MaxBackoff time.Duration
	// After is time.After, or a stand-in for tests.
	After func(time.Duration) <-chan time.Time
}

// Wait returns how long to wait before retry number n (1 for the first):
// retryAfter if it is positive, or else a random duration in
// (0, MinBackoff·2^(n-1)], at most MaxBackoff.
func (p Policy) Wait(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	ceil := p.MinBackoff << min(n-1, 30)
	if p.MaxBackoff > 0 && (ceil > p.MaxBackoff || ceil <= 0) {
		ceil = p.MaxBackoff
	}
	if ceil <= 0 { // no MaxBackoff, and the shift overflowed
		ceil = math.MaxInt64
	}
	return time.Duration(rand.Int64N(int64(ceil))) + 1
}

// Do calls try with the try's number (1 for the first) until it returns
// an error that Later did not make (nil once the request has succeeded),
// Attempts tries have been made, or ctx is done, waiting between tries as
// Wait says. It returns try's last error, unwrapped from Later, or, when
// ctx ended a wait, ctx's error with the last error in its message.
func (p Policy) Do(ctx context.Context, try func(n int) error) error {
	after := p.After
	if after == nil {
		after = time.After
	}
	for n := 1; ; n++ {
		err := try(n)
		l, ok := err.(*later)
		if !ok {
			return err
		}
		if p.Attempts > 0 && n >= p.Attempts {
			return l.err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), l.err)
		case <-after(p.Wait(n, l.wait)):
		}
	}
}

// later is a failure worth another try.
type later struct {
	err  error
	wait time.Duration // the server's Retry-After, 0 if none
}

func (l *later) Error() string { return l.err.Error() }
func (l *later) Unwrap() error { return l.err }

// Later marks err, the failure of one try, as one that may pass: Do tries
// again, after wait if it is positive (the server's Retry-After, see
// After), or else after the backoff.
func Later(err error, wait time.Duration) error {
	return &later{err: err, wait: wait}
}

// ParseAfter reads a Retry-After header's value, seconds or an HTTP date,
// as how long to wait; 0 when v is empty, malformed or in the past.
func ParseAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
