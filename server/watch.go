package server

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Other collectors' commits. When several servers share a store that can
// tell each of them what the others commit (store.CommitWatcher:
// PostgreSQL), every server watches it, reads back the records of each
// notice that one of its streams watches and publishes them to its hub as
// if it had ingested them, so that a stream shows every collector's
// records whichever collector it is connected to.
//
// What a client gets: the events of one server's streams are in the order
// that server published them, its own commits as they commit and the
// others' when their notice arrives and their records have been read back
// (some tens of milliseconds later: the store may gather notices, PostgreSQL's for 50 ms). So a trace's records may arrive out of seq
// order (as with concurrent requests to one server); a client keys them
// by seq. Event ids stay per server (see stream.go): Last-Event-ID resumes
// exactly on the same server, and elsewhere, or after the server missed
// notices, the trace stream starts again from the store.
//
// Reading back costs a query per trace and seq range, so it is done only
// for what someone watches: nothing when no stream is open, only the
// watched traces' when no one watches /api/v1/stream. The notice is sorted
// at once (the store's watch is never held up): the traces that a trace
// stream watches go to a queue read by a goroutine of their own, the others (wanted by
// /api/v1/stream alone) to a larger one that, when reading back cannot
// keep up, drops what does not fit: /api/v1/stream then misses those
// trace events, and the trace streams are not disturbed. A notice read in
// part, or not at all, leaves a gap in the hub (an id from before it is
// unknown, so a trace stream resuming from it restarts from the store). A
// watch that lost notices (its connection was lost, it fell behind, or
// the queue of the watched traces overflowed) ends the trace streams,
// whose clients reconnect and catch up from the store; /api/v1/stream
// goes on, without the trace events it missed.

// feedPage bounds the records read back (and published) at a time.
const feedPage = 1000

// feedTimeout bounds the reading back of one seq range.
const feedTimeout = 30 * time.Second

// The queues of traces to read back: those a trace stream watches, and
// those only /api/v1/stream wants.
const (
	feedWatched = 1024
	feedAll     = 4096
)

// watchCommits feeds h with the records that other processes commit to st,
// when st can tell (store.CommitWatcher) and read them back by seq
// (store.RecordPager), as PostgreSQL can. It returns the function that
// stops it.
func watchCommits(st store.Store, h *hub, log *slog.Logger) (stop func()) {
	cw, ok := st.(store.CommitWatcher)
	// Reads back what a notice names, from the primary: a replica may
	// not have it yet.
	pager, paged := store.Primary(st).(store.RecordPager)
	if !ok || !paged {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &feed{pager: pager, h: h, log: log, ctx: ctx,
		watched: make(chan store.CommitTrace, feedWatched), all: make(chan store.CommitTrace, feedAll)}
	go f.read(f.watched)
	go f.read(f.all)
	warn := func(err error) {
		log.Warn("live streams: not told of other collectors' commits, trying again; until then their records show only when a stream starts", "err", err)
	}
	if err := cw.WatchCommits(ctx, store.CommitWatch{Commit: f.commit, Lost: h.resync, Error: warn}); errors.Is(err, errors.ErrUnsupported) {
		cancel()
		return func() {}
	} else if err != nil {
		warn(err)
	}
	return cancel
}

type feed struct {
	pager store.RecordPager
	h     *hub
	log   *slog.Logger
	ctx   context.Context
	// The traces to read back: those a trace stream watches, and the
	// others.
	watched, all chan store.CommitTrace
}

// commit sorts the traces of n into the queues, without waiting.
func (f *feed) commit(n store.CommitNotice) {
	watched, all := f.h.want(n.Traces)
	for _, ct := range watched {
		select {
		case f.watched <- ct:
		default:
			f.h.resync() // the trace streams catch up from the store
			return
		}
	}
	for i, ct := range all {
		select {
		case f.all <- ct:
		default:
			f.h.skip() // /api/v1/stream misses these
			f.log.Debug("live streams: reading back other collectors' records falls behind; trace events dropped", "traces", len(all)-i)
			return
		}
	}
}

// read reads back and publishes the traces of q until the feed stops.
func (f *feed) read(q chan store.CommitTrace) {
	for {
		select {
		case <-f.ctx.Done():
			return
		case ct := <-q:
			if err := f.publish(ct); err != nil && f.ctx.Err() == nil {
				f.log.Warn("live streams: reading back another collector's records", "trace", ct.TraceID.String(), "err", err)
				f.h.resync()
			}
		}
	}
}

// publish reads back the records of ct and publishes them.
func (f *feed) publish(ct store.CommitTrace) error {
	// The trace's records of the notice are published together (one
	// trace event), feedPage at a time.
	var recs []trace.Record
	for _, rg := range ct.Seqs {
		after := rg.From - 1
		for after < rg.To {
			ctx, cancel := context.WithTimeout(f.ctx, feedTimeout)
			page, err := f.pager.Records(ctx, ct.TraceID, store.RecordRange{After: after, Limit: int(min(rg.To-after, feedPage))})
			cancel()
			if isNotFound(err) {
				return nil // deleted since
			}
			if err != nil {
				return err
			}
			got := page.Records
			for len(got) > 0 && got[len(got)-1].Seq > rg.To {
				got = got[:len(got)-1]
			}
			recs = append(recs, got...)
			if len(recs) >= feedPage {
				f.h.publish(recs)
				recs = nil
			}
			if len(got) < len(page.Records) || page.Next == 0 {
				break
			}
			after = page.Next
		}
	}
	if len(recs) > 0 {
		f.h.publish(recs)
	}
	return nil
}

// want sorts ts: the traces that a trace stream watches, and those only
// /api/v1/stream wants (when someone watches it). If it leaves any out,
// it leaves a gap.
func (h *hub) want(ts []store.CommitTrace) (watched, all []store.CommitTrace) {
	h.mu.Lock()
	defer h.mu.Unlock()
	everything := false
	byTrace := map[trace.TraceID]bool{}
	for s := range h.subs {
		if s.trace.IsZero() {
			everything = true
		} else {
			byTrace[s.trace] = true
		}
	}
	for _, ct := range ts {
		switch {
		case byTrace[ct.TraceID]:
			watched = append(watched, ct)
		case everything:
			all = append(all, ct)
		}
	}
	if len(watched)+len(all) < len(ts) {
		h.skipLocked()
	}
	return watched, all
}

// skip leaves a gap: events were not published.
func (h *hub) skip() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.skipLocked()
}

func (h *hub) skipLocked() {
	h.n++
	h.gap = h.n
}

// resync is told that commits may have been missed: it leaves a gap and
// ends the trace streams, whose clients reconnect and read the trace
// again from the store.
func (h *hub) resync() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.skipLocked()
	for s := range h.subs {
		if !s.trace.IsZero() {
			h.drop(s)
		}
	}
}
