package store

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/trace"
)

// Criteria are the trace filters that the commands take as flags, the
// HTTP API as parameters and the MCP server as arguments, typed. They are
// the filters of the query language (ParseQuery) by other means: Filter
// turns them into a Filter and Query narrows a parsed Query with them,
// value by value, never through a query string. The zero value selects
// every trace.
type Criteria struct {
	Name   string // root run name, exact (name:)
	Status string // termination reason, StatusRunning or StatusIncomplete (status:)
	// Since and Until bound the trace's start as since: and until: do: a
	// duration before now (90m, 24h, 7d) or a time (2006-01-02, RFC
	// 3339).
	Since, Until string
	Model        string   // made a call to this model (model:)
	Tool         string   // called this tool (tool:)
	Tags         []string // has every one of these run tags (tag:); "" is ignored
	Errors       bool     // has at least one error (has:errors)
	// MinDuration and MaxDuration bound the trace's duration
	// (min_duration:, max_duration:); 0 or less is no bound.
	MinDuration, MaxDuration time.Duration
	// Types are record types, any of them (type:); "" is ignored. They
	// select records, so only Query carries them; Filter checks them.
	Types []trace.Type
	// Session and User select the traces of one session and of one user
	// (session:, user:), exact.
	Session, User string

	// Scores are conditions on the trace's scores (score:), all of
	// which must hold.
	Scores []ScoreCond
	// Evaluations includes the traces that hold evaluation results
	// (TagEvaluation) in what AgentRuns and AgentRunsQuery select.
	Evaluations bool
}

// Filter returns the filter c describes, relative to now (for Since and
// Until). It is Query(Query{}, now)'s Filter: the errors are the same.
// The evaluation rule is not applied (see AgentRuns).
func (c Criteria) Filter(now time.Time) (Filter, error) {
	q, err := c.Query(Query{}, now)
	return q.Filter, err
}

// Query returns q narrowed by c, relative to now: each criterion is a
// filter of q as if it were written in the query text (name:, since:,
// tag:, type:, has:errors, …), so that both q's filters and c must hold.
// A filter that q already has and that a query takes once (every one but
// tags and types) is an error, as it is in a query text: "query: name:
// given twice; give each filter once". q is not modified.
//
// The criteria are checked as ParseQuery checks a query: values of valid
// UTF-8 without NUL bytes; Since and Until in the forms above; Types
// known (trace.Type.Valid); and at most MaxQueryTerms criteria with at
// most MaxQueryBytes of text together. The result is then checked with
// Query.Validate, as a store would. Every error is a *QueryError, with
// the words of the parser's.
func (c Criteria) Query(q Query, now time.Time) (Query, error) {
	if err := c.check(); err != nil {
		return Query{}, err
	}
	// Appends below must not write into the caller's arrays.
	q.Tags, q.WithoutTags, q.Types = slices.Clip(q.Tags), slices.Clip(q.WithoutTags), slices.Clip(q.Types)
	once := func(key string, set bool) error {
		if set {
			return queryErrorf("query: %s: given twice; give each filter once", key)
		}
		return nil
	}
	// In the order the string path wrote them, so that the first error is
	// the one it gave.
	for _, s := range [...]struct {
		key string
		v   string
		dst *string
	}{{"name", c.Name, &q.Name}, {"status", c.Status, &q.Status}} {
		if s.v == "" {
			continue
		}
		if err := once(s.key, *s.dst != ""); err != nil {
			return Query{}, err
		}
		*s.dst = s.v
	}
	for _, s := range [...]struct {
		key string
		v   string
		dst *time.Time
	}{{"since", c.Since, &q.Since}, {"until", c.Until, &q.Until}} {
		if s.v == "" {
			continue
		}
		if err := once(s.key, !s.dst.IsZero()); err != nil {
			return Query{}, err
		}
		t, err := parseWhen(s.v, now)
		if err != nil {
			return Query{}, queryErrorf("query: %s:%s: %v", s.key, s.v, err)
		}
		*s.dst = t
	}
	for _, s := range [...]struct {
		key string
		v   string
		dst *string
	}{{"model", c.Model, &q.Model}, {"tool", c.Tool, &q.Tool}, {"session", c.Session, &q.Session}, {"user", c.User, &q.User}} {
		if s.v == "" {
			continue
		}
		if err := once(s.key, *s.dst != ""); err != nil {
			return Query{}, err
		}
		*s.dst = s.v
	}
	for _, t := range c.Tags {
		if t != "" {
			q.Tags = append(q.Tags, t)
		}
	}
	for _, t := range c.Types {
		if t == "" {
			continue
		}
		if !t.Valid() {
			return Query{}, queryErrorf("query: type:%s: unknown record type (known: %s)", t, typeList())
		}
		q.Types = append(q.Types, t)
	}
	q.Scores = slices.Clip(q.Scores)
	for _, sc := range c.Scores {
		if err := sc.validate(); err != nil {
			return Query{}, err
		}
		q.Scores = append(q.Scores, sc)
	}
	if c.Errors {
		if err := once("has", q.HasErrors); err != nil {
			return Query{}, err
		}
		q.HasErrors = true
	}
	for _, s := range [...]struct {
		key string
		v   time.Duration
		dst *time.Duration
	}{{"min_duration", c.MinDuration, &q.MinDuration}, {"max_duration", c.MaxDuration, &q.MaxDuration}} {
		if s.v <= 0 {
			continue
		}
		if err := once(s.key, *s.dst != 0); err != nil {
			return Query{}, err
		}
		*s.dst = s.v
	}
	if err := q.Validate(); err != nil {
		return Query{}, err
	}
	return q, nil
}

