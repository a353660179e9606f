package pipeline

import (
	"fmt"
	"slices"
	"strings"
)

// Limits Validate puts on a pipeline's shape.
const (
	// MaxNesting is the deepest nesting of loops and branches accepted.
	MaxNesting = 8
	// MaxPasses is the most passes nested loops may multiply to: the
	// product of the bounds of a loop and of the loops around it.
	MaxPasses = 1_000_000
)

type checker struct {
	p      *Pipeline
	e      *errs
	params map[string]*Parameter
}

// checkSemantics runs the semantic layer, and the contract checks that
// depend on the variable flow.
func checkSemantics(e *errs, p *Pipeline) {
	c := &checker{p: p, e: e, params: map[string]*Parameter{}}
	for _, q := range p.Parameters {
		c.params[q.Name] = q
	}
	c.dialects()
	c.servers()
	c.parameters()
	c.steps(p.Steps, 0, 1)
	if p.Dialect == Omni {
		newFlow(c).run()
	}
}

func (c *checker) add(pos Pos, format string, args ...any) {
	c.e.add(LayerSemantic, pos, fmt.Sprintf(format, args...))
}

func (c *checker) dialects() {
	o, u := c.p.omniMark, c.p.ultraMark
	if !o.pos.IsValid() || !u.pos.IsValid() {
		return
	}
	later, other, laterName, otherName := u, o, "UltraRAG", "omni"
	if !o.pos.Before(u.pos) {
		later, other, laterName, otherName = o, u, "omni", "UltraRAG"
	}
	c.add(later.pos, "%s is %s's, but %s at %s is %s's; expected one dialect per file (input values mean different things in each)",
		later.what, laterName, other.what, other.pos, otherName)
}

// shellWords are words a shell would interpret; Loupe passes them to the
// program as they are, which is never what their author meant.
var shellWords = []string{"|", "||", "&", "&&", ";", ">", ">>", "<", "<<", "2>", "2>&1"}

func (c *checker) servers() {
	for _, s := range c.p.Servers {
		switch s.Kind {
		case ServerBuiltin:
			if !slices.Contains(BuiltinServers(), s.Builtin) {
				c.add(s.ValuePos, "`%s` is not a built-in server; expected one of %s, or a command or URL", s.Builtin, quoteList(BuiltinServers()))
			}
		case ServerCommand:
			if strings.TrimSpace(s.Value) == "" {
				if s.Value != "" {
					c.add(s.ValuePos, "server `%s` is blank; expected `builtin`, `local://name`, a command or an http(s) URL", s.Name)
				}
				continue
			}
			if _, ok := splitWords(strings.TrimSpace(s.Value)); !ok {
				c.add(s.ValuePos, "server `%s` has an unterminated quote; expected a program and its arguments", s.Name)
				continue
			}
			for _, w := range s.Argv {
				if slices.Contains(shellWords, w) || strings.Contains(w, "$(") || strings.Contains(w, "`") {
					c.add(s.ValuePos, "server `%s` holds the shell syntax `%s`, but Loupe starts commands without a shell; expected a program and its arguments (put shell code in a script)", s.Name, w)
					break
				}
			}
		}
	}
}

func (c *checker) parameters() {
	for _, q := range c.p.Parameters {
		if q.Ref == "" || q.Ref == q.Name {
			continue
		}
		if _, ok := c.params[q.Ref]; !ok {
			c.add(q.ValuePos, "parameter `%s` refers to `$%s`, which is not a parameter; expected the name of a parameter, or `$%s` to require it at run time", q.Name, q.Ref, q.Name)
		}
	}
}

// steps checks each step's own rules; depth counts enclosing loops and
// branches, passes the product of the enclosing loops' bounds.
func (c *checker) steps(steps []Step, depth, passes int) {
	for _, s := range steps {
		switch s := s.(type) {
		case *ToolStep:
			c.tool(s)
		case *LoopStep:
			if depth+1 > MaxNesting {
				c.add(s.Pos, "loop nested %d deep; expected at most %d nested loops and branches", depth+1, MaxNesting)
				continue
			}
			c.loop(s, depth, passes)
		case *BranchStep:
			if depth+1 > MaxNesting {
				c.add(s.Pos, "branch nested %d deep; expected at most %d nested loops and branches", depth+1, MaxNesting)
				continue
			}
			c.branch(s, depth, passes)
		}
	}
}

