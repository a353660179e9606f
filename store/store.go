// Package store defines where Loupe keeps trace records and how they are
// queried: the Store interface every backend implements, the query types,
// the search query language (ParseQuery), the views derived from a trace's
// records (span tree, memory pool) and a trace.Sink that writes into a
// Store.
//
// Backends live in sub-packages (store/sqlite, store/postgres) and register
// themselves with Register; Open picks one from a DSN. Import
// github.com/loupe-dev/loupe/store/backends for all of them.
//
// # Record identity
//
// A record is identified by its trace id and its Seq, which the recorder
// makes unique and strictly increasing within a trace (child runs share
// their parent's counter). Appending a record whose (trace id, seq) is
// already stored does nothing, whatever its other fields: the first write
// wins. That makes retries and re-imports safe. Records with a zero trace
// id, a zero span id, a zero seq, an unknown type or numbers out of range
// (ValidateRecord) are rejected with a *RecordError naming the record; the
// batch they came in is not stored. Records from outside the process go
// through Sanitize first, which repairs and bounds their text.
//
// # Queries
//
// A query that does not parse, that goes beyond the limits
// (MaxQueryTerms, MaxQueryBytes, MaxFilterIDs) or whose page cursor is not
// one the store handed out is refused with a *QueryError, before any SQL
// is built: the caller's fault, not the store's. The sums a store reports
// (tokens, costs, durations, lost records) never wrap: they stop at
// math.MaxInt64 (costs at math.MaxFloat64), and are never negative.
//
// # The query layer
//
// Which traces a command, an HTTP handler or an MCP tool means is answered
// here, once, over any Store: Resolve turns an id or a unique id prefix
// into a trace id; Criteria, the filters as typed values, become a Filter
// (Criteria.Filter) or narrow a parsed Query (Criteria.Query); the
// evaluation rule, that a listing of agent runs leaves out the traces of
// evaluation results unless asked for, is Criteria.AgentRuns and
// Criteria.AgentRunsQuery; and Summaries and SearchTraces walk the pages
// of a listing or of a search's traces. The front ends (loupe traces, the
// HTTP API of package server, the MCP server) read their parameters into
// these and write the answers.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// A Store keeps trace records and answers queries over them. All methods are
// safe for concurrent use by multiple goroutines. Records and slices passed
// in are not retained; everything returned is owned by the caller.
type Store interface {
	// Append stores recs in one transaction and returns how many were new.
	// It is idempotent by record identity (trace id + seq): records already
	// stored are skipped. When Append returns nil the records are durable
	// against the writing process being killed. A batch containing an
	// invalid record is rejected whole with a *RecordError.
	Append(ctx context.Context, recs []trace.Record) (added int, err error)

	// Trace returns one trace with its records in seq order and the views
	// derived from them. It returns an error wrapping ErrNotFound if the
	// store holds no record of id.
	Trace(ctx context.Context, id trace.TraceID) (*Trace, error)

	// List returns summaries of the traces matching q, newest (latest
	// start) first, one page at a time. A query beyond the limits
	// (ListQuery.Validate) or with a bad cursor is refused with a
	// *QueryError.
	List(ctx context.Context, q ListQuery) (ListPage, error)

	// Search returns the records matching q's text and filters, most
	// recently stored first (for records appended as they happen, newest
	// first), each hit saying where the text matched. A query beyond the
	// limits (Query.Validate) or with a bad cursor is refused with a
	// *QueryError.
	Search(ctx context.Context, q Query) (SearchPage, error)

	// Export yields every record of the traces matching f, trace by trace
	// (oldest trace first) and in seq order within a trace, without
	// holding them all in memory. Iteration stops at the first error,
	// which is yielded with a zero Record; a filter beyond the limits
	// (Filter.Validate) yields a *QueryError.
	Export(ctx context.Context, f Filter) iter.Seq2[trace.Record, error]

	// Delete removes the given traces and all their records and returns
	// how many traces existed.
	Delete(ctx context.Context, ids ...trace.TraceID) (int, error)

	// Prune removes whole traces by age or count (see PrunePolicy) and
	// reports what it removed.
	Prune(ctx context.Context, p PrunePolicy) (PruneResult, error)

	// Aggregate summarizes the traces that started in [since, until); a
	// zero bound is open.
	Aggregate(ctx context.Context, since, until time.Time) (Aggregates, error)

	// Close releases the store's resources. Calls after Close fail.
	Close() error
}

// ErrNotFound is wrapped by errors for traces that are not in the store.
var ErrNotFound = errors.New("not found")

