package mcpserver

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// TraceSummary describes one trace: the seed's trace_summary (trace_id,
// step_count, thinking_step_count, duration_ms) plus what Loupe's listing
// knows. StepCount and ThinkingStepCount are set when the trace's records
// were read (run_agent_with_trace, get_execution_trace), not in listings.
type TraceSummary struct {
	TraceID           string    `json:"trace_id" jsonschema:"the trace's id (32 hex digits); get_execution_trace and delete_trace take it or a unique prefix of at least 4 digits"`
	Name              string    `json:"name" jsonschema:"the root run's name"`
	Status            string    `json:"status" jsonschema:"how the run ended: success, error, max_iterations, limit_exceeded, timeout, …; running or incomplete when it has not ended"`
	Success           bool      `json:"success" jsonschema:"the run ended with status success"`
	Started           time.Time `json:"started"`
	DurationMS        float64   `json:"duration_ms"`
	StepCount         *int      `json:"step_count,omitempty" jsonschema:"steps (spans) in the trace"`
	ThinkingStepCount *int      `json:"thinking_step_count,omitempty" jsonschema:"steps that carry model reasoning"`
	Records           int       `json:"records"`
	Iterations        int       `json:"iterations"`
	ModelCalls        int       `json:"model_calls"`
	ToolCalls         int       `json:"tool_calls"`
	Errors            int       `json:"errors"`
	InputTokens       int64     `json:"input_tokens"`
	OutputTokens      int64     `json:"output_tokens"`
	CostUSD           float64   `json:"cost_usd"`
	Incomplete        bool      `json:"incomplete,omitempty" jsonschema:"records were lost or the run never ended"`
	Tags              []string  `json:"tags,omitempty"`
	Models            []string  `json:"models,omitempty"`
	Tools             []string  `json:"tools,omitempty"`
}

func summaryOf(s *store.Summary) TraceSummary {
	return TraceSummary{
		TraceID: s.ID.String(), Name: s.Name, Status: s.Status, Success: s.Status == string(trace.TerminationSuccess),
		Started: s.Started.UTC(), DurationMS: ms(s.Duration), Records: s.Records, Iterations: s.Iterations,
		ModelCalls: s.ModelCalls, ToolCalls: s.ToolCalls, Errors: s.Errors, InputTokens: s.InputTokens,
		OutputTokens: s.OutputTokens, CostUSD: s.CostUSD, Incomplete: s.Incomplete, Tags: s.Tags, Models: s.Models, Tools: s.Tools,
	}
}

// Step is one step of a trace: a span (a run, an iteration, a model call,
// a tool call, a hook, a pipeline node) or a point event (a message, a
// memory write, a guardrail), in the order of the span tree (parents
// before children).
type Step struct {
	Index      int     `json:"index" jsonschema:"position in the trace's steps, from 0 (step_offset pages by it)"`
	StepID     string  `json:"step_id"`
	ParentID   string  `json:"parent_id,omitempty"`
	Depth      int     `json:"depth" jsonschema:"nesting in the span tree; 0 for the root run"`
	Name       string  `json:"name"`
	Type       string  `json:"type" jsonschema:"the Loupe record type that opened the step: run.start, iteration.start, model.call, tool.start, node.start, memory.set, …"`
	Status     string  `json:"status" jsonschema:"completed, error, or running (not ended)"`
	Detail     string  `json:"detail,omitempty" jsonschema:"termination reason, loop action, finish reason or memory scope"`
	Error      string  `json:"error,omitempty"`
	Iteration  int     `json:"iteration,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	Input      any     `json:"input,omitempty"`
	Output     any     `json:"output,omitempty"`
	Thinking   any     `json:"thinking,omitempty"`
}

// Thinking is one step's reasoning, as the seed's run_agent_with_trace
// returns it.
type Thinking struct {
	Step      string `json:"step"`
	Type      string `json:"type"`
	Reasoning any    `json:"reasoning"`
}

// pointEvents are the record types that are a step of their own without
// an end record.
func isPoint(t trace.Type) bool {
	switch t {
	case trace.TypeRunStart, trace.TypeIterationStart, trace.TypeToolStart, trace.TypeHookStart,
		trace.TypeChildSpawn, trace.TypeNodeStart:
		return false
	}
	return true
}

// view turns a trace's records (seq order) into steps, thinking and the
// memory pool, redacting (rd) and cutting values (maxValue bytes each).
type view struct {
	rd       func(*trace.Record)
	maxValue int
}

// steps flattens the span tree of recs. withIO keeps inputs, outputs and
// thinking.
func (v view) steps(recs []trace.Record, withIO bool) []Step {
	var out []Step
	var walk func(ns []*trace.Node, depth int)
	walk = func(ns []*trace.Node, depth int) {
		for _, n := range ns {
			start := *n.Start
			v.rd(&start)
			end := &start
			if n.End != nil {
				e := *n.End
				v.rd(&e)
				end = &e
			}
			st := Step{
				Index: len(out), StepID: start.SpanID.String(), Depth: depth, Name: start.Name, Type: string(start.Type),
				Iteration: start.Iteration, DurationMS: ms(end.Duration), Detail: end.Status, Error: truncate(end.Error, v.maxValue),
			}
			if st.Name == "" {
				st.Name = end.Name
			}
			if !start.ParentID.IsZero() {
				st.ParentID = start.ParentID.String()
			}
			switch {
			case end.Failed() || start.Error != "":
				st.Status = "error"
				if st.Error == "" {
					st.Error = truncate(start.Error, v.maxValue)
				}
			case n.End == nil && !isPoint(start.Type):
				st.Status = "running"
			default:
				st.Status = "completed"
			}
			if withIO {
				st.Input = v.value(start.Input)
				o := end.Output
				if len(o) == 0 {
					o = start.Output
				}
				st.Output = v.value(o)
				th := end.Thinking
				if len(th) == 0 {
					th = start.Thinking
				}
				st.Thinking = v.value(th)
			}
			out = append(out, st)
			walk(n.Children, depth+1)
		}
	}
	walk(trace.Tree(recs), 0)
	return out
}

// thinking lists the records that carry reasoning.
func (v view) thinking(recs []trace.Record) []Thinking {
	var out []Thinking
	for i := range recs {
		if len(recs[i].Thinking) == 0 {
			continue
		}
		r := recs[i]
		v.rd(&r)
		out = append(out, Thinking{Step: r.Name, Type: string(r.Type), Reasoning: v.value(r.Thinking)})
	}
	return out
}

// Memory is a trace's memory pool, after the omni/UltraRAG memory pool:
// parameters and globals with their last value, memory keys with every
// write and the step (iteration) that made it.
type Memory struct {
	Params  map[string]any           `json:"params,omitempty"`
	Globals map[string]any           `json:"globals,omitempty"`
	History map[string][]MemoryWrite `json:"history,omitempty"`
}

// MemoryWrite is one write of a memory key.
type MemoryWrite struct {
	Step  int       `json:"step"`
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`
	Value any       `json:"value"`
}

