package server

import (
	"bytes"
	"testing"
)

// FuzzDecodeRecords: the /v1/records decoder never panics, and what it
// accepts encodes to records that decode back to themselves.
func FuzzDecodeRecords(f *testing.F) {
	good := ndjson(run(1, "fuzz"))
	f.Add(good)
	f.Add(append(append([]byte("["), bytes.ReplaceAll(bytes.TrimSpace(good), []byte("\n"), []byte(","))...), ']'))
	f.Add([]byte(`[{"v":1}]`))
	f.Add([]byte("\xef\xbb\xbf\n\n{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := DecodeRecords(b)
		if err != nil || len(recs) == 0 {
			return
		}
		again, err := DecodeRecords(ndjson(recs))
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-decoding %d records: %v", len(recs), err)
		}
	})
}
