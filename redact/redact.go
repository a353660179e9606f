// Package redact scrubs secrets from trace records: API keys of the major
// model and code-hosting providers, bearer tokens, JWTs, AWS keys, PEM
// private keys, credentials in URLs, and the values of JSON fields and
// "key=value" pairs named like api_key, password, secret, token,
// authorization or cookie.
//
// Switch it on for a tracer with Options, which sets both of the tracer's
// redaction hooks (values and strings):
//
//	tr := trace.New(redact.Default().Options(trace.Options{Sinks: sinks}))
//
// or scrub a record already made (at ingest, on import) with Record.
// A Redactor is immutable and safe for concurrent use. Rules are
// configurable: start from DefaultConfig, add or remove rules, change the
// replacement text, and call New.
//
// What it cannot do: a secret with no recognizable shape in a field with
// an innocent name is kept, and so is one written with JSON \u escapes
// inside a key's name. Redaction is a safety net, not a guarantee: do not
// put secrets into traces on purpose.
package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/loupe-dev/loupe/trace"
)

// DefaultReplacement is the text that replaces a secret when
// Config.Replacement is empty.
const DefaultReplacement = "[REDACTED]"

// A Rule finds one kind of secret in text.
type Rule struct {
	// Name says what the rule finds ("openai", "jwt", …); Config.Without
	// and error messages use it.
	Name string
	// Keywords are literal strings, one of which occurs in every match
	// (case-sensitive): the rule's regular expression runs only on text
	// that contains one, which keeps text with no secret cheap. Empty
	// means the expression always runs.
	Keywords []string
	// Prefilter, if set, is used instead of Keywords: it reports whether
	// Pattern may match s, and must be much cheaper than Pattern. It must
	// not keep s.
	Prefilter func(s string) bool
	// Pattern matches a secret, or the secret and its context.
	Pattern *regexp.Regexp
	// Group is the submatch that is the secret itself, replaced while the
	// rest of the match (a "password=" or a "Bearer ") is kept; 0 replaces
	// the whole match.
	Group int
}

// Config configures a Redactor. The zero Config redacts nothing; start
// from DefaultConfig to change the defaults.
type Config struct {
	// Rules run in order over every string, including each string inside
	// a JSON value; a later rule sees what earlier ones replaced.
	Rules []Rule
	// Keys are the JSON object keys whose values are replaced whole (the
	// key itself is kept). A key matches when it ends with one of Keys
	// after both are lower-cased and stripped of everything but letters
	// and digits: "apikey" matches "api_key", "X-Api-Key" and
	// "openaiApiKey"; "token" matches "access_token" but not "max_tokens".
	Keys []string
	// Replacement replaces each secret; empty means DefaultReplacement.
	Replacement string
}

// Without returns a copy of c without the rules named names.
func (c Config) Without(names ...string) Config {
	c.Rules = slices.DeleteFunc(slices.Clone(c.Rules), func(r Rule) bool { return slices.Contains(names, r.Name) })
	return c
}

// With returns a copy of c with rules added after its own.
func (c Config) With(rules ...Rule) Config {
	c.Rules = append(slices.Clone(c.Rules), rules...)
	return c
}

// WithKeys returns a copy of c that also replaces the values of JSON
// fields named like keys (see Keys).
func (c Config) WithKeys(keys ...string) Config {
	c.Keys = append(slices.Clone(c.Keys), keys...)
	return c
}

// A Redactor replaces secrets in strings, JSON values and records. It is
// immutable and safe for concurrent use; the zero Redactor (or a nil one)
// redacts nothing.
type Redactor struct {
	rules    []rule
	index    keywordIndex // every rule's keywords
	always   uint64       // rules that run whatever the text: no keywords, or a Prefilter
	keys     [][]byte
	repl     string
	replJSON []byte // repl as a JSON string
}

type rule struct {
	Rule
}

