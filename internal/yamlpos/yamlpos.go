// Package yamlpos holds what Loupe's YAML readers share on top of
// github.com/goccy/go-yaml: parsing and decoding that turn the library's
// panics on malformed input into errors, the position a node starts at,
// and errors that begin with file:line:column. It is safe for concurrent
// use; it keeps no state.
package yamlpos

import (
	"errors"
	"fmt"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Parse is parser.ParseBytes with a panic turned into an error: go-yaml
// panics on some malformed input, and bad input must not crash Loupe.
func Parse(data []byte) (f *ast.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the YAML is malformed and could not be parsed (go-yaml: %v)", p)
		}
	}()
	return parser.ParseBytes(data, 0)
}

// Decode decodes node into v (a pointer), rejecting unknown keys, with a
// panic turned into an error (go-yaml v1.19.2 panics on, for one, a tag
// with no value inside a sequence).
func Decode(node ast.Node, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the YAML is malformed and could not be decoded (go-yaml: %v); check the indentation and tags", p)
		}
	}()
	return yaml.NodeToValue(node, v, yaml.DisallowUnknownField())
}

// NodePos returns where n begins: for a mapping, its first key rather
// than the ":" go-yaml reports. It returns nil when n carries no position.
func NodePos(n ast.Node) *token.Position {
	switch m := n.(type) {
	case *ast.MappingNode:
		if m.IsFlowStyle && m.Start != nil {
			return m.Start.Position
		}
		if len(m.Values) > 0 {
			return NodePos(m.Values[0])
		}
	case *ast.MappingValueNode:
		return NodePos(m.Key)
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Position
	}
	return nil
}

// Error puts filename and the position of a go-yaml error in front of its
// message ("file:line:column: message"); other errors get the file name.
func Error(filename string, err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			return fmt.Errorf("%s:%d:%d: %s", filename, tk.Position.Line, tk.Position.Column, ye.GetMessage())
		}
		return fmt.Errorf("%s: %s", filename, ye.GetMessage())
	}
	return fmt.Errorf("%s: %v", filename, err)
}
