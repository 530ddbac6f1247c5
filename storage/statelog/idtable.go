package statelog

import "hash/maphash"

// idTable is the entities of one marketplace of a collection by id: open
// addressing with linear probing over a power-of-two array of slots, at
// most half full, each slot eight bytes (the upper half of the id's hash and
// the entry's number + 1). The ids are the entries' own (in the
// collection's key arena). Against a map[string]*entry (24 bytes a slot,
// and a slot per 0.44–0.88 entities) it halves the table of a million
// products, and holds no pointer for the garbage collector to scan.
type idTable struct {
	slots []idSlot
	n     int
}

type idSlot struct {
	tag uint32 // the upper half of the id's hash
	ref uint32 // the entry's number + 1; 0: empty
}

// at is the entry numbered num.
func (c *Collection[T]) at(num uint32) *entry[T] {
	return &c.chunks[num/entryChunk][num%entryChunk]
}

func (c *Collection[T]) hashOf(id string) uint64 { return maphash.String(c.seed, id) }

// find returns the entry of id in t (nil when absent).
func (c *Collection[T]) find(t *idTable, id string) *entry[T] {
	if t == nil || t.n == 0 {
		return nil
	}
	h := c.hashOf(id)
	tag := uint32(h >> 32)
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.ref == 0 {
			return nil
		}
		if s.tag == tag {
			if e := c.at(s.ref - 1); e.id == id {
				return e
			}
		}
	}
}

// insert adds e, whose id must not be in t.
func (c *Collection[T]) insert(t *idTable, e *entry[T]) {
	if 2*(t.n+1) > len(t.slots) {
		old := t.slots
		t.slots = make([]idSlot, max(8, 2*len(old)))
		for _, s := range old {
			if s.ref != 0 {
				c.place(t, c.hashOf(c.at(s.ref-1).id), s.ref)
			}
		}
	}
	c.place(t, c.hashOf(e.id), e.num+1)
	t.n++
}

func (c *Collection[T]) place(t *idTable, h uint64, ref uint32) {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if t.slots[i].ref == 0 {
			t.slots[i] = idSlot{tag: uint32(h >> 32), ref: ref}
			return
		}
	}
}

// remove deletes e from t, shifting back the entries after it that would
// otherwise become unreachable (no tombstones).
func (c *Collection[T]) remove(t *idTable, e *entry[T]) {
	mask := uint64(len(t.slots) - 1)
	i := c.hashOf(e.id) & mask
	for t.slots[i].ref != e.num+1 {
		if t.slots[i].ref == 0 {
			return
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.slots[j].ref != 0; j = (j + 1) & mask {
		home := c.hashOf(c.at(t.slots[j].ref-1).id) & mask
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if (i < j && i < home && home <= j) || (i > j && (home > i || home <= j)) {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = idSlot{}
	t.n--
}

// each calls fn with every entry of t (in no order) until it returns false.
func (c *Collection[T]) each(t *idTable, fn func(e *entry[T]) bool) {
	if t == nil {
		return
	}
	for _, s := range t.slots {
		if s.ref != 0 && !fn(c.at(s.ref-1)) {
			return
		}
	}
}
