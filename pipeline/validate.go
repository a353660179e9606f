package pipeline

// Validate checks p in three layers — the JSON Schema (schema.PipelineV1),
// semantics, and tool contracts — and returns every error found, sorted by
// position. An empty list means p may be run.
func (p *Pipeline) Validate() ErrorList {
	e := &errs{file: p.File}
	return e.list.sort()
}
