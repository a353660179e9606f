// Package mcp gives agents tools from MCP (Model Context Protocol)
// servers, with the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// Connect reaches one server, over stdio (a command Loupe starts, no
// shell) or streamable HTTP (a URL, with headers), lists its tools and
// returns a Client. Each of the server's tools becomes an agent.Tool whose
// JSON Schema is the server's, and the Client is itself an agent.ToolChain,
// so it can be handed to a loop as it is:
//
//	c, err := mcp.Connect(ctx, mcp.Server{Name: "fs", Command: "mcp-server-filesystem", Args: []string{dir}})
//	…
//	defer c.Close()
//	loop := &agent.ReAct{Model: model, Tools: c}
//
// Several servers go into one agent.Toolbox with agent.NewToolbox(append(a.Tools(), b.Tools()...)...);
// set Server.Prefix when their tool names could collide.
//
// # Tracing
//
// Connecting inside a traced run records tool.discovered (the tool's name,
// its input schema) for each tool; agent.ReAct records them again for the
// run it starts. Calls made through the agent runtime (agent.CallTool,
// agent.CallTools, a ReAct loop) are tool spans like any other: tool.start
// with the arguments, then tool.end, or tool.error when the call failed,
// with the duration and an output naming the server and the tool and
// holding the result's text, its raw content blocks when they are not all
// text, its structured content and isError (see Result.JSON). A result the
// server marks isError reaches the model as an error result and is
// recorded as tool.error. Client.CallTool on its own records nothing.
//
// # Failures
//
// A timeout (Server.CallTimeout), a canceled context or a server that dies
// during a call ends that call with an *Error naming the server and the
// tool (and, for a stdio server, how it exited and the end of its stderr);
// the agent shows it to the model as the call's result and the run goes
// on. Once a server is gone, later calls fail at once with the same
// explanation. Nothing here panics on what a server sends.
package mcp
