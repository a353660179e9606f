package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
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
	wake  chan struct{} // a pass now: the period was changed
}

// ApplyRetention runs one retention pass as of now: it removes the traces
// that started before now minus the retention period, a batch at a time, until
// none is left or ctx ends, logs what it removed and adds it to the
// counts Retention reports. The period is the one set through
// PUT /api/v1/retention if any, else Options.Retain; with none, it does
// nothing.
// The scheduled passes call it with time.Now(); it is exported so that a
// program (or a test, with a controlled clock) can run a pass itself.
//
// On the root server it runs a pass in every project open now, each with
// its own period, and returns what they removed together.
func (s *Server) ApplyRetention(ctx context.Context, now time.Time) (store.PruneResult, error) {
	if s.root != nil {
		return s.applyRetention(ctx, now)
	}
	var total store.PruneResult
	var first error
	for _, p := range s.openProjects() {
		res, err := p.applyRetention(ctx, now)
		total.Traces = append(total.Traces, res.Traces...)
		total.Records += res.Records
		if first == nil {
			first = err
		}
	}
	return total, first
}

// applyRetention is ApplyRetention in s's project only.
func (s *Server) applyRetention(ctx context.Context, now time.Time) (store.PruneResult, error) {
	var total store.PruneResult
	period, _, err := s.retainPeriod(ctx)
	if err != nil || period <= 0 {
		return total, err
	}
	for ctx.Err() == nil {
		var res store.PruneResult
		res, err = s.o.Store.Prune(ctx, store.PrunePolicy{OlderThan: period, Now: now, Limit: retainBatch})
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
		s.log.Info("loupe serve: retention", "older_than", period.String(), "removed_traces", len(total.Traces), "removed_records", total.Records)
	}
	return total, err
}

// Retention returns what retention has removed since the server started.
func (s *Server) Retention() RetentionStats {
	s.ret.mu.Lock()
	defer s.ret.mu.Unlock()
	return s.ret.stats
}

// retainSetting is the store setting that holds the retention period set
// through the API (a Go duration in nanoseconds; "0" turns retention off).
// Kept in the store, it is the same for every collector on that store.
const retainSetting = "retention:period"

// retainPeriod is the retention period in force: the one set through the
// API if any (from the store's settings, shared by every collector on
// it), else Options.Retain. source says which ("api" or "flag").
func (s *Server) retainPeriod(ctx context.Context) (period time.Duration, source string, err error) {
	if s.settings != nil {
		m, err := s.settings.Settings(ctx, retainSetting)
		if err != nil {
			return 0, "", err
		}
		if v, ok := m[retainSetting]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0, "", fmt.Errorf("retention: the stored period %q is not a duration; set it again with PUT /api/v1/retention", v)
			}
			return time.Duration(n), "api", nil
		}
	}
	return s.o.Retain, "flag", nil
}

// RetentionJSON is the answer of GET and PUT /api/v1/retention.
type RetentionJSON struct {
	// Period is the retention period in force, as a Go duration ("720h0m0s");
	// "0s" when retention is off.
	Period string `json:"period"`
	// Source says where it was set: "flag" (loupe serve --retain) or
	// "api" (PUT /api/v1/retention, which every collector on the store
	// follows).
	Source string         `json:"source"`
	Every  string         `json:"every"`
	Stats  RetentionStats `json:"stats"`
}

func (s *Server) retentionJSON(w http.ResponseWriter, r *http.Request) {
	period, source, err := s.retainPeriod(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, RetentionJSON{Period: period.String(), Source: source, Every: s.o.RetainEvery.String(), Stats: s.Retention()})
}

// getRetention is GET /api/v1/retention.
func (s *Server) getRetention(w http.ResponseWriter, r *http.Request) { s.retentionJSON(w, r) }

// putRetention is PUT /api/v1/retention: {"period": "30d"} sets the
// period for every collector on the store ("0" turns retention off);
// {"period": null} goes back to each collector's --retain.
func (s *Server) putRetention(w http.ResponseWriter, r *http.Request) {
	if s.settings == nil {
		writeError(w, http.StatusNotImplemented, "this store keeps no settings; set the period with loupe serve --retain")
		return
	}
	var body struct {
		Period *string `json:"period"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "retention: want a JSON object {\"period\": \"30d\"} (or null to use --retain): "+err.Error())
		return
	}
	var err error
	if body.Period == nil {
		_, err = s.settings.DeleteSetting(r.Context(), retainSetting)
	} else {
		d, perr := store.ParseDuration(*body.Period)
		if *body.Period == "0" {
			d, perr = 0, nil
		}
		if perr != nil {
			writeError(w, http.StatusBadRequest, "period: "+perr.Error()+" (or \"0\" to turn retention off)")
			return
		}
		if d > 0 && d < time.Hour {
			writeError(w, http.StatusBadRequest, "period: "+d.String()+" is under an hour; a period that short is almost surely a mistake")
			return
		}
		err = s.settings.PutSetting(r.Context(), retainSetting, strconv.FormatInt(int64(d), 10))
	}
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.log.Info("loupe serve: retention period set through the API", "period", body.Period)
	select {
	case s.ret.wake <- struct{}{}: // this collector applies it now; the others at their next pass
	default:
	}
	s.retentionJSON(w, r)
}

// startRetention runs a pass now and then every Options.RetainEvery until
// Close. It runs whenever the store keeps settings, since a period may be
// set through the API later; a pass with no period does nothing.
func (s *Server) startRetention() {
	if s.o.Retain <= 0 && s.settings == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ret.stop, s.ret.done, s.ret.wake = cancel, make(chan struct{}), make(chan struct{}, 1)
	go func() {
		defer close(s.ret.done)
		t := time.NewTicker(s.o.RetainEvery)
		defer t.Stop()
		for {
			s.applyRetention(ctx, time.Now())
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-s.ret.wake:
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
