package evalrun

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/llm"
	"github.com/loupe-dev/loupe/trace"
)

// ModelJudge makes any agent.Model (llm.Open's providers, a scripted
// model, a user's own) the judge of eval's LLM graders: each prompt is
// sent as a system message (the answer format) and a user message (the
// grading prompt), and the answer's text, tokens and cost come back. Each
// reply gets a fresh span id as its ID; Save stores the call under it as
// a model.call record of the evaluation's trace.
//
// ModelJudge is safe for concurrent use when its Model is (the providers
// of package llm are).
type ModelJudge struct {
	Model agent.Model
	// Timeout bounds one call (a server that never answers must not hang
	// the evaluation); 0 means no limit besides the context's.
	Timeout time.Duration
}

// OpenJudge opens the judge model spec names ("openai:gpt-4o-mini",
// "anthropic:…", "ollama:llama3.2", "scripted:FILE"; see llm.Open).
func OpenJudge(spec string, opts llm.Options) (*ModelJudge, error) {
	m, err := llm.Open(spec, opts)
	if err != nil {
		return nil, fmt.Errorf("--judge-model: %w", err)
	}
	return &ModelJudge{Model: m}, nil
}

// Judge implements eval.Judge.
func (j *ModelJudge) Judge(ctx context.Context, p eval.JudgePrompt) (eval.JudgeReply, error) {
	reply := eval.JudgeReply{ID: trace.NewSpanID().String(), Model: j.Model.Name()}
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, j.Timeout)
		defer cancel()
	}
	resp, err := j.Model.Generate(ctx, agent.Request{Messages: judgeMessages(p)})
	if err != nil && j.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return reply, fmt.Errorf("judge model %s: no answer within %s (--judge-timeout): %w", reply.Model, j.Timeout, err)
	}
	u := resp.Usage
	reply.Provider = u.Provider
	reply.InputTokens, reply.OutputTokens = u.InputTokens, u.OutputTokens
	reply.CachedTokens, reply.ReasoningTokens, reply.CostUSD = u.CachedTokens, u.ReasoningTokens, u.CostUSD
	if err != nil {
		return reply, fmt.Errorf("judge model %s: %w", reply.Model, err)
	}
	reply.Text = resp.Content
	if reply.Text == "" && len(resp.ToolCalls) > 0 {
		return reply, fmt.Errorf("judge model %s answered with tool calls instead of a JSON grade", reply.Model)
	}
	return reply, nil
}

func judgeMessages(p eval.JudgePrompt) []agent.Message {
	return []agent.Message{{Role: agent.RoleSystem, Content: p.System}, {Role: agent.RoleUser, Content: p.User}}
}

// judgeRecords returns the model.call records of a result's judge calls,
// children of the span parent (the case's result record), in call order.
func judgeRecords(res Result, parent trace.SpanID) []trace.Record {
	var out []trace.Record
	for _, a := range res.Result.Assertions {
		for _, c := range a.JudgeCalls {
			r := trace.Record{
				Type: trace.TypeModelCall, Name: c.Reply.Model, ParentID: parent,
				Time: c.Start.Add(c.Duration), Duration: c.Duration,
				Input: trace.JSON(judgeMessages(c.Prompt)),
				Usage: trace.Usage{Provider: c.Reply.Provider, InputTokens: c.Reply.InputTokens, OutputTokens: c.Reply.OutputTokens,
					CachedTokens: c.Reply.CachedTokens, ReasoningTokens: c.Reply.ReasoningTokens, CostUSD: c.Reply.CostUSD},
			}
			if id, err := trace.ParseSpanID(c.Reply.ID); err == nil {
				r.SpanID = id
			}
			if r.Name == "" {
				r.Name = "judge"
			}
			if !c.CallFailed {
				r.Output = trace.Text(c.Reply.Text)
			}
			switch {
			case c.CallFailed:
				r.Error = c.Err
			case c.ParseError:
				// The call worked; its answer could not be used. Said on
				// the record so the trace shows why the grade failed.
				r.Error = "the judge's answer could not be read: " + c.Err
			}
			out = append(out, r)
		}
	}
	return out
}

// skippedForJudge lists the cases with a judge grader skipped because no
// judge model was configured.
func skippedForJudge(rep *Report) []string {
	var ids []string
	for _, r := range rep.Results {
		for _, a := range r.Result.Assertions {
			if a.Verdict == eval.Skip && a.Reason == eval.NoJudgeReason {
				ids = append(ids, r.Case.ID)
				break
			}
		}
	}
	return ids
}

// noJudgeHint says which cases lost their judge graders and how to run
// them, or "" when none did.
func noJudgeHint(rep *Report) string {
	ids := skippedForJudge(rep)
	if len(ids) == 0 {
		return ""
	}
	list := ids
	if len(list) > 10 {
		list = append(list[:10:10], fmt.Sprintf("and %d more", len(ids)-10))
	}
	return fmt.Sprintf("LLM graders skipped in %d case(s) (%s): no judge model; run them with --judge-model PROVIDER:MODEL (or LOUPE_JUDGE_MODEL), e.g. --judge-model openai:gpt-4o-mini, with --judge-base-url / --judge-api-key for another server",
		len(ids), strings.Join(list, ", "))
}

// judgeTotals sums the judge calls of a report per model, for the
// summary: "judge openai:gpt-4o-mini: 12 calls, 9000 in / 800 out tokens, $0.0021".
func judgeTotals(rep *Report) []string {
	type tot struct {
		calls, failed int
		in, out       int64
		cost          float64
		unpriced      bool
	}
	by := map[string]*tot{}
	for _, r := range rep.Results {
		for _, a := range r.Result.Assertions {
			for _, c := range a.JudgeCalls {
				t := by[c.Reply.Model]
				if t == nil {
					t = &tot{}
					by[c.Reply.Model] = t
				}
				t.calls++
				if c.CallFailed || c.ParseError {
					t.failed++
				}
				t.in += c.Reply.InputTokens
				t.out += c.Reply.OutputTokens
				t.cost += c.Reply.CostUSD
				if c.Reply.CostUSD == 0 && !c.CallFailed {
					t.unpriced = true
				}
			}
		}
	}
	var lines []string
	for m, t := range by {
		cost := fmt.Sprintf("$%.4f", t.cost)
		if t.unpriced {
			cost += " (some calls have unknown cost)"
		}
		line := fmt.Sprintf("judge %s: %d call(s), %d in / %d out tokens, %s", m, t.calls, t.in, t.out, cost)
		if t.failed > 0 {
			line += fmt.Sprintf("; %d failed or unreadable", t.failed)
		}
		lines = append(lines, line)
	}
	sort.Strings(lines)
	return lines
}
