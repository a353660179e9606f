package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Bounds of what a tool's answer repeats of the client's input, and of
// its error messages.
const (
	// maxEcho bounds a client value (an id, a path, a query, a name)
	// repeated in an error or a result: see clip.
	maxEcho = 200
	// maxErrorBytes bounds the message of a tool error (see boundText),
	// whoever wrote it: this package, another of Loupe's or the SDK
	// (which quotes the arguments its schema check refuses).
	maxErrorBytes = 2000
	// markerRoom is the most truncate adds to the n bytes it keeps: the
	// marker "…[truncated: N of M bytes shown]" with numbers of up to 19
	// digits. A text within a bound plus markerRoom is left as it is, so
	// that bounding a bounded text again changes nothing.
	markerRoom = 80
	// maxQuoteTries bounds the quoted strings boundText looks at in one
	// message, so that it takes linear time whatever the message holds.
	maxQuoteTries = 32
)

// Messages for failures that are not the client's, whose details stay in
// the server's log.
const (
	storeFailedMsg = "the trace store failed; the server logged the details. Retry later, or ask the server's operator"
	internalMsg    = "internal error in Loupe's MCP server (a bug); the server logged the details. Please report it with the call's arguments"
)

// clip returns s, a client's value, cut to maxEcho bytes (see truncate),
// for repeating it in an error or a result.
func clip(s string) string { return truncate(s, maxEcho) }

// clipAll returns msg, a message another package wrote, with every
// occurrence of each of values (the client's input, which the message may
// repeat) clipped, unless the value is no longer than a clipped one can be
// (maxEcho plus markerRoom bytes).
func clipAll(msg string, values ...string) string {
	var long []string
	for _, v := range values {
		if len(v) > maxEcho+markerRoom && len(v) <= len(msg) {
			long = append(long, v)
		}
	}
	// Longest first: a value may hold another.
	slices.SortFunc(long, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, v := range long {
		msg = strings.ReplaceAll(msg, v, clip(v))
	}
	return msg
}

// boundText returns msg bounded for a client: every Go-quoted string in
// it (as %q writes them) is clipped, and the whole is cut to
// maxErrorBytes. Each cut is marked (see truncate). Clipping quoted
// strings rather than only cutting the end keeps what usually follows a
// quoted value: what is wrong with it. A quoted string or a message
// within its bound plus markerRoom is left as it is, so that boundText of
// a bounded text returns it unchanged.
func boundText(msg string) string {
	if len(msg) <= maxEcho+markerRoom {
		return msg
	}
	var b strings.Builder
	rest := msg
	for tries := 0; tries < maxQuoteTries; tries++ {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			b.WriteByte('"')
			rest = rest[1:]
			continue
		}
		rest = rest[len(q):]
		if u, err := strconv.Unquote(q); err == nil && len(u) > maxEcho+markerRoom {
			q = strconv.Quote(clip(u))
		}
		b.WriteString(q)
	}
	b.WriteString(rest)
	out := b.String()
	if len(out) > maxErrorBytes+markerRoom {
		out = truncate(out, maxErrorBytes)
	}
	return out
}

// toolError is a failed call's message: what was wrong and what to do.
// The message is bounded (boundText); values from the client should be
// clipped in args all the same, so that their bound does not depend on
// how they are formatted.
func toolError(format string, args ...any) error {
	return errors.New(boundText(fmt.Sprintf(format, args...)))
}

// notFound words a missing trace for a client.
func notFound(id string) error {
	return toolError("no trace %s in the store; list_traces or search_traces show the ids there are", clip(id))
}

// storeFailure marks an error returned by the Server's store (see
// taggedStore), however it was wrapped on its way back.
type storeFailure struct{ err error }

func (e *storeFailure) Error() string { return e.err.Error() }
func (e *storeFailure) Unwrap() error { return e.err }

func failure(err error) error {
	if err == nil {
		return nil
	}
	return &storeFailure{err}
}

// taggedStore is Options.Store as the Server uses it: every error its
// methods return is a *storeFailure. The store's messages name its file
// or DSN and may hold SQL; marked, they are recognized after passing
// through packages that wrap them (tracesview, evalrun) or return them
// among their own, and never reach a client as they are (see
// Server.storeError).
type taggedStore struct{ store.Store }

func (s taggedStore) Append(ctx context.Context, recs []trace.Record) (int, error) {
	n, err := s.Store.Append(ctx, recs)
	return n, failure(err)
}

func (s taggedStore) Trace(ctx context.Context, id trace.TraceID) (*store.Trace, error) {
	t, err := s.Store.Trace(ctx, id)
	return t, failure(err)
}

func (s taggedStore) List(ctx context.Context, q store.ListQuery) (store.ListPage, error) {
	p, err := s.Store.List(ctx, q)
	return p, failure(err)
}

