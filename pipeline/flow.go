package pipeline

import (
	"fmt"
	"maps"
)

// The variable flow (omni dialect only). What a step writes is known only
// from an `output` list: it writes exactly those results. A step without
// one may write anything (a built-in tool keeps its results under their own
// names; an MCP tool returns what it returns), and so may an UltraRAG step
// (its `output` mapping renames only some results; the rest are declared in
// its server's Python code). A read is an error only when it is certain:
// no step that can run before it — none that may write anything, either —
// writes the variable, and it is not a parameter; inside a loop, also when
// the read is in no branch and nothing before it on the loops' first passes
// writes the variable (it is then read unset once, whatever the routes).
// UltraRAG files are not
// checked at all: their inputs may also come from each server's
// parameter.yaml, which Loupe does not read.

// vars is what may have been written at a point of the pipeline.
type vars struct {
	at      map[string]Pos // variable → position of a write that may precede
	unknown bool           // a step that may write anything may precede
}

func (v vars) clone() vars { return vars{at: maps.Clone(v.at), unknown: v.unknown} }

func (v *vars) merge(o vars) {
	for k, p := range o.at {
		if _, ok := v.at[k]; !ok {
			v.at[k] = p
		}
	}
	v.unknown = v.unknown || o.unknown
}

func (v vars) has(name string) bool {
	_, ok := v.at[name]
	return v.unknown || ok
}

type readKind int

const (
	readInput    readKind = iota // an `input` value `$name`
	readField                    // a branch's `field`
	readContract                 // a required input of a bare step, read by name
)

// read is one place a variable is read, with what was found there.
type read struct {
	name    string
	pos     Pos
	kind    readKind
	step    *ToolStep // readInput, readContract
	arg     string    // readInput: the tool argument
	loop    *LoopStep // innermost enclosing loop, nil outside loops
	certain bool      // outside every branch: first reached on the first pass of each enclosing loop
	first   bool      // available on the loop's first pass
	ever    bool      // available on some pass
}

type flow struct {
	c      *checker
	reads  map[readKeyT]*read
	order  []*read
	writes map[string]Pos // every variable written by an `output` list
	ever   bool           // the mode of the current run
}

type readKeyT struct {
	pos  Pos
	name string
	kind readKind
}

func newFlow(c *checker) *flow {
	f := &flow{c: c, reads: map[readKeyT]*read{}, writes: map[string]Pos{}}
	Walk(c.p.Steps, func(s Step) bool {
		if t, ok := s.(*ToolStep); ok && !t.OutputMap {
			for _, o := range t.Output {
				if p, ok := f.writes[o.Var]; !ok || o.Pos.Before(p) {
					f.writes[o.Var] = o.Pos
				}
			}
		}
		return true
	})
	return f
}

func (f *flow) run() {
	start := vars{at: map[string]Pos{}}
	for _, q := range f.c.p.Parameters {
		start.at[q.Name] = q.Pos
	}
	f.ever = false
	f.steps(f.c.p.Steps, start.clone(), nil, true)
	f.ever = true
	f.steps(f.c.p.Steps, start.clone(), nil, true)
	for _, r := range f.order {
		f.report(r)
	}
}

func (f *flow) steps(steps []Step, in vars, loop *LoopStep, certain bool) vars {
	for _, s := range steps {
		in = f.step(s, in, loop, certain)
	}
	return in
}

func (f *flow) step(s Step, in vars, loop *LoopStep, certain bool) vars {
	switch s := s.(type) {
	case *ToolStep:
		for _, inp := range s.Input {
			if inp.Kind == InputRef {
				f.read(read{name: inp.Ref, pos: inp.ValuePos, kind: readInput, step: s, arg: inp.Arg, loop: loop, certain: certain}, in)
			}
		}
		if s.Input == nil {
			if ct := f.c.contractFor(s); ct != nil {
				for _, k := range ct.RequiredInputKeys {
					f.read(read{name: k, pos: s.Pos, kind: readContract, step: s, loop: loop, certain: certain}, in)
				}
			}
		}
		out := in.clone()
		if s.Output == nil || s.OutputMap {
			out.unknown = true
		}
		for _, o := range s.Output {
			if _, ok := out.at[o.Var]; !ok {
				out.at[o.Var] = o.Pos
			}
		}
		return out
	case *LoopStep:
		body := in.clone()
		if f.ever {
			// A later pass sees what any earlier pass may have written.
			body.merge(writesOf(s.Steps))
		}
		// certain carries through: a read outside every branch is first
		// reached on the first pass of each loop around it.
		out := f.steps(s.Steps, body, s, certain)
		out.merge(in)
		return out
	case *BranchStep:
		in = f.steps(s.RouterSteps, in, loop, certain)
		if s.Field != "" {
			f.read(read{name: s.Field, pos: s.FieldPos, kind: readField, loop: loop, certain: certain}, in)
		}
		out := in.clone()
		for _, b := range s.Branches {
			out.merge(f.steps(b.Steps, in.clone(), loop, false))
		}
		return out
	}
	return in
}

