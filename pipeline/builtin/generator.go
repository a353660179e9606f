package builtin

import (
	"context"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/trace"
)

// genTask is one generator tool: what it asks the model, what it reads and
// the key its text is returned under.
type genTask struct {
	name, desc, instruction, writes string
	reads                           []string // labels of the prompt's sections, in order
	needs                           string   // the section without which the task makes no sense
}

// genTasks are the generator's tools, in the order a pipeline usually calls
// them.
var genTasks = []genTask{
	{name: "analyze", writes: "analysis", needs: "Topic",
		desc:        "Analyse the topic: the aspects an answer must cover, from the context if any.",
		instruction: "List the aspects a good answer to the topic must cover, grounded in the context when there is one. If a prior analysis is given, refine it rather than start over.",
		reads:       []string{"Topic", "Context", "Prior analysis"}},
	{name: "draft", writes: "draft", needs: "Topic",
		desc:        "Write a first draft on the topic from the analysis.",
		instruction: "Write a short first draft on the topic that follows the analysis.",
		reads:       []string{"Topic", "Analysis", "Context"}},
	{name: "generate", writes: "answer", needs: "Topic",
		desc:        "Answer the question from the retrieved context.",
		instruction: "Answer the question using only the context; say so when the context does not cover it.",
		reads:       []string{"Topic", "Context"}},
	{name: "reflect", writes: "critique", needs: "Text",
		desc:        "Critique the latest text: what is missing or weak.",
		instruction: "Critique the text: name what is missing, vague or unsupported, as concrete fixes.",
		reads:       []string{"Topic", "Text"}},
	{name: "improve", writes: "improved", needs: "Text",
		desc:        "Improve the latest text, following the critique if any.",
		instruction: "Rewrite the text so that it addresses the critique; keep what is right.",
		reads:       []string{"Topic", "Text", "Critique"}},
	{name: "finalize", writes: "final", needs: "Text",
		desc:        "Turn the latest text into the final answer.",
		instruction: "Turn the text into the final answer: clear, complete, no notes to self.",
		reads:       []string{"Topic", "Text"}},
}

// Generator is the built-in generator server. Each of its tools (analyze,
// draft, generate, reflect, improve, finalize) is one prompt to its model,
// made from the call's arguments:
//
//   - Topic: topic, query or question;
//   - Context: context, results or documents (strings or retriever hits),
//     at most 5 passages of 600 bytes;
//   - Prior analysis (analyze): prior or analysis;
//   - Analysis (draft): analysis;
//   - Text (reflect, improve, finalize): the latest of final, improved,
//     draft, answer and analysis, or text;
//   - Critique (improve): critique.
//
// The answer comes back under analysis, draft, answer, critique, improved
// or final. The model call is traced as a model.call of the run the
// context carries, with its usage and cost: under the step's span when the
// context says which (WithParentSpan, as the pipeline runner does), else
// through agent.Generate.
// A Generator is safe for concurrent use if its model is.
type Generator struct {
	model agent.Model
}

// NewGenerator returns a Generator that prompts m; nil means Offline().
func NewGenerator(m agent.Model) *Generator {
	if m == nil {
		m = Offline()
	}
	return &Generator{model: m}
}

// Tools returns the generator's tools.
func (g *Generator) Tools() []Tool {
	out := make([]Tool, len(genTasks))
	for i, t := range genTasks {
		out[i] = Tool{Name: t.name, Description: t.desc, Writes: []string{t.writes},
			Reads: []string{"topic", "query", "question", "context", "results", "documents", "prior", "analysis", "draft", "answer", "improved", "final", "text", "critique"}}
	}
	return sortedTools(out)
}

// Close does nothing.
func (g *Generator) Close() error { return nil }

