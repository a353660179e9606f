package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/loupe-dev/loupe/trace"
)

// TestSearchIDsFirstDeleted checks the second step of a search that
// chooses its rows first (searchIDsFirst) when some chosen rows are gone
// by the time their documents are read: the page is filled from the rows
// after them, and a full page ends where a one-step search ends it. The
// first step here is a fixed list of ids, some of which have no row.
func TestSearchIDsFirstDeleted(t *testing.T) {
	ctx := context.Background()
	conn, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec("CREATE TABLE records (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, doc BLOB NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// The first step's answer: ids 8 to 1 newest first, with the given
	// ones deleted (no row) before the second step.
	chosen := func(deleted ...int) string {
		if _, err := conn.Exec("DELETE FROM records"); err != nil {
			t.Fatal(err)
		}
		for id := 1; id <= 8; id++ {
			if slices.Contains(deleted, id) {
				continue
			}
			r := trace.Record{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{byte(id)}, Seq: uint64(id), Time: t0.Add(time.Duration(id) * time.Second), Type: trace.TypeRunStart, Name: "run"}
			if _, err := conn.Exec("INSERT INTO records (id, ts, doc) VALUES (?, ?, ?)", id, r.Time.UnixNano(), r.AppendJSON(nil)); err != nil {
				t.Fatal(err)
			}
		}
		q := "SELECT * FROM (VALUES "
		for id := 8; id >= 1; id-- {
			if id < 8 {
				q += ", "
			}
			q += fmt.Sprintf("(%d, %d, 'run')", id, t0.Add(time.Duration(id)*time.Second).UnixNano())
		}
		return q + ")"
	}
	db := &DB{SQL: conn, Name: "test"}
	for _, tt := range []struct {
		name     string
		deleted  []int
		allHits  bool
		limit    int
		wantSeqs []uint64
		wantFull bool
	}{
		{"nothing deleted, page of 3", nil, true, 3, []uint64{8, 7, 6}, true},
		{"a row of the page deleted", []int{7}, true, 3, []uint64{8, 6, 5}, true},
		{"the page's rows deleted", []int{8, 7, 6}, true, 3, []uint64{5, 4, 3}, true},
		{"too many deleted to fill it", []int{8, 7, 6, 5, 4, 3}, true, 3, []uint64{2, 1}, false},
		{"every row read, one deleted", []int{2}, false, 10, []uint64{8, 7, 6, 5, 4, 3, 1}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := chosen(tt.deleted...)
			var seqs []uint64
			var next bool
			take := func(id int64, name string, doc []byte) (bool, error) {
				if len(seqs) == tt.limit {
					next = true
					return true, nil
				}
				r, err := trace.DecodeRecord(doc)
				if err != nil {
					return false, fmt.Errorf("row %d: %w", id, err)
				}
				if name != "run" || int64(r.Seq) != id {
					return false, fmt.Errorf("row %d: seq %d, trace name %q", id, r.Seq, name)
				}
				seqs = append(seqs, r.Seq)
				return false, nil
			}
			n, last, full, err := db.searchIDsFirst(ctx, q, nil, tt.allHits, tt.limit, take)
			if err != nil {
				t.Fatal(err)
			}
			if n != 8 || last != 1 || full != tt.wantFull || next != tt.wantFull || !slices.Equal(seqs, tt.wantSeqs) {
				t.Errorf("read %d rows to %d, full %v, hits %v; want 8 to 1, full %v, hits %v", n, last, full, seqs, tt.wantFull, tt.wantSeqs)
			}
		})
	}
}
