package pipeline

import (
	_ "embed"
	"encoding/json"
	"slices"
	"strings"
	"sync"
)

// ContractsV1 is Loupe's built-in tool contracts, version 1, in the shape of
// omni's contracts.v1.json: `{"version": "v1", "tool_contracts": {"server.tool":
// {"required_input_keys": [...]}}}`. Two additions: a `server.*` key covers
// every tool of that built-in server (the generator and the evaluator take
// the tool name as their task), and `routes` lists the route tokens a router
// tool returns. The keys are also the catalogue of built-in tools: a step on
// a built-in server whose tool no key covers is an unknown step. It is
// read once, on first use; do not modify it.
//
//go:embed contracts.v1.json
var ContractsV1 []byte

type contractsFile struct {
	Version       string `json:"version"`
	ToolContracts map[string]struct {
		RequiredInputKeys []string   `json:"required_input_keys"`
		Routes            []string   `json:"routes"`
		RouteSets         [][]string `json:"route_sets"`
	} `json:"tool_contracts"`
}

var builtinContracts = sync.OnceValue(func() []*Contract {
	var f contractsFile
	if err := json.Unmarshal(ContractsV1, &f); err != nil {
		panic("pipeline: embedded contracts.v1.json: " + err.Error()) // a build defect, caught by every test
	}
	var out []*Contract
	for tool, c := range f.ToolContracts {
		out = append(out, &Contract{Tool: tool, RequiredInputKeys: c.RequiredInputKeys, Routes: c.Routes, RouteSets: c.RouteSets})
	}
	slices.SortFunc(out, func(a, b *Contract) int { return strings.Compare(a.Tool, b.Tool) })
	return out
})

// BuiltinContracts returns the built-in contracts (ContractsV1) sorted by
// tool name. The result is shared: callers must not modify it.
func BuiltinContracts() []*Contract { return builtinContracts() }

// BuiltinContract returns the built-in contract covering server.tool (an
// exact key, else `server.*`), or nil when the built-in servers have no
// such tool.
func BuiltinContract(server, tool string) *Contract {
	var wild *Contract
	for _, c := range builtinContracts() {
		switch c.Tool {
		case server + "." + tool:
			return c
		case server + ".*":
			wild = c
		}
	}
	return wild
}

// BuiltinServers returns the names of the built-in servers, sorted.
func BuiltinServers() []string {
	var out []string
	for _, c := range builtinContracts() {
		s, _, _ := strings.Cut(c.Tool, ".")
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// builtinTools returns the tools of built-in server s, sorted ("*" for any).
func builtinTools(s string) []string {
	var out []string
	for _, c := range builtinContracts() {
		if srv, tool, _ := strings.Cut(c.Tool, "."); srv == s {
			out = append(out, tool)
		}
	}
	return out
}

// BuiltinRouter returns the built-in contract of a logical router name, as
// omni writes `router: check_quality`: that of `router.<name>`, or nil.
func BuiltinRouter(name string) *Contract {
	c := BuiltinContract("router", name)
	if c == nil || len(c.Routes) == 0 {
		return nil
	}
	return c
}
