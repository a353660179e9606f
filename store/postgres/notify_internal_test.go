package postgres

import (
	"reflect"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// rowsOf returns the keys of records of trace id with the given seqs.
func rowsOf(id byte, seqs ...uint64) []key {
	out := make([]key, len(seqs))
	for i, s := range seqs {
		out[i] = key{trace.TraceID{id, 1}, s}
	}
	return out
}

func TestNoticeEncoding(t *testing.T) {
	const origin = "0123456789abcdef"
	many := make([]uint64, 0, 200)
	for s := uint64(1); s <= 400; s += 2 {
		many = append(many, s)
	}
	for _, tt := range []struct {
		name string
		rows []key
		want []store.CommitTrace
	}{
		{"one run", rowsOf(1, 1, 2, 3, 4), []store.CommitTrace{{TraceID: trace.TraceID{1, 1}, Seqs: []store.SeqRange{{From: 1, To: 4}}}}},
		{"scattered", rowsOf(1, 2, 5, 6, 9), []store.CommitTrace{{TraceID: trace.TraceID{1, 1}, Seqs: []store.SeqRange{{From: 2, To: 2}, {From: 5, To: 6}, {From: 9, To: 9}}}}},
		{"two traces", append(rowsOf(1, 7), rowsOf(2, 1, 2)...), []store.CommitTrace{
			{TraceID: trace.TraceID{1, 1}, Seqs: []store.SeqRange{{From: 7, To: 7}}},
			{TraceID: trace.TraceID{2, 1}, Seqs: []store.SeqRange{{From: 1, To: 2}}},
		}},
		// More than maxRanges: the last range is widened to the end.
		{"many ranges", rowsOf(3, many...), func() []store.CommitTrace {
			ct := store.CommitTrace{TraceID: trace.TraceID{3, 1}}
			for i := range maxRanges - 1 {
				s := uint64(1 + 2*i)
				ct.Seqs = append(ct.Seqs, store.SeqRange{From: s, To: s})
			}
			ct.Seqs = append(ct.Seqs, store.SeqRange{From: uint64(1 + 2*(maxRanges-1)), To: 399})
			return []store.CommitTrace{ct}
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ps := encodeNotices(origin, tt.rows)
			if len(ps) != 1 {
				t.Fatalf("%d payloads: %q", len(ps), ps)
			}
			o, n, lost, err := decodeNotice(ps[0])
			if err != nil || o != origin || lost {
				t.Fatalf("decode %q: %q %v", ps[0], o, err)
			}
			if !reflect.DeepEqual(n.Traces, tt.want) {
				t.Errorf("payload %q\ngot  %+v\nwant %+v", ps[0], n.Traces, tt.want)
			}
		})
	}
}

// TestNoticeSplit: a commit of many traces is told in several payloads,
// each small enough for NOTIFY, naming every trace once.
func TestNoticeSplit(t *testing.T) {
	var rows []key
	for i := range 3000 {
		id := trace.TraceID{byte(i >> 8), byte(i), 9}
		for s := uint64(1); s <= 3; s++ {
			rows = append(rows, key{id, s * 10})
		}
	}
	ps := encodeNotices("0123456789abcdef", rows)
	if len(ps) < 2 {
		t.Fatalf("%d payloads", len(ps))
	}
	seen := 0
	for _, p := range ps {
		if len(p) > maxPayload {
			t.Errorf("payload of %d bytes", len(p))
		}
		_, n, _, err := decodeNotice(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, ct := range n.Traces {
			if want := []store.SeqRange{{From: 10, To: 10}, {From: 20, To: 20}, {From: 30, To: 30}}; !reflect.DeepEqual(ct.Seqs, want) {
				t.Fatalf("%s: %v", ct.TraceID, ct.Seqs)
			}
		}
		seen += len(n.Traces)
	}
	if seen != 3000 {
		t.Errorf("%d traces told, want 3000", seen)
	}
	if ps := encodeNotices("0123456789abcdef", nil); len(ps) != 0 {
		t.Errorf("no rows: %q", ps)
	}
}

func TestNoticeRejects(t *testing.T) {
	id := strings.Repeat("ab", 16)
	for _, tt := range []struct{ payload, want string }{
		{"", "want a first line"},
		{"2 0123456789abcdef", "want a first line"},
		{"1 0123456789ABCDEF", "not 16 hex digits"},
		{"1 0123456789abcdef\n" + id, "want a trace id, a space"},
		{"1 0123456789abcdef\n" + strings.Repeat("0", 32) + " 1", "not all zero"},
		{"1 0123456789abcdef\n" + id[:30] + " 1", "want 32 hex digits"},
		{"1 0123456789abcdef\n" + id + " 0", "want <from>[-<to>]"},
		{"1 0123456789abcdef\n" + id + " 01", "want <from>[-<to>]"},
		{"1 0123456789abcdef\n" + id + " 9223372036854775808", "want <from>[-<to>]"},
		{"1 0123456789abcdef\n" + id + " 5-3", "ends before it starts"},
		{"1 0123456789abcdef\n" + id + " 1-5,5", "not after the one before"},
		{"1 0123456789abcdef\n" + id + " " + strings.Repeat("1,", maxRanges) + "1", "seq ranges, at most"},
		{"1 0123456789abcdef\n" + id + " " + strings.Repeat("9", 8000), "longer than PostgreSQL allows"},
	} {
		if _, _, _, err := decodeNotice(tt.payload); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.60q: %v, want %q", tt.payload, err, tt.want)
		}
	}
}

func TestNoticeLost(t *testing.T) {
	o, n, lost, err := decodeNotice("1 0123456789abcdef\nlost")
	if err != nil || !lost || o != "0123456789abcdef" || len(n.Traces) != 0 {
		t.Errorf("lost notice: %q %+v %v %v", o, n, lost, err)
	}
}

func TestChannelFor(t *testing.T) {
	if c := channelFor("public"); c != "loupe public" {
		t.Errorf("public: %q", c)
	}
	long := strings.Repeat("x", 70)
	if c := channelFor(long); len(c) > 63 || c == channelFor(long+"y") {
		t.Errorf("long schema: %q", c)
	}
	if c := channelFor("é"); c == "loupe é" || len(c) > 63 {
		t.Errorf("non-ASCII schema: %q", c)
	}
}

// FuzzDecodeNotice: no payload makes decodeNotice panic, and what it
// accepts encodes back to a payload naming the same seqs.
func FuzzDecodeNotice(f *testing.F) {
	f.Add("1 0123456789abcdef\n" + strings.Repeat("ab", 16) + " 1-4,7,9-12")
	f.Add("1 0123456789abcdef")
	f.Add("1 0123456789abcdef\nx 1")
	f.Fuzz(func(t *testing.T, payload string) {
		origin, n, lost, err := decodeNotice(payload)
		if err != nil || lost {
			return
		}
		var rows []key
		for _, ct := range n.Traces {
			for _, r := range ct.Seqs {
				if r.To-r.From > 1000 {
					return // too many rows to build
				}
				for s := r.From; s <= r.To; s++ {
					rows = append(rows, key{ct.TraceID, s})
				}
			}
		}
		// The notice may name a trace twice or out of order: only a
		// sorted, merged set encodes back the same.
		seen := map[trace.TraceID]bool{}
		for i, ct := range n.Traces {
			if seen[ct.TraceID] || (i > 0 && string(ct.TraceID[:]) < string(n.Traces[i-1].TraceID[:])) {
				return
			}
			seen[ct.TraceID] = true
		}
		var back []key
		for _, p := range encodeNotices(origin, rows) {
			o, n, _, err := decodeNotice(p)
			if err != nil || o != origin {
				t.Fatalf("re-encoded %q: %q %v", p, o, err)
			}
			for _, ct := range n.Traces {
				for _, r := range ct.Seqs {
					for s := r.From; s <= r.To; s++ {
						back = append(back, key{ct.TraceID, s})
					}
				}
			}
		}
		if !reflect.DeepEqual(back, rows) {
			t.Fatalf("%q re-encoded names other records", payload)
		}
	})
}
