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
// them; a bad record anywhere fails the whole call, storing nothing; the
// stored traces read back as Append would have stored them.
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
	counts, err := s.AppendGroups(ctx, groups)
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

	// One bad record fails every group: nothing of the call is stored.
	d, e := Gen(Spec{Name: "d"}), Gen(Spec{Name: "e"})
	bad := append([]trace.Record(nil), e...)
	bad[1].Seq = 0
	if _, err := s.AppendGroups(ctx, [][]trace.Record{d, bad}); err == nil {
		t.Fatal("AppendGroups with a bad record: no error")
	} else if re := (*store.RecordError)(nil); !errors.As(err, &re) || re.Index != len(d)+1 {
		t.Errorf("AppendGroups with a bad record: %v, want a *store.RecordError at index %d", err, len(d)+1)
	}
	if _, err := s.Trace(ctx, d[0].TraceID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after a failed AppendGroups the good group's trace is there (err %v)", err)
	}
}
