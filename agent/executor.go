package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// Action says what a loop wants after an iteration.
type Action string

// Loop actions, recorded as the Status of iteration.end records.
const (
	ActionContinue  Action = "continue"  // run another iteration
	ActionTerminate Action = "terminate" // the run is over
)

// A Step is the outcome of one iteration of an AgentLoop.
type Step struct {
	Action Action // whether the loop runs another iteration
	Answer string // ActionTerminate: the final answer
	Err    error  // ActionTerminate: why the run failed, if it did
}

// Continue asks for another iteration.
func Continue() Step { return Step{Action: ActionContinue} }

// Final ends the run successfully with answer.
func Final(answer string) Step { return Step{Action: ActionTerminate, Answer: answer} }

// Fail ends the run with err. The termination reason follows from err: a
// *LimitError gives its own reason, a *HookError hook_abort, a canceled
// context context_canceled, a deadline timeout, anything else error.
func Fail(err error) Step { return Step{Action: ActionTerminate, Err: err} }

// An AgentLoop is the logic of an agent, run by an Executor one iteration
// at a time. Next performs one iteration; ec is the run's ExecutionContext
// (nil when the run is untraced; its methods are still safe to call) and
// ctx carries it too, along with the run's hooks and limits, so model and
// tool calls made with Generate, CallTool and CallTools are traced and
// checked. Next is never called concurrently for one run. A Next that
// panics fails the run like Fail with a *trace.PanicError (termination
// error); so does a Starter's Start.
type AgentLoop interface {
	Next(ctx context.Context, ec *trace.ExecutionContext) Step
}

// A Starter is an AgentLoop that wants the run's input before the first
// iteration, for example to put it into its message history. An error
// from Start ends the run before any iteration.
type Starter interface {
	Start(ctx context.Context, ec *trace.ExecutionContext, input string) error
}

// Limits bound a run. A zero field means no limit. When a limit is hit
// the run records a guardrail record naming it (rule = the limit's name,
// action "abort") and ends with the termination reason listed below.
// MaxCostUSD is also hit by a model call whose cost is unknown (its model
// has no price; see trace.Usage.CostUnknown): the budget could not be kept.
type Limits struct {
	MaxIterations       int            // "max_iterations" → max_iterations
	MaxToolCalls        int            // "max_tool_calls" → limit_exceeded
	MaxToolCallsPerTool map[string]int // "max_tool_calls:<tool>" → limit_exceeded
	MaxTokens           int64          // "max_tokens" (input + output, nested runs included) → limit_exceeded
	MaxCostUSD          float64        // "max_cost_usd" (nested runs included) → limit_exceeded
	Timeout             time.Duration  // "timeout" → timeout
}

// Rule names used in guardrail records, besides those of Limits.
const (
	RuleTimeout  = "timeout"          // the run's deadline passed
	RuleCanceled = "context_canceled" // the run's context was canceled
)

// A LimitError reports that a limit stopped the run. The guardrail record
// with the same Rule precedes it in the trace.
type LimitError struct {
	Rule   string                  // "max_iterations", "max_tool_calls", "max_tool_calls:<tool>", "max_tokens", "max_cost_usd", "timeout", "context_canceled"
	Reason trace.TerminationReason // how the run ends because of it
	Msg    string                  // what happened, with the numbers
	Err    error                   // the context's error, for timeout and context_canceled
}

// Error returns Msg: which limit was hit, with the numbers.
func (e *LimitError) Error() string { return e.Msg }

// Unwrap returns the context's error, if a context ended the run.
func (e *LimitError) Unwrap() error { return e.Err }

// Result is a finished run: its answer together with its trace.
type Result struct {
	Answer      string                  // the final answer; "" when the run failed before one
	Records     []trace.Record          // the run's records, nested runs included, in Seq order; nil when untraced or StreamOnly
	Stats       trace.Stats             // aggregates of the run's records (kept even when StreamOnly)
	Duration    time.Duration           // wall time from start to end
	Termination trace.TerminationReason // why the run ended (success included)
	Err         error                   // why the run failed; nil on success
	TraceID     trace.TraceID           // the run's trace; zero when untraced
}

