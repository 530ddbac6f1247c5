// Package strset is a set of strings that the garbage collector does not
// scan: the strings live in one byte arena and the set's table holds their
// offsets, so a set is three objects without pointers inside, however many
// members it has.
//
// It exists for the large, long-lived indexes every process keeps in memory
// (the catalog's products by vendor and by category). As map[string]struct{}
// each member is a string header the collector follows on every cycle, to an
// id allocated on its own: for a million-product catalog, millions of
// pointers whose targets are cache misses (docs/design/performance.md).
//
// The strings a Set hands out (All, AppendTo) point into its arena. Bytes
// once written there are never changed: adding appends after them, removing
// only forgets their offset, and compaction copies the live members to a new
// arena. So a string handed out stays valid and unchanged for as long as it
// is held, whatever happens to the set afterwards.
//
// A Set is not safe for concurrent use; its owner locks.
package strset

import (
	"encoding/binary"
	"hash/maphash"
	"iter"
	"unsafe"
)

// seed keys the hash of every set in the process: an attacker who picks
// the strings cannot pick collisions without knowing it.
var seed = maphash.MakeSeed()

// slot is one place of the table: off is 1 + the member's offset in the
// arena (0: empty), h the low 32 bits of its hash (the home slot is
// h & mask, and a probe compares h before the bytes).
type slot struct {
	off uint32
	h   uint32
}

// Set is a set of strings. The zero Set is empty and ready to use.
type Set struct {
	arena []byte // members, each as a uvarint length then its bytes
	slots []slot // power-of-two length, at most half full
	n     int    // members
	dead  int    // arena bytes of removed members
}

// MaxArena is the largest arena a set can address (its offsets are 32-bit):
// about 4 GB of members.
const MaxArena = 1<<32 - 2

// Len is the number of members.
func (s *Set) Len() int { return s.n }

func hashOf(v string) uint32 { return uint32(maphash.String(seed, v)) }

// at is the member stored at arena offset off.
func (s *Set) at(off uint32) string {
	n, k := binary.Uvarint(s.arena[off:])
	start := int(off) + k
	if n == 0 {
		return ""
	}
	return unsafe.String(&s.arena[start], int(n))
}

// find returns the slot index of v, or -1.
func (s *Set) find(v string, h uint32) int {
	if s.n == 0 {
		return -1
	}
	mask := uint32(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := s.slots[i]
		if sl.off == 0 {
			return -1
		}
		if sl.h == h && s.at(sl.off-1) == v {
			return int(i)
		}
	}
}

// Has reports whether v is a member.
func (s *Set) Has(v string) bool { return s.find(v, hashOf(v)) >= 0 }

// Add adds v; it reports whether v was new. It panics if the arena would
// pass MaxArena.
func (s *Set) Add(v string) bool {
	h := hashOf(v)
	if s.find(v, h) >= 0 {
		return false
	}
	if 2*(s.n+1) > len(s.slots) {
		s.resize(max(8, 2*len(s.slots)))
	}
	off := len(s.arena)
	if off+binary.MaxVarintLen64+len(v) > MaxArena {
		panic("strset: arena full")
	}
	s.arena = binary.AppendUvarint(s.arena, uint64(len(v)))
	s.arena = append(s.arena, v...)
	s.insert(slot{off: uint32(off) + 1, h: h})
	s.n++
	return true
}

func (s *Set) insert(sl slot) {
	mask := uint32(len(s.slots) - 1)
	for i := sl.h & mask; ; i = (i + 1) & mask {
		if s.slots[i].off == 0 {
			s.slots[i] = sl
			return
		}
	}
}

// resize makes the table size slots long and re-inserts every member.
func (s *Set) resize(size int) {
	old := s.slots
	s.slots = make([]slot, size)
	for _, sl := range old {
		if sl.off != 0 {
			s.insert(sl)
		}
	}
}

// Remove removes v; it reports whether v was a member.
func (s *Set) Remove(v string) bool {
	i := s.find(v, hashOf(v))
	if i < 0 {
		return false
	}
	off := s.slots[i].off - 1
	_, k := binary.Uvarint(s.arena[off:])
	s.dead += k + len(v)
	// Shift back the members after i that would otherwise become
	// unreachable (no tombstones).
	mask := len(s.slots) - 1
	for j := (i + 1) & mask; s.slots[j].off != 0; j = (j + 1) & mask {
		home := int(s.slots[j].h) & mask
		// The member at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if (i < j && i < home && home <= j) || (i > j && (home > i || home <= j)) {
			continue
		}
		s.slots[i] = s.slots[j]
		i = j
	}
	s.slots[i] = slot{}
	s.n--
	switch {
	case s.n == 0:
		*s = Set{}
	case s.dead > len(s.arena)/2:
		s.compact()
	}
	return true
}

// compact copies the live members to a new arena (the old one stays
// intact for the strings handed out) and shrinks the table when it is
// mostly empty.
func (s *Set) compact() {
	arena := make([]byte, 0, len(s.arena)-s.dead)
	for i, sl := range s.slots {
		if sl.off == 0 {
			continue
		}
		v := s.at(sl.off - 1)
		s.slots[i].off = uint32(len(arena)) + 1
		arena = binary.AppendUvarint(arena, uint64(len(v)))
		arena = append(arena, v...)
	}
	s.arena, s.dead = arena, 0
	size := len(s.slots)
	for size > 8 && 8*s.n < size {
		size /= 2
	}
	if size != len(s.slots) {
		s.resize(size)
	}
}

// All iterates over the members, in no particular order. The set must not
// change during the iteration.
func (s *Set) All() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, sl := range s.slots {
			if sl.off != 0 && !yield(s.at(sl.off-1)) {
				return
			}
		}
	}
}

// AppendTo appends the members to dst, in no particular order.
func (s *Set) AppendTo(dst []string) []string {
	for _, sl := range s.slots {
		if sl.off != 0 {
			dst = append(dst, s.at(sl.off-1))
		}
	}
	return dst
}