// New returns a Redactor for c. It reports a rule without a name or a
// pattern, a Group the pattern does not have, and a key that is empty
// once normalized.
func New(c Config) (*Redactor, error) {
	rd := &Redactor{repl: c.Replacement}
	if rd.repl == "" {
		rd.repl = DefaultReplacement
	}
	rd.replJSON = appendJSONString(nil, rd.repl)
	for i, r := range c.Rules {
		switch {
		case r.Name == "":
			return nil, fmt.Errorf("redact: rule %d has no name; give it one so that it can be told apart and removed", i)
		case r.Pattern == nil:
			return nil, fmt.Errorf("redact: rule %q has no pattern", r.Name)
		case r.Group < 0 || r.Group > r.Pattern.NumSubexp():
			return nil, fmt.Errorf("redact: rule %q replaces group %d, but its pattern has %d groups", r.Name, r.Group, r.Pattern.NumSubexp())
		}
		x := rule{Rule: r}
		x.Keywords = slices.Clone(r.Keywords)
		for _, k := range r.Keywords {
			if k == "" {
				return nil, fmt.Errorf("redact: rule %q has an empty keyword, which would match everything; leave Keywords empty instead", r.Name)
			}
			if r.Prefilter == nil {
				rd.index.add(k, i)
			}
		}
		if len(x.Keywords) == 0 || r.Prefilter != nil {
			rd.always |= ruleBit(i)
		}
		rd.rules = append(rd.rules, x)
	}
	for _, k := range c.Keys {
		n := normalizeKey(k)
		if len(n) == 0 {
			return nil, fmt.Errorf("redact: key %q has no letters or digits, so it would match no key", k)
		}
		if !slices.ContainsFunc(rd.keys, func(k []byte) bool { return bytes.Equal(k, n) }) {
			rd.keys = append(rd.keys, n)
		}
	}
	return rd, nil
}

// Config returns the configuration rd was made from (with normalized
// keys), to change and pass to New.
func (rd *Redactor) Config() Config {
	if rd == nil {
		return Config{}
	}
	c := Config{Replacement: rd.repl}
	for _, r := range rd.rules {
		c.Rules = append(c.Rules, r.Rule)
	}
	for _, k := range rd.keys {
		c.Keys = append(c.Keys, string(k))
	}
	return c
}

