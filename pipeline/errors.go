package pipeline

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
)

// Layer names the check that found an error.
type Layer string

// The layers, in the order Validate runs them.
const (
	// LayerSyntax: the file is not a YAML mapping Parse can read.
	LayerSyntax Layer = "syntax"
	// LayerSchema: the file breaks the JSON Schema (schema.PipelineV1).
	LayerSchema Layer = "schema"
	// LayerSemantic: servers, steps, parameters, variables, routes, loops.
	LayerSemantic Layer = "semantic"
	// LayerContract: a step does not give what its tool's contract requires.
	LayerContract Layer = "contract"
	// LayerRead: the file could not be read (Load only).
	LayerRead Layer = "read"
)

// Error is one problem in a pipeline file.
type Error struct {
	// File is the file name given to Parse.
	File string
	// Pos is where the problem is; zero when it concerns the whole file.
	Pos Pos
	// Layer is the check that found it.
	Layer Layer
	// Msg says what is wrong and, after "; ", what was expected.
	Msg string
}

// Error returns "file:line:column: message" ("file: message" without a
// position).
func (e *Error) Error() string {
	if !e.Pos.IsValid() {
		return e.File + ": " + e.Msg
	}
	return e.File + ":" + e.Pos.String() + ": " + e.Msg
}

// MarshalJSON encodes e as {"file", "line", "column", "layer", "message"}
// (line and column 0 when the error has no position).
func (e *Error) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Column  int    `json:"column"`
		Layer   Layer  `json:"layer"`
		Message string `json:"message"`
	}{e.File, e.Pos.Line, e.Pos.Column, e.Layer, e.Msg})
}

// ErrorList is every problem found in a file, sorted by position (then
// layer and message) by the functions that return it. It implements error;
// use Err to turn an empty list into a nil error.
type ErrorList []*Error

// Error returns the errors one per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Err returns l, or nil when l is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// sort orders l by position, layer and message, and drops exact duplicates.
func (l ErrorList) sort() ErrorList {
	slices.SortStableFunc(l, func(a, b *Error) int {
		if c := cmp.Compare(a.Pos.Line, b.Pos.Line); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Pos.Column, b.Pos.Column); c != 0 {
			return c
		}
		if c := cmp.Compare(layerOrder(a.Layer), layerOrder(b.Layer)); c != 0 {
			return c
		}
		return cmp.Compare(a.Msg, b.Msg)
	})
	return slices.CompactFunc(l, func(a, b *Error) bool { return *a == *b })
}

func layerOrder(l Layer) int {
	switch l {
	case LayerSyntax:
		return 0
	case LayerSchema:
		return 1
	case LayerSemantic:
		return 2
	}
	return 3
}

// errs collects errors of one file.
type errs struct {
	file string
	list ErrorList
}

func (e *errs) add(layer Layer, pos Pos, msg string) {
	e.list = append(e.list, &Error{File: e.file, Pos: pos, Layer: layer, Msg: msg})
}
