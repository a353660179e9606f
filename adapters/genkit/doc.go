// Package genkittrace records agents and flows built with Genkit Go
// (github.com/firebase/genkit/go) into Loupe, in process: every span
// Genkit makes becomes typed Loupe records, delivered to a Loupe
// *trace.Tracer's sinks as the span ends. A program writes three lines:
//
//	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}})
//	defer genkittrace.Register(tr, genkittrace.Options{}).Unregister()
//	g := genkit.Init(ctx, genkit.WithPlugins(…))
//
// and runs its flows as before (call tr.Shutdown before exiting, to drain
// the sinks).
//
// # How it hooks in
//
// Genkit Go traces through OpenTelemetry: each action (flow, model, tool,
// retriever, embedder…), each generate turn and each flow step runs in a
// span of the global SDK TracerProvider (Genkit's tracing.TracerProvider),
// which carries Genkit's own attributes when it ends: genkit:type,
// genkit:name, genkit:path, genkit:input, genkit:output,
// genkit:metadata:subtype, genkit:state, genkit:isRoot. Register adds a
// Processor, an OpenTelemetry span processor, to that provider; a program
// that builds its own provider adds New's Processor with
// sdktrace.WithSpanProcessor instead.
//
// When a span ends the Processor converts it to OTLP (pdata) and maps it
// with package otlp, the mapping Loupe's collector applies to Genkit's
// spans over OTLP, so a flow recorded in process and one exported to
// `loupe serve` give the same records: a root flow (or any root action)
// is a run (run.start, run.end with the flow's input, output, error and
// duration); a flow called from inside another is a nested run
// (child.spawn, child.end) whose records sit one Depth deeper; a model
// action is a model.call with the model's name, the request, the answer's
// text and tool requests, the reasoning parts as Thinking, the usage
// (input, output, cached and thoughts tokens) and the finish reason; a
// tool, retriever, indexer or reranker action is tool.start and tool.end
// (tool.error with the error when it failed); the generate loop, flow
// steps and other actions are node.start and node.end. Records of one
// span reach the sinks together when the span ends, children before their
// parents; their Seq numbers (see otlp.Seq) order them by time.
//
// Spans of other instrumentation (an HTTP client inside a tool) are kept
// when they run inside a Genkit span, as nodes of the Genkit trace; spans
// outside any Genkit span (the HTTP server span a flow runs under) are
// not recorded, and the outermost Genkit span becomes the run.
//
// # Concurrency, memory and failure
//
// A Processor is safe for concurrent use: flows may run in any number of
// goroutines. It keeps no span after it ends: mapping is done in OnEnd, on
// the goroutine that ends the span, and the records are handed to the
// tracer's Dispatcher (its bounded queue and full-queue policy apply). The
// only state it holds is the set of spans in progress that other spans may
// nest under, bounded by Options.MaxOpenSpans. Attributes of any shape are
// mapped without panicking; values longer than Options.MaxValueBytes are
// truncated with Loupe's visible marker. A span the mapping refuses (no
// ids, no start time) is counted in Stats and reported to OnError.
//
// The records are emitted as they are: the Tracer's Capture, Redact and
// RedactString options, which apply to runs the Tracer starts, do not see
// them. Set Options.Redact (for example to redact.Default().Record) to
// scrub them.
package genkittrace
