package pipeline

// Validate checks p in three layers and returns every error found, sorted
// by position:
//
//  1. schema: the file against the JSON Schema schema.PipelineV1 (shapes,
//     types, unknown keys);
//  2. semantic: servers (declared, built-in ones known, commands without
//     shell syntax), steps (their server declared, a built-in server's tool
//     known), parameters (`$name` defined), variables (omni: an input read
//     before any step can have written it), branches (routes a built-in
//     router returns that no branch takes, branches no route takes,
//     `value_map` names and tokens), loops (bounded, nesting and passes
//     within MaxNesting and MaxPasses), one dialect per file;
//  3. contract: runtime.tool_contracts adds contracts but does not override
//     built-in ones (ContractsV1), and each step gives the inputs its
//     contract requires.
//
// The layers do not stop at each other's errors: a file with a wrong key
// and an unknown server gets both reported. An empty list means p may be
// run. Validate does not modify p and is safe for concurrent use.
func (p *Pipeline) Validate() ErrorList {
	e := &errs{file: p.File}
	if p.root != nil {
		checkSchema(e, p.root)
	}
	checkSemantics(e, p)
	checkContracts(e, p)
	return e.list.sort()
}
