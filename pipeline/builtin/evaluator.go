package builtin

import (
	"context"
	"fmt"
	"strings"
)

// DefaultQualityThreshold is the quality score at or above which the
// evaluator and the router call an answer good enough, when the call names
// no threshold (threshold or quality_threshold).
const DefaultQualityThreshold = 0.8

// Routing reasons, the values evaluate and check_quality give in
// routing_reason. DefaultValueMap maps them to the routes continue and
// complete.
const (
	ReasonThresholdReached     = "quality_threshold_reached"
	ReasonImprovementFailed    = "improvement_failed"
	ReasonContinueReflection   = "continue_reflection"
	ReasonMaxIterationsReached = "max_iterations_reached"
)

// DefaultValueMap maps the routing reasons to the routes of an omni loop
// branch (continue, complete), for a branch that gives no value_map of its
// own. It is the value_map of UltraRAG's complex pipeline, plus
// max_iterations_reached.
func DefaultValueMap() map[string][]string {
	return map[string][]string{
		"complete": {ReasonThresholdReached, ReasonImprovementFailed, ReasonMaxIterationsReached},
		"continue": {ReasonContinueReflection, "quality_gates_failed"},
	}
}

// candidateKeys are where evaluate and check_quality look for the text to
// judge, latest pipeline stage first.
var candidateKeys = []string{"answer", "final", "improved", "draft", "analysis", "prediction", "text"}

// Evaluator is the built-in evaluator server. Its one tool, evaluate,
// scores an answer:
//
//   - against a reference (reference, ground_truth, expected or gold; a
//     string or a list of acceptable strings): exact match and token F1
//     after SQuAD normalisation (case, punctuation, articles), the quality
//     score being the better of the two;
//   - without one, against the question (query, topic or question): the
//     share of the question's content words the answer covers (0.7) and its
//     length up to 60 words (0.3), a rough check that it addresses the
//     question at all.
//
// The result holds quality_score, routing_reason (ReasonThresholdReached at
// or above the threshold; ReasonImprovementFailed when a previous
// quality_score, from an earlier loop pass, was not beaten;
// ReasonContinueReflection otherwise), passed, threshold and method, and
// with a reference exact_match and f1. The zero value is ready to use.
type Evaluator struct{}

// Tools returns evaluate.
func (Evaluator) Tools() []Tool {
	return []Tool{{
		Name:        "evaluate",
		Description: "Score an answer against a reference (exact match, token F1) or the question, with a routing reason.",
		Reads:       append(append([]string{}, candidateKeys...), "reference", "ground_truth", "expected", "gold", "golden_answers", "query", "topic", "question", "threshold", "quality_threshold", "quality_score"),
		Writes:      []string{"quality_score", "routing_reason", "passed", "threshold", "method", "exact_match", "f1"},
	}}
}

// Close does nothing.
func (Evaluator) Close() error { return nil }

// Call runs evaluate.
func (e Evaluator) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	if tool != "evaluate" {
		return nil, errUnknownTool("evaluator", tool, e.Tools())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	answer, _ := firstString(args, candidateKeys...)
	if answer == "" {
		return nil, fmt.Errorf("evaluate: %w: nothing to evaluate; give the text as one of %s (an earlier step's output or an input mapping)", ErrMissingArg, strings.Join(candidateKeys, ", "))
	}
	threshold := thresholdOf(args)
	out := map[string]any{"threshold": threshold}
	var score float64
	if refs := references(args); len(refs) > 0 {
		em, f1 := 0.0, 0.0
		for _, r := range refs {
			em = max(em, ExactMatch(answer, r))
			f1 = max(f1, F1(answer, r))
		}
		score = max(em, f1)
		out["exact_match"], out["f1"], out["method"] = em, round4(f1), "reference"
	} else {
		q, _ := firstString(args, "query", "topic", "question")
		score = Coverage(answer, q)
		out["method"] = "question_coverage"
	}
	score = round4(score)
	out["quality_score"] = score
	out["passed"] = score >= threshold
	reason := ReasonContinueReflection
	switch prev, ok := number(args, "quality_score"); {
	case score >= threshold:
		reason = ReasonThresholdReached
	case ok && score <= prev:
		reason = ReasonImprovementFailed
	}
	out["routing_reason"] = reason
	return out, nil
}

// thresholdOf returns the threshold args name, or the default.
func thresholdOf(args map[string]any) float64 {
	for _, k := range []string{"threshold", "quality_threshold"} {
		if t, ok := number(args, k); ok {
			return t
		}
	}
	return DefaultQualityThreshold
}

// references returns the reference answers args give.
func references(args map[string]any) []string {
	for _, k := range []string{"reference", "ground_truth", "expected", "gold", "golden_answers"} {
		if r := texts(args[k]); len(r) > 0 {
			return r
		}
	}
	return nil
}

// normalize lower-cases s, drops punctuation and the articles a, an and the,
// as SQuAD's evaluation does, and returns its words.
func normalize(s string) []string {
	var out []string
	for _, t := range tokens(s) {
		if t != "a" && t != "an" && t != "the" {
			out = append(out, t)
		}
	}
	return out
}

// ExactMatch is 1 if answer and reference are the same text after SQuAD
// normalisation (case, punctuation, articles, spacing), else 0.
func ExactMatch(answer, reference string) float64 {
	if strings.Join(normalize(answer), " ") == strings.Join(normalize(reference), " ") {
		return 1
	}
	return 0
}

// F1 is the token F1 of answer against reference after SQuAD
// normalisation: the harmonic mean of the share of the answer's words that
// are in the reference and the share of the reference's words that are in
// the answer, counting repeated words as often as both have them. Two
// empty texts score 1; one empty text scores 0.
func F1(answer, reference string) float64 {
	a, r := normalize(answer), normalize(reference)
	if len(a) == 0 || len(r) == 0 {
		if len(a) == len(r) {
			return 1
		}
		return 0
	}
	counts := map[string]int{}
	for _, t := range r {
		counts[t]++
	}
	common := 0
	for _, t := range a {
		if counts[t] > 0 {
			counts[t]--
			common++
		}
	}
	if common == 0 {
		return 0
	}
	p, rc := float64(common)/float64(len(a)), float64(common)/float64(len(r))
	return 2 * p * rc / (p + rc)
}

// Coverage scores answer against question when there is no reference:
// 0.7 times the share of the question's content words the answer contains,
// plus 0.3 times its length in words up to 60, over 60. An empty question
// counts as covered.
func Coverage(answer, question string) float64 {
	words := tokens(answer)
	have := map[string]bool{}
	for _, w := range words {
		have[w] = true
	}
	cov := 1.0
	if q := terms(question); len(q) > 0 {
		n := 0
		for _, t := range q {
			if have[t] {
				n++
			}
		}
		cov = float64(n) / float64(len(q))
	}
	return 0.7*cov + 0.3*min(1, float64(len(words))/60)
}
