package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/trace"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxResultBytes is how much of one call's result a Client keeps
// when Server.MaxResultBytes is zero: the text, the raw content and the
// structured content are each cut (the text) or dropped (the others) past
// it. The SDK itself refuses a single message over 16 MiB.
const DefaultMaxResultBytes = 1 << 20

// A Server says how to reach one MCP server: set Command for a server
// over stdio or URL for one over streamable HTTP, not both. The zero
// values of the other fields are useful.
type Server struct {
	// Name is the server's name in errors and traces (and, with Prefix,
	// in tool names). Empty means the command's base name or the URL's
	// host.
	Name string

	// Command is the program Loupe starts and talks to over its stdin and
	// stdout. It is run as given, with Args, never through a shell; a
	// name without a slash is looked up in PATH. Its stderr is kept (the
	// last 8 KiB) to explain a failure.
	Command string
	Args    []string
	// Env is added to Loupe's own environment for the command ("KEY=value";
	// a key given here wins).
	Env []string
	// Dir is the command's working directory; empty means Loupe's.
	Dir string

	// URL is the endpoint of a server over streamable HTTP.
	URL string
	// Headers are set on every HTTP request, for example
	// {"Authorization": "Bearer …"}.
	Headers map[string]string
	// HTTPClient makes the requests; nil means http.DefaultClient. It is
	// copied, not modified.
	HTTPClient *http.Client

	// CallTimeout bounds each tool call; 0 means only the call's context
	// does. A call that times out fails with an *Error, the server is
	// told to cancel it, and the connection stays usable.
	CallTimeout time.Duration
	// Prefix makes tool names "<Name>__<tool>", for agents that use
	// several servers whose tool names could collide. Characters of Name
	// that model APIs refuse in tool names (anything but ASCII letters,
	// digits, _ and -) become _.
	Prefix bool
	// MaxResultBytes bounds what is kept of one call's result (see
	// DefaultMaxResultBytes): longer text is cut with a marker saying so,
	// longer raw or structured content is dropped. 0 means
	// DefaultMaxResultBytes; negative means no limit.
	MaxResultBytes int
}

// name returns the server's name, or a default when Name is empty.
func (s *Server) name() string {
	switch {
	case s.Name != "":
		return s.Name
	case s.Command != "":
		return filepath.Base(s.Command)
	case s.URL != "":
		if u, err := url.Parse(s.URL); err == nil && u.Host != "" {
			return u.Host
		}
		return s.URL
	}
	return "mcp"
}

