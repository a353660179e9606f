package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/loupe-dev/loupe/trace"
)

// A Checkpoint is what an in-memory checkpointer (`runtime: {checkpointer:
// {type: memory}}`) keeps of a run: its parameters and the result of each
// tool step that completed, in order. Resume replays those results instead
// of calling the tools again, so a run that failed at step 3 goes on at
// step 3. A Checkpoint is a plain value: it can be kept, copied, or encoded
// as JSON; Run builds it as the run goes and does not change it afterwards.
type Checkpoint struct {
	// TraceID is the trace of the run it was taken from.
	TraceID trace.TraceID `json:"trace_id"`
	// File is the pipeline's file.
	File string `json:"file"`
	// Fingerprint identifies the pipeline's steps; Resume refuses a
	// checkpoint of another pipeline.
	Fingerprint string `json:"fingerprint"`
	// Params are the run's parameters.
	Params map[string]any `json:"params"`
	// Steps are the completed tool steps, in the order they ran.
	Steps []CheckpointStep `json:"steps"`
}

// A CheckpointStep is one completed tool step.
type CheckpointStep struct {
	Step   int    `json:"step"`   // its number, from 1, in the order steps ran
	Name   string `json:"name"`   // server.tool
	Result any    `json:"result"` // what the tool returned
}

// LastStep returns the number of the last completed step, 0 if none.
func (c *Checkpoint) LastStep() int {
	if c == nil || len(c.Steps) == 0 {
		return 0
	}
	return c.Steps[len(c.Steps)-1].Step
}

// fingerprint identifies p's step structure: kinds, names, bounds, routes
// and positions.
func fingerprint(p *Pipeline) string {
	var b strings.Builder
	var walk func(steps []Step)
	walk = func(steps []Step) {
		for _, s := range steps {
			switch s := s.(type) {
			case *ToolStep:
				fmt.Fprintf(&b, "tool %s@%s;", s.Name(), s.Pos)
			case *LoopStep:
				fmt.Fprintf(&b, "loop %d@%s{", s.Max, s.Pos)
				walk(s.Steps)
				b.WriteString("}")
			case *BranchStep:
				fmt.Fprintf(&b, "branch %s %s@%s{", s.Router, s.Field, s.Pos)
				walk(s.RouterSteps)
				for _, br := range s.Branches {
					fmt.Fprintf(&b, "%s:", br.Name)
					walk(br.Steps)
				}
				b.WriteString("}")
			}
		}
	}
	walk(p.Steps)
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}
