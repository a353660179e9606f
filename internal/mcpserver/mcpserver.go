// Package mcpserver is Loupe as an MCP server (`loupe mcp`, and /mcp on
// `loupe serve`): another agent — Claude Desktop, an IDE, Codex — runs an
// agent through it and reads, searches and evaluates the traces Loupe
// stores. It is built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) and offers nine tools, with
// the argument and result shapes of the omni tracer's MCP tools where it
// has them:
//
//   - run_agent_with_trace: run the configured agent (Config) or Loupe's
//     demo agent on a query; returns the result, success, thinking, steps,
//     trace summary and memory pool, and stores the trace;
//   - get_execution_trace: one stored trace (steps paged, memory on
//     request);
//   - list_traces: stored runs, newest first (limit, offset);
//   - search_traces: the store's search language (store.ParseQuery) plus
//     step type, duration and success filters;
//   - list_sessions, list_scores: sessions (the runs of one
//     conversation) and the scores of a trace or a session (quality.go);
//   - add_score: score a trace, a span or a session (source api, the API
//     key's name as author; an admin key's tool over HTTP, see scope.go);
//   - delete_trace: remove a stored trace;
//   - run_eval: grade an AgentV eval file against stored traces or the
//     configured agent (package evalrun).
//
// Arguments are typed structs whose JSON Schemas the SDK checks before a
// handler runs; what goes wrong in a call comes back as a tool error
// (IsError, with what was wrong and what to do), never as a protocol
// error. Results are bounded (Options.MaxResultBytes): long values are
// cut with a visible marker and long step lists are paged. Every trace
// leaves through redaction (package redact) unless Options.NoRedact.
//
// No answer repeats the client's input without a bound: ids, paths,
// queries and names are cut to a few hundred bytes in results and
// errors, and every tool error is bounded, the SDK's refusals of bad
// arguments included. Nor does an answer reveal the server's insides: a
// failing store is reported as such, and its error, which names the
// store's file or DSN, goes to Options.Logger.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/redact"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Default bounds of what a tool returns; see Options.
const (
	DefaultMaxResultBytes = 256 << 10
	DefaultMaxValueBytes  = 4 << 10
)

// PipelineFunc runs the pipeline file with params, recording it with
// tracer (the pipeline is the root run), and returns its outcome as an
// agent.Result (Answer, Records, Termination, Err, TraceID). The error is
// for a pipeline that could not start (a file that does not validate);
// a pipeline that ran and failed reports it in Result.Err. It is called
// concurrently, once per run_agent_with_trace call; the Server stores the
// returned Records.
type PipelineFunc func(ctx context.Context, tracer *trace.Tracer, file string, params map[string]string) (agent.Result, error)

// Options configure a Server. Store is required; the zero value of every
// other field is useful.
type Options struct {
	// Store keeps the traces of the runs made through MCP and answers the
	// trace tools. The caller opens and closes it; it must be safe for
	// concurrent use (every store.Store is).
	Store store.Store

	// Config says what run_agent_with_trace runs; nil runs Loupe's demo
	// agent (package demo: a scripted model with real tools, offline).
	Config *Config

	// DemoDir is the folder the demo agent's file search looks in; ""
	// means the current directory.
	DemoDir string

	// EvalRoot is the folder run_eval's files must be in (a path outside
	// it is refused, so that a client cannot make the server read, or run
	// the code graders of, any file); "" means the current directory.
	EvalRoot string

	// RunPipeline runs a config's "pipeline:" file. nil means
	// RunPipelineFile (package pipeline, offline by default).
	RunPipeline PipelineFunc

	// Connect opens the MCP servers of an agent config as tools. nil means
	// the MCP client of this build (see connectMCP).
	Connect ConnectFunc

	// Redactor scrubs secrets from every trace a tool returns and from
	// the records of runs made through MCP; nil means redact.Default(),
	// the collector's default. NoRedact turns redaction off.
	Redactor *redact.Redactor
	NoRedact bool

	// MaxResultBytes bounds the JSON a tool returns (steps are paged to
	// fit); MaxValueBytes bounds each input, output or thinking value in
	// it (longer ones are cut, with a marker saying how much). Zero means
	// the defaults.
	MaxResultBytes, MaxValueBytes int

	// Version is the server version reported to clients.
	Version string

	// Logger receives what the server keeps from its clients: the errors
	// of a failing store and the panics of tools. nil means
	// slog.Default().
	Logger *slog.Logger
}