// An Executor runs AgentLoops with hooks, limits and tracing. Its fields
// are configuration, read but never modified by Run; one Executor may run
// many loops concurrently. The zero value runs untraced, without hooks or
// limits.
type Executor struct {
	// Name names runs in traces; empty means "agent".
	Name string
	// Tracer records runs; nil runs them untraced.
	Tracer *trace.Tracer
	// Tags label every root run, e.g. "env:ci".
	Tags []string
	// Session and User, if set, are recorded on every root run
	// (trace.RunOptions.Session, User): the conversation the run belongs
	// to and whose it is, by which stores group runs. For one Executor
	// per service serving many conversations, copy it per conversation
	// (an Executor is a plain value: e := base; e.Session = id).
	Session string
	User    string
	// StreamOnly sends root runs' records to the Tracer's sinks without
	// keeping them in memory (trace.RunOptions.StreamOnly): Result.Records
	// is then nil, while Result.Stats is complete.
	StreamOnly bool
	// Hooks fire, in order, at each HookPoint.
	Hooks []Hook
	// Limits bound each run.
	Limits Limits
}

type runKey struct{}

// run is the runtime state of one Executor.Run: what Generate and
// CallTool find in the context.
type run struct {
	exec   *Executor
	ec     *trace.ExecutionContext
	parent *run
	iter   atomic.Int64 // the current iteration, for hook events

	mu        sync.Mutex
	toolCalls int
	byTool    map[string]int
	tokens    int64
	cost      float64
	stop      error // the first limit or hook abort that ended the run
}

func runFrom(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

// Run runs loop to the end and returns its answer and trace. input is
// what the run was asked; it is recorded on run.start and handed to loop
// if it is a Starter. Run does not return early on failure: the failure is
// in Result.Err and Result.Termination. A panic in the loop, a tool, a
// model or a hook does not escape Run either: it becomes that call's
// error, a *trace.PanicError, and the run goes on or ends exactly as for
// a returned error. The trace is complete (run.end recorded) when Run
// returns; call the Tracer's Flush or Shutdown to make sure sinks have it.
func (e *Executor) Run(ctx context.Context, loop AgentLoop, input string) Result {
	var ec *trace.ExecutionContext
	ctx, cancel := e.withTimeout(ctx)
	defer cancel()
	if e.Tracer != nil {
		ctx, ec = e.Tracer.Start(ctx, e.name(), trace.RunOptions{Input: trace.Text(input), Tags: e.Tags,
			Session: e.Session, User: e.User, Data: loop, StreamOnly: e.StreamOnly})
	} else if trace.FromContext(ctx) != nil {
		// An untraced run inside a traced one must not record into it.
		ctx = trace.NewContext(ctx, nil)
	}
	return e.execute(ctx, ec, nil, loop, input)
}

// RunChild runs loop as a nested run of the run carried by ctx (a
// sub-agent, a compaction pass): its records are children of that run's
// trace, named name, and its stats, tokens and cost roll up into it. The
// caller's token and cost budgets include the child's use. Without a
// traced run in ctx, the child runs untraced. The Executor's Tracer and
// Tags are not used.
func (e *Executor) RunChild(ctx context.Context, name string, loop AgentLoop, input string) Result {
	ctx, cancel := e.withTimeout(ctx)
	defer cancel()
	ctx, child := trace.SpawnChild(ctx, name, loop) // under the tool call running it, if any
	defer child.End(nil, nil)
	return e.execute(ctx, child, runFrom(ctx), loop, input)
}

// withTimeout applies Limits.Timeout to ctx. Run and RunChild apply it
// before the run starts so that the recorder has the run's deadline too:
// a record waiting for room in a full queue (trace.Block) gives up then.
func (e *Executor) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.Limits.Timeout > 0 {
		return context.WithTimeout(ctx, e.Limits.Timeout)
	}
	return ctx, func() {}
}

