// Package server is Loupe's collector: the HTTP handler behind `loupe
// serve`. On one port it serves
//
//   - ingest: POST /v1/records (Loupe records, NDJSON or a JSON array,
//     optionally gzip), POST /v1/traces and POST /v1/logs (OTLP/HTTP,
//     protobuf or JSON, optionally gzip, mapped to records by package
//     otlp; log records join the traces they were written in);
//   - the JSON API under /api/v1: traces (list with filters and cursor
//     pagination), search, one trace, delete, aggregates, evaluation runs
//     and their case results;
//   - live streams (Server-Sent Events): /api/v1/stream and
//     /api/v1/traces/{id}/stream, fed from ingest (and, with a store
//     that tells of them, store.CommitWatcher, from the commits of the
//     other servers sharing the store), resumable with Last-Event-ID;
//   - monitors and their firings (package alert): /api/v1/monitors and
//     /api/v1/alerts, from Options.Alerts or the store;
//   - branches: POST /api/v1/traces/{id}/branch re-runs a stored run
//     from a step with another model (Options.BranchModels) as
//     `loupe replay --from-step` does, and GET /api/v1/traces/diff
//     compares two runs as `loupe traces diff` does;
//   - online evaluation rules at /api/v1/rules (Options.Online, package
//     online), told of every root run.end committed, without waiting;
//   - its OpenAPI document at /api/v1/openapi.json;
//   - optionally, Loupe's MCP server at /mcp (Options.MCP).
//
// NewGRPC serves OTLP/gRPC trace and logs export (port 4317) from the
// same Server.
//
// Every ingest request is answered only after its records are committed
// to the store, in one transaction: a request is stored whole or not at
// all. With a store that can append groups (store.GroupAppender, SQLite),
// concurrent requests share transactions (group commit). With
// Options.Retain, old traces are removed on a schedule. The server keeps
// no state a second server would need (API keys, web UI sessions and the
// retention period are in the store; the live streams see the ingest of
// every server when the store tells each of the others' commits, and
// their backlog comes from the store), so several servers can share one
// PostgreSQL store.
//
// Every trace, score, dataset, rule and monitor belongs to a project: the
// default one (Options.Store), or one made with CreateProject, whose store
// Options.Projects opens beside it (see store.ProjectDSN) and which a
// server of its own serves. A request names its project with the
// Loupe-Project header, the project query parameter, the loupe_project
// cookie or the OTLP resource attribute loupe.project (else its key's
// first project); its key must allow it (Key.Projects). No query of one
// project can reach another's store.
//
// Every request must name the server in its Host (loopback names, or
// Options.Hosts), and no web page of another origin may send a
// state-changing request (Options.TrustedOrigins): loopback is reachable
// from any web page. docs/security.md has the threat model.
//
// With Options.RequireKeys, every request but /healthz needs an API key
// (Authorization: Bearer …; see CreateKey) whose scope allows it: ingest
// keys may only ingest, read keys may only read, admin keys may do both
// and delete. The web UI signs in instead: POST /api/v1/session exchanges
// a read or admin key for a session cookie, which /api/v1 (the streams
// included) accepts with the key's scope until it expires (SessionTTL),
// its key is revoked, or DELETE /api/v1/session signs out.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/loupe-dev/loupe/alert"

	"github.com/loupe-dev/loupe/online"
	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Default limits; see Options.
const (
	DefaultMaxBodyBytes    = 16 << 20 // an ingest body as sent (compressed)
	DefaultMaxDecodedBytes = 64 << 20 // an ingest body after gzip
)

