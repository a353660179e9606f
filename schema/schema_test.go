package schema_test

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/loupe-dev/loupe/schema"
)

// TestPipelineSchemaResolves checks that the published pipeline schema is
// a draft 2020-12 schema jsonschema-go resolves, and that it accepts and
// refuses what it should. (Package pipeline checks it against every real
// pipeline file and every bad one in its tests.)
func TestPipelineSchemaResolves(t *testing.T) {
	var s jsonschema.Schema
	if err := json.Unmarshal(schema.PipelineV1, &s); err != nil {
		t.Fatal(err)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" || s.ID == "" {
		t.Errorf("$schema = %q, $id = %q", s.Schema, s.ID)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]any{
		"servers":  map[string]any{"generator": "builtin"},
		"pipeline": []any{"generator.draft", map[string]any{"loop": map[string]any{"times": 2.0, "steps": []any{"generator.reflect"}}}},
	}
	if err := rs.Validate(good); err != nil {
		t.Errorf("a valid pipeline is refused: %v", err)
	}
	for name, bad := range map[string]map[string]any{
		"no pipeline": {"servers": map[string]any{}},
		"unknown key": {"pipeline": []any{"a.b"}, "stages": 1.0},
		"bad step":    {"pipeline": []any{"nodot"}},
		"zero loop":   {"pipeline": []any{map[string]any{"loop": map[string]any{"times": 0.0, "steps": []any{"a.b"}}}}},
	} {
		if err := rs.Validate(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