func (e *Executor) name() string {
	if e.Name == "" {
		return "agent"
	}
	return e.Name
}

func (e *Executor) execute(ctx context.Context, ec *trace.ExecutionContext, parent *run, loop AgentLoop, input string) Result {
	start := time.Now()
	r := &run{exec: e, ec: ec, parent: parent}
	ctx = context.WithValue(ctx, runKey{}, r)

	answer, err := r.safeLoop(ctx, loop, input)
	if err == nil {
		r.mu.Lock()
		err = r.stop
		r.mu.Unlock()
	}
	reason := reasonOf(err)
	var result trace.Value
	if err == nil && answer != "" {
		result = trace.Text(answer)
	}
	ec.SetTermination(reason, err)
	if len(e.Hooks) > 0 {
		// The run is over: a failing after_run hook is recorded but
		// changes nothing.
		_ = r.fire(ctx, &HookEvent{Point: AfterRun, Answer: answer, Termination: reason, Err: err}, false)
	}
	ec.End(result, nil) // err is in the termination: not recorded again as an error record

	res := Result{Answer: answer, Termination: reason, Err: err, Duration: time.Since(start)}
	if ec != nil {
		res.Records = ec.Records()
		res.Stats = ec.Stats()
		res.Duration = ec.Duration()
		res.TraceID = ec.TraceID()
	}
	return res
}

// safeLoop is loop, with a panic that escaped it (from the recorder's
// Redact hook, say) turned into the error that ended the run, so that the
// run still ends and records run.end.
func (r *run) safeLoop(ctx context.Context, loop AgentLoop, input string) (answer string, err error) {
	defer func() {
		if v := recover(); v != nil {
			answer, err = "", trace.NewPanicError(v)
			// Close the iteration the panic left open, if any; what
			// panicked may panic again, and must not escape now.
			func() {
				defer func() { _ = recover() }()
				r.ec.EndIteration(string(ActionTerminate))
			}()
		}
	}()
	return r.loop(ctx, loop, input)
}

// next calls loop.Next, turning a panic into a failed step.
func next(ctx context.Context, ec *trace.ExecutionContext, loop AgentLoop) (step Step) {
	defer func() {
		if v := recover(); v != nil {
			step = Fail(trace.NewPanicError(v))
		}
	}()
	return loop.Next(ctx, ec)
}

// start calls s.Start, turning a panic into its error.
func start(ctx context.Context, ec *trace.ExecutionContext, s Starter, input string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = trace.NewPanicError(v)
		}
	}()
	return s.Start(ctx, ec, input)
}

// fireHook calls h, turning a panic into its error.
func fireHook(ctx context.Context, ec *trace.ExecutionContext, h Hook, ev *HookEvent) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = trace.NewPanicError(v)
		}
	}()
	return h.Fire(ctx, ec, ev)
}

