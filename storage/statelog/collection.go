package statelog

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"iter"
	"math"
	"sort"
	"strings"
	"sync"
)

// Collection is the view of one entity type whose entities belong to a
// marketplace: records are keyed "<marketplace>/<id>". Every process holds
// the decoded values in memory.
type Collection[T any] struct {
	log *Log
	typ string

	mu    sync.RWMutex
	items map[string]*idTable // marketplace -> id -> entry
	seed  maphash.Seed

	// OnChange, when set before the log runs, is called for every applied
	// change with the previous and new value (nil when absent), under the
	// collection's write lock: keep it quick, and use it for indexes.
	OnChange func(marketplace, id string, old, new *T)

	// OnChangeNum, when set before the log runs, is called like OnChange
	// (after it), with the entity's number in the collection (see ByNum).
	OnChangeNum func(marketplace, id string, num uint32, old, new *T)

	listeners []func(marketplace, id string, old, new *T)
	rekeyed   []func(ids iter.Seq2[string, string])

	// Keep, when set before the log runs, is called with every applied new
	// value before the collection keeps it, under its write lock: it may
	// move parts of v out of memory (the catalog keeps a product's texts on
	// disk) and change v accordingly. OnChange and the listeners see v as
	// Keep left it.
	Keep func(marketplace, id string, version int64, v *T)

	// Entries come out of chunks and are updated in place; a
	// deleted one is kept for reuse (free). The garbage collector finds the
	// span of every pointer it follows, a cache miss when the spans are
	// many: a million entries allocated one by one fill tens of thousands
	// of spans, in chunks a few thousand (docs/design/performance.md).
	// An entry's number is its place in chunks: chunks[n/entryChunk][n%entryChunk].
	chunks [][]entry[T]
	next   uint32 // entries handed out of chunks
	free   []*entry[T]

	// ids are the maps' keys, many to an allocation (see keyArena).
	ids keyArena

	// gone holds the versions of the entities that are not in items:
	// deleted ones (a deleted id created again continues its versions), and
	// the latest version of a record whose state could not be decoded. The
	// entries hold the others' (Log.RegisterVersioned).
	gone map[string]int64 // "<marketplace>/<id>" -> version
	// wide holds the versions that do not fit an entry's four bytes, by
	// the entry's number (none in practice: a version counts writes).
	wide map[uint32]int64
}

// keyArena holds a collection's ids, packed into shared allocations of
// keyChunk bytes: a million ids are then a few hundred objects for the
// garbage collector to mark, not a million (docs/design/state.md, Memory). Bytes
// are only ever appended: a string cut from a chunk never changes. A
// deleted id's bytes stay until its chunk has no live id, so when the dead
// bytes outgrow the live ones, the collection copies its ids into new
// chunks (rekey) and the old ones are freed once nothing else holds them.
type keyArena struct {
	cur        strings.Builder
	live, dead int // bytes of ids in the maps, and of ids deleted since the last rekey
}

const (
	keyChunk   = 64 << 10
	minRekey   = 1 << 20 // dead bytes below which a rekey is not worth it
	maxArenaID = keyChunk / 8
)

// add returns a copy of id in the arena.
func (a *keyArena) add(id string) string {
	a.live += len(id)
	if len(id) > maxArenaID {
		return strings.Clone(id)
	}
	if a.cur.Cap()-a.cur.Len() < len(id) {
		a.cur = strings.Builder{}
		a.cur.Grow(keyChunk)
	}
	start := a.cur.Len()
	a.cur.WriteString(id)
	return a.cur.String()[start:]
}

// drop counts id as deleted, and reports whether a rekey is due.
func (a *keyArena) drop(id string) bool {
	a.live -= len(id)
	a.dead += len(id)
	return a.dead > max(a.live, minRekey)
}

// rekey copies every id into new chunks (under c.mu); the tables hold the
// ids' hashes, which do not change. The functions of ListenRekeyed then
// get the new copies.
func (c *Collection[T]) rekey() {
	c.ids = keyArena{}
	for mp, t := range c.items {
		if t.n == 0 {
			delete(c.items, mp)
			continue
		}
		c.each(t, func(e *entry[T]) bool {
			e.id = c.ids.add(e.id)
			return true
		})
	}
	for _, fn := range c.rekeyed {
		fn(func(yield func(marketplace, id string) bool) {
			for mp, t := range c.items {
				stop := false
				c.each(t, func(e *entry[T]) bool {
					stop = !yield(mp, e.id)
					return !stop
				})
				if stop {
					return
				}
			}
		})
	}
}

// ListenRekeyed adds a function called, under the collection's write lock,
// when the collection copied its ids into new chunks (docs/design/state.md,
// Memory), with every entity's marketplace and new copy of its id: an
// index that keeps the copies the listeners were handed (Listen, for a new
// entity) takes the new ones, so that the old chunks are freed. fn must
// not call the collection. Call it before the log runs.
func (c *Collection[T]) ListenRekeyed(fn func(ids iter.Seq2[string, string])) {
	c.rekeyed = append(c.rekeyed, fn)
}

