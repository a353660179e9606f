package pipeline

import (
	"io"
	"os"
	"strings"
)

// Parse reads a pipeline from src; file is the name used in positions and
// errors. It returns an ErrorList of syntax errors (invalid YAML, aliases
// or merge keys, more than one document, a document that is not a mapping,
// size and nesting beyond MaxFileSize, MaxYAMLDepth, MaxYAMLNodes) and a nil
// Pipeline when it cannot build a tree.
//
// Parse is lenient about structure: what does not have the expected shape
// (a step that is a number, an unknown key) is left out of the Pipeline and
// reported by Validate, which must be called before a Pipeline is run.
func Parse(file string, src []byte) (*Pipeline, error) {
	e := &errs{file: file}
	root := readYAML(e, src)
	if root == nil {
		return nil, e.list.sort()
	}
	p := &Pipeline{File: file, root: root}
	b := &builder{p: p}
	b.build(root)
	p.Dialect = b.dialect()
	b.resolveInputs()
	return p, nil
}

// Load reads, parses and validates the pipeline file at path. The error,
// when not nil, is always an ErrorList holding every problem found (a file
// that cannot be read is one error of LayerRead); the Pipeline is nil only
// when the file could not be read or parsed.
func Load(path string) (*Pipeline, error) {
	p, err := ParseFile(path)
	if err != nil {
		return nil, err
	}
	return p, p.Validate().Err()
}

// ParseFile reads the file at path (no more than MaxFileSize+1 bytes of it)
// and parses it with Parse, path as the file name. The error, when not nil,
// is an ErrorList.
func ParseFile(path string) (*Pipeline, error) {
	src, err := readFile(path)
	if err != nil {
		return nil, ErrorList{{File: path, Layer: LayerRead, Msg: "cannot read the file: " + err.Error()}}
	}
	return Parse(path, src)
}

// readFile reads at most MaxFileSize+1 bytes of path, so that a huge file
// (or a device) is refused by Parse without being read whole.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileSize+1))
}

type builder struct {
	p                   *Pipeline
	inputs              []*Input // raw inputs, resolved once the dialect is known
	omniMark, ultraMark mark
	anyServer, builtins bool
}

func (b *builder) omni(pos Pos, what string) {
	if !b.omniMark.pos.IsValid() || pos.Before(b.omniMark.pos) {
		b.omniMark = mark{pos, what}
	}
}

func (b *builder) ultra(pos Pos, what string) {
	if !b.ultraMark.pos.IsValid() || pos.Before(b.ultraMark.pos) {
		b.ultraMark = mark{pos, what}
	}
}

func (b *builder) build(root *node) {
	p := b.p
	if k, v := root.get("servers"); k != nil && v.kind == mapNode {
		for i, kn := range v.keys {
			b.server(kn, v.vals[i])
		}
	}
	if k, v := root.get("parameters"); k != nil {
		b.omni(k.pos, "`parameters`")
		if v.kind == mapNode {
			for i, kn := range v.keys {
				val := v.vals[i]
				q := &Parameter{Name: kn.value.(string), Pos: kn.pos, Value: val.plain(), ValuePos: val.pos}
				if s, ok := val.str(); ok && len(s) > 1 && s[0] == '$' {
					q.Ref = s[1:]
				}
				p.Parameters = append(p.Parameters, q)
			}
		}
	}
	if k, v := root.get("pipeline"); k != nil {
		p.StepsPos = k.pos
		p.Steps = b.steps(v)
	}
	if k, v := root.get("runtime"); k != nil {
		b.omni(k.pos, "`runtime`")
		b.runtime(k, v)
	}
	p.omniMark, p.ultraMark = b.omniMark, b.ultraMark
}

func (b *builder) server(k, v *node) {
	s := &Server{Name: k.value.(string), Pos: k.pos, ValuePos: v.pos, Kind: ServerCommand}
	b.anyServer = true
	if str, ok := v.str(); ok {
		s.Value = str
		t := strings.TrimSpace(str)
		switch {
		case t == "builtin":
			s.Kind, s.Builtin = ServerBuiltin, s.Name
			b.builtins = true
			b.omni(v.pos, "a `builtin` server")
		case strings.HasPrefix(t, "local://"):
			s.Kind, s.Builtin = ServerBuiltin, strings.TrimPrefix(t, "local://")
			b.builtins = true
			b.omni(v.pos, "a `local://` server")
		case strings.HasPrefix(t, "http://") || strings.HasPrefix(t, "https://"):
			s.Kind = ServerURL
		default:
			s.Argv, _ = splitWords(t)
		}
	}
	b.p.Servers = append(b.p.Servers, s)
}

