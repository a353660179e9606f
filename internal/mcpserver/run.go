package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/llm"
	"github.com/loupe-dev/loupe/trace"
)

// Tags of the runs made through MCP.
const (
	TagSource    = "source:mcp" // every run made through MCP
	ThreadPrefix = "thread:"    // followed by the run's thread id
)

// storeTimeout bounds storing a run's trace once the run is over, even
// when the client has gone: a finished run's trace is worth keeping.
const storeTimeout = 30 * time.Second

// tracer returns the tracer of runs made through MCP: no sinks (the run's
// records come back in agent.Result and are stored in one Append), and
// the server's redaction on every value and string recorded.
func (s *Server) tracer() *trace.Tracer {
	o := trace.Options{}
	if s.rd != nil {
		o = s.rd.Options(o)
	}
	return trace.New(o)
}

// newAgent returns the Executor and a fresh loop for one run of the
// configured agent, or of the demo agent without a config.
func (s *Server) newAgent(tracer *trace.Tracer) (agent.Executor, agent.AgentLoop, error) {
	c := s.o.Config
	if c == nil {
		e, loop, err := demo.Agent(tracer, s.o.DemoDir)
		if err != nil {
			return agent.Executor{}, nil, fmt.Errorf("building the demo agent: %w", err)
		}
		return *e, loop, nil
	}
	if c.Agent == nil {
		return agent.Executor{}, nil, errors.New("the config runs a pipeline, not an agent")
	}
	a := c.Agent
	model, err := llm.Open(c.modelSpec(), llm.Options{})
	if err != nil {
		return agent.Executor{}, nil, fmt.Errorf("%s: %w", c.at("model"), err)
	}
	var tools []agent.Tool
	for _, name := range a.Tools {
		switch name {
		case "calculator":
			tools = append(tools, demo.Calculator())
		case "clock":
			tools = append(tools, demo.Clock(nil))
		case "search_files":
			dir := c.Resolve(a.Files)
			if a.Files == "" {
				dir = c.Resolve(".")
			}
			tools = append(tools, demo.FileSearch(dir))
		}
	}
	tools = append(tools, s.tools...)
	seen := map[string]bool{}
	for _, t := range tools {
		n := t.Definition().Name
		if seen[n] {
			return agent.Executor{}, nil, fmt.Errorf("%s: two of the agent's tools are named %q (a built-in tool and an MCP server's, or two servers'); drop one", c.at("model"), n)
		}
		seen[n] = true
	}
	l := a.Limits
	if l.MaxIterations == 0 {
		l.MaxIterations = DefaultMaxIterations
	}
	name := a.Name
	if name == "" {
		name = "agent"
	}
	e := agent.Executor{
		Name: name, Tracer: tracer, Tags: a.Tags,
		Limits: agent.Limits{MaxIterations: l.MaxIterations, MaxToolCalls: l.MaxToolCalls, MaxTokens: l.MaxTokens, MaxCostUSD: l.MaxCostUSD, Timeout: l.timeout},
	}
	loop := &agent.ReAct{Model: model, System: a.System}
	if len(tools) > 0 {
		loop.Tools = agent.NewToolbox(tools...)
	}
	return e, loop, nil
}

// run runs the configured agent (or pipeline, or the demo agent) on query
// and returns its result; the records are redacted and stored.
func (s *Server) run(ctx context.Context, query, thread string, params map[string]string) (agent.Result, error) {
	tracer := s.tracer()
	if c := s.o.Config; c != nil && c.Pipeline != "" {
		runPipeline := s.o.RunPipeline
		if runPipeline == nil {
			runPipeline = RunPipelineFile
		}
		p := maps.Clone(c.Params)
		if p == nil {
			p = map[string]string{}
		}
		// A client names no folder for the built-in retriever to read:
		// that would let any MCP client read the server user's files.
		if _, ok := params["documents_dir"]; ok {
			return agent.Result{}, toolError("params: documents_dir cannot be given by an MCP client (it would read any folder on the server); set it under params in %s", c.at("pipeline"))
		}
		maps.Copy(p, params)
		if _, ok := p["query"]; !ok && query != "" {
			p["query"] = query
		}
		res, err := runPipeline(ctx, tracer, c.Resolve(c.Pipeline), p)
		if err != nil {
			// The pipeline's message may repeat the client's parameters.
			var given []string
			for k, v := range params {
				given = append(given, k, v)
			}
			return res, toolError("%s: %s", c.at("pipeline"), clipAll(err.Error(), given...))
		}
		return res, nil
	}
	if len(params) > 0 {
		return agent.Result{}, toolError("params are for pipelines; this server runs an agent: leave params out")
	}
	e, loop, err := s.newAgent(tracer)
	if err != nil {
		return agent.Result{}, toolError("%v; fix the config and restart loupe mcp", err)
	}
	e.Tags = append(append(append([]string(nil), e.Tags...), TagSource), ThreadPrefix+thread)
	return e.Run(ctx, loop, query), nil
}