// writesOf returns what steps may write, in any order and pass.
func writesOf(steps []Step) vars {
	v := vars{at: map[string]Pos{}}
	Walk(steps, func(s Step) bool {
		if t, ok := s.(*ToolStep); ok {
			if t.Output == nil || t.OutputMap {
				v.unknown = true
			}
			for _, o := range t.Output {
				if _, ok := v.at[o.Var]; !ok {
					v.at[o.Var] = o.Pos
				}
			}
		}
		return true
	})
	return v
}

func (f *flow) read(r read, in vars) {
	k := readKeyT{r.pos, r.name, r.kind}
	got, ok := f.reads[k]
	if !ok {
		got = &r
		f.reads[k] = got
		f.order = append(f.order, got)
	}
	if f.ever {
		got.ever = in.has(r.name)
	} else {
		got.first = in.has(r.name)
	}
}

func (f *flow) report(r *read) {
	layer := LayerSemantic
	var what, expect string
	switch r.kind {
	case readInput:
		what = fmt.Sprintf("input `%s` of step `%s` reads `$%s`", r.arg, r.step.Name(), r.name)
		expect = fmt.Sprintf("`%s` under `parameters` or in the `output` of an earlier step", r.name)
	case readField:
		what = fmt.Sprintf("branch `field` reads `%s`", r.name)
		expect = fmt.Sprintf("`%s` in the `output` of an earlier step", r.name)
	case readContract:
		layer = LayerContract
		what = fmt.Sprintf("step `%s` needs input `%s` (its contract requires it) and has no `input` mapping, so it reads `%s`", r.step.Name(), r.name, r.name)
		expect = fmt.Sprintf("`%s` under `parameters`, in the `output` of an earlier step, or an `input` mapping with `%s`", r.name, r.name)
	}
	switch {
	case !r.ever:
		if p, ok := f.writes[r.name]; ok {
			f.c.e.add(layer, r.pos, fmt.Sprintf("%s before any step writes it (it is written at %s, later); expected %s", what, p, expect))
		} else {
			f.c.e.add(layer, r.pos, fmt.Sprintf("%s, which is neither a parameter nor a step output; expected %s", what, expect))
		}
	case !r.first && r.loop != nil && r.certain:
		p := f.writes[r.name]
		f.c.e.add(layer, r.pos, fmt.Sprintf("%s on the first pass of the loop at %s before any step writes it (it is written at %s, later in the loop); expected %s", what, r.loop.Pos, p, expect))
	}
}

// contractFor returns the contract that applies to step s: the built-in
// one when s's server is built-in, else one from runtime.tool_contracts.
func (c *checker) contractFor(s *ToolStep) *Contract {
	srv := c.p.Server(s.Server)
	if srv != nil && srv.Kind == ServerBuiltin {
		if ct := BuiltinContract(srv.Builtin, s.Tool); ct != nil {
			return ct
		}
	}
	for _, ct := range c.p.Runtime.ToolContracts {
		if ct.Tool == s.Name() {
			return ct
		}
	}
	return nil
}

// checkContracts runs the contract layer: runtime.tool_contracts may not
// override built-in contracts, and a step with an `input` mapping must bind
// every input its contract requires. (A step without one reads them by
// name; the flow checks those.)
func checkContracts(e *errs, p *Pipeline) {
	c := &checker{p: p, e: e}
	for _, ct := range p.Runtime.ToolContracts {
		server, tool, ok := splitServerTool(ct.Tool)
		if !ok {
			continue
		}
		if srv := p.Server(server); srv != nil && srv.Kind != ServerBuiltin {
			continue // the server is the pipeline's own: no built-in contract applies
		}
		name := server
		if srv := p.Server(server); srv != nil {
			name = srv.Builtin
		}
		if b := BuiltinContract(name, tool); b != nil {
			builtin := ""
			if b.Tool != ct.Tool {
				builtin = fmt.Sprintf(" (`%s`)", b.Tool)
			}
			e.add(LayerContract, ct.Pos, fmt.Sprintf("`runtime.tool_contracts` overrides the built-in contract of `%s`%s; expected contracts for other tools only", ct.Tool, builtin))
		}
	}
	Walk(p.Steps, func(s Step) bool {
		t, ok := s.(*ToolStep)
		if !ok || t.Input == nil {
			return true
		}
		ct := c.contractFor(t)
		if ct == nil {
			return true
		}
		for _, k := range ct.RequiredInputKeys {
			found := false
			for _, in := range t.Input {
				found = found || in.Arg == k
			}
			if !found {
				e.add(LayerContract, t.InputPos, fmt.Sprintf("step `%s` has no input `%s`, which its contract requires; expected `%s` under `input`", t.Name(), k, k))
			}
		}
		return true
	})
}
