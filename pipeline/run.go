package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/pipeline/builtin"
	"github.com/loupe-dev/loupe/trace"
)

// RunOptions configure Run and Resume. The zero value runs offline: the
// built-in servers with the Offline model, a tracer of the run's own that
// keeps the records in memory, the file's parameters only.
type RunOptions struct {
	// Params are the run's parameters; they override the file's
	// `parameters` and give the required ones (`name: "$name"`). Values
	// are JSON-like (string, float64, int64, bool, nil, []any,
	// map[string]any).
	Params map[string]any
	// Model is what the built-in generator prompts; nil means
	// builtin.Offline().
	Model agent.Model
	// DocumentsDir is what the built-in retriever indexes when a search
	// finds its index empty and the call gives no documents of its own;
	// empty means the run's documents_dir parameter, if any.
	DocumentsDir string

	// Tracer records the run. Nil means a tracer Run makes from Trace,
	// with the dispatch mode runtime.tracer.callback_dispatch_mode names
	// (see DispatchFor), and shuts down (delivering every record to
	// Trace.Sinks) before it returns.
	Tracer *trace.Tracer
	// Trace are the options of the tracer Run makes when Tracer is nil.
	Trace trace.Options
	// Tags are added to the run's tags ("pipeline", "dialect:…").
	Tags []string

	// Checkpoint keeps a Checkpoint of the run whatever the file's
	// runtime.checkpointer says; otherwise one is kept only for
	// `checkpointer: {type: memory}`.
	Checkpoint bool
	// Connect reaches a server that is not built in (a command or a URL
	// from `servers`); nil means over MCP (package mcp). Tests set it to
	// give servers of their own.
	Connect func(ctx context.Context, p *Pipeline, s *Server) (ToolServer, error)
}

// RunResult is what a pipeline run did.
type RunResult struct {
	// TraceID is the run's trace.
	TraceID trace.TraceID
	// Records are the run's records (nil with a StreamOnly tracer run).
	Records []trace.Record
	// Output is the result of the last step that ran.
	Output any
	// Pool is the memory pool as the run left it.
	Pool *Pool
	// Steps is how many tool steps completed, restored ones included.
	Steps int
	// Termination says why the run ended.
	Termination trace.TerminationReason
	// Stats are the run's aggregates.
	Stats trace.Stats
	// Checkpoint holds the completed steps, to Resume the run from where
	// it failed; nil without a memory checkpointer (see
	// RunOptions.Checkpoint).
	Checkpoint *Checkpoint
}

// ErrMissingParam is wrapped by the error for a required parameter the run
// was not given.
var ErrMissingParam = errors.New("missing parameter")

// DispatchFor returns d with the dispatch mode the pipeline's
// runtime.tracer.callback_dispatch_mode asks for: "inline" delivers each
// record to the sinks before the recording call returns (trace's Inline
// mode), "background" through the bounded background queue; when the file
// does not say, d is returned as is.
func DispatchFor(p *Pipeline, d trace.DispatchOptions) trace.DispatchOptions {
	switch p.Runtime.CallbackDispatchMode {
	case "inline":
		d.Inline = true
	case "background":
		d.Inline = false
	}
	return d
}