// Options configure a Server. Store is required; the zero value of every
// other field is useful.
type Options struct {
	// Store receives what is ingested and answers the API. The caller
	// opens and closes it.
	Store store.Store

	// RequireKeys makes every request (but /healthz) present an API key
	// with a scope that allows it. Serve sets it when listening on a
	// non-loopback address. Keys live in the store (store.Settings).
	RequireKeys bool

	// MaxBodyBytes bounds an ingest request body as sent, and
	// MaxDecodedBytes after gzip decoding (so that a gzip bomb is
	// refused). Zero means the defaults above.
	MaxBodyBytes, MaxDecodedBytes int64

	// MaxValueBytes bounds each input, output and thinking value of a
	// record posted to /v1/records; longer ones are stored as the
	// recorder's truncation marker. Zero means 1 MiB; negative, no limit.
	// (OTLP attribute values are bounded by OTLP.MaxValueBytes.)
	MaxValueBytes int

	// Redact, if set, is called on every ingested record before it is
	// stored; it may change the record's values in place (it must not
	// change ids, seq or type). This is the hook for package redact;
	// `loupe serve` installs its default redaction here. Records decoded
	// from a request are owned by the server, so Redact may keep or
	// modify them.
	Redact func(*trace.Record)

	// Prices, if set, prices the model calls that arrive with tokens but
	// no cost (most OpenTelemetry instrumentations send none), before
	// they are stored (see price.Table.PriceRecord). A call to a model the
	// table does not know is marked as of unknown cost, not free.
	Prices *price.Table

	// OTLP are the limits applied when mapping OTLP spans.
	OTLP otlp.Options

	// Logger receives request errors; nil means slog.Default().
	Logger *slog.Logger

	// StreamBuffer is how many live events the server keeps for clients
	// that reconnect with Last-Event-ID; zero means 8192.
	StreamBuffer int

	// UI, if set, answers the requests no endpoint takes outside /api/
	// and /v1/ (the web UI, package ui, at /). It is served without an
	// API key: it holds no trace data, which its pages read from /api/v1.
	UI http.Handler

	// MCP, if set, is served at /mcp (Loupe as an MCP server over
	// streamable HTTP, package mcpserver). With RequireKeys it needs an
	// admin key: its tools run agents and delete traces.
	MCP http.Handler

	// Hosts are the host names (without port) the server answers besides
	// loopback addresses, localhost and names under .localhost: its
	// public names. A request naming any other Host is refused with 403,
	// so that a web page cannot reach the server by rebinding its own
	// name to the server's address (DNS rebinding). The check applies
	// whenever RequireKeys is false, and with RequireKeys when Hosts is
	// not empty.
	Hosts []string

	// TrustedOrigins are the browser origins ("https://ui.example.com")
	// allowed to send state-changing requests (POST, DELETE) besides the
	// server's own. Every other cross-origin request from a browser is
	// refused with 403 (see http.CrossOriginProtection); programs, which
	// send no Origin or Sec-Fetch-Site header, are not affected.
	TrustedOrigins []string

	// WriteTimeout bounds each write of an answer: a client that reads
	// nothing for that long is disconnected. Zero means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration

	// MaxResponseBytes bounds the bytes of large answers (over 64 KiB)
	// being sent at once; one more waits for room, then is refused with
	// 503. Zero means DefaultMaxResponseBytes.
	MaxResponseBytes int64

	// Retain, if positive, removes the traces whose run started longer
	// ago than that, when the server starts and then every RetainEvery
	// (zero means DefaultRetainEvery), in short transactions so that
	// ingest is not held up; see ApplyRetention and Retention.
	Retain, RetainEvery time.Duration

	// Alerts, if set, is the monitors' engine the API under
	// /api/v1/monitors and /api/v1/alerts answers from (its caller runs
	// it; see alert.Engine.Run). When nil, the API still reads and writes
	// the definitions and firings of a store that keeps them, and the
	// monitors are evaluated by whichever collector runs an engine.
	Alerts *alert.Engine

	// Online, if set, evaluates the traces that end with its rules
	// (package online): the server tells it of every root run.end it
	// commits, without waiting, and serves its rules at /api/v1/rules.
	// The caller creates and closes it.
	Online *online.Engine

	// MaxExpensive bounds the requests that load whole traces or search
	// hits at once, and separately those that list or aggregate; more wait
	// their turn (up to 30 s, then 503). Zero means twice GOMAXPROCS.
	MaxExpensive int

	// BranchModels are the model specs (llm.Open: "openai:gpt-4o-mini",
	// "scripted:FILE") that POST /api/v1/traces/{id}/branch may run a
	// stored run's later steps with; any other is refused with 403. Empty
	// turns branching off. BranchMaxCostUSD bounds what one branch's live
	// steps may spend (enforced as the run's agent.Limits.MaxCostUSD; a
	// model without a price then stops the branch); zero means no limit.
	// BranchTimeout bounds one branch; zero means DefaultBranchTimeout.
	BranchModels     []string
	BranchMaxCostUSD float64
	BranchTimeout    time.Duration

	// Projects, if set, opens the projects other than the default one
	// (whose parts are Store, Online, Alerts and MCP above) when a request
	// first names them; see CreateProject. Nil serves the default project
	// only: a request naming another is answered 404.
	Projects ProjectOpener

	// DropProject, if set, deletes the store of project name (the
	// collector passes store.DropProject with its DSN) once the project's
	// server is closed; DELETE /api/v1/projects/{name} calls it. Nil
	// refuses deleting projects (501).
	DropProject func(ctx context.Context, name string) error
}