// entryChunk is how many entries one allocation holds.
const entryChunk = 512

// newEntry returns an entry with its number and no value, reused or out
// of a chunk (under c.mu).
func (c *Collection[T]) newEntry() *entry[T] {
	if n := len(c.free); n > 0 {
		e := c.free[n-1]
		c.free = c.free[:n-1]
		return e
	}
	if c.next%entryChunk == 0 {
		c.chunks = append(c.chunks, make([]entry[T], entryChunk))
	}
	e := &c.chunks[c.next/entryChunk][c.next%entryChunk]
	e.num = c.next
	c.next++
	return e
}

// ByNum returns the entity numbered num (OnChangeNum) in a marketplace:
// its id, value and version, and whether it exists. A number is the
// entity's for as long as it exists, and is given to another once it is
// deleted.
func (c *Collection[T]) ByNum(marketplace string, num uint32) (string, T, int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if num < c.next {
		e := c.at(num)
		if e.id != "" && c.find(c.items[marketplace], e.id) == e {
			return e.id, e.v, c.versionOf(e), true
		}
	}
	var zero T
	return "", zero, 0, false
}

// Listen adds a function called like OnChange (after it) for every applied
// change: for indexes kept by other components. Call it before the log runs.
// fn must not call the collection, and must not wait for anything that
// reads it (it runs under the collection's write lock).
func (c *Collection[T]) Listen(fn func(marketplace, id string, old, new *T)) {
	c.listeners = append(c.listeners, fn)
}

type entry[T any] struct {
	v   T
	id  string // the key of the entry in its marketplace's map ("" while free)
	num uint32
	// version is the entity's version, or versionWide when it does not
	// fit (c.wide has it): four bytes, not eight, in every entry.
	version uint32
}

// versionWide marks an entry whose version is in the collection's wide map.
const versionWide = math.MaxUint32

// setVersion sets the version of e (under c.mu).
func (c *Collection[T]) setVersion(e *entry[T], v int64) {
	if v >= 0 && v < versionWide {
		if e.version == versionWide {
			delete(c.wide, e.num)
		}
		e.version = uint32(v)
		return
	}
	if c.wide == nil {
		c.wide = map[uint32]int64{}
	}
	e.version, c.wide[e.num] = versionWide, v
}

// versionOf is the version of e (under c.mu, read or write).
func (c *Collection[T]) versionOf(e *entry[T]) int64 {
	if e.version == versionWide {
		return c.wide[e.num]
	}
	return int64(e.version)
}

// NewCollection registers a collection of type typ on log.
func NewCollection[T any](log *Log, typ string) *Collection[T] {
	c := &Collection[T]{log: log, typ: typ, items: map[string]*idTable{}, seed: maphash.MakeSeed(), gone: map[string]int64{}}
	log.RegisterVersioned(typ, c.apply, c.version)
	return c
}

// version is the version of the last record applied for key
// ("<marketplace>/<id>"), 0 when none.
func (c *Collection[T]) version(key string) int64 {
	mp, id, _ := splitKey(key)
	c.mu.RLock()
	defer c.mu.RUnlock()
	var v int64
	if e := c.find(c.items[mp], id); e != nil {
		v = c.versionOf(e)
	}
	if len(c.gone) > 0 {
		v = max(v, c.gone[key])
	}
	return v
}

func splitKey(key string) (marketplace, id string, ok bool) {
	return strings.Cut(key, "/")
}

func (c *Collection[T]) apply(r Record) {
	mp, id, ok := splitKey(r.ID)
	if !ok {
		return
	}
	var nv *T
	if !r.Deleted {
		v := new(T)
		if err := decodeState(r.State, v); err != nil {
			c.log.log.Error("state log: undecodable entity state", "type", c.typ, "id", r.ID, "err", err)
			c.mu.Lock()
			c.gone[strings.Clone(r.ID)] = r.Version
			c.mu.Unlock()
			return
		}
		nv = v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.items[mp]
	var old *T
	var num uint32
	e := c.find(m, id)
	if e != nil {
		v := e.v // a copy: the entry is overwritten below
		old = &v
	}
	switch {
	case nv == nil:
		c.gone[strings.Clone(r.ID)] = r.Version
		if e == nil {
			break
		}
		c.remove(m, e)
		num = e.num
		c.setVersion(e, 0)
		*e = entry[T]{num: e.num}
		c.free = append(c.free, e)
		if c.ids.drop(id) {
			c.rekey()
		}
	default:
		if len(c.gone) > 0 {
			delete(c.gone, r.ID)
		}
		if c.Keep != nil {
			c.Keep(mp, id, r.Version, nv)
		}
		if e == nil {
			if m == nil {
				m = &idTable{}
				c.items[mp] = m
			}
			e = c.newEntry()
			// The listeners below get the arena's copy too: what they keep
			// of a new entity shares it.
			id = c.ids.add(id)
			e.id = id
			c.insert(m, e)
		}
		e.v = *nv
		c.setVersion(e, r.Version)
		num = e.num
	}
	if c.OnChange != nil {
		c.OnChange(mp, id, old, nv)
	}
	if c.OnChangeNum != nil && (old != nil || nv != nil) {
		c.OnChangeNum(mp, id, num, old, nv)
	}
	for _, fn := range c.listeners {
		fn(mp, id, old, nv)
	}
}

// Get returns an entity and its version.
func (c *Collection[T]) Get(marketplace, id string) (T, int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e := c.find(c.items[marketplace], id); e != nil {
		return e.v, c.versionOf(e), true
	}
	var zero T
	return zero, 0, false
}

// Marketplaces lists the marketplaces that have entities here.
func (c *Collection[T]) Marketplaces() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.items))
	for mp, m := range c.items {
		if m.n > 0 {
			out = append(out, mp)
		}
	}
	sort.Strings(out)
	return out
}

