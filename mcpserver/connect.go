package mcpserver

import (
	"context"
	"errors"

	"github.com/loupe-dev/loupe/agent"
)

// connectMCP is the default ConnectFunc. This build has no MCP client
// yet (package mcp, on its way), so an agent config with mcp_servers
// fails at start-up with an error saying so.
func connectMCP(_ context.Context, s MCPServerConfig) ([]agent.Tool, func() error, error) {
	return nil, nil, errors.New("this loupe has no MCP client built in yet, so it cannot use tools from MCP servers; remove mcp_servers from the config")
}
