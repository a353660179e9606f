package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/goccy/go-yaml"

	"github.com/loupe-dev/loupe/internal/yamlpos"
)

// ParseFile reads and parses the eval file at path. See Parse.
func ParseFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read eval file: %w", err)
	}
	return Parse(path, data)
}

// Parse parses an eval file in either AgentV layout, refusing the file on
// any problem (LoadStrict). name is used in error messages. Every problem
// found is reported, each as an *Error with file:line:column, joined with
// errors.Join; on error the File is nil. Parse never panics.
func Parse(name string, data []byte) (*File, error) {
	return ParseMode(name, data, LoadStrict)
}

// ParseMode is Parse with a choice of what to do with a test or grader that
// has a problem (see LoadMode). Problems with the file as a whole (invalid
// YAML, no tests list) refuse the file in every mode. ParseMode never panics.
func ParseMode(name string, data []byte, mode LoadMode) (f *File, err error) {
	defer func() {
		if r := recover(); r != nil { // reading the AST must not take us down either
			f, err = nil, panicError(name, r)
		}
	}()
	ast, perr := yamlpos.Parse(data)
	if pe, ok := errors.AsType[*yamlpos.PanicError](perr); ok {
		return nil, panicError(name, pe.Value)
	}
	if perr != nil {
		e := &Error{File: name, Msg: "invalid YAML: " + syntaxMessage(perr) + "; fix the syntax at this position"}
		var se *yaml.SyntaxError
		if errors.As(perr, &se) && se.Token != nil {
			e.Pos = Position{Line: se.Token.Position.Line, Column: se.Token.Position.Column}
		}
		return nil, e
	}
	if len(ast.Docs) == 0 || ast.Docs[0].Body == nil {
		return nil, &Error{File: name, Msg: "empty eval file; add a tests: list"}
	}
	if len(ast.Docs) > 1 {
		return nil, &Error{File: name, Pos: posOf(ast.Docs[1].Body), Msg: "more than one YAML document; keep one document per eval file"}
	}
	root, cerr := convert(ast.Docs[0].Body, map[string]*ynode{}, 0)
	if cerr != nil {
		var e *Error
		if errors.As(cerr, &e) {
			e.File = name
		}
		return nil, cerr
	}
	if sizeOf(root) > maxExpanded {
		return nil, &Error{File: name, Pos: root.pos, Msg: fmt.Sprintf("the file holds more than %d values once its aliases (*name) are expanded; use fewer nested aliases", maxExpanded)}
	}
	p := &fileParser{name: name, mode: mode}
	f = p.file(root)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	f.Warnings = p.warnings
	return f, nil
}

// panicError is the error for a file whose reading panicked with v.
func panicError(name string, v any) *Error {
	return &Error{File: name, Msg: fmt.Sprintf("cannot parse YAML (%v); check the file is valid YAML", v)}
}

func syntaxMessage(err error) string {
	var se *yaml.SyntaxError
	if errors.As(err, &se) {
		return se.Message
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// fileParser accumulates errors so that one run reports all of them.
type fileParser struct {
	name     string
	mode     LoadMode
	errs     []error
	warnings []*Error
	// dropTest collects, in LoadAgentV, problems for which AgentV skips
	// the whole test; reset per test.
	dropTest []*Error
}

func (p *fileParser) errorf(pos Position, format string, args ...any) {
	p.classErrorf(errInvalid, pos, format, args...)
}

func (p *fileParser) classErrorf(c errClass, pos Position, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.name, Pos: pos, Msg: fmt.Sprintf(format, args...), class: c})
}

// takeErrs removes and returns the errors recorded since mark.
func (p *fileParser) takeErrs(mark int) []*Error {
	var out []*Error
	for _, e := range p.errs[mark:] {
		out = append(out, e.(*Error))
	}
	p.errs = p.errs[:mark]
	return out
}

func (p *fileParser) warn(e *Error, what string) {
	w := *e
	w.Msg += " (" + what + ")"
	p.warnings = append(p.warnings, &w)
}