// check reports what is wrong with s, if anything.
func (s *Server) check() error {
	switch {
	case s.Command != "" && s.URL != "":
		return errors.New("both Command and URL are set; set Command for a server over stdio or URL for one over streamable HTTP")
	case s.Command == "" && s.URL == "":
		return errors.New("neither Command nor URL is set; set Command for a server over stdio or URL for one over streamable HTTP")
	case s.URL != "":
		u, err := url.Parse(s.URL)
		if err != nil {
			return fmt.Errorf("URL %q: %v", s.URL, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("URL %q: want an http:// or https:// URL with a host", s.URL)
		}
	}
	return nil
}

// A Client is a connection to one MCP server and the tools it offers. It
// is an agent.ToolChain, so it can serve a loop directly. It is safe for
// concurrent use; Close it when done.
type Client struct {
	name      string
	timeout   time.Duration
	maxResult int // < 0: no limit
	sess      *mcpsdk.ClientSession
	proc      *proc // the stdio server's process; nil for other transports
	tools     []agent.Tool
	defs      []agent.ToolDef
	byName    map[string]*serverTool // by the name in defs

	closing   atomic.Pointer[string] // why the client is closing, once it is
	done      chan struct{}          // closed when the session has ended
	gone      error                  // why the session ended; set before done is closed
	closeOnce sync.Once
	closeErr  error
	stopCtx   func() bool // stops the watch on Connect's context
	endHTTP   func()      // aborts the HTTP requests still in flight
}

// Connect starts or reaches the server s, opens an MCP session, lists its
// tools and returns a Client for them. Inside a traced run (ctx carries a
// trace.ExecutionContext) it records tool.discovered for each tool.
//
// ctx bounds the connection, not just the connecting: when ctx is done
// the session is closed and a stdio server's process is stopped, as by
// Close. A failure is an *Error naming the server (and, for a stdio
// server, how it exited and the end of its stderr).
func Connect(ctx context.Context, s Server) (*Client, error) {
	name := s.name()
	if err := s.check(); err != nil {
		return nil, &Error{Server: name, Err: err}
	}
	if s.Command != "" {
		p, err := startProc(s)
		if err != nil {
			return nil, &Error{Server: name, Err: err}
		}
		return connect(ctx, s, &mcpsdk.IOTransport{Reader: p.stdout, Writer: p.stdin}, p)
	}
	hc := http.DefaultClient
	if s.HTTPClient != nil {
		hc = s.HTTPClient
	}
	life, endLife := context.WithCancel(context.Background())
	hcc := *hc
	base := hcc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hcc.Transport = &httpTransport{base: base, headers: s.Headers, life: life}
	c, err := connect(ctx, s, &mcpsdk.StreamableClientTransport{
		Endpoint:   s.URL,
		HTTPClient: &hcc,
		// Loupe acts on nothing a server pushes between calls, and a
		// standing GET would only hold a connection open.
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		endLife()
		return nil, err
	}
	c.endHTTP = endLife
	return c, nil
}

// ConnectTransport is Connect over a transport of the caller's, for
// example one of mcpsdk.NewInMemoryTransports for a server in the same
// process. Of s it uses Name, CallTimeout, Prefix and MaxResultBytes;
// Command and URL must be empty.
func ConnectTransport(ctx context.Context, s Server, t mcpsdk.Transport) (*Client, error) {
	if s.Command != "" || s.URL != "" {
		return nil, &Error{Server: s.name(), Err: errors.New("ConnectTransport: Command and URL must be empty; use Connect for them")}
	}
	if t == nil {
		return nil, &Error{Server: s.name(), Err: errors.New("ConnectTransport: the transport is nil")}
	}
	return connect(ctx, s, t, nil)
}

// connect opens the session over t and lists the tools; p, when not nil,
// is the server's process, stopped if anything fails.
func connect(ctx context.Context, s Server, t mcpsdk.Transport, p *proc) (*Client, error) {
	c := &Client{
		name:      s.name(),
		timeout:   s.CallTimeout,
		maxResult: s.MaxResultBytes,
		proc:      p,
		done:      make(chan struct{}),
	}
	if c.maxResult == 0 {
		c.maxResult = DefaultMaxResultBytes
	}
	fail := func(what string, err error) (*Client, error) {
		e := &Error{Server: c.name, Err: fmt.Errorf("%s: %w", what, err)}
		if p != nil {
			p.stop(0)
			e.Exit, e.Stderr = p.exitText(), p.stderr.String()
		}
		return nil, e
	}
	if err := ctx.Err(); err != nil {
		return fail("connecting", err)
	}
	cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "loupe", Version: "1"}, &mcpsdk.ClientOptions{
		// No roots, sampling or elicitation: Loupe serves none of them,
		// and a server that sees "roots" may ask for them and wait.
		Capabilities: &mcpsdk.ClientCapabilities{},
	})
	sess, err := cl.Connect(ctx, t, nil)
	if err != nil {
		return fail("connecting", err)
	}
	c.sess = sess
	if err := c.listTools(ctx, s.Prefix); err != nil {
		closed := make(chan struct{})
		go func() { // over HTTP a DELETE a broken server may never answer
			sess.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(2 * time.Second):
		}
		return fail("listing tools", err)
	}
	go c.watch()
	c.stopCtx = context.AfterFunc(ctx, func() {
		c.shutdown("the context given to Connect is done ("+context.Cause(ctx).Error()+")", 0)
	})
	agent.DiscoverTools(trace.FromContext(ctx), c)
	return c, nil
}

// listTools makes an agent tool of each of the server's tools.
func (c *Client) listTools(ctx context.Context, prefix bool) error {
	c.byName = map[string]*serverTool{}
	for tl, err := range c.sess.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		if tl == nil || tl.Name == "" {
			return errors.New("the server listed a tool without a name")
		}
		schema := json.RawMessage(`{"type":"object"}`)
		if tl.InputSchema != nil {
			b, err := json.Marshal(tl.InputSchema)
			if err != nil {
				return fmt.Errorf("tool %q: encoding its input schema: %w", tl.Name, err)
			}
			schema = b
		}
		name := tl.Name
		if prefix {
			name = toolPrefix(c.name) + tl.Name
		}
		if _, dup := c.byName[name]; dup {
			return fmt.Errorf("the server lists two tools named %q", name)
		}
		st := &serverTool{c: c, tool: tl.Name, def: agent.ToolDef{Name: name, Description: tl.Description, Schema: schema}}
		c.byName[name] = st
		c.tools = append(c.tools, st)
		c.defs = append(c.defs, st.def)
	}
	return nil
}

