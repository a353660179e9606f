package eval

import (
	"encoding/json"
	"fmt"

	"strings"
)

func textAssertion(ar *AssertionResult, a Assertion, out string) {
	v := a.Text.Value
	var ok bool
	var what string
	switch a.Kind {
	case KindContains:
		ok, what = strings.Contains(out, v), fmt.Sprintf("contain %q", v)
	case KindIContains:
		ok, what = strings.Contains(strings.ToLower(out), strings.ToLower(v)), fmt.Sprintf("contain %q (case-insensitive)", v)
	case KindStartsWith:
		ok, what = strings.HasPrefix(strings.TrimSpace(out), strings.TrimSpace(v)), fmt.Sprintf("start with %q", v)
	case KindEndsWith:
		ok, what = strings.HasSuffix(strings.TrimSpace(out), strings.TrimSpace(v)), fmt.Sprintf("end with %q", v)
	case KindEquals:
		ok, what = strings.TrimSpace(out) == strings.TrimSpace(v), fmt.Sprintf("equal %q (trimmed)", v)
	case KindRegex:
		re, err := compileRegex(v, a.Text.Flags)
		if err != nil {
			ar.Verdict, ar.Reason = Skip, "regex does not compile: "+err.Error()
			return
		}
		ok, what = re.MatchString(out), fmt.Sprintf("match /%s/%s", v, a.Text.Flags)
	case KindIsJSON:
		ok, what = json.Valid([]byte(out)), "be valid JSON"
	case KindContainsAny, KindContainsAll, KindIContainsAny, KindIContainsAll:
		ok, what = containsList(a.Kind, a.Text.Values, out)
	}
	text := "output does " + what
	if !ok {
		text = "output does not " + what + "; output was " + quoteShort(out)
	}
	ar.Checks = []Check{{Text: text, Passed: ok}}
	if ok {
		ar.Score = 1
	}
}

func quoteShort(s string) string {
	r := []rune(s)
	if len(r) > 120 {
		return fmt.Sprintf("%q…", string(r[:120]))
	}
	return fmt.Sprintf("%q", s)
}

// limitsAssertion grades latency, cost, token-usage and execution-metrics.
// Missing data fails the check, as in AgentV.
func limitsAssertion(ar *AssertionResult, k Kind, l *LimitSpec, t Trajectory, agentv bool) {
	add := func(ok bool, format string, args ...any) {
		ar.Checks = append(ar.Checks, Check{Text: fmt.Sprintf(format, args...), Passed: ok})
	}
	le := func(what string, actual, limit float64, unit string) {
		if actual <= limit {
			add(true, "%s %g%s <= %g%s", what, actual, unit, limit, unit)
		} else {
			add(false, "%s %g%s > %g%s max", what, actual, unit, limit, unit)
		}
	}
	switch k {
	case KindLatency:
		if t.Duration == nil {
			add(false, "no duration recorded for the run")
		} else {
			le("duration", msOf(*t.Duration), *l.MaxDurationMs, "ms")
		}
	case KindCost:
		if t.CostUSD == nil {
			add(false, "no cost recorded for the run")
		} else {
			le("cost", *t.CostUSD, *l.MaxCostUSD, " USD")
		}
	case KindTokenUsage:
		if t.Usage == nil {
			add(false, "no token usage recorded for the run")
			break
		}
		u := t.Usage
		total := u.Input + u.Output
		if agentv {
			total += u.Cached // AgentV adds cached tokens on top of input
		}
		if l.MaxInput != nil {
			le("input tokens", float64(u.Input), *l.MaxInput, "")
		}
		if l.MaxOutput != nil {
			le("output tokens", float64(u.Output), *l.MaxOutput, "")
		}
		if l.MaxTotal != nil {
			le("total tokens", float64(total), *l.MaxTotal, "")
		}
	case KindExecutionMetrics:
		if l.MaxToolCalls != nil {
			le("tool calls", float64(len(t.Calls)), *l.MaxToolCalls, "")
		}
		if l.MaxLLMCalls != nil {
			if t.LLMCalls == nil {
				add(false, "LLM call count not recorded")
			} else {
				le("LLM calls", float64(*t.LLMCalls), *l.MaxLLMCalls, "")
			}
		}
		if l.MaxTokens != nil {
			if t.Usage == nil {
				add(false, "token usage not recorded")
			} else {
				le("total tokens", float64(t.Usage.Input+t.Usage.Output), *l.MaxTokens, "")
			}
		}
		if l.MaxCostUSD != nil {
			if t.CostUSD == nil {
				add(false, "cost not recorded")
			} else {
				le("cost", *t.CostUSD, *l.MaxCostUSD, " USD")
			}
		}
		if l.MaxDurationMs != nil {
			if t.Duration == nil {
				add(false, "duration not recorded")
			} else {
				le("duration", msOf(*t.Duration), *l.MaxDurationMs, "ms")
			}
		}
	}
	passed := 0
	for _, c := range ar.Checks {
		if c.Passed {
			passed++
		}
	}
	switch {
	case k == KindExecutionMetrics && len(ar.Checks) > 0:
		ar.Score = float64(passed) / float64(len(ar.Checks))
	case passed == len(ar.Checks) && len(ar.Checks) > 0:
		ar.Score = 1
	}
}

// containsList grades contains-any / contains-all and their
// case-insensitive forms as AgentV 4.42.4 does: 1 when any (all) of
// values is a substring of out, else 0.
func containsList(k Kind, values []string, out string) (bool, string) {
	fold := k == KindIContainsAny || k == KindIContainsAll
	all := k == KindContainsAll || k == KindIContainsAll
	hay := out
	if fold {
		hay = strings.ToLower(out)
	}
	hits := 0
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = fmt.Sprintf("%q", v)
		needle := v
		if fold {
			needle = strings.ToLower(v)
		}
		if strings.Contains(hay, needle) {
			hits++
		}
	}
	what := "contain one of " + strings.Join(quoted, ", ")
	ok := hits > 0
	if all {
		what, ok = "contain all of "+strings.Join(quoted, ", "), hits == len(values)
	}
	if fold {
		what += " (case-insensitive)"
	}
	return ok, what
}
