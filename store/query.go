package store

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/trace"
)

// QueryKeys lists the filters ParseQuery understands, in the order
// Query.String writes them.
var QueryKeys = []string{"id", "name", "status", "since", "until", "tag", "model", "tool", "type", "min_duration", "max_duration", "has", "session", "user", "score"}

// The limits of a query, which ParseQuery and the stores (through
// Filter.Validate and Query.Validate) enforce before any SQL is built:
// each term of a query is a condition of the statement a store runs, and
// databases bound how many they take (SQLite's expression depth, for one).
const (
	// MaxQueryTerms bounds the terms of a search query (filters, words
	// and phrases), and each list of a Filter or Query that becomes one
	// condition per element: Tags, WithoutTags, Types, and Words and
	// Phrases together.
	MaxQueryTerms = 64
	// MaxQueryBytes bounds the length of a search query, and the text of
	// a Query (its Words and Phrases together).
	MaxQueryBytes = 4 << 10
	// MaxFilterIDs bounds Filter.IDs, which become one list of
	// parameters.
	MaxFilterIDs = MaxLimit
)

// A QueryError is a query that a store refuses because of the query
// itself, not because the store failed: it does not parse, it goes beyond
// a limit (MaxQueryTerms, MaxQueryBytes, MaxFilterIDs), or its page cursor
// is not one the store handed out. ParseQuery returns one for every
// error, and List, Search and Export return one for such a query, so
// that a server can answer it as the client's fault (HTTP 400) with
// errors.As rather than by matching messages.
type QueryError struct {
	Err error // what is wrong with the query
}

// Error returns Err's message.
func (e *QueryError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *QueryError) Unwrap() error { return e.Err }

// queryErrorf returns a *QueryError with a formatted message.
func queryErrorf(format string, args ...any) error {
	return &QueryError{Err: fmt.Errorf(format, args...)}
}

// Validate checks that f is within the limits a store answers: at most
// MaxFilterIDs IDs, at most MaxQueryTerms Tags and as many WithoutTags,
// and text (names, tags) that is valid UTF-8 without NUL bytes, which
// PostgreSQL cannot compare. The error is a *QueryError naming the limit
// or the field. Stores call it before they build a query; a caller may
// call it to check a filter early.
func (f *Filter) Validate() error {
	switch {
	case len(f.IDs) > MaxFilterIDs:
		return queryErrorf("filter: %d trace ids are more than the limit of %d", len(f.IDs), MaxFilterIDs)
	case len(f.Tags) > MaxQueryTerms:
		return queryErrorf("filter: %d tags are more than the limit of %d", len(f.Tags), MaxQueryTerms)
	case len(f.WithoutTags) > MaxQueryTerms:
		return queryErrorf("filter: %d excluded tags are more than the limit of %d", len(f.WithoutTags), MaxQueryTerms)
	}
	for _, v := range [...]struct{ name, s string }{{"name", f.Name}, {"status", f.Status}, {"model", f.Model}, {"tool", f.Tool}, {"id prefix", f.IDPrefix},
		{"session", f.Session}, {"user", f.User}} {
		if !isText(v.s) {
			return queryErrorf("filter: %s %q is not valid UTF-8 text without NUL bytes", v.name, v.s)
		}
	}
	if len(f.Scores) > MaxQueryTerms {
		return queryErrorf("filter: %d score conditions are more than the limit of %d", len(f.Scores), MaxQueryTerms)
	}
	for _, c := range f.Scores {
		if err := c.validate(); err != nil {
			return err
		}
	}
	for _, tags := range [...][]string{f.Tags, f.WithoutTags} {
		for _, t := range tags {
			if !isText(t) {
				return queryErrorf("filter: tag %q is not valid UTF-8 text without NUL bytes", t)
			}
		}
	}
	return nil
}

