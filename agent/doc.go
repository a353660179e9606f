// Package agent is Loupe's traced agent runtime: an Executor that runs an
// AgentLoop one iteration at a time, with hooks, limits and tracing built in.
//
// The pieces follow the Go ExecutionContext design: a Model and a ToolChain
// that the runtime traces automatically (Generate, CallTool, CallTools), an
// AgentLoop whose Next is called once per iteration, Hooks before and after
// the run, each iteration, each model call and each tool call, and nested
// runs (sub-agents, compaction) recorded as children of the run that
// spawned them. ReAct is a ready loop: model, tool calls, observations,
// model again, until the model answers.
//
// Every run returns its answer together with its trace (Result). A nil
// *trace.Tracer runs untraced: nothing is recorded, but hooks run and
// limits are enforced all the same.
//
// Code the runtime calls but did not write cannot take a run down: a tool,
// model, hook or loop that panics fails that call with a *trace.PanicError
// (the panic value and where it was raised), which the run handles exactly
// like a returned error, and Run always returns its Result with the trace
// ended. Parallel tool calls are traced in the order the model asked for
// them, whatever order they finish in, so a scripted run records the same
// trace every time.
package agent
