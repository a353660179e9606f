package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// TestTraceJSONShape: GET /api/v1/traces/{id} answers the members of
// `loupe traces show --json`, in its order, and evaluations, always.
func TestTraceJSONShape(t *testing.T) {
	b, err := json.Marshal(TraceJSON{})
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var keys []string
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"summary", "stats", "memory", "spans", "records", "evaluations"}; !slices.Equal(keys, want) {
		t.Errorf("members %q, want %q", keys, want)
	}
}

// listFailingStore fails every List, as a store that went away does.
type listFailingStore struct{ store.Store }

func (listFailingStore) List(context.Context, store.ListQuery) (store.ListPage, error) {
	return store.ListPage{}, errors.New("trace id index broken in " + storeSecret)
}

// TestResolveAnswers: the {id} of a path is resolved by store.Resolve and
// its errors answered by kind, not by their words: a malformed id or an
// ambiguous prefix is the client's (400), an unknown prefix is 404, and a
// store that fails is 503 even when its message says "trace id".
func TestResolveAnswers(t *testing.T) {
	e := newEnv(t, Options{})
	for _, n := range []byte{1, 2} {
		recs := run(7, "twin")
		for i := range recs {
			recs[i].TraceID[15] = n
		}
		if code, body, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(recs)); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	for _, tt := range []struct {
		path string
		code int
		has  string
	}{
		{"/api/v1/traces/0701", 400, "is ambiguous"},
		{"/api/v1/traces/07010000000000000000000000000001", 200, `"name":"twin"`},
		{"/api/v1/traces/070100000000000000000000000000", 400, "is ambiguous"},
		{"/api/v1/traces/0701000000000000000000000000001", 404, "no trace id starts with"}, // 31 digits
		{"/api/v1/traces/07z1", 400, "not a hex digit"},
		{"/api/v1/traces/07", 400, "want 4 to 32 hex digits"},
		{"/api/v1/evaluations/0701", 400, "is ambiguous"},
	} {
		code, body, _ := e.do("GET", tt.path, "", nil)
		if code != tt.code || !strings.Contains(string(body), tt.has) {
			t.Errorf("GET %s: %d %.300s; want %d saying %q", tt.path, code, body, tt.code, tt.has)
		}
	}
	e = newEnv(t, Options{Store: listFailingStore{openStore(t)}})
	code, body, _ := e.do("GET", "/api/v1/traces/0701", "", nil)
	if code != 503 || strings.Contains(string(body), "secret") {
		t.Errorf("failing store: %d %s", code, body)
	}
	// A full id is not looked up by Resolve; the trace is read.
	code, body, _ = e.do("GET", "/api/v1/traces/"+trace.TraceID{7, 1}.String(), "", nil)
	if code != 404 {
		t.Errorf("full id of no trace: %d %s", code, body)
	}
}
