package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/loupe-dev/loupe/internal/yamlpos"
)

// Limits on what Parse reads, so that hostile input costs bounded time and
// memory. Real pipelines are a few kilobytes, a few levels deep.
const (
	// MaxFileSize is the largest pipeline file Parse reads, in bytes.
	MaxFileSize = 64 << 10
	// MaxYAMLDepth is the deepest YAML nesting (mappings and sequences)
	// Parse accepts.
	MaxYAMLDepth = 64
	// MaxYAMLNodes is the most YAML nodes (keys, values, items) Parse
	// accepts.
	MaxYAMLNodes = 20_000
)

type nodeKind int

const (
	scalarNode nodeKind = iota
	mapNode
	seqNode
)

// node is the YAML tree Parse works on: aliases refused, anchors and tags
// dropped, every node with its position.
type node struct {
	kind nodeKind
	pos  Pos
	// keys and vals are a mapping's entries in order; keys are scalars whose
	// value is the key's text.
	keys, vals []*node
	// items are a sequence's items.
	items []*node
	// value is a scalar's value: string, int64, float64, bool or nil.
	value any
}

// get returns the key and value nodes of key in mapping n, or nils.
func (n *node) get(key string) (k, v *node) {
	if n == nil || n.kind != mapNode {
		return nil, nil
	}
	for i, kn := range n.keys {
		if kn.value == key {
			return kn, n.vals[i]
		}
	}
	return nil, nil
}

// str returns a scalar's string value.
func (n *node) str() (string, bool) {
	if n == nil || n.kind != scalarNode {
		return "", false
	}
	s, ok := n.value.(string)
	return s, ok
}

// json returns n as a JSON-like value (map[string]any, []any, string,
// float64 for every number, bool, nil), as the JSON Schema validator reads
// it.
func (n *node) json() any {
	switch n.kind {
	case mapNode:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k.value.(string)] = n.vals[i].json()
		}
		return m
	case seqNode:
		s := make([]any, len(n.items))
		for i, it := range n.items {
			s[i] = it.json()
		}
		return s
	}
	switch v := n.value.(type) {
	case int64:
		return float64(v)
	}
	return n.value
}

// plain returns n as a Go value for the AST: like json, with integers kept
// as int64.
func (n *node) plain() any {
	switch n.kind {
	case mapNode:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k.value.(string)] = n.vals[i].plain()
		}
		return m
	case seqNode:
		s := make([]any, len(n.items))
		for i, it := range n.items {
			s[i] = it.plain()
		}
		return s
	}
	return n.value
}

// describe names a node's kind for messages.
func (n *node) describe() string {
	if n == nil {
		return "nothing"
	}
	switch n.kind {
	case mapNode:
		return "a mapping"
	case seqNode:
		return "a list"
	}
	switch v := n.value.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case int64:
		return fmt.Sprintf("the integer %d", v)
	case float64:
		return "the number " + strconv.FormatFloat(v, 'g', -1, 64)
	}
	return "a scalar"
}