// isText reports whether s is valid UTF-8 without NUL bytes.
func isText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// Validate checks q's Filter (Filter.Validate) and its Offset, which must
// not be negative. The error is a *QueryError.
func (q *ListQuery) Validate() error {
	if q.Offset < 0 {
		return queryErrorf("offset %d is negative", q.Offset)
	}
	return q.Filter.Validate()
}

// Validate checks that q is within the limits a store answers: its
// Filter's (Filter.Validate), at most MaxQueryTerms Words and Phrases
// together and MaxQueryTerms Types, and at most MaxQueryBytes of text in
// its Words and Phrases. The error is a *QueryError naming the limit.
func (q *Query) Validate() error {
	if err := q.Filter.Validate(); err != nil {
		return err
	}
	if n := len(q.Words) + len(q.Phrases); n > MaxQueryTerms {
		return queryErrorf("query: %d words and phrases are more than the limit of %d", n, MaxQueryTerms)
	}
	if len(q.Types) > MaxQueryTerms {
		return queryErrorf("query: %d record types are more than the limit of %d", len(q.Types), MaxQueryTerms)
	}
	n := 0
	for _, w := range q.Words {
		n += len(w)
	}
	for _, p := range q.Phrases {
		n += len(p)
	}
	if n > MaxQueryBytes {
		return queryErrorf("query: its words and phrases are %d bytes long, more than the limit of %d", n, MaxQueryBytes)
	}
	return nil
}

// ParseQuery parses a search query relative to the current time. See
// ParseQueryAt.
func ParseQuery(s string) (Query, error) { return ParseQueryAt(s, time.Now()) }

// ParseQueryAt parses a search query such as
//
//	tool:search type:tool.error status:error model:gpt-4o tag:env:ci since:24h "exact phrase" free words
//
// Terms are separated by spaces. A term key:value is a filter:
//
//	id:HEX              trace id (repeatable)
//	name:NAME           root run name
//	status:REASON       termination reason (success, error, …), running, or incomplete (not ended, silent longer than Options.StaleAfter)
//	since:WHEN until:WHEN  trace start bounds; WHEN is a duration before now
//	                    (90m, 24h, 7d) or a time (2006-01-02, RFC 3339)
//	tag:TAG             run tag, exact (repeatable; all must match)
//	model:NAME tool:NAME  the trace called this model / tool
//	type:TYPE           record type (repeatable; any matches)
//	min_duration:D max_duration:D  trace duration bounds (Go durations, or Nd)
//	has:errors          traces with at least one error
//	session:ID user:ID  the trace's session / user, exact
//	score:NAME<OP>VALUE a score of the trace (repeatable; all must match): OP is
//	                    = != < <= > >=, VALUE a number, true/false, or (= and !=)
//	                    a category: score:helpfulness>=0.8 score:thumbs=false score:label=good
//
// A value may be quoted: tool:"web search". Any other term is free text: a
// word, or a "quoted phrase" (\" and \\ escape inside quotes). A bare term
// whose prefix before ':' looks like a key but is not one is an error, so a
// typo is not silently searched as text; quote it to search for it. The
// parser never panics and its result carries values only: backends pass
// them to the database as parameters, never as SQL text.
//
// A query is at most MaxQueryBytes long and has at most MaxQueryTerms
// terms. Every error is a *QueryError.
func ParseQueryAt(s string, now time.Time) (Query, error) {
	q, err := parseQuery(s, now)
	if err != nil {
		return Query{}, &QueryError{Err: err}
	}
	return q, nil
}

