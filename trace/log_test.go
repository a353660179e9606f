package trace

import (
	"math/rand/v2"
	"testing"
)

// TestRecordLogSlices checks locate, at and appendSlices against the
// records' own positions, for logs with and without a head and ranges
// across chunk boundaries.
func TestRecordLogSlices(t *testing.T) {
	for _, head := range []int{0, 1, 7, 100} {
		var l recordLog
		l.head = make([]Record, 0, head)
		const n = 1000
		for i := range n {
			l.append(Record{Seq: uint64(i)})
		}
		for i := range n {
			if got := l.at(i).Seq; got != uint64(i) {
				t.Fatalf("head %d: at(%d) is record %d", head, i, got)
			}
		}
		rng := rand.New(rand.NewPCG(1, uint64(head)))
		for range 500 {
			from := rng.IntN(n)
			to := from + rng.IntN(n-from+1)
			next := uint64(from)
			for _, seg := range l.appendSlices(nil, from, to) {
				if len(seg) == 0 || cap(seg) != len(seg) {
					t.Fatalf("head %d, [%d,%d): segment of len %d cap %d", head, from, to, len(seg), cap(seg))
				}
				for _, r := range seg {
					if r.Seq != next {
						t.Fatalf("head %d, [%d,%d): got record %d, want %d", head, from, to, r.Seq, next)
					}
					next++
				}
			}
			if next != uint64(to) {
				t.Fatalf("head %d, [%d,%d): segments end at %d", head, from, to, next)
			}
		}
	}
}
