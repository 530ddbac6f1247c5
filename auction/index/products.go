package index

import (
	"hash/maphash"
	"iter"
)

// productTable is the products of one marketplace by id, and their entries:
// open addressing with linear probing over a power-of-two array of slots, at
// most half full, each slot eight bytes (the upper half of the id's 64-bit
// hash and the entry's number), the entries in chunks of productChunk (64
// KiB, page-aligned: an entry is one cache line), numbered from 1 in the
// order they were first handed out.
//
// It exists for lookups in batches (lookup): an auction looks up hundreds of
// ids at once, and with Go's map each lookup waits for two dependent cache
// misses (the map's group, then the key's bytes) before the next one
// starts. Here a batch first reads every id's slot, then every candidate
// entry, then every candidate's id bytes, each pass made of independent
// loads that the CPU overlaps. A slot holds no pointer: a table of ten million products is
// one allocation the garbage collector does not scan (docs/design/performance.md,
// Catalog in memory).
type productTable struct {
	slots  []productSlot
	n      int
	seed   maphash.Seed
	chunks []*[productChunk]Product // entry r at chunks[(r-1)/productChunk][(r-1)%productChunk]
	next   ProductRef               // entries handed out of chunks
	free   []ProductRef
}

type productSlot struct {
	tag uint32     // the upper half of the id's hash
	ref ProductRef // 0: empty
}

func newProductTable() productTable { return productTable{seed: maphash.MakeSeed()} }

func (t *productTable) hashOf(id string) uint64 { return maphash.String(t.seed, id) }

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

// ProductRef is a product's entry in its market's table, as Products
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
			touched += uint64(t.slots[h&mask].tag)
		}
		// Pass 2: the first slot with the id's tag (the slots are cached
		// now); the entry is read in pass 3. The tag stands for the id
		// until pass 4 checks it.
		base := len(out)
		for k := range batch {
			h := hs[k]
			tag := uint32(h >> 32)
			var ref ProductRef
			for i := h & mask; ; i = (i + 1) & mask {
				s := &t.slots[i]
				if s.ref == 0 {
					break
				}
				if s.tag == tag {
					ref = s.ref
					break
				}
			}
			out = append(out, ref)
		}
		// Pass 3: read every candidate's entry (one line each), then
		// the first byte of its id (the catalog's copy, elsewhere): each
		// pass's loads are independent of each other, where a check of
		// each id in turn would wait for its entry, then its bytes.
		for k := range batch {
			if r := out[base+k]; r != 0 {
				touched += uint64(t.at(r).idLen)
			}
		}
		for k := range batch {
			if r := out[base+k]; r != 0 {
				if p := t.at(r); p.idLen > 0 {
					touched += uint64(*p.id)
				}
			}
		}
		// Pass 4: check the ids, whose bytes are cached now. A different
		// id with the same tag takes the slow path.
		for k, id := range batch {
			if r := out[base+k]; r != 0 && t.at(r).ID() != id {
				out[base+k] = t.probeRef(hs[k], id)
			}
		}
	}
	return out, touched
}

// at is the entry of a ref (nil for 0).
func (t *productTable) at(r ProductRef) *Product {
	if r == 0 {
		return nil
	}
	return &t.chunks[(r-1)/productChunk][(r-1)%productChunk]
}

func (t *productTable) probeRef(h uint64, id string) ProductRef {
	mask := uint64(len(t.slots) - 1)
	tag := uint32(h >> 32)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.ref == 0 {
			return 0
		}
		if s.tag == tag && t.at(s.ref).ID() == id {
			return s.ref
		}
	}
}

// add returns a new, empty entry for id, which must not be in the table
// (and must stay unchanged while it is: the entry keeps it).
func (t *productTable) add(id string) *Product {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	var r ProductRef
	if n := len(t.free); n > 0 {
		r, t.free = t.free[n-1], t.free[:n-1]
	} else {
		if t.next%productChunk == 0 {
			t.chunks = append(t.chunks, new([productChunk]Product))
		}
		t.next++
		r = t.next
	}
	p := t.at(r)
	p.init(id)
	t.insert(t.hashOf(id), r)
	t.n++
	return p
}

func (t *productTable) insert(h uint64, r ProductRef) {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if t.slots[i].ref == 0 {
			t.slots[i] = productSlot{tag: uint32(h >> 32), ref: r}
			return
		}
	}
}

// grow doubles the slots (16 at first) and re-inserts every entry (its
// home is read from its id's hash).
func (t *productTable) grow() {
	old := t.slots
	t.slots = make([]productSlot, max(16, 2*len(old)))
	for _, s := range old {
		if s.ref != 0 {
			t.insert(t.hashOf(t.at(s.ref).ID()), s.ref)
		}
	}
}

// remove deletes id, if present, shifting back the entries after it that
// would otherwise become unreachable (no tombstones), and keeps its entry,
// emptied, for reuse (no reader holds it: readers keep no entry beyond
// their Read).
func (t *productTable) remove(id string) {
	if t.n == 0 {
		return
	}
	h := t.hashOf(id)
	tag := uint32(h >> 32)
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for {
		s := &t.slots[i]
		if s.ref == 0 {
			return
		}
		if s.tag == tag && t.at(s.ref).ID() == id {
			break
		}
		i = (i + 1) & mask
	}
	r := t.slots[i].ref
	for j := (i + 1) & mask; t.slots[j].ref != 0; j = (j + 1) & mask {
		home := t.hashOf(t.at(t.slots[j].ref).ID()) & mask
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
	*t.at(r) = Product{}
	t.free = append(t.free, r)
}

// all iterates over the entries (in no particular order).
func (t *productTable) all() iter.Seq2[string, *Product] {
	return func(yield func(string, *Product) bool) {
		for _, s := range t.slots {
			if s.ref != 0 {
				p := t.at(s.ref)
				if !yield(p.ID(), p) {
					return
				}
			}
		}
	}
}
