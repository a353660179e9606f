package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/trace"
)

// What monitors read of a store (package alert): the numbers of the traces
// that started in a window (WindowStats), and where their firings and
// webhook deliveries are kept (Alerts).

// MaxSample bounds WindowQuery.Sample and the trace ids a Firing keeps.
const MaxSample = 20

// The orders of WindowQuery.SampleBy: which traces of the window a sample
// holds first.
const (
	SampleNewest   = ""         // the latest started
	SampleErrors   = "errors"   // the failed ones (errors, or a status other than success/running), newest first
	SampleDuration = "duration" // the longest
	SampleCost     = "cost"     // the most expensive
	SampleTokens   = "tokens"   // the most input plus output tokens
)

// A WindowQuery asks for the numbers of the traces its Filter selects
// (usually a window: Since and Until).
type WindowQuery struct {
	Filter
	// Sample is how many trace ids to return (at most MaxSample), in the
	// order SampleBy names.
	Sample   int
	SampleBy string
}

// WindowStats are the numbers of the traces a WindowQuery selects. Sums
// never wrap and are never negative, as Aggregates' are.
type WindowStats struct {
	Traces       int64   `json:"traces"`
	ErrorTraces  int64   `json:"error_traces"` // errors, or a status other than success/running
	CostUSD      float64 `json:"cost_usd"`     // summed over the priced model calls
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	// P95 is the 95th percentile of the traces' durations (nearest rank:
	// the smallest duration at least 95 % of them do not exceed); 0 when
	// there are none.
	P95    time.Duration   `json:"p95_ns"`
	Sample []trace.TraceID `json:"sample,omitempty"`
}

// A WindowStater answers WindowStats with a few aggregate queries over its
// trace summaries, without reading the traces one by one. The SQLite and
// PostgreSQL backends implement it.
type WindowStater interface {
	// WindowStats returns the numbers of the traces q selects. A filter
	// beyond the limits is refused with a *QueryError.
	WindowStats(ctx context.Context, q WindowQuery) (WindowStats, error)
}

// Window returns the numbers of the traces q selects: from s's
// WindowStats if it implements WindowStater, else by walking the listing
// (Summaries), which costs a read of every summary.
func Window(ctx context.Context, s Store, q WindowQuery) (WindowStats, error) {
	if err := q.Validate(); err != nil {
		return WindowStats{}, err
	}
	if ws, ok := s.(WindowStater); ok {
		return ws.WindowStats(ctx, q)
	}
	var w WindowStats
	var sums []Summary
	var durs []time.Duration
	for sum, err := range Summaries(ctx, s, ListQuery{Filter: q.Filter, Limit: MaxLimit}) {
		if err != nil {
			return WindowStats{}, err
		}
		w.Traces++
		if SummaryFailed(&sum) {
			w.ErrorTraces++
		}
		w.CostUSD = min(w.CostUSD+max(sum.CostUSD, 0), math.MaxFloat64)
		w.InputTokens = addSat(w.InputTokens, sum.InputTokens)
		w.OutputTokens = addSat(w.OutputTokens, sum.OutputTokens)
		durs = append(durs, sum.Duration)
		if q.Sample > 0 {
			sums = append(sums, sum)
		}
	}
	w.P95 = P95(durs)
	w.Sample = SampleOf(sums, q.SampleBy, q.Sample)
	return w, nil
}

// Validate checks q's Filter, Sample (0 to MaxSample) and SampleBy. The
// error is a *QueryError.
func (q *WindowQuery) Validate() error {
	if q.Sample < 0 || q.Sample > MaxSample {
		return queryErrorf("window: sample %d is out of range (0 to %d)", q.Sample, MaxSample)
	}
	switch q.SampleBy {
	case SampleNewest, SampleErrors, SampleDuration, SampleCost, SampleTokens:
	default:
		return queryErrorf("window: sample order %q is not one of errors, duration, cost, tokens or empty (newest)", q.SampleBy)
	}
	return q.Filter.Validate()
}

