// Package tool builds agent tools from plain Go functions. The input's
// JSON Schema is derived from the Go type, and every input is validated
// against it before the function runs, so the function only ever sees
// input that fits and a model that sends a bad one is told which field is
// wrong.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loupe-dev/loupe/agent"
)

// FuncTool is an agent.Tool that calls a Go function with typed input.
// It is safe for concurrent use if the function is.
type FuncTool[In, Out any] struct {
	def      agent.ToolDef
	resolved *jsonschema.Resolved
	fn       func(context.Context, In) (Out, error)
}

// Func returns a tool named name that calls fn. In is usually a struct:
// its exported fields, by their json names, are the input's properties;
// fields without omitempty/omitzero are required; a `jsonschema:"…"` tag
// describes a field to the model. Out is encoded with encoding/json.
//
// Func panics if no JSON Schema can be derived from In (channels,
// functions, maps with non-string keys, cycles), which is a programming
// error found the first time the program runs.
func Func[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) *FuncTool[In, Out] {
	t, err := NewFunc(name, description, fn)
	if err != nil {
		panic(err)
	}
	return t
}

// NewFunc is Func returning an error instead of panicking.
func NewFunc[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) (*FuncTool[In, Out], error) {
	if name == "" {
		return nil, errors.New("tool.Func: the name is empty")
	}
	s, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("tool.Func %q: cannot derive a JSON Schema from the input type: %w", name, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("tool.Func %q: the derived JSON Schema does not resolve: %w", name, err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("tool.Func %q: encoding its JSON Schema: %w", name, err)
	}
	return &FuncTool[In, Out]{
		def:      agent.ToolDef{Name: name, Description: description, Schema: raw},
		resolved: rs,
		fn:       fn,
	}, nil
}

// Definition returns the tool's name, description and input schema.
func (t *FuncTool[In, Out]) Definition() agent.ToolDef { return t.def }

// Call validates input against the schema, decodes it into In, calls the
// function and encodes its result. A validation error names the tool and
// the offending field; it is returned without calling the function.
func (t *FuncTool[In, Out]) Call(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
	in, err := t.decode(input)
	if err != nil {
		return nil, err
	}
	out, err := t.fn(ctx, in)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding its result: %w", t.def.Name, err)
	}
	return b, nil
}

func (t *FuncTool[In, Out]) decode(input json.RawMessage) (In, error) {
	var in In
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return in, &InputError{Tool: t.def.Name, Msg: "the input is not valid JSON: " + err.Error()}
	}
	if err := t.resolved.Validate(v); err != nil {
		return in, &InputError{Tool: t.def.Name, Msg: cleanSchemaError(err)}
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return in, &InputError{Tool: t.def.Name, Msg: err.Error()}
	}
	return in, nil
}

// An InputError reports tool input that does not satisfy the tool's
// schema. The function was not called.
type InputError struct {
	Tool string // the tool's name
	Msg  string // what is wrong, naming the field
}

// Error names the tool and what is wrong with the input.
func (e *InputError) Error() string {
	return fmt.Sprintf("invalid input for tool %s: %s", e.Tool, e.Msg)
}

// cleanSchemaError rewrites the validator's message, which nests
// "validating /properties/a: validating /properties/a/properties/b: type: …",
// into one that names the field the way the model wrote it: "field a.b: …".
func cleanSchemaError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "validating root: ")
	field := ""
	for strings.HasPrefix(msg, "validating ") {
		i := strings.Index(msg, ": ")
		if i < 0 {
			break
		}
		field = pointerField(msg[len("validating "):i])
		msg = msg[i+2:]
	}
	join := func(name string) string {
		if field == "" {
			return name
		}
		return field + "." + name
	}
	// The validator lists names as Go-quoted strings: ["a" "b"].
	names := func(list string) []string {
		var ns []string
		for _, q := range quoted.FindAllString(list, -1) {
			if n, err := strconv.Unquote(q); err == nil {
				ns = append(ns, fmt.Sprintf("%q", join(n)))
			}
		}
		return ns
	}
	if rest, ok := strings.CutPrefix(msg, "required: missing properties: "); ok {
		if ns := names(rest); ns != nil {
			return "missing required field " + strings.Join(ns, ", ")
		}
	}
	if rest, ok := strings.CutPrefix(msg, "unexpected additional properties "); ok {
		if ns := names(rest); ns != nil {
			return "unknown field " + strings.Join(ns, ", ")
		}
	}
	if field == "" {
		return msg
	}
	return fmt.Sprintf("field %q: %s", field, msg)
}

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// pointerField turns a schema location such as
// "/properties/a/items/properties/b" into "a[].b".
func pointerField(ptr string) string {
	var b strings.Builder
	segs := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i := 0; i < len(segs); i++ {
		switch segs[i] {
		case "properties", "additionalProperties", "patternProperties":
			if segs[i] == "properties" && i+1 < len(segs) {
				i++
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i]))
			}
		case "items", "prefixItems":
			b.WriteString("[]")
		}
	}
	return b.String()
}