// Run validates p (Pipeline.Validate; an invalid pipeline is not run and
// its ErrorList is returned with a nil RunResult) and runs it as one
// traced run: the pipeline is the root run (named after its file),
// each tool step a tool span (server.tool) with the memory writes it made
// under it (memory.set, scope global, or memory with Iteration the step's
// number), each pass of a top-level loop an iteration, each branch a node
// span named "branch <router> → <route>" whose output says the router,
// field, value and route, and the parameters memory.set records of scope
// param. The generator's model calls are model.call records under their
// step.
//
// Steps run in order; a loop runs its body up to its bound (`times` or
// `max_iterations`) and stops early after a pass in which a branch took the
// route "complete". A step without an input mapping is given the whole
// pool values its tool reads (see Pool.View): for a built-in server those
// its builtin.Tool lists, for an MCP server the properties of the tool's
// input schema, for a server from RunOptions.Connect the whole pool; in a
// loop the pass number is given as "iteration" unless the pool has one. Its result's keys (or those its output names) are written
// to the pool.
//
// A failing step ends with its error (tool.error), and the run with an
// error termination naming the step, its position and the cause; a
// cancelled ctx ends it with context_canceled. Once the run started, Run
// returns its RunResult whatever happened, with the run's error. Only the servers p declares are
// started, and only when a step first uses them; all are closed before
// Run returns.
func Run(ctx context.Context, p *Pipeline, o RunOptions) (*RunResult, error) {
	return run(ctx, p, o, nil)
}

// Resume runs p again from the checkpoint of a failed run: the steps cp
// holds are not called again but restored (a node span "restored
// server.tool" each, with their memory writes), so that the run goes on
// at the step that failed, with the pool and every branch decision as
// they were. The parameters are cp's; o.Params is ignored. The resumed
// run is a new trace tagged "resumed_from:<trace id>". cp must come from
// the same pipeline (same steps); Resume fails otherwise.
func Resume(ctx context.Context, p *Pipeline, cp *Checkpoint, o RunOptions) (*RunResult, error) {
	if cp == nil {
		return nil, errors.New("pipeline: Resume: no checkpoint (a run keeps one with runtime.checkpointer type memory, or RunOptions.Checkpoint)")
	}
	if fp := fingerprint(p); cp.Fingerprint != fp {
		return nil, fmt.Errorf("pipeline: Resume: the checkpoint is of another pipeline (%s, fingerprint %s; %s has %s): resume with the pipeline the run was made with", cp.File, cp.Fingerprint, p.File, fp)
	}
	o.Params = cp.Params
	return run(ctx, p, o, cp)
}

// runner is the state of one run.
type runner struct {
	p       *Pipeline
	o       RunOptions
	ec      *trace.ExecutionContext
	pool    *Pool
	servers map[string]ToolServer
	step    int // tool steps begun
	done    int // tool steps completed
	last    any // the last step's result
	cp      *Checkpoint
	replay  []CheckpointStep
	loops   int // loop nesting
	pass    int // the innermost loop's pass; 0 outside loops
}

func run(ctx context.Context, p *Pipeline, o RunOptions, from *Checkpoint) (*RunResult, error) {
	if p == nil {
		return nil, errors.New("pipeline: Run: nil pipeline")
	}
	if err := p.Validate().Err(); err != nil {
		return nil, err
	}
	params, err := resolveParams(p, o.Params)
	if err != nil {
		return nil, err
	}
	tracer, own := o.Tracer, false
	if tracer == nil {
		to := o.Trace
		to.Dispatch = DispatchFor(p, to.Dispatch)
		tracer, own = trace.New(to), true
	}
	name := strings.TrimSuffix(filepath.Base(p.File), filepath.Ext(p.File))
	if name == "" || name == "." {
		name = "pipeline"
	}
	tags := append([]string{"pipeline", "dialect:" + p.Dialect.String()}, o.Tags...)
	if from != nil {
		tags = append(tags, "resumed_from:"+from.TraceID.String())
	}
	ctx, ec := tracer.Start(ctx, name, trace.RunOptions{Input: trace.JSON(params), Tags: tags})
	r := &runner{p: p, o: o, ec: ec, pool: NewPool(params), servers: map[string]ToolServer{}}
	if o.Checkpoint || p.Runtime.Checkpointer == "memory" {
		r.cp = &Checkpoint{TraceID: ec.TraceID(), File: p.File, Fingerprint: fingerprint(p), Params: params}
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		ec.MemorySet(trace.ScopeParam, k, trace.JSON(params[k]))
	}
	if from != nil {
		r.replay = from.Steps
		ec.Custom("checkpoint.resume", trace.JSON(map[string]any{"trace_id": from.TraceID.String(), "restored_steps": len(from.Steps)}))
	}
	_, err = r.steps(ctx, p.Steps)
	for _, n := range slices.Sorted(maps.Keys(r.servers)) {
		if cerr := r.servers[n].Close(); cerr != nil && err == nil {
			ec.Error(fmt.Errorf("closing server %s: %w", n, cerr))
		}
	}
	if err != nil {
		ec.End(nil, err)
	} else {
		ec.End(trace.JSON(r.last), nil)
	}
	reason, _ := ec.Termination()
	res := &RunResult{TraceID: ec.TraceID(), Records: ec.Records(), Output: r.last, Pool: r.pool,
		Steps: r.done, Termination: reason, Stats: ec.Stats(), Checkpoint: r.cp}
	if own {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if serr := tracer.Shutdown(sctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("delivering the trace: %w", serr))
		}
	}
	return res, err
}

