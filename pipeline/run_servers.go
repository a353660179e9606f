package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/loupe-dev/loupe/mcp"
	"github.com/loupe-dev/loupe/pipeline/builtin"
)

// A ToolServer runs the tools of one of a pipeline's servers for a run.
// Implementations must be safe for concurrent use.
type ToolServer interface {
	// CallTool calls tool with args and returns its result: a JSON-like
	// value (map[string]any, []any, string, float64, bool or nil), most
	// often an object whose keys a step's output keeps.
	CallTool(ctx context.Context, tool string, args map[string]any) (any, error)
	// Close releases the server (stops its process, closes its session).
	Close() error
}

// builtinServer adapts a builtin.Server.
type builtinServer struct{ s builtin.Server }

func (b builtinServer) CallTool(ctx context.Context, tool string, args map[string]any) (any, error) {
	return b.s.Call(ctx, tool, args)
}
func (b builtinServer) Close() error { return b.s.Close() }

func (b builtinServer) argNames(tool string) ([]string, bool) {
	for _, t := range b.s.Tools() {
		if t.Name == tool {
			return t.Reads, true
		}
	}
	return nil, false
}

// argNamer is a ToolServer that knows the arguments a tool reads.
type argNamer interface {
	argNames(tool string) ([]string, bool)
}

// mcpServer adapts an MCP client. Its results are the tool's structured
// content when it has some, else its text decoded when it is a JSON
// object, else {"text": text}.
type mcpServer struct {
	c     *mcp.Client
	props map[string][]string // each tool's input properties, from its schema
}

func (m *mcpServer) CallTool(ctx context.Context, tool string, args map[string]any) (any, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encoding the arguments: %w", err)
	}
	res, err := m.c.CallTool(ctx, tool, b)
	if err != nil {
		return nil, err
	}
	var v any
	if len(res.Structured) > 0 && json.Unmarshal(res.Structured, &v) == nil {
		return v, nil
	}
	if t := strings.TrimSpace(res.Text); strings.HasPrefix(t, "{") && json.Unmarshal([]byte(t), &v) == nil {
		return v, nil
	}
	return map[string]any{"text": res.Text}, nil
}

func (m *mcpServer) Close() error { return m.c.Close() }

// argNames returns the input properties of tool's schema, if it has one.
func (m *mcpServer) argNames(tool string) ([]string, bool) {
	p, ok := m.props[tool]
	return p, ok
}

// connectMCP connects to the MCP server s declares: its command (never
// through a shell; only commands written in `servers` are started) or URL.
func connectMCP(ctx context.Context, p *Pipeline, s *Server) (ToolServer, error) {
	ms := mcp.Server{Name: s.Name}
	switch s.Kind {
	case ServerURL:
		ms.URL = s.Value
	case ServerCommand:
		if len(s.Argv) == 0 {
			return nil, fmt.Errorf("server %s (%s:%s) has no command", s.Name, p.File, s.ValuePos)
		}
		if err := checkCommand(p, s); err != nil {
			return nil, err
		}
		ms.Command, ms.Args = s.Argv[0], s.Argv[1:]
	default:
		return nil, fmt.Errorf("server %s (%s:%s) is %s, not an MCP server", s.Name, p.File, s.ValuePos, s.Kind)
	}
	c, err := mcp.Connect(ctx, ms)
	if err != nil {
		return nil, fmt.Errorf("server %s (%s:%s, %q): %w", s.Name, p.File, s.ValuePos, s.Value, err)
	}
	m := &mcpServer{c: c, props: map[string][]string{}}
	for _, d := range c.Definitions() {
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(d.Schema, &schema) == nil && schema.Properties != nil {
			m.props[d.Name] = slices.Sorted(maps.Keys(schema.Properties))
		}
	}
	return m, nil
}

// ErrServerMissing is wrapped by the error for a server whose command names
// a path that is not a program here, such as UltraRAG's servers/retriever
// directories of Python code.
var ErrServerMissing = errors.New("no such server program")

// checkCommand fails, saying how to fix the pipeline, when s's program is a
// path that does not exist or is a directory: UltraRAG names its Python
// servers by their folder (servers/retriever), which Loupe cannot run.
func checkCommand(p *Pipeline, s *Server) error {
	prog := s.Argv[0]
	if !strings.ContainsRune(prog, '/') && !strings.ContainsRune(prog, filepath.Separator) {
		return nil // looked up in PATH by the MCP client, which says so if it is not there
	}
	what := ""
	switch fi, err := os.Stat(prog); {
	case err != nil:
		what = "does not exist here"
	case fi.IsDir():
		what = "is a directory (UltraRAG's Python server code, which Loupe does not run)"
	default:
		return nil
	}
	fix := fmt.Sprintf("point servers.%s at an MCP server that exists: a command that serves MCP over stdio (for example `node server.js` or `python3 -m my_server`) or the URL of a streamable HTTP server (https://host/mcp)", s.Name)
	if slices.Contains(builtin.Names(), s.Name) {
		fix += fmt.Sprintf(", or write `builtin` for Loupe's built-in %s", s.Name)
	}
	return fmt.Errorf("server %s (%s:%s): %w: %q %s; %s", s.Name, p.File, s.ValuePos, ErrServerMissing, prog, what, fix)
}