// RecordError rejects one record of a batch passed to Append.
type RecordError struct {
	Index   int           // position in the batch
	TraceID trace.TraceID // the record's trace id (may be zero)
	Seq     uint64        // the record's seq (may be zero)
	Type    trace.Type
	Field   string // the field at fault as the record's JSON names it ("seq", "usage.cost_usd"), "" if not one field
	Err     error
}

// Error says which record was rejected, why, and that the batch was not stored.
func (e *RecordError) Error() string {
	return fmt.Sprintf("record %d of batch (trace %s seq %d type %q): %v; nothing in this batch was stored",
		e.Index, e.TraceID, e.Seq, e.Type, e.Err)
}

// Unwrap returns the reason the record was rejected.
func (e *RecordError) Unwrap() error { return e.Err }

// The ranges of a record's numbers that ValidateRecord accepts. They are
// far beyond what a real run reports, and small enough that the sums a
// store keeps of them (per trace, per model, per tool, over a time range)
// stay within their types: 2^23 (over 8 million) counts of MaxTokens still
// sum within an int64, and a store's sums stop at math.MaxInt64 (costs at
// math.MaxFloat64) rather than wrap, whatever was stored before these
// checks. Numbers are also never negative.
const (
	// MaxTokens bounds each token count of a record's Usage (input,
	// output, cached, reasoning): 2^40, about 1.1 trillion.
	MaxTokens = 1 << 40
	// MaxCostUSD bounds a record's Usage.CostUSD: a billion dollars for
	// one call. NaN and infinities are refused too: JSON cannot hold them.
	MaxCostUSD = 1e9
	// MaxRecordDuration bounds a record's Duration: ten years (of 365
	// days).
	MaxRecordDuration = 10 * 365 * 24 * time.Hour
	// MaxIteration bounds a record's Iteration: the largest 32-bit
	// integer, so that every system a record is exported to can hold it.
	MaxIteration = math.MaxInt32
	// MaxDepth bounds a record's Depth, the nesting of runs: 65536.
	MaxDepth = 1 << 16
)

// ValidateRecord checks what a store needs of a record: non-zero trace id,
// span id and seq, a known type, a time (and a start, the time minus the
// duration) that nanosecond timestamps hold, a version this build reads,
// numbers within their ranges (MaxTokens, MaxCostUSD,
// MaxRecordDuration, MaxIteration, MaxDepth), and a Session and User of
// at most MaxSessionBytes of valid UTF-8 without NUL bytes (ids that
// stores index), so that every record a store
// accepts can be read back (trace.DecodeRecord) and summed. Backends call
// it on every record before storing a batch.
//
// The error is a *RecordError whose Field is the field at fault as the
// record's JSON names it ("trace_id", "usage.input_tokens",
// "duration_ns", …), and whose Err's message begins with that name and a
// space (except for an unknown type: "unknown record type …"), e.g.
//
//	usage.input_tokens 9223372036854775807 is out of range (0 to 1099511627776)
//
// ValidateRecord checks numbers and identity, not text: Sanitize repairs
// and bounds a record's strings and values, and callers that take records
// from outside the process call it first.
func ValidateRecord(i int, r *trace.Record) error {
	if field, err := checkRecord(r); err != nil {
		return &RecordError{Index: i, TraceID: r.TraceID, Seq: r.Seq, Type: r.Type, Field: field, Err: err}
	}
	return nil
}

