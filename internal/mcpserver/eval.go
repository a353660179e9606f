package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/store"
)

// RunEvalInput are run_eval's arguments.
type RunEvalInput struct {
	File         string   `json:"file" jsonschema:"the AgentV eval file (YAML or JSONL), relative to the server's eval folder"`
	Target       string   `json:"target,omitempty" jsonschema:"what to grade: store (traces already stored, the default) or agent (run the configured agent once per case)"`
	Name         string   `json:"name,omitempty" jsonschema:"target store: only runs with this root name"`
	Tags         []string `json:"tags,omitempty" jsonschema:"target store: only runs with all of these tags (e.g. thread:ID)"`
	Since        string   `json:"since,omitempty" jsonschema:"target store: only runs started within this duration (24h, 7d) or since this date"`
	Limit        int      `json:"limit,omitempty" jsonschema:"target store: only the newest N matching runs (0: all)"`
	Threshold    float64  `json:"threshold,omitempty" jsonschema:"pass mark of a case score, in (0,1]; 0 means 0.8"`
	StoreResults bool     `json:"store_results,omitempty" jsonschema:"store the results (and the agent's runs) as an evaluation trace (default true)"`
}

// EvalCase is one graded case.
type EvalCase struct {
	File     string   `json:"file"`
	ID       string   `json:"id"`
	Verdict  string   `json:"verdict" jsonschema:"pass, fail, skip or error"`
	Score    float64  `json:"score"`
	Error    string   `json:"error,omitempty"`
	TraceID  string   `json:"trace_id,omitempty" jsonschema:"the graded run's trace"`
	Failures []string `json:"failures,omitempty" jsonschema:"the assertions that did not pass, with why"`
}

// RunEvalOutput is run_eval's result.
type RunEvalOutput struct {
	Verdict        string     `json:"verdict" jsonschema:"pass (every graded case passed), fail (a case failed) or not_graded (a case or grader could not run, or nothing was graded)"`
	Passed         int        `json:"passed"`
	Failed         int        `json:"failed"`
	Skipped        int        `json:"skipped"`
	Errors         int        `json:"errors"`
	Cases          []EvalCase `json:"cases"`
	Summary        string     `json:"summary" jsonschema:"the report loupe eval prints"`
	ResultsTraceID string     `json:"results_trace_id,omitempty" jsonschema:"the stored evaluation (loupe traces show ID)"`
	StoreError     string     `json:"store_error,omitempty"`
	Warnings       []string   `json:"warnings,omitempty"`
}

// evalPath resolves file against the eval root and refuses paths outside
// it, symbolic links included. It also returns the eval root with its
// symbolic links resolved. Its errors name the file as the client gave
// it, and neither where the eval folder is on the server nor whether a
// file outside it exists.
func (s *Server) evalPath(file string) (path, root string, err error) {
	root, err = filepath.EvalSymlinks(s.o.EvalRoot)
	if err != nil {
		s.log.Error("MCP server: the eval folder cannot be read", "dir", s.o.EvalRoot, "err", err)
		return "", "", toolError("the server's eval folder cannot be read; the server logged the details")
	}
	outside := toolError("eval file %q is outside the server's eval folder; this server only reads eval files there (loupe mcp --eval-dir changes it)", clip(file))
	p := file
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.o.EvalRoot, p)
	}
	if !within(s.o.EvalRoot, p) && !within(root, p) {
		return "", "", outside
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", toolError("eval file %q does not exist (paths are relative to the server's eval folder)", clip(file))
	}
	if err != nil {
		// The error names the path on the server; only its reason
		// (permission denied, file name too long) is for the client.
		why := "it cannot be read"
		var pe *fs.PathError
		if errors.As(err, &pe) {
			why = pe.Err.Error()
		}
		return "", "", toolError("eval file %q: %s", clip(file), why)
	}
	if !within(root, real) {
		return "", "", outside
	}
	return real, root, nil
}

