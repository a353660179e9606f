// Package trace is Loupe's record model and recorder: what an AI agent's
// run did — model calls, tool calls, state and memory, hooks, guardrails,
// nested runs — as typed records, with stats kept up to date as records
// arrive. It uses the standard library only.
//
// A Tracer starts runs; each run is an ExecutionContext carried in a
// context.Context, so code anywhere down the call stack can record into it:
//
//	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}})
//	defer tr.Shutdown(ctx)
//	ctx, run := tr.Start(ctx, "support-agent", trace.RunOptions{})
//	defer run.End(nil, nil) // a backstop: the first End wins
//	out, err := trace.Tool(ctx, "lookup_order", id, lookup)
//	run.End(trace.JSON(out), err)
//
// An ExecutionContext's methods fall in a few groups, each with one way to
// do a thing: Record and its shorthands (ToolCall, ModelCall, Message, …)
// record point events; StartSpan begins a timed tool, model, hook or node
// span that Span.End finishes; StartIteration and EndIteration bracket a
// loop iteration; the function SpawnChild starts a nested run; End ends a
// run, root or nested, with its result and error (SetTermination first
// when the reason is not an error's, such as a limit); Records, Stats,
// Termination, Result and Duration read it back.
//
// Every event is one Record (see the Type constants for which fields each
// type uses), encoded as one JSON line with a version ("v":1) and W3C /
// OpenTelemetry-compatible trace and span ids; schema/record.v1.schema.json
// describes the encoding. Records reach Sinks through a Dispatcher, inline
// or through a bounded background queue whose full-queue policy is
// explicit: Block (a wait that ends with the run's context or Shutdown) or
// Drop. A record that is not delivered is never lost silently: it is
// counted (Stats, Shutdown's *DropError), reported to OnError (a slog
// warning by default), and marked on its trace with a TypeDropped record.
// A sink that fails or panics is a sink error; the other sinks go on.
// Flush and Shutdown return by their context's deadline whatever a sink
// does. Options set
// the capture policy (full, metadata or none; a size limit with a visible
// truncation marker) and two redaction hooks, Redact for values and
// RedactString for names, statuses, errors and tags, that see every piece
// of caller data first (package redact provides both).
//
// # Memory
//
// A run keeps every record it makes, values copied (and bounded by
// Options.MaxValueBytes), for as long as its ExecutionContext is reachable:
// that is what Records returns, and what agent.Result.Records hands on.
// Nested runs' records are kept by the nested contexts, reachable from
// their root. Dropping the ExecutionContext (and the records taken from it)
// frees them all. A run started with RunOptions.StreamOnly keeps none:
// records go to the sinks (held, with a background dispatcher, only until
// the dispatcher takes them) and Records returns nil, while Stats and the
// run's outcome are kept. Between runs, a Tracer keeps only the sizes of
// its last two root runs, to size the next run's log (see Tracer.Start).
// The background dispatcher's queue is bounded by DispatchOptions.
//
// A nil *Tracer and a nil *ExecutionContext are valid and record nothing;
// that is how disabled tracing costs a nil check.
package trace