func parseQuery(s string, now time.Time) (Query, error) {
	var q Query
	if len(s) > MaxQueryBytes {
		return Query{}, fmt.Errorf("query: is %d bytes long, more than the limit of %d", len(s), MaxQueryBytes)
	}
	if !utf8.ValidString(s) {
		return Query{}, fmt.Errorf("query is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return Query{}, fmt.Errorf("query holds a NUL byte")
	}
	seen := map[string]bool{}
	p := &lexer{s: s}
	for terms := 0; ; terms++ {
		tok, ok, err := p.next()
		if err != nil {
			return Query{}, err
		}
		if !ok {
			break
		}
		if terms == MaxQueryTerms {
			return Query{}, fmt.Errorf("query: has more than %d terms, the limit; narrow it down", MaxQueryTerms)
		}
		if tok.key == "" {
			if tok.quoted {
				if strings.TrimSpace(tok.val) != "" {
					q.Phrases = append(q.Phrases, tok.val)
				}
			} else {
				q.Words = append(q.Words, tok.val)
			}
			continue
		}
		key, v := tok.key, tok.val
		switch key {
		case "id", "tag", "type", "score":
		default:
			if seen[key] {
				return Query{}, fmt.Errorf("query: %s: given twice; give each filter once", key)
			}
		}
		seen[key] = true
		if v == "" {
			return Query{}, fmt.Errorf("query: %s: has no value (write %s:VALUE)", key, key)
		}
		switch key {
		case "id":
			id, err := trace.ParseTraceID(v)
			if err != nil {
				return Query{}, fmt.Errorf("query: id: %v", err)
			}
			q.IDs = append(q.IDs, id)
		case "name":
			q.Name = v
		case "status":
			q.Status = v
		case "since", "until":
			t, err := parseWhen(v, now)
			if err != nil {
				return Query{}, fmt.Errorf("query: %s:%s: %v", key, v, err)
			}
			if key == "since" {
				q.Since = t
			} else {
				q.Until = t
			}
		case "tag":
			q.Tags = append(q.Tags, v)
		case "model":
			q.Model = v
		case "tool":
			q.Tool = v
		case "type":
			t := trace.Type(v)
			if !t.Valid() {
				return Query{}, fmt.Errorf("query: type:%s: unknown record type (known: %s)", v, typeList())
			}
			q.Types = append(q.Types, t)
		case "min_duration", "max_duration":
			d, err := parseDuration(v)
			if err != nil {
				return Query{}, fmt.Errorf("query: %s:%s: %v", key, v, err)
			}
			if key == "min_duration" {
				q.MinDuration = d
			} else {
				q.MaxDuration = d
			}
		case "has":
			if v != "errors" && v != "error" {
				return Query{}, fmt.Errorf("query: has:%s: unknown (only has:errors)", v)
			}
			q.HasErrors = true
		case "session":
			q.Session = v
		case "user":
			q.User = v
		case "score":
			c, err := parseScoreCond(v)
			if err != nil {
				return Query{}, fmt.Errorf("query: score:%s: %w", v, err)
			}
			q.Scores = append(q.Scores, c)
		}
	}
	return q, nil
}

func typeList() string {
	var b strings.Builder
	for i, t := range trace.Types() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(t))
	}
	return b.String()
}

// parseWhen parses a since/until value: a duration before now, a date or an
// RFC 3339 time.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if d, err := parseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("want a duration before now (24h, 7d) or a time (2006-01-02 or RFC 3339)")
}

// ParseDuration parses a duration as the query filters and the CLI's
// --since, --older-than and similar flags take it: a Go duration (90m,
// 24h) or a whole number of days (7d). Negative durations are an error.
func ParseDuration(v string) (time.Duration, error) { return parseDuration(v) }

// parseDuration parses a Go duration, or a whole number of days ("7d").
// Negative durations are rejected.
func parseDuration(v string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.ParseUint(n, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("want a duration such as 90s, 24h or 7d")
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		d, err = time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("want a duration such as 90s, 24h or 7d")
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("duration is negative")
	}
	return d, nil
}

type token struct {
	key, val string
	quoted   bool // a free-text phrase
}

type lexer struct {
	s string
	i int
}

func isKey(k string) bool { return slices.Contains(QueryKeys, k) }

// looksLikeKey reports whether k is a plain lowercase identifier, i.e. was
// probably meant as a filter name.
func looksLikeKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

