package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Bounds of the paging arguments.
const (
	defaultListLimit = 20
	maxListLimit     = 200
	defaultStepLimit = 200
	maxStepLimit     = 1000
	// maxRunSteps bounds the brief steps run_agent_with_trace returns;
	// get_execution_trace pages through the rest.
	maxRunSteps = 200
)

// RunAgentInput are run_agent_with_trace's arguments.
type RunAgentInput struct {
	Query          string            `json:"query" jsonschema:"what to ask the agent"`
	ThreadID       string            `json:"thread_id,omitempty" jsonschema:"session id to group runs by (tag thread:ID); generated when not given"`
	EnableThinking bool              `json:"enable_thinking,omitempty" jsonschema:"return the model's reasoning steps (default true)"`
	Params         map[string]string `json:"params,omitempty" jsonschema:"pipeline parameters, over the config's params (pipeline configs only)"`
}

// RunAgentOutput is run_agent_with_trace's result, in the seed's shape.
type RunAgentOutput struct {
	Result       string         `json:"result" jsonschema:"the final answer; empty when the run failed before one"`
	Success      bool           `json:"success"`
	Error        string         `json:"error,omitempty" jsonschema:"why the run failed"`
	ThreadID     string         `json:"thread_id"`
	Thinking     []Thinking     `json:"thinking,omitempty"`
	Steps        []Step         `json:"steps"`
	StepsOmitted int            `json:"steps_omitted,omitempty" jsonschema:"steps left out of this result; read them with get_execution_trace"`
	TraceSummary TraceSummary   `json:"trace_summary"`
	MemoryPool   map[string]int `json:"memory_pool" jsonschema:"memory keys and how many times each was written"`
	Stored       bool           `json:"stored" jsonschema:"the trace is in the store (get_execution_trace can read it)"`
	StoreError   string         `json:"store_error,omitempty"`
}

// GetTraceInput are get_execution_trace's arguments.
type GetTraceInput struct {
	TraceID       string `json:"trace_id" jsonschema:"the trace id, or a unique prefix of at least 4 hex digits"`
	IncludeMemory bool   `json:"include_memory,omitempty" jsonschema:"include the memory pool (default false)"`
	IncludeSteps  bool   `json:"include_steps,omitempty" jsonschema:"include the steps (default true)"`
	IncludeIO     bool   `json:"include_io,omitempty" jsonschema:"include each step's input, output and thinking (default true; long values are cut)"`
	StepOffset    int    `json:"step_offset,omitempty" jsonschema:"first step to return (for paging: next_step_offset of the previous call)"`
	StepLimit     int    `json:"step_limit,omitempty" jsonschema:"most steps to return (default 200); fewer come back when the result would be too large"`
}

// GetTraceOutput is get_execution_trace's result.
type GetTraceOutput struct {
	TraceSummary   TraceSummary `json:"trace_summary"`
	Query          any          `json:"query,omitempty" jsonschema:"what the run was asked"`
	Result         any          `json:"result,omitempty" jsonschema:"what the run answered"`
	Steps          []Step       `json:"steps,omitempty"`
	TotalSteps     int          `json:"total_steps"`
	NextStepOffset int          `json:"next_step_offset,omitempty" jsonschema:"pass as step_offset to read the next steps; absent on the last page"`
	Truncated      string       `json:"truncated,omitempty" jsonschema:"what was left out of this result to keep it small, and how to get it"`
	Memory         *Memory      `json:"memory,omitempty"`
}

// ListTracesInput are list_traces' arguments.
type ListTracesInput struct {
	Limit  int `json:"limit,omitempty" jsonschema:"most traces to return (default 20, at most 200)"`
	Offset int `json:"offset,omitempty" jsonschema:"traces to skip, newest first"`
}

// ListTracesOutput is list_traces' result.
type ListTracesOutput struct {
	Traces     []TraceSummary `json:"traces"`
	NextOffset int            `json:"next_offset,omitempty" jsonschema:"pass as offset for the next page; absent on the last page"`
}

