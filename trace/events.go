package trace

import "time"

// The methods below record one event each. They are shorthands for Record
// with the fields documented on the Type constants; all are no-ops on a nil
// ExecutionContext.

// ToolCall records a finished tool call in one record: tool.end, or
// tool.error when err is not nil. Use StartSpan(SpanTool, …) and End to see the call
// while it runs.
func (ec *ExecutionContext) ToolCall(name string, input, output Value, d time.Duration, err error) {
	if ec != nil { // inlined, so that disabled tracing costs a compare
		ec.toolCall(name, input, output, d, err)
	}
}

func (ec *ExecutionContext) toolCall(name string, input, output Value, d time.Duration, err error) {
	r := Record{Type: TypeToolEnd, Name: name, Input: input, Output: output, Duration: d}
	if err != nil {
		r.Type, r.Error = TypeToolError, err.Error()
	}
	ec.Record(r)
}

// ModelCall describes a finished model call for ExecutionContext.ModelCall.
type ModelCall struct {
	Model        string
	Input        Value // the request (messages), as JSON
	Output       Value // the response content
	Thinking     Value // reasoning text, if the model showed it
	Usage        Usage
	FinishReason string
	Duration     time.Duration
	Err          error
}

// ModelCall records a finished model call.
func (ec *ExecutionContext) ModelCall(m ModelCall) {
	if ec == nil {
		return
	}
	r := Record{Type: TypeModelCall, Name: m.Model, Input: m.Input, Output: m.Output, Thinking: m.Thinking,
		Usage: m.Usage, Status: m.FinishReason, Duration: m.Duration}
	if m.Err != nil {
		r.Error = m.Err.Error()
	}
	ec.Record(r)
}

// ToolDiscovered records that a tool became available, with its input schema.
func (ec *ExecutionContext) ToolDiscovered(name string, schema Value) {
	ec.Record(Record{Type: TypeToolDiscovered, Name: name, Input: schema})
}

// StateInit records the loop state a run starts from.
func (ec *ExecutionContext) StateInit(state Value) {
	ec.Record(Record{Type: TypeStateInit, Output: state})
}

// StateUpdate records that state key changed from old to new.
func (ec *ExecutionContext) StateUpdate(key string, old, new Value) {
	ec.Record(Record{Type: TypeStateUpdate, Name: key, Input: old, Output: new})
}

// MemorySet records a write to the run's memory pool. For ScopeMemory the
// record's Iteration is the step that wrote the value, so the pool's
// history can be rebuilt from the records.
func (ec *ExecutionContext) MemorySet(scope Scope, key string, v Value) {
	ec.Record(Record{Type: TypeMemorySet, Name: key, Status: string(scope), Output: v})
}

// Guardrail records that rule fired and what was done about it (action:
// "abort", "block", "warn", …), with a message and details.
func (ec *ExecutionContext) Guardrail(rule, action, message string, details Value) {
	ec.Record(Record{Type: TypeGuardrail, Name: rule, Status: action, Error: message, Output: details})
}

// Message records a conversation message from role ("user", "assistant", …).
func (ec *ExecutionContext) Message(role string, content Value) {
	ec.Record(Record{Type: TypeMessage, Name: role, Output: content})
}

// Error records an error not tied to one call. A nil err records nothing.
func (ec *ExecutionContext) Error(err error) {
	if ec == nil || err == nil {
		return
	}
	ec.Record(Record{Type: TypeError, Error: err.Error()})
}

// Custom records an event of the caller's own kind.
func (ec *ExecutionContext) Custom(name string, data Value) {
	ec.Record(Record{Type: TypeCustom, Name: name, Output: data})
}
