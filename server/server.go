// Package server is Loupe's collector: the HTTP handler behind `loupe
// serve`. On one port it serves
//
//   - ingest: POST /v1/records (Loupe records, NDJSON or a JSON array,
//     optionally gzip) and POST /v1/traces (OTLP/HTTP, protobuf or JSON,
//     optionally gzip, mapped to records by package otlp);
//   - the JSON API under /api/v1: traces (list with filters and cursor
//     pagination), search, one trace, delete, aggregates, evaluation runs
//     and their case results;
//   - live streams (Server-Sent Events): /api/v1/stream and
//     /api/v1/traces/{id}/stream, fed from ingest, resumable with
//     Last-Event-ID;
//   - its OpenAPI document at /api/v1/openapi.json;
//   - optionally, Loupe's MCP server at /mcp (Options.MCP).
//
// Every ingest request is answered only after its records are committed
// to the store, in one Append: a request is stored whole or not at all.
// The server keeps no state a second server would need (the live streams
// see the ingest of their own process; their backlog comes from the
// store), so several servers can share one PostgreSQL store.
//
// With Options.RequireKeys, every request but /healthz needs an API key
// (Authorization: Bearer …; see CreateKey) whose scope allows it: ingest
// keys may only ingest, read keys may only read, admin keys may do both
// and delete.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

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
}

// Server is the collector's http.Handler. Create it with New; it is safe
// for concurrent use. Close ends the live streams (call it before
// http.Server.Shutdown, which otherwise waits for them).
type Server struct {
	o    Options
	mux  *http.ServeMux
	hub  *hub
	log  *slog.Logger
	keys store.Settings // nil when the store keeps no settings
}

// New returns a Server for o.
func New(o Options) (*Server, error) {
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
	s := &Server{o: o, mux: http.NewServeMux(), hub: newHub(o.StreamBuffer), log: o.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.keys, _ = o.Store.(store.Settings)
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
		s.mux.Handle("/mcp", s.wrap(route{"/mcp", scopeAdmin, o.MCP.ServeHTTP}))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{"GET", "POST", "DELETE"} {
			r2 := r.Clone(r.Context())
			r2.Method = m
			if _, pat := bare.Handler(r2); pat != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		if o.UI != nil && !strings.HasPrefix(r.URL.Path, "/api/") && !strings.HasPrefix(r.URL.Path, "/v1/") {
			o.UI.ServeHTTP(w, r)
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s (see /api/v1/openapi.json)", r.Method, r.URL.Path))
	})
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every live stream and refuses new ones. Ingest and the API
// keep working.
func (s *Server) Close() { s.hub.close() }

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
	h       http.HandlerFunc
}

// routes is every endpoint; the OpenAPI test checks it against
// openapi.json.
func (s *Server) routes() []route {
	return []route{
		{"GET /healthz", scopeNone, s.health},
		{"POST /v1/records", scopeIngest, s.postRecords},
		{"POST /v1/traces", scopeIngest, s.postOTLP},
		{"GET /api/v1/traces", scopeRead, s.listTraces},
		{"GET /api/v1/traces/{id}", scopeRead, s.getTrace},
		{"DELETE /api/v1/traces/{id}", scopeAdmin, s.deleteTrace},
		{"GET /api/v1/search", scopeRead, s.search},
		{"GET /api/v1/aggregates", scopeRead, s.aggregates},
		{"GET /api/v1/evaluations", scopeRead, s.listEvaluations},
		{"GET /api/v1/evaluations/{id}", scopeRead, s.getEvaluation},
		{"GET /api/v1/stream", scopeRead, s.streamAll},
		{"GET /api/v1/traces/{id}/stream", scopeRead, s.streamTrace},
		{"GET /api/v1/openapi.json", scopeNone, s.openAPI},
	}
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
		if s.o.RequireKeys && rt.need != scopeNone {
			if !s.authorize(w, r, rt.need) {
				return
			}
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

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// storeError answers a failed store call: 404 for a missing trace, 400 for
// a rejected record, 503 (retry later) for anything else, so that senders
// retry rather than drop.
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error) {
	var re *store.RecordError
	var sv *store.SchemaVersionError
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.As(err, &re):
		i := re.Index
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error(), Index: &i})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		writeError(w, 499, "request canceled")
	case errors.As(err, &sv):
		s.log.Error("loupe serve: store is read-only", "err", err)
		w.Header().Set("Retry-After", "60")
		writeError(w, http.StatusServiceUnavailable, "the store cannot be written: "+err.Error())
	default:
		s.log.Error("loupe serve: store error", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "the store failed; retry later: "+err.Error())
	}
}