// resolveParams gives every parameter of p its value: the run's, else the
// file's default, following `$other` references; a required parameter
// (`name: "$name"`) the run does not give is an error. Run parameters the
// file does not declare are kept too.
func resolveParams(p *Pipeline, given map[string]any) (map[string]any, error) {
	out := maps.Clone(given)
	if out == nil {
		out = map[string]any{}
	}
	var missing []string
	var value func(q *Parameter, depth int) (any, bool)
	value = func(q *Parameter, depth int) (any, bool) {
		if v, ok := given[q.Name]; ok {
			return v, true
		}
		if q.Ref == "" {
			return q.Value, true
		}
		if v, ok := given[q.Ref]; ok {
			return v, true
		}
		if other := p.Parameter(q.Ref); other != nil && other != q && depth < 16 {
			return value(other, depth+1)
		}
		return nil, false
	}
	for _, q := range p.Parameters {
		v, ok := value(q, 0)
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (%s:%s)", q.Name, p.File, q.Pos))
			continue
		}
		out[q.Name] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("pipeline %s: %w: %s: give a value to each (RunOptions.Params; --param name=value on the command line)", p.File, ErrMissingParam, strings.Join(missing, ", "))
	}
	return out, nil
}

// steps runs steps in order. complete reports that a branch took the
// route "complete", which ends the enclosing loop after its pass.
func (r *runner) steps(ctx context.Context, steps []Step) (complete bool, err error) {
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return complete, fmt.Errorf("before %s: %w", r.describe(s), err)
		}
		var c bool
		switch s := s.(type) {
		case *ToolStep:
			err = r.tool(ctx, s)
		case *LoopStep:
			err = r.loop(ctx, s)
		case *BranchStep:
			c, err = r.branch(ctx, s)
		default:
			err = fmt.Errorf("%s: a step of type %T, which the runner does not know", r.at(s.Position()), s)
		}
		if err != nil {
			return complete, err
		}
		complete = complete || c
	}
	return complete, nil
}

// at returns "file:line:column".
func (r *runner) at(pos Pos) string { return r.p.File + ":" + pos.String() }

// describe names a step for errors.
func (r *runner) describe(s Step) string {
	switch s := s.(type) {
	case *ToolStep:
		return fmt.Sprintf("step %s (%s)", s.Name(), r.at(s.Pos))
	case *LoopStep:
		return "loop (" + r.at(s.Pos) + ")"
	case *BranchStep:
		return fmt.Sprintf("branch %s (%s)", s.Router, r.at(s.Pos))
	}
	return r.at(s.Position())
}

