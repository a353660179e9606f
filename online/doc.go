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
// An Engine runs the rules. The collector hands it the records of every
// commit (Engine.Ended, which never blocks). A trace whose root run ended
// waits to settle: it is graded once no record of it has been committed
// for Options.Settle (the rules file's settle:), so that spans exported
// after their root (each in its own request, as the OpenTelemetry
// SimpleSpanProcessor sends them) are graded with it. The settling set is
// bounded, and a trace that ends while it is full is dropped and counted;
// settled traces go through a bounded queue to a worker pool. A periodic
// sweep finds the traces that went stale without ending
// (store.StatusIncomplete). Each
// result is stored as scores of source online (store.Scorer): one per
// grader, with the grader's explanation as the comment, plus the rule's
// overall score and pass. Score ids are a hash of the rule, the trace and
// the score's name, so an evaluation stored twice is stored once, and a
// trace the rule already scored is not graded (nor judged) again. A
// durable checkpoint in the store's settings (the time up to which every
// ended trace was evaluated; a trace still settling holds it back) lets a restarted engine catch up on the
// traces that ended while it was down or were queued but not evaluated.
package online