func newThreadID() string {
	var b [8]byte
	rand.Read(b[:])
	return "mcp-" + hex.EncodeToString(b[:])
}

func (s *Server) runAgentTool(ctx context.Context, _ *mcp.CallToolRequest, in RunAgentInput) (*mcp.CallToolResult, RunAgentOutput, error) {
	thread := in.ThreadID
	if thread == "" {
		thread = newThreadID()
	}
	res, err := s.run(ctx, in.Query, thread, in.Params)
	if err != nil {
		return nil, RunAgentOutput{}, err
	}
	out := RunAgentOutput{Result: res.Answer, Success: res.Err == nil && res.Termination == trace.TerminationSuccess, ThreadID: thread, Steps: []Step{}}
	if res.Err != nil {
		out.Error = res.Err.Error()
	}
	if s.rd != nil {
		out.Result, out.Error = s.rd.String(out.Result), s.rd.String(out.Error)
	}
	// The answer and the error may repeat the query: they are bounded
	// like the rest of the result (after redaction, which a cut secret
	// could escape).
	out.Result, out.Error = truncate(out.Result, s.o.MaxResultBytes/2), truncate(out.Error, s.o.MaxValueBytes)
	if len(res.Records) == 0 {
		return nil, out, nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if _, err := s.st.Append(sctx, res.Records); err != nil {
		out.StoreError = s.storeError(ctx, "the trace was not stored", err).Error()
	} else {
		out.Stored = true
	}
	// The records were redacted as they were recorded (see tracer);
	// the view redacts again, which changes nothing, so that a
	// pipeline runner's own records are covered as well.
	v := s.view()
	recs := res.Records
	steps := v.steps(recs, false)
	out.TraceSummary = runSummary(&res, recs)
	sc, tc := len(steps), thinkingCount(recs)
	out.TraceSummary.StepCount, out.TraceSummary.ThinkingStepCount = &sc, &tc
	if len(steps) > maxRunSteps {
		out.StepsOmitted = len(steps) - maxRunSteps
		steps = steps[:maxRunSteps]
	}
	out.Steps = steps
	if in.EnableThinking {
		out.Thinking = v.thinking(recs)
	}
	out.MemoryPool = memoryPool(recs, v.rd)
	// Keep the result within bounds: thinking first, then steps.
	if b, _ := json.Marshal(out); len(b) > s.o.MaxResultBytes {
		out.Thinking = nil
		for len(out.Steps) > 1 {
			if b, _ := json.Marshal(out); len(b) <= s.o.MaxResultBytes {
				break
			}
			keep := len(out.Steps) / 2
			out.StepsOmitted += len(out.Steps) - keep
			out.Steps = out.Steps[:keep]
		}
	}
	return nil, out, nil
}

// runSummary is the trace summary of a run just made, from its result
// (the store's summary may not be readable when storing failed).
func runSummary(res *agent.Result, recs []trace.Record) TraceSummary {
	st := res.Stats
	ts := TraceSummary{
		TraceID: res.TraceID.String(), Status: string(res.Termination), Success: res.Termination == trace.TerminationSuccess,
		DurationMS: ms(res.Duration), Records: len(recs), Iterations: st.Iterations, ModelCalls: st.ModelCalls,
		ToolCalls: st.ToolCalls, Errors: st.Errors, InputTokens: st.InputTokens, OutputTokens: st.OutputTokens, CostUSD: st.CostUSD,
	}
	for i := range recs {
		if recs[i].Type == trace.TypeRunStart && recs[i].Depth == 0 {
			ts.Name, ts.Started, ts.Tags = recs[i].Name, recs[i].Time.UTC(), recs[i].Tags()
			break
		}
	}
	if ts.Started.IsZero() && len(recs) > 0 {
		ts.Started = recs[0].Time.UTC()
	}
	return ts
}