// SearchTracesInput are search_traces' arguments.
type SearchTracesInput struct {
	Query         string   `json:"query,omitempty" jsonschema:"words and \"phrases\" searched in queries, answers, step names, inputs, outputs, errors and thinking; may hold filters such as tool:NAME model:NAME status:error tag:K:V since:24h type:tool.error"`
	StepType      string   `json:"step_type,omitempty" jsonschema:"only traces with a step of this type: a Loupe record type (tool.end, model.call, …) or an omni step type (llm_start, tool_end, …)"`
	MinDurationMS *float64 `json:"min_duration_ms,omitempty" jsonschema:"traces that lasted at least this long"`
	MaxDurationMS *float64 `json:"max_duration_ms,omitempty" jsonschema:"traces that lasted at most this long"`
	Success       *bool    `json:"success,omitempty" jsonschema:"true: runs that ended with success; false: the others"`
	Limit         int      `json:"limit,omitempty" jsonschema:"most traces to return (default 20, at most 200)"`
}

// SearchMatch is where a search matched in a trace.
type SearchMatch struct {
	Seq     uint64 `json:"seq"`
	Type    string `json:"type"`
	Name    string `json:"name,omitempty"`
	Field   string `json:"field,omitempty" jsonschema:"name, error, input, output or thinking"`
	Snippet string `json:"snippet,omitempty"`
}

// SearchResult is one trace a search found.
type SearchResult struct {
	TraceSummary
	Matches []SearchMatch `json:"matches,omitempty" jsonschema:"the first records that matched the text or step type"`
}

// SearchTracesOutput is search_traces' result.
type SearchTracesOutput struct {
	Traces []SearchResult `json:"traces"`
	More   bool           `json:"more,omitempty" jsonschema:"more traces match: raise limit or narrow the query"`
}

// DeleteTraceInput are delete_trace's arguments.
type DeleteTraceInput struct {
	TraceID string `json:"trace_id" jsonschema:"the full trace id (32 hex digits)"`
}

// DeleteTraceOutput is delete_trace's result.
type DeleteTraceOutput struct {
	TraceID string `json:"trace_id"`
	Deleted bool   `json:"deleted"`
}

// stepTypes maps the omni tracer's step types to Loupe record types.
var stepTypes = map[string][]trace.Type{
	"chain_start": {trace.TypeRunStart}, "chain_end": {trace.TypeRunEnd},
	"llm_start": {trace.TypeModelCall}, "llm_end": {trace.TypeModelCall},
	"tool_start": {trace.TypeToolStart}, "tool_end": {trace.TypeToolEnd, trace.TypeToolError},
	"node_start": {trace.TypeNodeStart}, "node_end": {trace.TypeNodeEnd},
	"retrieval": {trace.TypeToolEnd}, "reasoning": {trace.TypeModelCall},
	"error": {trace.TypeError, trace.TypeToolError, trace.TypeHookError},
}

func stepTypeEnum() []any {
	var e []any
	for _, k := range sortedKeys(stepTypes) {
		e = append(e, k)
	}
	for _, t := range trace.Types() {
		if !slices.Contains(e, any(string(t))) {
			e = append(e, string(t))
		}
	}
	return e
}