// checkRecord returns the field at fault in r and why, or "", nil.
func checkRecord(r *trace.Record) (field string, err error) {
	switch {
	case r.TraceID.IsZero():
		return "trace_id", errors.New("trace_id is zero; every record needs a trace id")
	case r.SpanID.IsZero():
		return "span_id", errors.New("span_id is zero; every record needs a span id")
	case r.Seq == 0:
		return "seq", errors.New("seq is zero; seq numbers start at 1 and identify a record within its trace")
	case !r.Type.Valid():
		return "type", fmt.Errorf("unknown record type %q", r.Type)
	case r.Seq > math.MaxInt64:
		return "seq", fmt.Errorf("seq %d is too large (at most %d)", r.Seq, int64(math.MaxInt64))
	case r.Time.IsZero():
		return "time", errors.New("time is zero")
	case r.Time.Year() < 1678 || r.Time.Year() > 2261:
		return "time", fmt.Errorf("time %s is outside the years 1678-2261 that nanosecond timestamps hold", r.Time.Format(time.RFC3339))
	case r.V < 0 || r.V > trace.Version:
		return "v", fmt.Errorf("v %d is out of range (0 to %d; 0 means %d)", r.V, trace.Version, trace.Version)
	}
	u := &r.Usage
	for _, f := range [...]struct {
		name   string
		v, max int64
	}{
		{"iteration", int64(r.Iteration), MaxIteration},
		{"depth", int64(r.Depth), MaxDepth},
		{"duration_ns", int64(r.Duration), int64(MaxRecordDuration)},
		{"usage.input_tokens", u.InputTokens, MaxTokens},
		{"usage.output_tokens", u.OutputTokens, MaxTokens},
		{"usage.cached_tokens", u.CachedTokens, MaxTokens},
		{"usage.reasoning_tokens", u.ReasoningTokens, MaxTokens},
	} {
		if f.v < 0 || f.v > f.max {
			return f.name, fmt.Errorf("%s %d is out of range (0 to %d)", f.name, f.v, f.max)
		}
	}
	switch {
	case !(u.CostUSD >= 0 && u.CostUSD <= MaxCostUSD): // NaN fails both
		return "usage.cost_usd", fmt.Errorf("usage.cost_usd %v is out of range (0 to %v)", u.CostUSD, float64(MaxCostUSD))
	case u.CostUnknown && u.CostUSD != 0:
		return "usage.cost_unknown", fmt.Errorf("usage.cost_unknown is true but cost_usd is %v; a call's cost is either known (cost_usd) or unknown (cost_unknown), drop one", u.CostUSD)
	case r.Start().Year() < 1678:
		return "duration_ns", fmt.Errorf("duration_ns %d puts the start (time minus duration) before the year 1678, which nanosecond timestamps cannot hold", int64(r.Duration))
	}
	for _, f := range [...]struct{ name, v string }{{"session", r.Session()}, {"user", r.User()}} {
		if len(f.v) > MaxSessionBytes || !isText(f.v) {
			return f.name, fmt.Errorf("%s is %d bytes or not valid UTF-8 without NUL bytes; it must be an id of at most %d bytes (trace.BoundID makes one)", f.name, len(f.v), MaxSessionBytes)
		}
	}
	return "", nil
}

// StatusRunning is the Status of a trace whose root run.end has not been
// stored and whose last record is recent (see Options.StaleAfter): it is
// probably still running.
const StatusRunning = "running"

// StatusIncomplete is the Status of a trace whose root run.end has not been
// stored and that has been silent for longer than Options.StaleAfter: its
// process most likely died, and the trace will not be completed.
const StatusIncomplete = "incomplete"

// DefaultStaleAfter is the Options.StaleAfter a store uses when none is set.
const DefaultStaleAfter = 10 * time.Minute

// Options are the settings a store applies when it answers queries. The
// zero value means the defaults.
type Options struct {
	// StaleAfter is how long a trace without its root run.end may stay
	// silent (no record later than that) before it is reported as
	// StatusIncomplete rather than StatusRunning. 0 means
	// DefaultStaleAfter; a negative value never marks a trace stale.
	StaleAfter time.Duration
}

// StaleCutoff returns the time before which a trace's last record makes
// it stale, as of now. ok is false when StaleAfter is negative: traces
// never go stale.
func (o Options) StaleCutoff(now time.Time) (cutoff time.Time, ok bool) {
	d := o.StaleAfter
	if d == 0 {
		d = DefaultStaleAfter
	}
	if d < 0 {
		return time.Time{}, false
	}
	return now.Add(-d), true
}

// Configurable is implemented by stores whose Options can be changed after
// Open (the SQLite and PostgreSQL backends). SetOptions is safe to call
// concurrently with queries; queries started after it returns use o.
type Configurable interface {
	SetOptions(o Options)
}

// Configure applies o to s, or returns an error if s's backend does not
// take Options.
func Configure(s Store, o Options) error {
	c, ok := s.(Configurable)
	if !ok {
		return fmt.Errorf("store %T does not take options (such as StaleAfter)", s)
	}
	c.SetOptions(o)
	return nil
}

// MaxLostCount bounds what one marker can count (LostCount), so that 2^23
// markers still sum within an int64 (a store's sums stop at
// math.MaxInt64 beyond).
const MaxLostCount = 1 << 40

// LostCount returns the number of records a trace.TypeDropped marker says
// were lost: its Output's "count", at most MaxLostCount. A marker whose
// count is missing, not a positive integer or unreadable still says
// something was lost, and counts 1. Records of other types count 0.
func LostCount(r *trace.Record) int64 {
	if r.Type != trace.TypeDropped {
		return 0
	}
	var v struct {
		Count json.RawMessage `json:"count"`
	}
	if err := json.Unmarshal(r.Output, &v); err != nil {
		return 1
	}
	n, err := strconv.ParseInt(string(v.Count), 10, 64)
	if err != nil || n <= 0 {
		return 1
	}
	return min(n, MaxLostCount)
}