// readYAML parses src into a node tree. Errors are syntax errors.
func readYAML(e *errs, src []byte) *node {
	if len(src) > MaxFileSize {
		// ParseFile reads no more than MaxFileSize+1 bytes: say "over".
		e.add(LayerSyntax, Pos{}, fmt.Sprintf("file is over %d KiB; expected a pipeline of at most %d bytes", MaxFileSize>>10, MaxFileSize))
		return nil
	}
	if pos, ok := tooDeep(src); ok {
		e.add(LayerSyntax, pos, fmt.Sprintf("YAML nested more than %d levels deep; expected a shallower pipeline", MaxYAMLDepth))
		return nil
	}
	f, err := yamlpos.Parse(src)
	if err != nil {
		var se *yaml.SyntaxError
		if errors.As(err, &se) && se.Token != nil {
			e.add(LayerSyntax, tokPos(se.Token), "invalid YAML: "+se.Message)
		} else {
			var de *yaml.DuplicateKeyError
			if errors.As(err, &de) && de.Token != nil {
				e.add(LayerSyntax, tokPos(de.Token), "invalid YAML: "+de.Message+"; expected each key once")
			} else {
				e.add(LayerSyntax, Pos{}, "invalid YAML: "+firstLine(err.Error()))
			}
		}
		return nil
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 {
		e.add(LayerSyntax, Pos{}, "empty file; expected a mapping with `servers` and `pipeline`")
		return nil
	}
	if len(docs) > 1 {
		e.add(LayerSyntax, nodePos(docs[1].Body, Pos{}), "more than one YAML document; expected one pipeline per file")
		return nil
	}
	c := &converter{e: e}
	root := c.convert(docs[0].Body, 0, Pos{1, 1})
	if c.failed {
		return nil
	}
	if root == nil || root.kind != mapNode {
		e.add(LayerSyntax, root.posOr(Pos{1, 1}), fmt.Sprintf("the file holds %s; expected a mapping with `servers` and `pipeline`", root.describe()))
		return nil
	}
	return root
}

func (n *node) posOr(p Pos) Pos {
	if n == nil || !n.pos.IsValid() {
		return p
	}
	return n.pos
}

// tooDeep scans src for nesting deeper than MaxYAMLDepth before the YAML
// parser, whose recursion (and, for some shapes, time) follows the input's
// depth, sees it. Flow collections count their brackets (outside quotes and
// comments); block collections count indentation levels plus the "- " and
// "? " indicators that open a nested collection on the same line. It may
// over-count (a literal block indented ever deeper), never under-count.
func tooDeep(src []byte) (Pos, bool) {
	depth, line := 0, 1
	var indents []int // strictly increasing indentation of open block levels
	for len(src) > 0 {
		end := bytes.IndexByte(src, '\n')
		if end < 0 {
			end = len(src)
		}
		text := src[:end]
		src = src[min(end+1, len(src)):]
		// Block levels: indentation, then indicators.
		indent := 0
		for indent < len(text) && text[indent] == ' ' {
			indent++
		}
		rest := text[indent:]
		if depth == 0 && len(rest) > 0 && rest[0] != '#' {
			for len(indents) > 0 && indents[len(indents)-1] >= indent {
				indents = indents[:len(indents)-1]
			}
			indents = append(indents, indent)
			chain := 0
			for len(rest) >= 2 && (rest[0] == '-' || rest[0] == '?') && (rest[1] == ' ' || rest[1] == '\t') {
				chain++
				rest = bytes.TrimLeft(rest[2:], " \t")
			}
			if len(indents)+chain > MaxYAMLDepth {
				return Pos{line, indent + 1}, true
			}
		}
		// Flow levels.
		var quote byte
		var prev byte = ' '
		for i, c := range text {
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '#' && (prev == ' ' || prev == '\t'):
				// A comment: the rest of the line does not count.
				goto next
			case (c == '"' || c == '\'') && (prev == ' ' || prev == '\t' || prev == '[' || prev == '{' || prev == ',' || prev == ':'):
				quote = c
			case c == '[' || c == '{':
				depth++
				if depth+len(indents) > MaxYAMLDepth {
					return Pos{line, i + 1}, true
				}
			case c == ']' || c == '}':
				if depth > 0 {
					depth--
				}
			}
			prev = c
		}
	next:
		line++
	}
	return Pos{}, false
}

type converter struct {
	e      *errs
	nodes  int
	failed bool
}

func (c *converter) fail(pos Pos, msg string) *node {
	if !c.failed {
		c.e.add(LayerSyntax, pos, msg)
	}
	c.failed = true
	return nil
}

