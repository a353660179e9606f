package pipeline

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

// realPipelines are the pipeline files under testdata/real, with the
// dialect each is written in.
var realPipelines = []struct {
	file    string
	dialect Dialect
}{
	{"omni/demo-branch.yaml", Omni},
	{"omni/demo-loop.yaml", Omni},
	{"omni/demo-rag.yaml", Omni},
	{"omni/demo-simple.yaml", Omni},
	{"omni/ultrarag_complex.yaml", Omni},
	{"ultrarag/ircot.yaml", UltraRAG},
	{"ultrarag/rag_branch.yaml", UltraRAG},
	{"ultrarag/rag_loop.yaml", UltraRAG},
	{"ultrarag/search_r1.yaml", UltraRAG},
	{"ultrarag/vanilla_rag.yaml", UltraRAG},
}

func parseReal(t *testing.T, rel string) *Pipeline {
	t.Helper()
	src, err := os.ReadFile(testrepo.Real(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(rel, src)
	if err != nil {
		t.Fatalf("Parse(%s): %v", rel, err)
	}
	return p
}

func TestPipelineParseRealDialects(t *testing.T) {
	for _, tc := range realPipelines {
		t.Run(tc.file, func(t *testing.T) {
			p := parseReal(t, tc.file)
			if p.Dialect != tc.dialect {
				t.Errorf("Dialect = %v, want %v", p.Dialect, tc.dialect)
			}
			if len(p.Steps) == 0 || len(p.Servers) == 0 {
				t.Errorf("got %d steps and %d servers, want some of each", len(p.Steps), len(p.Servers))
			}
		})
	}
}

// TestPipelineParseUltraRAGComplex checks the tree and its positions
// against the file, node by node for one step of each kind.
func TestPipelineParseUltraRAGComplex(t *testing.T) {
	p := parseReal(t, "omni/ultrarag_complex.yaml")
	var servers []string
	for _, s := range p.Servers {
		servers = append(servers, s.Name+"="+s.Kind.String()+":"+s.Builtin+"@"+s.Pos.String())
	}
	if want := []string{"retriever=builtin:retriever@2:3", "generator=builtin:generator@3:3", "evaluator=builtin:evaluator@4:3"}; !reflect.DeepEqual(servers, want) {
		t.Errorf("servers = %q, want %q", servers, want)
	}
	if q := p.Parameter("quality_threshold"); q == nil || q.Value != 0.8 || q.Pos != (Pos{8, 3}) {
		t.Errorf("quality_threshold = %+v", q)
	}
	if q := p.Parameter("max_iterations"); q == nil || q.Value != int64(3) {
		t.Errorf("max_iterations = %+v", q)
	}
	if len(p.Steps) != 3 {
		t.Fatalf("got %d top-level steps, want 3", len(p.Steps))
	}
	search := p.Steps[0].(*ToolStep)
	if search.Name() != "retriever.hybrid_search" || search.Pos != (Pos{12, 5}) || search.InputPos != (Pos{13, 7}) {
		t.Errorf("step 0 = %s at %s, input at %s", search.Name(), search.Pos, search.InputPos)
	}
	wantIn := []Input{
		{Arg: "query", Pos: Pos{14, 9}, Kind: InputRef, Ref: "query", ValuePos: Pos{14, 16}},
		{Arg: "collection", Pos: Pos{15, 9}, Kind: InputLiteral, Literal: "knowledge", ValuePos: Pos{15, 21}},
		{Arg: "top_k", Pos: Pos{16, 9}, Kind: InputLiteral, Literal: int64(5), ValuePos: Pos{16, 16}},
	}
	for i, in := range search.Input {
		if !reflect.DeepEqual(*in, wantIn[i]) {
			t.Errorf("input %d = %+v, want %+v", i, *in, wantIn[i])
		}
	}
	if len(search.Output) != 1 || *search.Output[0] != (Output{Result: "results", Var: "results", Pos: Pos{18, 11}}) || search.OutputMap {
		t.Errorf("output = %+v", search.Output)
	}
	loop := p.Steps[2].(*LoopStep)
	if loop.Pos != (Pos{25, 5}) || loop.Max != 3 || loop.MaxKey != "max_iterations" || loop.MaxPos != (Pos{26, 7}) || len(loop.Steps) != 3 {
		t.Errorf("loop = %+v", loop)
	}
	br := loop.Steps[2].(*BranchStep)
	if br.Router != "check_quality" || br.RouterSteps != nil || br.Field != "routing_reason" || br.FieldPos != (Pos{43, 20}) || br.RouterPos != (Pos{42, 21}) {
		t.Errorf("branch = %+v", br)
	}
	var names []string
	for _, b := range br.Branches {
		names = append(names, b.Name)
	}
	if !reflect.DeepEqual(names, []string{"continue", "complete"}) {
		t.Errorf("branches in order = %q, want continue, complete (as written)", names)
	}
	if got := br.Route("improvement_failed"); got == nil || got.Name != "complete" {
		t.Errorf("Route(improvement_failed) = %v, want complete", got)
	}
	if got := br.Route("continue"); got == nil || got.Name != "continue" {
		t.Errorf("Route(continue) = %v, want continue", got)
	}
	if got := br.Route("nope"); got != nil {
		t.Errorf("Route(nope) = %v, want nil", got)
	}
}

func TestPipelineParseUltraRAGDialect(t *testing.T) {
	p := parseReal(t, "ultrarag/rag_branch.yaml")
	loop := p.Steps[4].(*LoopStep)
	if loop.Max != 10 || loop.MaxKey != "times" {
		t.Errorf("loop bound = %d (%s), want 10 (times)", loop.Max, loop.MaxKey)
	}
	br := loop.Steps[2].(*BranchStep)
	if br.Router != "router.check_model_state" || len(br.RouterSteps) != 1 {
		t.Errorf("router = %q with %d steps", br.Router, len(br.RouterSteps))
	}
	if len(br.Branches) != 2 || br.Branches[1].Name != "stop" || len(br.Branches[1].Steps) != 0 {
		t.Errorf("branches = %+v, want continue and an empty stop", br.Branches)
	}
	gen := br.Branches[0].Steps[1].(*ToolStep)
	if !gen.OutputMap || len(gen.Output) != 1 || gen.Output[0].Result != "ans_ls" || gen.Output[0].Var != "subq_ls" {
		t.Errorf("generation.generate output = %+v", gen.Output)
	}
	ret := br.Branches[0].Steps[2].(*ToolStep)
	if in := ret.Input[0]; in.Kind != InputRef || in.Ref != "subq_ls" || in.Arg != "query_list" {
		t.Errorf("retriever input = %+v, want query_list reading the variable subq_ls", in)
	}
	if s := p.Server("retriever"); s.Kind != ServerCommand || !reflect.DeepEqual(s.Argv, []string{"servers/retriever"}) {
		t.Errorf("retriever server = %+v", s)
	}
}

func TestPipelineParseSyntaxErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"invalid yaml", "servers:\n  a: [1, 2\n", "f.yaml:2:"},
		{"not a mapping", "- a.b\n", "f.yaml:1:1: the file holds a list; expected a mapping with `servers` and `pipeline`"},
		{"empty", "# nothing\n", "f.yaml: empty file; expected a mapping with `servers` and `pipeline`"},
		{"two documents", "pipeline: [a.b]\n---\npipeline: [c.d]\n", "f.yaml:3:1: more than one YAML document; expected one pipeline per file"},
		{"alias", "parameters:\n  a: &x 1\n  b: *x\npipeline: [a.b]\n", "f.yaml:3:6: YAML aliases (*name) are not supported in pipelines; expected the value written out"},
		{"merge key", "x: &x {a: 1}\ny:\n  <<: *x\n", "f.yaml:3:3: YAML merge keys (<<) are not supported in pipelines; expected the keys written out"},
		{"deep flow", "pipeline: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n", "f.yaml:1:74: YAML nested more than 64 levels deep; expected a shallower pipeline"},
		{"deep block", deepBlock(70), "YAML nested more than 64 levels deep; expected a shallower pipeline"},
		{"duplicate key", "pipeline: [a.b]\npipeline: [c.d]\n", "f.yaml:2:1: invalid YAML:"},
		{"too big", "pipeline: [a.b]\n#" + strings.Repeat("x", MaxFileSize) + "\n", "f.yaml: file is over 64 KiB; expected a pipeline of at most 65536 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("f.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want error %q", p, tc.want)
			}
			if p != nil {
				t.Errorf("Parse returned a pipeline with its error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func deepBlock(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i))
		b.WriteString("k:\n")
	}
	return b.String()
}

func TestPipelineSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"servers/retriever", []string{"servers/retriever"}, true},
		{"python3  srv.py --x 1", []string{"python3", "srv.py", "--x", "1"}, true},
		{`node "my server.js" 'a b' c\ d`, []string{"node", "my server.js", "a b", "c d"}, true},
		{"sh -c 'rm -rf /; $(x)' | y", []string{"sh", "-c", "rm -rf /; $(x)", "|", "y"}, true},
		{`a "b`, []string{"a", "b"}, false},
		{`""`, []string{""}, true},
	}
	for _, tc := range tests {
		got, ok := splitWords(tc.in)
		if !reflect.DeepEqual(got, tc.want) || ok != tc.ok {
			t.Errorf("splitWords(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// BenchmarkPipelineParseValidate parses and validates omni's largest real
// pipeline (ultrarag_complex.yaml, 1.6 KB).
func BenchmarkPipelineParseValidate(b *testing.B) {
	src, err := os.ReadFile(testrepo.Real(b, "omni/ultrarag_complex.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := Parse("f.yaml", src)
		if err != nil {
			b.Fatal(err)
		}
		if errs := p.Validate(); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// TestPipelineParseYAMLForms reads parameters written in YAML's other
// forms: anchors without aliases, tags, block scalars, numbers of each
// kind, null, complex and numeric keys.
func TestPipelineParseYAMLForms(t *testing.T) {
	src := `parameters:
  anchored: &a 1
  tagged: !!str 5
  literal: |
    line one
    line two
  folded: >
    a
    b
  float: 0.5
  inf: .inf
  nan: .nan
  big: 18446744073709551615
  yes: true
  none: null
  empty:
  list: [1, "two", {three: 3}]
  ? complex
  : value
  1: numeric key
pipeline: [s.t]
servers: {s: servers/s}
`
	p, err := Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) any {
		q := p.Parameter(name)
		if q == nil {
			t.Fatalf("no parameter %s", name)
		}
		return q.Value
	}
	checks := map[string]any{
		"anchored": int64(1), "tagged": "5", "literal": "line one\nline two\n", "folded": "a b\n",
		"float": 0.5, "big": float64(18446744073709551615), "yes": true, "none": nil, "empty": nil,
		"complex": "value", "1": "numeric key",
	}
	for name, want := range checks {
		if got := get(name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}
	if v, ok := get("inf").(float64); !ok || v < 1e308 {
		t.Errorf("inf = %v", get("inf"))
	}
	if v, ok := get("nan").(float64); !ok || v == v {
		t.Errorf("nan = %v", get("nan"))
	}
	if got, want := get("list"), []any{int64(1), "two", map[string]any{"three": int64(3)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("list = %#v, want %#v", got, want)
	}
	if q := p.Parameter("empty"); q.ValuePos != q.Pos {
		t.Errorf("an empty value is at %s, want its key's position %s", q.ValuePos, q.Pos)
	}
	// Numeric and complex keys are not names: the schema layer says so.
	var msgs []string
	for _, e := range p.Validate() {
		msgs = append(msgs, e.Error())
	}
	want := []string{
		"f.yaml:20:3: key `1` in `parameters` is not a valid name; expected a name of letters, digits and `_` that does not start with a digit",
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("Validate = %q, want %q", msgs, want)
	}
}