// schemaFor infers T's schema and lets edit set defaults and bounds on
// its properties.
func schemaFor[T any](edit func(p map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %T: %v", *new(T), err)) // a programming error, caught by every test
	}
	if edit != nil {
		edit(s.Properties)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func (s *Server) addTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "run_agent_with_trace",
		Description: "Run the configured agent (or pipeline) on a query with full execution tracing. Returns the answer, success, the model's thinking, the steps, a trace summary and the memory pool; the trace is stored, so get_execution_trace, list_traces and search_traces see it.",
		InputSchema: schemaFor[RunAgentInput](func(p map[string]*jsonschema.Schema) {
			p["query"].MinLength = ptr(1)
			p["thread_id"].MaxLength = ptr(200)
			p["enable_thinking"].Default = json.RawMessage("true")
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Run agent with trace", OpenWorldHint: ptr(true)},
	}, safe(s.log, s.runAgentTool))

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "get_execution_trace",
		Description: "Read one stored trace: its summary, its steps (paged: pass next_step_offset as step_offset) with inputs, outputs and thinking (long values are cut), and on request its memory pool.",
		InputSchema: schemaFor[GetTraceInput](func(p map[string]*jsonschema.Schema) {
			p["trace_id"].MinLength = ptr(4)
			p["trace_id"].MaxLength = ptr(32)
			p["trace_id"].Pattern = "^[0-9a-fA-F]+$"
			p["include_steps"].Default = json.RawMessage("true")
			p["include_io"].Default = json.RawMessage("true")
			p["step_offset"].Minimum = ptr(0.0)
			p["step_limit"].Minimum = ptr(1.0)
			p["step_limit"].Maximum = ptr(float64(maxStepLimit))
			p["step_limit"].Default = json.RawMessage(fmt.Sprint(defaultStepLimit))
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Get execution trace", ReadOnlyHint: true},
	}, safe(s.log, s.getTraceTool))

	limit := func(p map[string]*jsonschema.Schema) {
		p["limit"].Minimum = ptr(1.0)
		p["limit"].Maximum = ptr(float64(maxListLimit))
		p["limit"].Default = json.RawMessage(fmt.Sprint(defaultListLimit))
	}
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "list_traces",
		Description: "List stored agent runs, newest first (evaluation results are left out).",
		InputSchema: schemaFor[ListTracesInput](func(p map[string]*jsonschema.Schema) {
			limit(p)
			p["offset"].Minimum = ptr(0.0)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "List traces", ReadOnlyHint: true},
	}, safe(s.log, s.listTracesTool))

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "search_traces",
		Description: "Search stored traces: free text (whole words, \"phrases\") in queries, answers, step names, inputs, outputs, errors and thinking, with Loupe's filters in the query (tool:NAME model:NAME status:REASON tag:TAG since:24h type:TYPE has:errors) and the step type, duration and success arguments. Returns matching traces, newest match first, with where they matched.",
		InputSchema: schemaFor[SearchTracesInput](func(p map[string]*jsonschema.Schema) {
			limit(p)
			p["query"].MaxLength = ptr(2000)
			p["step_type"].Enum = stepTypeEnum()
			p["min_duration_ms"].Minimum = ptr(0.0)
			p["max_duration_ms"].Minimum = ptr(0.0)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Search traces", ReadOnlyHint: true},
	}, safe(s.log, s.searchTracesTool))

	s.addQualityTools(limit)

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "delete_trace",
		Description: "Delete one stored trace and all its records. Give the full trace id.",
		InputSchema: schemaFor[DeleteTraceInput](func(p map[string]*jsonschema.Schema) {
			p["trace_id"].Pattern = "^[0-9a-fA-F]{32}$"
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Delete trace", DestructiveHint: ptr(true), IdempotentHint: true},
	}, safe(s.log, s.deleteTraceTool))

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "run_eval",
		Description: "Grade agent runs against an AgentV eval file (tests with assertions on the answer and the tool calls): the stored traces (target store; select them with name, tags, since, limit) or fresh runs of the configured agent, one per case (target agent). Returns the verdict, the counts and each case's score.",
		InputSchema: schemaFor[RunEvalInput](func(p map[string]*jsonschema.Schema) {
			p["file"].MinLength = ptr(1)
			p["target"].Enum = []any{"store", "agent"}
			p["target"].Default = json.RawMessage(`"store"`)
			p["limit"].Minimum = ptr(0.0)
			p["threshold"].Minimum = ptr(0.0)
			p["threshold"].Maximum = ptr(1.0)
			p["store_results"].Default = json.RawMessage("true")
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Run eval", OpenWorldHint: ptr(true)},
	}, safe(s.log, s.runEvalTool))
}

func (s *Server) redactFn() func(*trace.Record) {
	if s.rd == nil {
		return func(*trace.Record) {}
	}
	return s.rd.Record
}

func (s *Server) view() view { return view{rd: s.redactFn(), maxValue: s.o.MaxValueBytes} }

// resolve finds the trace id or unique prefix id (store.Resolve).
func (s *Server) resolve(ctx context.Context, id string) (trace.TraceID, error) {
	tid, err := store.Resolve(ctx, s.st, id)
	switch {
	case err == nil:
		return tid, nil
	case errors.Is(err, store.ErrNotFound):
		return tid, notFound(id)
	case isStoreFailure(err):
		return tid, s.storeError(ctx, "looking up trace_id "+clip(id), err)
	case errors.As(err, new(*store.QueryError)):
		// A bad or ambiguous id: Resolve's message says which.
		return tid, toolError("trace_id %q: %v", clip(id), err)
	}
	return tid, s.storeError(ctx, "looking up trace_id "+clip(id), err)
}