// Server is the collector's http.Handler. Create it with New; it is safe
// for concurrent use. Close ends the live streams (call it before
// http.Server.Shutdown, which otherwise waits for them).
type Server struct {
	o    Options
	mux  *http.ServeMux
	hub  *hub
	log  *slog.Logger
	keys store.Settings // the default project's: API keys, sessions, projects; nil when the store keeps no settings
	// settings are this project's store's (its retention period); nil
	// when the store keeps none.
	settings store.Settings
	cop      *http.CrossOriginProtection
	budget   *byteBudget
	// Slots for the requests that load or compute much: light ones (trace
	// lists, aggregates) and heavy ones (whole traces, search hits), so
	// that a crowd asking for large traces cannot hold up the lists.
	light, heavy slots
	group        *grouper // nil when the store cannot append groups
	ret          retention
	sessions     *sessions        // the web UI's sign-ins (session.go)
	alerts       *alert.Engine    // nil when the store keeps no monitors (monitors.go)
	branches     *branches        // the running branches (branch.go)
	unwatch      func()           // stops feeding the hub other collectors' commits (watch.go)
	now          func() time.Time // the clock of sessions; tests set it

	name       string       // the project this server serves
	root       *Server      // the server that answers requests; nil for the root itself
	projects   projectSet   // the root's open projects (projects.go)
	closeParts func() error // a project's Project.Close
	life       lease        // a project's requests in flight (projects.go)
}

// New returns a Server for o.
func New(o Options) (*Server, error) {
	return newServer(o, nil, store.DefaultProject)
}

