package server

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loupe-dev/loupe/store"
)

// countingGroups counts the transactions of a GroupAppender and how many
// groups each held.
type countingGroups struct {
	store.GroupAppender
	calls, groups atomic.Int64
	gate          chan struct{} // if set, each call waits for it
	entered       chan struct{} // if set, each call waiting for gate sends to it, when it can
}

// AppendGroups fails, storing nothing, when a group holds a record named
// "poison", as a store fails on data it cannot take.
func (c *countingGroups) AppendGroups(ctx context.Context, g []store.Group) ([]int, error) {
	if c.gate != nil {
		select {
		case c.entered <- struct{}{}:
		default:
		}
		<-c.gate
	}
	c.calls.Add(1)
	c.groups.Add(int64(len(g)))
	for _, grp := range g {
		for _, r := range grp.Records() {
			if r.Name == "poison" {
				return nil, errors.New("the store cannot take this")
			}
		}
	}
	return c.GroupAppender.AppendGroups(ctx, g)
}

// TestGroupCommit: concurrent requests share transactions, each is
// answered with its own count after its records are committed, and a bad
// request fails alone.
func TestGroupCommit(t *testing.T) {
	st := &countingGroups{GroupAppender: openStore(t).(store.GroupAppender), gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	e := newEnv(t, Options{Store: st})
	const n = 40
	type answer struct {
		code int
		body string
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprint("run ", i)
		if i == 7 {
			name = "poison"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(run(byte(i+1), name)))
			answers[i] = answer{code, string(body)}
		}()
		if i == 0 {
			<-st.entered // request 0 alone is the first transaction
		}
	}
	// Hold the first transaction until the others wait behind it.
	for e.srv.group.queued() < n-1 {
		runtime.Gosched()
	}
	close(st.gate)
	wg.Wait()
	for i, a := range answers {
		want := 200
		if i == 7 {
			want = 503
		}
		if a.code != want {
			t.Errorf("request %d: %d %s, want %d", i, a.code, a.body, want)
		}
	}
	if got := count(t, e.st); got != n-1 {
		t.Errorf("%d traces stored, want %d (all but the bad one)", got, n-1)
	}
	// The first request alone, the other 39 in one transaction that failed
	// on the poisoned one, then one each to find it.
	if c := st.calls.Load(); c != 1+1+(n-1) {
		t.Errorf("%d transactions, want %d", c, 1+1+(n-1))
	}
	st.calls.Store(0)
	st.gate = nil
	var wg2 sync.WaitGroup
	added := make([]string, n)
	for i := range n {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			_, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(run(byte(100+i%20), "again")))
			added[i] = string(body)
		}()
	}
	wg2.Wait()
	// 20 distinct runs posted twice each: 20 answers add 4, 20 add 0.
	fours, zeros := 0, 0
	for _, b := range added {
		switch b {
		case `{"accepted":4,"added":4}` + "\n":
			fours++
		case `{"accepted":4,"added":0}` + "\n":
			zeros++
		default:
			t.Errorf("answer %q", b)
		}
	}
	if fours != 20 || zeros != 20 {
		t.Errorf("%d answers added 4 and %d added 0, want 20 and 20", fours, zeros)
	}
	t.Logf("%d concurrent requests in %d transactions", n, st.calls.Load())
}
