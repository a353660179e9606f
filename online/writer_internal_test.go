package online

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// countingScorer is a SQLite store's own Scorer that counts its
// AddScores calls and, when gate is set, holds each call until gate is
// closed (entered receives one value per call that waits).
type countingScorer struct {
	store.Scorer
	mu      sync.Mutex
	calls   []int // scores per call
	gate    chan struct{}
	entered chan struct{}
}

func (c *countingScorer) AddScores(ctx context.Context, scores []store.Score) ([]store.Score, error) {
	c.mu.Lock()
	c.calls = append(c.calls, len(scores))
	c.mu.Unlock()
	if c.gate != nil {
		c.entered <- struct{}{}
		<-c.gate
	}
	return c.Scorer.AddScores(ctx, scores)
}

func (c *countingScorer) callSizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.calls...)
}

const writerRules = `
rules:
  - name: a
    assertions:
      - type: contains
        value: shipped
  - name: b
    assertions:
      - type: contains
        value: order
`

// writerEngine is an engine over a fresh SQLite store with the rules a
// and b, its scores going through a countingScorer.
func writerEngine(t *testing.T, gate chan struct{}) (*Engine, *countingScorer, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg, err := Parse("rules.yaml", []byte(writerRules))
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingScorer{Scorer: st, gate: gate, entered: make(chan struct{}, 16)}
	e, err := New(Options{Store: st, Scores: cs, Config: cfg, SweepEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e, cs, st
}

// gradedBatch is n traces (ids from salt) graded by rule: its three
// scores each, as resultScores makes them, and the traces registered as
// pending, as offer does.
func gradedBatch(e *Engine, rule string, salt byte, n int, since time.Time) ([]graded, []trace.TraceID) {
	var gs []graded
	var ids []trace.TraceID
	for i := range n {
		id := trace.TraceID{salt, byte(i), 0xbe}
		ids = append(ids, id)
		var scores []store.Score
		for _, name := range []string{"contains", "score", "pass"} {
			kind := store.ScoreNumeric
			if name == "pass" {
				kind = store.ScoreBoolean
			}
			sn := scoreName(rule, name)
			scores = append(scores, store.Score{ID: scoreID(rule, id, sn), TraceID: id, Name: sn, Kind: kind, Value: 1,
				Source: store.SourceOnline, Author: "loupe-online", Rule: rule, Time: since})
		}
		gs = append(gs, graded{id: id, scores: scores})
	}
	return gs, ids
}

func pendAll(e *Engine, ids []trace.TraceID, since time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		e.addPending(item{id: id, since: since})
	}
}

// The scores of several batches of two rules, handed while the writer
// waits, are committed in one AddScores call (one transaction); until
// then the traces stay pending (the checkpoint stays before them), are
// not counted as evaluated, and count as scored, so that they are not
// graded again.
func TestWriterSharesTransactions(t *testing.T) {
	e, cs, st := writerEngine(t, nil)
	e.delay = [2]time.Duration{time.Hour, time.Hour} // only Close flushes
	since := time.Now().Add(-time.Minute)
	var all []trace.TraceID
	for k := range 3 {
		ga, ids := gradedBatch(e, "a", byte(k), 32, since)
		gb, _ := gradedBatch(e, "b", byte(k), 32, since)
		pendAll(e, ids, since)
		e.hand(e.rules["a"], ga, false)
		e.hand(e.rules["b"], gb, false)
		e.writes <- scoreWrite{release: ids}
		all = append(all, ids...)
	}
	if n := e.Pending(); n != 96 {
		t.Errorf("%d traces pending before the commit, want 96", n)
	}
	if cp := e.checkpoint(); cp.After(since) {
		t.Errorf("checkpoint %v passed traces whose scores are not committed (since %v)", cp, since)
	}
	done, err := e.scored(context.Background(), "a", all)
	if err != nil || len(done) != 96 {
		t.Errorf("scored: %d of 96 traces (%v); the writer's must count", len(done), err)
	}
	if n := e.rules["a"].evaluated.Load(); n != 0 {
		t.Errorf("%d traces counted evaluated before the commit", n)
	}
	if got := cs.callSizes(); len(got) != 0 {
		t.Fatalf("AddScores called %v before the delay or Close", got)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := cs.callSizes(); len(got) != 1 || got[0] != 2*96*3 {
		t.Errorf("AddScores calls of %v scores, want one of %d", got, 2*96*3)
	}
	if n := e.Pending(); n != 0 {
		t.Errorf("%d traces pending after the commit", n)
	}
	for _, r := range []string{"a", "b"} {
		if n := e.rules[r].evaluated.Load(); n != 96 {
			t.Errorf("rule %s: %d evaluated, want 96", r, n)
		}
		if n := countScores(t, st, r); n != 96*3 {
			t.Errorf("rule %s: %d scores stored, want %d", r, n, 96*3)
		}
	}
}

// A judge's scores are committed at once; while the commit waits for the
// store, the batch is pending and the checkpoint stays before it.
func TestWriterReleasesAfterCommit(t *testing.T) {
	gate := make(chan struct{})
	e, _, st := writerEngine(t, gate)
	since := time.Now().Add(-time.Minute)
	gs, ids := gradedBatch(e, "a", 7, 4, since)
	pendAll(e, ids, since)
	e.hand(e.rules["a"], gs, true)
	e.writes <- scoreWrite{release: ids}
	select {
	case <-scorerOf(e).entered:
	case <-time.After(60 * time.Second): // a hang, not a timing claim
		t.Fatal("a judge's scores were not committed at once")
	}
	if n := e.Pending(); n != 4 {
		t.Errorf("%d traces pending while their scores are being committed, want 4", n)
	}
	if cp := e.checkpoint(); cp.After(since) {
		t.Errorf("checkpoint %v passed traces whose scores are not committed (since %v)", cp, since)
	}
	close(gate)
	deadline := time.Now().Add(60 * time.Second)
	for e.Pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the batch was not released after its commit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := countScores(t, st, "a"); n != 12 {
		t.Errorf("%d scores stored, want 12", n)
	}
	if n := e.rules["a"].evaluated.Load(); n != 4 {
		t.Errorf("%d evaluated, want 4", n)
	}
}

func scorerOf(e *Engine) *countingScorer { return e.scores.(*countingScorer) }

// When a rule's scores cannot be stored (a name another source gave
// another kind), the other rule's scores of the same commit are stored
// all the same, and only the failing rule counts errors; as the engine
// was stopping, the batch stays pending (the checkpoint stays before it,
// and a restart grades for rule b again).
func TestWriterOneRuleFails(t *testing.T) {
	e, _, st := writerEngine(t, nil)
	ctx := context.Background()
	if _, err := st.AddScores(ctx, []store.Score{{TraceID: trace.TraceID{9}, Name: "b/pass", Kind: store.ScoreCategorical, Category: "x", Source: store.SourceAPI}}); err != nil {
		t.Fatal(err)
	}
	e.delay = [2]time.Duration{time.Hour, time.Hour}
	since := time.Now()
	ga, ids := gradedBatch(e, "a", 1, 5, since)
	gb, _ := gradedBatch(e, "b", 1, 5, since)
	pendAll(e, ids, since)
	e.hand(e.rules["a"], ga, false)
	e.hand(e.rules["b"], gb, false)
	e.writes <- scoreWrite{release: ids}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.Pending(); n != 5 {
		t.Errorf("%d traces pending after a failed commit at Close, want 5", n)
	}
	if a, b := countScores(t, st, "a"), countScores(t, st, "b"); a != 15 || b != 0 {
		t.Errorf("scores stored: rule a %d (want 15), rule b %d (want 0)", a, b)
	}
	if ev, errs := e.rules["a"].evaluated.Load(), e.rules["a"].errors.Load(); ev != 5 || errs != 0 {
		t.Errorf("rule a: %d evaluated, %d errors; want 5, 0", ev, errs)
	}
	if ev, errs := e.rules["b"].evaluated.Load(), e.rules["b"].errors.Load(); ev != 0 || errs != 5 {
		t.Errorf("rule b: %d evaluated, %d errors; want 0, 5", ev, errs)
	}
}

func countScores(t *testing.T, sc store.Scorer, rule string) int {
	t.Helper()
	p, err := sc.Scores(context.Background(), store.ScoreFilter{Rule: rule, Source: store.SourceOnline, Limit: store.MaxScoreLimit})
	if err != nil {
		t.Fatal(err)
	}
	return len(p.Scores)
}