func (s *Server) getTraceTool(ctx context.Context, _ *mcp.CallToolRequest, in GetTraceInput) (*mcp.CallToolResult, GetTraceOutput, error) {
	id, err := s.resolve(ctx, in.TraceID)
	if err != nil {
		return nil, GetTraceOutput{}, err
	}
	t, err := s.st.Trace(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, GetTraceOutput{}, notFound(in.TraceID)
	}
	if err != nil {
		return nil, GetTraceOutput{}, s.storeError(ctx, "reading trace "+id.String(), err)
	}
	v := s.view()
	out := GetTraceOutput{TraceSummary: summaryOf(&t.Summary)}
	sc, tc := stepCount(t.Records), thinkingCount(t.Records)
	out.TraceSummary.StepCount, out.TraceSummary.ThinkingStepCount = &sc, &tc
	for i := range t.Records {
		r := t.Records[i]
		if r.Depth != 0 {
			continue
		}
		switch r.Type {
		case trace.TypeRunStart:
			v.rd(&r)
			out.Query = v.value(r.Input)
		case trace.TypeRunEnd:
			v.rd(&r)
			out.Result = v.value(r.Output)
		}
	}
	if in.IncludeMemory {
		out.Memory = v.memory(t.Records)
	}
	out.TotalSteps = sc
	if !in.IncludeSteps {
		return nil, out, nil
	}
	if in.StepOffset > sc {
		return nil, GetTraceOutput{}, toolError("step_offset %d is past the trace's %d steps; start at 0", in.StepOffset, sc)
	}
	steps := v.steps(t.Records, in.IncludeIO)[in.StepOffset:]
	limit := in.StepLimit
	if limit <= 0 {
		limit = defaultStepLimit
	}
	// Keep what fits in MaxResultBytes, at least one step so that paging
	// always advances.
	base, _ := json.Marshal(out)
	size := len(base) + 512
	n := 0
	for n < len(steps) && n < limit {
		b, _ := json.Marshal(steps[n])
		if n > 0 && size+len(b) > s.o.MaxResultBytes {
			break
		}
		size += len(b) + 1
		n++
	}
	out.Steps = steps[:n]
	if rest := len(steps) - n; rest > 0 {
		out.NextStepOffset = in.StepOffset + n
		why := fmt.Sprintf("step_limit %d", limit)
		if n < limit {
			why = fmt.Sprintf("the result size limit (%d bytes)", s.o.MaxResultBytes)
		}
		out.Truncated = fmt.Sprintf("steps %d to %d of %d returned (%s); call again with step_offset %d for the next ones", in.StepOffset, in.StepOffset+n-1, sc, why, out.NextStepOffset)
	}
	return nil, out, nil
}

func (s *Server) listTracesTool(ctx context.Context, _ *mcp.CallToolRequest, in ListTracesInput) (*mcp.CallToolResult, ListTracesOutput, error) {
	limit := in.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	f, err := store.Criteria{}.AgentRuns(time.Now())
	if err != nil {
		return nil, ListTracesOutput{}, toolError("%v", err)
	}
	page, err := s.st.List(ctx, store.ListQuery{Filter: f, Limit: limit, Offset: in.Offset})
	if err != nil {
		return nil, ListTracesOutput{}, s.storeError(ctx, "listing traces", err)
	}
	out := ListTracesOutput{Traces: make([]TraceSummary, 0, len(page.Traces))}
	for i := range page.Traces {
		out.Traces = append(out.Traces, s.summary(&page.Traces[i]))
	}
	if page.Next != "" {
		out.NextOffset = in.Offset + len(page.Traces)
	}
	return nil, out, nil
}

// summary is summaryOf with the summary's strings redacted.
func (s *Server) summary(sum *store.Summary) TraceSummary {
	ts := summaryOf(sum)
	if s.rd != nil {
		ts.Name = s.rd.String(ts.Name)
		for i, t := range ts.Tags {
			ts.Tags[i] = s.rd.String(t)
		}
	}
	return ts
}

