package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// testSessions checks sessions and users: the trace's session and user
// come from the first stored record carrying one (in any batch, on any
// record), filters and the query language select by them, and the
// store's SessionLister lists sessions with their totals, newest first,
// page by page.
func testSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	lister, ok := s.(store.SessionLister)
	if !ok {
		t.Fatalf("%T does not implement store.SessionLister", s)
	}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	var convA []trace.TraceID
	for i := range 3 {
		recs := Gen(Spec{Name: "chat", Start: at(i), Session: "conv-a", User: "ada", InputTok: int64(100 * (i + 1))})
		mustAppend(t, s, recs)
		convA = append(convA, recs[0].TraceID)
	}
	mustAppend(t, s, Gen(Spec{Name: "chat", Start: at(5), Session: "conv-b", User: "bob", ToolErr: "boom"}))
	mustAppend(t, s, Gen(Spec{Name: "lonely", Start: at(6)}))

	// A trace whose session arrives later, on a record other than
	// run.start (as an OpenTelemetry child span carries it): the first
	// one stored names it, a later one does not change it.
	late := Gen(Spec{Name: "late", Start: at(10)})
	mustAppend(t, s, late[:1])
	late[1].Run = &trace.RunInfo{Session: "conv-c", User: "cy"}
	late[2].Run = &trace.RunInfo{Session: "conv-other", User: "other"}
	mustAppend(t, s, late[1:2])
	mustAppend(t, s, late[2:])

	list := func(f store.Filter) []store.Summary {
		t.Helper()
		page, err := s.List(ctx, store.ListQuery{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		return page.Traces
	}
	if got := list(store.Filter{Session: "conv-a"}); len(got) != 3 || got[0].Session != "conv-a" || got[0].User != "ada" || got[0].ID != convA[2] {
		t.Errorf("session conv-a: %+v, want its 3 runs newest first with session and user", got)
	}
	if got := list(store.Filter{User: "bob"}); len(got) != 1 || got[0].Session != "conv-b" {
		t.Errorf("user bob: %+v, want the run of conv-b", got)
	}
	if got := list(store.Filter{Session: "conv-c"}); len(got) != 1 || got[0].ID != late[0].TraceID || got[0].User != "cy" {
		t.Errorf("session conv-c (set by a later record): %+v", got)
	}
	if got := list(store.Filter{Session: "conv-other"}); len(got) != 0 {
		t.Errorf("a second session of a trace replaced the first: %+v", got)
	}
	if got := list(store.Filter{Name: "lonely"}); len(got) != 1 || got[0].Session != "" || got[0].User != "" {
		t.Errorf("run without a session: %+v", got)
	}
	q, err := store.ParseQuery(`session:conv-a user:ada weather`)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(ctx, q)
	if err != nil || len(hits.Hits) == 0 {
		t.Fatalf("search session:conv-a: %+v, %v", hits, err)
	}
	for _, h := range hits.Hits {
		if h.TraceID != convA[0] && h.TraceID != convA[1] && h.TraceID != convA[2] {
			t.Errorf("search session:conv-a hit trace %s of another session", h.TraceID)
		}
	}
	tr, err := s.Trace(ctx, late[0].TraceID)
	if err != nil || tr.Summary.Session != "conv-c" {
		t.Fatalf("Trace: session %q, %v", tr.Summary.Session, err)
	}

	page, err := lister.Sessions(ctx, store.SessionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range page.Sessions {
		ids = append(ids, x.ID)
	}
	if strings.Join(ids, " ") != "conv-c conv-b conv-a" || page.Next != "" {
		t.Fatalf("sessions %v (next %q), want conv-c conv-b conv-a, newest first", ids, page.Next)
	}
	a := page.Sessions[2]
	if a.Runs != 3 || a.User != "ada" || !a.First.Equal(at(0)) || !a.LastStarted.Equal(at(2)) || !a.Last.After(at(2)) {
		t.Errorf("conv-a: %+v, want 3 runs of ada from %s, the last started at %s", a, at(0), at(2))
	}
	if a.InputTokens != 2*(100+200+300) || a.OutputTokens != 3*2*10 || a.Errors != 0 || a.ErrorRuns != 0 || !a.CostKnown() {
		t.Errorf("conv-a totals: %+v, want 1200 input and 60 output tokens, no errors", a)
	}
	if diff := a.CostUSD - 6*0.001; diff > 1e-9 || diff < -1e-9 {
		t.Errorf("conv-a cost %v, want 0.006", a.CostUSD)
	}
	if b := page.Sessions[1]; b.Runs != 1 || b.Errors == 0 || b.ErrorRuns != 1 {
		t.Errorf("conv-b: %+v, want 1 run with errors", b)
	}

	// Paging: one session a page, each once, in order.
	var paged []string
	cursor := ""
	for range 5 {
		p, err := lister.Sessions(ctx, store.SessionQuery{Limit: 1, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range p.Sessions {
			paged = append(paged, x.ID)
		}
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	if strings.Join(paged, " ") != "conv-c conv-b conv-a" {
		t.Errorf("paged sessions %v", paged)
	}
	for _, tt := range []struct {
		q    store.SessionQuery
		want string
	}{
		{store.SessionQuery{User: "ada"}, "conv-a"},
		{store.SessionQuery{User: "nobody"}, ""},
		{store.SessionQuery{Since: at(4)}, "conv-c conv-b"},
		{store.SessionQuery{Until: at(1)}, "conv-a"},
	} {
		p, err := lister.Sessions(ctx, tt.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, x := range p.Sessions {
			got = append(got, x.ID)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("Sessions(%+v) = %v, want %s", tt.q, got, tt.want)
		}
		if tt.q.Until.Equal(at(1)) && (len(p.Sessions) != 1 || p.Sessions[0].Runs != 1) {
			t.Errorf("Sessions until %s counts %+v, want only the first run", at(1), p.Sessions)
		}
	}
	var qe *store.QueryError
	if _, err := lister.Sessions(ctx, store.SessionQuery{Cursor: "not a cursor"}); !errors.As(err, &qe) {
		t.Errorf("bad cursor: %v, want a *store.QueryError", err)
	}
	if _, err := lister.Sessions(ctx, store.SessionQuery{User: "a\x00"}); !errors.As(err, &qe) {
		t.Errorf("NUL in user: %v, want a *store.QueryError", err)
	}

	runs, more, err := store.SessionRuns(ctx, s, "conv-a")
	if err != nil || more || len(runs) != 3 {
		t.Fatalf("SessionRuns: %d runs, more %v, %v", len(runs), more, err)
	}
	for i, r := range runs {
		if r.ID != convA[i] {
			t.Errorf("SessionRuns[%d] = %s, want %s (in start order)", i, r.ID, convA[i])
		}
	}
	sum, turns, more, err := store.SessionTurns(ctx, s, "conv-a", 2)
	if err != nil || sum.Runs != 3 || more || len(turns) != 2 {
		t.Fatalf("SessionTurns: %d turns of %d runs, more %v, %v; want the last 2 of 3", len(turns), sum.Runs, more, err)
	}
	if sum.InputTokens != a.InputTokens || sum.OutputTokens != a.OutputTokens || sum.User != "ada" || !sum.First.Equal(a.First) ||
		!sum.LastStarted.Equal(a.LastStarted) || sum.Errors != a.Errors || sum.ErrorRuns != a.ErrorRuns {
		t.Errorf("SessionTurns totals %+v differ from the listing's %+v", sum, a)
	}
	if x := turns[1]; x.Summary.ID != convA[2] || x.Input.Text() != "question about chat" || len(x.Tools) != 2 ||
		x.Tools[0].Name != "search" || x.Tools[0].Input == nil || x.Tools[1].Output.Text() != "result 2" {
		t.Errorf("last turn of conv-a: %+v", x)
	}
	if _, _, err := store.SessionRuns(ctx, s, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SessionRuns of an unknown session: %v, want ErrNotFound", err)
	}

	// Ids are bounded: a store refuses a longer one, Sanitize cuts it.
	long := Gen(Spec{Name: "long", Start: at(20)})
	long[0].EditRun().Session = strings.Repeat("s", store.MaxSessionBytes+1)
	var re *store.RecordError
	if _, err := s.Append(ctx, long); !errors.As(err, &re) || re.Field != "session" {
		t.Errorf("Append of a %d-byte session: %v, want a *store.RecordError on session", len(long[0].Session()), err)
	}
	store.Sanitize(&long[0])
	mustAppend(t, s, long)
	if got := list(store.Filter{Name: "long"}); len(got) != 1 || len(got[0].Session) != store.MaxSessionBytes {
		t.Errorf("sanitized long session: %+v", got)
	}
}

// MigratedSessions returns two new traces (new ids on each call), as a store before sessions held
// them (OTLP ingest wrote a root span's session.id and user.id as the
// tags "session:ID" and "user:ID"), for a backend's migration test to
// write at the schema version before sessions: tagged has those tags and
// untagged has none. CheckMigratedSessions checks the store after the
// upgrade.
func MigratedSessions() (tagged, untagged []trace.Record) {
	tagged = Gen(Spec{Name: "old-chat", Start: t0, Tags: []string{"source:otlp", "session:conv-old", "user:ada"}})
	untagged = Gen(Spec{Name: "old-run", Start: t0.Add(time.Minute), Tags: []string{"source:otlp"}})
	return tagged, untagged
}

// CheckMigratedSessions checks a store opened (and upgraded) over the
// traces of MigratedSessions: the tagged trace has its session and user,
// the other none, the session is listed, and a record appended to the
// old trace later does not change its session.
func CheckMigratedSessions(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	page, err := s.List(ctx, store.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.Summary{}
	for _, x := range page.Traces {
		got[x.Name] = x
	}
	if x := got["old-chat"]; x.Session != "conv-old" || x.User != "ada" {
		t.Errorf("tagged trace after the upgrade: session %q user %q, want conv-old and ada", x.Session, x.User)
	}
	if x, ok := got["old-run"]; !ok || x.Session != "" || x.User != "" {
		t.Errorf("untagged trace after the upgrade: %+v, want no session", x)
	}
	sessions, err := store.ListSessions(ctx, s, store.SessionQuery{})
	if err != nil || len(sessions.Sessions) != 1 || sessions.Sessions[0].ID != "conv-old" || sessions.Sessions[0].Runs != 1 {
		t.Fatalf("sessions after the upgrade: %+v, %v", sessions, err)
	}
	taggedID, untaggedID := got["old-chat"].ID, got["old-run"].ID
	more := trace.Record{V: 1, TraceID: taggedID, SpanID: trace.SpanID{9}, ParentID: trace.SpanID{1}, Seq: 10000,
		Time: t0.Add(time.Hour), Type: trace.TypeCustom, Name: "late", Run: &trace.RunInfo{Session: "conv-new", User: "bob"}}
	mustAppend(t, s, []trace.Record{more})
	// And a new trace of the untagged one's session fills it.
	mustAppend(t, s, []trace.Record{{V: 1, TraceID: untaggedID, SpanID: trace.SpanID{9}, Seq: 10000,
		Time: t0.Add(time.Hour), Type: trace.TypeCustom, Name: "late", Run: &trace.RunInfo{Session: "conv-new"}}})
	for _, tt := range []struct {
		id            trace.TraceID
		session, user string
	}{{taggedID, "conv-old", "ada"}, {untaggedID, "conv-new", ""}} {
		tr, err := s.Trace(ctx, tt.id)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Summary.Session != tt.session || tr.Summary.User != tt.user {
			t.Errorf("trace %s: session %q user %q, want %q %q", tt.id, tr.Summary.Session, tr.Summary.User, tt.session, tt.user)
		}
	}
}