func (s taggedStore) Search(ctx context.Context, q store.Query) (store.SearchPage, error) {
	p, err := s.Store.Search(ctx, q)
	return p, failure(err)
}

func (s taggedStore) Export(ctx context.Context, f store.Filter) iter.Seq2[trace.Record, error] {
	return func(yield func(trace.Record, error) bool) {
		for r, err := range s.Store.Export(ctx, f) {
			if !yield(r, failure(err)) {
				return
			}
		}
	}
}

func (s taggedStore) Delete(ctx context.Context, ids ...trace.TraceID) (int, error) {
	n, err := s.Store.Delete(ctx, ids...)
	return n, failure(err)
}

func (s taggedStore) Prune(ctx context.Context, p store.PrunePolicy) (store.PruneResult, error) {
	r, err := s.Store.Prune(ctx, p)
	return r, failure(err)
}

func (s taggedStore) Aggregate(ctx context.Context, since, until time.Time) (store.Aggregates, error) {
	a, err := s.Store.Aggregate(ctx, since, until)
	return a, failure(err)
}

// storeError returns what a client is told of err, an error the store
// returned while the server was doing what (for the log). A query the
// store refuses (*store.QueryError) or a record it refuses
// (*store.RecordError) is told in that error's own words, which are
// about the query or the record; the text around it, such as the
// store's file name, is left out. Any other error is the store failing:
// the client gets storeFailedMsg and the error goes to the log. A missing
// trace (store.ErrNotFound) is the caller's to word, with the id it was
// given (notFound), since the store's message names its file.
func (s *Server) storeError(ctx context.Context, what string, err error) error {
	var qe *store.QueryError
	var re *store.RecordError
	switch {
	case errors.As(err, &qe):
		return toolError("%s: %s", what, qe.Error())
	case errors.As(err, &re):
		return toolError("%s: %s", what, re.Error())
	}
	level := slog.LevelError
	if ctx.Err() != nil {
		level = slog.LevelWarn // the call was canceled or timed out
	}
	s.log.Log(ctx, level, "MCP server: the trace store failed", "while", what, "err", err)
	return toolError("%s: %s", what, storeFailedMsg)
}

// isStoreFailure reports whether err came from the store (see
// taggedStore).
func isStoreFailure(err error) bool {
	var sf *storeFailure
	return errors.As(err, &sf)
}

// safe turns a panic in h into a tool error, so that a bug in one call
// neither crashes the server (which would end every session over stdio)
// nor leaves the client without an answer. The panic and its stack go to
// log, not to the client.
func safe[In, Out any](log *slog.Logger, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out Out, err error) {
		defer func() {
			if p := recover(); p != nil {
				var zero Out
				name := ""
				if req != nil && req.Params != nil {
					name = req.Params.Name
				}
				log.Error("MCP server: a tool panicked", "tool", clip(name), "panic", p, "stack", string(debug.Stack()))
				res, out, err = nil, zero, errors.New(internalMsg)
			}
		}()
		return h(ctx, req, in)
	}
}

// boundErrors is the receiving middleware that bounds what every tool
// call answers in error, whoever wrote the error: the text of a tool
// error (the SDK's refusals of arguments repeat them whole) and the
// message of a protocol error (an unknown tool's name) have the call's
// long strings clipped wherever they repeat them (clipAll) and are then
// bounded (boundText). A protocol error that is not a JSON-RPC error (the
// SDK's own failures, such as a result that does not match its schema)
// is logged and answered with internalMsg.
func (s *Server) boundErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" {
			return res, err
		}
		bound := func(text string) string {
			if len(text) <= maxEcho+markerRoom {
				return text
			}
			return boundText(clipAll(text, callStrings(req)...))
		}
		if err != nil {
			var we *jsonrpc.Error
			if errors.As(err, &we) {
				bounded := *we
				bounded.Message = bound(we.Message)
				return nil, &bounded
			}
			s.log.Error("MCP server: a tool call failed", "err", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: internalMsg}
		}
		if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					tc.Text = bound(tc.Text)
				}
			}
		}
		return res, nil
	}
}

// callStrings returns the strings of a tool call longer than clipAll
// leaves as they are: the tool's name, and the keys and string values of
// its arguments, at any depth.
func callStrings(req mcp.Request) []string {
	r, ok := req.(*mcp.CallToolRequest)
	if !ok || r.Params == nil {
		return nil
	}
	var out []string
	add := func(s string) {
		if len(s) > maxEcho+markerRoom {
			out = append(out, s)
		}
	}
	add(r.Params.Name)
	var args any
	if json.Unmarshal(r.Params.Arguments, &args) != nil {
		return out
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			add(v)
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for k, x := range v {
				add(k)
				walk(x)
			}
		}
	}
	walk(args)
	return out
}
