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
//	defer run.End(nil, nil)
//	out, err := trace.Tool(ctx, "lookup_order", id, lookup)
//
// Every event is one Record (see the Type constants for which fields each
// type uses), encoded as one JSON line with a version ("v":1) and W3C /
// OpenTelemetry-compatible trace and span ids; schema/record.v1.schema.json
// describes the encoding. Records reach Sinks through a Dispatcher, inline
// or through a bounded background queue whose full-queue policy is
// explicit (Block, or Drop with a count that Shutdown reports). Options set
// the capture policy (full, metadata or none; a size limit with a visible
// truncation marker) and one Redact hook that sees every value first.
//
// A nil *Tracer and a nil *ExecutionContext are valid and record nothing;
// that is how disabled tracing costs a nil check.
package trace
