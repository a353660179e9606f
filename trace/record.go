package trace

import (
	"fmt"
	"slices"
	"time"
)

// Version is the version of the record encoding this package writes. Readers
// accept records whose "v" is between 1 and Version.
const Version = 1

// Type names what a record says happened. The vocabulary is closed except
// for TypeCustom, whose Name is free.
type Type string

// The record types. Start/end pairs share a span id; point events get a span
// of their own whose parent is the span they happened in.
const (
	TypeRunStart       Type = "run.start"       // a root run began: Name, Input, Run (tags, session, user)
	TypeRunEnd         Type = "run.end"         // it ended: Status (TerminationReason), Output, Error, Duration
	TypeIterationStart Type = "iteration.start" // loop iteration Iteration began
	TypeIterationEnd   Type = "iteration.end"   // it ended: Status (loop action), Duration
	TypeModelCall      Type = "model.call"      // one model call: Name (model), Usage, Input, Output, Thinking, Status (finish reason), Error, Duration
	TypeModelDelta     Type = "model.delta"     // a streamed chunk: Name (model), Status ("text" or "thinking"), Output
	TypeToolDiscovered Type = "tool.discovered" // a tool became available: Name, Input (its JSON Schema), Output (its description, a JSON string; absent in traces recorded before Loupe kept it)
	TypeToolStart      Type = "tool.start"      // a tool call began: Name, Input
	TypeToolEnd        Type = "tool.end"        // it returned: Name, Output, Duration
	TypeToolError      Type = "tool.error"      // it failed: Name, Error, Duration
	TypeStateInit      Type = "state.init"      // loop state was created: Output
	TypeStateUpdate    Type = "state.update"    // a state key changed: Name (key), Input (old), Output (new)
	TypeMemorySet      Type = "memory.set"      // a memory pool value was written: Name (key), Status (Scope), Output, Iteration (the step)
	TypeHookStart      Type = "hook.start"      // a hook began: Name (hook point)
	TypeHookEnd        Type = "hook.end"        // it returned: Duration
	TypeHookError      Type = "hook.error"      // it failed or aborted: Error, Duration
	TypeChildSpawn     Type = "child.spawn"     // a nested run began: Name; SpanID is the child's span
	TypeChildEnd       Type = "child.end"       // it ended: Status (TerminationReason), Output, Error, Duration
	TypeNodeStart      Type = "node.start"      // a pipeline node began: Name, Input
	TypeNodeEnd        Type = "node.end"        // it ended: Output, Error, Duration
	TypeGuardrail      Type = "guardrail"       // a guard or limit fired: Name (the rule), Status (action), Error (message), Output (details)
	TypeMessage        Type = "message"         // a conversation message: Name (role), Output (content)
	TypeError          Type = "error"           // an error not tied to a call: Error
	TypeCustom         Type = "custom"          // anything else: Name, Output
	// TypeLog is a log record written during the run (see
	// ExecutionContext.Log): Name (the logger or event name, may be
	// empty), Status (the severity text: "INFO", "ERROR", …), Output
	// {"body":…,"attributes":{…},"severity_number":N} (the parts that
	// are there), and Error (the body's text) when the severity is
	// SeverityError or above. It is a point event under the span it was
	// written in. A logged error is not a failed operation: Stats does
	// not count it.
	TypeLog Type = "log"
	// TypeDropped marks records of the trace that were lost on the way to
	// the sinks (see FullPolicy): Name DroppedName ("records"), Output
	// {"count":N}, N the records of this trace dropped since its last
	// marker. A trace may carry several; readers sum them. The dispatcher
	// makes it, not the run: its Seq is that of the first record it
	// counts (so it collides with no record delivered), its ParentID the
	// span of the run that lost that record, its Time that record's time.
	TypeDropped Type = "dropped"
)

// Types returns every record type, in the order of the constants above, in
// a new slice the caller may change.
func Types() []Type { return slices.Clone(types[:]) }

// types is the closed vocabulary: keep it in step with the constants.
var types = [...]Type{
	TypeRunStart, TypeRunEnd, TypeIterationStart, TypeIterationEnd,
	TypeModelCall, TypeModelDelta,
	TypeToolDiscovered, TypeToolStart, TypeToolEnd, TypeToolError,
	TypeStateInit, TypeStateUpdate, TypeMemorySet,
	TypeHookStart, TypeHookEnd, TypeHookError,
	TypeChildSpawn, TypeChildEnd, TypeNodeStart, TypeNodeEnd,
	TypeGuardrail, TypeMessage, TypeError, TypeCustom, TypeDropped, TypeLog,
}

// Valid reports whether t is one of the record types Types returns.
func (t Type) Valid() bool {
	for _, k := range types {
		if k == t {
			return true
		}
	}
	return false
}

// IsError reports whether a record of type t always reports a failure.
func (t Type) IsError() bool {
	return t == TypeToolError || t == TypeHookError || t == TypeError
}

// Scope says which part of a run's memory pool a memory.set record wrote.
type Scope string

// Memory pool scopes, after the omni/UltraRAG memory pool.
const (
	ScopeParam  Scope = "param"  // read-only parameters given to the run
	ScopeGlobal Scope = "global" // shared values, last write wins
	ScopeMemory Scope = "memory" // history-tracked values; each write keeps the step that made it
)

