package pipeline

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/loupe-dev/loupe/schema"
)

// The schema layer reads schema.PipelineV1 itself, walking the YAML tree
// beside the schema so that each error has the position of the node that
// breaks it (jsonschema-go reports the first failure only, without the
// instance's location). It interprets the keywords the schema uses; then
// jsonschema-go validates the whole document as well, so that the schema
// file stays the one authority: a failure only the library finds is still
// reported (at the top of the file), and the tests check that the two agree.

var pipelineSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(schema.PipelineV1, &s); err != nil {
		return nil, err
	}
	return &s, nil
})

var resolvedPipelineSchema = sync.OnceValues(func() (*jsonschema.Resolved, error) {
	s, err := pipelineSchema()
	if err != nil {
		return nil, err
	}
	return s.Resolve(nil)
})

// patternHelp says in words what the schema's name patterns accept.
var patternHelp = map[string]string{
	`^[A-Za-z_][A-Za-z0-9_]*$`:                          "a name of letters, digits and `_` that does not start with a digit",
	`^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_-]*$`: "`server.tool`",
}

var patternCache sync.Map // pattern → *regexp.Regexp

func compiled(pattern string) *regexp.Regexp {
	if re, ok := patternCache.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	re := regexp.MustCompile(pattern)
	patternCache.Store(pattern, re)
	return re
}

type schemaWalker struct {
	e    *errs
	root *jsonschema.Schema
	bad  bool // an error was reported
}

// checkSchema runs the schema layer on p's YAML tree.
func checkSchema(e *errs, root *node) {
	s, err := pipelineSchema()
	if err != nil {
		e.add(LayerSchema, Pos{}, "the embedded pipeline schema does not load: "+err.Error())
		return
	}
	w := &schemaWalker{e: e, root: s}
	w.check(root, s, "")
	if w.bad {
		return
	}
	rs, err := resolvedPipelineSchema()
	if err == nil {
		err = rs.Validate(root.json())
	}
	if err != nil {
		e.add(LayerSchema, Pos{}, "does not match the pipeline schema: "+err.Error())
	}
}

func (w *schemaWalker) fail(pos Pos, msg string) {
	w.bad = true
	w.e.add(LayerSchema, pos, msg)
}

// deref follows local $refs.
func (w *schemaWalker) deref(s *jsonschema.Schema) *jsonschema.Schema {
	for i := 0; s != nil && s.Ref != "" && i < 16; i++ {
		name, ok := strings.CutPrefix(s.Ref, "#/$defs/")
		if !ok {
			return s
		}
		s = w.root.Defs[name]
	}
	return s
}

// expected describes what s accepts, for messages.
func expected(s *jsonschema.Schema) string {
	if s.Description != "" {
		return s.Description
	}
	switch {
	case s.Type != "":
		return "a value of type " + s.Type
	case len(s.Enum) > 0:
		var vs []string
		for _, v := range s.Enum {
			vs = append(vs, fmt.Sprintf("`%v`", v))
		}
		return "one of " + strings.Join(vs, ", ")
	}
	return "another value"
}

// where names the value at path for messages.
func where(path string) string {
	if path == "" {
		return "the file"
	}
	return "`" + path + "`"
}

func jsonKind(n *node) string {
	switch n.kind {
	case mapNode:
		return "object"
	case seqNode:
		return "array"
	}
	switch v := n.value.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case int64:
		return "integer"
	case float64:
		if !math.IsInf(v, 0) && !math.IsNaN(v) && v == math.Trunc(v) {
			return "integer"
		}
		return "number"
	}
	return "unknown"
}

func typeOK(n *node, s *jsonschema.Schema) bool {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) == 0 {
		return true
	}
	k := jsonKind(n)
	return slices.Contains(types, k) || (k == "integer" && slices.Contains(types, "number"))
}

// accepts reports whether alternative s could be meant for n: its type
// fits and, for objects with named properties, n has one of them.
func (w *schemaWalker) accepts(n *node, s *jsonschema.Schema) bool {
	s = w.deref(s)
	if len(s.AnyOf) > 0 || len(s.OneOf) > 0 {
		for _, a := range append(slices.Clone(s.AnyOf), s.OneOf...) {
			if w.accepts(n, a) {
				return true
			}
		}
		return false
	}
	if !typeOK(n, s) {
		return false
	}
	if n.kind != mapNode || (len(s.Properties) == 0 && len(s.PatternProperties) == 0) || !closed(s) {
		return true
	}
	for _, k := range n.keys {
		if w.propSchema(s, k.value.(string)) != nil {
			return true
		}
	}
	return false
}

func closed(s *jsonschema.Schema) bool {
	a := s.AdditionalProperties
	return a != nil && a.Not != nil && a.Not.Type == "" && a.Not.Not == nil && len(a.Not.Enum) == 0
}

// propSchema returns the schema for key in object schema s, or nil when
// the key is not allowed.
func (w *schemaWalker) propSchema(s *jsonschema.Schema, key string) *jsonschema.Schema {
	if p, ok := s.Properties[key]; ok {
		return p
	}
	for _, pat := range slices.Sorted(maps.Keys(s.PatternProperties)) {
		if compiled(pat).MatchString(key) {
			return s.PatternProperties[pat]
		}
	}
	if closed(s) {
		return nil
	}
	if s.AdditionalProperties != nil {
		return s.AdditionalProperties
	}
	return &jsonschema.Schema{}
}