// Len is the number of entities of a marketplace.
func (c *Collection[T]) Len(marketplace string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if t := c.items[marketplace]; t != nil {
		return t.n
	}
	return 0
}

// Each calls fn for every entity of a marketplace, in no order, under a read
// lock, until fn returns false. fn must not write to the collection.
func (c *Collection[T]) Each(marketplace string, fn func(id string, v T) bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	c.each(c.items[marketplace], func(e *entry[T]) bool { return fn(e.id, e.v) })
}

// Page returns up to limit entities of a marketplace that match keep, in id
// order, starting after the id `after` (exclusive; "" for the first page),
// and whether more follow.
func (c *Collection[T]) Page(marketplace, after string, limit int, keep func(id string, v T) bool) (ids []string, vals []T, more bool) {
	c.mu.RLock()
	m := c.items[marketplace]
	var cand []string
	c.each(m, func(e *entry[T]) bool {
		if e.id > after && (keep == nil || keep(e.id, e.v)) {
			cand = append(cand, e.id)
		}
		return true
	})
	sort.Strings(cand)
	if len(cand) > limit {
		cand, more = cand[:limit], true
	}
	vals = make([]T, len(cand))
	for i, id := range cand {
		vals[i] = c.find(m, id).v
	}
	c.mu.RUnlock()
	return cand, vals, more
}

// PageDesc is Page in descending id order: up to limit entities before the
// id `before` (exclusive; "" for the first page).
func (c *Collection[T]) PageDesc(marketplace, before string, limit int, keep func(id string, v T) bool) (ids []string, vals []T, more bool) {
	c.mu.RLock()
	m := c.items[marketplace]
	var cand []string
	c.each(m, func(e *entry[T]) bool {
		if (before == "" || e.id < before) && (keep == nil || keep(e.id, e.v)) {
			cand = append(cand, e.id)
		}
		return true
	})
	sort.Sort(sort.Reverse(sort.StringSlice(cand)))
	if len(cand) > limit {
		cand, more = cand[:limit], true
	}
	vals = make([]T, len(cand))
	for i, id := range cand {
		vals[i] = c.find(m, id).v
	}
	c.mu.RUnlock()
	return cand, vals, more
}

// Put writes an entity, expecting version expected (0: create, AnyVersion:
// overwrite), and returns its new version.
func (c *Collection[T]) Put(ctx context.Context, marketplace, id string, expected int64, v T) (int64, error) {
	return c.log.Append(ctx, c.typ, marketplace+"/"+id, expected, v, false)
}

// Delete removes an entity, expecting version expected (or AnyVersion).
func (c *Collection[T]) Delete(ctx context.Context, marketplace, id string, expected int64) error {
	_, err := c.log.Append(ctx, c.typ, marketplace+"/"+id, expected, nil, true)
	return err
}

// Write is one change of a PutMany / a batch.
type Write[T any] struct {
	ID       string
	Expected int64 // AnyVersion to overwrite
	Value    T
	Deleted  bool
}

// Change turns a write into a log change, for batches that span types.
func (c *Collection[T]) Change(marketplace string, w Write[T]) Change {
	var state any = w.Value
	if w.Deleted {
		state = nil
	}
	return Change{Type: c.typ, ID: marketplace + "/" + w.ID, Expected: w.Expected, State: state, Deleted: w.Deleted}
}

// PutMany writes a batch of one marketplace's entities and returns once this
// process's view applied all of them.
func (c *Collection[T]) PutMany(ctx context.Context, marketplace string, ws []Write[T]) error {
	changes := make([]Change, len(ws))
	for i, w := range ws {
		changes[i] = c.Change(marketplace, w)
	}
	_, err := c.log.AppendBatch(ctx, changes)
	return err
}

// Log is the log the collection lives on (for batches across collections).
func (c *Collection[T]) Log() *Log { return c.log }

// decodeState decodes an entity's state. The record holding it was already
// validated as JSON when it was decoded, so a type with its own decoder gets
// the bytes directly (json.Unmarshal would scan them once more first).
func decodeState(raw []byte, v any) error {
	if u, ok := v.(json.Unmarshaler); ok {
		return u.UnmarshalJSON(raw)
	}
	return json.Unmarshal(raw, v)
}
