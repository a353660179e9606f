package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/pipeline"
	"github.com/loupe-dev/loupe/trace"
)

// RunPipelineFile is the PipelineFunc a Server uses when Options.RunPipeline
// is nil: it loads and validates file (every error, with file:line:column,
// is returned and nothing runs), then runs it with package pipeline on
// tracer, offline (the built-in servers and the offline generator model)
// unless the file's servers say otherwise. params are the run's
// parameters, as strings. The answer is the last step's output: its text
// when it is a string, its JSON otherwise. It is safe for concurrent use.
func RunPipelineFile(ctx context.Context, tracer *trace.Tracer, file string, params map[string]string) (agent.Result, error) {
	p, err := pipeline.Load(file)
	if err != nil {
		return agent.Result{}, err
	}
	values := make(map[string]any, len(params))
	for k, v := range params {
		values[k] = v
	}
	res, runErr := pipeline.Run(ctx, p, pipeline.RunOptions{Params: values, Tracer: tracer, Tags: []string{TagSource}})
	if res == nil {
		return agent.Result{}, runErr
	}
	out := agent.Result{
		Records:     res.Records,
		Stats:       res.Stats,
		Termination: res.Termination,
		Err:         runErr,
		TraceID:     res.TraceID,
	}
	switch v := res.Output.(type) {
	case nil:
	case string:
		out.Answer = v
	default:
		if b, err := json.Marshal(v); err == nil {
			out.Answer = string(b)
		}
	}
	return out, nil
}