func (w *schemaWalker) check(n *node, s *jsonschema.Schema, path string) {
	s = w.deref(s)
	if s == nil {
		return
	}
	if alts := append(slices.Clone(s.OneOf), s.AnyOf...); len(alts) > 0 {
		for _, a := range alts {
			if w.accepts(n, a) {
				w.check(n, a, path)
				return
			}
		}
		w.fail(n.pos, w.mismatch(n, s, path))
		return
	}
	if !typeOK(n, s) {
		hint := ""
		if str, ok := n.str(); ok && strings.HasPrefix(str, "$") && s.Type != "string" && s.Type != "" {
			hint = " (a `$name` is read only in step inputs and parameters, not here)"
		}
		w.fail(n.pos, fmt.Sprintf("%s is %s; expected %s%s", where(path), n.describe(), expected(s), hint))
		return
	}
	switch n.kind {
	case mapNode:
		w.object(n, s, path)
	case seqNode:
		w.array(n, s, path)
	default:
		w.scalar(n, s, path)
	}
}

// mismatch says why n fits none of the alternatives of s.
func (w *schemaWalker) mismatch(n *node, s *jsonschema.Schema, path string) string {
	if n.kind == mapNode && len(n.keys) > 0 {
		var keys []string
		for _, k := range n.keys {
			keys = append(keys, "`"+k.value.(string)+"`")
		}
		return fmt.Sprintf("%s is a mapping with %s; expected %s", where(path), strings.Join(keys, ", "), expected(s))
	}
	return fmt.Sprintf("%s is %s; expected %s", where(path), n.describe(), expected(s))
}

func (w *schemaWalker) object(n *node, s *jsonschema.Schema, path string) {
	for i, k := range n.keys {
		key := k.value.(string)
		ps := w.propSchema(s, key)
		if ps == nil {
			w.fail(k.pos, w.unknownKey(n, s, key, path))
			continue
		}
		w.check(n.vals[i], ps, join(path, key))
	}
	for _, req := range s.Required {
		if k, _ := n.get(req); k == nil {
			w.fail(n.pos, fmt.Sprintf("%s has no `%s`; expected %s", where(path), req, expected(s)))
		}
	}
	if s.MinProperties != nil && len(n.keys) < *s.MinProperties {
		w.fail(n.pos, fmt.Sprintf("%s is empty; expected %s", where(path), expected(s)))
	}
	if s.MaxProperties != nil && len(n.keys) > *s.MaxProperties {
		w.fail(n.keys[*s.MaxProperties].pos, fmt.Sprintf("%s has %d keys; expected %s", where(path), len(n.keys), expected(s)))
	}
}

func (w *schemaWalker) unknownKey(n *node, s *jsonschema.Schema, key, path string) string {
	if key == "input" || key == "output" {
		for _, k := range n.keys {
			if _, _, ok := splitServerTool(k.value.(string)); ok {
				return fmt.Sprintf("`%s` is beside the step `%s`, not under it; expected it indented under `%s`", key, k.value, k.value)
			}
		}
	}
	if len(s.Properties) > 0 {
		var names []string
		for name := range s.Properties {
			names = append(names, "`"+name+"`")
		}
		slices.Sort(names)
		return fmt.Sprintf("unknown key `%s` in %s; expected one of %s", key, where(path), strings.Join(names, ", "))
	}
	if len(s.PatternProperties) > 0 {
		var want []string
		for pat := range s.PatternProperties {
			if h, ok := patternHelp[pat]; ok {
				want = append(want, h)
			}
		}
		if len(want) == 1 {
			return fmt.Sprintf("key `%s` in %s is not a valid name; expected %s", key, where(path), want[0])
		}
		return fmt.Sprintf("key `%s` in %s is not a valid name; expected %s", key, where(path), expected(s))
	}
	return fmt.Sprintf("unknown key `%s` in %s; expected %s", key, where(path), expected(s))
}

func (w *schemaWalker) array(n *node, s *jsonschema.Schema, path string) {
	if s.MinItems != nil && len(n.items) < *s.MinItems {
		if len(n.items) == 0 {
			w.fail(n.pos, fmt.Sprintf("%s is an empty list; expected %s", where(path), expected(s)))
		} else {
			w.fail(n.pos, fmt.Sprintf("%s has %d items; expected %s", where(path), len(n.items), expected(s)))
		}
	}
	if s.MaxItems != nil && len(n.items) > *s.MaxItems {
		w.fail(n.items[*s.MaxItems].pos, fmt.Sprintf("%s has %d items; expected %s", where(path), len(n.items), expected(s)))
	}
	for i, it := range n.items {
		if s.Items != nil {
			w.check(it, s.Items, fmt.Sprintf("%s[%d]", path, i))
		}
		if s.UniqueItems {
			for _, prev := range n.items[:i] {
				if prev.kind == scalarNode && it.kind == scalarNode && prev.value == it.value {
					w.fail(it.pos, fmt.Sprintf("%s lists %s twice; expected %s", where(path), it.describe(), expected(s)))
					break
				}
			}
		}
	}
}

func (w *schemaWalker) scalar(n *node, s *jsonschema.Schema, path string) {
	bad := func() {
		w.fail(n.pos, fmt.Sprintf("%s is %s; expected %s", where(path), n.describe(), expected(s)))
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(v any) bool { return v == n.json() }) {
		bad()
		return
	}
	if f, ok := n.json().(float64); ok {
		if (s.Minimum != nil && f < *s.Minimum) || (s.Maximum != nil && f > *s.Maximum) {
			bad()
			return
		}
	}
	if str, ok := n.value.(string); ok {
		if s.MinLength != nil && len([]rune(str)) < *s.MinLength {
			bad()
			return
		}
		if s.Pattern != "" && !compiled(s.Pattern).MatchString(str) {
			bad()
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
