package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// CheckGroupAppender checks a store.GroupAppender's contract on an empty
// store s: each group's count of new records as if the groups were
// appended one after another, duplicates within and across groups and of
// what is already stored counted once, in the first group that holds
// them; the stored traces read back as Append would have stored them; a
// bad record fails PrepareGroup with its index in the group, and a group
// the store did not prepare fails the whole call, storing nothing.
func CheckGroupAppender(t *testing.T, s store.GroupAppender) {
	t.Helper()
	ctx := context.Background()
	a, b, c := Gen(Spec{Name: "a"}), Gen(Spec{Name: "b"}), Gen(Spec{Name: "c"})
	if _, err := s.Append(ctx, a[:2]); err != nil {
		t.Fatal(err)
	}
	groups := [][]trace.Record{
		a,                     // the first two are stored already
		b,                     // all new
		b[:3],                 // a retry of part of b in the same transaction
		nil,                   // an empty request
		append(c[:1:1], c...), // c with its first record twice
	}
	counts, err := s.AppendGroups(ctx, prepare(t, s, groups...))
	if err != nil {
		t.Fatalf("AppendGroups: %v", err)
	}
	want := []int{len(a) - 2, len(b), 0, 0, len(c)}
	if len(counts) != len(want) {
		t.Fatalf("AppendGroups counts %v, want %v", counts, want)
	}
	for i := range want {
		if counts[i] != want[i] {
			t.Errorf("AppendGroups counts %v, want %v", counts, want)
			break
		}
	}
	for _, run := range [][]trace.Record{a, b, c} {
		tr, err := s.Trace(ctx, run[0].TraceID)
		if err != nil {
			t.Fatalf("Trace %s: %v", run[0].Name, err)
		}
		if len(tr.Records) != len(run) {
			t.Errorf("trace %s holds %d records, want %d", run[0].Name, len(tr.Records), len(run))
		}
	}

	// A bad record fails its group's preparation, with its index in the
	// group.
	d, e := Gen(Spec{Name: "d"}), Gen(Spec{Name: "e"})
	bad := append([]trace.Record(nil), e...)
	bad[1].Seq = 0
	if _, err := s.PrepareGroup(bad); err == nil {
		t.Fatal("PrepareGroup with a bad record: no error")
	} else if re := (*store.RecordError)(nil); !errors.As(err, &re) || re.Index != 1 {
		t.Errorf("PrepareGroup with a bad record: %v, want a *store.RecordError at index 1", err)
	}
	// A group the store did not prepare fails every group: nothing of the
	// call is stored, and the good group can be appended after.
	good := prepare(t, s, d)
	if _, err := s.AppendGroups(ctx, append(good, foreignGroup{e})); err == nil {
		t.Fatal("AppendGroups with a foreign group: no error")
	}
	if _, err := s.Trace(ctx, d[0].TraceID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after a failed AppendGroups the good group's trace is there (err %v)", err)
	}
	if counts, err := s.AppendGroups(ctx, good); err != nil || counts[0] != len(d) {
		t.Errorf("AppendGroups of the good group again: %v %v, want [%d]", counts, err, len(d))
	}
}

// prepare prepares each group with s.PrepareGroup.
func prepare(t *testing.T, s store.GroupAppender, groups ...[]trace.Record) []store.Group {
	t.Helper()
	out := make([]store.Group, len(groups))
	for i, g := range groups {
		var err error
		if out[i], err = s.PrepareGroup(g); err != nil {
			t.Fatalf("PrepareGroup %d: %v", i, err)
		}
	}
	return out
}

// foreignGroup is a store.Group no store prepared.
type foreignGroup struct{ recs []trace.Record }

func (f foreignGroup) Records() []trace.Record { return f.recs }
