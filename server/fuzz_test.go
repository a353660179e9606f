package server

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/loupe-dev/loupe/store"
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

// FuzzDecodeScores: the POST /api/v1/scores decoder never panics, every
// error names a field, and what it accepts survives the store's
// validation or is refused with a *store.ScoreError, never anything
// else.
func FuzzDecodeScores(f *testing.F) {
	f.Add([]byte(`{"scores":[{"trace_id":"01010000000000000000000000000000","name":"q","value":0.5}]}`))
	f.Add([]byte(`{"scores":[{"session":"s","name":"thumbs","value":true,"source":"human","comment":"ok"}]}`))
	f.Add([]byte(`{"scores":[{"trace_id":"01","span_id":"zz","name":"a b","category":"x","value":"1"}]}`))
	f.Add([]byte(`{"scores":[{"name":"x","value":1e400}]} []`))
	f.Add([]byte(`{"scores":null,"x":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		scores, err := DecodeScores(b)
		if err != nil {
			fe, ok := err.(*fieldError)
			if !ok || fe.Field == "" {
				t.Fatalf("DecodeScores error %v (%T) names no field", err, err)
			}
			return
		}
		for i := range scores {
			if err := store.ValidateScore(i, &scores[i]); err != nil {
				if _, ok := err.(*store.ScoreError); !ok {
					t.Fatalf("ValidateScore error %v is a %T", err, err)
				}
			}
		}
	})
}
