package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/internal/sqlstore"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/store/storetest"
	"github.com/loupe-dev/loupe/trace"
)

func open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "loupe.db"))
	})
}

func TestOpenChoosesSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.db")
	s, err := store.Open(context.Background(), "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*sqlite.Store); !ok {
		t.Fatalf("store.Open gave %T", s)
	}
}

func TestNewerSchemaIsReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loupe.db")
	s := open(t, path)
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE meta SET value = ? WHERE key = 'schema_version'", sqlite.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	storetest.CheckReadOnly(t, open(t, path), sqlite.SchemaVersion+1, sqlite.SchemaVersion)
}

// TestLegacyNumbers checks that a store holding numbers older versions
// accepted (and sums they let overflow) is still read.
func TestLegacyNumbers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loupe.db")
	s := open(t, path)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.CheckLegacyNumbers(t, s, storetest.Legacy{
		Append: func(ctx context.Context, recs []trace.Record) (int, error) { return sqlite.AppendValid(s, ctx, recs) },
		Exec: func(ctx context.Context, q string) error {
			_, err := db.ExecContext(ctx, q)
			return err
		},
		// SQLite turns an integer sum that overflows into a float; a
		// float sum that overflows is infinite.
		SQL: []string{
			"UPDATE traces SET input_tokens = 1e19 WHERE name = 'legacy-huge'",
			"UPDATE trace_tools SET total_ns = 2e19",
			"UPDATE traces SET cost = 9e999 WHERE name = 'legacy-huge-2'",
		},
	})
}

func TestGroupAppender(t *testing.T) {
	storetest.CheckGroupAppender(t, open(t, filepath.Join(t.TempDir(), "loupe.db")))
}

func TestScores(t *testing.T) {
	storetest.CheckScores(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "loupe.db"))
	})
}

// TestTextIndexAcrossGaps: the text index statement of an append spans
// the new records' ids, with a hole for each record without text; a run
// of more records without text than it spans starts another statement,
// and the records on both sides are found by their own ids.
func TestTextIndexAcrossGaps(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "loupe.db"))
	run := storetest.Gen(storetest.Spec{Name: "gaps", Steps: 300, ToolOut: "answer"})
	var recs []trace.Record
	var last trace.Record
	for i, r := range run {
		switch {
		case i == 0:
			recs = append(recs, r) // the run's start: "question about gaps"
		case sqlstore.Body(&r) == "":
			recs = append(recs, r)
		case r.Type == trace.TypeToolEnd:
			last = r // the last tool end: "answer"
		}
	}
	if len(recs) < 2+2*256 {
		t.Fatalf("only %d records without text", len(recs)-1)
	}
	// Two gaps of more than 256 ids without text: the first record, the
	// last tool end in the middle, then more without text.
	recs = slices.Insert(recs, len(recs)/2, last)
	if _, err := s.Append(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		word string
		want trace.Record
	}{{"question", run[0]}, {"answer", last}} {
		page, err := s.Search(context.Background(), store.Query{Words: []string{tt.word}})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Hits) != 1 || page.Hits[0].Seq != tt.want.Seq {
			t.Errorf("search %q: %+v, want the record of seq %d alone", tt.word, page.Hits, tt.want.Seq)
		}
	}
}

// TestWALStaysBounded: appends do not checkpoint themselves, and a
// checkpoint beside continuous appends never finds the WAL wholly copied;
// the checkpointer's pass under the write lock past the limit is what
// lets the WAL start over, so its file stays near the limit however much
// is appended, while a reader keeps reading.
func TestWALStaysBounded(t *testing.T) {
	defer sqlite.SetWALRestartFrames(256)() // 1 MiB
	path := filepath.Join(t.TempDir(), "loupe.db")
	s := open(t, path)
	ctx := context.Background()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.List(ctx, store.ListQuery{}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var maxWAL int64
	for i := range 200 {
		run := storetest.Gen(storetest.Spec{Name: fmt.Sprint("run ", i), Steps: 20})
		if _, err := s.Append(ctx, run); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path + "-wal"); err == nil {
			maxWAL = max(maxWAL, fi.Size())
		}
	}
	close(stop)
	<-done
	db, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Each append writes well under 1 MiB, and the WAL may pass the limit
	// by what is appended while the checkpointer catches up (2–8 MiB
	// here); a WAL that never started over holds every page written,
	// several times the database (about 23 MiB for 9 MiB).
	if maxWAL > db.Size() {
		t.Errorf("the WAL grew to %d bytes (the database is %d bytes), want it to start over near 1 MiB", maxWAL, db.Size())
	}
	t.Logf("WAL at most %d bytes, database %d bytes", maxWAL, db.Size())
}