// Usage is what one model call consumed. Token counts are as the provider
// reported them; CachedTokens and ReasoningTokens are parts of InputTokens
// and OutputTokens respectively, reported separately.
//
// CostUnknown says the call's cost is not known (its model has no price):
// CostUSD is then 0 and means nothing, and views show the cost as unknown,
// never as $0. The flag is negative so that the zero Usage, and records
// written before it existed, keep meaning what they did: CostUSD is the
// cost.
type Usage struct {
	Provider        string  `json:"provider,omitempty"`
	InputTokens     int64   `json:"input_tokens,omitempty"`
	OutputTokens    int64   `json:"output_tokens,omitempty"`
	CachedTokens    int64   `json:"cached_tokens,omitempty"`
	ReasoningTokens int64   `json:"reasoning_tokens,omitempty"`
	CostUSD         float64 `json:"cost_usd,omitempty"`
	CostUnknown     bool    `json:"cost_unknown,omitempty"` // no price for the model: CostUSD is not the cost
}

// Record is the one canonical trace record: on the wire, in storage and in
// memory. Which fields a record uses depends on its Type (see the Type
// constants); unused fields stay zero and are not encoded.
//
// A Record handed to a Sink or returned by an ExecutionContext must be
// treated as read-only: its Values and its Run are shared, not copied.
type Record struct {
	V         int           `json:"v"`                     // encoding version, Version when written by this package
	TraceID   TraceID       `json:"trace_id"`              // the trace (run) this record belongs to
	SpanID    SpanID        `json:"span_id"`               // the span it belongs to
	ParentID  SpanID        `json:"parent_id,omitzero"`    // the enclosing span; zero for the root
	Seq       uint64        `json:"seq"`                   // order within the trace, from 1, strictly increasing
	Time      time.Time     `json:"time"`                  // wall-clock time the record was made (a call's end for end records)
	Type      Type          `json:"type"`                  // what happened
	Name      string        `json:"name,omitempty"`        // tool, model, hook, key, role or rule name
	Iteration int           `json:"iteration,omitempty"`   // loop iteration it happened in, from 1; 0 outside iterations
	Depth     int           `json:"depth,omitempty"`       // nesting depth of the run that made it; 0 for the root
	Duration  time.Duration `json:"duration_ns,omitempty"` // for end records: how long the span took
	Status    string        `json:"status,omitempty"`      // termination reason, loop action, finish reason, scope or action
	Error     string        `json:"error,omitempty"`       // the error message, if the operation failed
	Input     Value         `json:"input,omitempty"`       // JSON: what went in
	Output    Value         `json:"output,omitempty"`      // JSON: what came out
	Thinking  Value         `json:"thinking,omitempty"`    // JSON: a model's reasoning text, when it shows it
	Usage     Usage         `json:"usage,omitzero"`        // model.call: tokens and cost
	// Run is what a run.start record says about the whole run: its tags,
	// session and user; nil on every other record the recorder makes, and
	// on a run.start that has none of them. Records imported from other
	// formats may carry one on any record (an OpenTelemetry child span's
	// session.id): a trace's session and user are those of the first
	// record that carries one. On the wire its fields are the record's
	// own "tags", "session" and "user".
	//
	// It is a pointer so that the other records do not pay for three
	// fields only run.start uses (see TestRecordSize). Copies of a record
	// share it: read it through Tags, Session and User, and change it
	// only through EditRun.
	Run *RunInfo `json:"-"`
}

// RunInfo is what a run.start record says about the run as a whole
// (Record.Run). In a record it is shared by the record's copies, so it is
// read-only there: to change it, call Record.EditRun.
type RunInfo struct {
	Tags []string // labels to search by, e.g. "env:ci"
	// Session and User say which conversation (or task across runs) the
	// trace belongs to and whose it is (RunOptions.Session,
	// RunOptions.User).
	Session string
	User    string
}

// String formats ri's fields, so that fmt prints a Record's Run by its
// content rather than as an address (and two records with equal runs
// print alike). A nil RunInfo is "<nil>".
func (ri *RunInfo) String() string {
	if ri == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{Tags:%q Session:%q User:%q}", ri.Tags, ri.Session, ri.User)
}

// Tags returns r's run tags (Record.Run), nil if it has none. The slice
// is shared with r's copies: do not change it.
func (r *Record) Tags() []string {
	if r.Run == nil {
		return nil
	}
	return r.Run.Tags
}

// Session returns r's session id (Record.Run), "" if it has none.
func (r *Record) Session() string {
	if r.Run == nil {
		return ""
	}
	return r.Run.Session
}

// User returns r's user id (Record.Run), "" if it has none.
func (r *Record) User() string {
	if r.Run == nil {
		return ""
	}
	return r.Run.User
}

// EditRun gives r a RunInfo of its own, a copy of the one it had (its
// tags copied too) or a new zero one, and returns it for the caller to
// change: other copies of the record are not affected. It allocates; a
// caller that may change nothing should compare first.
func (r *Record) EditRun() *RunInfo {
	ri := new(RunInfo)
	if r.Run != nil {
		*ri = *r.Run
		ri.Tags = slices.Clone(ri.Tags)
	}
	r.Run = ri
	return ri
}

// Start returns when the operation a record describes began: Time minus
// Duration.
func (r *Record) Start() time.Time { return r.Time.Add(-r.Duration) }

// Failed reports whether the record reports a failure.
func (r *Record) Failed() bool { return r.Error != "" || r.Type.IsError() }
