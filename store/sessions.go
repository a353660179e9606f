package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// A SessionSummary is one session's line in a listing: the runs (traces)
// that carry its id (Summary.Session), and their totals.
type SessionSummary struct {
	ID            string    `json:"session"`
	User          string    `json:"user,omitempty"` // the user of its runs (the greatest, should they differ)
	Runs          int       `json:"runs"`
	First         time.Time `json:"first"`          // the earliest run's start
	Last          time.Time `json:"last"`           // the latest record of its runs
	LastStarted   time.Time `json:"last_started"`   // the latest run's start: the listing's order
	InputTokens   int64     `json:"input_tokens"`   // summed over its runs
	OutputTokens  int64     `json:"output_tokens"`  // summed over its runs
	CostUSD       float64   `json:"cost_usd"`       // summed over the priced model calls of its runs
	UnpricedCalls int       `json:"unpriced_calls"` // model calls of unknown cost, not in CostUSD
	Errors        int       `json:"errors"`         // errors summed over its runs (trace.Stats)
	ErrorRuns     int       `json:"error_runs"`     // runs with an error or a status other than success or running
}

// CostKnown reports whether CostUSD is the session's whole cost.
func (s *SessionSummary) CostKnown() bool { return s.UnpricedCalls == 0 }

// SessionQuery asks for one page of sessions. The zero value asks for the
// first DefaultLimit sessions, newest first.
type SessionQuery struct {
	User   string    // only runs of this user, exact
	Since  time.Time // only runs started at or after
	Until  time.Time // only runs started before
	Limit  int       // page size; 0 means DefaultLimit, at most MaxLimit
	Cursor string    // SessionPage.Next of the previous page; "" for the first
}

// Validate checks q: its User is valid UTF-8 without NUL bytes. The
// error is a *QueryError.
func (q *SessionQuery) Validate() error {
	if !isText(q.User) {
		return queryErrorf("sessions: user %q is not valid UTF-8 text without NUL bytes", q.User)
	}
	return nil
}

// SessionPage is one page of sessions. Next is "" on the last page.
type SessionPage struct {
	Sessions []SessionSummary `json:"sessions"`
	Next     string           `json:"next,omitempty"`
}

// A SessionLister is a Store that lists sessions: the SQLite and
// PostgreSQL backends are. Sessions is safe for concurrent use.
type SessionLister interface {
	// Sessions returns the sessions of the runs q selects (only their
	// runs count in a session's totals), the session whose latest run
	// started last first, one page at a time. Runs without a session are
	// not listed. A bad cursor or user is a *QueryError.
	Sessions(ctx context.Context, q SessionQuery) (SessionPage, error)
}

// ErrNoSessions is wrapped by the error of ListSessions for a store that
// does not list sessions.
var ErrNoSessions = errors.New("this store does not list sessions")

// ListSessions returns a page of st's sessions (SessionLister), or an
// error wrapping ErrNoSessions if st does not list them.
func ListSessions(ctx context.Context, st Store, q SessionQuery) (SessionPage, error) {
	l, ok := st.(SessionLister)
	if !ok {
		return SessionPage{}, fmt.Errorf("store %T: %w", st, ErrNoSessions)
	}
	return l.Sessions(ctx, q)
}

// MaxSessionRuns bounds the runs SessionRuns returns.
const MaxSessionRuns = MaxLimit

