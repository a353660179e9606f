package builtin

import (
	"context"
	"fmt"
	"strings"
)

// Routes check_quality gives in route.
const (
	RouteHighQuality = "high_quality"
	RouteLowQuality  = "low_quality"
)

// Router is the built-in router server. Its one tool, check_quality, decides
// where a pipeline goes next from the quality so far:
//
//   - the score is quality_score (an evaluator's output), or, when there is
//     none yet, the evaluator's score of the latest text (answer, final,
//     improved, draft or analysis);
//   - route is RouteHighQuality when the score reaches the threshold
//     (quality_threshold or threshold, default DefaultQualityThreshold),
//     else RouteLowQuality;
//   - decision is "complete" when the score reaches the threshold or the
//     loop pass (iteration) reached max_iterations, else "continue", and
//     routing_reason says which (ReasonThresholdReached,
//     ReasonMaxIterationsReached or ReasonContinueReflection).
//
// A branch routes on route by default (see the pipeline runner); one with
// field: decision or field: routing_reason routes on those. The zero value
// is ready to use.
type Router struct{}

// Tools returns check_quality.
func (Router) Tools() []Tool {
	return []Tool{{
		Name:        "check_quality",
		Description: "Route on the quality score against quality_threshold and the loop pass against max_iterations.",
		Reads:       append([]string{"quality_score", "quality_threshold", "threshold", "iteration", "max_iterations", "query", "topic", "question"}, candidateKeys...),
		Writes:      []string{"route", "decision", "routing_reason", "quality_score", "threshold"},
	}}
}

// Close does nothing.
func (Router) Close() error { return nil }

// Call runs check_quality.
func (r Router) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	if tool != "check_quality" {
		return nil, errUnknownTool("router", tool, r.Tools())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	score, ok := number(args, "quality_score")
	if !ok {
		answer, _ := firstString(args, candidateKeys...)
		if answer == "" {
			return nil, fmt.Errorf("check_quality: %w: no quality_score and no text to score (one of %s); run evaluator.evaluate or a generator step first", ErrMissingArg, strings.Join(candidateKeys, ", "))
		}
		q, _ := firstString(args, "query", "topic", "question")
		score = round4(Coverage(answer, q))
	}
	threshold := thresholdOf(args)
	iter, _ := number(args, "iteration")
	maxIter, _ := number(args, "max_iterations")
	out := map[string]any{"quality_score": score, "threshold": threshold}
	switch {
	case score >= threshold:
		out["route"], out["decision"], out["routing_reason"] = RouteHighQuality, "complete", ReasonThresholdReached
	case maxIter > 0 && iter >= maxIter:
		out["route"], out["decision"], out["routing_reason"] = RouteLowQuality, "complete", ReasonMaxIterationsReached
	default:
		out["route"], out["decision"], out["routing_reason"] = RouteLowQuality, "continue", ReasonContinueReflection
	}
	return out, nil
}
