// Package builtin holds the tool servers a pipeline names with
// `servers: {name: builtin}`, so that the omni demo pipelines run offline,
// with no MCP server and no network:
//
//   - retriever: index, search, hybrid_search and get_stats over documents
//     given as a parameter (documents) or a directory (documents_dir), in an
//     in-memory SQLite FTS5 index;
//   - generator: analyze, draft, generate, reflect, improve and finalize,
//     each one prompt to the configured agent.Model (the Offline model when
//     none is configured);
//   - evaluator: evaluate, an answer against a reference (exact match and
//     token F1), or without one against the question's terms, giving a
//     quality score and a routing reason a branch can route on;
//   - router: check_quality, which routes on the quality score against
//     quality_threshold and the loop pass against max_iterations.
//
// A tool takes its arguments as a decoded JSON object and returns one. Tools
// read the names they need (query, topic, context, answer, …) and ignore the
// others, so a pipeline step without an input mapping can pass them the
// whole memory pool. Tracing is the caller's: the pipeline runner records each
// call as a tool call; the generator records its model calls in the run ctx
// carries.
package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/loupe-dev/loupe/agent"
)

// A Server is one built-in tool server. Its methods are safe for
// concurrent use. Close releases what the server holds (the retriever's
// index); a closed server's calls fail.
type Server interface {
	// Tools returns the server's tools, sorted by name.
	Tools() []Tool
	// Call runs tool with args and returns its result. An unknown tool, or
	// arguments the tool cannot use, is an error saying which and why.
	Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error)
	// Close releases the server's resources.
	Close() error
}

// A Tool describes one tool of a built-in server.
type Tool struct {
	Name        string   // the tool's name, e.g. "search"
	Description string   // what it does, one sentence
	Reads       []string // every argument name it reads (a step without an input mapping is given these)
	Writes      []string // the keys of its result
}

// Config configures the built-in servers. The zero value is usable: the
// generator then uses Offline(), and the retriever starts with an empty
// index.
type Config struct {
	// Model is what the generator prompts; nil means Offline().
	Model agent.Model
	// DocumentsDir, if set, is indexed by the retriever when a search finds
	// its index empty and the call names no documents of its own.
	DocumentsDir string
	// DefaultBackend is how the retriever's search ranks: "hybrid" ranks
	// as hybrid_search does; anything else (omni's "lance", or empty) is
	// BM25. It is the pipeline's runtime.retrieval.default_backend.
	DefaultBackend string
}

// Names returns the names of the built-in servers, sorted.
func Names() []string { return []string{"evaluator", "generator", "retriever", "router"} }

// New returns the built-in server called name, or an error naming the
// built-in servers if there is none by that name.
func New(name string, c Config) (Server, error) {
	switch name {
	case "retriever":
		r, err := NewRetriever(c.DocumentsDir)
		if err == nil {
			r.hybrid = c.DefaultBackend == "hybrid"
		}
		return r, err
	case "generator":
		return NewGenerator(c.Model), nil
	case "evaluator":
		return Evaluator{}, nil
	case "router":
		return Router{}, nil
	}
	return nil, fmt.Errorf("no built-in server %q: the built-in servers are %s", name, strings.Join(Names(), ", "))
}

// errUnknownTool says that server has no tool named tool, and which it has.
func errUnknownTool(server, tool string, tools []Tool) error {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return fmt.Errorf("built-in server %s has no tool %q: its tools are %s", server, tool, strings.Join(names, ", "))
}

// ErrMissingArg is wrapped by the errors of tools that miss an argument
// they need.
var ErrMissingArg = errors.New("missing argument")

// firstString returns the first of keys that args holds as text, and the key.
// Numbers and booleans count as text; lists and objects do not.
func firstString(args map[string]any, keys ...string) (string, string) {
	for _, k := range keys {
		switch v := args[k].(type) {
		case string:
			if strings.TrimSpace(v) != "" {
				return v, k
			}
		case float64, int, int64, bool, json.Number:
			return fmt.Sprint(v), k
		}
	}
	return "", ""
}

// number returns args[key] as a float64 if it is a number or a numeric
// string.
func number(args map[string]any, key string) (float64, bool) {
	switch v := args[key].(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil
	}
	return 0, false
}

// texts returns the text of a value that holds passages: a string, a list of
// strings, or a list of objects with a text, content, doc or answer field.
func texts(v any) []string {
	switch v := v.(type) {
	case string:
		if strings.TrimSpace(v) == "" {
			return nil
		}
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, texts(e)...)
		}
		return out
	case map[string]any:
		for _, k := range []string{"text", "content", "doc", "answer", "passage"} {
			if s, ok := v[k].(string); ok {
				return []string{s}
			}
		}
		for _, k := range []string{"results", "documents", "docs"} {
			if l, ok := v[k].([]any); ok {
				return texts(l)
			}
		}
	}
	return nil
}

// tokens splits s into lower-case words of letters and digits.
func tokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// stopwords are left out of term coverage: they say nothing about a topic.
var stopwords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"do": true, "does": true, "for": true, "from": true, "how": true, "i": true, "in": true, "is": true,
	"it": true, "of": true, "on": true, "or": true, "the": true, "to": true, "use": true, "what": true,
	"when": true, "where": true, "which": true, "who": true, "why": true, "with": true, "you": true,
}

// terms returns the distinct content words of s, in order of appearance.
func terms(s string) []string {
	var out []string
	for _, t := range tokens(s) {
		if !stopwords[t] && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// round4 rounds x to 4 decimals, so that scores print the same everywhere.
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// sortedTools returns tools sorted by name.
func sortedTools(tools []Tool) []Tool {
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	return tools
}
