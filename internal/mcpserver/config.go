package mcpserver

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/internal/yamlpos"
)

// Config is what `loupe mcp --config FILE` reads: what the
// run_agent_with_trace tool runs. Exactly one of Agent and Pipeline is
// set. A Config is read-only once loaded and may be shared.
//
//	agent:
//	  name: support                 # the runs' name in traces (default "agent")
//	  model: scripted:turns.yaml    # an llm.Open spec; a relative scripted: path is relative to this file
//	  system: You are a careful assistant.
//	  tools: [calculator, clock, search_files]   # Loupe's built-in demo tools (optional)
//	  files: .                      # the folder search_files looks in (default: this file's folder)
//	  tags: [env:dev]
//	  limits: {max_iterations: 10, max_tool_calls: 20, max_tokens: 0, max_cost_usd: 1, timeout: 2m}
//	  mcp_servers:                  # tools from MCP servers (stdio command or streamable HTTP URL), via package mcp
//	    - {name: fs, command: npx, args: [-y, "@modelcontextprotocol/server-filesystem", "."], env: {K: V}, dir: .}
//	    - {name: search, url: "http://127.0.0.1:9000/mcp", headers: {Authorization: "Bearer …"}, call_timeout: 30s, prefix: true}
//
// or
//
//	pipeline: rag.yaml              # a pipeline file, relative to this file
//	params: {top_k: "3"}            # default parameters; a call's params override them
type Config struct {
	Agent    *AgentConfig      `yaml:"agent"`
	Pipeline string            `yaml:"pipeline"`
	Params   map[string]string `yaml:"params"`

	// File is the path the config was read from ("" when built in Go);
	// relative paths in it are resolved against its directory.
	File string `yaml:"-"`
	// where maps YAML paths ($.agent.model) to "file:line:column" for
	// errors found after decoding.
	where map[string]string
}

// AgentConfig describes the agent run_agent_with_trace runs.
type AgentConfig struct {
	Name       string            `yaml:"name"`
	Model      string            `yaml:"model"`
	System     string            `yaml:"system"`
	Tools      []string          `yaml:"tools"`
	Files      string            `yaml:"files"`
	Tags       []string          `yaml:"tags"`
	Limits     LimitsConfig      `yaml:"limits"`
	MCPServers []MCPServerConfig `yaml:"mcp_servers"`
}

// LimitsConfig are agent.Limits as YAML. Zero means no limit, except
// MaxIterations, whose zero means DefaultMaxIterations.
type LimitsConfig struct {
	MaxIterations int     `yaml:"max_iterations"`
	MaxToolCalls  int     `yaml:"max_tool_calls"`
	MaxTokens     int64   `yaml:"max_tokens"`
	MaxCostUSD    float64 `yaml:"max_cost_usd"`
	Timeout       string  `yaml:"timeout"`

	timeout time.Duration
}

// DefaultMaxIterations bounds a configured agent's loop when its limits
// say nothing, so that a model that never answers cannot run forever.
const DefaultMaxIterations = 25

// MCPServerConfig is one MCP server whose tools the agent may call: a
// command run over stdio, or the URL of a streamable HTTP endpoint.
type MCPServerConfig struct {
	Name    string            `yaml:"name"`
	Command string            `yaml:"command"` // run as given, never through a shell
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"` // added to Loupe's environment
	Dir     string            `yaml:"dir"` // the command's working directory, relative to the config file
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// CallTimeout bounds each tool call (a Go duration such as 30s).
	CallTimeout string `yaml:"call_timeout"`
	// Prefix names the server's tools "<name>__<tool>", for servers
	// whose tool names collide.
	Prefix bool `yaml:"prefix"`

	callTimeout time.Duration
}

// builtinTools are the tools an agent config may name in "tools".
var builtinTools = []string{"calculator", "clock", "search_files"}

// LoadConfig reads and checks the config file at path. Errors have the
// form "file:line:column: what is wrong", and say what to write instead.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the MCP server config: %w", err)
	}
	return ParseConfig(data, path)
}

// ParseConfig parses a config given as YAML (or JSON); filename names it
// in errors and anchors its relative paths.
func ParseConfig(data []byte, filename string) (*Config, error) {
	if filename == "" {
		filename = "config"
	}
	c := &Config{File: filename, where: map[string]string{}}
	f, err := yamlpos.DecodeFile(data, filename, "config", `write "agent:" (model, system, tools, limits, mcp_servers) or "pipeline: FILE"`, c)
	if err != nil {
		return nil, err
	}
	at := func(path string) string { return yamlpos.At(f, filename, path) }
	if err := c.check(at); err != nil {
		return nil, err
	}
	return c, nil
}