// Call runs one of the generator's tools.
func (g *Generator) Call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	var task *genTask
	for i := range genTasks {
		if genTasks[i].name == tool {
			task = &genTasks[i]
		}
	}
	if task == nil {
		return nil, errUnknownTool("generator", tool, g.Tools())
	}
	sections := map[string]string{}
	sections["Topic"], _ = firstString(args, "topic", "query", "question")
	var ctxTexts []string
	for _, k := range []string{"context", "results", "documents"} {
		if ctxTexts = texts(args[k]); len(ctxTexts) > 0 {
			break
		}
	}
	if len(ctxTexts) > 0 {
		var b strings.Builder
		for i, t := range ctxTexts[:min(5, len(ctxTexts))] {
			if len(t) > 600 {
				t = t[:600] + "…"
			}
			fmt.Fprintf(&b, "[%d] %s\n", i+1, t)
		}
		sections["Context"] = strings.TrimSuffix(b.String(), "\n")
	}
	sections["Prior analysis"], _ = firstString(args, "prior", "analysis")
	sections["Analysis"], _ = firstString(args, "analysis")
	sections["Text"], _ = firstString(args, "text", "final", "improved", "draft", "answer", "analysis")
	sections["Critique"], _ = firstString(args, "critique")
	if sections[task.needs] == "" {
		return nil, fmt.Errorf("generator.%s: %w: %s (give it as an earlier step's output, a parameter or an input mapping)", tool, ErrMissingArg, needsArgs(task.needs))
	}
	var user strings.Builder
	for _, label := range task.reads {
		if s := sections[label]; s != "" {
			fmt.Fprintf(&user, "%s:\n%s\n\n", label, s)
		}
	}
	req := agent.Request{Messages: []agent.Message{
		{Role: agent.RoleSystem, Content: "You are the generator step of a pipeline.\nTask: " + task.name + "\n" + task.instruction},
		{Role: agent.RoleUser, Content: strings.TrimSuffix(user.String(), "\n\n")},
	}}
	resp, err := g.generate(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("generator.%s: model %s: %w", tool, g.model.Name(), err)
	}
	return map[string]any{task.writes: strings.TrimSpace(resp.Content)}, nil
}

// parentKey carries the span a generator's model calls are recorded under.
type parentKey struct{}

// WithParentSpan returns a copy of ctx in which the generator records its
// model calls under span (the pipeline step that called it) rather than
// under the run's current iteration, so that a trace tree shows each model
// call inside its step. The run is still the one ctx carries.
func WithParentSpan(ctx context.Context, span trace.SpanID) context.Context {
	return context.WithValue(ctx, parentKey{}, span)
}

// generate asks the model: through agent.Generate (traced, with the run's
// budgets and hooks), or, under a parent span set by WithParentSpan, by
// calling the model and recording its model.call under that span, timed by
// the run's clock.
func (g *Generator) generate(ctx context.Context, req agent.Request) (resp agent.Response, err error) {
	ec := trace.FromContext(ctx)
	parent, ok := ctx.Value(parentKey{}).(trace.SpanID)
	if ec == nil || !ok || parent.IsZero() {
		return agent.Generate(ctx, g.model, req)
	}
	start := ec.Duration()
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = trace.NewPanicError(v)
			}
		}()
		resp, err = g.model.Generate(ctx, req)
	}()
	r := trace.Record{Type: trace.TypeModelCall, ParentID: parent, Name: g.model.Name(), Input: trace.JSON(req.Messages),
		Usage: resp.Usage, Status: resp.FinishReason, Duration: ec.Duration() - start}
	if err != nil {
		r.Error = err.Error()
	} else {
		r.Output = trace.Text(resp.Content)
		if resp.Thinking != "" {
			r.Thinking = trace.Text(resp.Thinking)
		}
	}
	ec.Record(r)
	return resp, err
}

// needsArgs names the arguments a prompt section comes from.
func needsArgs(section string) string {
	if section == "Topic" {
		return "topic, query or question"
	}
	return "a text to work on (analysis, draft, answer, improved, final or text)"
}
