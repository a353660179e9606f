// Package schema holds the JSON Schema of Loupe's record encoding, for
// validating records produced outside this repository.
package schema

import _ "embed"

// RecordV1 is the JSON Schema (draft 2020-12) of a version 1 trace record.
//
//go:embed record.v1.schema.json
var RecordV1 []byte