// Summary is one trace's line in a listing. Its counters are the
// trace.Stats of the trace's stored records.
type Summary struct {
	ID            trace.TraceID `json:"trace_id"`
	Name          string        `json:"name"`              // the root run's name
	Started       time.Time     `json:"started"`           // the earliest record's time
	Duration      time.Duration `json:"duration_ns"`       // the root run.end's duration, or last record minus Started while running
	Status        string        `json:"status"`            // the termination reason of the root run, or StatusRunning or StatusIncomplete
	Lost          int64         `json:"lost_records"`      // records the recorder lost (summed over trace.TypeDropped markers)
	Incomplete    bool          `json:"incomplete"`        // records were lost, or the run never ended (StatusIncomplete)
	Records       int           `json:"records"`           // records stored
	Iterations    int           `json:"iterations"`        // steps of the root loop and its children
	ModelCalls    int           `json:"model_calls"`       // model.call records
	ToolCalls     int           `json:"tool_calls"`        // tool.end and tool.error records
	InputTokens   int64         `json:"input_tokens"`      // summed over model calls
	OutputTokens  int64         `json:"output_tokens"`     // summed over model calls
	CostUSD       float64       `json:"cost_usd"`          // summed over the priced model calls
	UnpricedCalls int           `json:"unpriced_calls"`    // model calls of unknown cost (no price), not in CostUSD; see CostKnown
	Errors        int           `json:"errors"`            // as counted by trace.Stats
	Tags          []string      `json:"tags,omitempty"`    // the root run's tags, sorted
	Session       string        `json:"session,omitempty"` // the session: that of the first stored record carrying one (trace.RunInfo.Session)
	User          string        `json:"user,omitempty"`    // the user: that of the first stored record carrying one
	Models        []string      `json:"models,omitempty"`  // models called, sorted
	Tools         []string      `json:"tools,omitempty"`   // tools called, sorted
}

// Tokens returns input plus output tokens, at most math.MaxInt64.
func (s *Summary) Tokens() int64 {
	in, out := max(s.InputTokens, 0), max(s.OutputTokens, 0)
	if in > math.MaxInt64-out {
		return math.MaxInt64
	}
	return in + out
}

// CostKnown reports whether CostUSD is the trace's whole cost: no model
// call is of unknown cost. When false, CostUSD is a lower bound and views
// show the cost as unknown (price.Format), never as $0.
func (s *Summary) CostKnown() bool { return s.UnpricedCalls == 0 }

// Trace is one stored trace: its records and what is derived from them.
type Trace struct {
	Summary Summary
	Records []trace.Record // in seq order
	Spans   []*Span        // the span tree's roots (see BuildSpans)
	Stats   trace.Stats    // trace.StatsOf(Records)
	Memory  Memory         // the memory pool rebuilt from memory.set records
}

// TagEvaluation is the run tag of the traces that hold evaluation results
// (written by loupe eval), as opposed to agent runs. Listings of agent runs
// leave them out unless asked for (Filter.WithoutTags).
const TagEvaluation = "loupe:eval"

// Filter selects traces. The zero Filter selects every trace; each set
// field narrows the selection (all must hold).
type Filter struct {
	IDs         []trace.TraceID // only these traces
	IDPrefix    string          // trace ids starting with these hex digits (1 to 32; any case)
	Name        string          // root run name, exact
	Status      string          // termination reason (success, error, …), StatusRunning or StatusIncomplete
	Since       time.Time       // started at or after
	Until       time.Time       // started before
	Tags        []string        // has every one of these tags (exact, e.g. "env:ci")
	WithoutTags []string        // has none of these tags (e.g. TagEvaluation, to list agent runs only)
	Model       string          // made a call to this model
	Tool        string          // called this tool
	MinDuration time.Duration   // lasted at least
	MaxDuration time.Duration   // lasted at most (0: no bound)
	HasErrors   bool            // has at least one error
	Session     string          // belongs to this session, exact (Summary.Session)
	User        string          // is this user's, exact (Summary.User)
	Scores      []ScoreCond     // has a score satisfying each (Scorer backends)
}