func (s *Server) searchTracesTool(ctx context.Context, _ *mcp.CallToolRequest, in SearchTracesInput) (*mcp.CallToolResult, SearchTracesOutput, error) {
	now := time.Now()
	q, err := store.ParseQueryAt(in.Query, now)
	if err != nil {
		// Every error of ParseQuery is the query's (a *store.QueryError):
		// the client's to fix.
		return nil, SearchTracesOutput{}, toolError("query %q: %v. Write words, \"phrases\" and filters key:value with keys %s", clip(in.Query), err, strings.Join(store.QueryKeys, ", "))
	}
	// The arguments are criteria besides the query's (store.Criteria);
	// each one that the query may hold too is refused when it does.
	var c store.Criteria
	if in.StepType != "" {
		if ts, ok := stepTypes[in.StepType]; ok {
			c.Types = ts
		} else {
			c.Types = []trace.Type{trace.Type(in.StepType)}
		}
	}
	minD, maxD := q.MinDuration, q.MaxDuration
	if in.MinDurationMS != nil {
		if q.MinDuration != 0 {
			return nil, SearchTracesOutput{}, toolError("min_duration_ms is given and the query has min_duration: give one")
		}
		c.MinDuration = time.Duration(*in.MinDurationMS * float64(time.Millisecond))
		minD = c.MinDuration
	}
	if in.MaxDurationMS != nil {
		if q.MaxDuration != 0 {
			return nil, SearchTracesOutput{}, toolError("max_duration_ms is given and the query has max_duration: give one")
		}
		c.MaxDuration = time.Duration(*in.MaxDurationMS * float64(time.Millisecond))
		if c.MaxDuration == 0 {
			c.MaxDuration = 1 // 0 means no bound
		}
		maxD = c.MaxDuration
	}
	if maxD > 0 && minD > maxD {
		return nil, SearchTracesOutput{}, toolError("the minimum duration is above the maximum; nothing can match")
	}
	if in.Success != nil && *in.Success {
		if q.Status != "" && q.Status != string(trace.TerminationSuccess) {
			return nil, SearchTracesOutput{}, toolError("success is true and the query has status:%s; give one", clip(q.Status))
		}
		if q.Status == "" {
			c.Status = string(trace.TerminationSuccess)
		}
	}
	// Search among agent runs: evaluation results are left out unless the
	// query's tags ask for them.
	q, err = c.AgentRunsQuery(q, now)
	if err != nil {
		// A query beyond the store's limits (a *store.QueryError), worded
		// as when the store refuses it.
		return nil, SearchTracesOutput{}, s.storeError(ctx, "searching traces", err)
	}
	// success false keeps the runs that did not succeed, which no filter
	// of the store's says.
	keep := func(sum *store.Summary) bool {
		return in.Success == nil || *in.Success || sum.Status != string(trace.TerminationSuccess)
	}
	limit := in.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	const maxMatches = 3
	out := SearchTracesOutput{Traces: []SearchResult{}}
	for th, err := range store.SearchTraces(ctx, s.st, q, maxMatches) {
		if err != nil {
			return nil, SearchTracesOutput{}, s.storeError(ctx, "searching traces", err)
		}
		if !keep(&th.Summary) {
			continue
		}
		if len(out.Traces) == limit {
			out.More = true
			break
		}
		res := SearchResult{TraceSummary: s.summary(&th.Summary)}
		for _, h := range th.Hits {
			m := SearchMatch{Seq: h.Seq, Type: string(h.Type), Name: h.Name, Field: h.Field, Snippet: h.Snippet}
			if s.rd != nil {
				m.Name, m.Snippet = s.rd.String(m.Name), s.rd.String(m.Snippet)
			}
			res.Matches = append(res.Matches, m)
		}
		out.Traces = append(out.Traces, res)
	}
	return nil, out, nil
}

func (s *Server) deleteTraceTool(ctx context.Context, _ *mcp.CallToolRequest, in DeleteTraceInput) (*mcp.CallToolResult, DeleteTraceOutput, error) {
	id, err := trace.ParseTraceID(strings.ToLower(in.TraceID))
	if err != nil {
		return nil, DeleteTraceOutput{}, toolError("trace_id %q is not a trace id: give the full id, 32 hex digits (list_traces shows it)", clip(in.TraceID))
	}
	n, err := s.st.Delete(ctx, id)
	if err != nil {
		return nil, DeleteTraceOutput{}, s.storeError(ctx, "deleting trace "+id.String(), err)
	}
	if n == 0 {
		return nil, DeleteTraceOutput{}, notFound(id.String())
	}
	return nil, DeleteTraceOutput{TraceID: id.String(), Deleted: true}, nil
}
