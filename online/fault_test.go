package online_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/server"
)

// 1,000 traces end at once while the judge hangs: ingest answers every
// request and stores every trace (the collector never waits for
// evaluation); the settling set (8), the queue (8) and the workers (2)
// take what they can and the rest is dropped and counted, so that once the judge answers, every
// trace is either evaluated (and judged once) or counted as dropped,
// exactly.
func TestThousandTracesSlowJudge(t *testing.T) {
	t.Setenv("LOUPE_TEST_JUDGE_KEY", "judge-key")
	gate := make(chan struct{})
	judge := newJudge(t, 0, gate)
	st := openSQLite(t, dbPath(t))
	sc := scorerFor(st)
	eng := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, judgeRules(judge.URL, "")),
		QueueSize: 8, Workers: 2})
	ts := collector(t, st, eng, server.Options{})
	for k := range 10 {
		answer := func(i int) string { return fmt.Sprintf("Order %d has shipped.", 100*k+i) }
		td := agentTraces(byte(10+k), 100, func(int) []call { return nil }, answer)
		postOTLP(t, ts.URL, td) // answered while the judge hangs
	}
	page, err := st.List(context.Background(), storeList(1000))
	if err != nil || len(page.Traces) != 1000 {
		t.Fatalf("%d traces stored (%v), want 1000", len(page.Traces), err)
	}
	if d, p := eng.Dropped(), eng.Pending(); d+int64(p) != 1000 || p > 8+8+1+2*32 {
		t.Errorf("dropped %d + pending %d, want 1000 with at most 8 settling, 8 queued, 1 on its way to the queue and 2 batches of 32 in the workers", d, p)
	}
	close(gate)
	waitFor(t, "the queue to drain", func() bool { return eng.Pending() == 0 })
	rs, err := eng.Rules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s := rs[0].Stats
	if s.Evaluated+s.Dropped != 1000 || s.Dropped != eng.Dropped() || s.Errors != 0 {
		t.Errorf("evaluated %d + dropped %d (engine: %d), errors %d: want 1000", s.Evaluated, s.Dropped, eng.Dropped(), s.Errors)
	}
	if n := judge.total.Load(); n != s.Evaluated {
		t.Errorf("%d judge calls for %d evaluated traces", n, s.Evaluated)
	}
	if n := len(scoresOf(t, sc, "answer-quality")); int64(n) != 3*s.Evaluated {
		t.Errorf("%d scores for %d evaluated traces", n, s.Evaluated)
	}
	for k, n := range judge.calls() {
		if n != 1 {
			t.Errorf("%q judged %d times", k, n)
		}
	}
}

// A restart on the same SQLite file: the first server evaluates some
// traces and stops with others queued; traces end while no server
// evaluates; the second server catches up from the checkpoint. Every
// trace is judged exactly once, and none is skipped.
func TestRestartCatchesUpWithoutJudgingTwice(t *testing.T) {
	t.Setenv("LOUPE_TEST_JUDGE_KEY", "judge-key")
	judge := newJudge(t, 40*time.Millisecond, nil)
	path := dbPath(t)
	rules := judgeRules(judge.URL, "")
	answer := func(i int) string { return fmt.Sprintf("Order %d has shipped.", i) }
	none := func(int) []call { return nil }

	st1 := openSQLite(t, path)
	sc := scorerFor(st1)
	eng1, err := online.New(online.Options{Store: st1, Scores: sc, Config: parseRules(t, rules), Workers: 1, QueueSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	ts1 := collector(t, st1, eng1, server.Options{})
	postOTLP(t, ts1.URL, agentTraces(30, 30, none, answer))
	waitFor(t, "3 traces scored", func() bool { return len(scoresOf(t, sc, "answer-quality")) >= 9 })
	if err := eng1.Close(context.Background()); err != nil { // the evaluation in flight finishes
		t.Fatal(err)
	}
	first := len(scoresOf(t, sc, "answer-quality")) / 3
	if first >= 30 {
		t.Fatalf("all 30 traces were evaluated before the stop; the test needs some queued")
	}
	// While no engine runs: 5 more traces end.
	plain := collector(t, st1, nil, server.Options{})
	postOTLP(t, plain.URL, agentTraces(31, 5, none, func(i int) string { return fmt.Sprintf("Order %d (late) has shipped.", i) }))
	ts1.Close()
	plain.Close()
	if err := st1.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := openSQLite(t, path)
	sc2 := reopened(sc, st2)
	eng2 := startEngine(t, online.Options{Store: st2, Scores: sc2, Config: parseRules(t, rules), Workers: 2})
	collector(t, st2, eng2, server.Options{})
	waitFor(t, "35 traces scored", func() bool { return len(scoresOf(t, sc2, "answer-quality")) == 35*3 })
	waitFor(t, "the catch-up to end", func() bool { return eng2.Pending() == 0 })
	calls := judge.calls()
	if len(calls) != 35 {
		t.Errorf("%d answers judged, want 35", len(calls))
	}
	for k, n := range calls {
		if n != 1 {
			t.Errorf("%q judged %d times", k, n)
		}
	}
	t.Logf("first server evaluated %d of 30; the second caught up on the rest and the 5 that ended in between", first)
}