// toolPrefix returns the prefix Server.Prefix puts before tool names.
func toolPrefix(server string) string {
	b := []byte(server)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b) + "__"
}

// watch waits for the session to end and records why.
func (c *Client) watch() {
	ended := make(chan struct{})
	go func() {
		c.sess.Wait()
		close(ended)
	}()
	if c.proc != nil {
		select {
		case <-ended:
		case <-c.proc.exited:
			// The server exited: its last words may still be in the pipe,
			// unless a process it started holds stdout open, which must not
			// keep calls waiting on a dead server.
			select {
			case <-ended:
			case <-time.After(time.Second):
				c.sess.Close()
				<-ended
			}
		}
	} else {
		<-ended
	}
	var gone error
	if why := c.closing.Load(); why != nil {
		gone = errors.New("the client is closed: " + *why)
	} else {
		gone = errors.New("the server closed the connection")
		if c.proc != nil {
			// How it exited explains more than the closed pipe.
			select {
			case <-c.proc.exited:
			case <-time.After(2 * time.Second):
			}
		}
	}
	c.gone = gone
	close(c.done)
}

// Name returns the server's name (Server.Name, or its default).
func (c *Client) Name() string { return c.name }

// Tools returns one agent.Tool per tool of the server, in the server's
// order. Each Tool's Definition carries the server's description and input
// JSON Schema (re-encoded: the same schema, keys in sorted order). The
// caller must not modify the slice.
func (c *Client) Tools() []agent.Tool { return c.tools }

// Definitions returns the tools' definitions, in the server's order; with
// Tools and Call it makes a Client an agent.ToolChain. The caller must not
// modify them.
func (c *Client) Definitions() []agent.ToolDef { return c.defs }

// Call calls the tool named call.Name (a name from Definitions, with the
// prefix if Server.Prefix is set), as an agent.ToolChain: see
// serverTool.Call for the output. An unknown name is an error listing the
// tools there are.
func (c *Client) Call(ctx context.Context, call agent.ToolCall) (json.RawMessage, error) {
	t, ok := c.byName[call.Name]
	if !ok {
		names := make([]string, len(c.defs))
		for i, d := range c.defs {
			names[i] = d.Name
		}
		slices.Sort(names)
		return nil, &Error{Server: c.name, Tool: call.Name, Err: fmt.Errorf("no such tool; the server's tools are: %s", strings.Join(names, ", "))}
	}
	return t.Call(ctx, call.Input)
}

// CallTool calls the server's tool named tool (its own name, without a
// prefix) with args, one JSON object (empty or null means {}). It records
// nothing: calls through the agent runtime (agent.CallTool with the Client
// as the chain) are the traced ones.
//
// A result the server marks isError comes back with an *Error whose
// Result is that result. A call that does not complete (timeout, ctx
// done, the server gone or failing) returns the zero Result and an
// *Error; when ctx itself is done the error wraps ctx.Err().
func (c *Client) CallTool(ctx context.Context, tool string, args json.RawMessage) (Result, error) {
	select {
	case <-c.done:
		return Result{}, c.goneError(tool)
	default:
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	} else if !json.Valid(args) {
		return Result{}, &Error{Server: c.name, Tool: tool, Err: errors.New("the arguments are not valid JSON")}
	}
	cctx := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	res, err := c.sess.CallTool(cctx, &mcpsdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return Result{}, c.callError(ctx, cctx, tool, err)
	}
	if res == nil {
		return Result{}, &Error{Server: c.name, Tool: tool, Err: errors.New("the server answered with no result")}
	}
	r := newResult(res, c.maxResult)
	if r.IsError {
		return r, &Error{Server: c.name, Tool: tool, Err: errors.New(errorText(r.Text)), Result: &r}
	}
	return r, nil
}

// maxErrorText bounds the text of an isError result in the error's
// message: the message is what the model reads and what a trace keeps
// uncut (Options.MaxValueBytes bounds values, not error texts), while
// Error.Result and the call's output hold the whole result.
const maxErrorText = 16 << 10

// errorText returns the message for an isError result whose text is text.
func errorText(text string) string {
	if text == "" {
		return "the tool reported an error (isError) without text"
	}
	if len(text) <= maxErrorText {
		return text
	}
	head := trace.TruncateUTF8(text, maxErrorText)
	return head + fmt.Sprintf(" [… %d more bytes in the result]", len(text)-len(head))
}

