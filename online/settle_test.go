package online_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// clock is a controllable clock for Options.Now: it moves only when the
// test advances it, so whether a trace has settled is decided by the
// test, not by how fast the machine is.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// spanner writes one agent run's spans as separate OTLP requests, as the
// OpenTelemetry SDK's SimpleSpanProcessor exports them: the root
// invoke_agent span (its run.end) in one, each execute_tool span in its
// own.
type spanner struct {
	id   trace.TraceID
	t0   time.Time
	root pcommon.SpanID
	n    int // tool spans written
}

func newSpanner(salt byte, i int) *spanner {
	return &spanner{id: traceID(salt, i), t0: time.Now().Add(-time.Minute), root: pcommon.SpanID{1, salt, byte(i), 1}}
}

// rootSpan is the run's root span, ended.
func (s *spanner) rootSpan() ptrace.Traces {
	td, spans := s.traces()
	root := spans.AppendEmpty()
	root.SetTraceID(pcommon.TraceID(s.id))
	root.SetSpanID(s.root)
	root.SetName("invoke_agent support")
	root.SetStartTimestamp(pcommon.NewTimestampFromTime(s.t0))
	root.SetEndTimestamp(pcommon.NewTimestampFromTime(s.t0.Add(30 * time.Second)))
	a := root.Attributes()
	a.PutStr("gen_ai.operation.name", "invoke_agent")
	a.PutStr("gen_ai.agent.name", "support")
	a.PutStr("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"Where is order 17?"}]}]`)
	a.PutStr("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"Order 17 has shipped."}],"finish_reason":"stop"}]`)
	return td
}

// tool is the run's next execute_tool span, a child of the root, each
// after the one before (within the root's half minute).
func (s *spanner) tool(c call) ptrace.Traces {
	td, spans := s.traces()
	s.n++
	sp := spans.AppendEmpty()
	sp.SetTraceID(pcommon.TraceID(s.id))
	sp.SetSpanID(pcommon.SpanID{2, s.root[1], s.root[2], byte(s.n)})
	sp.SetParentSpanID(s.root)
	sp.SetName("execute_tool " + c.tool)
	st := s.t0.Add(time.Duration(s.n) * 100 * time.Millisecond)
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(st))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(st.Add(50 * time.Millisecond)))
	a := sp.Attributes()
	a.PutStr("gen_ai.operation.name", "execute_tool")
	a.PutStr("gen_ai.tool.name", c.tool)
	a.PutStr("gen_ai.tool.call.arguments", c.args)
	a.PutStr("gen_ai.tool.call.result", `{"status":"shipped"}`)
	return td
}

func (s *spanner) traces() (ptrace.Traces, ptrace.SpanSlice) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-bot")
	return td, rs.ScopeSpans().AppendEmpty().Spans()
}

// scoresFor returns rule's online scores of trace id, by name.
func scoresFor(t testing.TB, sc store.Scorer, rule string, id trace.TraceID) map[string]store.Score {
	t.Helper()
	out := map[string]store.Score{}
	for _, s := range scoresOf(t, sc, rule) {
		if s.TraceID == id {
			out[s.Name] = s
		}
	}
	return out
}

var (
	lookup = call{"lookup_order", `{"id":17}`}
	notify = call{"notify", `{"to":"customer"}`}
)

// The root's run.end is committed first and its children arrive later,
// each in its own request, within the quiet period (as the OTel JS SDK's
// SimpleSpanProcessor sends them): the trace is graded once it settles,
// and the rule's tool-trajectory grader sees the children.
func TestLateChildrenAreGraded(t *testing.T) {
	const settle = 200 * time.Millisecond
	clk := newClock()
	st := openSQLite(t, dbPath(t))
	sc := scorerFor(st)
	eng := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, lookupRule), Settle: settle, Now: clk.Now})
	ts := collector(t, st, eng, server.Options{})

	run := newSpanner(40, 0)
	postOTLP(t, ts.URL, run.rootSpan())
	if p := eng.Pending(); p != 1 {
		t.Fatalf("pending %d after the root ended, want 1 (settling)", p)
	}
	clk.Advance(settle / 2)
	postOTLP(t, ts.URL, run.tool(lookup))
	clk.Advance(settle / 2) // the root's own quiet period is over; the child's is not
	postOTLP(t, ts.URL, run.tool(notify))
	if got := scoresFor(t, sc, "order-lookup", run.id); len(got) != 0 {
		t.Fatalf("graded before it settled (the clock has not moved past the last child): %v", got)
	}
	clk.Advance(settle)
	waitFor(t, "the run's scores", func() bool { return len(scoresFor(t, sc, "order-lookup", run.id)) == 4 })
	got := scoresFor(t, sc, "order-lookup", run.id)
	if s := got["order-lookup/tool-trajectory"]; s.Value != 1 {
		t.Errorf("tool-trajectory %v, want 1 (both late children seen): %s", s.Value, s.Comment)
	}
	if got["order-lookup/pass"].Value != 1 {
		t.Errorf("pass %+v", got["order-lookup/pass"])
	}
	waitFor(t, "nothing pending", func() bool { return eng.Pending() == 0 })
	rs, err := eng.Rules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := rs[0].Stats; s.Matched != 1 || s.Evaluated != 1 || s.Dropped != 0 || s.Errors != 0 {
		t.Errorf("stats %+v: want the run matched and evaluated once", s)
	}
}