func (p *lexer) next() (token, bool, error) {
	for p.i < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.i:])
		if !unicode.IsSpace(r) {
			break
		}
		p.i += n
	}
	if p.i >= len(p.s) {
		return token{}, false, nil
	}
	if p.s[p.i] == '"' {
		v, err := p.quoted()
		return token{val: v, quoted: true}, err == nil, err
	}
	start := p.i
	for p.i < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.i:])
		if unicode.IsSpace(r) {
			break
		}
		if r == ':' {
			key := p.s[start:p.i]
			if isKey(key) {
				p.i += n
				if p.i < len(p.s) && p.s[p.i] == '"' {
					v, err := p.quoted()
					return token{key: key, val: v}, err == nil, err
				}
				vs := p.i
				for p.i < len(p.s) {
					r, n := utf8.DecodeRuneInString(p.s[p.i:])
					if unicode.IsSpace(r) {
						break
					}
					p.i += n
				}
				return token{key: key, val: p.s[vs:p.i]}, true, nil
			}
			if looksLikeKey(key) {
				return token{}, false, fmt.Errorf("query: unknown filter %q at column %d (known: %s); to search for the text, put it in quotes",
					key+":", start+1, strings.Join(QueryKeys, ", "))
			}
		}
		p.i += n
	}
	return token{val: p.s[start:p.i]}, true, nil
}

// quoted reads a "…" string at p.i.
func (p *lexer) quoted() (string, error) {
	start := p.i
	p.i++ // opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch c {
		case '"':
			p.i++
			return b.String(), nil
		case '\\':
			if p.i+1 < len(p.s) && (p.s[p.i+1] == '"' || p.s[p.i+1] == '\\') {
				b.WriteByte(p.s[p.i+1])
				p.i += 2
				continue
			}
		}
		b.WriteByte(c)
		p.i++
	}
	return "", fmt.Errorf("query: quote opened at column %d is not closed", start+1)
}

// String formats q in the syntax ParseQuery reads; parsing the result gives
// q back (times are written in RFC 3339), provided it is within the limits
// (MaxQueryBytes, MaxQueryTerms).
func (q Query) String() string {
	var parts []string
	add := func(k, v string) { parts = append(parts, k+":"+quoteIfNeeded(v)) }
	for _, id := range q.IDs {
		add("id", id.String())
	}
	if q.Name != "" {
		add("name", q.Name)
	}
	if q.Status != "" {
		add("status", q.Status)
	}
	if !q.Since.IsZero() {
		add("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		add("until", q.Until.Format(time.RFC3339Nano))
	}
	for _, t := range q.Tags {
		add("tag", t)
	}
	if q.Model != "" {
		add("model", q.Model)
	}
	if q.Tool != "" {
		add("tool", q.Tool)
	}
	for _, t := range q.Types {
		add("type", string(t))
	}
	if q.MinDuration != 0 {
		add("min_duration", q.MinDuration.String())
	}
	if q.MaxDuration != 0 {
		add("max_duration", q.MaxDuration.String())
	}
	if q.HasErrors {
		add("has", "errors")
	}
	if q.Session != "" {
		add("session", q.Session)
	}
	if q.User != "" {
		add("user", q.User)
	}
	for _, c := range q.Scores {
		add("score", c.String())
	}
	for _, p := range q.Phrases {
		parts = append(parts, quote(p))
	}
	for _, w := range q.Words {
		if bareWord(w) {
			parts = append(parts, w)
		} else {
			parts = append(parts, quote(w))
		}
	}
	return strings.Join(parts, " ")
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// quoteIfNeeded quotes a value that would not read back as itself bare.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, "\"\\:") || strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		return quote(s)
	}
	return s
}

// bareWord reports whether w reads back as the same word when written
// unquoted.
func bareWord(w string) bool {
	if w == "" || w[0] == '"' || strings.IndexFunc(w, unicode.IsSpace) >= 0 || !utf8.ValidString(w) {
		return false
	}
	if k, _, ok := strings.Cut(w, ":"); ok && (isKey(k) || looksLikeKey(k)) {
		return false
	}
	return true
}