func (v view) memory(recs []trace.Record) *Memory {
	var sets []trace.Record
	for i := range recs {
		if recs[i].Type == trace.TypeMemorySet {
			r := recs[i]
			v.rd(&r)
			sets = append(sets, r)
		}
	}
	m := store.MemoryOf(sets)
	out := &Memory{}
	for k, x := range m.Params {
		if out.Params == nil {
			out.Params = map[string]any{}
		}
		out.Params[k] = v.value(x)
	}
	for k, x := range m.Globals {
		if out.Globals == nil {
			out.Globals = map[string]any{}
		}
		out.Globals[k] = v.value(x)
	}
	for k, ws := range m.History {
		if out.History == nil {
			out.History = map[string][]MemoryWrite{}
		}
		for _, w := range ws {
			out.History[k] = append(out.History[k], MemoryWrite{Step: w.Step, Seq: w.Seq, Time: w.Time.UTC(), Value: v.value(w.Value)})
		}
	}
	return out
}

// memoryPool is the seed's memory_pool: how many times each key was
// written.
func memoryPool(recs []trace.Record, rd func(*trace.Record)) map[string]int {
	pool := map[string]int{}
	for i := range recs {
		if recs[i].Type == trace.TypeMemorySet {
			r := recs[i]
			rd(&r)
			pool[r.Name]++
		}
	}
	return pool
}

// value returns a record value for a tool result: the JSON as is, or, when
// longer than maxValue bytes, a string holding its start and a marker
// saying how much was cut.
func (v view) value(x trace.Value) any {
	if len(x) == 0 {
		return nil
	}
	if len(x) <= v.maxValue && json.Valid(x) {
		return json.RawMessage(x)
	}
	return truncate(string(x), v.maxValue)
}

// truncate cuts s to at most n bytes (on a character boundary) and says
// so.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head := trace.TruncateUTF8(s, n)
	return head + fmt.Sprintf("…[truncated: %d of %d bytes shown]", len(head), len(s))
}

// thinkingCount counts the steps that carry reasoning.
func thinkingCount(recs []trace.Record) int {
	n := 0
	for i := range recs {
		if len(recs[i].Thinking) > 0 {
			n++
		}
	}
	return n
}

// stepCount counts the steps of recs (nodes of the span tree).
func stepCount(recs []trace.Record) int {
	n := 0
	var walk func([]*trace.Node)
	walk = func(ns []*trace.Node) {
		for _, x := range ns {
			n++
			walk(x.Children)
		}
	}
	walk(trace.Tree(recs))
	return n
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
