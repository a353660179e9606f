package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/tool"
	"github.com/loupe-dev/loupe/trace"
)

// finishOrder makes the tools of one parallel turn finish in a chosen
// order, whatever order the scheduler runs them in: the call at position
// order[k] returns only after the one at order[k-1] has, after a random
// delay of its own. Every call also waits until all have started, so that
// they really overlap.
type finishOrder struct {
	started sync.WaitGroup
	all     chan struct{}
	turn    []chan struct{} // turn[i] is closed when call i may return
	next    map[int]int     // the call that may return after call i
	delays  []time.Duration
}

func newFinishOrder(order []int, rng *rand.Rand) *finishOrder {
	f := &finishOrder{all: make(chan struct{}), next: map[int]int{}}
	f.started.Add(len(order))
	go func() { f.started.Wait(); close(f.all) }()
	for range order {
		f.turn = append(f.turn, make(chan struct{}))
		f.delays = append(f.delays, time.Duration(rng.IntN(500))*time.Microsecond)
	}
	close(f.turn[order[0]])
	for k := 1; k < len(order); k++ {
		f.next[order[k-1]] = order[k]
	}
	return f
}

// wait blocks call i until it may return; done lets the next one go.
func (f *finishOrder) wait(ctx context.Context, i int) (done func(), err error) {
	f.started.Done()
	for _, c := range []chan struct{}{f.all, f.turn[i]} {
		select {
		case <-c:
		case <-ctx.Done():
			return func() {}, ctx.Err()
		}
	}
	time.Sleep(f.delays[i])
	return func() {
		if n, ok := f.next[i]; ok {
			close(f.turn[n])
		}
	}, nil
}

type authIn struct {
	I int `json:"i"` // the call's position in its turn
}

// authTools are the tools of the report: generateToken fails and
// auditLog panics, so that errors and panics are ordered too.
func authTools(f **finishOrder) *agent.Toolbox {
	mk := func(name string, body func() (string, error)) agent.Tool {
		return tool.Func(name, "", func(ctx context.Context, in authIn) (string, error) {
			done, err := (*f).wait(ctx, in.I)
			defer done() // even when the tool panics
			if err != nil {
				return "", err
			}
			return body()
		})
	}
	return agent.NewToolbox(
		mk("checkCredentials", func() (string, error) { return "ok", nil }),
		mk("generateToken", func() (string, error) { return "", fmt.Errorf("token service unavailable") }),
		mk("auditLog", func() (string, error) { panic("audit log is full") }),
	)
}

const authScript = `
model: auth
turns:
  - tool_calls:
      - {name: checkCredentials, input: {i: 0}}
      - {name: generateToken, input: {i: 1}}
      - {name: auditLog, input: {i: 2}}
    usage: {input_tokens: 10, output_tokens: 5}
  - tool_calls:
      - {name: generateToken, input: {i: 0}}
      - {name: checkCredentials, input: {i: 1}}
      - {name: auditLog, input: {i: 2}}
    usage: {input_tokens: 20, output_tokens: 5}
  - answer: done
`

