// Package replay runs a recorded agent run again offline, with the model
// and the tools answered from its trace, and reports where the new run
// first differs from the recording.
//
// Load reads a Recording from a run's trace records (a stored trace, or
// agent.Result.Records): what the run was asked, its system prompt, the
// tools it offered and every model and tool call of its root loop. A
// Replayer built on it gives an agent.Model and an agent.ToolChain (or
// Stub, for the tools of the code under test) that answer each call from
// the recording after comparing the request with the recorded one: the
// tool definitions, the messages, each tool's input. The first difference
// is a *Divergence (the step, the call, what differs, a readable diff);
// Finish also finds recorded calls the new run never made and another
// answer or termination.
//
// Options.FromStep with Options.Live branches a run: the steps before it
// come from the recording, the steps from it on from the live model. Run
// and RunStored do all of this for an agent.ReAct rebuilt from the trace,
// as `loupe replay` does; Compare lines two runs up step by step, as
// `loupe traces diff` shows them.
//
// The model.call records that Loupe's agent runtime writes hold the
// request as deltas (the messages added since the previous answer) and
// the tool.discovered records the tool definitions; Load rebuilds each
// request from them. A trace whose values were truncated, not captured
// or redacted, or whose records were lost, cannot be replayed faithfully,
// and Load refuses it with the list of what is missing.
package replay
