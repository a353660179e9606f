package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/trace"
)

// Divergence kinds: what differs between the replayed run and the
// recording.
const (
	DivergedMessages  = "messages"     // a model request's messages differ
	DivergedTools     = "tools"        // the tool definitions offered to the model differ
	DivergedToolInput = "tool_input"   // a tool call's name or input differs
	DivergedExtraCall = "extra_call"   // the replay made a call the recording has not
	DivergedMissing   = "missing_call" // the replay did not make a call the recording has
	DivergedOutcome   = "outcome"      // the same calls, but another answer or termination
	// DivergedToolOutcome: the same tool call, another output or error
	// (traces diff only: a replay answers tools from the recording).
	DivergedToolOutcome = "tool_outcome"
)

// A Divergence is the first place where a replayed run differs from its
// recording: the step, the call, what differs and a readable diff.
type Divergence struct {
	Step    int      `json:"step"`           // the loop iteration, from 1 (0: after the run)
	Call    string   `json:"call"`           // which call: "model call 2", "tool call 3 (clock)", or "run end"
	Kind    string   `json:"kind"`           // one of the Diverged… kinds
	Summary string   `json:"summary"`        // one line: what differs
	Diff    []string `json:"diff,omitempty"` // the differences, one per line, "-" recorded and "+" replayed
	Seq     uint64   `json:"seq,omitempty"`  // the recorded record it is about, if any
}

// Error says where the run diverged and how, diff included.
func (d *Divergence) Error() string {
	var b strings.Builder
	b.WriteString("replay diverged at ")
	if d.Step > 0 {
		fmt.Fprintf(&b, "step %d, ", d.Step)
	}
	b.WriteString(d.Call)
	b.WriteString(": ")
	b.WriteString(d.Summary)
	for _, l := range d.Diff {
		b.WriteString("\n  ")
		b.WriteString(l)
	}
	return b.String()
}

// Options configure a Replayer. The zero value replays the whole run
// from the recording.
type Options struct {
	// FromStep, with Live, branches the run: model calls of steps before
	// FromStep are answered from the recording (and compared with it),
	// those of step FromStep and after by Live. 0 replays every step.
	FromStep int
	// Live answers the model calls from FromStep on.
	Live agent.Model
	// LiveTools, if set, runs the tool calls of the live steps that the
	// recording has no answer for (the same tool with the same input).
	// Without it such a call fails with an error that says so.
	LiveTools agent.ToolChain
	// System, if set, is the system prompt the replayed loop uses instead
	// of the recorded one: the comparison expects it in place of the
	// recorded system message.
	System *string
}

// A Replayer answers a run's model and tool calls from a Recording and
// compares each request with the recorded one. Build the loop under test
// with its Model and its ToolChain (or Stub), run it, then call Finish.
// The first difference stops the replay: the call that differs returns a
// *Divergence as its error, and so does every model call after it. A
// Replayer is safe for concurrent use (tools run in parallel) and serves
// one run.
type Replayer struct {
	rec  *Recording
	opts Options

	mu        sync.Mutex
	models    []*Call
	tools     []*Call
	usedTool  []bool
	nextModel int
	step      int // step of the model call answered last
	live      bool
	div       *Divergence
	stats     Stats
}

// Stats count how a replay answered the calls.
type Stats struct {
	ModelCalls     int      `json:"model_calls"`                // answered from the recording
	ToolCalls      int      `json:"tool_calls"`                 // answered from the recording
	LiveModelCalls int      `json:"live_model_calls,omitempty"` // answered by Options.Live
	LiveToolCalls  int      `json:"live_tool_calls,omitempty"`  // run by Options.LiveTools
	Unanswered     []string `json:"unanswered,omitempty"`       // live-step tool calls nothing could answer
}

