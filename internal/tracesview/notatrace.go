package tracesview

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// yamlKey matches a top-level YAML mapping key at the start of a line.
var yamlKey = regexp.MustCompile(`(?m)^([A-Za-z_$][A-Za-z0-9_$.-]*)[ \t]*:`)

// notATrace recognizes the files people most often hand to traces import
// by mistake — AgentV eval files, pipeline definitions, omni contracts,
// FrankenAgent blueprints, other YAML — from the first bytes of the file.
// It returns what the file looks like and what to do with it, or "" when
// the file looks like none of them (it may still be a broken trace).
func notATrace(head []byte) string {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(head)
	if len(trimmed) == 0 {
		return ""
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		if bytes.Contains(head, []byte(`"tool_contracts"`)) {
			return "it looks like an omni tool-contracts file (tool_contracts), not a trace; loupe does not read contracts files: import the traces an omni run writes (session_*.trace.json)"
		}
		if bytes.Contains(head, []byte(`"evalcases"`)) {
			return "it looks like an AgentV eval file (evalcases) in JSON, not a trace; grade runs against it with: loupe eval FILE --trace TRACE (or --command, --transcript, --from-store, --script)"
		}
		return ""
	}
	if !looksLikeYAML(head) {
		return ""
	}
	var keys []string
	for _, m := range yamlKey.FindAllSubmatch(head, -1) {
		if k := string(m[1]); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	has := func(k string) bool { return slices.Contains(keys, k) }
	switch {
	case has("evalcases") || has("tests") && (has("prompts") || has("providers") || has("assert")) ||
		bytes.Contains(head, []byte("agentv-eval")):
		return "it looks like an AgentV eval file (" + strings.Join(pick(keys, "$schema", "evalcases", "tests", "providers"), ", ") +
			"), not a trace; grade runs against it with: loupe eval FILE --trace TRACE (or --command, --transcript, --from-store, --script)"
	case has("pipeline"):
		return "it looks like a pipeline definition (" + strings.Join(pick(keys, "servers", "parameters", "pipeline"), ", ") +
			"), as omni and UltraRAG run, not a trace; loupe does not run pipelines: run it with its own tool and import the trace that run writes (omni writes session_*.trace.json)"
	case has("head") && (has("arms") || has("legs") || has("heart") || has("spine")):
		return "it looks like a FrankenAgent blueprint (head, arms, legs, …), not a trace; run the agent and import the trace it writes"
	}
	if len(keys) > 6 {
		keys = append(keys[:6], "…")
	}
	return fmt.Sprintf("it looks like a YAML file (top-level keys %s), not a trace; the trace formats loupe reads are JSON: loupe, agentv, agentv-results, omni, otel-jsonl, otlp", strings.Join(keys, ", "))
}

// pick returns those of want that are in keys, in want's order.
func pick(keys []string, want ...string) []string {
	var out []string
	for _, w := range want {
		if slices.Contains(keys, w) {
			out = append(out, w)
		}
	}
	return out
}

// looksLikeYAML reports whether the first line of head that is neither
// blank nor a comment is a document marker or a top-level key, so that a
// Markdown or text file with a "word:" line somewhere is not taken for
// YAML.
func looksLikeYAML(head []byte) bool {
	for line := range bytes.Lines(head) {
		l := bytes.TrimSpace(line)
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		return bytes.Equal(l, []byte("---")) || yamlKey.Match(line)
	}
	return false
}
