package tracesview

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/pgtest"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/postgres"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
)

// goodLines returns the lines of testdata/rag_demo.loupe.jsonl, one trace
// with seqs 1 to 12, decoded.
func goodLines(t *testing.T) []trace.Record {
	t.Helper()
	b, err := os.ReadFile("testdata/rag_demo.loupe.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var recs []trace.Record
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		r, err := trace.DecodeRecord(l)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// writeLines writes recs as a Loupe JSON-lines file and returns its path.
func writeLines(t *testing.T, recs []trace.Record) string {
	t.Helper()
	var b []byte
	for i := range recs {
		b = append(recs[i].AppendJSON(b), '\n')
	}
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// poisonStore refuses, with a plain error, any batch holding a record
// named "poison": a store failing on one record for reasons
// ValidateRecord does not know. With all set it refuses every batch.
type poisonStore struct {
	store.Store
	all bool
}

func (p poisonStore) Append(ctx context.Context, recs []trace.Record) (int, error) {
	for _, r := range recs {
		if p.all || r.Name == "poison" {
			return 0, errors.New("database says no")
		}
	}
	return p.Store.Append(ctx, recs)
}

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openPostgres opens a PostgreSQL store in a fresh schema of the database
// LOUPE_TEST_POSTGRES names, or skips t without it (fails under CI=true).
func openPostgres(t *testing.T) store.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// backends are the stores the import tests run against.
var backends = []struct {
	name string
	open func(*testing.T) store.Store
}{{"sqlite", openSQLite}, {"postgres", openPostgres}}

func TestImportKeepsWhatIsGood(t *testing.T) {
	year9999 := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	type want = importWant
	tests := []struct {
		name   string
		edit   func([]trace.Record) []trace.Record
		poison string // "one" or "all": wrap the store in poisonStore
		want   want
	}{
		{"good file", nil, "", want{records: 12, added: 12, storedSeqs: 12}},
		{"time in year 9999 on line 3", func(r []trace.Record) []trace.Record {
			r[2].Time = year9999
			return r
		}, "", want{records: 12, added: 11, refused: 1, refusedLines: []int{3}, errHas: []string{"in.jsonl:3", "outside the years", "refused 1 of 12"}, storedSeqs: 11}},
		{"seq 2^64-1 on line 12", func(r []trace.Record) []trace.Record {
			r[11].Seq = math.MaxUint64
			return r
		}, "", want{records: 12, added: 11, refused: 1, refusedLines: []int{12}, errHas: []string{"in.jsonl:12", "too large"}, storedSeqs: 11}},
		{"two bad records", func(r []trace.Record) []trace.Record {
			r[0].Time = year9999
			r[6].Seq = math.MaxUint64
			return r
		}, "", want{records: 12, added: 10, refused: 2, refusedLines: []int{1, 7}, errHas: []string{"in.jsonl:1", "refused 2 of 12"},
			gaps: 1, warnHas: []string{"lacks seq 7"}, storedSeqs: 10}}, // seq 7 became 2^64-1: seq 7 is missing
		{"repeated seq with different content", func(r []trace.Record) []trace.Record {
			d := r[4]
			d.Name = "something else"
			return append(r, d)
		}, "", want{records: 13, added: 12, conflicts: 1, warnHas: []string{"1 records repeat", "in.jsonl:13 (trace", "seq 5) repeats line 5"}, storedSeqs: 12}},
		{"identical repeat is no conflict", func(r []trace.Record) []trace.Record {
			return append(r, r[4])
		}, "", want{records: 13, added: 12, storedSeqs: 12}},
		{"seq gap", func(r []trace.Record) []trace.Record {
			return append(r[:3:3], r[6:]...) // seqs 4-6 missing
		}, "", want{records: 9, added: 9, gaps: 3, warnHas: []string{"3 seqs missing in 1 traces", "lacks seqs 4-6"}, storedSeqs: 9}},
		{"store refuses one record", func(r []trace.Record) []trace.Record {
			r[8].Name = "poison"
			return r
		}, "one", want{records: 12, added: 11, refused: 1, refusedLines: []int{9}, errHas: []string{"in.jsonl:9", "database says no"}, storedSeqs: 11}},
		{"store refuses everything", nil, "all", want{records: 12, refused: 12, refusedLines: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, errHas: []string{"refused 12 of 12", "database says no"}}},
		{"store refuses too many", func(r []trace.Record) []trace.Record {
			for seq := uint64(13); seq <= 40; seq++ {
				c := r[1]
				c.Seq = seq
				r = append(r, c)
			}
			return r
		}, "all", want{records: 40, refused: maxStoreRefusals, errHas: []string{"giving up on this file", "database says no"}}},
	}
	for _, be := range backends {
		for _, tt := range tests {
			t.Run(be.name+"/"+tt.name, func(t *testing.T) {
				testImport(t, be.open(t), tt.edit, tt.poison, tt.want)
			})
		}
	}
}

type importWant struct {
	records, added, refused int
	refusedLines            []int
	conflicts, gaps         int
	errHas                  []string // in Err; none: Err is nil
	warnHas                 []string // in the joined warnings
	storedSeqs              int      // records of the trace in the store afterwards
}

func testImport(t *testing.T, base store.Store, edit func([]trace.Record) []trace.Record, poison string, w importWant) {
	recs := goodLines(t)
	if edit != nil {
		recs = edit(recs)
	}
	path := writeLines(t, recs)
	var st store.Store = base
	if poison != "" {
		st = poisonStore{Store: base, all: poison == "all"}
	}
	res := Import(context.Background(), st, path, "")
	if res.Records != w.records || res.Added != w.added || res.Refused != w.refused || res.Conflicts != w.conflicts || res.SeqGaps != w.gaps {
		t.Errorf("records %d added %d refused %d conflicts %d gaps %d, want %d %d %d %d %d",
			res.Records, res.Added, res.Refused, res.Conflicts, res.SeqGaps, w.records, w.added, w.refused, w.conflicts, w.gaps)
	}
	var lines []int
	for _, r := range res.RefusedRecords {
		lines = append(lines, r.Line)
	}
	if w.refusedLines != nil && !slices.Equal(lines, w.refusedLines) {
		t.Errorf("refused lines %v, want %v", lines, w.refusedLines)
	}
	if len(w.errHas) == 0 && res.Err != nil {
		t.Errorf("error %v, want none", res.Err)
	}
	for _, s := range w.errHas {
		if res.Err == nil || !strings.Contains(res.Err.Error(), s) {
			t.Errorf("error %v, want it to say %q", res.Err, s)
		}
	}
	warnings := strings.Join(res.Warnings, "\n")
	if len(w.warnHas) == 0 && warnings != "" {
		t.Errorf("warnings %q, want none", warnings)
	}
	for _, s := range w.warnHas {
		if !strings.Contains(warnings, s) {
			t.Errorf("warnings %q, want them to say %q", warnings, s)
		}
	}
	stored := 0
	if tr, err := base.Trace(context.Background(), recs[0].TraceID); err == nil {
		stored = len(tr.Records)
	} else if !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	if stored != w.storedSeqs {
		t.Errorf("%d records stored, want %d", stored, w.storedSeqs)
	}
	// Importing again adds nothing and reports the same problems.
	if poison == "" {
		again := Import(context.Background(), st, path, "")
		if again.Added != 0 || again.Refused != res.Refused || again.Conflicts != res.Conflicts || again.SeqGaps != res.SeqGaps {
			t.Errorf("second import: %+v", again)
		}
	}
}

// TestImportFilesReports checks what a person sees: the refused record's
// file and line and the warnings on errw, the refusal count on w, and a
// non-nil error.
func TestImportFilesReports(t *testing.T) {
	recs := goodLines(t)
	recs[2].Time = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	recs = append(recs[:5:5], recs[7:]...) // seqs 6-7 missing
	path := writeLines(t, recs)
	var out, errw bytes.Buffer
	err := ImportFiles(context.Background(), openSQLite(t), []string{path}, ImportOptions{Out: &out, Err: &errw})
	if !errors.Is(err, ErrSome) {
		t.Errorf("error %v, want ErrSome", err)
	}
	for _, s := range []string{path + ":3: record refused", "outside the years", "warning: " + path + ": 2 seqs missing"} {
		if !strings.Contains(errw.String(), s) {
			t.Errorf("stderr %q lacks %q", errw.String(), s)
		}
	}
	if want := "10 records in 1 traces (9 new, 1 refused)"; !strings.Contains(out.String(), want) {
		t.Errorf("stdout %q lacks %q", out.String(), want)
	}
}
