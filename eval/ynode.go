package eval

import (
	"fmt"
	"math"
	"strconv"

	"github.com/goccy/go-yaml/ast"
)

// ykind is the shape of a YAML value.
type ykind int

const (
	ynull ykind = iota
	yscalar
	ymap
	yseq
)

// ynode is a YAML value with its position, built from goccy/go-yaml's AST so
// that every error can name a line and column.
type ynode struct {
	kind  ykind
	pos   Position
	keys  []string // ymap
	kpos  []Position
	vals  []*ynode // ymap
	items []*ynode // yseq
	val   any      // yscalar: string, float64 or bool
	// size is how many values y holds with every alias expanded (a
	// scalar is 1), saturated at maxExpanded+1: aliases share nodes, so a
	// small file can stand for an exponential tree ("billion laughs").
	size int
}

// maxExpanded bounds the values a file may hold once its aliases are
// expanded; reading anything larger would take exponential time.
const maxExpanded = 1 << 20

// sizeOf is y's expanded size (at least 1).
func sizeOf(y *ynode) int {
	if y == nil || y.size < 1 {
		return 1
	}
	return y.size
}

// setSize computes y's expanded size from its children.
func (y *ynode) setSize() {
	n := 1
	for _, c := range append(y.vals, y.items...) {
		n += sizeOf(c)
		if n > maxExpanded {
			n = maxExpanded + 1
			break
		}
	}
	y.size = n
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 200

func posOf(n ast.Node) Position {
	if n == nil || n.GetToken() == nil {
		return Position{}
	}
	p := n.GetToken().Position
	return Position{Line: p.Line, Column: p.Column}
}

// convert turns an AST node into a ynode. anchors maps anchor names to
// their converted values so aliases resolve.
func convert(n ast.Node, anchors map[string]*ynode, depth int) (*ynode, error) {
	if depth > maxDepth {
		return nil, &Error{Pos: posOf(n), Msg: fmt.Sprintf("nesting deeper than %d levels; flatten the document", maxDepth)}
	}
	switch v := n.(type) {
	case nil:
		return &ynode{kind: ynull}, nil
	case *ast.NullNode:
		return &ynode{kind: ynull, pos: posOf(n)}, nil
	case *ast.StringNode:
		return &ynode{kind: yscalar, pos: posOf(n), val: v.Value}, nil
	case *ast.LiteralNode:
		s := ""
		if v.Value != nil {
			s = v.Value.Value
		}
		return &ynode{kind: yscalar, pos: posOf(n), val: s}, nil
	case *ast.IntegerNode:
		return &ynode{kind: yscalar, pos: posOf(n), val: toFloat(v.Value)}, nil
	case *ast.FloatNode:
		return &ynode{kind: yscalar, pos: posOf(n), val: v.Value}, nil
	case *ast.InfinityNode:
		return &ynode{kind: yscalar, pos: posOf(n), val: v.Value}, nil
	case *ast.NanNode:
		return &ynode{kind: yscalar, pos: posOf(n), val: math.NaN()}, nil
	case *ast.BoolNode:
		return &ynode{kind: yscalar, pos: posOf(n), val: v.Value}, nil
	case *ast.TagNode:
		return convert(v.Value, anchors, depth+1)
	case *ast.AnchorNode:
		y, err := convert(v.Value, anchors, depth+1)
		if err != nil {
			return nil, err
		}
		if v.Name != nil {
			anchors[v.Name.String()] = y
		}
		return y, nil
	case *ast.AliasNode:
		name := ""
		if v.Value != nil {
			name = v.Value.String()
		}
		y, ok := anchors[name]
		if !ok {
			return nil, &Error{Pos: posOf(n), Msg: fmt.Sprintf("alias *%s refers to no anchor defined before it; define &%s first", name, name)}
		}
		return y, nil
	case *ast.MappingValueNode:
		m := &ynode{kind: ymap, pos: posOf(n)}
		err := addPair(m, v, anchors, depth)
		m.keyPos()
		m.setSize()
		return m, err
	case *ast.MappingNode:
		m := &ynode{kind: ymap, pos: posOf(n)}
		for _, mv := range v.Values {
			if err := addPair(m, mv, anchors, depth); err != nil {
				return nil, err
			}
		}
		m.keyPos()
		m.setSize()
		return m, nil
	case *ast.SequenceNode:
		s := &ynode{kind: yseq, pos: posOf(n)}
		for _, it := range v.Values {
			y, err := convert(it, anchors, depth+1)
			if err != nil {
				return nil, err
			}
			s.items = append(s.items, y)
		}
		s.setSize()
		return s, nil
	case *ast.CommentGroupNode:
		return &ynode{kind: ynull, pos: posOf(n)}, nil
	default:
		return nil, &Error{Pos: posOf(n), Msg: fmt.Sprintf("unsupported YAML construct %s; use plain mappings, sequences and scalars", n.Type())}
	}
}

func addPair(m *ynode, mv *ast.MappingValueNode, anchors map[string]*ynode, depth int) error {
	if mv == nil {
		return nil
	}
	key := ""
	if mv.Key != nil {
		k, err := convert(mv.Key, anchors, depth+1)
		if err != nil {
			return err
		}
		key = scalarText(k)
	}
	val, err := convert(mv.Value, anchors, depth+1)
	if err != nil {
		return err
	}
	if key == "<<" { // merge key: copy pairs not already present
		srcs := []*ynode{val}
		if val.kind == yseq {
			srcs = val.items
		}
		for _, src := range srcs {
			if src.kind != ymap {
				return &Error{Pos: val.pos, Msg: "merge key << needs a mapping or a list of mappings"}
			}
			for i, k := range src.keys {
				if m.get(k) == nil {
					m.keys, m.kpos, m.vals = append(m.keys, k), append(m.kpos, src.kpos[i]), append(m.vals, src.vals[i])
				}
			}
		}
		return nil
	}
	for i, k := range m.keys {
		if k == key {
			return &Error{Pos: posOf(mv.Key), Msg: fmt.Sprintf("duplicate key %q (first at line %d); remove one", key, m.kpos[i].Line)}
		}
	}
	m.keys = append(m.keys, key)
	m.kpos = append(m.kpos, posOf(mv.Key))
	m.vals = append(m.vals, val)
	return nil
}

// keyPos moves a mapping's position to its first key, where a reader
// looks for it (the AST puts it at the first colon).
func (y *ynode) keyPos() {
	if len(y.kpos) > 0 && y.kpos[0].Line > 0 {
		y.pos = y.kpos[0]
	}
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case int:
		return float64(x)
	case float64:
		return x
	}
	return math.NaN()
}