// tool runs one tool step, or restores it from the checkpoint being
// resumed.
func (r *runner) tool(ctx context.Context, s *ToolStep) error {
	r.step++
	n, name := r.step, s.Name()
	fail := func(err error) error {
		return fmt.Errorf("step %d %s (%s): %w", n, name, r.at(s.Pos), err)
	}
	if n <= len(r.replay) {
		cs := r.replay[n-1]
		if cs.Name != name {
			return fail(fmt.Errorf("the checkpoint's step %d is %s: it was made by another version of the pipeline", n, cs.Name))
		}
		span := r.ec.StartSpan(trace.SpanNode, "restored "+name, nil)
		err := r.keep(s, n, span.ID(), cs.Result)
		span.End(trace.JSON(cs.Result), err)
		if err != nil {
			return fail(err)
		}
		return nil
	}
	srv, err := r.server(ctx, s.Server)
	var args map[string]any
	if err == nil {
		args, err = r.inputs(s, srv)
	}
	span := r.ec.StartSpan(trace.SpanTool, name, trace.JSON(args))
	if err != nil {
		span.End(nil, err)
		return fail(err)
	}
	res, err := call(builtin.WithParentSpan(ctx, span.ID()), srv, s.Tool, args)
	if err != nil {
		span.End(nil, err)
		return fail(err)
	}
	err = r.keep(s, n, span.ID(), res)
	span.End(trace.JSON(res), err)
	if err != nil {
		return fail(err)
	}
	return nil
}

// call calls tool, turning a panic into an error.
func call(ctx context.Context, srv ToolServer, tool string, args map[string]any) (res any, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, trace.NewPanicError(v)
		}
	}()
	return srv.CallTool(ctx, tool, args)
}

// keep writes step n's result to the pool as its output says, recording
// each write under span, and saves the step in the checkpoint.
func (r *runner) keep(s *ToolStep, n int, span trace.SpanID, res any) error {
	writes, err := outputs(s, res)
	if err != nil {
		return err
	}
	name := s.Name()
	for _, w := range writes {
		r.pool.Set(w.name, w.value, n, name)
		rec := trace.Record{Type: trace.TypeMemorySet, ParentID: span, Name: w.name, Status: string(trace.ScopeGlobal), Output: trace.JSON(w.value)}
		if strings.HasPrefix(w.name, MemoryPrefix) {
			rec.Status, rec.Iteration = string(trace.ScopeMemory), n
		}
		r.ec.Record(rec)
	}
	r.last = res
	r.done++
	if r.cp != nil {
		r.cp.Steps = append(r.cp.Steps, CheckpointStep{Step: n, Name: name, Result: res})
	}
	return nil
}

type write struct {
	name  string
	value any
}

// outputs returns the pool writes a step's result makes: without an
// output, every key of an object result (or "result" for another value);
// with omni's list, the results it names; with UltraRAG's mapping, every
// key, the mapped ones renamed. A named result the object lacks is the
// whole result's main value when the output names only one (the only key
// of a one-key object, else the result itself), and an error otherwise.
func outputs(s *ToolStep, res any) ([]write, error) {
	obj, isObj := res.(map[string]any)
	if s.Output == nil {
		if !isObj {
			return []write{{"result", res}}, nil
		}
		var out []write
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			out = append(out, write{k, obj[k]})
		}
		return out, nil
	}
	var out []write
	renamed := map[string]bool{}
	for _, o := range s.Output {
		v, ok := obj[o.Result]
		switch {
		case ok:
		case len(s.Output) == 1:
			v = res
			if isObj && len(obj) == 1 {
				for _, only := range obj {
					v = only
				}
			}
		default:
			have := "it is not an object"
			if isObj {
				have = "it has " + strings.Join(slices.Sorted(maps.Keys(obj)), ", ")
			}
			return nil, fmt.Errorf("output %s: the result has no %q (%s)", o.Var, o.Result, have)
		}
		renamed[o.Result] = true
		out = append(out, write{o.Var, v})
	}
	if s.OutputMap && isObj {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if !renamed[k] {
				out = append(out, write{k, obj[k]})
			}
		}
	}
	return out, nil
}

