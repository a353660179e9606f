package eval

import (
	"errors"
	"fmt"

	"github.com/goccy/go-yaml"

	"github.com/loupe-dev/loupe/internal/yamlpos"
)

// ParseAssertions parses the list of assertions at path (a YAML path such
// as "$.rules[0].assertions") of data, a YAML document that holds
// graders but is not an eval file (loupe serve's rules file), exactly as
// a test case's assertions: list is parsed (LoadStrict): every grader an
// eval file takes, with the same defaults and checks. name is the file as
// errors name it; caseID names the owner of the list in messages.
// Anchors defined anywhere in the document may be used.
//
// Every problem is reported as an *Error with file:line:column, joined
// with errors.Join; on error the slice is nil. An empty or missing list
// is an error: a grader list must grade something. ParseAssertions never
// panics.
func ParseAssertions(name string, data []byte, path, caseID string) (as []Assertion, err error) {
	defer func() {
		if r := recover(); r != nil {
			as, err = nil, panicError(name, r)
		}
	}()
	f, perr := yamlpos.Parse(data)
	if pe, ok := errors.AsType[*yamlpos.PanicError](perr); ok {
		return nil, panicError(name, pe.Value)
	}
	if perr != nil {
		return nil, &Error{File: name, Msg: "invalid YAML: " + syntaxMessage(perr) + "; fix the syntax at this position"}
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return nil, &Error{File: name, Msg: "empty document; add assertions"}
	}
	anchors := map[string]*ynode{}
	root, cerr := convert(f.Docs[0].Body, anchors, 0)
	if cerr == nil && sizeOf(root) > maxExpanded {
		cerr = &Error{Pos: root.pos, Msg: fmt.Sprintf("the file holds more than %d values once its aliases (*name) are expanded; use fewer nested aliases", maxExpanded)}
	}
	if cerr != nil {
		if e, ok := errors.AsType[*Error](cerr); ok {
			e.File = name
		}
		return nil, cerr
	}
	p, perr := yaml.PathString(path)
	if perr != nil {
		return nil, &Error{File: name, Msg: fmt.Sprintf("bad YAML path %q: %v", path, perr)}
	}
	n, ferr := p.FilterFile(f)
	if ferr != nil || n == nil {
		return nil, &Error{File: name, Pos: root.pos, Msg: fmt.Sprintf("%s has no assertions; add assertions: with at least one grader", caseID)}
	}
	list, cerr := convert(n, anchors, 0)
	if cerr != nil {
		if e, ok := errors.AsType[*Error](cerr); ok {
			e.File = name
		}
		return nil, cerr
	}
	fp := &fileParser{name: name, mode: LoadStrict}
	if list.kind == ynull || list.kind == yseq && len(list.items) == 0 {
		return nil, &Error{File: name, Pos: posOf(n), Msg: fmt.Sprintf("%s has no assertions; add at least one grader", caseID)}
	}
	as = fp.assertionList(list, caseID, nil)
	if len(fp.errs) > 0 {
		return nil, errors.Join(fp.errs...)
	}
	return as, nil
}
