package server

import (
	"context"
	"sync"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Group commit: with a store that can append groups of records in one
// transaction (store.GroupAppender, SQLite), concurrent ingest requests
// share write transactions. SQLite has one writer, so a transaction per
// request makes requests queue behind each other's commits; one per
// batch of waiting requests pays the commit once.
//
// Each request prepares its records (store.GroupAppender.PrepareGroup:
// validation and encoding) before it queues, in its own goroutine, so
// that this work runs while another commit holds the store's write lock
// and the commit itself is only the inserts.
//
// There is no batching window and no goroutine of its own: the first
// request to arrive when no commit runs leads, commits every request
// waiting then (itself included, up to maxGroupRecords records), answers
// them, and hands the lead to the first request that arrived meanwhile.
// A request is answered only after its records are committed, and a
// failed batch is retried request by request, so that a failure fails
// only the requests it touched. The queue is first come, first
// committed: a request that arrives while a commit runs waits for that
// commit and goes in the next, and a batch cut at maxGroupRecords leaves
// the latest arrivals at the head of the queue for the next one.

// maxGroupRecords bounds the records of one group commit (a request
// larger than that still commits, alone).
const maxGroupRecords = 20000

type grouper struct {
	st      store.GroupAppender
	mu      sync.Mutex
	pending []*commitReq // waiting, in arrival order
	busy    bool         // a request leads (pending is empty when not busy)
}

type commitReq struct {
	ctx   context.Context
	group store.Group
	res   chan commitRes // 1-buffered: one answer, or the lead
}

type commitRes struct {
	added int
	err   error
	lead  bool // not an answer: commit the waiting requests, then wait again
}

// append commits recs with whatever other requests are waiting and
// returns how many of recs were new.
func (g *grouper) append(ctx context.Context, recs []trace.Record) (int, error) {
	group, err := g.st.PrepareGroup(recs)
	if err != nil {
		return 0, err
	}
	req := &commitReq{ctx: ctx, group: group, res: make(chan commitRes, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, req)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	for {
		if lead {
			g.commitWaiting(ctx)
		}
		r := <-req.res
		if !r.lead {
			return r.added, r.err
		}
		lead = true
	}
}

// commitWaiting commits the requests at the head of the queue, answers
// them and passes the lead on.
func (g *grouper) commitWaiting(ctx context.Context) {
	g.mu.Lock()
	n, size := 0, 0
	for n < len(g.pending) && (n == 0 || size+len(g.pending[n].group.Records()) <= maxGroupRecords) {
		size += len(g.pending[n].group.Records())
		n++
	}
	batch := g.pending[:n:n]
	g.pending = g.pending[n:]
	g.mu.Unlock()

	// Requests whose clients left are not committed.
	live := batch[:0:0]
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil {
			req.res <- commitRes{err: err}
			continue
		}
		live = append(live, req)
	}
	// The commit is on behalf of every request in it: the leader's
	// client leaving must not cancel it.
	cctx := context.WithoutCancel(ctx)
	if len(live) > 0 {
		groups := make([]store.Group, len(live))
		for i, req := range live {
			groups[i] = req.group
		}
		counts, err := g.st.AppendGroups(cctx, groups)
		switch {
		case err == nil:
			for i, req := range live {
				req.res <- commitRes{added: counts[i]}
			}
		case len(live) == 1:
			live[0].res <- commitRes{err: err}
		default:
			// Which request is at fault? Each on its own.
			for _, req := range live {
				counts, err := g.st.AppendGroups(cctx, []store.Group{req.group})
				if err != nil {
					req.res <- commitRes{err: err}
				} else {
					req.res <- commitRes{added: counts[0]}
				}
			}
		}
	}

	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].res <- commitRes{lead: true}
	} else {
		g.busy = false
	}
	g.mu.Unlock()
}

// queued returns how many requests wait for a commit (for tests).
func (g *grouper) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}