// get returns the value under key, or nil.
func (y *ynode) get(key string) *ynode {
	if y == nil || y.kind != ymap {
		return nil
	}
	for i, k := range y.keys {
		if k == key {
			return y.vals[i]
		}
	}
	return nil
}

// first returns the value under the first present key.
func (y *ynode) first(keys ...string) *ynode {
	for _, k := range keys {
		if v := y.get(k); v != nil {
			return v
		}
	}
	return nil
}

func scalarText(y *ynode) string {
	if y == nil || y.kind != yscalar {
		return ""
	}
	switch v := y.val.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

func (y *ynode) str() (string, bool) {
	if y == nil || y.kind != yscalar {
		return "", false
	}
	s, ok := y.val.(string)
	return s, ok
}

func (y *ynode) num() (float64, bool) {
	if y == nil || y.kind != yscalar {
		return 0, false
	}
	f, ok := y.val.(float64)
	return f, ok && !math.IsNaN(f)
}

// value converts y to plain Go data (map[string]any, []any, string, float64,
// bool, nil), the same shapes encoding/json produces.
func (y *ynode) value() any {
	if y == nil {
		return nil
	}
	switch y.kind {
	case yscalar:
		return y.val
	case ymap:
		m := make(map[string]any, len(y.keys))
		for i, k := range y.keys {
			m[k] = y.vals[i].value()
		}
		return m
	case yseq:
		s := make([]any, len(y.items))
		for i, it := range y.items {
			s[i] = it.value()
		}
		return s
	}
	return nil
}

func (y *ynode) describe() string {
	if y == nil {
		return "nothing"
	}
	switch y.kind {
	case ymap:
		return "a mapping"
	case yseq:
		return "a list"
	case ynull:
		return "null"
	}
	switch y.val.(type) {
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "a scalar"
}