// newServer returns the server of project name: the root server (root
// nil), or a project's, which shares the root's keys, sessions, limits
// and clock and is reached only through the root (see projects.go).
func newServer(o Options, root *Server, name string) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("server: Options.Store is nil")
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxDecodedBytes <= 0 {
		o.MaxDecodedBytes = DefaultMaxDecodedBytes
	}
	if o.MaxValueBytes == 0 {
		o.MaxValueBytes = 1 << 20
	}
	if o.StreamBuffer <= 0 {
		o.StreamBuffer = 8192
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.MaxExpensive <= 0 {
		o.MaxExpensive = 2 * runtime.GOMAXPROCS(0)
	}
	if o.Retain < 0 {
		return nil, fmt.Errorf("server: Options.Retain is negative (%s)", o.Retain)
	}
	if o.BranchMaxCostUSD < 0 || o.BranchMaxCostUSD != o.BranchMaxCostUSD {
		return nil, fmt.Errorf("server: Options.BranchMaxCostUSD is %v; give a cost in USD, or 0 for no limit", o.BranchMaxCostUSD)
	}
	if o.RetainEvery <= 0 {
		o.RetainEvery = DefaultRetainEvery
	}
	s := &Server{
		o: o, mux: http.NewServeMux(), hub: newHub(o.StreamBuffer), log: o.Logger,
		cop: http.NewCrossOriginProtection(), budget: newByteBudget(o.MaxResponseBytes),
		light: make(slots, o.MaxExpensive), heavy: make(slots, o.MaxExpensive),
		sessions: newSessions(), now: time.Now, branches: newBranches(),
	}
	for _, origin := range o.TrustedOrigins {
		if err := s.cop.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("server: trusted origin %q: %w", origin, err)
		}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.name = name
	s.keys, _ = o.Store.(store.Settings)
	s.settings = s.keys
	s.life.idle = make(chan struct{})
	s.life.ctx, s.life.cancel = context.WithCancel(context.Background())
	if root != nil {
		s.root, s.keys, s.sessions, s.cop, s.budget, s.light, s.heavy = root, root.keys, root.sessions, root.cop, root.budget, root.light, root.heavy
		s.log = s.log.With("project", name)
		s.now = func() time.Time { return root.now() }
	}
	s.alerts = newAlertEngine(&s.o)
	if ga, ok := o.Store.(store.GroupAppender); ok {
		s.group = &grouper{st: ga}
	}
	if o.RequireKeys && s.keys == nil {
		return nil, errors.New("server: API keys are required but this store cannot keep them (it does not implement store.Settings)")
	}
	bare := http.NewServeMux() // the routes alone, to tell 404 from 405
	for _, rt := range s.routes() {
		s.mux.Handle(rt.pattern, s.wrap(rt))
		bare.Handle(rt.pattern, http.NotFoundHandler())
	}
	if o.MCP != nil {
		// Not among routes(): it is no part of the JSON API that
		// openapi.json describes. Every method goes to the MCP transport.
		// Read keys may use it too: the token info the SDK's bearer
		// middleware hands to the tools carries the key's scope, and the
		// MCP server lets only admin keys call the tools that run or
		// delete.
		h := o.MCP
		if o.RequireKeys {
			h = auth.RequireBearerToken(s.mcpToken, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
		}
		s.mux.Handle("/mcp", s.wrap(route{"/mcp", scopeRead, cheap, h.ServeHTTP}))
	}
	s.startRetention()
	s.unwatch = watchCommits(o.Store, s.hub, s.log)
	if root != nil {
		return s, nil // a project's server: the root answers what no route takes
	}
	if o.Projects != nil {
		s.projects.stopSweep, s.projects.swept = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(s.projects.swept)
			s.sweepProjects(s.projects.stopSweep)
		}()
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			r2 := r.Clone(r.Context())
			r2.Method = m
			if _, pat := bare.Handler(r2); pat != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: method not allowed (allowed: %s)", clip(r.Method, 20), clip(r.URL.Path, 100), strings.Join(allow, ", ")))
			return
		}
		if o.UI != nil && !strings.HasPrefix(r.URL.Path, "/api/") && !strings.HasPrefix(r.URL.Path, "/v1/") {
			o.UI.ServeHTTP(w, r)
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s (see /api/v1/openapi.json)", clip(r.Method, 20), clip(r.URL.Path, 100)))
	})
	return s, nil
}

