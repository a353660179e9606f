package builtin

import (
	"context"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/trace"
)

// OfflineModelName is the name the Offline model records in traces.
const OfflineModelName = "offline"

// Offline returns the model the generator uses when none is configured: a
// deterministic stand-in for a language model that answers the generator's
// prompts (and only those) from their content, with no network. It writes
// short, plain texts built from the topic, the context passages' first
// sentences, and the text it is asked to work on, so that an offline
// pipeline run shows what flows between its steps; it reports usage as
// about one token per four bytes and costs nothing. It is safe for
// concurrent use.
//
// A scripted model (llm.Open("scripted:FILE")) plays exact turns instead;
// a real model is one flag away (--model openai:gpt-4o-mini).
func Offline() agent.Model { return offline{} }

type offline struct{}

func (offline) Name() string { return OfflineModelName }

// Generate answers one generator prompt.
func (offline) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return agent.Response{}, err
	}
	var system, user string
	for _, m := range req.Messages {
		switch m.Role {
		case agent.RoleSystem:
			system = m.Content
		case agent.RoleUser:
			user = m.Content
		}
	}
	task := ""
	for _, l := range strings.Split(system, "\n") {
		if t, ok := strings.CutPrefix(l, "Task: "); ok {
			task = t
		}
	}
	s := parseSections(user)
	topic := s["Topic"]
	var passages []string
	for _, l := range strings.Split(s["Context"], "\n") {
		if _, rest, ok := strings.Cut(l, "] "); ok && strings.HasPrefix(l, "[") {
			passages = append(passages, rest)
		}
	}
	var out string
	switch task {
	case "analyze":
		if prior := s["Prior analysis"]; prior != "" {
			// Each refinement adds what the last one left open.
			refinements := []string{
				"each aspect needs a concrete example.",
				"the trade-offs of " + aspectList(topic) + " should be weighed against each other.",
				"each claim should cite a source.",
			}
			n := strings.Count(prior, " Refined: ")
			if n >= len(refinements) {
				out = prior + " No gap left to refine."
				break
			}
			out = prior + " Refined: " + refinements[n]
			break
		}
		out = fmt.Sprintf("Analysis of %q: an answer must cover %s.", topic, aspectList(topic))
		if len(passages) > 0 {
			out += " The sources say: " + firstSentences(passages, 2)
		} else {
			out += " Still open: evidence and examples."
		}
	case "draft":
		out = fmt.Sprintf("Draft on %q: %s", topic, strings.TrimPrefix(s["Analysis"], fmt.Sprintf("Analysis of %q: ", topic)))
		if len(passages) > 0 {
			out += " For instance: " + firstSentences(passages, 1)
		}
	case "generate":
		if len(passages) == 0 {
			out = fmt.Sprintf("The context does not cover %q, so there is no grounded answer; retrieve sources first.", topic)
			break
		}
		out = fmt.Sprintf("On %q, the sources agree: %s", topic, firstSentences(passages, 3))
	case "reflect":
		out = fmt.Sprintf("Critique: the text names the aspects of %q but supports none of them with a concrete example, and it does not weigh their trade-offs. Add one example per aspect and a sentence on trade-offs.", topic)
	case "improve":
		out = s["Text"] + " Improved after review: every aspect now has a concrete example, and the trade-offs are stated."
	case "finalize":
		out = "Final answer: " + s["Text"]
	default:
		return agent.Response{}, fmt.Errorf("the offline model only answers the built-in generator's prompts (analyze, draft, generate, reflect, improve, finalize), not task %q; use --model for a real or scripted model", task)
	}
	return agent.Response{
		Content:      out,
		FinishReason: "stop",
		Usage: trace.Usage{
			Provider:     OfflineModelName,
			InputTokens:  int64((len(system) + len(user) + 3) / 4),
			OutputTokens: int64((len(out) + 3) / 4),
		},
	}, nil
}

// parseSections splits a generator prompt into its "Label:\ntext" blocks.
func parseSections(user string) map[string]string {
	out := map[string]string{}
	for _, block := range strings.Split(user, "\n\n") {
		label, text, ok := strings.Cut(block, ":\n")
		if ok && !strings.Contains(label, "\n") {
			out[label] = text
		}
	}
	return out
}

// aspectList names the content words of topic as a list: "a, b and c".
func aspectList(topic string) string {
	t := terms(topic)
	switch len(t) {
	case 0:
		return "its main points"
	case 1:
		return t[0]
	}
	return strings.Join(t[:len(t)-1], ", ") + " and " + t[len(t)-1]
}

// firstSentences joins the first sentence of each of the first n passages.
func firstSentences(passages []string, n int) string {
	var out []string
	for _, p := range passages[:min(n, len(passages))] {
		if i := strings.Index(p, ". "); i >= 0 {
			p = p[:i+1]
		}
		if !strings.HasSuffix(p, ".") && !strings.HasSuffix(p, "…") {
			p += "."
		}
		out = append(out, p)
	}
	return strings.Join(out, " ")
}
