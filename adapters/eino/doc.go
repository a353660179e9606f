// Package einotrace records agents built with CloudWeGo Eino
// (github.com/cloudwego/eino) into Loupe's recorder: a Handler is an Eino
// callbacks.Handler that turns the callbacks of graphs, chains, ReAct
// agents and their components into trace records, with the same fields
// Loupe's own agent runtime records. Three lines:
//
//	handler, err := einotrace.New(tracer) // tracer is a *trace.Tracer
//	if err != nil { return err }
//	out, err := agent.Generate(ctx, msgs, agent.WithComposeOptions(compose.WithCallbacks(handler)))
//
// (or compose.WithCallbacks(handler) on any Runnable's Invoke or Stream, or
// callbacks.AppendGlobalHandlers(handler) once at start-up for every
// graph).
//
// # What is recorded
//
// An Eino graph, chain or workflow (a ReAct agent is a graph) is a run: a
// root run (run.start, run.end) when the context carries no Loupe run, and
// a nested run (child.spawn, child.end, records one level deeper) when it
// does, so that graphs nested in graphs, agents called from tools and Eino
// graphs called from a Loupe agent nest as they ran. A graph's input
// messages and its final message are also message records.
//
// Inside a run:
//
//   - a ChatModel call is one model.call record: the model (the Config's
//     model name when the component reports it, else its type or node
//     name), the messages added since the model's last turn, the answer's
//     text and tool calls, the reasoning content as thinking, the finish
//     reason, input, output, cached and reasoning tokens (priced with
//     package price), the error and the duration. A streamed call also
//     records each text or reasoning chunk as a model.delta record, as
//     Loupe's runtime does. Tools offered to the model in its callback
//     input are recorded once per run as tool.discovered.
//   - a Tool call is tool.start, then tool.end with its result or
//     tool.error with its error. Retrievers and indexers are recorded as
//     tool calls too (the query, the documents), as Loupe's OTLP mapping
//     does with retriever spans.
//   - an Embedding call is a model.call (the texts in, the number and size
//     of the vectors out, the tokens).
//   - any other node (a Lambda, a ChatTemplate, a document loader or
//     transformer, a component Loupe does not know) is node.start and
//     node.end. ToolsNode and Passthrough nodes are plumbing and are not
//     recorded; the tool calls in a ToolsNode are.
//
// A component called on its own, outside any graph and any Loupe run, is
// recorded in a root run of its own.
//
// # Streams and concurrency
//
// Streamed inputs and outputs are read from the copies Eino hands to the
// handler, in goroutines of their own, and closed; the caller's own
// stream is not held up. A run ends once its streams, and those of the
// calls in it, have been read, so that its end record comes after theirs;
// a run whose streamed input is never closed by its writer does not end.
// A tool call that a ToolsNode starts waits until the model calls being
// read in its run are recorded, so that a streamed model.call precedes the
// tool calls it asked for (in a ReAct loop that answer has ended by then;
// in a graph that streams a model in a parallel branch, the tool call
// waits for that stream). Wait reports when everything the handler
// started has been recorded.
//
// The state of a call travels in the context Eino passes from the start
// callback to the end callback, not in the handler, which is safe for
// concurrent use (a ToolsNode runs tool calls in parallel). A
// callback never panics: odd input (nil outputs, unknown component types,
// streams that fail) is recorded as far as it can be, or ignored.
package einotrace