func (p *fileParser) file(root *ynode) *File {
	if root.kind != ymap {
		p.errorf(root.pos, "eval file must be a mapping with a tests: list, got %s", root.describe())
		return nil
	}
	f := &File{Path: p.name, Format: FormatCurrent}
	if d, ok := root.get("description").str(); ok {
		f.Description = d
	}
	cases := root.get("tests")
	key := "tests"
	if cases == nil {
		if cases = root.get("eval_cases"); cases != nil {
			key = "eval_cases"
		} else if cases = root.get("evalcases"); cases != nil {
			key, f.Format = "evalcases", FormatV2
		}
	}
	if cases == nil {
		p.errorf(root.pos, "no test cases: add a tests: list (or evalcases: in the v2 format)")
		return nil
	}
	if cases.kind != yseq {
		p.errorf(cases.pos, "%s must be a list of cases, got %s", key, cases.describe())
		return nil
	}
	var rootAsserts *ynode
	if ex := root.get("execution"); ex != nil {
		rootAsserts = ex.first("assertions", "assert", "evaluators")
	}
	if a := root.first("assertions", "assert"); a != nil {
		rootAsserts = a
	}
	seen := map[string]Position{}
	for _, cy := range cases.items {
		mark, wmark := len(p.errs), len(p.warnings)
		p.dropTest = nil
		c, ok := p.testCase(cy, rootAsserts)
		if len(p.dropTest) > 0 {
			p.warnings = p.warnings[:wmark]
			for _, e := range p.dropTest {
				p.warn(e, "test skipped, as AgentV 4.42.4 skips it")
			}
			p.takeErrs(mark)
			continue
		}
		if len(p.warnings) > wmark {
			c.Warnings = append([]*Error(nil), p.warnings[wmark:]...)
		}
		if ok {
			if prev, dup := seen[c.ID]; dup {
				p.errorf(c.Pos, "duplicate case id %q (first at line %d); ids must be unique", c.ID, prev.Line)
				c.ID = fmt.Sprintf("%s@%d", c.ID, c.Pos.Line)
			}
		}
		if p.mode != LoadStrict && len(p.errs) > mark {
			probs := p.takeErrs(mark)
			if p.mode == LoadAgentV {
				for _, e := range probs {
					p.warn(e, "test dropped, as AgentV 4.42.4 does")
				}
				continue
			}
			if !ok {
				c = Case{ID: fmt.Sprintf("line-%d", cy.pos.Line), Pos: cy.pos}
			}
			c.Problems = probs
			ok = true
		}
		if !ok {
			continue
		}
		seen[c.ID] = c.Pos
		f.Cases = append(f.Cases, c)
	}
	return f
}

func (p *fileParser) testCase(cy *ynode, rootAsserts *ynode) (Case, bool) {
	if cy.kind != ymap {
		p.errorf(cy.pos, "a test case must be a mapping with id: and assertions:, got %s", cy.describe())
		return Case{}, false
	}
	c := Case{Pos: cy.pos}
	id, ok := cy.get("id").str()
	if !ok || strings.TrimSpace(id) == "" {
		p.errorf(cy.pos, "test case has no id; add id: <unique-name>")
		return Case{}, false
	}
	c.ID = id
	c.Criteria, _ = cy.first("criteria", "expected_outcome", "description").str()
	c.Input = inputText(cy.first("input", "input_messages"))
	c.Question = questionText(cy.first("input", "input_messages"))
	if c.Input == "" {
		if vars := cy.get("vars"); vars != nil {
			c.Input = inputText(vars.get("input"))
			c.Question = questionText(vars.get("input"))
		}
	}
	expectedCalls := p.expectedMessageCalls(cy.first("expected_messages", "expected_output"))
	c.Reference = referenceAnswer(cy.first("expected_output", "expected_messages"))
	var list *ynode
	skipDefaults := false
	if ex := cy.get("execution"); ex != nil {
		list = ex.get("evaluators")
		skipDefaults = ex.get("skip_defaults").boolean()
	}
	if a := cy.first("assertions", "assert"); a != nil {
		list = a
	} else if list == nil {
		list = cy.get("evaluators")
	}
	c.Assertions = p.assertionList(list, c.ID, expectedCalls)
	if !skipDefaults {
		c.Assertions = append(c.Assertions, p.assertionList(rootAsserts, c.ID, expectedCalls)...)
	}
	return c, true
}