// A trace that keeps receiving records after its root ended is not
// graded while they come, however long past its root's end, and is
// graded, with all of them, once they stop.
//
// To see the engine decide, each step commits a record of the long
// trace and a probe run (root and tools in one request), half a quiet
// period later another record of the long trace, and moves the clock so
// that the probe has settled and the long trace, whose last record is
// half a quiet period old, has not (though its root ended long before). The single worker grades in queue order, so
// once the probe is scored, the long trace would have been scored too
// had the engine taken it.
func TestContinuousTraceGradedWhenRecordsStop(t *testing.T) {
	const settle = 200 * time.Millisecond
	clk := newClock()
	st := openSQLite(t, dbPath(t))
	sc := scorerFor(st)
	eng := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, lookupRule), Settle: settle, Now: clk.Now, Workers: 1})
	ts := collector(t, st, eng, server.Options{})

	long := newSpanner(41, 0)
	postOTLP(t, ts.URL, long.rootSpan())
	postOTLP(t, ts.URL, long.tool(lookup))
	const steps = 5
	check := call{"check_status", `{"id":17}`}
	for k := range steps {
		postOTLP(t, ts.URL, long.tool(check))
		probe := newSpanner(42, k)
		td := probe.rootSpan()
		probe.tool(lookup).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		probe.tool(notify).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		postOTLP(t, ts.URL, td)
		clk.Advance(settle / 2)
		postOTLP(t, ts.URL, long.tool(check))
		clk.Advance(settle / 2)
		waitFor(t, "the probe's scores", func() bool { return len(scoresFor(t, sc, "order-lookup", probe.id)) == 4 })
		if got := scoresFor(t, sc, "order-lookup", long.id); len(got) != 0 {
			t.Fatalf("step %d: the trace was graded while it still received records: %v", k, got)
		}
	}
	postOTLP(t, ts.URL, long.tool(notify)) // the last record
	clk.Advance(settle)
	waitFor(t, "the long trace's scores", func() bool { return len(scoresFor(t, sc, "order-lookup", long.id)) == 4 })
	got := scoresFor(t, sc, "order-lookup", long.id)
	if s := got["order-lookup/tool-trajectory"]; s.Value != 1 {
		t.Errorf("tool-trajectory %v, want 1 (lookup_order ... notify, the last record, seen): %s", s.Value, s.Comment)
	}
	tr, err := st.Trace(context.Background(), long.id)
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.Summary.ToolCalls; n != 2*steps+2 {
		t.Errorf("stored %d tool calls, want %d", n, 2*steps+2)
	}
	waitFor(t, "nothing pending", func() bool { return eng.Pending() == 0 })
	rs, err := eng.Rules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := rs[0].Stats; s.Evaluated != steps+1 || s.Dropped != 0 || s.Errors != 0 {
		t.Errorf("stats %+v: want %d evaluated, each once", s, steps+1)
	}
}