// SummaryFailed reports whether a trace counts as failed in error rates:
// it has errors, or it ended with a status other than success (running
// and incomplete traces have not ended). Aggregates.ErrorTraces and
// WindowStats.ErrorTraces count these.
func SummaryFailed(s *Summary) bool {
	return s.Errors > 0 || s.Status != "success" && s.Status != StatusRunning && s.Status != StatusIncomplete
}

// P95 returns the nearest-rank 95th percentile of durs (which it sorts),
// 0 for none.
func P95(durs []time.Duration) time.Duration {
	if len(durs) == 0 {
		return 0
	}
	slices.Sort(durs)
	return durs[P95Rank(int64(len(durs)))]
}

// P95Rank is the index (from 0) of the nearest-rank 95th percentile among
// n sorted values, n > 0: ceil(0.95·n) - 1.
func P95Rank(n int64) int64 {
	return (95*n+99)/100 - 1
}

// SampleOf returns the ids of up to n of sums in the order by names
// (WindowQuery.SampleBy).
func SampleOf(sums []Summary, by string, n int) []trace.TraceID {
	if n <= 0 {
		return nil
	}
	if by == SampleErrors {
		sums = slices.DeleteFunc(slices.Clone(sums), func(s Summary) bool { return !SummaryFailed(&s) })
	}
	slices.SortStableFunc(sums, func(a, b Summary) int {
		switch by {
		case SampleDuration:
			if c := cmp.Compare(b.Duration, a.Duration); c != 0 {
				return c
			}
		case SampleCost:
			if c := cmp.Compare(b.CostUSD, a.CostUSD); c != 0 {
				return c
			}
		case SampleTokens:
			if c := cmp.Compare(b.Tokens(), a.Tokens()); c != 0 {
				return c
			}
		}
		return b.Started.Compare(a.Started)
	})
	var ids []trace.TraceID
	for i := 0; i < len(sums) && i < n; i++ {
		ids = append(ids, sums[i].ID)
	}
	return ids
}