func (c *checker) tool(s *ToolStep) {
	srv := c.p.Server(s.Server)
	if srv == nil {
		if len(c.p.Servers) == 0 {
			c.add(s.Pos, "step `%s` uses server `%s`, but the file declares no servers; expected `%s` under `servers`", s.Name(), s.Server, s.Server)
		} else {
			c.add(s.Pos, "step `%s` uses server `%s`, which is not declared; expected one of %s, or `%s` added under `servers`", s.Name(), s.Server, quoteList(serverNames(c.p)), s.Server)
		}
		return
	}
	if c.p.Dialect == Omni {
		// Parameters are read-only (the memory pool's `$name` convention).
		for _, o := range s.Output {
			if _, ok := c.params[o.Var]; ok {
				c.add(o.Pos, "step `%s` writes `%s`, which is a parameter and read-only; expected another variable name", s.Name(), o.Var)
			}
		}
	}
	if srv.Kind == ServerBuiltin && slices.Contains(BuiltinServers(), srv.Builtin) && BuiltinContract(srv.Builtin, s.Tool) == nil {
		c.add(s.Pos, "unknown step `%s`: built-in server `%s` has no tool `%s`; expected one of %s", s.Name(), srv.Builtin, s.Tool, quoteList(builtinTools(srv.Builtin)))
	}
}

func (c *checker) loop(s *LoopStep, depth, passes int) {
	switch {
	case s.MaxKey == "":
		c.add(s.Pos, "loop has no bound; expected `times` (UltraRAG) or `max_iterations` (omni), an integer from 1 to %d", maxLoopBound)
	case s.bothPos.IsValid():
		c.add(s.bothPos, "loop has both `times` and `max_iterations`; expected one of them")
	case s.Max > 0 && passes*s.Max > MaxPasses:
		c.add(s.MaxPos, "loop runs up to %d passes with the loops around it; expected at most %d", passes*s.Max, MaxPasses)
		return
	}
	if s.Max > 0 {
		passes *= s.Max
	}
	c.steps(s.Steps, depth+1, passes)
}

func (c *checker) branch(s *BranchStep, depth, passes int) {
	c.steps(s.RouterSteps, depth, passes)
	if n := len(s.RouterSteps); n > 0 {
		if _, ok := s.RouterSteps[n-1].(*ToolStep); !ok {
			c.add(s.RouterSteps[n-1].Position(), "the last step of `router` is a %s; expected a `server.tool` step, which returns the route", kindOf(s.RouterSteps[n-1]))
		}
	}
	names := make([]string, 0, len(s.Branches))
	for _, b := range s.Branches {
		names = append(names, b.Name)
	}
	tokenBranch := map[string]string{}
	for _, m := range s.ValueMap {
		if s.Branch(m.Branch) == nil {
			c.add(m.Pos, "`value_map` maps tokens to `%s`, which is not a branch; expected one of %s", m.Branch, quoteList(names))
			continue
		}
		for _, t := range m.Tokens {
			if prev, ok := tokenBranch[t.Value]; ok && prev != m.Branch {
				c.add(t.Pos, "route token `%s` maps to both `%s` and `%s`; expected each token in one branch", t.Value, prev, m.Branch)
				continue
			}
			if b := s.Branch(t.Value); b != nil && t.Value != m.Branch {
				c.add(t.Pos, "route token `%s` is the name of branch `%s`, which it always selects; expected it under `%s` in `value_map`, or another token", t.Value, t.Value, t.Value)
				continue
			}
			tokenBranch[t.Value] = m.Branch
		}
	}
	if routes, router := c.knownRoutes(s); routes != nil {
		var unrouted []string
		for _, r := range routes {
			if s.Route(r) == nil {
				unrouted = append(unrouted, r)
			}
		}
		others := c.otherRouteSets(s, routes)
		if len(unrouted) > 0 {
			c.add(s.RouterPos.or(s.Pos), "router `%s` returns %s, which no branch takes; expected a branch named after each route%s, or a `value_map` entry listing it",
				router, quoteOr(unrouted), others)
		}
		for _, b := range s.Branches {
			taken := false
			for _, r := range routes {
				if s.Route(r) == b {
					taken = true
				}
			}
			if !taken {
				c.add(b.Pos, "branch `%s` is never taken: router `%s` returns %s; expected a branch named after a route%s, or a `value_map` entry for `%s` listing one",
					b.Name, router, quoteOr(routes), others, b.Name)
			}
		}
	}
	for _, b := range s.Branches {
		c.steps(b.Steps, depth+1, passes)
	}
}