// A trace still settling when the engine stops holds the checkpoint back
// (it counts as queued), so that the next engine on the store catches up
// on it; and the settling set is bounded by QueueSize, a trace that ends
// while it is full dropped and counted.
func TestSettlingHoldsCheckpointAndIsBounded(t *testing.T) {
	clk := newClock()
	path := dbPath(t)
	st := openSQLite(t, path)
	sc := scorerFor(st)
	eng, err := online.New(online.Options{Store: st, Scores: sc, Config: parseRules(t, lookupRule), Settle: time.Minute, Now: clk.Now, QueueSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	ts := collector(t, st, eng, server.Options{})
	ended := clk.Now()
	runs := []*spanner{newSpanner(43, 0), newSpanner(43, 1), newSpanner(43, 2)}
	for _, r := range runs {
		td := r.rootSpan()
		r.tool(lookup).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		r.tool(notify).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		postOTLP(t, ts.URL, td)
	}
	if p, d := eng.Pending(), eng.Dropped(); p != 2 || d != 1 {
		t.Errorf("pending %d, dropped %d: want 2 settling (QueueSize) and 1 dropped", p, d)
	}
	clk.Advance(30 * time.Second) // not settled: the settle is a minute
	if err := eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m, err := st.(store.Settings).Settings(context.Background(), online.CheckpointKey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := time.Parse(time.RFC3339Nano, m[online.CheckpointKey])
	if err != nil {
		t.Fatalf("checkpoint %q: %v", m[online.CheckpointKey], err)
	}
	if cp.After(ended) {
		t.Errorf("checkpoint %s is past %s, when the settling traces ended", cp, ended)
	}
	if n := len(scoresOf(t, sc, "order-lookup")); n != 0 {
		t.Fatalf("%d scores before any trace settled", n)
	}

	// The next engine catches up from the checkpoint: every run, the
	// dropped one too, is graded once.
	eng2 := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, lookupRule), Settle: -1})
	waitFor(t, "the three runs scored", func() bool { return len(scoresOf(t, sc, "order-lookup")) == 3*4 })
	waitFor(t, "the catch-up to end", func() bool { return eng2.Pending() == 0 })
	for _, r := range runs {
		if got := scoresFor(t, sc, "order-lookup", r.id); got["order-lookup/pass"].Value != 1 {
			t.Errorf("run %s: %v", r.id, got)
		}
	}
}

// The rules file's settle: is the quiet period when Options.Settle is
// zero; Options.Settle beyond MaxSettle is refused.
func TestRulesFileSettle(t *testing.T) {
	clk := newClock()
	st := openSQLite(t, dbPath(t))
	sc := scorerFor(st)
	eng := startEngine(t, online.Options{Store: st, Scores: sc, Config: parseRules(t, "settle: 150ms\n"+lookupRule), Now: clk.Now})
	ts := collector(t, st, eng, server.Options{})
	run := newSpanner(44, 0)
	postOTLP(t, ts.URL, run.rootSpan())
	postOTLP(t, ts.URL, run.tool(lookup))
	postOTLP(t, ts.URL, run.tool(notify))
	if p := eng.Pending(); p != 1 {
		t.Fatalf("pending %d, want the run settling", p)
	}
	clk.Advance(150 * time.Millisecond) // the file's period, far short of DefaultSettle
	waitFor(t, "the run's scores", func() bool { return len(scoresFor(t, sc, "order-lookup", run.id)) == 4 })

	if _, err := online.New(online.Options{Store: st, Settle: online.MaxSettle + time.Second}); err == nil || !strings.Contains(err.Error(), "Settle") {
		t.Errorf("Settle beyond MaxSettle: err = %v", err)
	}
}

// BenchmarkEnded is the collector's cost of telling the engine about a
// commit: 64 traces of 16 records each, every one of them settling (the
// set full at DefaultQueueSize) so that each trace's records restart its
// wait. Reported per commit.
func BenchmarkEnded(b *testing.B) {
	clk := newClock()
	st := openSQLite(b, dbPath(b))
	eng := startEngine(b, online.Options{Store: st, Scores: scorerFor(st), Config: parseRules(b, lookupRule), Settle: online.MaxSettle, Now: clk.Now, SweepEvery: -1})
	var ends []trace.Record
	for i := range online.DefaultQueueSize {
		ends = append(ends, trace.Record{TraceID: traceID(45, i), SpanID: trace.SpanID{1}, Type: trace.TypeRunEnd})
	}
	eng.Ended(ends)
	if p := eng.Pending(); p != online.DefaultQueueSize {
		b.Fatalf("pending %d", p)
	}
	var commit []trace.Record
	for i := range 64 {
		for k := range 16 {
			commit = append(commit, trace.Record{TraceID: traceID(45, i*16), SpanID: trace.SpanID{2, byte(k)}, ParentID: trace.SpanID{1}, Type: trace.TypeToolEnd})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		eng.Ended(commit)
	}
}