// addSat returns a+b for a ≥ 0, stopping at math.MaxInt64; a negative b
// counts as 0.
func addSat(a, b int64) int64 {
	b = max(b, 0)
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// The states of a firing, and the events a delivery announces.
const (
	AlertFiring   = "firing"
	AlertResolved = "resolved"
)

// A Firing is one crossing of a monitor's threshold: from when it fired
// until it resolved (Resolved zero while it fires).
type Firing struct {
	// ID identifies the firing: 32 lowercase hex digits, chosen by the
	// caller of OpenFiring.
	ID        string        `json:"id"`
	Monitor   string        `json:"monitor"`
	Metric    string        `json:"metric"`
	Filter    string        `json:"filter,omitempty"` // the monitor's filter, in the search language
	Started   time.Time     `json:"started"`
	Resolved  time.Time     `json:"resolved,omitzero"`
	Value     float64       `json:"value"`     // the value that fired it
	Threshold float64       `json:"threshold"` // the threshold it crossed
	Window    time.Duration `json:"window_ns"` // the window the value was taken over
	// ResolvedValue is the value that resolved it (when Resolved is set).
	ResolvedValue float64 `json:"resolved_value,omitempty"`
	// TraceIDs are a sample of the traces that caused it (at most
	// MaxSample).
	TraceIDs   []trace.TraceID `json:"trace_ids"`
	Deliveries []Delivery      `json:"deliveries"` // oldest first; filled by Firings
}

// A Delivery is one attempt to notify a webhook of a firing or its
// resolution.
type Delivery struct {
	FiringID string    `json:"firing_id"`
	Event    string    `json:"event"`   // AlertFiring or AlertResolved
	Target   string    `json:"target"`  // the webhook, redacted (no path tokens, no query)
	Attempt  int       `json:"attempt"` // from 1
	Time     time.Time `json:"time"`
	Status   int       `json:"status"` // the HTTP status, 0 when none came back
	OK       bool      `json:"ok"`
	Error    string    `json:"error,omitempty"`
}

// FiringFilter selects firings. Zero fields do not narrow.
type FiringFilter struct {
	Monitor string
	Open    bool      // only those still firing
	Since   time.Time // started at or after
	Limit   int       // at most this many, newest first; 0 means 100, at most 1000
}

// Limits of what Alerts stores, so that a firing is small whatever a
// monitor is called.
const (
	MaxMonitorNameBytes = 128
	MaxAlertTextBytes   = 4 << 10 // a filter, a target, an error
)

// ErrFiringExists is returned by OpenFiring, wrapped, when f's ID is
// already stored.
var ErrFiringExists = errors.New("firing already stored")

// Alerts is implemented by stores that keep monitors' firings and their
// webhook deliveries (the SQLite and PostgreSQL backends). Methods are
// safe for concurrent use, by several processes on one store too: a
// monitor has at most one open firing, whoever opens it.
type Alerts interface {
	// OpenFiring stores f (Resolved zero) as the monitor's open firing,
	// unless the monitor already has one (opened by this process or
	// another collector on the store). opened says whether f was stored;
	// when it was not, open is the firing already open, and the caller
	// must not notify of it again.
	OpenFiring(ctx context.Context, f Firing) (open Firing, opened bool, err error)
	// ResolveFiring marks the open firing id as resolved at, with the
	// value that resolved it. It reports false when the firing is not
	// open (another collector resolved it first, or it does not exist).
	ResolveFiring(ctx context.Context, id string, at time.Time, value float64) (bool, error)
	// AddDelivery stores one delivery attempt.
	AddDelivery(ctx context.Context, d Delivery) error
	// Firings returns the firings f selects, newest first, each with its
	// deliveries.
	Firings(ctx context.Context, f FiringFilter) ([]Firing, error)
}

// ValidateFiring checks a firing before it is stored: an ID of 32
// lowercase hex digits, a monitor name and metric of valid UTF-8 within
// MaxMonitorNameBytes, a filter within MaxAlertTextBytes, finite numbers,
// a start and at most MaxSample trace ids.
func ValidateFiring(f *Firing) error {
	switch {
	case !validScoreID(f.ID):
		return fmt.Errorf("firing id %q is not 32 lowercase hex digits", f.ID)
	case f.Monitor == "" || len(f.Monitor) > MaxMonitorNameBytes || !isText(f.Monitor):
		return fmt.Errorf("firing: monitor name %q is empty, longer than %d bytes or not text", clipText(f.Monitor, 40), MaxMonitorNameBytes)
	case len(f.Metric) > MaxMonitorNameBytes || !isText(f.Metric):
		return fmt.Errorf("firing: metric is longer than %d bytes or not text", MaxMonitorNameBytes)
	case len(f.Filter) > MaxAlertTextBytes || !isText(f.Filter):
		return fmt.Errorf("firing: filter is longer than %d bytes or not text", MaxAlertTextBytes)
	case !finite(f.Value) || !finite(f.Threshold) || !finite(f.ResolvedValue):
		return errors.New("firing: value and threshold must be finite numbers")
	case f.Started.IsZero():
		return errors.New("firing: start time is zero")
	case len(f.TraceIDs) > MaxSample:
		return fmt.Errorf("firing: %d trace ids are more than %d", len(f.TraceIDs), MaxSample)
	}
	return nil
}

// ValidateDelivery checks a delivery before it is stored.
func ValidateDelivery(d *Delivery) error {
	switch {
	case !validScoreID(d.FiringID):
		return fmt.Errorf("delivery: firing id %q is not 32 lowercase hex digits", d.FiringID)
	case d.Event != AlertFiring && d.Event != AlertResolved:
		return fmt.Errorf("delivery: event %q is not firing or resolved", d.Event)
	case d.Attempt < 1:
		return fmt.Errorf("delivery: attempt %d is not positive", d.Attempt)
	case len(d.Target) > MaxAlertTextBytes || !isText(d.Target):
		return fmt.Errorf("delivery: target is longer than %d bytes or not text", MaxAlertTextBytes)
	case d.Time.IsZero():
		return errors.New("delivery: time is zero")
	}
	return nil
}

// ClipAlertText bounds s to MaxAlertTextBytes of valid UTF-8 without NUL
// bytes, for an error message to be stored with a delivery.
func ClipAlertText(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	return clipText(s, MaxAlertTextBytes)
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
