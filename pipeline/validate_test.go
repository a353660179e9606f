package pipeline

import (
	"slices"
	"strings"
	"testing"
)

// TestPipelineValidateReal validates every real pipeline file and checks
// the exact errors each deserves.
//
//   - demo-branch.yaml routes on `check_quality`, Loupe's built-in quality
//     router (omni's logical router name), whose route is `high_quality` or
//     `low_quality` (its route_sets; `complete`/`continue` is its loop
//     decision): its branches are exactly those, so it is valid.
//   - demo-loop.yaml is a branch on the same router with `continue` and
//     `complete` branches, which is right; its `max_iterations` is only a
//     parameter (omni's evaluator reads it from the state), and the file
//     has no `loop` to bound, so no loop error.
//   - demo-rag.yaml's bare `retriever.search` reads `query` by name, which
//     is a parameter, so its contract is met.
//   - ultrarag_complex.yaml: every `$` reference is a parameter or an
//     earlier output, also on the loop's first pass; the branch reads its
//     route from `routing_reason`, which the evaluator step writes.
//   - The UltraRAG files declare their servers as paths, bound their loops
//     with `times`, and have routers whose routes and tools whose inputs and
//     outputs live in Python code Loupe does not read: nothing is known to
//     be wrong, so nothing is reported (empty branches such as
//     `complete: []` are UltraRAG's way of doing nothing on a route).
func TestPipelineValidateReal(t *testing.T) {
	want := map[string][]string{}
	for _, tc := range realPipelines {
		t.Run(tc.file, func(t *testing.T) {
			p := parseReal(t, tc.file)
			got := errorStrings(p.Validate())
			if !slices.Equal(got, want[tc.file]) {
				t.Errorf("Validate:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want[tc.file], "\n"))
			}
			checkSchemaAgreement(t, p)
		})
	}
}

func errorStrings(l ErrorList) []string {
	var out []string
	for _, e := range l {
		out = append(out, e.Error())
	}
	return out
}

// checkSchemaAgreement checks that the schema layer and jsonschema-go agree
// on whether p's file matches schema.PipelineV1.
func checkSchemaAgreement(t *testing.T, p *Pipeline) {
	t.Helper()
	rs, err := resolvedPipelineSchema()
	if err != nil {
		t.Fatal(err)
	}
	libErr := rs.Validate(p.root.json())
	var ours []string
	for _, e := range p.Validate() {
		if e.Layer == LayerSchema {
			ours = append(ours, e.Error())
		}
	}
	if (libErr != nil) != (len(ours) > 0) {
		t.Errorf("schema layer and jsonschema-go disagree: layer reports %q, library %v", ours, libErr)
	}
}

func TestPipelineValidateErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "unknown top key",
			src: `servers:
  generator: builtin
pipeline:
  - generator.x
stages: []
`,
			want: []string{
				"p.yaml:5:1: unknown key `stages` in the file; expected one of `parameters`, `pipeline`, `runtime`, `servers`",
			},
		},
		{
			name: "unknown server",
			src: `servers:
  generator: builtin
pipeline:
  - generator.draft
  - retriever.search
`,
			want: []string{
				"p.yaml:5:5: step `retriever.search` uses server `retriever`, which is not declared; expected one of `generator`, or `retriever` added under `servers`",
			},
		},
		{
			name: "no servers",
			src: `pipeline:
  - a.b
`,
			want: []string{
				"p.yaml:2:5: step `a.b` uses server `a`, but the file declares no servers; expected `a` under `servers`",
			},
		},
		{
			name: "unknown builtin tool",
			src: `servers:
  retriever: builtin
parameters:
  query: q
pipeline:
  - retriever.fetch
`,
			want: []string{
				"p.yaml:6:5: unknown step `retriever.fetch`: built-in server `retriever` has no tool `fetch`; expected one of `get_stats`, `hybrid_search`, `index`, `search`",
			},
		},
		{
			name: "unknown builtin server",
			src: `servers:
  magic: builtin
pipeline:
  - magic.x
`,
			want: []string{
				"p.yaml:2:10: `magic` is not a built-in server; expected one of `evaluator`, `generator`, `retriever`, `router`, or a command or URL",
			},
		},
		{
			name: "undefined param ref",
			src: `servers:
  generator: builtin
parameters:
  topic: "$subject"
pipeline:
  - generator.draft
`,
			want: []string{
				"p.yaml:4:10: parameter `topic` refers to `$subject`, which is not a parameter; expected the name of a parameter, or `$topic` to require it at run time",
			},
		},
		{
			name: "undefined input ref",
			src: `servers:
  generator: builtin
pipeline:
  - generator.draft:
      input:
        topic: "$topic"
      output: [draft]
`,
			want: []string{
				"p.yaml:6:16: input `topic` of step `generator.draft` reads `$topic`, which is neither a parameter nor a step output; expected `topic` under `parameters` or in the `output` of an earlier step",
			},
		},
		{
			name: "read before write",
			src: `servers:
  generator: builtin
pipeline:
  - generator.finalize:
      input:
        text: "$draft"
      output: [final]
  - generator.draft:
      output: [draft]
`,
			want: []string{
				"p.yaml:6:15: input `text` of step `generator.finalize` reads `$draft` before any step writes it (it is written at 9:16, later); expected `draft` under `parameters` or in the `output` of an earlier step",
			},
		},
		{
			name: "loop first pass",
			src: `servers:
  generator: builtin
parameters:
  topic: t
pipeline:
  - loop:
      max_iterations: 2
      steps:
        - generator.reflect:
            input:
              prior: "$critique"
            output: [analysis]
        - generator.critique:
            input:
              analysis: "$analysis"
            output: [critique]
`,
			want: []string{
				"p.yaml:11:22: input `prior` of step `generator.reflect` reads `$critique` on the first pass of the loop at 6:5 before any step writes it (it is written at 16:22, later in the loop); expected `critique` under `parameters` or in the `output` of an earlier step",
			},
		},
		{
			name: "loop carried in branch ok",
			src: `servers:
  generator: builtin
  router: builtin
parameters:
  topic: t
pipeline:
  - loop:
      max_iterations: 2
      steps:
        - generator.analyze:
            input: {topic: "$topic"}
            output: [analysis, route]
        - branch:
            router: check_quality
            branches:
              continue:
                - generator.reflect:
                    input: {prior: "$critique"}
                    output: [critique]
              complete:
                - generator.critique:
                    input: {analysis: "$analysis"}
                    output: [critique]
`,
			want: []string{},
		},
		{
			name: "unbounded loop",
			src: `servers:
  generator: builtin
pipeline:
  - loop:
      steps:
        - generator.reflect
`,
			want: []string{
				"p.yaml:4:5: loop has no bound; expected `times` (UltraRAG) or `max_iterations` (omni), an integer from 1 to 1000000",
			},
		},
		{
			name: "loop bound as parameter",
			src: `servers:
  generator: builtin
parameters:
  max_iterations: 3
pipeline:
  - loop:
      max_iterations: "$max_iterations"
      steps:
        - generator.reflect
`,
			want: []string{
				"p.yaml:7:23: `pipeline[0].loop.max_iterations` is the string \"$max_iterations\"; expected an integer from 1 to 1000000",
			},
		},
		{
			name: "loop both bounds",
			src: `servers:
  generator: builtin
pipeline:
  - loop:
      times: 2
      max_iterations: 3
      steps:
        - generator.reflect
`,
			want: []string{
				"p.yaml:5:7: `loop.times` is UltraRAG's, but a `builtin` server at 2:14 is omni's; expected one dialect per file (input values mean different things in each)",
				"p.yaml:6:7: loop has both `times` and `max_iterations`; expected one of them",
			},
		},
		{
			name: "loop zero",
			src: `servers:
  s: servers/s
pipeline:
  - loop:
      times: 0
      steps: [s.t]
`,
			want: []string{
				"p.yaml:5:14: `pipeline[0].loop.times` is the integer 0; expected an integer from 1 to 1000000",
			},
		},
		{
			name: "too many passes",
			src: `servers:
  s: servers/s
pipeline:
  - loop:
      times: 1000
      steps:
        - loop:
            times: 1001
            steps: [s.t]
`,
			want: []string{
				"p.yaml:8:13: loop runs up to 1001000 passes with the loops around it; expected at most 1000000",
			},
		},
		{
			name: "value_map unknown branch",
			src: `servers:
  generator: builtin
  evaluator: builtin
pipeline:
  - evaluator.evaluate:
      output: [routing_reason]
  - branch:
      router: check_quality
      field: routing_reason
      value_map:
        done: [ok]
        continue: [again, ok]
      branches:
        continue: [generator.reflect]
        complete: [generator.finalize]
`,
			want: []string{
				"p.yaml:11:9: `value_map` maps tokens to `done`, which is not a branch; expected one of `continue`, `complete`",
			},
		},
		{
			name: "router no branch",
			src: `servers:
  generator: builtin
  router: builtin
pipeline:
  - generator.analyze
  - branch:
      router: router.check_quality
      branches:
        continue: [generator.reflect]
`,
			want: []string{
				"p.yaml:7:15: router `router.check_quality` returns `complete`, which no branch takes; expected a branch named after each route (or branches named after its other routes: `high_quality` and `low_quality`), or a `value_map` entry listing it",
			},
		},
		{
			name: "branches after no route",
			src: `servers:
  generator: builtin
parameters:
  topic: $topic
pipeline:
  - generator.analyze
  - branch:
      router: check_quality
      branches:
        good: [generator.finalize]
        complete: [generator.finalize]
`,
			want: []string{
				"p.yaml:8:15: router `check_quality` returns `continue`, which no branch takes; expected a branch named after each route (or branches named after its other routes: `high_quality` and `low_quality`), or a `value_map` entry listing it",
				"p.yaml:10:9: branch `good` is never taken: router `check_quality` returns `complete` or `continue`; expected a branch named after a route (or branches named after its other routes: `high_quality` and `low_quality`), or a `value_map` entry for `good` listing one",
			},
		},
		{
			name: "output writes a parameter",
			src: `servers:
  generator: builtin
parameters:
  topic: $topic
pipeline:
  - generator.analyze:
      input: {topic: $topic}
      output: [analysis, topic]
`,
			want: []string{
				"p.yaml:8:26: step `generator.analyze` writes `topic`, which is a parameter and read-only; expected another variable name",
			},
		},
		{
			name: "loop carried through a branch of an outer loop",
			src: `servers:
  generator: builtin
pipeline:
  - loop:
      max_iterations: 3
      steps:
        - generator.decide:
            output: [route]
        - branch:
            router: pick
            branches:
              read:
                - loop:
                    max_iterations: 2
                    steps:
                      - generator.use:
                          input: {x: $x}
                          output: [y]
              write:
                - generator.make:
                    input: {y: $y}
                    output: [x]
`,
			want: nil,
		},
		{
			name: "nested loops, first pass",
			src: `servers:
  generator: builtin
pipeline:
  - loop:
      max_iterations: 3
      steps:
        - loop:
            max_iterations: 2
            steps:
              - generator.use:
                  input: {x: $x}
                  output: [y]
        - generator.make:
            input: {y: $y}
            output: [x]
`,
			want: []string{
				"p.yaml:11:30: input `x` of step `generator.use` reads `$x` on the first pass of the loop at 7:11 before any step writes it (it is written at 15:22, later in the loop); expected `x` under `parameters` or in the `output` of an earlier step",
			},
		},
		{
			name: "empty branches and steps",
			src: `servers:
  s: servers/s
pipeline:
  - branch:
      router: [s.r]
      branches: {}
  - loop:
      times: 2
      steps: []
`,
			want: []string{
				"p.yaml:6:17: `pipeline[0].branch.branches` is empty; expected a mapping of at least one branch name to a list of steps (an empty list does nothing)",
				"p.yaml:9:14: `pipeline[1].loop.steps` is an empty list; expected a list of at least one step",
			},
		},
		{
			name: "empty pipeline",
			src: `servers:
  s: servers/s
pipeline: []
`,
			want: []string{
				"p.yaml:3:11: `pipeline` is an empty list; expected a list of at least one step",
			},
		},
		{
			name: "bad step shapes",
			src: `servers:
  s: servers/s
pipeline:
  - 42
  - nodot
  - foo: {}
  - s.t:
    input: {a: b}
  - s.u:
      inputs: {a: b}
      output: "x"
`,
			want: []string{
				"p.yaml:4:5: `pipeline[0]` is the integer 42; expected a step: `server.tool`, or a mapping with one key, `loop`, `branch` or `server.tool`",
				"p.yaml:5:5: `pipeline[1]` is the string \"nodot\"; expected `server.tool`",
				"p.yaml:6:5: `pipeline[2]` is a mapping with `foo`; expected a step: `server.tool`, or a mapping with one key, `loop`, `branch` or `server.tool`",
				"p.yaml:8:5: `input` is beside the step `s.t`, not under it; expected it indented under `s.t`",
				"p.yaml:8:5: `pipeline[3]` has 2 keys; expected a mapping with one key, `server.tool`",
				"p.yaml:10:7: unknown key `inputs` in `pipeline[4].s.u`; expected one of `input`, `output`",
				"p.yaml:11:15: `pipeline[4].s.u.output` is the string \"x\"; expected a list of result names (omni) or a mapping of result names to variable names (UltraRAG)",
			},
		},
		{
			name: "mixed dialects",
			src: `servers:
  generator: builtin
parameters:
  q: 1
pipeline:
  - loop:
      times: 2
      steps: [generator.x]
`,
			want: []string{
				"p.yaml:7:7: `loop.times` is UltraRAG's, but a `builtin` server at 2:14 is omni's; expected one dialect per file (input values mean different things in each)",
			},
		},
		{
			name: "shell command",
			src: `servers:
  a: "python3 srv.py | tee log"
  b: 'node "unterminated'
  c: "   "
  d: "sh -c $(curl x)"
pipeline: [a.x]
`,
			want: []string{
				"p.yaml:2:6: server `a` holds the shell syntax `|`, but Loupe starts commands without a shell; expected a program and its arguments (put shell code in a script)",
				"p.yaml:3:6: server `b` has an unterminated quote; expected a program and its arguments",
				"p.yaml:4:6: server `c` is blank; expected `builtin`, `local://name`, a command or an http(s) URL",
				"p.yaml:5:6: server `d` holds the shell syntax `$(curl`, but Loupe starts commands without a shell; expected a program and its arguments (put shell code in a script)",
			},
		},
		{
			name: "runtime bad",
			src: `servers:
  generator: builtin
pipeline: [generator.x]
runtime:
  checkpointer: {type: disk}
  tracer: {callback_dispatch_mode: async, extra: 1}
  invoker: {include_retrieval: "yes"}
  tool_contracts:
    retriever.search: {required_input_keys: [q]}
    generator.summarize: {required_input_keys: [text]}
    custom.tool: {required_input_keys: [a, a]}
    bad: {required_input_keys: []}
`,
			want: []string{
				"p.yaml:5:24: `runtime.checkpointer.type` is the string \"disk\"; expected `none` or `memory`",
				"p.yaml:6:36: `runtime.tracer.callback_dispatch_mode` is the string \"async\"; expected `inline` or `background`",
				"p.yaml:6:43: unknown key `extra` in `runtime.tracer`; expected one of `callback_dispatch_mode`",
				"p.yaml:7:32: `runtime.invoker.include_retrieval` is the string \"yes\"; expected a boolean",
				"p.yaml:9:5: `runtime.tool_contracts` overrides the built-in contract of `retriever.search`; expected contracts for other tools only",
				"p.yaml:10:5: `runtime.tool_contracts` overrides the built-in contract of `generator.summarize` (`generator.*`); expected contracts for other tools only",
				"p.yaml:11:44: `runtime.tool_contracts.custom.tool.required_input_keys` lists the string \"a\" twice; expected a list of distinct non-empty strings",
				"p.yaml:12:5: key `bad` in `runtime.tool_contracts` is not a valid name; expected `server.tool`",
			},
		},
		{
			name: "contract missing input",
			src: `servers:
  retriever: builtin
  mine: python3 srv.py
parameters:
  q: x
pipeline:
  - retriever.search:
      input: {text: "$q"}
      output: [results]
  - retriever.index
  - mine.upload:
      input: {}
runtime:
  tool_contracts:
    mine.upload: {required_input_keys: [file]}
`,
			want: []string{
				"p.yaml:8:7: step `retriever.search` has no input `query`, which its contract requires; expected `query` under `input`",
				"p.yaml:10:5: step `retriever.index` needs input `documents` (its contract requires it) and has no `input` mapping, so it reads `documents`, which is neither a parameter nor a step output; expected `documents` under `parameters`, in the `output` of an earlier step, or an `input` mapping with `documents`",
				"p.yaml:12:7: step `mine.upload` has no input `file`, which its contract requires; expected `file` under `input`",
			},
		},
		{
			name: "servers keys bad",
			src: `servers:
  my-server: servers/x
  ok: ""
parameters:
  bad-name: 1
pipeline: [ok.t]
`,
			want: []string{
				"p.yaml:2:3: key `my-server` in `servers` is not a valid name; expected a name of letters, digits and `_` that does not start with a digit",
				"p.yaml:3:7: `servers.ok` is the string \"\"; expected a non-empty string",
				"p.yaml:5:3: key `bad-name` in `parameters` is not a valid name; expected a name of letters, digits and `_` that does not start with a digit",
			},
		},
		{
			name: "router list last not tool",
			src: `servers:
  s: servers/s
pipeline:
  - branch:
      router:
        - s.a
        - loop: {times: 1, steps: [s.b]}
      branches:
        x: [s.c]
`,
			want: []string{
				"p.yaml:7:11: the last step of `router` is a loop; expected a `server.tool` step, which returns the route",
			},
		},
		{
			name: "nesting",
			src: `servers:
  s: servers/s
pipeline:
  - loop: {times: 1, steps: [{loop: {times: 1, steps: [{loop: {times: 1, steps: [{loop: {times: 1, steps: [{loop: {times: 1, steps: [{loop: {times: 1, steps: [{loop: {times: 1, steps: [{loop: {times: 1, steps: [{loop: {times: 1, steps: [s.t]}}]}}]}}]}}]}}]}}]}}]}}]}
`,
			want: []string{
				"p.yaml:4:213: loop nested 9 deep; expected at most 8 nested loops and branches",
			},
		},
		{
			name: "token twice",
			src: `servers:
  s: servers/s
pipeline:
  - branch:
      router: pick
      value_map:
        a: [x, b]
        b: [x]
      branches:
        a: [s.a]
        b: [s.b]
`,
			want: []string{
				"p.yaml:7:16: route token `b` is the name of branch `b`, which it always selects; expected it under `b` in `value_map`, or another token",
				"p.yaml:8:13: route token `x` maps to both `a` and `b`; expected each token in one branch",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(tc.src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := errorStrings(p.Validate())
			if !slices.Equal(got, tc.want) {
				t.Errorf("Validate:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			checkSchemaAgreement(t, p)
		})
	}
}
