package evalrun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

// CommandTarget runs a shell command once per case and grades what it
// prints, like AgentV's CLI provider.
//
// The command is run with `sh -c`. The case is handed to it three ways, use
// whichever suits it: the placeholders {{input}} and {{case_id}} in the
// command are replaced by the case's input and id, single-quoted for the
// shell; the environment variables LOUPE_EVAL_INPUT and LOUPE_EVAL_CASE_ID
// hold them; and the input is written to standard input.
//
// Standard output is read as a trace in any format traceio detects — AgentV's
// {"text": …, "trace": [...]} (the usual case), Loupe JSON lines, … — and
// the run is tagged "case:<id>". Output that is not JSON at all is taken as
// the plain-text final answer of a run with no recorded calls. A command
// that exits with a non-zero status, prints nothing, or runs past Timeout
// fails the case (its standard error is quoted in the error).
type CommandTarget struct {
	// Command is the shell command line.
	Command string
	// Dir is the working directory; "" means the current one.
	Dir string
	// Env is added to the process's environment.
	Env []string
	// Timeout bounds one run; 0 means no limit besides the context's.
	Timeout time.Duration
}

// Name implements Target.
func (t *CommandTarget) Name() string { return "command" }

// Run implements Target.
func (t *CommandTarget) Run(ctx context.Context, c CaseRef) (*Run, error) {
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.Timeout)
		defer cancel()
	}
	line := strings.NewReplacer("{{input}}", shellQuote(c.Case.Input), "{{case_id}}", shellQuote(c.Case.ID)).Replace(t.Command)
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = t.Dir
	cmd.Env = append(append(os.Environ(), t.Env...), "LOUPE_EVAL_INPUT="+c.Case.Input, "LOUPE_EVAL_CASE_ID="+c.Case.ID)
	cmd.Stdin = strings.NewReader(c.Case.Input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	killGroup(cmd)
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, fmt.Errorf("command %q timed out after %s%s", t.Command, t.Timeout, tail(stderr.Bytes()))
		}
		return nil, fmt.Errorf("command %q: %v%s", t.Command, err, tail(stderr.Bytes()))
	}
	out := bytes.TrimSpace(stdout.Bytes())
	if len(out) == 0 {
		return nil, fmt.Errorf("command %q printed nothing on standard output; it should print the agent's answer or an AgentV trace {\"text\": …, \"trace\": […]}%s", t.Command, tail(stderr.Bytes()))
	}
	run, err := runFromOutput(out, c, elapsed)
	if err != nil {
		return nil, fmt.Errorf("command %q for case %s %w", t.Command, c.Case.ID, err)
	}
	if run.Warning != "" {
		run.Warning = fmt.Sprintf("command %q %s", t.Command, run.Warning)
	}
	return run, nil
}

// runFromOutput reads what a command printed for case c: a trace in a
// format traceio detects, or else (when it does not look like JSON) the
// plain-text answer of a run with no recorded calls.
func runFromOutput(out []byte, c CaseRef, elapsed time.Duration) (*Run, error) {
	if len(out) == 0 {
		return nil, fmt.Errorf("printed nothing")
	}
	name := "the output of case " + c.Case.ID // for messages: there is no file
	f, derr := traceio.Detect(out)
	if derr != nil {
		if out[0] == '{' || out[0] == '[' {
			return nil, fmt.Errorf("printed JSON that is not a trace Loupe reads: %v", derr)
		}
		d := elapsed
		return &Run{
			Warning: "printed no trace, only plain text: it is graded as the answer of a run with no tool calls (print an AgentV trace {\"text\": …, \"trace\": […]} to grade tool calls)",
			Trajectory: eval.Trajectory{Output: string(out), Duration: &d,
				Messages: []eval.Message{{Role: "user", Content: c.Case.Input}, {Role: "assistant", Content: string(out)}}},
			Name: c.Case.ID, Tags: []string{CaseTag + c.Case.ID}, Source: "command",
		}, nil
	}
	var recs []trace.Record
	for r, err := range traceio.Read(bytes.NewReader(out), name, f) {
		if err != nil {
			return nil, fmt.Errorf("output: %w", err)
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("printed a %s trace with no records", f)
	}
	return RunFromRecords(withTags(recs, CaseTag+c.Case.ID), "command"), nil
}

// shellQuote quotes s as one POSIX shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// tail renders the end of a command's standard error for an error message.
func tail(stderr []byte) string {
	s := strings.TrimSpace(string(stderr))
	if s == "" {
		return ""
	}
	const limit = 2000
	if len(s) > limit {
		cut := len(s) - limit
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++ // do not split a character
		}
		s = "…" + s[cut:]
	}
	return "; standard error:\n" + s
}