// within reports whether path p is dir or inside it, by their names.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (s *Server) runEvalTool(ctx context.Context, _ *mcp.CallToolRequest, in RunEvalInput) (*mcp.CallToolResult, RunEvalOutput, error) {
	path, root, err := s.evalPath(in.File)
	if err != nil {
		return nil, RunEvalOutput{}, err
	}
	// Messages about the eval file name it relative to the eval folder,
	// whose place on the server is not the client's business.
	sep := string(filepath.Separator)
	local := strings.NewReplacer(root+sep, "", s.o.EvalRoot+sep, "")
	f, err := eval.ParseFileMode(path, eval.LoadDefault)
	if err != nil {
		return nil, RunEvalOutput{}, toolError("the eval file does not load: %s", local.Replace(err.Error()))
	}
	var target evalrun.Target
	switch in.Target {
	case "", "store":
		sel := evalrun.StoreSelection{Filter: store.Filter{Name: in.Name, Tags: in.Tags}, Limit: in.Limit}
		if in.Since != "" {
			q, err := store.ParseQuery("since:" + in.Since)
			if err != nil {
				return nil, RunEvalOutput{}, toolError("since %q: want a duration before now (24h, 7d) or a time (2006-01-02 or RFC 3339)", clip(in.Since))
			}
			sel.Filter.Since = q.Since
		}
		target = evalrun.StoreTarget(s.st, sel)
	case "agent":
		if in.Name != "" || len(in.Tags) > 0 || in.Since != "" || in.Limit != 0 {
			return nil, RunEvalOutput{}, toolError("name, tags, since and limit select stored runs; they do not apply to target agent: leave them out")
		}
		if c := s.o.Config; c != nil && c.Pipeline != "" {
			return nil, RunEvalOutput{}, toolError("run_eval with target agent runs an agent, and this server's config runs a pipeline; grade the stored pipeline runs with target store")
		}
		tracer := s.tracer()
		e, _, err := s.newAgent(tracer)
		if err != nil {
			return nil, RunEvalOutput{}, toolError("%v; fix the config and restart loupe mcp", err)
		}
		e.Tags = append(append([]string(nil), e.Tags...), TagSource)
		target = &evalrun.ExecutorTarget{Label: e.Name, Executor: e, NewLoop: func(evalrun.CaseRef) (agent.AgentLoop, error) {
			_, loop, err := s.newAgent(tracer)
			return loop, err
		}}
	}
	rn := &evalrun.Runner{Target: target, Options: eval.Options{Threshold: in.Threshold}}
	rep, err := rn.Run(ctx, []*eval.File{f})
	if isStoreFailure(err) {
		return nil, RunEvalOutput{}, s.storeError(ctx, "the evaluation could not start", err)
	}
	if err != nil {
		// No run to grade, or runs that do not pair with the cases: the
		// message says which, and may repeat the selection.
		msg := clipAll(local.Replace(err.Error()), append([]string{in.Name, in.Since}, in.Tags...)...)
		return nil, RunEvalOutput{}, toolError("the evaluation could not start: %s", msg)
	}
	var buf bytes.Buffer
	if err := evalrun.WriteSummary(&buf, rep, false); err != nil {
		return nil, RunEvalOutput{}, toolError("writing the summary: %v", err)
	}
	// say readies a text of the report for the client: redacted, then
	// (so that no cut secret escapes redaction) bounded to n bytes.
	say := func(text string, n int) string {
		if s.rd != nil {
			text = s.rd.String(text)
		}
		return truncate(local.Replace(text), n)
	}
	out := RunEvalOutput{Cases: []EvalCase{}, Summary: say(buf.String(), s.o.MaxResultBytes/4)}
	out.Passed, out.Failed, out.Skipped, out.Errors = rep.Counts()
	switch rep.ExitCode() {
	case evalrun.ExitPass:
		out.Verdict = "pass"
	case evalrun.ExitFail:
		out.Verdict = "fail"
	default:
		out.Verdict = "not_graded"
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		c := EvalCase{File: filepath.Base(r.File.Path), ID: r.Case.ID, Verdict: string(r.Result.Verdict), Score: r.Result.Score}
		if r.Err != nil {
			c.Error = r.Err.Error()
		}
		if r.Run != nil {
			if !r.Run.TraceID.IsZero() {
				c.TraceID = r.Run.TraceID.String()
			}
			if r.Run.Failure != nil && c.Error == "" {
				c.Error = r.Run.Failure.Error()
			}
			if w := r.Run.Warning; w != "" && !seen[w] {
				seen[w] = true
				out.Warnings = append(out.Warnings, say(w, maxErrorBytes))
			}
		}
		for _, a := range r.Result.Assertions {
			if a.Verdict == eval.Pass || a.Verdict == eval.Skip {
				continue
			}
			why := a.Reason
			for _, ch := range a.Checks {
				if !ch.Passed && !ch.Skipped {
					why = strings.TrimPrefix(why+"; "+ch.Text, "; ")
				}
			}
			c.Failures = append(c.Failures, say(fmt.Sprintf("%s (%s): %s", a.Name, a.Verdict, why), 500))
		}
		c.Error = say(c.Error, maxErrorBytes)
		out.Cases = append(out.Cases, c)
	}
	if in.StoreResults {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		defer cancel()
		if id, err := evalrun.Save(sctx, s.st, rep, nil); err != nil {
			out.StoreError = s.storeError(ctx, "the results were not stored", err).Error()
		} else {
			out.ResultsTraceID = id.String()
		}
	}
	return nil, out, nil
}