// convert turns a goccy node into a node; parent is the position to use
// when n has none (an empty value).
func (c *converter) convert(n ast.Node, depth int, parent Pos) *node {
	if c.failed {
		return nil
	}
	c.nodes++
	if c.nodes > MaxYAMLNodes {
		return c.fail(nodePos(n, parent), fmt.Sprintf("more than %d YAML nodes; expected a smaller pipeline", MaxYAMLNodes))
	}
	if depth > MaxYAMLDepth {
		return c.fail(nodePos(n, parent), fmt.Sprintf("YAML nested more than %d levels deep; expected a shallower pipeline", MaxYAMLDepth))
	}
	if n == nil {
		return &node{kind: scalarNode, pos: parent}
	}
	pos := nodePos(n, parent)
	switch n := n.(type) {
	case *ast.AnchorNode:
		return c.convert(n.Value, depth, pos)
	case *ast.TagNode:
		v := c.convert(n.Value, depth, pos)
		if v != nil && v.kind == scalarNode && n.Start != nil && n.Start.Value == "!!str" && v.value != nil {
			// An explicit string: keep the scalar's text, not its parsed value.
			if t := n.Value.GetToken(); t != nil {
				v.value = t.Value
			}
		}
		return v
	case *ast.AliasNode:
		return c.fail(pos, "YAML aliases (*name) are not supported in pipelines; expected the value written out")
	case *ast.MappingValueNode:
		m := &node{kind: mapNode, pos: pos}
		c.entry(m, n, depth)
		return m
	case *ast.MappingNode:
		m := &node{kind: mapNode, pos: pos}
		for _, mv := range n.Values {
			c.entry(m, mv, depth)
			if c.failed {
				return nil
			}
		}
		if len(m.keys) > 0 {
			m.pos = m.keys[0].pos
		}
		return m
	case *ast.SequenceNode:
		s := &node{kind: seqNode, pos: pos}
		for _, it := range n.Values {
			s.items = append(s.items, c.convert(it, depth+1, pos))
			if c.failed {
				return nil
			}
		}
		return s
	case *ast.StringNode:
		return &node{kind: scalarNode, pos: pos, value: n.Value}
	case *ast.LiteralNode:
		v := ""
		if n.Value != nil {
			v = n.Value.Value
		}
		return &node{kind: scalarNode, pos: pos, value: v}
	case *ast.IntegerNode:
		switch v := n.Value.(type) {
		case int64:
			return &node{kind: scalarNode, pos: pos, value: v}
		case uint64:
			if v <= math.MaxInt64 {
				return &node{kind: scalarNode, pos: pos, value: int64(v)}
			}
			return &node{kind: scalarNode, pos: pos, value: float64(v)}
		}
		return &node{kind: scalarNode, pos: pos, value: n.GetToken().Value}
	case *ast.FloatNode:
		return &node{kind: scalarNode, pos: pos, value: n.Value}
	case *ast.InfinityNode:
		return &node{kind: scalarNode, pos: pos, value: n.Value}
	case *ast.NanNode:
		return &node{kind: scalarNode, pos: pos, value: math.NaN()}
	case *ast.BoolNode:
		return &node{kind: scalarNode, pos: pos, value: n.Value}
	case *ast.NullNode:
		return &node{kind: scalarNode, pos: pos}
	case *ast.MergeKeyNode:
		return c.fail(pos, "YAML merge keys (<<) are not supported in pipelines; expected the keys written out")
	case *ast.CommentGroupNode, *ast.CommentNode:
		return &node{kind: scalarNode, pos: parent}
	}
	return c.fail(pos, fmt.Sprintf("unsupported YAML node %s; expected a mapping, list or scalar", n.Type()))
}

// entry adds one key: value to mapping m.
func (c *converter) entry(m *node, mv *ast.MappingValueNode, depth int) {
	kpos := nodePos(mv.Key, m.pos)
	var kn ast.Node = mv.Key
	if mk, ok := kn.(*ast.MappingKeyNode); ok {
		kn = mk.Value
	}
	for {
		if a, ok := kn.(*ast.AnchorNode); ok {
			kn = a.Value
			continue
		}
		if t, ok := kn.(*ast.TagNode); ok {
			kn = t.Value
			continue
		}
		break
	}
	var key string
	switch k := kn.(type) {
	case *ast.StringNode:
		key = k.Value
	case *ast.MergeKeyNode:
		c.fail(kpos, "YAML merge keys (<<) are not supported in pipelines; expected the keys written out")
		return
	case *ast.AliasNode:
		c.fail(kpos, "YAML aliases (*name) are not supported in pipelines; expected the value written out")
		return
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode, *ast.InfinityNode, *ast.NanNode:
		key = k.GetToken().Value
	default:
		c.fail(kpos, "a mapping key that is not a scalar; expected a name")
		return
	}
	c.nodes++
	v := c.convert(mv.Value, depth+1, kpos)
	if c.failed {
		return
	}
	if v != nil && v.kind == scalarNode && v.value == nil && !v.pos.IsValid() {
		v.pos = kpos
	}
	m.keys = append(m.keys, &node{kind: scalarNode, pos: kpos, value: key})
	m.vals = append(m.vals, v)
}

// nodePos returns n's position, or parent when n carries none.
func nodePos(n ast.Node, parent Pos) Pos {
	switch m := n.(type) {
	case nil:
		return parent
	case *ast.MappingValueNode:
		return nodePos(m.Key, parent)
	case *ast.MappingNode:
		if len(m.Values) > 0 {
			return nodePos(m.Values[0], parent)
		}
	}
	t := n.GetToken()
	if t == nil || t.Position == nil {
		return parent
	}
	if _, ok := n.(*ast.NullNode); ok && t.Type != token.NullType {
		// An empty value: goccy gives it the next token's position.
		return parent
	}
	return tokPos(t)
}

func tokPos(t *token.Token) Pos {
	if t == nil || t.Position == nil {
		return Pos{}
	}
	return Pos{t.Position.Line, t.Position.Column}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