// splitWords splits a command line at unquoted spaces and tabs; '…' and
// "…" quote (backslash escapes the next byte inside "…" and outside quotes).
// Nothing else is interpreted. ok is false for an unterminated quote.
func splitWords(s string) (words []string, ok bool) {
	var cur strings.Builder
	in := false // a word is under way
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\\' && i+1 < len(s) && quote != '\'':
			i++
			cur.WriteByte(s[i])
			in = true
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, quote == 0
}

// steps builds a list of steps; items that are not steps are left out.
func (b *builder) steps(v *node) []Step {
	if v == nil || v.kind != seqNode {
		return nil
	}
	var out []Step
	for _, it := range v.items {
		if s := b.step(it); s != nil {
			out = append(out, s)
		}
	}
	return out
}

func (b *builder) step(n *node) Step {
	if s, ok := n.str(); ok {
		server, tool, ok := splitServerTool(s)
		if !ok {
			return nil
		}
		return &ToolStep{Pos: n.pos, Server: server, Tool: tool}
	}
	if n.kind != mapNode || len(n.keys) != 1 {
		return nil
	}
	k, v := n.keys[0], n.vals[0]
	switch name := k.value.(string); name {
	case "loop":
		return b.loop(k, v)
	case "branch":
		return b.branch(k, v)
	default:
		server, tool, ok := splitServerTool(name)
		if !ok {
			return nil
		}
		return b.tool(&ToolStep{Pos: k.pos, Server: server, Tool: tool}, v)
	}
}

func (b *builder) tool(s *ToolStep, v *node) Step {
	if v.kind != mapNode {
		return s
	}
	if k, in := v.get("input"); k != nil {
		s.InputPos = k.pos
		s.Input = []*Input{}
		if in.kind == mapNode {
			for i, kn := range in.keys {
				val := in.vals[i]
				input := &Input{Arg: kn.value.(string), Pos: kn.pos, ValuePos: val.pos, Literal: val.plain(), Kind: InputLiteral}
				s.Input = append(s.Input, input)
				b.inputs = append(b.inputs, input)
			}
		}
	}
	if k, out := v.get("output"); k != nil {
		s.OutputPos = k.pos
		s.Output = []*Output{}
		switch out.kind {
		case seqNode:
			b.omni(out.pos, "an `output` list")
			for _, it := range out.items {
				if name, ok := it.str(); ok {
					s.Output = append(s.Output, &Output{Result: name, Var: name, Pos: it.pos})
				}
			}
		case mapNode:
			b.ultra(out.pos, "an `output` mapping")
			s.OutputMap = true
			for i, kn := range out.keys {
				if name, ok := out.vals[i].str(); ok {
					s.Output = append(s.Output, &Output{Result: kn.value.(string), Var: name, Pos: kn.pos})
				}
			}
		}
	}
	return s
}

func (b *builder) loop(k, v *node) Step {
	s := &LoopStep{Pos: k.pos}
	for _, key := range []string{"times", "max_iterations"} {
		mk, mv := v.get(key)
		if mk == nil {
			continue
		}
		if key == "times" {
			b.ultra(mk.pos, "`loop.times`")
		} else {
			b.omni(mk.pos, "`loop.max_iterations`")
		}
		if s.MaxKey != "" {
			s.bothPos = mk.pos
		} else {
			s.MaxKey, s.MaxPos = key, mk.pos
			if n, ok := mv.value.(int64); ok && mv.kind == scalarNode && n >= 1 && n <= maxLoopBound {
				s.Max = int(n)
			}
		}
	}
	_, steps := v.get("steps")
	s.Steps = b.steps(steps)
	return s
}

// maxLoopBound is the largest loop bound the AST holds; the schema allows
// no more.
const maxLoopBound = 1_000_000

