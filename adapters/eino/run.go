package einotrace

import (
	"sync"

	"github.com/cloudwego/eino/schema"

	"github.com/loupe-dev/loupe/trace"
)

// A run is a Loupe run the Handler started for a graph (or for a
// component called on its own). It ends when its end was asked for and no
// stream of it, or of a run nested in it, is still being read.
type run struct {
	h      *Handler
	ec     *trace.ExecutionContext
	parent *run // the Handler's run it is nested in; nil for a root run or one nested in a foreign run
	outer  bool // counted in h.busy until it ends

	mu      sync.Mutex
	pending int // streams being read in it or in runs nested in it
	endReq  bool
	ended   bool
	result  trace.Value
	err     error
	answer  *schema.Message // recorded as a message record at the end
	tools   map[string]bool // tool.discovered already recorded

	modelStreams counter // model calls' streams being read
}

// hold keeps r and the runs around it from ending until release.
func (r *run) hold() {
	for x := r; x != nil; x = x.parent {
		x.mu.Lock()
		x.pending++
		x.mu.Unlock()
	}
}

// release undoes hold, ending the runs whose end was waiting for it,
// innermost first.
func (r *run) release() {
	for x := r; x != nil; x = x.parent {
		x.mu.Lock()
		if x.pending > 0 {
			x.pending--
		}
		fire := x.pending == 0 && x.endReq && !x.ended
		if fire {
			x.ended = true
		}
		x.mu.Unlock()
		if fire {
			x.finish()
		}
	}
}

// requestEnd asks r to end with result or err: now, or once its streams
// have been read. Only the first request counts.
func (r *run) requestEnd(result trace.Value, err error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.endReq || r.ended {
		r.mu.Unlock()
		return
	}
	r.endReq, r.result, r.err = true, result, err
	fire := r.pending == 0
	if fire {
		r.ended = true
	}
	r.mu.Unlock()
	if fire {
		r.finish()
	}
}

// finish records the run's end. As Loupe's Executor does, an error is the
// termination's (run.end's error and status), not a separate error
// record.
func (r *run) finish() {
	defer func() {
		if r.outer {
			r.h.busyDone()
		}
	}()
	r.mu.Lock()
	answer := r.answer
	r.mu.Unlock()
	if answer != nil {
		r.ec.Message(roleOf(answer), trace.Text(textOf(answer)))
	}
	if r.err != nil {
		r.ec.SetTermination(trace.ReasonFor(r.err), r.err)
	}
	r.ec.End(r.result, nil)
}

// finishWith ends a graph's run with its output. A message output is
// also recorded as a message record, as Loupe's ReAct loop records its
// answer, when the run ends: after the model call that wrote it, which
// may still be being read.
func (r *run) finishWith(output any, err error) {
	var result trace.Value
	if err == nil {
		switch m := output.(type) {
		case *schema.Message:
			if m != nil {
				result = responseValue(m)
				r.mu.Lock()
				r.answer = m
				r.mu.Unlock()
			}
		default:
			result = encode(output)
		}
	}
	r.requestEnd(result, err)
}

// recordInput records a graph's input messages as message records; for a
// nested run, whose child.spawn record has no input, any other input is a
// custom "eino.input" record.
func (r *run) recordInput(input any, nested bool) {
	switch in := input.(type) {
	case nil:
	case []*schema.Message:
		for _, m := range in {
			if m != nil {
				r.ec.Message(roleOf(m), trace.Text(textOf(m)))
			}
		}
	case *schema.Message:
		if in != nil {
			r.ec.Message(roleOf(in), trace.Text(textOf(in)))
		}
	default:
		if nested {
			r.ec.Custom("eino.input", encode(input))
		}
	}
}

// discovered reports whether tool name was already recorded as
// discovered in r, and marks it so.
func (r *run) discovered(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools[name] {
		return true
	}
	if r.tools == nil {
		r.tools = make(map[string]bool)
	}
	r.tools[name] = true
	return false
}