// inputs builds a step's arguments from its input mapping, or from the
// pool when it has none.
func (r *runner) inputs(s *ToolStep, srv ToolServer) (map[string]any, error) {
	if s.Input == nil {
		view := r.pool.View()
		if _, ok := view["iteration"]; !ok && r.loops > 0 {
			view["iteration"] = r.pass
		}
		n, ok := srv.(argNamer)
		if !ok {
			return view, nil // a server of the caller's (RunOptions.Connect): the whole pool
		}
		// A tool gets what it reads: for an MCP server, the properties of
		// its input schema (none if it has no schema), not the whole pool.
		names, _ := n.argNames(s.Tool)
		args := map[string]any{}
		for _, k := range names {
			if v, ok := view[k]; ok {
				args[k] = v
			}
		}
		return args, nil
	}
	args := make(map[string]any, len(s.Input))
	for _, in := range s.Input {
		switch in.Kind {
		case InputLiteral:
			args[in.Arg] = in.Literal
		case InputServerParam:
			v, ok := r.pool.Param(in.Ref)
			if !ok {
				return nil, fmt.Errorf("input %s (%s) reads the server parameter $%s, which UltraRAG takes from the server's parameter.yaml: Loupe takes it from the pipeline's parameters; add %s there", in.Arg, r.at(in.ValuePos), in.Ref, in.Ref)
			}
			args[in.Arg] = v
		default:
			v, ok := r.pool.Get(in.Ref)
			if !ok {
				return nil, fmt.Errorf("input %s (%s) reads %s, which no step has written yet and no parameter defines", in.Arg, r.at(in.ValuePos), in.Ref)
			}
			args[in.Arg] = v
		}
	}
	return args, nil
}

// server returns the server named name, starting it on first use. Only
// servers the pipeline declares are ever started.
func (r *runner) server(ctx context.Context, name string) (ToolServer, error) {
	if s, ok := r.servers[name]; ok {
		return s, nil
	}
	decl := r.p.Server(name)
	if decl == nil {
		return nil, fmt.Errorf("server %s is not declared in servers", name)
	}
	var s ToolServer
	var err error
	switch {
	case decl.Kind == ServerBuiltin:
		var b builtin.Server
		dir := r.o.DocumentsDir
		if dir == "" {
			// A documents_dir parameter configures the built-in retriever
			// even for steps whose input mapping does not pass it.
			v, _ := r.pool.Param("documents_dir")
			dir, _ = v.(string)
		}
		b, err = builtin.New(decl.Builtin, builtin.Config{Model: r.o.Model, DocumentsDir: dir, DefaultBackend: r.p.Runtime.RetrievalBackend})
		if err != nil {
			err = fmt.Errorf("server %s (%s): %w", name, r.at(decl.ValuePos), err)
		} else {
			s = builtinServer{b}
		}
	case r.o.Connect != nil:
		s, err = r.o.Connect(ctx, r.p, decl)
	default:
		s, err = connectMCP(ctx, r.p, decl)
	}
	if err != nil {
		return nil, err
	}
	r.servers[name] = s
	return s, nil
}

// loop runs a loop step: each pass of a top-level loop is an iteration of
// the run; a nested loop's passes are node spans "loop pass N".
func (r *runner) loop(ctx context.Context, l *LoopStep) error {
	if l.Max < 1 {
		return fmt.Errorf("loop (%s) has no bound: give it times or max_iterations of at least 1", r.at(l.Pos))
	}
	top := r.loops == 0
	r.loops++
	outer := r.pass
	defer func() { r.loops--; r.pass = outer }()
	for pass := 1; pass <= l.Max; pass++ {
		r.pass = pass
		var span trace.Span
		if top {
			r.ec.StartIteration()
		} else {
			span = r.ec.StartSpan(trace.SpanNode, fmt.Sprintf("loop pass %d", pass), nil)
		}
		complete, err := r.steps(ctx, l.Steps)
		action := "continue"
		switch {
		case err != nil && ctx.Err() != nil:
			action = "canceled"
		case err != nil:
			action = "error"
		case complete:
			action = "complete"
		case pass == l.Max && l.MaxKey == "times":
			action = "done"
		case pass == l.Max:
			action = "max_iterations"
		}
		if top {
			r.ec.EndIteration(action)
		} else {
			span.End(trace.JSON(map[string]any{"action": action}), nil)
		}
		if err != nil {
			return err
		}
		if complete {
			break
		}
	}
	return nil
}

