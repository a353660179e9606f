package mcpserver

import (
	"context"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readOnlyTools are the tools a read key may call over HTTP; every other
// tool runs agents, evaluations or pipelines, or deletes, and needs an
// admin key.
var readOnlyTools = []string{"get_execution_trace", "list_traces", "search_traces", "list_sessions", "list_scores"}

// keyNameExtra is the key of TokenInfo.Extra under which package server's
// token verifier puts the API key's name (a string); add_score gives it
// as the score's author.
const keyNameExtra = "key_name"

// adminScope is the scope name package server puts in the token info of
// an admin key (server.ScopeAdmin).
const adminScope = "admin"

// checkScope refuses a tools/call of a tool that changes something when
// the request's key (the token info the HTTP transport carries, set by
// package server from the API key) is not an admin key. Without token
// info (stdio, or a collector without keys) every tool may be called.
func checkScope(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || call.Params == nil || slices.Contains(readOnlyTools, call.Params.Name) {
			return next(ctx, method, req)
		}
		if ex := call.GetExtra(); ex != nil && ex.TokenInfo != nil && !slices.Contains(ex.TokenInfo.Scopes, adminScope) {
			res := &mcp.CallToolResult{IsError: true}
			res.Content = []mcp.Content{&mcp.TextContent{Text: "tool " + clip(call.Params.Name) + " needs an admin key: a read key may call " + "get_execution_trace, list_traces, search_traces, list_sessions and list_scores"}}
			return res, nil
		}
		return next(ctx, method, req)
	}
}
