package redact

import "strings"

// keywordIndex finds which rules' keywords occur in a text in one pass,
// instead of one substring search per keyword: each keyword is anchored
// at its least common three bytes, a 64 Kbit set of those trigrams' hashes
// turns away almost every position at the cost of a shift, a multiply and
// a bit test, and only positions that pass are checked against the
// keywords anchored there.
type keywordIndex struct {
	bits    [1 << 16 / 64]uint64
	anchors map[uint32][]anchor // by trigram
	short   []anchor            // keywords shorter than three bytes: searched for one by one
}

type anchor struct {
	kw   string
	off  int // where the trigram starts in kw
	rule int
}

func trigram(a, b, c byte) uint32 { return uint32(a)<<16 | uint32(b)<<8 | uint32(c) }

func trigramHash(t uint32) uint32 { return (t * 0x9E3779B1) >> 16 }

// commonness scores a byte by how often it occurs in ordinary text, so
// that keywords are anchored where ordinary text rarely matches them.
func commonness(c byte) int {
	switch {
	case strings.IndexByte("etaoinsrhl ", c) >= 0:
		return 3
	case 'a' <= c && c <= 'z':
		return 2
	case 'A' <= c && c <= 'Z':
		return 1
	}
	return 0
}

func (x *keywordIndex) add(kw string, rule int) {
	if len(kw) < 3 {
		x.short = append(x.short, anchor{kw: kw, rule: rule})
		return
	}
	best, bestScore := 0, 1<<30
	for i := 0; i+3 <= len(kw); i++ {
		if s := commonness(kw[i]) + commonness(kw[i+1]) + commonness(kw[i+2]); s < bestScore {
			best, bestScore = i, s
		}
	}
	t := trigram(kw[best], kw[best+1], kw[best+2])
	h := trigramHash(t)
	x.bits[h/64] |= 1 << (h % 64)
	if x.anchors == nil {
		x.anchors = make(map[uint32][]anchor)
	}
	x.anchors[t] = append(x.anchors[t], anchor{kw: kw, off: best, rule: rule})
}

// match returns the set of rules (bit i for rule i; all bits if a rule
// beyond the 64th matched) with a keyword in s.
func (x *keywordIndex) match(s string) uint64 {
	var m uint64
	for _, a := range x.short {
		if strings.Contains(s, a.kw) {
			m |= ruleBit(a.rule)
		}
	}
	if len(x.anchors) == 0 || len(s) < 3 {
		return m
	}
	t := trigram(0, s[0], s[1])
	for i := 2; i < len(s); i++ {
		t = (t<<8 | uint32(s[i])) & 0xFFFFFF
		h := trigramHash(t)
		if x.bits[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, a := range x.anchors[t] {
			start := i - 2 - a.off
			if start >= 0 && strings.HasPrefix(s[start:], a.kw) {
				m |= ruleBit(a.rule)
			}
		}
	}
	return m
}

func ruleBit(i int) uint64 {
	if i >= 64 {
		return ^uint64(0)
	}
	return 1 << i
}
