package server

import (
	"context"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/store"
)

// Retention: with Options.Retain, the server removes the traces that
// started longer ago than that, on a schedule (Options.RetainEvery), in
// batches of retainBatch traces, each its own transaction, so that ingest
// waits at most one batch for the store.

// retainBatch is how many traces one retention transaction removes.
const retainBatch = 200

// DefaultRetainEvery is how often retention runs when Options.Retain is
// set and Options.RetainEvery is not.
const DefaultRetainEvery = time.Hour

// RetentionStats count what retention removed since the server started.
type RetentionStats struct {
	Passes  int       `json:"passes"`             // passes run
	Traces  int       `json:"traces"`             // traces removed
	Records int       `json:"records"`            // records removed
	Last    time.Time `json:"last,omitzero"`      // when the last pass ended
	LastErr string    `json:"last_err,omitempty"` // the last pass's error, if it failed
}

type retention struct {
	mu    sync.Mutex
	stats RetentionStats
	stop  context.CancelFunc
	done  chan struct{}
}

// ApplyRetention runs one retention pass as of now: it removes the traces
// that started before now minus Options.Retain, a batch at a time, until
// none is left or ctx ends, logs what it removed and adds it to the
// counts Retention reports. It does nothing when Options.Retain is zero.
// The scheduled passes call it with time.Now(); it is exported so that a
// program (or a test, with a controlled clock) can run a pass itself.
func (s *Server) ApplyRetention(ctx context.Context, now time.Time) (store.PruneResult, error) {
	var total store.PruneResult
	if s.o.Retain <= 0 {
		return total, nil
	}
	var err error
	for ctx.Err() == nil {
		var res store.PruneResult
		res, err = s.o.Store.Prune(ctx, store.PrunePolicy{OlderThan: s.o.Retain, Now: now, Limit: retainBatch})
		total.Traces = append(total.Traces, res.Traces...)
		total.Records += res.Records
		if err != nil || len(res.Traces) < retainBatch {
			break
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	s.ret.mu.Lock()
	st := &s.ret.stats
	st.Passes++
	st.Traces += len(total.Traces)
	st.Records += total.Records
	st.Last = time.Now()
	st.LastErr = ""
	if err != nil {
		st.LastErr = err.Error()
	}
	s.ret.mu.Unlock()
	if err != nil {
		s.log.Error("loupe serve: retention pass failed", "removed_traces", len(total.Traces), "removed_records", total.Records, "err", err)
	} else if len(total.Traces) > 0 {
		s.log.Info("loupe serve: retention", "older_than", s.o.Retain.String(), "removed_traces", len(total.Traces), "removed_records", total.Records)
	}
	return total, err
}

// Retention returns what retention has removed since the server started.
func (s *Server) Retention() RetentionStats {
	s.ret.mu.Lock()
	defer s.ret.mu.Unlock()
	return s.ret.stats
}

// startRetention runs a pass now and then every Options.RetainEvery until
// Close.
func (s *Server) startRetention() {
	if s.o.Retain <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ret.stop, s.ret.done = cancel, make(chan struct{})
	go func() {
		defer close(s.ret.done)
		t := time.NewTicker(s.o.RetainEvery)
		defer t.Stop()
		for {
			s.ApplyRetention(ctx, time.Now())
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// stopRetention ends the scheduled passes and waits for a running one.
func (s *Server) stopRetention() {
	if s.ret.stop != nil {
		s.ret.stop()
		<-s.ret.done
	}
}
