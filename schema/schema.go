// Package schema holds the JSON Schemas Loupe publishes: its record
// encoding, for validating records produced outside this repository, and
// its pipeline file format.
package schema

import _ "embed"

// RecordV1 is the JSON Schema (draft 2020-12) of a version 1 trace record.
//
//go:embed record.v1.schema.json
var RecordV1 []byte

// PipelineV1 is the JSON Schema (draft 2020-12) of a version 1 pipeline
// file (omni's and UltraRAG's YAML pipelines, read as JSON), the structural
// layer of `loupe pipeline validate` (package pipeline).
//
//go:embed pipeline.v1.schema.json
var PipelineV1 []byte
