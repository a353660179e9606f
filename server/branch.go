package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/llm"
	"github.com/loupe-dev/loupe/replay"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Branching a stored run from the API (the web UI's "Re-run from here"):
// POST /api/v1/traces/{id}/branch does what `loupe replay ID --from-step N
// --model SPEC [--system TEXT]` does, on the server. The steps before N
// are answered from the recording, step N and after by the model, which
// must be one of Options.BranchModels: an admin may spend the server's
// provider keys only on the models its operator allowed, and only up to
// Options.BranchMaxCostUSD per branch. The branch runs in the background,
// bounded by Options.BranchTimeout; its records go through the same
// commit as ingest (redaction, prices, the live streams), so the UI
// follows it like any running trace. GET /api/v1/traces/diff compares two
// runs as `loupe traces diff` does.

// Defaults and bounds of branching; see Options.
const (
	// DefaultBranchTimeout bounds one branch when Options.BranchTimeout is
	// zero.
	DefaultBranchTimeout = 5 * time.Minute

	// BranchMaxSteps is how many steps a branch may run (the CLI's
	// --max-steps default): a live model may not stop by itself.
	BranchMaxSteps = 50

	// maxBranches bounds the branches running at once on one server.
	maxBranches = 4

	// maxBranchBody bounds the body of POST /api/v1/traces/{id}/branch;
	// maxSystemBytes the system prompt in it.
	maxBranchBody  = 256 << 10
	maxSystemBytes = 128 << 10

	// branchStartWait bounds how long the request waits for the branch's
	// first records to be committed, which gives it the new trace's id.
	branchStartWait = 30 * time.Second
)

// branches is the state of a Server's running branches: a context that
// Close cancels, the running ones (Close waits for them) and a bound on
// how many run at once. The zero value is not usable; see newBranches.
type branches struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{}
}

func newBranches() *branches {
	ctx, cancel := context.WithCancel(context.Background())
	return &branches{ctx: ctx, cancel: cancel, sem: make(chan struct{}, maxBranches)}
}

// stop cancels the running branches and waits for them to record their
// end.
func (b *branches) stop() {
	b.cancel()
	b.wg.Wait()
}

// BranchRequest is the body of POST /api/v1/traces/{id}/branch.
type BranchRequest struct {
	Step   int     `json:"step"`             // the first step answered live, from 1
	Model  string  `json:"model"`            // an llm.Open spec among the server's allowed ones
	System *string `json:"system,omitempty"` // replaces the recorded system prompt when set
}

// BranchStarted is the answer of POST /api/v1/traces/{id}/branch (202):
// the new run's trace, already stored and still running, and where to
// follow it.
type BranchStarted struct {
	TraceID  trace.TraceID `json:"trace_id"` // the branch
	Original trace.TraceID `json:"original"` // the run it branched from
	FromStep int           `json:"from_step"`
	Model    string        `json:"model"`
	Tags     []string      `json:"tags"`    // replay-of:<original>, replay-from-step:<N>
	Trace    string        `json:"trace"`   // GET: the branch's trace (its status says when it ended)
	Stream   string        `json:"stream"`  // GET: its records live (Server-Sent Events)
	Compare  string        `json:"compare"` // GET: the two runs side by side with the first divergence
}

// BranchConfig is the answer of GET /api/v1/branch: what this server
// allows a branch to run, so that a client can offer only that.
type BranchConfig struct {
	Models     []string `json:"models"`                 // the model specs allowed; empty: branching is off
	MaxCostUSD float64  `json:"max_cost_usd,omitempty"` // what a branch's live steps may spend; 0: no limit
	TimeoutSec float64  `json:"timeout_seconds"`        // how long a branch may run
	MaxSteps   int      `json:"max_steps"`              // how many steps a branch may run
}

func (s *Server) branchTimeout() time.Duration {
	if s.o.BranchTimeout > 0 {
		return s.o.BranchTimeout
	}
	return DefaultBranchTimeout
}

// getBranchConfig is GET /api/v1/branch.
func (s *Server) getBranchConfig(w http.ResponseWriter, _ *http.Request) {
	models := s.o.BranchModels
	if models == nil {
		models = []string{}
	}
	writeJSON(w, http.StatusOK, BranchConfig{Models: models, MaxCostUSD: s.o.BranchMaxCostUSD,
		TimeoutSec: s.branchTimeout().Seconds(), MaxSteps: BranchMaxSteps})
}

