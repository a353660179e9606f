// Package lctrace records agents and chains built with langchaingo
// (github.com/tmc/langchaingo) into Loupe's recorder, in process: it is a
// langchaingo callbacks.Handler that turns the callbacks into trace records
// the way Loupe's own agent runtime makes them.
//
// Make a Handler over a Tracer and hand it to everything that takes a
// callbacks handler (the model, the tools, the agent, the executor), then
// run the chain as usual:
//
//	h := lctrace.New(tracer, lctrace.Options{Model: "gpt-4o-mini", Provider: "openai"})
//	agent := agents.NewOpenAIFunctionsAgent(llm, tls, agents.WithCallbacksHandler(h)) // llm from openai.New(…, openai.WithCallback(h))
//	answer, err := chains.Run(ctx, agents.NewExecutor(agent, agents.WithCallbacksHandler(h)), "What is 6 * 7?")
//
// Tools that take a CallbacksHandler (tools.Calculator{CallbacksHandler:
// h}, …) report their own start, end and errors; others are recorded from
// the agent's actions alone.
//
// # What is recorded
//
//   - The outermost chain (an agents.Executor, an LLMChain, …) is a run: a
//     root run of the Handler's Tracer, or, when the context carries a Loupe
//     run (trace.FromContext), a nested run of it. A chain started while
//     another is running is a nested run (child.spawn … child.end), hung
//     under the tool call in progress when a tool runs it. The run's input
//     and output are the chain's input and output values (the single
//     string when there is one).
//   - An agent's planning chain (the LLMChain of a one-shot or
//     conversational agent, recognised by its "agent_scratchpad" input) is
//     not a run of its own: like a turn of Loupe's agent loop, its model
//     call is part of the executor's run.
//   - Iterations: each planning step of a run (a planning chain, or a model
//     call made by the run itself) begins an iteration, once the one before
//     it has planned; the iteration ends "continue" when the next begins and
//     "terminate" at the agent's finish or the run's end. A plain chain that
//     calls its model once has one iteration, like a single-turn loop.
//   - Model calls: one model.call each, with the messages sent (in the
//     runtime's shape {"messages":N,"new":[…]}), the response (text, or
//     {"content","tool_calls"}), the reasoning text, the finish reason, token
//     usage read from the response's GenerationInfo (the keys of every
//     langchaingo provider: PromptTokens, InputTokens, input_tokens, …),
//     the cost when Options.Model is priced, the error and the duration.
//     Streamed chunks are model.delta records of the call in progress. A
//     model call a tool makes while it runs hangs under its tool call.
//   - Tool calls: an agent action starts a tool call named after the
//     action's tool (HandleToolStart carries no name), with the action's
//     input as arguments (the JSON value when it is one, else the string);
//     the tool's own HandleToolEnd or HandleToolError ends it. A tool that
//     reports neither is ended by the next thing the executor does: with the
//     observation the agent is shown next when it can be read (a tool
//     response message of the next model call, the one-shot agent's
//     scratchpad), and as failed with the executor's error when the run
//     fails, since the executor stops on a tool's error.
//   - A retriever's search is a tool call named "retriever", input
//     {"query": …}, output the documents.
//   - The agent's finish is an assistant message; a finish because the
//     executor ran out of iterations records the max_iterations guardrail
//     and ends the run with termination max_iterations.
//   - A model, tool or retriever call made outside any chain is recorded
//     into the Loupe run the context carries, or else into a root run of its
//     own that ends with it.
//
// # Limits
//
// langchaingo's callbacks say less than Loupe's runtime knows, so some
// things are not recorded: the tools offered to the model (no
// tool.discovered records), the model's name (set Options.Model), a parse
// error the executor shows the agent (the next iteration begins without
// it), and a retriever's error (its search is failed with the run's error,
// or as never ended). A chain run with a context derived from the one its
// caller got (context.WithTimeout inside a tool, say) cannot be told to be
// nested and starts a run of its own, unless that context carries a Loupe
// run. A run whose chain never reports its end (a panic through
// langchaingo) keeps its state in the Handler.
//
// # Concurrency
//
// A Handler is safe for concurrent use. langchaingo passes the caller's
// context to every callback unchanged, so the context is what tells runs
// apart: calls made concurrently through one Handler must each have a
// context of their own (any derived context will do, or a Loupe run's).
// Callbacks of one run must come in the order langchaingo makes them.
// Nothing the callbacks carry makes the Handler panic: values that cannot be
// encoded are recorded as a note saying so, and callbacks out of order
// (an end without a start) are recorded as what they say.
package lctrace
