package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/tool"
)

type point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

type shapeIn struct {
	Name   string   `json:"name" jsonschema:"the shape's name"`
	Points []point  `json:"points"`
	Tags   []string `json:"tags,omitempty"`
	Scale  int      `json:"scale,omitempty"`
}

func shapeTool() *tool.FuncTool[shapeIn, int] {
	return tool.Func("shape", "Count points.", func(_ context.Context, in shapeIn) (int, error) {
		if in.Name == "boom" {
			return 0, errors.New("boom")
		}
		return len(in.Points) * max(in.Scale, 1), nil
	})
}

func TestSchemaFromType(t *testing.T) {
	d := shapeTool().Definition()
	if d.Name != "shape" || d.Description != "Count points." {
		t.Fatalf("definition = %+v", d)
	}
	var s struct {
		Type       string                     `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(d.Schema, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || strings.Join(s.Required, ",") != "name,points" || len(s.Properties) != 4 {
		t.Errorf("schema = %s", d.Schema)
	}
	if !strings.Contains(string(s.Properties["name"]), `"description":"the shape's name"`) {
		t.Errorf("name property = %s", s.Properties["name"])
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		input string
		want  string // error substring; "" for success
		out   string
	}{
		{`{"name":"sq","points":[{"x":0,"y":0},{"x":1,"y":1}]}`, "", "2"},
		{`{"name":"sq","points":[],"scale":3}`, "", "0"},
		{`{"points":[]}`, `invalid input for tool shape: missing required field "name"`, ""},
		{`{"name":3,"points":[]}`, `invalid input for tool shape: field "name": type: 3 has type "integer", want "string"`, ""},
		{`{"name":"a","points":[{"x":"1","y":2}]}`, `field "points[].x"`, ""},
		{`{"name":"a","points":[{"x":1}]}`, `missing required field "points[].y"`, ""},
		{`{"name":"a","points":[],"color":"red"}`, `unknown field "color"`, ""},
		{`{"name":"a","points":[],"scale":1.5}`, `field "scale"`, ""},
		{`[1,2]`, `invalid input for tool shape: type: [1 2] has type "array", want "object"`, ""},
		{`{"name":`, `the input is not valid JSON`, ""},
		{``, `missing required field "name", "points"`, ""},
		{`{"name":"boom","points":[]}`, `boom`, ""},
	}
	f := shapeTool()
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			out, err := f.Call(context.Background(), json.RawMessage(tt.input))
			if tt.want == "" {
				if err != nil || string(out) != tt.out {
					t.Fatalf("Call = %s, %v; want %s", out, err, tt.out)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Call error = %v, want it to contain %q", err, tt.want)
			}
			var ie *tool.InputError
			if tt.want != "boom" && !errors.As(err, &ie) {
				t.Errorf("error %T is not an *InputError", err)
			}
		})
	}
}

func TestBadInputType(t *testing.T) {
	_, err := tool.NewFunc("bad", "", func(context.Context, chan int) (int, error) { return 0, nil })
	if err == nil || !strings.Contains(err.Error(), `tool.Func "bad": cannot derive a JSON Schema`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := tool.NewFunc("", "", func(context.Context, point) (int, error) { return 0, nil }); err == nil {
		t.Fatal("empty name accepted")
	}
}

func ExampleFunc() {
	type weatherIn struct {
		City string `json:"city" jsonschema:"the city, e.g. Paris"`
		Days int    `json:"days,omitempty" jsonschema:"how many days ahead (default 1)"`
	}
	weather := tool.Func("weather", "Forecast the weather.", func(_ context.Context, in weatherIn) (string, error) {
		return fmt.Sprintf("sunny in %s for %d day(s)", in.City, max(in.Days, 1)), nil
	})
	fmt.Println(string(weather.Definition().Schema))

	out, err := weather.Call(context.Background(), json.RawMessage(`{"city":"Paris","days":2}`))
	fmt.Println(string(out), err)

	_, err = weather.Call(context.Background(), json.RawMessage(`{"days":"two"}`))
	fmt.Println(err)
	// Output:
	// {"type":"object","properties":{"city":{"type":"string","description":"the city, e.g. Paris"},"days":{"type":"integer","description":"how many days ahead (default 1)"}},"required":["city"],"additionalProperties":false}
	// "sunny in Paris for 2 day(s)" <nil>
	// invalid input for tool weather: field "days": type: two has type "string", want "integer"
}