// PrefixRange returns the trace ids a hex prefix covers, as the inclusive
// range [lo, hi], or an error if prefix is not 1 to 32 hex digits. Backends
// use it to answer Filter.IDPrefix with an index range scan.
func PrefixRange(prefix string) (lo, hi trace.TraceID, err error) {
	if len(prefix) == 0 || len(prefix) > 32 {
		return lo, hi, fmt.Errorf("trace id prefix %q: want 1 to 32 hex digits", prefix)
	}
	for i := range 32 {
		var l, h byte = 0, 15
		if i < len(prefix) {
			v, ok := hexDigit(prefix[i])
			if !ok {
				return trace.TraceID{}, trace.TraceID{}, fmt.Errorf("trace id prefix %q: %q is not a hex digit", prefix, prefix[i:i+1])
			}
			l, h = v, v
		}
		lo[i/2] |= l << (4 * (1 - i%2))
		hi[i/2] |= h << (4 * (1 - i%2))
	}
	return lo, hi, nil
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// DefaultLimit is the page size of List and Search when none is given;
// MaxLimit bounds it.
const (
	DefaultLimit = 50
	MaxLimit     = 10000
)

// ListQuery asks for one page of trace summaries.
type ListQuery struct {
	Filter
	Limit  int    // page size; 0 means DefaultLimit
	Cursor string // ListPage.Next from the previous page; "" for the first
	Offset int    // traces to skip (ignored when Cursor is set); not negative
}

// ListPage is one page of List. Next is "" on the last page, and set only
// when more traces follow: a page that is full but last has no Next.
type ListPage struct {
	Traces []Summary `json:"traces"`
	Next   string    `json:"next,omitempty"`
}

// Query is a search: text and filters. Build one with ParseQuery or by
// hand. Text terms are matched as whole words (case-insensitive) within one
// record's name, error, input, output or thinking; every word and phrase
// must match the same record. The trace-level filters in Filter select
// which traces' records are searched; Types selects record types.
type Query struct {
	Filter
	Words   []string     // words that must all occur
	Phrases []string     // phrases that must all occur, words adjacent and in order
	Types   []trace.Type // record types, any of them; none means all
	Limit   int          // page size; 0 means DefaultLimit
	Cursor  string       // SearchPage.Next from the previous page
}

// HasText reports whether q has words or phrases to match.
func (q *Query) HasText() bool { return len(q.Words) > 0 || len(q.Phrases) > 0 }

// Hit is one record that matched a search.
type Hit struct {
	TraceID   trace.TraceID `json:"trace_id"`
	TraceName string        `json:"trace_name"`
	Seq       uint64        `json:"seq"`
	Time      time.Time     `json:"time"`
	Type      trace.Type    `json:"type"`
	Name      string        `json:"name,omitempty"`
	Field     string        `json:"field,omitempty"`   // name, error, input, output or thinking; "" when the query has no text
	Snippet   string        `json:"snippet,omitempty"` // the text around the match
}

// SearchPage is one page of Search. Next is "" on the last page.
type SearchPage struct {
	Hits []Hit  `json:"hits"`
	Next string `json:"next,omitempty"`
}

// PrunePolicy says which traces Prune removes: those that started before
// OlderThan ago, and those beyond the KeepNewest most recent. Zero fields
// are not applied; a zero policy removes nothing.
type PrunePolicy struct {
	OlderThan  time.Duration
	KeepNewest int
	Now        time.Time // the reference for OlderThan; zero means time.Now()
	// Limit, if positive, removes at most this many traces (the oldest
	// first) in one call, so that a large removal can be done in short
	// transactions between which others may write.
	Limit int
}

// PruneResult reports what Prune removed.
type PruneResult struct {
	Traces  []trace.TraceID `json:"traces"`
	Records int             `json:"records"`
}

// ToolAggregate counts one tool's calls.
type ToolAggregate struct {
	Calls  int           `json:"calls"`
	Errors int           `json:"errors"`
	Total  time.Duration `json:"total_ns"`
}

// Aggregates summarize the traces in a time range.
type Aggregates struct {
	Traces      int                         `json:"traces"`
	Records     int                         `json:"records"`
	ErrorTraces int                         `json:"error_traces"` // traces with errors or a status other than success/running
	ErrorRate   float64                     `json:"error_rate"`   // ErrorTraces / Traces, 0 when there are none
	Incomplete  int                         `json:"incomplete"`   // traces that lost records or whose run never ended (Summary.Incomplete)
	Lost        int64                       `json:"lost_records"` // records lost, summed over the traces
	ByModel     map[string]trace.ModelStats `json:"by_model"`
	ByTool      map[string]ToolAggregate    `json:"by_tool"`
}
