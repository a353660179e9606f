package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/trace"
)

// Tags of a branched run, linking it to the run it branched from.
const (
	TagOf       = "replay-of:"        // + the original trace id
	TagFromStep = "replay-from-step:" // + the first live step
)

// RunOptions configure Run. The zero value replays every step, untraced,
// with no limits.
type RunOptions struct {
	Options
	// Tracer records the new run; nil runs it untraced. A branched run
	// is tagged TagOf+original id and TagFromStep+N.
	Tracer *trace.Tracer
	// Limits bound a branched run (a live model may not stop by itself).
	// A replay without a branch uses the limits the recorded run was
	// stopped by (Recording.Limits), so that it stops where the run did.
	Limits agent.Limits
}

// A Report is what Run found: how the replayed run went and where it
// first diverged from the recording.
type Report struct {
	Original    trace.TraceID `json:"original"`            // the recorded run
	Name        string        `json:"name"`                // its name
	Trace       trace.TraceID `json:"trace,omitzero"`      // the new run's trace, when traced
	FromStep    int           `json:"from_step,omitempty"` // the first live step, when branched
	LiveModel   string        `json:"live_model,omitempty"`
	Stats       Stats         `json:"stats"`
	Answer      string        `json:"answer"`               // the new run's answer
	Termination string        `json:"termination"`          // the new run's termination reason
	Error       string        `json:"error,omitempty"`      // why the new run failed, if it did
	Divergence  *Divergence   `json:"divergence,omitempty"` // nil when the replay matched the recording
	Tags        []string      `json:"tags,omitempty"`       // the new run's tags
}

// Run re-runs the recorded run as an agent.ReAct rebuilt from the
// recording (Replayer.ReAct) with model and tools answered from it, and
// reports where it first diverges. With FromStep and Live it branches:
// the steps from FromStep are answered by Live, and the new run is
// recorded by o.Tracer tagged with the original's id. The error is for a
// replay that could not start; a divergence is in the Report.
func Run(ctx context.Context, rec *Recording, o RunOptions) (*Report, error) {
	rp, err := New(rec, o.Options)
	if err != nil {
		return nil, err
	}
	var tags []string
	if o.FromStep > 0 {
		tags = []string{TagOf + rec.TraceID.String(), TagFromStep + strconv.Itoa(o.FromStep)}
	}
	limits := rec.Limits
	if o.FromStep > 0 {
		limits = o.Limits
	}
	exec := &agent.Executor{Name: rec.Name, Tracer: o.Tracer, Tags: tags, Limits: limits}
	res := exec.Run(ctx, rp.ReAct(), rec.Input)
	rep := &Report{Original: rec.TraceID, Name: rec.Name, Trace: res.TraceID, FromStep: o.FromStep,
		Answer: res.Answer, Termination: string(res.Termination), Tags: tags}
	if o.Live != nil && o.FromStep > 0 {
		rep.LiveModel = o.Live.Name()
	}
	if res.Err != nil {
		rep.Error = res.Err.Error()
	}
	rep.Divergence = rp.Finish(res)
	rep.Stats = rp.Stats()
	return rep, nil
}

// WriteText writes r for people: what was replayed, and the divergence
// with its diff, or that there was none.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	short := r.Original.String()[:12]
	s := r.Stats
	fmt.Fprintf(ew, "replayed %s (%s): %d model calls and %d tool calls answered from the recording", short, r.Name, s.ModelCalls, s.ToolCalls)
	if r.FromStep > 0 {
		fmt.Fprintf(ew, "; from step %d, %d model calls answered live by %s", r.FromStep, s.LiveModelCalls, r.LiveModel)
		if s.LiveToolCalls > 0 {
			fmt.Fprintf(ew, " and %d tool calls run live", s.LiveToolCalls)
		}
	}
	fmt.Fprintln(ew)
	for _, u := range s.Unanswered {
		fmt.Fprintf(ew, "no recorded result for the tool call at %s (the model saw an error)\n", u)
	}
	if d := r.Divergence; d != nil {
		fmt.Fprintln(ew, "DIVERGED:", d.Error()[len("replay diverged at "):])
	} else if r.FromStep > 0 {
		fmt.Fprintf(ew, "no divergence before step %d; the branch ended with %s\n", r.FromStep, r.Termination)
	} else {
		fmt.Fprintf(ew, "no divergence: every request matched the recording and the run ended the same way (%s)\n", r.Termination)
	}
	if r.FromStep > 0 {
		if r.Error != "" {
			fmt.Fprintf(ew, "error: %s\n", r.Error)
		}
		fmt.Fprintf(ew, "answer: %s\n", r.Answer)
		if !r.Trace.IsZero() {
			fmt.Fprintf(ew, "new run: %s (tags %s %s)\n", r.Trace, r.Tags[0], r.Tags[1])
		}
	}
	return ew.err
}

// WriteJSON writes r as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// errWriter keeps the first write error, so text output is written with
// plain Fprintf calls and checked once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
