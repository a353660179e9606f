// Package pipeline reads declarative YAML pipelines, checks them, and draws
// their step graphs.
//
// Two dialects are read, as their projects write them:
//
//   - omni's (tao3k/omni-devenv-fusion): `servers` whose values are `builtin`,
//     `local://name`, a command or a URL; `parameters` referenced as `$name`;
//     steps that are `server.tool` strings or one-key mappings with `input`
//     (argument → `$reference` or literal) and `output` (a list of result
//     names); `loop` with `max_iterations`; `branch` with a `router` string,
//     `field`, `value_map` and `branches`; a `runtime` block.
//   - UltraRAG's (OpenBMB/UltraRAG): `servers` as paths or commands; steps
//     with `input` (argument → variable name) and `output` (result name →
//     variable name) mappings; `loop` with `times`; `branch` whose `router` is
//     a list of steps, the last of which chooses the route; empty branches.
//
// [Parse] turns a file into a [Pipeline] whose every node keeps its line and
// column; it fails only on what keeps it from building a tree (YAML syntax,
// aliases, a document that is not a mapping, excessive size or nesting).
// [Pipeline.Validate] then checks the pipeline in three layers — the JSON
// Schema published as schema.PipelineV1, semantics (servers, steps,
// parameters, variables, branches, loops), and tool contracts — and returns
// every error found, sorted by position, each as
// `file:line:column: what is wrong; what was expected`. [Load] does both.
//
// A pipeline can make Loupe start a process only through its `servers`
// block: [Pipeline.Commands] is the complete list, and steps name servers,
// never commands.
package pipeline

import (
	"fmt"
	"strings"
)

// Pos is a position in a pipeline file: 1-based line and column (in bytes).
// The zero Pos is "no position" (a value that was not written in the file,
// such as a default).
type Pos struct {
	Line, Column int
}

// IsValid reports whether p is a real position in the file.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String returns "line:column", or "-" for the zero Pos.
func (p Pos) String() string {
	if !p.IsValid() {
		return "-"
	}
	return fmt.Sprintf("%d:%d", p.Line, p.Column)
}

// Before reports whether p comes before q in the file.
func (p Pos) Before(q Pos) bool {
	if p.Line != q.Line {
		return p.Line < q.Line
	}
	return p.Column < q.Column
}

// Dialect is the pipeline language a file is written in. The two differ in
// what an `input` value means (omni: `$name` is a reference, anything else a
// literal; UltraRAG: a bare string is a variable name) and in what a step
// without `output` writes.
type Dialect int

const (
	// Omni is the dialect of omni's tracer pipelines (the default when a
	// file shows neither dialect's marks).
	Omni Dialect = iota
	// UltraRAG is the dialect of UltraRAG's pipelines.
	UltraRAG
)

// String returns "omni" or "ultrarag".
func (d Dialect) String() string {
	if d == UltraRAG {
		return "ultrarag"
	}
	return "omni"
}

// Pipeline is a parsed pipeline file. Parse builds it; it is not modified
// afterwards by this package, and is safe for concurrent reads. Slices keep
// the order the file wrote things in.
type Pipeline struct {
	// File is the name positions are reported against (as given to Parse).
	File string
	// Dialect is the dialect the file is written in (see Dialect).
	Dialect Dialect
	// Servers are the `servers` entries in file order.
	Servers []*Server
	// Parameters are the `parameters` entries in file order.
	Parameters []*Parameter
	// Steps are the top-level `pipeline` steps.
	Steps []Step
	// StepsPos is the position of the `pipeline` key (zero when absent).
	StepsPos Pos
	// Runtime is the `runtime` block; its zero value means no block.
	Runtime Runtime

	// root is the YAML tree, for the schema layer.
	root *node
	// marks are where each dialect showed itself, for the mixed-dialect error.
	omniMark, ultraMark mark
}

// mark records the first construct that showed a dialect.
type mark struct {
	pos  Pos
	what string
}

