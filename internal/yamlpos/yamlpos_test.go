package yamlpos

import "testing"

func TestAt(t *testing.T) {
	f, err := Parse([]byte("model: m\nturns:\n  - text: hi\n  - {text: bye}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"$":          "s.yaml:1:1",
		"$.turns":    "s.yaml:3:3",
		"$.turns[1]": "s.yaml:4:5",
		"$.nothing":  "s.yaml",
		"not a path": "s.yaml",
	} {
		if got := At(f, "s.yaml", path); got != want {
			t.Errorf("At(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestError(t *testing.T) {
	_, err := Parse([]byte("a: [b"))
	if err == nil {
		t.Fatal("Parse of an unclosed sequence: no error")
	}
	if got, want := posError("f.yaml", err).Error(), "f.yaml:1:4: sequence end token ']' not found"; got != want {
		t.Errorf("posError = %q, want %q", got, want)
	}
	pe := error(&PanicError{Value: "boom"})
	if got, want := posError("f.yaml", pe).Error(), "f.yaml: the YAML is malformed and could not be parsed (go-yaml: boom)"; got != want {
		t.Errorf("posError(PanicError) = %q, want %q", got, want)
	}
}

func TestDecodeFile(t *testing.T) {
	var v struct {
		Name string `yaml:"name"`
	}
	for data, want := range map[string]string{
		"":                      `f.yaml:1:1: the thing is empty; write "name:"`,
		"name: a\n---\nname: b": "f.yaml: the thing holds 2 YAML documents; write one",
		"name: x\ncolour: red":  "f.yaml:2:1: unknown field \"colour\"",
	} {
		_, err := DecodeFile([]byte(data), "f.yaml", "thing", `write "name:"`, &v)
		if err == nil || err.Error() != want {
			t.Errorf("DecodeFile(%q) = %v, want %s", data, err, want)
		}
	}
	if _, err := DecodeFile([]byte("name: x"), "f.yaml", "thing", "", &v); err != nil || v.Name != "x" {
		t.Errorf("DecodeFile = %v, name %q", err, v.Name)
	}
}