// inputText flattens an input (a string or a list of messages) to the text
// of its user turns.
func inputText(y *ynode) string {
	if s, ok := y.str(); ok {
		return s
	}
	if y == nil || y.kind != yseq {
		return ""
	}
	var parts []string
	for _, m := range y.items {
		if r, _ := m.get("role").str(); r == "user" || r == "" {
			if s, ok := m.get("content").str(); ok {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// questionText is the input as AgentV shows it to a judge (its
// buildPromptInputs): with more than one message holding text, or any
// assistant or tool message, each such message as "@[Role]:\n" and its text,
// separated by blank lines; otherwise the texts, trimmed, separated by blank
// lines.
func questionText(y *ynode) string {
	if s, ok := y.str(); ok {
		return strings.TrimSpace(s)
	}
	if y == nil || y.kind != yseq {
		return ""
	}
	type msg struct {
		role string
		segs []string
	}
	var msgs []msg
	markers, visible := false, 0
	for _, m := range y.items {
		role, _ := m.get("role").str()
		segs := contentSegments(m.get("content"))
		if role == "assistant" || role == "tool" {
			markers = true
		}
		if len(segs) > 0 {
			visible++
		}
		msgs = append(msgs, msg{role, segs})
	}
	var parts []string
	if markers || visible > 1 {
		for _, m := range msgs {
			if len(m.segs) == 0 {
				continue
			}
			label := m.role
			if r, n := utf8.DecodeRuneInString(label); n > 0 {
				label = string(unicode.ToUpper(r)) + label[n:]
			}
			parts = append(parts, "@["+label+"]:\n"+strings.Join(m.segs, "\n"))
		}
		return strings.Join(parts, "\n\n")
	}
	for _, m := range msgs {
		for _, s := range m.segs {
			if s = strings.TrimSpace(s); s != "" {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "\n\n")
}

// contentSegments are the texts of a message's content, as AgentV's
// extractContentSegments gives them: a string, an object as indented JSON,
// or the strings and {type: text, value} items of a list; blank ones
// dropped, the others untrimmed.
func contentSegments(c *ynode) []string {
	var out []string
	add := func(s string) {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	switch {
	case c == nil:
	case c.kind == yscalar:
		if s, ok := c.str(); ok {
			add(s)
		}
	case c.kind == ymap:
		if b, err := json.MarshalIndent(c.value(), "", "  "); err == nil {
			add(string(b))
		}
	case c.kind == yseq:
		for _, seg := range c.items {
			if s, ok := seg.str(); ok {
				add(s)
			} else if t, _ := seg.get("type").str(); t == "text" {
				s, _ := seg.get("value").str()
				add(s)
			}
		}
	}
	return out
}

// expectedMessageCalls collects the tool_calls of assistant turns in
// expected_messages, for the expected_messages evaluator.
func (p *fileParser) expectedMessageCalls(y *ynode) []ExpectedCall {
	if y == nil || y.kind != yseq {
		return nil
	}
	var out []ExpectedCall
	for _, m := range y.items {
		tcs := m.get("tool_calls")
		if tcs == nil {
			continue
		}
		if tcs.kind != yseq {
			p.errorf(tcs.pos, "tool_calls must be a list of {tool, input, output}, got %s", tcs.describe())
			continue
		}
		for _, tc := range tcs.items {
			name, ok := tc.first("tool", "name").str()
			if !ok || name == "" {
				p.errorf(tc.pos, "expected tool call has no tool name; add tool: <name>")
				continue
			}
			ec := ExpectedCall{Tool: name, Pos: tc.pos}
			if in := tc.get("input"); in != nil && in.kind != ynull {
				if in.kind != ymap {
					p.errorf(in.pos, "input of %s must be a mapping of arguments, got %s", name, in.describe())
					continue
				}
				ec.Args = in.value().(map[string]any)
			}
			out = append(out, ec)
		}
	}
	return out
}