// check validates what decoding cannot: one of agent and pipeline, known
// tools, servers that say how to reach them, durations.
func (c *Config) check(at func(string) string) error {
	switch {
	case c.Agent == nil && c.Pipeline == "":
		return fmt.Errorf("%s: the config has neither \"agent:\" nor \"pipeline:\"; write one of them", at("$"))
	case c.Agent != nil && c.Pipeline != "":
		return fmt.Errorf("%s: the config has both \"agent:\" and \"pipeline:\"; keep one (a config runs one thing)", at("$.pipeline"))
	case c.Agent != nil && len(c.Params) > 0:
		return fmt.Errorf("%s: params are for a pipeline, not an agent; remove them", at("$.params"))
	}
	if c.Pipeline != "" {
		c.where["pipeline"] = at("$.pipeline")
		return nil
	}
	a := c.Agent
	if strings.TrimSpace(a.Model) == "" {
		return fmt.Errorf("%s: the agent has no model; write e.g. model: openai:gpt-4o-mini, or model: scripted:turns.yaml to run offline", at("$.agent"))
	}
	c.where["model"] = at("$.agent.model")
	names := map[string]string{}
	for i, t := range a.Tools {
		where := at(fmt.Sprintf("$.agent.tools[%d]", i))
		if !slices.Contains(builtinTools, t) {
			return fmt.Errorf("%s: unknown tool %q; the built-in tools are %s (tools from MCP servers go under mcp_servers)", where, t, strings.Join(builtinTools, ", "))
		}
		if prev, dup := names[t]; dup {
			return fmt.Errorf("%s: tool %q is listed twice (first at %s)", where, t, prev)
		}
		names[t] = where
	}
	l := &a.Limits
	if l.MaxIterations < 0 || l.MaxToolCalls < 0 || l.MaxTokens < 0 || l.MaxCostUSD < 0 {
		return fmt.Errorf("%s: limits cannot be negative (0 means no limit)", at("$.agent.limits"))
	}
	if l.Timeout != "" {
		d, err := time.ParseDuration(l.Timeout)
		if err != nil || d < 0 {
			return fmt.Errorf("%s: timeout %q: want a positive Go duration such as 90s or 2m", at("$.agent.limits.timeout"), l.Timeout)
		}
		l.timeout = d
	}
	servers := map[string]string{}
	for i, s := range a.MCPServers {
		where := at(fmt.Sprintf("$.agent.mcp_servers[%d]", i))
		c.where[fmt.Sprintf("server %d", i)] = where
		switch {
		case s.Name == "":
			return fmt.Errorf("%s: an MCP server has no name; give it one (it names its tools in traces)", where)
		case s.Command == "" && s.URL == "":
			return fmt.Errorf("%s: MCP server %q has neither command (stdio) nor url (streamable HTTP); give one", where, s.Name)
		case s.Command != "" && s.URL != "":
			return fmt.Errorf("%s: MCP server %q has both command and url; give one", where, s.Name)
		case s.Command == "" && (len(s.Args) > 0 || len(s.Env) > 0):
			return fmt.Errorf("%s: MCP server %q has args or env but no command", where, s.Name)
		case s.URL == "" && len(s.Headers) > 0:
			return fmt.Errorf("%s: MCP server %q has headers but no url", where, s.Name)
		}
		if s.CallTimeout != "" {
			d, err := time.ParseDuration(s.CallTimeout)
			if err != nil || d <= 0 {
				return fmt.Errorf("%s: call_timeout %q: want a positive Go duration such as 30s", at(fmt.Sprintf("$.agent.mcp_servers[%d].call_timeout", i)), s.CallTimeout)
			}
			a.MCPServers[i].callTimeout = d
		}
		if s.Dir != "" {
			a.MCPServers[i].Dir = c.Resolve(s.Dir)
		}
		if prev, dup := servers[s.Name]; dup {
			return fmt.Errorf("%s: two MCP servers are named %q (the other at %s)", where, s.Name, prev)
		}
		servers[s.Name] = where
	}
	return nil
}

// at returns where key (see check) is in the file, or the file's name.
func (c *Config) at(key string) string {
	if w, ok := c.where[key]; ok {
		return w
	}
	if c.File != "" {
		return c.File
	}
	return "config"
}

// Resolve returns p relative to the config file's directory, unless it is
// absolute or the config was not read from a file.
func (c *Config) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) || c.File == "" {
		return p
	}
	return filepath.Join(filepath.Dir(c.File), p)
}

// modelSpec returns the agent's model spec with a relative scripted: path
// resolved against the config's directory.
func (c *Config) modelSpec() string {
	spec := strings.TrimSpace(c.Agent.Model)
	if p, ok := strings.CutPrefix(spec, "scripted:"); ok {
		return "scripted:" + c.Resolve(p)
	}
	return spec
}