// loop runs the iterations and returns the answer or the error that ended
// the run.
func (r *run) loop(ctx context.Context, loop AgentLoop, input string) (string, error) {
	e, ec := r.exec, r.ec
	hooks := len(e.Hooks) > 0
	if hooks {
		if err := r.fire(ctx, &HookEvent{Point: BeforeRun, Input: input}, true); err != nil {
			return "", err
		}
	}
	if s, ok := loop.(Starter); ok {
		if err := start(ctx, ec, s, input); err != nil {
			return "", r.ctxErr(ctx, err)
		}
	}
	for n := 1; ; n++ {
		if err := r.checkContext(ctx); err != nil {
			return "", err
		}
		if max := e.Limits.MaxIterations; max > 0 && n > max {
			return "", r.limit(&LimitError{Rule: "max_iterations", Reason: trace.TerminationMaxIterations,
				Msg: fmt.Sprintf("max_iterations: the run did not finish within %d iterations; raise Limits.MaxIterations or make the loop terminate sooner", max)},
				map[string]int{"limit": max, "iterations": n - 1})
		}
		ec.StartIteration()
		r.iter.Store(int64(n))
		if hooks {
			if err := r.fire(ctx, &HookEvent{Point: BeforeIteration, Iteration: n}, true); err != nil {
				ec.EndIteration(string(ActionTerminate))
				return "", err
			}
		}
		var iterStart time.Time
		if hooks {
			iterStart = time.Now()
		}
		step := next(ctx, ec, loop)
		if step.Action != ActionContinue {
			step.Action = ActionTerminate
		}
		r.mu.Lock()
		stop := r.stop
		r.mu.Unlock()
		if stop != nil {
			// A limit or a hook stopped the run inside the iteration, even
			// if the loop carried on.
			step = Fail(stop)
		}
		if step.Err != nil {
			step.Err = r.ctxErr(ctx, step.Err)
		}
		ec.EndIteration(string(step.Action))
		if hooks {
			if err := r.fire(ctx, &HookEvent{Point: AfterIteration, Iteration: n, Step: &step, Duration: time.Since(iterStart)}, true); err != nil {
				return "", err
			}
		}
		if step.Action == ActionTerminate {
			return step.Answer, step.Err
		}
	}
}

// checkContext turns a done context into the timeout or context_canceled
// limit.
func (r *run) checkContext(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return r.ctxErr(ctx, ctx.Err())
}

// ctxErr replaces err by a *LimitError (and records the guardrail) when
// err was caused by ctx ending; otherwise it returns err.
func (r *run) ctxErr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if cerr == nil || !errors.Is(err, cerr) {
		return err
	}
	var le *LimitError
	if errors.As(err, &le) {
		return err
	}
	if errors.Is(cerr, context.DeadlineExceeded) {
		msg := "timeout: the run's deadline passed"
		if t := r.exec.Limits.Timeout; t > 0 {
			msg = fmt.Sprintf("timeout: the run did not finish within %v (Limits.Timeout)", t)
		}
		return r.limit(&LimitError{Rule: RuleTimeout, Reason: trace.TerminationTimeout, Msg: msg, Err: cerr}, nil)
	}
	return r.limit(&LimitError{Rule: RuleCanceled, Reason: trace.TerminationContextCanceled,
		Msg: "context_canceled: the run's context was canceled", Err: cerr}, nil)
}

// limit records the guardrail for le, makes it the run's stop reason if it
// is the first, and returns the reason that stops the run.
func (r *run) limit(le *LimitError, details any) error {
	r.mu.Lock()
	first := r.stop == nil
	if first {
		r.stop = le
	}
	stop := r.stop
	r.mu.Unlock()
	if first && r.ec != nil {
		var d trace.Value
		if details != nil {
			d = trace.JSON(details)
		}
		r.ec.Guardrail(le.Rule, "abort", le.Msg, d)
	}
	return stop
}

// reasonOf maps the error that ended a run to its termination reason.
func reasonOf(err error) trace.TerminationReason {
	var le *LimitError
	var he *HookError
	switch {
	case err == nil:
		return trace.TerminationSuccess
	case errors.As(err, &le):
		return le.Reason
	case errors.As(err, &he):
		return trace.TerminationHookAbort
	}
	return trace.ReasonFor(err)
}

// IsStop reports whether err means the run must stop now: a limit was hit
// or a hook aborted. Loops that turn tool errors into observations for the
// model should return Fail(err) instead for these.
func IsStop(err error) bool {
	var le *LimitError
	var he *HookError
	return errors.As(err, &le) || errors.As(err, &he)
}

