package alert_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/alert"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

// fakeClock is a Clock the test drives: Now is what the test set, and the
// ticker's channel is the test's (unbuffered, so that a send returns once
// Run has taken the tick).
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	tick chan time.Time
}

func newFakeClock(t0 time.Time) *fakeClock { return &fakeClock{now: t0, tick: make(chan time.Time)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTicker(time.Duration) (<-chan time.Time, func()) { return c.tick, func() {} }

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// step moves the clock to t and lets Run evaluate: the second tick is
// taken only once the first one's evaluation is over.
func (c *fakeClock) step(t time.Time) {
	c.set(t)
	c.tick <- t
	c.tick <- t
}

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// addRuns stores ok successful and failed failed runs that start at at,
// tagged env:prod, and returns the failed ones' ids.
func addRuns(t testing.TB, s store.Store, at time.Time, ok, failed int) []trace.TraceID {
	t.Helper()
	var recs []trace.Record
	var bad []trace.TraceID
	for i := range ok + failed {
		sp := storetest.Spec{Start: at.Add(time.Duration(i) * time.Second), Tags: []string{"env:prod"}}
		if i >= ok {
			sp.Reason = trace.TerminationError
		}
		r := storetest.Gen(sp)
		if i >= ok {
			bad = append(bad, r[0].TraceID)
		}
		recs = append(recs, r...)
	}
	// Noise the filter leaves out: failed runs of another environment.
	recs = append(recs, storetest.Gen(storetest.Spec{Start: at, Tags: []string{"env:dev"}, Reason: trace.TerminationError})...)
	if _, err := s.Append(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	return bad
}

// receiver is a real webhook endpoint on 127.0.0.1. The flaky path fails
// its first deliveries: HTTP 500, then no answer (past the engine's
// timeout), then accepts.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	tries  map[string]int
	bodies map[string][][]byte // accepted bodies by path
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{tries: map[string]int{}, bodies: map[string][][]byte{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.tries[r.URL.Path]++
		n := rc.tries[r.URL.Path]
		rc.mu.Unlock()
		if r.URL.Path == "/flaky" {
			switch n {
			case 1:
				http.Error(w, "receiver overloaded", http.StatusInternalServerError)
				return
			case 2:
				select { // no answer until the client gives up
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
				return
			}
		}
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/flaky", http.StatusFound)
			return
		}
		rc.mu.Lock()
		rc.bodies[r.URL.Path] = append(rc.bodies[r.URL.Path], body)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) got(path string) [][]byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.bodies[path])
}

func newEngine(t *testing.T, s store.Store, clock alert.Clock) *alert.Engine {
	t.Helper()
	e, err := alert.New(alert.Options{Store: s, Clock: clock, Timeout: time.Second, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		UIURL: "http://127.0.0.1:4318/", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func f64(v float64) *float64 { return &v }

func state(t *testing.T, e *alert.Engine, name string) alert.Status {
	t.Helper()
	sts, err := e.Statuses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if s.Monitor.Name == name {
			return s
		}
	}
	t.Fatalf("no monitor %s in %+v", name, sts)
	return alert.Status{}
}

// TestFireResolve drives a monitor of the error rate through a spike, a
// firing, values in the hysteresis band and a resolution, on two engines
// sharing the store (two collectors), with a webhook that fails its first
// deliveries.
func TestFireResolve(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	rc := newReceiver(t)
	clock := newFakeClock(t0)
	a := newEngine(t, s, clock)
	b := newEngine(t, s, newFakeClock(t0)) // the second collector, driven by Evaluate
	const secret = "T0001/B0002/XXXXsecretXXXX"
	m := alert.Monitor{Name: "prod-errors", Metric: alert.ErrorRate, Filter: "tag:env:prod", Window: alert.Duration(time.Minute), Every: alert.Duration(time.Minute),
		Threshold: 0.5, Resolve: f64(0.2), For: 2, ResolveFor: 2,
		Webhooks: []alert.Webhook{{URL: rc.URL + "/flaky"}, {URL: rc.URL + "/services/" + secret, Format: "slack"}}}
	if err := a.Put(ctx, m); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() { stop(); <-done }()
	clock.tick <- t0 // Run's first pass is at once; this waits for it

	// Each step's window (now-1m, now] holds 5 runs of env:prod: the
	// error rate is failed/5.
	var firedWith []trace.TraceID
	for i, st := range []struct {
		failed int
		want   string
	}{
		{3, alert.StatePending},   // 0.6: over, once
		{2, alert.StateOK},        // 0.4: a spike does not fire
		{3, alert.StatePending},   // 0.6
		{3, alert.StateFiring},    // 0.6 twice in a row: fires
		{3, alert.StateFiring},    // still over: no second firing
		{2, alert.StateFiring},    // 0.4: in the band, still firing
		{0, alert.StateResolving}, // 0.0: clear, once
		{2, alert.StateFiring},    // 0.4: back in the band, counting afresh
		{0, alert.StateResolving}, // clear
		{0, alert.StateOK},        // clear twice in a row: resolved
		{2, alert.StateOK},        // 0.4: in the band while quiet, no firing
	} {
		now := t0.Add(time.Duration(i+1) * time.Minute)
		bad := addRuns(t, s, now.Add(-50*time.Second), 5-st.failed, st.failed)
		if i == 3 {
			firedWith = bad
		}
		clock.step(now)
		if err := b.Evaluate(ctx, now); err != nil {
			t.Fatal(err)
		}
		got := state(t, a, m.Name)
		if got.State != st.want || got.Value == nil || math.Abs(*got.Value-float64(st.failed)/5) > 1e-9 {
			t.Fatalf("step %d (%d of 5 failed): state %s, value %v; want %s, %v (error %q)", i, st.failed, got.State, got.Value, st.want, float64(st.failed)/5, got.Error)
		}
	}
	a.Wait()
	b.Wait()

	firings, err := a.Firings(ctx, store.FiringFilter{Monitor: m.Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(firings) != 1 {
		t.Fatalf("%d firings stored, want 1: %+v", len(firings), firings)
	}
	f := firings[0]
	if !f.Started.Equal(t0.Add(4*time.Minute)) || !f.Resolved.Equal(t0.Add(10*time.Minute)) || f.Value != 0.6 || f.ResolvedValue != 0 || f.Threshold != 0.5 {
		t.Errorf("firing %+v", f)
	}
	slices.SortFunc(firedWith, func(x, y trace.TraceID) int { return strings.Compare(x.String(), y.String()) })
	sample := slices.Clone(f.TraceIDs)
	slices.SortFunc(sample, func(x, y trace.TraceID) int { return strings.Compare(x.String(), y.String()) })
	if !slices.Equal(sample, firedWith) {
		t.Errorf("the firing names the runs %v; want the failed runs of its window %v", f.TraceIDs, firedWith)
	}

	// Every attempt is stored: the flaky hook's 500, its timeout and its
	// success for the firing, one success for the resolution; the Slack
	// hook's two successes; its URL's token nowhere.
	type att struct {
		event, target   string
		attempt, status int
		ok              bool
	}
	var atts []att
	for _, d := range f.Deliveries {
		if strings.Contains(d.Target, "secret") || strings.Contains(d.Error, "secret") {
			t.Errorf("a delivery shows the webhook's secret: %+v", d)
		}
		atts = append(atts, att{d.Event, d.Target, d.Attempt, d.Status, d.OK})
	}
	flaky, slack := alert.RedactURL(rc.URL+"/flaky"), alert.RedactURL(rc.URL+"/services/"+secret)
	want := []att{
		{"firing", flaky, 1, 500, false}, {"firing", flaky, 2, 0, false}, {"firing", flaky, 3, 204, true},
		{"firing", slack, 1, 204, true}, {"resolved", flaky, 1, 204, true}, {"resolved", slack, 1, 204, true},
	}
	sortAtts := func(x []att) {
		slices.SortFunc(x, func(p, q att) int {
			return strings.Compare(p.event+p.target+string(rune('0'+p.attempt)), q.event+q.target+string(rune('0'+q.attempt)))
		})
	}
	sortAtts(atts)
	sortAtts(want)
	if !slices.Equal(atts, want) {
		t.Errorf("deliveries\n%+v\nwant\n%+v", atts, want)
	}
	for _, d := range f.Deliveries {
		if d.Attempt == 1 && d.Status == 500 && !strings.Contains(d.Error, "HTTP 500: receiver overloaded") {
			t.Errorf("the 500's error is %q", d.Error)
		}
		if d.Attempt == 2 && d.Target == flaky && !strings.Contains(d.Error, "no answer within") {
			t.Errorf("the timeout's error is %q", d.Error)
		}
	}

	// What the receivers got: one firing and one resolution each, though
	// two collectors evaluated the monitor.
	bodies := rc.got("/flaky")
	if len(bodies) != 2 {
		t.Fatalf("the JSON hook accepted %d bodies, want 2 (firing, resolved)", len(bodies))
	}
	var n alert.Notification
	if err := json.Unmarshal(bodies[0], &n); err != nil {
		t.Fatal(err)
	}
	if n.State != "firing" || n.Monitor != m.Name || n.Value == nil || *n.Value != 0.6 || n.Threshold != 0.5 || n.Resolve != 0.2 || n.Window != "1m0s" ||
		n.FiringID != f.ID || len(n.TraceIDs) != 3 || !strings.HasPrefix(n.Link, "http://127.0.0.1:4318/#/runs?") || !strings.Contains(n.Link, "tag=env%3Aprod") {
		t.Errorf("firing notification %s", bodies[0])
	}
	if err := json.Unmarshal(bodies[1], &n); err != nil || n.State != "resolved" || *n.Value != 0 {
		t.Errorf("resolved notification %s (%v)", bodies[1], err)
	}
	sl := rc.got("/services/" + secret)
	if len(sl) != 2 {
		t.Fatalf("the Slack hook accepted %d bodies, want 2", len(sl))
	}
	var sb struct {
		Text   string           `json:"text"`
		Blocks []map[string]any `json:"blocks"`
	}
	if err := json.Unmarshal(sl[0], &sb); err != nil || !strings.Contains(sb.Text, "prod-errors is firing") || len(sb.Blocks) != 3 || sb.Blocks[0]["type"] != "section" {
		t.Errorf("Slack body %s (%v)", sl[0], err)
	}

	// The API's view redacts the URL.
	st := state(t, a, m.Name)
	for _, h := range st.Monitor.Webhooks {
		if strings.Contains(h.URL, "secret") {
			t.Errorf("Statuses shows the webhook URL %s", h.URL)
		}
	}
	// Writing the redacted definition back keeps the real URL.
	if err := a.Put(ctx, st.Monitor); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Get(ctx, m.Name); err != nil || got.Webhooks[1].URL != m.Webhooks[1].URL {
		t.Errorf("after a redacted round trip the URL is %v (%v)", got.Webhooks, err)
	}
}

// TestRedirectNotFollowed: a webhook that redirects fails (and is not
// retried); the redirect's target gets nothing.
func TestRedirectNotFollowed(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	rc := newReceiver(t)
	e := newEngine(t, s, newFakeClock(t0))
	m := alert.Monitor{Name: "runs", Metric: alert.RunsPerMinute, Window: alert.Duration(time.Minute), Threshold: 1, Webhooks: []alert.Webhook{{URL: rc.URL + "/moved"}}}
	if err := e.Put(ctx, m); err != nil {
		t.Fatal(err)
	}
	addRuns(t, s, t0.Add(-30*time.Second), 3, 0)
	if err := e.Evaluate(ctx, t0); err != nil {
		t.Fatal(err)
	}
	e.Wait()
	fs, err := e.Firings(ctx, store.FiringFilter{})
	if err != nil || len(fs) != 1 || len(fs[0].Deliveries) != 1 {
		t.Fatalf("firings %+v, %v; want one with one delivery", fs, err)
	}
	if d := fs[0].Deliveries[0]; d.OK || d.Status != http.StatusFound || !strings.Contains(d.Error, "redirects are not followed") {
		t.Errorf("delivery %+v", d)
	}
	if n := len(rc.got("/flaky")); n != 0 {
		t.Errorf("the redirect's target got %d bodies", n)
	}
}

func TestScoreAndSourceMetrics(t *testing.T) {
	ctx := context.Background()
	sc := openStore(t) // SQLite keeps scores (store.Scorer)
	var drops struct {
		sync.Mutex
		v float64
	}
	e, err := alert.New(alert.Options{Store: sc, Sources: map[string]alert.Source{"rule_drops": func(_ context.Context, w time.Duration) (float64, error) {
		drops.Lock()
		defer drops.Unlock()
		if w != 5*time.Minute {
			t.Errorf("the source got the window %s, want 5m", w)
		}
		return drops.v, nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, m := range []alert.Monitor{
		{Name: "helpful", Metric: alert.ScorePassRate, Score: "helpful", Window: alert.Duration(time.Hour), Op: "<", Threshold: 0.8},
		{Name: "relevance", Metric: alert.ScoreMean, Score: "relevance", Window: alert.Duration(time.Hour), Op: "<", Threshold: 0.5},
		{Name: "drops", Metric: "rule_drops", Window: alert.Duration(5 * time.Minute), Threshold: 10},
	} {
		if err := e.Put(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Put(ctx, alert.Monitor{Name: "x", Metric: "no_such_source", Window: alert.Duration(time.Minute)}); err == nil {
		t.Error("a monitor of an unregistered source was accepted")
	}
	bad := trace.NewTraceID()
	var scores []store.Score
	for i := range 10 {
		v := 1.0
		id := trace.NewTraceID()
		if i < 3 {
			v, id = 0, bad
		}
		scores = append(scores, store.Score{TraceID: id, Name: "helpful", Kind: store.ScoreBoolean, Value: v, Source: store.SourceOnline, Time: t0.Add(-time.Minute)},
			store.Score{TraceID: id, Name: "relevance", Kind: store.ScoreNumeric, Value: float64(i) / 10, Source: store.SourceEval, Time: t0.Add(-time.Minute)})
	}
	scores = append(scores, store.Score{TraceID: bad, Name: "helpful", Kind: store.ScoreBoolean, Value: 0, Source: store.SourceHuman, Time: t0.Add(-2 * time.Hour)}) // outside the window
	if _, err := sc.AddScores(ctx, scores); err != nil {
		t.Fatal(err)
	}
	drops.v = 12
	if err := e.Evaluate(ctx, t0); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		v     float64
		state string
	}{"helpful": {0.7, alert.StateFiring}, "relevance": {0.45, alert.StateFiring}, "drops": {12, alert.StateFiring}}
	sts, err := e.Statuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		w := want[st.Monitor.Name]
		if st.Value == nil || math.Abs(*st.Value-w.v) > 1e-9 || st.State != w.state {
			t.Errorf("%s: value %v, state %s (%s); want %v, %s", st.Monitor.Name, st.Value, st.State, st.Error, w.v, w.state)
		}
	}
	fs, _ := e.Firings(ctx, store.FiringFilter{Monitor: "helpful"})
	if len(fs) != 1 || !slices.Equal(fs[0].TraceIDs, []trace.TraceID{bad}) {
		t.Errorf("the pass rate's firing names %+v; want the failing trace %s", fs, bad)
	}
	drops.v = 3
	if err := e.Evaluate(ctx, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if st := state(t, e, "drops"); st.State != alert.StateOK || st.Firing != nil {
		t.Errorf("drops after the source fell to 3: %+v", st)
	}
}

// TestNoData: a window without runs has no error rate; it does not fire,
// and it resolves a firing monitor.
func TestNoData(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	e := newEngine(t, s, newFakeClock(t0))
	if err := e.Put(ctx, alert.Monitor{Name: "errs", Metric: alert.ErrorRate, Filter: "tag:env:prod", Window: alert.Duration(time.Minute), Threshold: 0.1, MinRuns: 2}); err != nil {
		t.Fatal(err)
	}
	addRuns(t, s, t0.Add(-30*time.Second), 0, 1) // one failed run: under MinRuns
	if err := e.Evaluate(ctx, t0); err != nil {
		t.Fatal(err)
	}
	if st := state(t, e, "errs"); st.State != alert.StateNoData || st.Value != nil {
		t.Errorf("with one run under min_runs 2: %+v", st)
	}
	addRuns(t, s, t0.Add(30*time.Second), 0, 2)
	e.Evaluate(ctx, t0.Add(time.Minute))
	if st := state(t, e, "errs"); st.State != alert.StateFiring {
		t.Errorf("with three failed runs: %+v", st)
	}
	e.Evaluate(ctx, t0.Add(5*time.Minute))
	if st := state(t, e, "errs"); st.State != alert.StateNoData || st.Firing != nil {
		t.Errorf("after the runs stopped: %+v", st)
	}
}
