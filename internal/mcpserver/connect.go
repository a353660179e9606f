package mcpserver

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/loupe-dev/loupe/agent"
	mcpclient "github.com/loupe-dev/loupe/mcp"
)

// connectMCP is the default ConnectFunc: package mcp's client, over stdio
// for a command and streamable HTTP for a URL. The connection lives as
// long as ctx (see package mcp's Connect).
func connectMCP(ctx context.Context, s MCPServerConfig) ([]agent.Tool, func() error, error) {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, k+"="+s.Env[k])
	}
	c, err := mcpclient.Connect(ctx, mcpclient.Server{
		Name: s.Name, Command: s.Command, Args: s.Args, Env: env, Dir: s.Dir,
		URL: s.URL, Headers: s.Headers, CallTimeout: s.callTimeout, Prefix: s.Prefix,
	})
	if err != nil {
		return nil, nil, err
	}
	if len(c.Tools()) == 0 {
		c.Close()
		return nil, nil, fmt.Errorf("the server offers no tools")
	}
	return c.Tools(), c.Close, nil
}