// callError explains why a call of tool failed with err.
func (c *Client) callError(ctx, cctx context.Context, tool string, err error) error {
	e := &Error{Server: c.name, Tool: tool}
	switch {
	case ctx.Err() != nil:
		e.Err = fmt.Errorf("the call was abandoned: %w", context.Cause(ctx))
		if !errors.Is(e.Err, ctx.Err()) {
			e.Err = fmt.Errorf("%w (%w)", e.Err, ctx.Err())
		}
		return e
	case cctx.Err() != nil:
		e.Err = fmt.Errorf("no answer within %v (Server.CallTimeout); the call was abandoned and the server asked to cancel it: %w", c.timeout, context.DeadlineExceeded)
		return e
	}
	// The server dying shows as a closed connection; wait a little for
	// the session to end, to say how.
	wait := 200 * time.Millisecond
	if errors.Is(err, mcpsdk.ErrConnectionClosed) {
		wait = 3 * time.Second
	}
	select {
	case <-c.done:
		return c.goneError(tool)
	case <-time.After(wait):
	}
	e.Err = err
	return e
}

// goneError is the error of a call of tool on a session that has ended.
func (c *Client) goneError(tool string) error {
	e := &Error{Server: c.name, Tool: tool, Err: c.gone}
	if c.proc != nil && c.closing.Load() == nil {
		e.Exit, e.Stderr = c.proc.exitText(), c.proc.stderr.String()
	}
	return e
}

// Close ends the session and, for a stdio server, stops its process:
// its stdin is closed, as the protocol asks, then it gets SIGTERM after
// two seconds and SIGKILL two seconds later; the process is always
// reaped. Calls in progress fail; later calls fail at once. Close is
// idempotent and safe to call concurrently with calls.
//
// Close reports an error only when a stdio server's process outlived even
// SIGKILL: a server that is already gone, or an HTTP server that does not
// take the session's DELETE, leaves nothing for the caller to do.
func (c *Client) Close() error {
	c.shutdown("Client.Close was called", 2*time.Second)
	return c.closeErr
}

// shutdown closes the client once, for the reason why; grace is how long
// a stdio server gets to exit after its stdin is closed.
func (c *Client) shutdown(why string, grace time.Duration) {
	c.closeOnce.Do(func() {
		c.closing.Store(&why)
		if c.stopCtx != nil {
			c.stopCtx()
		}
		closed := make(chan struct{})
		go func() {
			// Over HTTP this sends a DELETE, which a server busy with a
			// call that ignores cancellation may never answer.
			c.sess.Close()
			close(closed)
		}()
		if c.proc != nil {
			if err := c.proc.stop(grace); err != nil {
				c.closeErr = &Error{Server: c.name, Err: err}
			}
		}
		select {
		case <-closed:
		case <-time.After(grace):
		}
		if c.endHTTP != nil {
			c.endHTTP()
		}
		select {
		case <-c.done:
		case <-time.After(5 * time.Second): // a transport that never ends its session
		}
	})
}

// httpTransport sets headers on every request and ties each to the
// Client's life, so that closing the Client ends the requests still in
// flight (a call's stream, a DELETE the server does not answer).
type httpTransport struct {
	base    http.RoundTripper
	headers map[string]string
	life    context.Context
}

// RoundTrip sends a copy of req with the headers, canceled when the
// Client's life ends or the response body is closed.
func (t *httpTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.life.Err(); err != nil {
		return nil, errors.New("the client is closed")
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.life, cancel)
	done := sync.OnceFunc(func() { stop(); cancel() })
	req = req.Clone(ctx)
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		done()
		return nil, err
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

// doneBody calls done when closed.
type doneBody struct {
	io.ReadCloser
	done func()
}

// Close closes the body and releases its request's context.
func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// A serverTool is one of the server's tools as an agent.Tool.
type serverTool struct {
	c    *Client
	tool string // the server's name for it
	def  agent.ToolDef
}

// Definition returns the tool's name (with the prefix, if any), the
// server's description and its input schema.
func (t *serverTool) Definition() agent.ToolDef { return t.def }

// Call calls the tool and returns the result as Result.JSON shows it,
// naming the server and the tool. A result the server marks isError is
// returned too, with an *Error, so that the model sees an error and the
// trace a failed call that keeps the result.
func (t *serverTool) Call(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
	r, err := t.c.CallTool(ctx, t.tool, input)
	if err != nil && !r.IsError {
		return nil, err
	}
	return r.JSON(t.c.name, t.tool), err
}
