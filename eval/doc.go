// Package eval scores agent trajectories against expectations written in
// AgentV eval files (the original v2 "evalcases" format and the current
// "tests"/"assertions" format).
//
// The package stands apart from the trace model: the only Loupe package it
// imports is internal/yamlpos, the YAML front end Loupe's file readers
// share. A run is handed to it as a [Trajectory]; recorded AgentV
// transcripts can be read with [ParseTranscript].
//
// Two semantics are offered through [Options.Mode]:
//
//   - [ModeDefault] (the zero value) is what Loupe considers correct: exact
//     means the same calls in the same order and nothing else, and calls are
//     matched with a best assignment rather than first fit.
//   - [ModeAgentV] reproduces the scores and verdicts of the AgentV 4.42.4
//     CLI, quirks included.
//
// docs/eval-semantics.md lists every difference with an example.
//
// Graders that need a language model (llm-grader, rubric, rubrics and bare
// criterion strings, llm-rubric, g-eval, factuality) are graded through
// [Options.Judge], a [Judge] that only carries text to a model and back:
// eval writes AgentV's prompts, reads the judge's JSON answer and scores it,
// and keeps every call in [AssertionResult.JudgeCalls].
package eval
