package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

func TestSessionQueryTerms(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in            string
		session, user string
		err           string
	}{
		{`session:conv-1 user:ada hello`, "conv-1", "ada", ""},
		{`session:"a b:c"`, "a b:c", "", ""},
		{`user:ada user:bob`, "", "", "query: user: given twice; give each filter once"},
		{`session:`, "", "", "query: session: has no value (write session:VALUE)"},
	} {
		q, err := store.ParseQueryAt(tt.in, now)
		if tt.err != "" {
			var qe *store.QueryError
			if !errors.As(err, &qe) || err.Error() != tt.err {
				t.Errorf("%s: error %v, want %s", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || q.Session != tt.session || q.User != tt.user {
			t.Errorf("%s: session %q user %q, %v", tt.in, q.Session, q.User, err)
			continue
		}
		back, err := store.ParseQueryAt(q.String(), now)
		if err != nil || back.Session != q.Session || back.User != q.User {
			t.Errorf("%s: String %q reads back as %+v, %v", tt.in, q.String(), back, err)
		}
	}
	f, err := store.Criteria{Session: "conv-1", User: "ada"}.Filter(now)
	if err != nil || f.Session != "conv-1" || f.User != "ada" {
		t.Errorf("Criteria.Filter: %+v, %v", f, err)
	}
	if _, err := (store.Criteria{Session: "x"}).Query(store.Query{Filter: store.Filter{Session: "y"}}, now); err == nil {
		t.Error("a session in both the criteria and the query is accepted")
	}
	if _, err := (store.Criteria{User: "a\x00"}).Filter(now); err == nil {
		t.Error("a NUL byte in the user is accepted")
	}
}

func TestSanitizeBoundsSessions(t *testing.T) {
	if store.MaxSessionBytes != trace.MaxSessionBytes {
		t.Fatalf("store.MaxSessionBytes %d differs from trace.MaxSessionBytes %d", store.MaxSessionBytes, trace.MaxSessionBytes)
	}
	r := trace.Record{V: 1, TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Seq: 1, Time: time.Unix(1, 0), Type: trace.TypeRunStart, Name: "x",
		Run: &trace.RunInfo{Session: string(make([]byte, 300)), User: "ad\xffa"}}
	if err := store.ValidateRecord(0, &r); err == nil {
		t.Fatal("ValidateRecord accepts a 300-byte session of NUL bytes")
	}
	store.Sanitize(&r)
	if err := store.ValidateRecord(0, &r); err != nil {
		t.Fatalf("after Sanitize: %v", err)
	}
	if r.User() != "ad\uFFFDa" || len(r.Session()) > store.MaxSessionBytes {
		t.Errorf("Sanitize left user %q and a session of %d bytes", r.User(), len(r.Session()))
	}
}

// FuzzSessionIDs: whatever a client sends as a session or user, Sanitize
// makes a record a store accepts, that encodes and decodes to the same
// ids, and the query language finds it by them.
func FuzzSessionIDs(f *testing.F) {
	f.Add("conv-1", "ada", 0)
	f.Add("a\xffb\x00", "\xc3", 300)
	f.Add(`"quoted" id:with:colons`, "ü", 129)
	f.Fuzz(func(t *testing.T, session, user string, pad int) {
		if pad < 0 || pad > 4096 {
			pad = 0
		}
		session += strings.Repeat("é", pad/2)
		r := trace.Record{V: 1, TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Seq: 1, Time: time.Unix(1, 0).UTC(), Type: trace.TypeRunStart,
			Name: "x", Run: &trace.RunInfo{Session: session, User: user}}
		store.Sanitize(&r)
		if err := store.ValidateRecord(0, &r); err != nil {
			t.Fatalf("after Sanitize: %v", err)
		}
		if trace.BoundID(r.Session()) != r.Session() || trace.BoundID(r.User()) != r.User() {
			t.Fatalf("BoundID is not idempotent on %q %q", r.Session(), r.User())
		}
		back, err := trace.DecodeRecord(r.AppendJSON(nil))
		if err != nil || back.Session() != r.Session() || back.User() != r.User() {
			t.Fatalf("round trip of %q %q: %q %q, %v", r.Session(), r.User(), back.Session(), back.User(), err)
		}
		if r.Session() == "" {
			return
		}
		q := store.Query{Filter: store.Filter{Session: r.Session(), User: r.User()}}
		if len(q.String()) > store.MaxQueryBytes {
			return
		}
		parsed, err := store.ParseQuery(q.String())
		if err != nil || parsed.Session != r.Session() || parsed.User != r.User() {
			t.Fatalf("query %q: session %q user %q, %v", q.String(), parsed.Session, parsed.User, err)
		}
	})
}