// Server finds the server named name, or returns nil.
func (p *Pipeline) Server(name string) *Server {
	for _, s := range p.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Parameter finds the parameter named name, or returns nil.
func (p *Pipeline) Parameter(name string) *Parameter {
	for _, q := range p.Parameters {
		if q.Name == name {
			return q
		}
	}
	return nil
}

// ServerKind says how a server is reached.
type ServerKind int

const (
	// ServerBuiltin is one of Loupe's built-in servers (retriever, generator,
	// evaluator, router): written `builtin` (the server's key names it) or
	// `local://name`.
	ServerBuiltin ServerKind = iota
	// ServerCommand is a process started over stdio (MCP): the value is split into
	// words (see Server.Argv). UltraRAG's `servers/name` paths are of this
	// kind; they name a directory of Python code, which the runner reports
	// when it cannot start it.
	ServerCommand
	// ServerURL is an MCP server reached over streamable HTTP (http:// or https://).
	ServerURL
)

// String returns "builtin", "command" or "url".
func (k ServerKind) String() string {
	switch k {
	case ServerBuiltin:
		return "builtin"
	case ServerURL:
		return "url"
	}
	return "command"
}

// Server is one entry of `servers`.
type Server struct {
	// Name is the key steps use (`name.tool`).
	Name string
	// Pos is the position of the key.
	Pos Pos
	// Value is the value as written (`builtin`, `local://retriever`,
	// `servers/retriever`, `python3 srv.py`, `https://…`).
	Value string
	// ValuePos is the position of the value.
	ValuePos Pos
	// Kind is how the server is reached, decided from Value.
	Kind ServerKind
	// Builtin is the built-in server's name when Kind is ServerBuiltin: the key
	// for `builtin`, name for `local://name`.
	Builtin string
	// Argv is the command when Kind is ServerCommand: Value split into words at
	// spaces and tabs, with '…' and "…" quoting and no other expansion (no
	// shell, no variables, no globs). Nil for other kinds.
	Argv []string
}

// Command is a process a pipeline allows the runner to start.
type Command struct {
	// Server is the server name the command belongs to.
	Server string
	// Argv is the program and its arguments, exactly as Server.Argv.
	Argv []string
	// Pos is the position of the value in the file.
	Pos Pos
}

// Commands returns every process the pipeline lets the runner start: one
// per ServerCommand server, in file order, each Argv a fresh copy. Nothing
// else in a pipeline (steps, parameters, inputs, runtime) names a command,
// so a runner that starts only these, looked up by server name, cannot be
// made to start anything else. Parameters are never substituted into them.
func (p *Pipeline) Commands() []Command {
	var out []Command
	for _, s := range p.Servers {
		if s.Kind == ServerCommand && len(s.Argv) > 0 {
			out = append(out, Command{Server: s.Name, Argv: append([]string(nil), s.Argv...), Pos: s.ValuePos})
		}
	}
	return out
}

// Parameter is one entry of `parameters`.
type Parameter struct {
	// Name is the key; steps read it as `$name`.
	Name string
	// Pos is the position of the key.
	Pos Pos
	// Value is the default value as a JSON-like value: string, int64,
	// float64, bool, nil, []any or map[string]any.
	Value any
	// ValuePos is the position of the value.
	ValuePos Pos
	// Ref is set when Value is the string "$other": the name it refers to.
	// A parameter that refers to itself (`topic: "$topic"`) has no default
	// and must be given when the pipeline runs (see Required).
	Ref string
}

// Required reports whether the parameter has no default: its value is a
// reference to itself, omni's way of writing "supplied at run time".
func (q *Parameter) Required() bool { return q.Ref == q.Name }

// Step is a pipeline step: *ToolStep, *LoopStep or *BranchStep.
type Step interface {
	// Position returns where the step starts in the file.
	Position() Pos
	step()
}

// ToolStep calls one tool of one server.
type ToolStep struct {
	// Pos is the position of the step (its string, or its key).
	Pos Pos
	// Server and Tool split `server.tool` at its first dot.
	Server, Tool string
	// Input binds tool arguments; nil when the step has no `input`.
	Input []*Input
	// InputPos is the position of the `input` key.
	InputPos Pos
	// Output says which results are kept and under which variable names;
	// nil when the step has no `output`. The omni list form keeps a result
	// under its own name; UltraRAG's map form renames it.
	Output []*Output
	// OutputPos is the position of the `output` key.
	OutputPos Pos
	// OutputMap is true when `output` was written as UltraRAG's mapping. A
	// mapping renames some of the tool's results and keeps the others under
	// their own names; a list keeps exactly the results it names.
	OutputMap bool
}

// Name returns "server.tool".
func (s *ToolStep) Name() string { return s.Server + "." + s.Tool }

// Position returns s.Pos.
func (s *ToolStep) Position() Pos { return s.Pos }
func (*ToolStep) step()           {}

// InputKind says what an input value is.
type InputKind int

const (
	// InputRef reads a variable or parameter (omni `$name`, UltraRAG `name`).
	InputRef InputKind = iota
	// InputLiteral is a value given as is (omni: anything but `$name`).
	InputLiteral
	// InputServerParam reads a value from the server's own configuration
	// (UltraRAG `$name`, from the server's parameter.yaml).
	InputServerParam
)

// Input binds one tool argument.
type Input struct {
	// Arg is the tool argument's name (the key).
	Arg string
	// Pos is the position of the key.
	Pos Pos
	// Kind says what Ref or Literal hold.
	Kind InputKind
	// Ref is the name read, without `$` (InputRef, InputServerParam).
	Ref string
	// Literal is the value (InputLiteral), as in Parameter.Value.
	Literal any
	// ValuePos is the position of the value.
	ValuePos Pos
}

// Output keeps one tool result in a variable.
type Output struct {
	// Result is the name of the result in the tool's output.
	Result string
	// Var is the variable written (equal to Result in the list form).
	Var string
	// Pos is the position of the entry (list item or key).
	Pos Pos
}

// LoopStep runs its steps repeatedly, at most Max times.
type LoopStep struct {
	// Pos is the position of the `loop` key.
	Pos Pos
	// Max is the bound (`times` or `max_iterations`); 0 when missing or not
	// a positive integer, which Validate reports.
	Max int
	// MaxKey is the key that gave the bound, "times" or "max_iterations",
	// or "" when neither was written.
	MaxKey string
	// MaxPos is the position of that key.
	MaxPos Pos
	// Steps are the loop body.
	Steps []Step

	// bothPos is the position of the second bound key when both were written.
	bothPos Pos
}

// Position returns s.Pos.
func (s *LoopStep) Position() Pos { return s.Pos }
func (*LoopStep) step()           {}

// BranchStep chooses one of its branches by a route token.
//
// The token comes from Router: in omni, a `server.tool` router is called
// (RouterSteps holds it) and a bare name (`check_quality`) reads the token
// that earlier steps left in the state; in UltraRAG, the router is a list
// of steps whose last one returns the token. A token equal to a branch's
// name selects it; ValueMap maps other tokens to branches.
type BranchStep struct {
	// Pos is the position of the `branch` key.
	Pos Pos
	// Router is the router's name as written: a logical name, `server.tool`,
	// or (UltraRAG list) the name of the list's last step. "" when absent.
	Router string
	// RouterPos is the position of the router (its value).
	RouterPos Pos
	// RouterSteps are the steps that produce the route, in order; the last
	// one returns it. Nil for a logical router name.
	RouterSteps []Step
	// Field is the variable holding the route token (`field`), "" when not
	// written (omni's default is "route").
	Field string
	// FieldPos is the position of the value of `field`.
	FieldPos Pos
	// ValueMap maps route tokens to branches (`value_map`), in file order.
	ValueMap []*RouteMap
	// Branches are the branches in file order.
	Branches []*Branch
}

// Position returns s.Pos.
func (s *BranchStep) Position() Pos { return s.Pos }
func (*BranchStep) step()           {}

// Branch finds the branch named name, or returns nil.
func (s *BranchStep) Branch(name string) *Branch {
	for _, b := range s.Branches {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// Route returns the branch a route token selects: the branch of that name,
// else the branch whose ValueMap entry lists the token, else nil.
func (s *BranchStep) Route(token string) *Branch {
	if b := s.Branch(token); b != nil {
		return b
	}
	for _, m := range s.ValueMap {
		for _, t := range m.Tokens {
			if t.Value == token {
				return s.Branch(m.Branch)
			}
		}
	}
	return nil
}

// Branch is one named branch of a BranchStep.
type Branch struct {
	// Name is the branch's key, also the route token that selects it.
	Name string
	// Pos is the position of the key.
	Pos Pos
	// Steps are the branch's steps; empty (UltraRAG's `[]`) means the route
	// does nothing.
	Steps []Step
}

// RouteMap is one `value_map` entry: the tokens that select Branch.
type RouteMap struct {
	// Branch is the branch name (the key).
	Branch string
	// Pos is the position of the key.
	Pos Pos
	// Tokens are the route tokens listed.
	Tokens []Token
}

// Token is a route token as written.
type Token struct {
	// Value is the token.
	Value string
	// Pos is its position.
	Pos Pos
}

// Runtime is omni's `runtime` block. Empty strings and nil mean "not
// written"; the runner applies its defaults.
type Runtime struct {
	// Pos is the position of the `runtime` key; zero when there is none.
	Pos Pos
	// Checkpointer is `checkpointer.type`: "none" or "memory".
	Checkpointer string
	// CheckpointerPos is the position of its value.
	CheckpointerPos Pos
	// CallbackDispatchMode is `tracer.callback_dispatch_mode`: "inline" or
	// "background".
	CallbackDispatchMode string
	// CallbackDispatchModePos is the position of its value.
	CallbackDispatchModePos Pos
	// IncludeRetrieval is `invoker.include_retrieval`; nil when not written.
	IncludeRetrieval *bool
	// RetrievalBackend is `retrieval.default_backend`: "lance" or "hybrid".
	RetrievalBackend string
	// StateSchema is `state.schema`.
	StateSchema string
	// ToolContracts are `tool_contracts`, in file order: contracts for tools
	// the built-in set does not cover.
	ToolContracts []*Contract
}

// Contract is a tool contract: what a `server.tool` step must give.
type Contract struct {
	// Tool is `server.tool`; in the built-in set, `server.*` covers every
	// tool of a server.
	Tool string
	// RequiredInputKeys are the `input` keys a step with an input mapping
	// must bind.
	RequiredInputKeys []string
	// Routes are the route tokens a router tool returns (built-in routers
	// only; a pipeline cannot declare them).
	Routes []string
	// RouteSets are other route vocabularies the router returns beside
	// Routes (in other result fields): a branch whose names or value_map
	// use one of them is checked against that one instead.
	RouteSets [][]string
	// Pos is where the contract was written (zero for built-in ones).
	Pos Pos
}

// Walk calls fn for each step of steps in file order, depth first: a loop
// before its body, a branch before its router steps and then its branches.
// It stops early when fn returns false for a step (its children are then
// skipped, the walk goes on with the next step).
func Walk(steps []Step, fn func(Step) bool) {
	for _, s := range steps {
		if !fn(s) {
			continue
		}
		switch s := s.(type) {
		case *LoopStep:
			Walk(s.Steps, fn)
		case *BranchStep:
			Walk(s.RouterSteps, fn)
			for _, b := range s.Branches {
				Walk(b.Steps, fn)
			}
		}
	}
}

// splitServerTool splits "server.tool" at the first dot; ok is false unless
// both halves are non-empty.
func splitServerTool(s string) (server, tool string, ok bool) {
	server, tool, found := strings.Cut(s, ".")
	return server, tool, found && server != "" && tool != ""
}