// check bounds c as ParseQuery bounds a query: at most MaxQueryTerms
// criteria (each tag and type counts), at most MaxQueryBytes of text in
// their values, and text that is valid UTF-8 without NUL bytes.
func (c *Criteria) check() error {
	terms, size := 0, 0
	valid, nul := true, false
	text := func(v string) {
		if v == "" {
			return
		}
		terms++
		size += len(v)
		valid = valid && utf8.ValidString(v)
		nul = nul || strings.IndexByte(v, 0) >= 0
	}
	for _, v := range [...]string{c.Name, c.Status, c.Since, c.Until, c.Model, c.Tool, c.Session, c.User} {
		text(v)
	}
	for _, t := range c.Tags {
		text(t)
	}
	for _, t := range c.Types {
		text(string(t))
	}
	for _, sc := range c.Scores {
		text(sc.Name + sc.Category)
	}
	for _, set := range [...]bool{c.Errors, c.MinDuration > 0, c.MaxDuration > 0} {
		if set {
			terms++
		}
	}
	switch {
	case size > MaxQueryBytes:
		return queryErrorf("query: the filters are %d bytes long, more than the limit of %d", size, MaxQueryBytes)
	case !valid:
		return queryErrorf("query is not valid UTF-8")
	case nul:
		return queryErrorf("query holds a NUL byte")
	case terms > MaxQueryTerms:
		return queryErrorf("query: has more than %d terms, the limit; narrow it down", MaxQueryTerms)
	}
	return nil
}

// The evaluation rule, in one place: the traces that hold evaluation
// results (tagged TagEvaluation, written by loupe eval) are not agent
// runs, and a listing of agent runs (loupe traces ls, GET /api/v1/traces,
// the MCP server's list_traces and search_traces) leaves them out unless
// it is asked for them, with Criteria.Evaluations or with the tag itself
// among the tags it selects (tag:loupe:eval, --tag loupe:eval), which
// lists only them. Filter and Query do not apply the rule: a search of
// records (loupe traces search, GET /api/v1/search), an export and the
// listing of evaluations see every trace their filters select.

// AgentRuns returns the filter of c for a listing of agent runs: c's
// Filter, which leaves out the traces that hold evaluation results unless
// c asks for them (see the evaluation rule above).
func (c Criteria) AgentRuns(now time.Time) (Filter, error) {
	q, err := c.AgentRunsQuery(Query{}, now)
	return q.Filter, err
}

// AgentRunsQuery is Query for a search among agent runs: it leaves out
// the traces that hold evaluation results unless c or q asks for them
// (Evaluations, or TagEvaluation among the tags of q or c).
func (c Criteria) AgentRunsQuery(q Query, now time.Time) (Query, error) {
	q, err := c.Query(q, now)
	if err != nil {
		return Query{}, err
	}
	if !c.Evaluations && !slices.Contains(q.Tags, TagEvaluation) {
		q.WithoutTags = append(q.WithoutTags, TagEvaluation)
	}
	return q, nil
}
