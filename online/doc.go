// Package online evaluates live traffic: rules that grade the traces a
// collector receives as they end, and store the results as scores.
//
// A Rule names a filter in Loupe's search language (which traces it looks
// at), a sampling rate (decided by a hash of the rule and the trace id,
// so a restart decides the same), a cost budget for its judge calls, and
// graders written exactly as an AgentV eval file's assertions: package
// eval parses and grades them, and package eval/fromtrace turns the trace
// into the trajectory they grade. Rules come from a rules file (Parse,
// `loupe serve --rules`) or from the API (Engine.AddRule), which keeps
// them in the store's settings (prefix "rule:") so that every collector
// of one store and every restart sees them.
//
// An Engine runs the rules. The collector tells it when a trace's root
// run ends (Engine.Ended, called after the records are committed, which
// never blocks: a bounded queue feeds a worker pool, and work that finds
// the queue full is dropped and counted); a periodic sweep finds the
// traces that went stale without ending (store.StatusIncomplete). Each
// result is stored as scores of source online (store.Scorer): one per
// grader, with the grader's explanation as the comment, plus the rule's
// overall score and pass. Score ids are a hash of the rule, the trace and
// the score's name, so an evaluation stored twice is stored once, and a
// trace the rule already scored is not graded (nor judged) again. A
// durable checkpoint in the store's settings (the time up to which every
// ended trace was evaluated) lets a restarted engine catch up on the
// traces that ended while it was down or were queued but not evaluated.
package online