// ServeHTTP implements http.Handler. Every request, the UI's included,
// must name this server in its Host (see Options.Hosts), and a
// state-changing one must not come from a page of another origin (see
// Options.TrustedOrigins).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	clearWriteDeadline(w)
	if !s.checkHost(w, r) || !s.checkOrigin(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close ends every live stream and refuses new ones, stops the
// scheduled retention passes (waiting for a running one) and cancels the
// running branches (waiting for them to store their end). Ingest and the
// API keep working.
func (s *Server) Close() {
	s.closeProjects()
	s.unwatch()
	s.hub.close()
	s.stopRetention()
	s.branches.stop()
	if s.closeParts != nil {
		if err := s.closeParts(); err != nil {
			s.log.Error("loupe serve: closing the project", "err", err)
		}
		s.closeParts = nil
	}
}

// NewHTTPServer returns an http.Server for h on addr with the collector's
// timeouts: 10 s to read request headers (64 KiB at most), 2 min to read a
// body, 2 min idle keep-alive. There is no write timeout, because live
// streams last.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// scope is what a route needs of an API key.
type scope int

const (
	scopeNone   scope = iota // open to all (health)
	scopeIngest              // ingest or admin
	scopeRead                // read or admin
	scopeAdmin               // admin only
)

type route struct {
	pattern string // method and path, as http.ServeMux reads it
	need    scope
	cost    cost
	h       http.HandlerFunc
}

// cost says which slots a route's requests wait for.
type cost int

const (
	cheap cost = iota // no slot
	light             // Server.light: bounded pages, aggregates
	heavy             // Server.heavy: whole traces, search hits
)

// routes is every endpoint; the OpenAPI test checks it against
// openapi.json.
func (s *Server) routes() []route {
	return append([]route{
		{"GET /healthz", scopeNone, cheap, s.health},
		{"POST /v1/records", scopeIngest, cheap, s.postRecords},
		{"POST /v1/traces", scopeIngest, cheap, s.postOTLP},
		{"POST /v1/logs", scopeIngest, cheap, s.postOTLPLogs},
		{"GET /api/v1/traces", scopeRead, light, s.listTraces},
		{"GET /api/v1/traces/{id}", scopeRead, heavy, s.getTrace},
		{"DELETE /api/v1/traces/{id}", scopeAdmin, cheap, s.deleteTrace},
		{"GET /api/v1/search", scopeRead, heavy, s.search},
		{"GET /api/v1/aggregates", scopeRead, light, s.aggregates},
		{"GET /api/v1/evaluations", scopeRead, light, s.listEvaluations},
		{"GET /api/v1/evaluations/{id}", scopeRead, heavy, s.getEvaluation},
		{"GET /api/v1/sessions", scopeRead, light, s.listConversations},
		{"GET /api/v1/sessions/{id}", scopeRead, heavy, s.getConversation},
		{"GET /api/v1/stream", scopeRead, cheap, s.streamAll},
		{"GET /api/v1/traces/{id}/stream", scopeRead, cheap, s.streamTrace},
		{"GET /api/v1/traces/{id}/records", scopeRead, light, s.getRecords},
		{"GET /api/v1/retention", scopeRead, cheap, s.getRetention},
		{"PUT /api/v1/retention", scopeAdmin, cheap, s.putRetention},
		{"GET /api/v1/monitors", scopeRead, light, s.listMonitors},
		{"POST /api/v1/monitors", scopeAdmin, cheap, s.postMonitor},
		{"PUT /api/v1/monitors/{name}", scopeAdmin, cheap, s.replaceMonitor},
		{"DELETE /api/v1/monitors/{name}", scopeAdmin, cheap, s.deleteMonitor},
		{"GET /api/v1/alerts", scopeRead, light, s.listAlerts},
		{"GET /api/v1/openapi.json", scopeNone, cheap, s.openAPI},
		{"GET /api/v1/session", scopeRead, cheap, s.getSession},
		{"POST /api/v1/session", scopeNone, cheap, s.postSession},
		{"DELETE /api/v1/session", scopeNone, cheap, s.deleteSession},
		{"POST /api/v1/scores", scopeIngest, cheap, s.postScores},
		{"GET /api/v1/scores", scopeRead, light, s.listScores},
		{"DELETE /api/v1/scores/{id}", scopeAdmin, cheap, s.deleteScore},
		{"GET /api/v1/scores/stats", scopeRead, light, s.scoreStats},
		{"GET /api/v1/score-configs", scopeRead, cheap, s.getScoreConfigs},
		{"PUT /api/v1/score-configs", scopeAdmin, cheap, s.putScoreConfig},
		{"POST /api/v1/traces/{id}/branch", scopeAdmin, heavy, s.postBranch},
		{"GET /api/v1/traces/diff", scopeRead, heavy, s.getDiff},
		{"GET /api/v1/branch", scopeRead, cheap, s.getBranchConfig},
		{"GET /api/v1/rules", scopeRead, light, s.listRules},
		{"POST /api/v1/rules", scopeAdmin, cheap, s.addRule},
		{"POST /api/v1/rules/{name}/pause", scopeAdmin, cheap, s.pauseRule},
		{"POST /api/v1/rules/{name}/resume", scopeAdmin, cheap, s.resumeRule},
		{"DELETE /api/v1/rules/{name}", scopeAdmin, cheap, s.deleteRule},
		{"GET /api/v1/projects", scopeRead, cheap, s.listProjects},
		{"POST /api/v1/projects", scopeAdmin, cheap, s.postProject},
		{"DELETE /api/v1/projects/{name}", scopeAdmin, cheap, s.deleteProject},
	}, s.datasetRoutes()...)
}

// serverWide are the routes that belong to no project: the root server
// answers them, whatever project a request names.
var serverWide = map[string]bool{
	"GET /healthz":             true,
	"GET /api/v1/openapi.json": true,
	"GET /api/v1/session":      true,
	"POST /api/v1/session":     true,
	"DELETE /api/v1/session":   true,
	"GET /api/v1/projects":     true,
	"POST /api/v1/projects":    true,

	"DELETE /api/v1/projects/{name}": true,
}

// wrap adds what every route gets: a recovered panic answers 500 instead
// of dropping the connection, and the API key check.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("loupe serve: panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeError(w, http.StatusInternalServerError, "internal error (logged by the server)")
			}
		}()
		if s.root == nil { // a project's server is reached through the root only, authorized
			var id *identity
			if s.o.RequireKeys && rt.need != scopeNone {
				v, ok := s.authorize(w, r, rt.need)
				if !ok {
					return
				}
				id = &v
				r = r.WithContext(context.WithValue(r.Context(), identityKey{}, v))
			}
			if !serverWide[rt.pattern] {
				sub, r2, done, ok := s.dispatchProject(w, r, requestProject(r, id))
				if !ok {
					return
				}
				defer done()
				if r = r2; sub != s {
					sub.mux.ServeHTTP(w, r)
					return
				}
			}
		}
		if rt.cost != cheap {
			sl := s.light
			if rt.cost == heavy {
				sl = s.heavy
			}
			if err := sl.enter(r.Context()); err != nil {
				if r.Context().Err() == nil {
					w.Header().Set("Retry-After", "5")
					writeError(w, http.StatusServiceUnavailable, "the server is busy with other large requests; retry in a few seconds")
				}
				return
			}
			hold := &slotHold{leave: sl.leave}
			defer hold.release()
			r = r.WithContext(context.WithValue(r.Context(), slotKey{}, hold))
		}
		rt.h(w, r)
	})
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// errorBody is the JSON of every error answer of /v1/records and /api/v1.
type errorBody struct {
	Error string `json:"error"`
	Index *int   `json:"index,omitempty"` // /v1/records: the bad record's position in the request, from 0
	Field string `json:"field,omitempty"` // /v1/records: the bad field
}

// storeError answers a failed store call: 404 for a missing trace, 400 for
// a rejected record, 503 (retry later) for anything else, so that senders
// retry rather than drop.
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error) {
	var re *store.RecordError
	var sv *store.SchemaVersionError
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Not err's text: the store's messages name its file.
		writeError(w, http.StatusNotFound, clip(r.URL.Path, 100)+": not found")
	case errors.As(err, &re):
		i := re.Index
		writeJSON(w, http.StatusBadRequest, errorBody{Error: clip(err.Error(), maxErrorText), Index: &i, Field: re.Field})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		writeError(w, 499, "request canceled")
	case errors.As(err, &sv):
		s.log.Error("loupe serve: store is read-only", "err", err)
		w.Header().Set("Retry-After", "60")
		writeError(w, http.StatusServiceUnavailable, "the store cannot be written by this version of loupe (its schema is newer); the server logged the details")
	default:
		s.log.Error("loupe serve: store error", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "the store failed; retry later (the server logged the details)")
	}
}