// allowedModels says which models a branch may use, for an error.
func (s *Server) allowedModels() string {
	if len(s.o.BranchModels) == 0 {
		return "this server allows none: start it with --branch-models SPEC,SPEC (server.Options.BranchModels)"
	}
	return "allowed: " + strings.Join(s.o.BranchModels, ", ")
}

// postBranch is POST /api/v1/traces/{id}/branch: it checks the request,
// starts the branch in the background and answers 202 once the branch's
// first records are stored, with the new trace's id.
func (s *Server) postBranch(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, `send the branch as JSON: Content-Type: application/json, {"step": N, "model": "provider:model", "system": "…"}`)
		return
	}
	var req BranchRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBranchBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", maxBranchBody))
			return
		}
		writeError(w, http.StatusBadRequest, `the body is not {"step": N, "model": "provider:model", "system": "…"}: `+clip(err.Error(), 200))
		return
	}
	req.Model = strings.TrimSpace(req.Model)
	switch {
	case req.Step < 1:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("step: %d; give the first step to run live, from 1", req.Step))
		return
	case req.Model == "":
		writeError(w, http.StatusBadRequest, "model: missing; give the model that answers from the step on ("+s.allowedModels()+")")
		return
	case !slices.Contains(s.o.BranchModels, req.Model):
		writeError(w, http.StatusForbidden, fmt.Sprintf("model %q may not be used for branches on this server; %s", clip(req.Model, 200), s.allowedModels()))
		return
	case req.System != nil && len(*req.System) > maxSystemBytes:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("system: %d bytes, over the limit of %d", len(*req.System), maxSystemBytes))
		return
	}
	id, t, ok := s.loadTrace(w, r)
	if !ok {
		return
	}
	rec, err := replay.Load(t.Records)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if n := rec.Steps(); req.Step > n {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("step %d: run %s has %d steps; branch from a step between 1 and %d", req.Step, id, n, n))
		return
	}
	live, err := llm.Open(req.Model, llm.Options{Prices: s.o.Prices})
	if err != nil {
		// The operator allowed a spec that does not open (a missing
		// script, a provider without its key): the server's fault.
		s.log.Error("loupe serve: opening a branch's model", "model", req.Model, "err", err)
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("model %q could not be opened on the server: %v", clip(req.Model, 200), err))
		return
	}
	select {
	case s.branches.sem <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("%d branches are running on this server, the most at once; retry when one has ended", maxBranches))
		return
	}
	started := make(chan trace.TraceID, 1)
	failed := make(chan error, 1)
	s.branches.wg.Add(1)
	go func() {
		defer s.branches.wg.Done()
		defer func() { <-s.branches.sem }()
		rep, err := s.runBranch(rec, req, live, started)
		if err != nil {
			failed <- err
			s.log.Error("loupe serve: branch failed", "original", id, "step", req.Step, "model", req.Model, "err", err)
			return
		}
		s.log.Info("loupe serve: branch ended", "original", id, "trace", rep.Trace, "step", req.Step, "model", req.Model,
			"termination", rep.Termination, "error", rep.Error)
	}()
	wait := time.NewTimer(branchStartWait)
	defer wait.Stop()
	var nid trace.TraceID
	select {
	case nid = <-started:
	case err := <-failed:
		writeError(w, http.StatusInternalServerError, "the branch could not start: "+err.Error())
		return
	case <-wait.C:
		writeError(w, http.StatusServiceUnavailable, "the branch started but none of its records were stored in time; see the server's log")
		return
	case <-r.Context().Done():
		return // the branch goes on; its trace is tagged replay-of:<id>
	}
	base := "/api/v1/traces/" + nid.String()
	w.Header().Set("Location", base)
	writeJSON(w, http.StatusAccepted, BranchStarted{
		TraceID: nid, Original: id, FromStep: req.Step, Model: req.Model,
		Tags:  []string{replay.TagOf + id.String(), replay.TagFromStep + fmt.Sprint(req.Step)},
		Trace: base, Stream: base + "/stream",
		Compare: "/api/v1/traces/diff?" + url.Values{"a": {id.String()}, "b": {nid.String()}}.Encode(),
	})
}

