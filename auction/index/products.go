package index

import (
	"hash/maphash"
	"iter"
)

// productTable is the products of one marketplace by id: open addressing
// with linear probing over a power-of-two array of slots, each holding the
// id's 64-bit hash beside the entry, at most half full.
//
// It exists for lookups in batches (lookup): an auction looks up hundreds of
// ids at once, and with Go's map each lookup waits for two dependent cache
// misses (the map's group, then the key's bytes) before the next one
// starts. Here a batch first reads every id's slot, then every candidate
// entry and its id's bytes, each pass made of independent loads that the
// CPU overlaps.
type productTable struct {
	slots []productSlot
	n     int
	seed  maphash.Seed
}

type productSlot struct {
	hash uint64 // 0: empty (hashOf never returns 0)
	p    *Product
}

func newProductTable() productTable { return productTable{seed: maphash.MakeSeed()} }

func (t *productTable) hashOf(id string) uint64 {
	if h := maphash.String(t.seed, id); h != 0 {
		return h
	}
	return 1
}

func (t *productTable) len() int { return t.n }

// get returns the entry of id, nil when absent.
func (t *productTable) get(id string) *Product {
	if t.n == 0 {
		return nil
	}
	return t.at(t.probeRef(t.hashOf(id), id))
}

// lookupBatch is how many ids lookup resolves per pass.
const lookupBatch = 64

// ProductRef is a product's place in its market's table, as Products
// returns it: a number, where a pointer appended to a slice costs a write
// barrier while the garbage collector marks (docs/design/performance.md). 0 means
// absent. Read it with Market.ProductAt within the same Index.Read.
type ProductRef uint32

// lookup appends the ref of each id (0 when absent) to out. The returned
// number means nothing: the caller keeps it somewhere, so that the compiler
// keeps the loads of pass 1.
func (t *productTable) lookup(ids []string, out []ProductRef) ([]ProductRef, uint64) {
	if t.n == 0 {
		for range ids {
			out = append(out, 0)
		}
		return out, 0
	}
	touched := uint64(0)
	mask := uint64(len(t.slots) - 1)
	var hs [lookupBatch]uint64
	for len(ids) > 0 {
		batch := ids[:min(len(ids), lookupBatch)]
		ids = ids[len(batch):]
		// Pass 1: hash every id and read its home slot.
		for k, id := range batch {
			h := t.hashOf(id)
			hs[k] = h
			touched += t.slots[h&mask].hash
		}
		// Pass 2: the first slot with the id's hash (the slots are cached
		// now); the entry is read in pass 3.
		base := len(out)
		for k := range batch {
			h := hs[k]
			var ref ProductRef
			for i := h & mask; ; i = (i + 1) & mask {
				s := &t.slots[i]
				if s.hash == 0 {
					break
				}
				if s.hash == h {
					ref = ProductRef(i + 1)
					break
				}
			}
			out = append(out, ref)
		}
		// Pass 3: check the ids (each a read of its entry and its id,
		// independent of the others). A different id with the same 64-bit
		// hash takes the slow path.
		for k, id := range batch {
			if r := out[base+k]; r != 0 && t.slots[r-1].p.ID != id {
				out[base+k] = t.probeRef(hs[k], id)
			}
		}
	}
	return out, touched
}

// at is the entry of a ref lookup returned (nil for 0).
func (t *productTable) at(r ProductRef) *Product {
	if r == 0 {
		return nil
	}
	return t.slots[r-1].p
}

func (t *productTable) probeRef(h uint64, id string) ProductRef {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.hash == 0 {
			return 0
		}
		if s.hash == h && s.p.ID == id {
			return ProductRef(i + 1)
		}
	}
}

// put adds p, whose id must not be in the table.
func (t *productTable) put(p *Product) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	t.insert(t.hashOf(p.ID), p)
	t.n++
}

func (t *productTable) insert(h uint64, p *Product) {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if t.slots[i].hash == 0 {
			t.slots[i] = productSlot{hash: h, p: p}
			return
		}
	}
}

// grow doubles the slots (16 at first) and re-inserts every entry.
func (t *productTable) grow() {
	old := t.slots
	t.slots = make([]productSlot, max(16, 2*len(old)))
	for _, s := range old {
		if s.hash != 0 {
			t.insert(s.hash, s.p)
		}
	}
}

// remove deletes id, if present, shifting back the entries after it that
// would otherwise become unreachable (no tombstones).
func (t *productTable) remove(id string) {
	if t.n == 0 {
		return
	}
	h := t.hashOf(id)
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for {
		s := &t.slots[i]
		if s.hash == 0 {
			return
		}
		if s.hash == h && s.p.ID == id {
			break
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.slots[j].hash != 0; j = (j + 1) & mask {
		home := t.slots[j].hash & mask
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if (i < j && i < home && home <= j) || (i > j && (home > i || home <= j)) {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = productSlot{}
	t.n--
}

// all iterates over the entries (in no particular order).
func (t *productTable) all() iter.Seq2[string, *Product] {
	return func(yield func(string, *Product) bool) {
		for _, s := range t.slots {
			if s.hash != 0 && !yield(s.p.ID, s.p) {
				return
			}
		}
	}
}