// SessionRuns returns the runs of session id in the order they started
// (oldest first), at most MaxSessionRuns of them (the latest, if there
// are more; more reports whether some were left out), evaluation results
// included. It returns an error wrapping ErrNotFound if no stored trace
// belongs to the session. It works over any Store (it lists with
// Filter.Session).
func SessionRuns(ctx context.Context, st Store, id string) (runs []Summary, more bool, err error) {
	if id == "" {
		return nil, false, &QueryError{Err: errors.New("session: the id is empty")}
	}
	f := Filter{Session: id}
	if err := f.Validate(); err != nil {
		return nil, false, err
	}
	for s, err := range Summaries(ctx, st, ListQuery{Filter: f, Limit: MaxLimit}) {
		if err != nil {
			return nil, false, err
		}
		if len(runs) == MaxSessionRuns {
			more = true
			break
		}
		runs = append(runs, s)
	}
	if len(runs) == 0 {
		return nil, false, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	slices.Reverse(runs)
	return runs, more, nil
}

// A Turn is one run of a session read as a turn of the conversation: what
// it was asked, its answer, and the tool calls in between.
type Turn struct {
	Summary Summary     `json:"summary"`
	Input   trace.Value `json:"input,omitempty"`  // the root run.start's input
	Output  trace.Value `json:"output,omitempty"` // the root run.end's output: the answer
	Error   string      `json:"error,omitempty"`  // the root run.end's error
	Tools   []TurnTool  `json:"tools,omitempty"`  // tool calls, nested runs' included, in the order they began
}

// TurnTool is one tool call of a Turn.
type TurnTool struct {
	SpanID   trace.SpanID  `json:"span_id"`
	Name     string        `json:"name"`
	Depth    int           `json:"depth,omitempty"` // nesting of the run that called it; 0 for the root run
	Input    trace.Value   `json:"input,omitempty"`
	Output   trace.Value   `json:"output,omitempty"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
}

// TurnOf reads t as a turn of its session (see Turn).
func TurnOf(t *Trace) Turn {
	turn := Turn{Summary: t.Summary}
	open := map[trace.SpanID]int{} // tool span → index in turn.Tools
	for i := range t.Records {
		r := &t.Records[i]
		switch r.Type {
		case trace.TypeRunStart:
			if r.Depth == 0 && turn.Input == nil {
				turn.Input = r.Input
			}
		case trace.TypeRunEnd:
			if r.Depth == 0 {
				turn.Output, turn.Error = r.Output, r.Error
			}
		case trace.TypeToolStart:
			open[r.SpanID] = len(turn.Tools)
			turn.Tools = append(turn.Tools, TurnTool{SpanID: r.SpanID, Name: r.Name, Depth: r.Depth, Input: r.Input})
		case trace.TypeToolEnd, trace.TypeToolError:
			j, ok := open[r.SpanID]
			if !ok { // an end without its start
				j = len(turn.Tools)
				turn.Tools = append(turn.Tools, TurnTool{SpanID: r.SpanID, Name: r.Name, Depth: r.Depth})
			}
			delete(open, r.SpanID)
			tt := &turn.Tools[j]
			tt.Output, tt.Error, tt.Duration = r.Output, r.Error, r.Duration
			if tt.Input == nil {
				tt.Input = r.Input // a call recorded whole, on its end
			}
		}
	}
	return turn
}

// SummarizeSession totals runs, the summaries of session id's runs, as
// a SessionLister lists it (Last is the latest end of a run: its start
// plus its duration).
func SummarizeSession(id string, runs []Summary) SessionSummary {
	x := SessionSummary{ID: id, Runs: len(runs)}
	for i := range runs {
		r := &runs[i]
		if i == 0 || r.Started.Before(x.First) {
			x.First = r.Started
		}
		if r.Started.After(x.LastStarted) {
			x.LastStarted = r.Started
		}
		if end := r.Started.Add(r.Duration); end.After(x.Last) {
			x.Last = end
		}
		x.User = max(x.User, r.User)
		x.InputTokens = addSat(x.InputTokens, r.InputTokens)
		x.OutputTokens = addSat(x.OutputTokens, r.OutputTokens)
		x.CostUSD += r.CostUSD
		x.UnpricedCalls += r.UnpricedCalls
		x.Errors += r.Errors
		if r.Errors > 0 || r.Status != string(trace.TerminationSuccess) && r.Status != StatusRunning {
			x.ErrorRuns++
		}
	}
	return x
}

// SessionView is one session read as a conversation (SessionTurns): what
// GET /api/v1/sessions/{id} and loupe sessions show --json return.
type SessionView struct {
	Session SessionSummary `json:"session"`
	Turns   []Turn         `json:"turns"`          // the last runs, oldest first
	More    bool           `json:"more,omitempty"` // the session has more than MaxSessionRuns runs
}

// MaxSessionTurns bounds the turns SessionTurns reads.
const MaxSessionTurns = 200

// SessionTurns returns session id's totals (SummarizeSession over its
// runs, at most MaxSessionRuns of them; more reports whether there are
// more still) and its last `last` runs (at most MaxSessionTurns; 0 or
// less means MaxSessionTurns) as turns, in the order they started. A run
// deleted while they are read is left out. It returns an error wrapping
// ErrNotFound if no stored trace belongs to the session.
func SessionTurns(ctx context.Context, st Store, id string, last int) (sum SessionSummary, turns []Turn, more bool, err error) {
	if last <= 0 || last > MaxSessionTurns {
		last = MaxSessionTurns
	}
	runs, more, err := SessionRuns(ctx, st, id)
	if err != nil {
		return SessionSummary{}, nil, false, err
	}
	for _, s := range runs[max(0, len(runs)-last):] {
		t, err := st.Trace(ctx, s.ID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return SessionSummary{}, nil, false, err
		}
		turns = append(turns, TurnOf(t))
	}
	return SummarizeSession(id, runs), turns, more, nil
}