// ConnectFunc connects to one MCP server of an agent config and returns
// its tools and a function that closes the connection. The tools are
// shared by every run, so they must be safe for concurrent use; the
// connection should last until ctx is done or the close function is
// called.
type ConnectFunc func(ctx context.Context, s MCPServerConfig) (tools []agent.Tool, closeFn func() error, err error)

// Server is Loupe's MCP server. Create it with New; it is safe for
// concurrent use by any number of sessions, over any transports at once.
// Close it to close the connections to the config's MCP servers.
type Server struct {
	o      Options
	st     store.Store // o.Store, its errors marked (taggedStore)
	log    *slog.Logger
	mcp    *mcp.Server
	rd     *redact.Redactor // nil when NoRedact
	tools  []agent.Tool     // from the config's MCP servers, connected in New
	closes []func() error

	// life is canceled by Close; it ends the HTTP requests that Handler
	// holds open (the streams of server-sent events), which would
	// otherwise keep an http.Server's Shutdown waiting.
	life     context.Context
	stopLife context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// New returns a Server for o. With an agent config that names MCP
// servers, it connects to them now, so that a server that cannot be
// reached fails here, not on the first run; the connections last until
// ctx is done or Close is called, so pass a context that lives as long as
// the Server.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("mcpserver: Options.Store is nil; open a store (store.Open) and pass it")
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = DefaultMaxValueBytes
	}
	if o.DemoDir == "" {
		o.DemoDir = "."
	}
	if o.EvalRoot == "" {
		o.EvalRoot = "."
	}
	root, err := filepath.Abs(o.EvalRoot)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: EvalRoot %q: %w", o.EvalRoot, err)
	}
	o.EvalRoot = root
	if o.Connect == nil {
		o.Connect = connectMCP
	}
	s := &Server{o: o, st: taggedStore{o.Store}, log: o.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.life, s.stopLife = context.WithCancel(context.Background())
	if !o.NoRedact {
		s.rd = o.Redactor
		if s.rd == nil {
			s.rd = redact.Default()
		}
	}
	if c := o.Config; c != nil && c.Agent != nil {
		for i, sc := range c.Agent.MCPServers {
			tools, closeFn, err := o.Connect(ctx, sc)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("%s: MCP server %q: %w", c.at(fmt.Sprintf("server %d", i)), sc.Name, err)
			}
			if closeFn != nil {
				s.closes = append(s.closes, closeFn)
			}
			s.tools = append(s.tools, tools...)
		}
		// Build one agent now so that a bad model spec or clashing tool
		// names fail at start-up rather than on every call.
		if _, _, err := s.newAgent(nil); err != nil {
			s.Close()
			return nil, err
		}
	}
	version := o.Version
	if version == "" {
		version = "dev"
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "loupe", Title: "Loupe: traces of AI-agent runs", Version: version},
		&mcp.ServerOptions{Instructions: instructions})
	s.mcp.AddReceivingMiddleware(s.boundErrors, checkScope)
	s.addTools()
	return s, nil
}

const instructions = `Loupe records AI-agent runs as traces. Use run_agent_with_trace to run the configured agent on a query and see how it worked (steps, thinking, memory); list_traces and search_traces to find stored runs; get_execution_trace to read one (steps are paged: pass step_offset); run_eval to grade runs against an AgentV eval file; delete_trace to remove one.`

// MCP returns the underlying SDK server, for transports this package does
// not wire (mcp.Server.Run or Connect with any mcp.Transport).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// ServeStdio serves one session over standard input and output until the
// client disconnects or ctx is done.
func (s *Server) ServeStdio(ctx context.Context) error {
	err := s.mcp.Run(ctx, &mcp.StdioTransport{})
	if ctx.Err() != nil {
		return nil // interrupted: not a failure
	}
	return err
}

// Handler returns the streamable HTTP transport (sessions included) as an
// http.Handler, to mount at /mcp; call it once, since each handler keeps
// its own sessions. It applies the SDK's DNS-rebinding protection;
// authentication is the caller's (package server puts its API keys in
// front of it). Close ends the requests it holds open.
func (s *Server) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil)
	// A web page the user visits must not drive the tools (run agents,
	// delete traces) through the user's browser: cross-origin browser
	// requests are refused. The SDK already refuses DNS rebinding.
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := cop.Check(r); err != nil {
			http.Error(w, "loupe mcp: cross-origin requests from a browser are refused", http.StatusForbidden)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(s.life, cancel)()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Close ends the HTTP streams Handler holds open and closes the
// connections to the config's MCP servers. The store is the caller's. It
// is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.stopLife()
		var errs []error
		for _, c := range s.closes {
			errs = append(errs, c())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
