package eval

import (
	"fmt"
	"os"
	"strings"
)

// LoadMode says what the parser does with a test or grader it cannot use.
type LoadMode int

// Load modes.
const (
	// LoadDefault keeps every usable test and grader: a grader with a
	// problem is kept as one that could not run (Assertion.Problems), and
	// a test with a problem outside its graders is kept as one whose
	// every grader could not run (Case.Problems). Only problems with the
	// file as a whole (invalid YAML, no tests) refuse the file.
	LoadDefault LoadMode = iota
	// LoadStrict refuses the whole file on any problem.
	LoadStrict
	// LoadAgentV loads what AgentV 4.42.4 loads: unknown keys are ignored,
	// invalid graders and tests are dropped, a grader type AgentV does not
	// register is kept (it scores 0, as in AgentV), and each of these is
	// reported in File.Warnings.
	LoadAgentV
)

// String returns "default", "strict" or "agentv".
func (m LoadMode) String() string {
	switch m {
	case LoadStrict:
		return "strict"
	case LoadAgentV:
		return "agentv"
	}
	return "default"
}

// errClass sorts parse problems by what AgentV does with them.
type errClass int

const (
	errInvalid        errClass = iota // AgentV drops the grader
	errUnknownKey                     // AgentV ignores the key
	errUnknownType                    // AgentV keeps the grader; it scores 0
	errDeprecated                     // AgentV drops the grader (code-judge, llm-judge)
	errLenient                        // AgentV ignores the value and uses its default
	errDropTest                       // AgentV skips the whole test (an invalid weight)
	errNotImplemented                 // AgentV runs it; Loupe cannot: could not run
)

// ParseFileMode reads and parses the eval file at path. See ParseMode.
func ParseFileMode(path string, mode LoadMode) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read eval file: %w", err)
	}
	return ParseMode(path, data, mode)
}

// agentVKinds are the grader types AgentV 4.42.4 registers (its
// GRADER_KIND_VALUES) that Loupe implements. Any other type, in
// LoadAgentV, scores 0 with AgentV's "Unknown grader type" error.
var agentVKinds = map[string]bool{
	"code-grader": true, "llm-grader": true, "rubric": true, "rubrics": true,
	"tool-trajectory": true, "latency": true, "cost": true, "token-usage": true,
	"execution-metrics": true, "contains": true, "icontains": true,
	"starts-with": true, "ends-with": true, "regex": true, "is-json": true, "equals": true,
	"contains-any": true, "contains-all": true, "icontains-any": true, "icontains-all": true,
}

// agentVOnly are the grader types AgentV 4.42.4 registers that Loupe does
// not implement: in LoadAgentV they could not run (Loupe cannot give
// AgentV's score), rather than scoring 0 as unknown types do.
var agentVOnly = map[string]bool{
	"composite": true, "field-accuracy": true, "skill-trigger": true, "inline-assert": true,
}

// suggest returns the candidate nearest to s by edit distance, or "" when
// none is near enough to be a plausible typo.
func suggest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+2
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// didYouMean formats suggest's answer as a clause, or "".
func didYouMean(s string, candidates []string) string {
	if b := suggest(s, candidates); b != "" && b != s {
		return fmt.Sprintf("; did you mean %q?", b)
	}
	return ""
}

// editDistance is the Levenshtein distance in bytes. Inputs are keys and
// type names, so the quadratic cost is bounded by capping long inputs.
func editDistance(a, b string) int {
	const limit = 64
	if len(a) > limit {
		a = a[:limit]
	}
	if len(b) > limit {
		b = b[:limit]
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