// routeFields are where a branch with no field of its own looks for its
// route token, in order: omni's default field, then the evaluator's and the
// router's outputs.
var routeFields = []string{"route", "routing_reason", "decision"}

// branch runs a branch step: its router steps if any, then the branch the
// route token selects. The token is the router's result field (field, or
// route), else the pool's variable field, else (no field given) the first of
// route, routing_reason and decision that selects a branch. A token selects
// the branch of its name, else the one value_map lists it under, else the
// one builtin.DefaultValueMap lists it under. complete reports the route
// "complete".
func (r *runner) branch(ctx context.Context, b *BranchStep) (complete bool, err error) {
	if len(b.RouterSteps) > 0 {
		if _, err := r.steps(ctx, b.RouterSteps); err != nil {
			return false, err
		}
	}
	fields := routeFields
	if b.Field != "" {
		fields = []string{b.Field}
	}
	type candidate struct{ field, value, source string }
	var cands []candidate
	if len(b.RouterSteps) > 0 {
		obj, _ := r.last.(map[string]any)
		if s, ok := r.last.(string); ok {
			cands = append(cands, candidate{"", s, "router result"})
		}
		for _, f := range fields {
			if s, ok := obj[f].(string); ok {
				cands = append(cands, candidate{f, s, "router result"})
			}
		}
	}
	for _, f := range fields {
		if v, ok := r.pool.Get(f); ok {
			if s, ok := v.(string); ok {
				cands = append(cands, candidate{f, s, "pool"})
			}
		}
	}
	var chosen *Branch
	var c candidate
	how := ""
	for _, c = range cands {
		if chosen = b.Branch(c.value); chosen != nil {
			how = "branch name"
			break
		}
		if chosen = b.Route(c.value); chosen != nil {
			how = "value_map"
			break
		}
		for route, tokens := range builtin.DefaultValueMap() {
			if slices.Contains(tokens, c.value) && b.Branch(route) != nil {
				chosen, how = b.Branch(route), "default value map"
			}
		}
		if chosen != nil {
			break
		}
	}
	router := b.Router
	if router == "" {
		router = "router"
	}
	if chosen == nil {
		names := make([]string, len(b.Branches))
		for i, br := range b.Branches {
			names[i] = br.Name
		}
		seen := "none of them is set"
		if len(cands) > 0 {
			var vs []string
			for _, c := range cands {
				vs = append(vs, fmt.Sprintf("%s = %q", c.field, c.value))
			}
			seen = strings.Join(vs, ", ") + " selects none"
		}
		err := fmt.Errorf("branch %s (%s): no route: it routes on %s, and %s; the branches are %s (a value selects the branch of its name or the one value_map lists it under)",
			router, r.at(b.Pos), strings.Join(fields, " or "), seen, strings.Join(names, ", "))
		span := r.ec.StartSpan(trace.SpanNode, "branch "+router, trace.JSON(map[string]any{"router": router, "fields": fields}))
		span.End(nil, err)
		return false, err
	}
	decision := map[string]any{"router": router, "field": c.field, "value": c.value, "route": chosen.Name, "matched_by": how, "from": c.source}
	span := r.ec.StartSpan(trace.SpanNode, "branch "+router+" → "+chosen.Name, trace.JSON(map[string]any{"router": router, "fields": fields}))
	span.End(trace.JSON(decision), nil)
	complete, err = r.steps(ctx, chosen.Steps)
	return complete || chosen.Name == "complete", err
}
