package trace_test

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/loupe-dev/loupe/trace"
)

// TestRecordSize bounds trace.Record's size. Every record a run makes is
// one Record in its log (and in the dispatcher's queue and every sink's
// batch), so a field on Record costs its bytes on every record, whatever
// its type: two strings only run.start used took Record from 320 to 352
// bytes, +9 % memory per record kept and a few percent more time per
// record (BENCHMARKS.md, "the record path after sessions"). Fields only
// some records use belong behind a pointer, as RunInfo is; raise the
// bound only with a benchmark that shows the cost is worth it.
func TestRecordSize(t *testing.T) {
	const maxBytes = 320
	if n := unsafe.Sizeof(trace.Record{}); n > maxBytes {
		t.Errorf("trace.Record is %d bytes, more than %d: move fields only some records use behind a pointer (see RunInfo)", n, maxBytes)
	}
}

// TestEditRun checks that a record's copies share Run until one of them
// calls EditRun, and that the readers are safe on a record without one.
func TestEditRun(t *testing.T) {
	var none trace.Record
	if none.Tags() != nil || none.Session() != "" || none.User() != "" {
		t.Errorf("a record without Run reads tags %q session %q user %q", none.Tags(), none.Session(), none.User())
	}
	a := trace.Record{Type: trace.TypeRunStart, Run: &trace.RunInfo{Tags: []string{"env:ci"}, Session: "conv-1", User: "ada"}}
	b := a
	ri := b.EditRun()
	ri.Session, ri.Tags[0] = "conv-2", "env:prod"
	if a.Session() != "conv-1" || a.Tags()[0] != "env:ci" || a.User() != "ada" {
		t.Errorf("editing a copy changed the original: session %q tags %q user %q", a.Session(), a.Tags(), a.User())
	}
	if b.Session() != "conv-2" || b.Tags()[0] != "env:prod" || b.User() != "ada" {
		t.Errorf("the edited copy reads session %q tags %q user %q", b.Session(), b.Tags(), b.User())
	}
	if none.EditRun().User = "bob"; none.User() != "bob" {
		t.Errorf("EditRun on a record without Run: user %q", none.User())
	}
}

// TestRunInfoString: fmt prints a record's Run by its content, so that
// records compared or reported through fmt show their tags and ids.
func TestRunInfoString(t *testing.T) {
	a := trace.Record{Name: "x", Run: &trace.RunInfo{Tags: []string{"env:ci"}, Session: "conv-1"}}
	b := trace.Record{Name: "x", Run: &trace.RunInfo{Tags: []string{"env:ci"}, Session: "conv-1"}}
	if fmt.Sprint(a) != fmt.Sprint(b) || !strings.Contains(fmt.Sprintf("%+v", a), `Run:{Tags:["env:ci"] Session:"conv-1" User:""}`) {
		t.Errorf("records print as %v and %+v", a, b)
	}
	if s := fmt.Sprint(trace.Record{}); !strings.Contains(s, "<nil>") {
		t.Errorf("a record without Run prints as %s", s)
	}
}