func (b *builder) branch(k, v *node) Step {
	s := &BranchStep{Pos: k.pos}
	if rk, rv := v.get("router"); rk != nil {
		s.RouterPos = rv.pos
		switch rv.kind {
		case scalarNode:
			b.omni(rv.pos, "a `branch.router` name")
			if name, ok := rv.str(); ok {
				s.Router = name
				if server, tool, ok := splitServerTool(name); ok {
					s.RouterSteps = []Step{&ToolStep{Pos: rv.pos, Server: server, Tool: tool}}
				}
			}
		case seqNode:
			b.ultra(rv.pos, "a `branch.router` list")
			s.RouterSteps = b.steps(rv)
			if n := len(s.RouterSteps); n > 0 {
				if t, ok := s.RouterSteps[n-1].(*ToolStep); ok {
					s.Router = t.Name()
				}
			}
		}
	}
	if fk, fv := v.get("field"); fk != nil {
		b.omni(fk.pos, "`branch.field`")
		s.Field, _ = fv.str()
		s.FieldPos = fv.pos
	}
	if mk, mv := v.get("value_map"); mk != nil {
		b.omni(mk.pos, "`branch.value_map`")
		if mv.kind == mapNode {
			for i, kn := range mv.keys {
				m := &RouteMap{Branch: kn.value.(string), Pos: kn.pos}
				if toks := mv.vals[i]; toks.kind == seqNode {
					for _, t := range toks.items {
						if str, ok := t.str(); ok {
							m.Tokens = append(m.Tokens, Token{Value: str, Pos: t.pos})
						}
					}
				}
				s.ValueMap = append(s.ValueMap, m)
			}
		}
	}
	if _, bv := v.get("branches"); bv != nil && bv.kind == mapNode {
		for i, kn := range bv.keys {
			s.Branches = append(s.Branches, &Branch{Name: kn.value.(string), Pos: kn.pos, Steps: b.steps(bv.vals[i])})
		}
	}
	return s
}

func (b *builder) runtime(k, v *node) {
	rt := &b.p.Runtime
	rt.Pos = k.pos
	section := func(name, key string) (string, Pos, *node) {
		_, sec := v.get(name)
		_, val := sec.get(key)
		s, _ := val.str()
		if val == nil {
			return "", Pos{}, nil
		}
		return s, val.pos, val
	}
	rt.Checkpointer, rt.CheckpointerPos, _ = section("checkpointer", "type")
	rt.CallbackDispatchMode, rt.CallbackDispatchModePos, _ = section("tracer", "callback_dispatch_mode")
	rt.RetrievalBackend, _, _ = section("retrieval", "default_backend")
	rt.StateSchema, _, _ = section("state", "schema")
	if _, val, n := section("invoker", "include_retrieval"); n != nil {
		if bv, ok := n.value.(bool); ok && n.kind == scalarNode {
			rt.IncludeRetrieval = &bv
		}
		_ = val
	}
	if _, tc := v.get("tool_contracts"); tc != nil && tc.kind == mapNode {
		for i, kn := range tc.keys {
			c := &Contract{Tool: kn.value.(string), Pos: kn.pos}
			if _, keys := tc.vals[i].get("required_input_keys"); keys != nil && keys.kind == seqNode {
				for _, it := range keys.items {
					if s, ok := it.str(); ok {
						c.RequiredInputKeys = append(c.RequiredInputKeys, s)
					}
				}
			}
			rt.ToolContracts = append(rt.ToolContracts, c)
		}
	}
}

// dialect decides the file's dialect from the marks each left (see
// Dialect). A file with marks of both is omni's, and Validate reports the
// mix.
func (b *builder) dialect() Dialect {
	switch {
	case b.ultraMark.pos.IsValid() && !b.omniMark.pos.IsValid():
		return UltraRAG
	case b.omniMark.pos.IsValid():
		return Omni
	case b.anyServer && !b.builtins:
		// Only servers given as paths or commands and bare steps, as
		// UltraRAG's simplest pipelines are.
		return UltraRAG
	}
	return Omni
}

// resolveInputs gives each input its kind, which depends on the dialect.
func (b *builder) resolveInputs() {
	for _, in := range b.inputs {
		s, ok := in.Literal.(string)
		if !ok {
			continue
		}
		switch {
		case len(s) > 1 && s[0] == '$':
			in.Ref, in.Literal = s[1:], nil
			if b.p.Dialect == UltraRAG {
				in.Kind = InputServerParam
			} else {
				in.Kind = InputRef
			}
		case b.p.Dialect == UltraRAG:
			in.Ref, in.Literal, in.Kind = s, nil, InputRef
		}
	}
}