// New returns a Replayer of rec. Use Load to make rec: a recording with
// problems replays nothing faithfully, and New refuses it.
func New(rec *Recording, o Options) (*Replayer, error) {
	if len(rec.Problems) > 0 {
		return nil, &UnreplayableError{TraceID: rec.TraceID, Problems: rec.Problems}
	}
	if o.FromStep < 0 {
		return nil, fmt.Errorf("replay: FromStep is %d; it is a step number from 1, or 0 to replay every step", o.FromStep)
	}
	if o.FromStep > 0 && o.Live == nil {
		return nil, errors.New("replay: FromStep needs a Live model to answer the steps from there")
	}
	r := &Replayer{rec: rec, opts: o}
	for i := range rec.Calls {
		c := &rec.Calls[i]
		if c.Kind == KindModel {
			r.models = append(r.models, c)
		} else {
			r.tools = append(r.tools, c)
		}
	}
	r.usedTool = make([]bool, len(r.tools))
	return r, nil
}

// Recording returns the recording replayed.
func (r *Replayer) Recording() *Recording { return r.rec }

// Divergence returns the first divergence found so far, or nil.
func (r *Replayer) Divergence() *Divergence {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.div
}

// Stats returns how the calls so far were answered.
func (r *Replayer) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Unanswered = append([]string(nil), s.Unanswered...)
	return s
}

// replayed reports whether step is answered from the recording.
func (r *Replayer) replayed(step int) bool {
	return r.opts.Live == nil || r.opts.FromStep == 0 || step < r.opts.FromStep
}

// diverge keeps d if it is the first divergence and returns the first.
// Parallel tool calls of one step are compared in whatever order they
// run: among their divergences the one of the earliest recorded call wins
// (a call the recording lacks, Seq 0, comes last), so that the report
// does not depend on scheduling.
func (r *Replayer) diverge(d *Divergence) *Divergence {
	if r.div == nil || r.toolStep(r.div) && r.toolStep(d) && r.div.Step == d.Step && d.Seq != 0 && (r.div.Seq == 0 || d.Seq < r.div.Seq) {
		r.div = d
	}
	return r.div
}

// toolStep reports whether d is about a tool call of the current step.
func (r *Replayer) toolStep(d *Divergence) bool {
	return (d.Kind == DivergedToolInput || d.Kind == DivergedExtraCall && strings.HasPrefix(d.Call, "tool")) && d.Step == r.step
}

// Model returns the model of the replayed run: it answers each call with
// the recorded answer after comparing the request with the recorded one,
// or, from Options.FromStep on, passes the call to Options.Live. Its Name
// is the recorded model's (the live model's once live).
func (r *Replayer) Model() agent.Model { return replayModel{r} }

type replayModel struct{ r *Replayer }

func (m replayModel) Name() string {
	r := m.r
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.nextModel < len(r.models) && (r.replayed(r.models[r.nextModel].Step) && !r.live):
		return r.models[r.nextModel].Name
	case r.opts.Live != nil && r.opts.FromStep > 0:
		return r.opts.Live.Name()
	case len(r.models) > 0:
		return r.models[len(r.models)-1].Name
	}
	return "replay"
}

func (m replayModel) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	r := m.r
	r.mu.Lock()
	if r.div != nil {
		r.mu.Unlock()
		return agent.Response{}, r.div
	}
	i := r.nextModel
	step := r.step + 1
	if n := trace.FromContext(ctx).Iteration(); n > 0 {
		step = n // a traced run knows its step
	}
	if i < len(r.models) && !r.live {
		step = r.models[i].Step
	}
	if r.live || !r.replayed(step) {
		// Branch: the recorded calls before the branch must all have been
		// made, or the live model starts from another history.
		if !r.live {
			if d := r.missingBefore(r.opts.FromStep); d != nil {
				r.mu.Unlock()
				return agent.Response{}, d
			}
		}
		r.live = true
		r.nextModel++
		r.step = max(step, r.opts.FromStep)
		r.stats.LiveModelCalls++
		r.mu.Unlock()
		return r.opts.Live.Generate(ctx, req)
	}
	defer r.mu.Unlock()
	if d := r.missingBefore(step); d != nil {
		return agent.Response{}, d
	}
	if i >= len(r.models) {
		var df differ
		df.old, df.new = "recorded", "replayed"
		if i > 0 {
			// Show what the extra request added, so its cause is visible.
			for _, msg := range newMessages(req.Messages) {
				df.add("replayed request adds %s: %s", describe(&msg), shorten(fmt.Sprintf("%q", msg.Content), 80))
			}
		}
		return agent.Response{}, r.diverge(&Divergence{Step: step, Call: fmt.Sprintf("model call %d", i+1), Kind: DivergedExtraCall,
			Summary: fmt.Sprintf("the replayed run asked the model a %s time; the recording has %d model calls", ordinal(i+1), len(r.models)),
			Diff:    df.result()})
	}
	c := r.models[i]
	if d := r.compareRequest(c, req); d != nil {
		return agent.Response{}, r.diverge(d)
	}
	r.nextModel++
	r.step = c.Step
	r.stats.ModelCalls++
	if c.Err != "" {
		return agent.Response{}, errors.New(c.Err)
	}
	resp := c.Response
	resp.ToolCalls = append([]agent.ToolCall(nil), resp.ToolCalls...)
	return resp, nil
}

