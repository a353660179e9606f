package server

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
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

// FuzzIngest sends arbitrary bodies to both ingest endpoints, plain and
// as gzip, as protobuf and JSON: the answer is never a 5xx but a store
// failure, and never a panic.
func FuzzIngest(f *testing.F) {
	st := openStore(f)
	srv, err := New(Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxDecodedBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"resourceSpans":[]}`), "application/json", false)
	f.Add(ndjson(run(1, "f")), "application/x-ndjson", true)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00}, "application/x-protobuf", false)
	f.Fuzz(func(t *testing.T, body []byte, ctype string, zip bool) {
		for _, path := range []string{"/v1/traces", "/v1/records"} {
			b := body
			req := httptest.NewRequest("POST", path, nil)
			if zip {
				b = gz(body)
				req.Header.Set("Content-Encoding", "gzip")
			}
			req.Body = io.NopCloser(bytes.NewReader(b))
			req.Header.Set("Content-Type", ctype)
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, req)
			if w.Code >= 500 {
				t.Fatalf("%s %q: %d %s", path, ctype, w.Code, w.Body.String())
			}
		}
	})
}
