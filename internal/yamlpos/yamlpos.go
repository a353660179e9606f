// Package yamlpos holds what Loupe's YAML readers share on top of
// github.com/goccy/go-yaml: parsing and decoding that turn the library's
// panics on malformed input into errors, the file:line:column where the
// node at a YAML path starts, and errors that begin with file:line:column.
// It is safe for concurrent use; it keeps no state.
package yamlpos

import (
	"errors"
	"fmt"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// A PanicError is what Parse and DecodeFile return in place of a panic in
// go-yaml, so that a reader with its own wording can tell it from a
// syntax error.
type PanicError struct {
	// Value is the value go-yaml panicked with.
	Value any

	decode bool // from decoding rather than parsing
}

func (e *PanicError) Error() string {
	if e.decode {
		return fmt.Sprintf("the YAML is malformed and could not be decoded (go-yaml: %v); check the indentation and tags", e.Value)
	}
	return fmt.Sprintf("the YAML is malformed and could not be parsed (go-yaml: %v)", e.Value)
}

// Parse is parser.ParseBytes with a panic turned into a *PanicError:
// go-yaml panics on some malformed input, and bad input must not crash
// Loupe.
func Parse(data []byte) (f *ast.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, &PanicError{Value: p}
		}
	}()
	return parser.ParseBytes(data, 0)
}

// DecodeFile parses data, a file that must hold one YAML document, and
// decodes it into v (a pointer), rejecting unknown keys; it returns the
// parsed file for At. Its errors begin with filename and, where go-yaml
// gives one, the line and column. what names the kind of file ("script",
// "config") in them, and hint says what to write when the document is
// empty.
func DecodeFile(data []byte, filename, what, hint string, v any) (*ast.File, error) {
	f, err := Parse(data)
	if err != nil {
		return nil, posError(filename, err)
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return nil, fmt.Errorf("%s:1:1: the %s is empty; %s", filename, what, hint)
	}
	if len(f.Docs) > 1 {
		return nil, fmt.Errorf("%s: the %s holds %d YAML documents; write one", filename, what, len(f.Docs))
	}
	if err := decode(f.Docs[0].Body, v); err != nil {
		return nil, posError(filename, err)
	}
	return f, nil
}

// decode decodes node into v (a pointer), rejecting unknown keys, with a
// panic turned into a *PanicError (go-yaml v1.19.2 panics on, for one, a
// tag with no value inside a sequence).
func decode(node ast.Node, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, decode: true}
		}
	}()
	return yaml.NodeToValue(node, v, yaml.DisallowUnknownField())
}

// nodePos returns where n begins: for a mapping, its first key rather
// than the ":" go-yaml reports. It returns nil when n carries no position.
func nodePos(n ast.Node) *token.Position {
	switch m := n.(type) {
	case *ast.MappingNode:
		if m.IsFlowStyle && m.Start != nil {
			return m.Start.Position
		}
		if len(m.Values) > 0 {
			return nodePos(m.Values[0])
		}
	case *ast.MappingValueNode:
		return nodePos(m.Key)
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Position
	}
	return nil
}

// At returns where the node at path (a YAML path such as "$.turns[0]")
// begins in f, as "filename:line:column"; filename alone when path is
// malformed or names nothing in f.
func At(f *ast.File, filename, path string) string {
	if p, err := yaml.PathString(path); err == nil {
		if n, err := p.FilterFile(f); err == nil && n != nil {
			if pos := nodePos(n); pos != nil {
				return fmt.Sprintf("%s:%d:%d", filename, pos.Line, pos.Column)
			}
		}
	}
	return filename
}

// posError puts filename and the position of a go-yaml error in front of
// its message ("file:line:column: message"); other errors get the file
// name.
func posError(filename string, err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			return fmt.Errorf("%s:%d:%d: %s", filename, tk.Position.Line, tk.Position.Column, ye.GetMessage())
		}
		return fmt.Errorf("%s: %s", filename, ye.GetMessage())
	}
	return fmt.Errorf("%s: %v", filename, err)
}