func normalizeKey(k string) []byte {
	var b []byte
	for i := 0; i < len(k); i++ {
		if c := lower(k[i]); isAlnum(c) {
			b = append(b, c)
		}
	}
	return b
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// String returns s with every secret the rules find replaced. It returns
// s itself, without allocating, when there is none.
func (rd *Redactor) String(s string) string {
	if rd == nil || len(rd.rules) == 0 {
		return s
	}
	m := rd.index.match(s) | rd.always
	for i := range rd.rules {
		r := &rd.rules[i]
		if m&ruleBit(i) == 0 || r.Prefilter != nil && !r.Prefilter(s) {
			continue
		}
		s = rd.replace(r, s)
	}
	return s
}

func (rd *Redactor) replace(r *rule, s string) string {
	m := r.Pattern.FindAllStringSubmatchIndex(s, -1)
	if m == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range m {
		from, to := loc[2*r.Group], loc[2*r.Group+1]
		if from < 0 || from == to { // the group did not take part
			continue
		}
		if strings.HasPrefix(strings.TrimLeft(s[to:], " \t"), rd.repl) {
			// What looks like a value is the scheme of a secret replaced
			// already ("Authorization: Bearer [REDACTED]"): redacting
			// again must change nothing.
			continue
		}
		b.WriteString(s[last:from])
		b.WriteString(rd.repl)
		last = to
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// mayMatchBytes reports whether some rule could match in b.
func (rd *Redactor) mayMatchBytes(b []byte) bool {
	s := unsafeString(b)
	if rd.index.match(s) != 0 {
		return true
	}
	for i := range rd.rules {
		r := &rd.rules[i]
		if r.Prefilter != nil && r.Prefilter(s) || r.Prefilter == nil && len(r.Keywords) == 0 {
			return true
		}
	}
	return false
}

// unsafeString returns b's bytes as a string without copying them, for
// reading only while b does not change: the prefilters and String read
// JSON strings in place, and only what they return changed (a new string)
// is kept.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// JSON returns v, one JSON value, with the values of sensitive keys and
// every secret the rules find in its strings replaced. The result is
// valid JSON if v is. It returns v itself, without allocating, when
// there is nothing to replace, and otherwise a new buffer: v is never
// modified. Text that is not JSON is redacted as well as can be: string
// by string where it looks like JSON, else as text.
func (rd *Redactor) JSON(v []byte) []byte {
	if rd == nil || len(v) == 0 || (len(rd.rules) == 0 && len(rd.keys) == 0) {
		return v
	}
	strs := len(rd.rules) > 0 && rd.mayMatchBytes(v)
	if !strs && (len(rd.keys) == 0 || bytes.IndexByte(v, ':') < 0) {
		return v
	}
	if k := skipSpace(v, 0); strs && k < len(v) && v[k] != '{' && v[k] != '[' && v[k] != '"' {
		// Not an object, array or string: a number or literal has no
		// secret, and anything else is not JSON but text.
		if r := rd.String(unsafeString(v)); r != unsafeString(v) {
			return []byte(r)
		}
		return v
	}
	var out []byte
	changed := false
	last := 0 // v[:last] is in out
	for i := 0; i < len(v); {
		j := bytes.IndexByte(v[i:], '"')
		if j < 0 {
			break
		}
		start := i + j
		end, esc := scanString(v, start)
		if end < 0 { // unterminated: redact the rest as text
			if strs {
				rest := string(v[start+1:])
				if r := rd.String(rest); r != rest {
					out = append(append(out, v[last:start+1]...), r...)
					last, changed = len(v), true
				}
			}
			break
		}
		next := skipSpace(v, end+1)
		if next < len(v) && v[next] == ':' { // an object key
			vs := skipSpace(v, next+1)
			if len(rd.keys) > 0 && rd.sensitive(v[start+1:end], esc) {
				ve := scanValue(v, vs)
				if vs < ve && string(v[vs:ve]) != "null" {
					out = append(append(out, v[last:vs]...), rd.replJSON...)
					last, changed = ve, true
				}
				i = max(ve, vs+1)
				continue
			}
			i = vs
			continue
		}
		if strs {
			if r, ok := rd.jsonString(v[start:end+1], esc); ok {
				out = append(append(out, v[last:start]...), r...)
				last, changed = end+1, true
			}
		}
		i = end + 1
	}
	if !changed {
		return v
	}
	return append(out, v[last:]...)
}

// jsonString redacts the JSON string q (quotes included) and returns the
// new JSON string, or false if nothing changed.
func (rd *Redactor) jsonString(q []byte, esc bool) ([]byte, bool) {
	inner := q[1 : len(q)-1]
	if !rd.mayMatchBytes(inner) && !esc { // escapes may hide a keyword: decode those
		return nil, false
	}
	s := unsafeString(inner)
	if esc {
		var d string
		if json.Unmarshal(q, &d) == nil {
			s = d
		}
	}
	r := rd.String(s)
	if r == s { // unchanged: s, which may alias v, is dropped here
		return nil, false
	}
	return appendJSONString(nil, r), true
}

// sensitive reports whether the object key k (without quotes; esc says
// it has escapes) ends with one of rd.keys, ignoring case and everything
// but letters and digits.
func (rd *Redactor) sensitive(k []byte, esc bool) bool {
	if esc {
		var s string
		if json.Unmarshal(append(append([]byte{'"'}, k...), '"'), &s) == nil {
			k = []byte(s)
		}
	}
	for _, key := range rd.keys {
		if hasSuffixFold(k, key) {
			return true
		}
	}
	return false
}

// hasSuffixFold reports whether k ends with suffix (lower case letters
// and digits) once k is lower-cased and stripped of all but letters and
// digits.
func hasSuffixFold[K, S string | []byte](k K, suffix S) bool {
	i := len(k) - 1
	for j := len(suffix) - 1; j >= 0; j-- {
		for i >= 0 && !isAlnum(lower(k[i])) {
			i--
		}
		if i < 0 || lower(k[i]) != suffix[j] {
			return false
		}
		i--
	}
	return true
}

// scanString returns the index of the quote that closes the JSON string
// opening at v[start], or -1, and whether the string has escapes.
func scanString(v []byte, start int) (end int, esc bool) {
	for i := start + 1; i < len(v); {
		j := bytes.IndexByte(v[i:], '"')
		if j < 0 {
			return -1, esc
		}
		q := i + j
		n := 0 // backslashes before the quote
		for k := q - 1; k > start && v[k] == '\\'; k-- {
			n++
		}
		if !esc && bytes.IndexByte(v[i:q], '\\') >= 0 {
			esc = true
		}
		if n%2 == 0 {
			return q, esc
		}
		i = q + 1
	}
	return -1, esc
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// scanValue returns the end of the JSON value starting at v[i].
func scanValue(v []byte, i int) int {
	if i >= len(v) {
		return i
	}
	switch v[i] {
	case '"':
		end, _ := scanString(v, i)
		if end < 0 {
			return len(v)
		}
		return end + 1
	case '{', '[':
		depth := 0
		for k := i; k < len(v); k++ {
			switch v[k] {
			case '"':
				end, _ := scanString(v, k)
				if end < 0 {
					return len(v)
				}
				k = end
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return k + 1
				}
			}
		}
		return len(v)
	}
	k := i
	for k < len(v) && !strings.ContainsRune(",}] \t\r\n", rune(v[k])) {
		k++
	}
	return k
}

// appendJSONString appends s to b as a JSON string. Bytes that are not
// UTF-8 are kept as they are, as encoding/json's decoder accepts them.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == '\u2028' || r == '\u2029' { // as encoding/json does, for JavaScript
				b = append(b, `\u202`...)
				b = append(b, hex[r&0xf])
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
	}
	return append(b, '"')
}

// Value is JSON for a trace.Value.
func (rd *Redactor) Value(v trace.Value) trace.Value { return rd.JSON(v) }

// Record redacts every string and value of r in place: name, status,
// error, tags, provider, session, user, input, output and thinking. It replaces fields
// and never writes into their old contents, so values and tags shared
// with other records are left intact. This is what a collector runs on
// each record it ingests.
func (rd *Redactor) Record(r *trace.Record) {
	if rd == nil {
		return
	}
	r.Name = rd.String(r.Name)
	r.Status = rd.String(r.Status)
	r.Error = rd.String(r.Error)
	r.Usage.Provider = rd.String(r.Usage.Provider)
	if ri := r.Run; ri != nil {
		// Run is shared with the record's copies: a changed one is
		// replaced, never written into.
		tags := ri.Tags
		for i, t := range tags {
			if s := rd.String(t); s != t {
				tags = slices.Clone(tags)
				for j := i; j < len(tags); j++ {
					tags[j] = rd.String(tags[j])
				}
				break
			}
		}
		session, user := rd.String(ri.Session), rd.String(ri.User)
		if session != ri.Session || user != ri.User || len(tags) > 0 && &tags[0] != &ri.Tags[0] {
			r.Run = &trace.RunInfo{Tags: tags, Session: session, User: user}
		}
	}
	r.Input = rd.Value(r.Input)
	r.Output = rd.Value(r.Output)
	r.Thinking = rd.Value(r.Thinking)
}

// RedactValue has the signature of trace.Options.Redact.
func (rd *Redactor) RedactValue(_ *trace.Record, _ trace.Field, v trace.Value) trace.Value {
	return rd.Value(v)
}

// RedactString has the signature of trace.Options.RedactString.
func (rd *Redactor) RedactString(_ *trace.Record, _ trace.Field, s string) string {
	return rd.String(s)
}

// Options returns o with both of its redaction hooks set to rd, so that
// every string and value a tracer records passes through rd. Hooks o
// already has run first.
func (rd *Redactor) Options(o trace.Options) trace.Options {
	if prev := o.Redact; prev != nil {
		o.Redact = func(r *trace.Record, f trace.Field, v trace.Value) trace.Value {
			return rd.Value(prev(r, f, v))
		}
	} else {
		o.Redact = rd.RedactValue
	}
	if prev := o.RedactString; prev != nil {
		o.RedactString = func(r *trace.Record, f trace.Field, s string) string {
			return rd.String(prev(r, f, s))
		}
	} else {
		o.RedactString = rd.RedactString
	}
	return o
}