// beforeToolCall counts one call of tool and enforces the tool-call
// limits on this run and the runs it is nested in.
func (r *run) beforeToolCall(tool string) error {
	for x := r; x != nil; x = x.parent {
		if err := x.countTool(tool); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) countTool(tool string) error {
	l := &r.exec.Limits
	r.mu.Lock()
	if r.stop != nil {
		err := r.stop
		r.mu.Unlock()
		return err
	}
	if l.MaxToolCalls > 0 && r.toolCalls >= l.MaxToolCalls {
		r.mu.Unlock()
		return r.limit(&LimitError{Rule: "max_tool_calls", Reason: trace.TerminationLimitExceeded,
			Msg: fmt.Sprintf("max_tool_calls: the run already made %d tool calls, the limit; %s was not called", l.MaxToolCalls, tool)},
			map[string]any{"limit": l.MaxToolCalls, "tool": tool})
	}
	if max, ok := l.MaxToolCallsPerTool[tool]; ok && r.byTool[tool] >= max {
		r.mu.Unlock()
		return r.limit(&LimitError{Rule: "max_tool_calls:" + tool, Reason: trace.TerminationLimitExceeded,
			Msg: fmt.Sprintf("max_tool_calls:%s: the run already called %s %d times, the limit", tool, tool, max)},
			map[string]any{"limit": max, "tool": tool})
	}
	r.toolCalls++
	if l.MaxToolCallsPerTool != nil {
		if r.byTool == nil {
			r.byTool = make(map[string]int)
		}
		r.byTool[tool]++
	}
	r.mu.Unlock()
	return nil
}

// checkBudget returns the limit error if a budget is already spent.
func (r *run) checkBudget() error {
	for x := r; x != nil; x = x.parent {
		if err := x.budget(0, 0); err != nil {
			return err
		}
	}
	return nil
}

// spend adds model's call usage to this run and the runs it is nested
// in, and returns the limit error if that exceeded a budget. A call of
// unknown cost (its model has no price) stops a run that has a cost
// budget: the budget could no longer be kept, and a budget that silently
// stops counting is worse than none.
func (r *run) spend(model string, u trace.Usage) error {
	var first error
	for x := r; x != nil; x = x.parent {
		err := x.budget(u.InputTokens+u.OutputTokens, u.CostUSD)
		if err == nil && u.CostUnknown && x.exec.Limits.MaxCostUSD > 0 {
			err = x.limit(&LimitError{Rule: "max_cost_usd", Reason: trace.TerminationLimitExceeded,
				Msg: fmt.Sprintf("max_cost_usd: model %q has no price, so the run's cost budget of $%.6f cannot be kept; price it in a price file (LOUPE_PRICES; all prices 0 for a free local model) or drop the cost limit", model, x.exec.Limits.MaxCostUSD)},
				map[string]any{"limit": x.exec.Limits.MaxCostUSD, "model": model, "cost_unknown": true})
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (r *run) budget(tokens int64, cost float64) error {
	l := &r.exec.Limits
	r.mu.Lock()
	r.tokens += tokens
	r.cost += cost
	t, c, stop := r.tokens, r.cost, r.stop
	r.mu.Unlock()
	if stop != nil {
		return stop
	}
	strict := tokens == 0 && cost == 0 // before a call: a spent budget stops it
	if l.MaxTokens > 0 && (t > l.MaxTokens || strict && t >= l.MaxTokens) {
		return r.limit(&LimitError{Rule: "max_tokens", Reason: trace.TerminationLimitExceeded,
			Msg: fmt.Sprintf("max_tokens: the run used %d tokens, over its budget of %d", t, l.MaxTokens)},
			map[string]int64{"limit": l.MaxTokens, "tokens": t})
	}
	if l.MaxCostUSD > 0 && (c > l.MaxCostUSD || strict && c >= l.MaxCostUSD) {
		return r.limit(&LimitError{Rule: "max_cost_usd", Reason: trace.TerminationLimitExceeded,
			Msg: fmt.Sprintf("max_cost_usd: the run cost $%.6f, over its budget of $%.6f", c, l.MaxCostUSD)},
			map[string]float64{"limit": l.MaxCostUSD, "cost_usd": c})
	}
	return nil
}

// Hook points, recorded as the Name of hook.start / hook.end / hook.error.
const (
	BeforeRun       HookPoint = "before_run"
	AfterRun        HookPoint = "after_run"
	BeforeIteration HookPoint = "before_iteration"
	AfterIteration  HookPoint = "after_iteration"
	BeforeModel     HookPoint = "before_model"
	AfterModel      HookPoint = "after_model"
	BeforeTool      HookPoint = "before_tool"
	AfterTool       HookPoint = "after_tool"
)

// A HookPoint names where in a run a hook fires.
type HookPoint string

// A HookEvent tells a hook where it fires and what happened. Only the
// fields of its Point are set. Hooks that fire before a call may modify
// what the pointers point to (the request, the tool call) to change it.
type HookEvent struct {
	Point     HookPoint // where the hook fires; it says which fields are set
	Iteration int       // the current iteration, from 1; 0 before the first

	Input       string                  // BeforeRun: the run's input
	Answer      string                  // AfterRun: the final answer
	Termination trace.TerminationReason // AfterRun: why the run ended
	Step        *Step                   // AfterIteration: the iteration's outcome
	Duration    time.Duration           // AfterIteration, AfterModel, AfterTool: how long it took
	Model       string                  // BeforeModel, AfterModel: the model's name
	Request     *Request                // BeforeModel, AfterModel
	Response    *Response               // AfterModel
	ToolCall    *ToolCall               // BeforeTool, AfterTool
	ToolOutput  []byte                  // AfterTool: the tool's JSON output
	Err         error                   // AfterRun, AfterModel, AfterTool: the error, if any
}

// A Hook observes a run, and may stop it: an error returned by Fire is
// recorded as hook.error and ends the run with termination hook_abort
// (except at AfterRun, when the run is already over). A hook that panics
// is treated the same way, with a *trace.PanicError as its error. Hooks
// around the parallel tool calls of CallTools fire in the caller's
// goroutine, in the order of the calls, while the tools run; hooks around
// tool calls that a loop makes concurrently itself fire concurrently.
type Hook interface {
	Fire(ctx context.Context, ec *trace.ExecutionContext, ev *HookEvent) error
}

// HookFunc adapts a function to the Hook interface.
type HookFunc func(ctx context.Context, ec *trace.ExecutionContext, ev *HookEvent) error

// Fire calls f.
func (f HookFunc) Fire(ctx context.Context, ec *trace.ExecutionContext, ev *HookEvent) error {
	return f(ctx, ec, ev)
}

// A HookError reports that a hook aborted the run.
type HookError struct {
	Point HookPoint // where the hook fired
	Err   error     // what the hook returned
}

// Error names the hook point and the hook's error.
func (e *HookError) Error() string {
	return fmt.Sprintf("hook %s aborted the run: %v", e.Point, e.Err)
}

// Unwrap returns the hook's error.
func (e *HookError) Unwrap() error { return e.Err }

// fire runs the hooks for ev.Point, each traced as a hook span. With
// abort, the first error stops the run.
func (r *run) fire(ctx context.Context, ev *HookEvent, abort bool) error {
	if ev.Iteration == 0 {
		ev.Iteration = int(r.iter.Load())
	}
	for _, h := range r.exec.Hooks {
		span := r.ec.StartSpan(trace.SpanHook, string(ev.Point), nil)
		err := fireHook(ctx, r.ec, h, ev)
		span.End(nil, err)
		if err != nil && abort {
			he := &HookError{Point: ev.Point, Err: err}
			r.mu.Lock()
			if r.stop == nil {
				r.stop = he
			}
			stop := r.stop
			r.mu.Unlock()
			return stop
		}
	}
	return nil
}

// errorText is the text a model sees for a failed tool call.
func errorText(err error) string {
	return "error: " + strings.TrimSpace(err.Error())
}