// runBranch runs the branch of rec that req asks for, with live answering
// from req.Step on, and records it through the server's commit; the new
// trace's id goes to started once its first records are stored.
//
// The cost limit is enforced by the agent runtime (agent.Limits), which
// counts the run's whole cost: the replayed steps are answered from the
// recording and cost nothing now, so the limit is what they cost when
// recorded plus Options.BranchMaxCostUSD, and their calls are not of
// unknown cost (which would stop a limited run) even when their model
// had no price.
func (s *Server) runBranch(rec *replay.Recording, req BranchRequest, live agent.Model, started chan<- trace.TraceID) (*replay.Report, error) {
	timeout := s.branchTimeout()
	limits := agent.Limits{MaxIterations: BranchMaxSteps, Timeout: timeout}
	if s.o.BranchMaxCostUSD > 0 {
		var spent float64
		rec = copyRecording(rec)
		for i := range rec.Calls {
			c := &rec.Calls[i]
			if c.Kind == replay.KindModel && c.Step < req.Step {
				spent += c.Response.Usage.CostUSD
				c.Response.Usage.CostUnknown = false
			}
		}
		limits.MaxCostUSD = spent + s.o.BranchMaxCostUSD
	}
	sink := &commitSink{s: s, started: started}
	tr := trace.New(trace.Options{
		Sinks:         []trace.Sink{sink},
		MaxValueBytes: s.o.MaxValueBytes,
		// Block: every record of the branch should be stored; the run's
		// timeout bounds the wait.
		Dispatch: trace.DispatchOptions{OnFull: trace.Block, BatchSize: store.SinkBatchSize, QueueSize: 2 * store.SinkBatchSize,
			OnError: func(err error) { s.log.Error("loupe serve: storing a branch's records", "err", err) }},
	})
	ctx, cancel := context.WithTimeout(s.branches.ctx, timeout)
	defer cancel()
	rep, err := replay.Run(ctx, rec, replay.RunOptions{
		Options: replay.Options{FromStep: req.Step, Live: live, System: req.System},
		Tracer:  tr, Limits: limits,
	})
	// The end of the run is stored even when the server is closing.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer scancel()
	if serr := tr.Shutdown(sctx); serr != nil && err == nil {
		err = fmt.Errorf("storing the branch: %w", serr)
	}
	if err == nil && !sink.stored() {
		err = errors.New("the branch recorded nothing")
	}
	return rep, err
}

// copyRecording copies what runBranch changes of a Recording (its calls),
// which Replayers otherwise share read-only.
func copyRecording(rec *replay.Recording) *replay.Recording {
	c := *rec
	c.Calls = slices.Clone(rec.Calls)
	return &c
}

// commitSink is the trace.Sink of a branch: each batch goes through
// Server.commit, as an ingest request's records do (sanitized, redacted,
// priced, stored in one transaction, then published to the live
// streams). The first batch stored tells started the trace's id.
type commitSink struct {
	s       *Server
	started chan<- trace.TraceID // buffered: one send

	mu   sync.Mutex
	sent bool
}

// WriteRecords commits a copy of recs (the sink must not change them).
func (k *commitSink) WriteRecords(ctx context.Context, recs []trace.Record) error {
	cp := slices.Clone(recs)
	for i := range cp {
		store.Sanitize(&cp[i])
	}
	if _, err := k.s.commit(ctx, cp); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.sent && len(cp) > 0 {
		k.sent = true
		k.started <- cp[0].TraceID
	}
	return nil
}

func (k *commitSink) stored() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sent
}

// getDiff is GET /api/v1/traces/diff?a=…&b=…: two runs' trajectories step
// by step with the first divergence, as `loupe traces diff --json` prints
// them (replay.Comparison).
func (s *Server) getDiff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a, b := q.Get("a"), q.Get("b")
	if a == "" || b == "" {
		writeError(w, http.StatusBadRequest, "give both runs: /api/v1/traces/diff?a=ID&b=ID (trace ids or unique prefixes of at least 4 hex digits)")
		return
	}
	var ids [2]string
	for i, p := range []struct{ key, v string }{{"a", a}, {"b", b}} {
		id, err := store.Resolve(r.Context(), s.o.Store, p.v)
		switch {
		case isNotFound(err):
			writeError(w, http.StatusNotFound, fmt.Sprintf("%s=%s: no such trace", p.key, clip(p.v, 40)))
			return
		case err != nil:
			s.queryError(w, r, err)
			return
		}
		ids[i] = id.String()
	}
	c, err := replay.CompareStored(r.Context(), s.o.Store, ids[0], ids[1])
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if c.Steps == nil {
		c.Steps = []replay.StepPair{}
	}
	s.writeJSON(w, r, http.StatusOK, c)
}