// normalise returns recs as JSON lines with the ids replaced by their
// order of appearance and the times and durations zeroed: what must be
// the same in every run of a script.
func normalise(recs []trace.Record) string {
	ids := map[trace.SpanID]trace.SpanID{}
	id := func(s trace.SpanID) trace.SpanID {
		if s.IsZero() {
			return s
		}
		n, ok := ids[s]
		if !ok {
			n[7] = byte(len(ids) + 1)
			n[6] = byte((len(ids) + 1) >> 8)
			ids[s] = n
		}
		return n
	}
	var b strings.Builder
	for _, r := range recs {
		r.TraceID = trace.TraceID{}
		r.SpanID, r.ParentID = id(r.SpanID), id(r.ParentID)
		r.Time, r.Duration = time.Time{}, 0
		j, err := json.Marshal(r)
		if err != nil {
			panic(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestParallelToolCallsAreRecordedInCallOrder runs the same scripted run,
// with tools running in parallel and finishing in a random order after
// random delays, many times at GOMAXPROCS 1 and 4: its trace, span tree,
// stats and results must be the same every time, in the order the model
// asked for the calls, while the calls' times show that they overlapped.
func TestParallelToolCallsAreRecordedInCallOrder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	hook := agent.HookFunc(func(context.Context, *trace.ExecutionContext, *agent.HookEvent) error { return nil })
	var first string
	var outOfOrder int
	for _, procs := range []int{1, 4} {
		prev := runtime.GOMAXPROCS(procs)
		for run := range 25 {
			var f *finishOrder
			orders := [][]int{rng.Perm(3), rng.Perm(3)}
			if run == 0 {
				orders[0] = []int{2, 1, 0} // the last call first
			}
			turn := 0
			// A fresh finishing order for each turn, set by the hook
			// before the model's turn is played.
			setup := agent.HookFunc(func(_ context.Context, _ *trace.ExecutionContext, ev *agent.HookEvent) error {
				if ev.Point == agent.BeforeModel && turn < len(orders) {
					f = newFinishOrder(orders[turn], rng)
					turn++
				}
				return nil
			})
			loop := &agent.ReAct{Model: model(t, authScript), Tools: authTools(&f)}
			exec := &agent.Executor{Tracer: newTracer(), Hooks: []agent.Hook{setup, hook}, Limits: agent.Limits{Timeout: time.Minute}}
			res := exec.Run(context.Background(), loop, "log in")
			if res.Err != nil || res.Answer != "done" {
				t.Fatalf("GOMAXPROCS %d run %d: %q %v", procs, run, res.Answer, res.Err)
			}
			got := normalise(res.Records)
			if first == "" {
				first = got
				checkAuthTrace(t, res)
			} else if got != first {
				t.Fatalf("GOMAXPROCS %d run %d (finishing orders %v): the trace differs from the first run's:\n%s\nfirst:\n%s", procs, run, orders, got, first)
			}
			outOfOrder += checkOverlap(t, res.Records)
		}
		runtime.GOMAXPROCS(prev)
	}
	if outOfOrder == 0 {
		t.Error("no run had its tools finish out of call order: the test did not test anything")
	}
}

// checkAuthTrace checks the first run's trace against the model's order.
func checkAuthTrace(t *testing.T, res agent.Result) {
	t.Helper()
	want := [][]string{{"checkCredentials", "generateToken", "auditLog"}, {"generateToken", "checkCredentials", "auditLog"}}
	var starts, ends []string
	for _, r := range res.Records {
		switch r.Type {
		case trace.TypeToolStart:
			starts = append(starts, r.Name)
		case trace.TypeToolEnd, trace.TypeToolError:
			ends = append(ends, r.Name)
		}
	}
	all := slices.Concat(want...)
	if !slices.Equal(starts, all) || !slices.Equal(ends, all) {
		t.Errorf("tool.start order %v, end order %v; want %v", starts, ends, all)
	}
	// The span tree: in each iteration, the tool calls in call order,
	// each with its hooks before and after it.
	roots := trace.Tree(res.Records)
	var iters [][]string
	for _, n := range roots[0].Children {
		if n.Start.Type != trace.TypeIterationStart {
			continue
		}
		var kids []string
		for _, c := range n.Children {
			if c.Start.Type == trace.TypeToolStart {
				kids = append(kids, c.Start.Name)
			}
		}
		if len(kids) > 0 {
			iters = append(iters, kids)
		}
	}
	if !slices.EqualFunc(iters, want, slices.Equal) {
		t.Errorf("span tree tool calls %v, want %v", iters, want)
	}
	if st := res.Stats.ByTool; st["checkCredentials"].Calls != 2 || st["generateToken"].Errors != 2 || st["auditLog"].Errors != 2 {
		t.Errorf("stats by tool %+v", st)
	}
	// What the model saw, in call order too.
	var results []string
	for _, m := range res.Records {
		if m.Type == trace.TypeModelCall {
			results = append(results, m.Input.String())
		}
	}
	if len(results) != 3 || !strings.Contains(results[1], `"content":"ok","tool_call_id":"call_1_1"`) {
		t.Errorf("the second model call saw %s", results[1])
	}
}

// checkOverlap checks that in each parallel turn every call started before
// any ended (they ran together), and reports how many turns had their
// calls finish, by time, out of call order.
func checkOverlap(t *testing.T, recs []trace.Record) (outOfOrder int) {
	t.Helper()
	var starts, ends []time.Time
	flush := func() {
		if len(ends) == 0 {
			return
		}
		// A millisecond of slack: the tracer's clock re-reads the wall
		// clock every second, which may step it by a few microseconds.
		if slices.MaxFunc(starts, time.Time.Compare).After(slices.MinFunc(ends, time.Time.Compare).Add(time.Millisecond)) {
			t.Errorf("a call ended (%v) before the last one started (%v)", ends, starts)
		}
		if !slices.IsSortedFunc(ends, time.Time.Compare) {
			outOfOrder++
		}
		starts, ends = nil, nil
	}
	for _, r := range recs {
		switch r.Type {
		case trace.TypeToolStart:
			starts = append(starts, r.Time)
		case trace.TypeToolEnd, trace.TypeToolError:
			ends = append(ends, r.Time)
		case trace.TypeIterationEnd:
			flush()
		}
	}
	return outOfOrder
}