// newMessages returns the messages after the last assistant message.
func newMessages(msgs []agent.Message) []agent.Message {
	i := len(msgs)
	for i > 0 && msgs[i-1].Role != agent.RoleAssistant {
		i--
	}
	return msgs[i:]
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

// missingBefore returns the divergence for the first recorded call of a
// step before step (a model call, or a tool call not made) that the
// replay skipped, or nil. r.mu is held.
func (r *Replayer) missingBefore(step int) *Divergence {
	for j, t := range r.tools {
		if !r.usedTool[j] && t.Step < step && r.replayed(t.Step) {
			return r.diverge(missing(t, "the replayed run did not make it"))
		}
	}
	return nil
}

// missing is the divergence for recorded call c that the replay did not
// make.
func missing(c *Call, why string) *Divergence {
	d := &Divergence{Step: c.Step, Kind: DivergedMissing, Seq: c.Seq}
	if c.Kind == KindModel {
		d.Call = fmt.Sprintf("model call %d", c.Index)
		d.Summary = fmt.Sprintf("the recording has this call to %s; %s", c.Name, why)
		return d
	}
	d.Call = fmt.Sprintf("tool call %d (%s)", c.Index, c.Name)
	d.Summary = fmt.Sprintf("the recording has this call of %s; %s", c.Name, why)
	d.Diff = []string{"recorded input: " + shorten(string(c.Input), 120)}
	return d
}

// compareRequest compares req with recorded model call c.
func (r *Replayer) compareRequest(c *Call, req agent.Request) *Divergence {
	at := fmt.Sprintf("model call %d", c.Index)
	df := differ{old: "recorded", new: "replayed"}
	// Tools first: the messages of a run whose tools changed would not
	// say why they changed.
	recTools := r.rec.Tools
	switch {
	case c.Request == nil || c.Request.Tools == len(recTools):
		df.tools(recTools, req.Tools, r.rec.DescribedTools)
	case len(req.Tools) != c.Request.Tools:
		// The loop changed its tools during the run: the definitions
		// recorded at its start are not the ones this call saw, and the
		// count is what the record has.
		df.add("the request offers %d tools; the recorded one offered %d", len(req.Tools), c.Request.Tools)
	}
	if len(df.lines) > 0 {
		return &Divergence{Step: c.Step, Call: at, Kind: DivergedTools, Seq: c.Seq,
			Summary: "the tool definitions offered to the model differ", Diff: df.result()}
	}
	if c.Request == nil {
		return nil // Load refuses these; a Recording built by hand may have them
	}
	if h := c.Request.History; h != nil {
		want := h
		if r.opts.System != nil {
			want = withSystem(h, *r.opts.System)
		}
		df.messages(want, req.Messages)
	} else {
		// The recorded history does not add up (the loop rewrote it): the
		// count and the messages added since the previous answer are
		// what can be compared.
		if c.Request.Messages != len(req.Messages) {
			df.add("the request has %d messages in recorded, %d in replayed", c.Request.Messages, len(req.Messages))
		} else {
			df.messages(c.Request.New, newMessages(req.Messages))
		}
	}
	if len(df.lines) > 0 {
		return &Divergence{Step: c.Step, Call: at, Kind: DivergedMessages, Seq: c.Seq,
			Summary: "the model was asked with other messages", Diff: df.result()}
	}
	return nil
}

// withSystem returns msgs with the system prompt replaced by system, as
// agent.ReAct would have started them: no system message for "", one
// added in front when the recorded run had none.
func withSystem(msgs []agent.Message, system string) []agent.Message {
	out := make([]agent.Message, 0, len(msgs)+1)
	if len(msgs) == 0 || msgs[0].Role != agent.RoleSystem {
		if system != "" {
			out = append(out, agent.Message{Role: agent.RoleSystem, Content: system})
		}
		return append(out, msgs...)
	}
	if system != "" {
		out = append(out, agent.Message{Role: agent.RoleSystem, Content: system})
	}
	return append(out, msgs[1:]...)
}

// ToolChain returns tools with the recorded definitions whose calls are
// answered from the recording.
func (r *Replayer) ToolChain() agent.ToolChain {
	return &replayTools{r: r, defs: r.rec.Tools}
}

// Stub returns a ToolChain with the definitions of tools (the tools of
// the code under test, whose definitions may have changed since the
// recording) whose calls are answered from the recording: the tools
// themselves are never called, except through Options.LiveTools.
func (r *Replayer) Stub(tools ...agent.Tool) agent.ToolChain {
	defs := make([]agent.ToolDef, len(tools))
	for i, t := range tools {
		defs[i] = t.Definition()
	}
	return &replayTools{r: r, defs: defs}
}

type replayTools struct {
	r    *Replayer
	defs []agent.ToolDef
}

func (t *replayTools) Definitions() []agent.ToolDef { return t.defs }

func (t *replayTools) Call(ctx context.Context, call agent.ToolCall) (json.RawMessage, error) {
	r := t.r
	r.mu.Lock()
	if r.div != nil && !r.toolStep(r.div) {
		r.mu.Unlock()
		return nil, r.div
	}
	if r.live {
		return r.liveTool(ctx, call) // unlocks
	}
	defer r.mu.Unlock()
	// The call the replayed answer asked for has the recorded id.
	j := -1
	for k, c := range r.tools {
		if !r.usedTool[k] && c.Step == r.step && call.ID != "" && c.ID == call.ID {
			j = k
			break
		}
	}
	if j < 0 {
		j = r.findTool(call, r.step, r.step)
	}
	if j < 0 {
		var df differ
		df.old, df.new = "recorded", "replayed"
		df.add("replayed input: %s", shorten(string(call.Input), 120))
		// Not which of them were made yet: parallel calls come in any order.
		for _, c := range r.tools {
			if c.Step == r.step {
				df.add("recorded at this step: %s %s", c.Name, shorten(string(c.Input), 80))
			}
		}
		return nil, r.diverge(&Divergence{Step: r.step, Call: fmt.Sprintf("tool call (%s)", call.Name), Kind: DivergedExtraCall,
			Summary: fmt.Sprintf("the replayed run called %s, which the recording did not at this step", call.Name), Diff: df.result()})
	}
	c := r.tools[j]
	if c.Name != call.Name || !jsonEqual(c.Input, call.Input) {
		df := differ{old: "recorded", new: "replayed"}
		if c.Name != call.Name {
			df.add("tool: recorded %q, replayed %q", c.Name, call.Name)
		}
		df.json("input", c.Input, call.Input)
		return nil, r.diverge(&Divergence{Step: c.Step, Call: fmt.Sprintf("tool call %d (%s)", c.Index, c.Name), Kind: DivergedToolInput, Seq: c.Seq,
			Summary: fmt.Sprintf("%s was called with another input", c.Name), Diff: df.result()})
	}
	r.usedTool[j] = true
	r.stats.ToolCalls++
	return answer(c)
}

// answer returns recorded tool call c's result.
func answer(c *Call) (json.RawMessage, error) {
	if c.Err != "" {
		return nil, errors.New(c.Err)
	}
	return append(json.RawMessage(nil), c.Output...), nil
}

// findTool returns the first unused recorded call of call's tool with
// call's input, of a step from lo to hi (hi < 0: any), or -1.
func (r *Replayer) findTool(call agent.ToolCall, lo, hi int) int {
	for k, c := range r.tools {
		if !r.usedTool[k] && c.Step >= lo && (hi < 0 || c.Step <= hi) && c.Name == call.Name && jsonEqual(c.Input, call.Input) {
			return k
		}
	}
	return -1
}

// liveTool answers a tool call of a live step: from a recorded call of a
// live step with the same tool and input, else with Options.LiveTools,
// else with an error. r.mu is held; liveTool unlocks it.
func (r *Replayer) liveTool(ctx context.Context, call agent.ToolCall) (json.RawMessage, error) {
	j := r.findTool(call, r.step, r.step)
	if j < 0 {
		j = r.findTool(call, r.opts.FromStep, -1)
	}
	if j >= 0 {
		r.usedTool[j] = true
		r.stats.ToolCalls++
		c := r.tools[j]
		r.mu.Unlock()
		return answer(c)
	}
	if lt := r.opts.LiveTools; lt != nil {
		r.stats.LiveToolCalls++
		r.mu.Unlock()
		return lt.Call(ctx, call)
	}
	what := fmt.Sprintf("step %d: %s %s", r.step, call.Name, shorten(string(call.Input), 120))
	r.stats.Unanswered = append(r.stats.Unanswered, what)
	r.mu.Unlock()
	return nil, fmt.Errorf("replay: the recording has no result for %s with this input, and this replay runs no live tools: only calls made in the recording (same tool, same input) can be answered after the branch", call.Name)
}

// Finish checks the end of the replayed run, whose result is res: a
// divergence found during the run, else a recorded call the replay never
// made, else (when no step was live) an answer or termination other than
// the recorded one. It returns nil when the replay matched the recording.
func (r *Replayer) Finish(res agent.Result) *Divergence {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.div != nil {
		return r.div
	}
	// The earliest recorded call of the replayed steps not made.
	var first *Call
	if r.nextModel < len(r.models) && !r.live {
		if c := r.models[r.nextModel]; r.replayed(c.Step) {
			first = c
		}
	}
	for j, t := range r.tools {
		if r.usedTool[j] || !r.replayed(t.Step) {
			continue
		}
		if first == nil || t.Seq < first.Seq {
			first = t
		}
		break
	}
	if first != nil {
		why := fmt.Sprintf("the replayed run ended (%s) without making it", res.Termination)
		if res.Err != nil {
			why = fmt.Sprintf("the replayed run ended without making it: %s", shorten(res.Err.Error(), 160))
		}
		return r.diverge(missing(first, why))
	}
	if r.live {
		return nil
	}
	df := differ{old: "recorded", new: "replayed"}
	if string(res.Termination) != r.rec.Status {
		df.add("termination: recorded %s, replayed %s", r.rec.Status, res.Termination)
	}
	df.text("answer", r.rec.Answer, res.Answer)
	if len(df.lines) > 0 {
		return r.diverge(&Divergence{Call: "run end", Kind: DivergedOutcome,
			Summary: "the run made the recorded calls but ended differently", Diff: df.result()})
	}
	return nil
}

// IsDivergence reports whether err is, or wraps, a *Divergence, and
// returns it.
func IsDivergence(err error) (*Divergence, bool) {
	var d *Divergence
	ok := errors.As(err, &d)
	return d, ok
}

// ReAct returns a ReAct loop rebuilt from the recording: its system
// prompt (Options.System if set), the Replayer's Model and ToolChain.
// Loupe's own agents (the demo's, any agent.ReAct) replay this way; an
// agent with its own loop builds it with Model and ToolChain or Stub.
func (r *Replayer) ReAct() *agent.ReAct {
	system := r.rec.System
	if r.opts.System != nil {
		system = *r.opts.System
	}
	var tools agent.ToolChain
	if len(r.rec.Tools) > 0 {
		tools = r.ToolChain()
	}
	return &agent.ReAct{Model: r.Model(), Tools: tools, System: system}
}