// knownRoutes returns the route tokens a branch's router can return, when
// they are known: a built-in router (`check_quality`, or a `router` built-in
// server's tool) whose result is the route. Nil when the tokens come from a
// variable (`field`) or from a tool Loupe does not know.
func (c *checker) knownRoutes(s *BranchStep) ([]string, string) {
	if s.Field != "" && s.Field != "route" {
		return nil, ""
	}
	if n := len(s.RouterSteps); n > 0 {
		t, ok := s.RouterSteps[n-1].(*ToolStep)
		if !ok {
			return nil, ""
		}
		srv := c.p.Server(t.Server)
		if srv == nil || srv.Kind != ServerBuiltin {
			return nil, ""
		}
		if ct := BuiltinContract(srv.Builtin, t.Tool); ct != nil && len(ct.Routes) > 0 {
			return routeSet(ct, s), t.Name()
		}
		return nil, ""
	}
	if ct := BuiltinRouter(s.Router); ct != nil {
		return routeSet(ct, s), s.Router
	}
	return nil, ""
}

// routeSet returns the route vocabulary of ct that s uses: the first of
// ct.RouteSets one of whose tokens selects a branch of s, else ct.Routes.
func routeSet(ct *Contract, s *BranchStep) []string {
	for _, set := range ct.RouteSets {
		for _, r := range set {
			if s.Route(r) != nil {
				return set
			}
		}
	}
	return ct.Routes
}

// otherRouteSets names, for messages, the route vocabularies of s's router
// other than routes (see Contract.RouteSets): "" when there are none.
func (c *checker) otherRouteSets(s *BranchStep, routes []string) string {
	var ct *Contract
	if n := len(s.RouterSteps); n > 0 {
		if t, ok := s.RouterSteps[n-1].(*ToolStep); ok {
			if srv := c.p.Server(t.Server); srv != nil && srv.Kind == ServerBuiltin {
				ct = BuiltinContract(srv.Builtin, t.Tool)
			}
		}
	} else {
		ct = BuiltinRouter(s.Router)
	}
	if ct == nil {
		return ""
	}
	var sets []string
	for _, set := range append([][]string{ct.Routes}, ct.RouteSets...) {
		if !slices.Equal(set, routes) {
			sets = append(sets, strings.Replace(quoteOr(set), " or ", " and ", 1))
		}
	}
	if len(sets) == 0 {
		return ""
	}
	return " (or branches named after its other routes: " + strings.Join(sets, "; or ") + ")"
}

func (p Pos) or(q Pos) Pos {
	if p.IsValid() {
		return p
	}
	return q
}

func kindOf(s Step) string {
	switch s.(type) {
	case *LoopStep:
		return "loop"
	case *BranchStep:
		return "branch"
	}
	return "tool step"
}

func serverNames(p *Pipeline) []string {
	var out []string
	for _, s := range p.Servers {
		out = append(out, s.Name)
	}
	return out
}

// quoteList returns "`a`, `b`, `c`".
func quoteList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	return strings.Join(q, ", ")
}

// quoteOr returns "`a`", "`a` or `b`", "`a`, `b` or `c`".
func quoteOr(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
