package statelog

import (
	"fmt"
	"hash/maphash"
	"iter"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"unsafe"
)

type idThing struct {
	N int `json:"n"`
}

// newIDsCollection is a collection applied to directly, without a log.
func newIDsCollection() *Collection[idThing] {
	return &Collection[idThing]{typ: "thing", items: map[string]*idTable{}, seed: maphash.MakeSeed(), gone: map[string]int64{}}
}

func put(c *Collection[idThing], mp, id string, n int) {
	c.apply(Record{Type: "thing", ID: mp + "/" + id, Version: 1, State: []byte(fmt.Sprintf(`{"n":%d}`, n))})
}

func del(c *Collection[idThing], mp, id string) {
	c.apply(Record{Type: "thing", ID: mp + "/" + id, Version: 2, Deleted: true})
}

// storedID is the table's own copy of id.
func storedID(c *Collection[idThing], mp, id string) string {
	if e := c.find(c.items[mp], id); e != nil {
		return e.id
	}
	return ""
}

// Ids are copied into shared chunks, not kept as the records' strings.
func TestCollectionIDsInChunks(t *testing.T) {
	c := newIDsCollection()
	put(c, "mp-a", "p-1", 1)
	put(c, "mp-a", "p-22", 2)
	put(c, "mp-a", "p-1", 3) // an update keeps the first copy
	a, b := storedID(c, "mp-a", "p-1"), storedID(c, "mp-a", "p-22")
	if uintptr(unsafe.Pointer(unsafe.StringData(a)))+uintptr(len(a)) != uintptr(unsafe.Pointer(unsafe.StringData(b))) {
		t.Fatal("two new ids are not next to each other in a chunk")
	}
	long := strings.Repeat("x", maxArenaID+1)
	put(c, "mp-a", long, 4)
	if v, _, ok := c.Get("mp-a", long); !ok || v.N != 4 {
		t.Fatalf("a long id: %v %v", v, ok)
	}
	if c.ids.live != len("p-1")+len("p-22")+len(long) || c.ids.dead != 0 {
		t.Fatalf("live %d dead %d", c.ids.live, c.ids.dead)
	}
	if v, _, _ := c.Get("mp-a", "p-1"); v.N != 3 || a != "p-1" || b != "p-22" {
		t.Fatalf("p-1 is %v", v)
	}
}

// Deleting most ids copies the others into new chunks; every entity and
// its value survive it, and a deleted id can come back.
func TestCollectionRekeyAfterDeletes(t *testing.T) {
	c := newIDsCollection()
	const n, idLen = 4000, 500 // 2 MB of ids
	id := func(i int) string { return fmt.Sprintf("%0*d", idLen, i) }
	mpOf := func(i int) string { return []string{"mp-a", "mp-b"}[(i/4)%2] }
	for i := range n {
		put(c, mpOf(i), id(i), i)
	}
	before := storedID(c, mpOf(n-4), id(n-4))
	// A listener of rekeys gets every entity's new copy of its id.
	handed := map[string]string{}
	c.ListenRekeyed(func(ids iter.Seq2[string, string]) {
		clear(handed)
		for mp, id := range ids {
			handed[mp+"/"+id] = id
		}
	})
	rekeys, alive, aliveAtRekey := 0, n, 0
	for i := range n {
		if i%4 != 0 { // keep a quarter
			dead := c.ids.dead
			del(c, mpOf(i), id(i))
			alive--
			if c.ids.dead < dead {
				rekeys++
				aliveAtRekey = alive
			}
		}
	}
	if rekeys != 1 {
		t.Fatalf("%d rekeys, want 1 (dead bytes first above max(live, 1 MiB))", rekeys)
	}
	if want := n / 4 * idLen; c.ids.live != want {
		t.Fatalf("live %d, want %d", c.ids.live, want)
	}
	for i := range n {
		v, _, ok := c.Get(mpOf(i), id(i))
		if ok != (i%4 == 0) || (ok && v.N != i) {
			t.Fatalf("entity %d: %v %v", i, v, ok)
		}
	}
	if c.Len("mp-a")+c.Len("mp-b") != n/4 {
		t.Fatalf("%d + %d entities", c.Len("mp-a"), c.Len("mp-b"))
	}
	if after := storedID(c, mpOf(n-4), id(n-4)); unsafe.StringData(after) == unsafe.StringData(before) {
		t.Fatal("the kept ids were not copied")
	}
	if len(handed) != aliveAtRekey {
		t.Fatalf("the rekey's listener got %d ids, want the %d entities of the moment", len(handed), aliveAtRekey)
	}
	for i := 0; i < n; i += 4 {
		if got, want := handed[mpOf(i)+"/"+id(i)], storedID(c, mpOf(i), id(i)); unsafe.StringData(got) != unsafe.StringData(want) {
			t.Fatalf("entity %d: the listener was not handed the collection's new copy", i)
		}
	}
	put(c, "mp-a", id(1), 11)
	if v, _, ok := c.Get("mp-a", id(1)); !ok || v.N != 11 {
		t.Fatalf("a deleted id put again: %v %v", v, ok)
	}
	// A marketplace whose entities are all gone leaves no empty map at the
	// next rekey.
	for i := range n {
		if i%4 == 0 && mpOf(i) == "mp-b" {
			del(c, "mp-b", id(i))
		}
	}
	c.rekey()
	if _, ok := c.items["mp-b"]; ok || c.Len("mp-a") != n/8+1 {
		t.Fatalf("after the last rekey: mp-b %v, mp-a %d", c.items["mp-b"] != nil, c.Len("mp-a"))
	}
}

// BenchmarkRekey is the pause of a rekey (under the collection's write
// lock) with a million ids of 11 bytes in one marketplace.
//
//	go test ./storage/statelog -run '^$' -bench Rekey -benchtime 5x
func BenchmarkRekey(b *testing.B) {
	c := newIDsCollection()
	for i := range 1_000_000 {
		put(c, "mp-a", fmt.Sprintf("p-%09d", i), i)
	}
	b.ResetTimer()
	for range b.N {
		c.rekey()
	}
}

// Every entity has a number (OnChangeNum, ByNum) for as long as it exists,
// in its marketplace only; a deleted entity's number goes to a new one; a
// rekey keeps them.
func TestCollectionNumbers(t *testing.T) {
	c := newIDsCollection()
	nums := map[string]uint32{}
	c.OnChangeNum = func(mp, id string, num uint32, old, nv *idThing) {
		if nv == nil {
			if nums[mp+"/"+id] != num {
				t.Fatalf("%s/%s deleted as %d, was %d", mp, id, num, nums[mp+"/"+id])
			}
			delete(nums, mp+"/"+id)
			return
		}
		if n, ok := nums[mp+"/"+id]; ok && n != num {
			t.Fatalf("%s/%s renumbered %d → %d", mp, id, n, num)
		}
		nums[mp+"/"+id] = num
	}
	for i := range 2000 {
		put(c, "mp-a", fmt.Sprintf("p-%d", i), i)
	}
	put(c, "mp-b", "p-0", 7)
	put(c, "mp-a", "p-5", 55) // an update keeps the number
	check := func() {
		t.Helper()
		seen := map[uint32]bool{}
		for key, n := range nums {
			if seen[n] {
				t.Fatalf("number %d twice", n)
			}
			seen[n] = true
			mp, id, _ := strings.Cut(key, "/")
			gotID, v, _, ok := c.ByNum(mp, n)
			if want, _, _ := c.Get(mp, id); !ok || gotID != id || v != want {
				t.Fatalf("ByNum(%s, %d) = %q %v %v, want %s %v", mp, n, gotID, v, ok, id, want)
			}
			other := map[string]string{"mp-a": "mp-b", "mp-b": "mp-a"}[mp]
			if _, _, _, ok := c.ByNum(other, n); ok {
				t.Fatalf("ByNum(%s, %d) finds %s's entity", other, n, mp)
			}
		}
	}
	check()
	freed := nums["mp-a/p-3"]
	for i := range 2000 {
		if i%100 != 3 {
			del(c, "mp-a", fmt.Sprintf("p-%d", i))
		}
	}
	if _, _, _, ok := c.ByNum("mp-a", freed+1); ok {
		t.Fatal("a deleted entity's number still finds it")
	}
	put(c, "mp-a", "new", 1)
	if nums["mp-a/new"] >= 2001 {
		t.Fatalf("a new entity got number %d, not a freed one", nums["mp-a/new"])
	}
	for i := range 50_000 { // enough ids deleted to rekey
		put(c, "mp-a", fmt.Sprintf("q-%040d", i), i)
		del(c, "mp-a", fmt.Sprintf("q-%040d", i))
	}
	if c.ids.dead > minRekey {
		t.Fatalf("no rekey: %d dead bytes", c.ids.dead)
	}
	check()
	if _, _, _, ok := c.ByNum("mp-a", 1<<30); ok {
		t.Fatal("a number never given finds an entity")
	}
}

// The id tables against a map, through random puts and deletes in two
// marketplaces (small tables, so that probe runs are long and deletes shift
// entries back): every id, present or not, by Get, ByNum, Each, Len and Page.
func TestCollectionIDTable(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 30 {
		c := newIDsCollection()
		nums := map[string]uint32{}
		c.OnChangeNum = func(mp, id string, num uint32, _, nw *idThing) {
			if nw != nil {
				nums[mp+"/"+id] = num
			}
		}
		ref := map[string]map[string]int{"mp-a": {}, "mp-b": {}}
		universe := 10 + r.IntN(200)
		for step := range 1500 {
			mp := []string{"mp-a", "mp-b"}[r.IntN(2)]
			id := fmt.Sprintf("id-%d", r.IntN(universe))
			if _, ok := ref[mp][id]; ok && r.IntN(3) == 0 {
				c.apply(Record{Type: "thing", ID: mp + "/" + id, Version: int64(step + 10), Deleted: true})
				delete(ref[mp], id)
			} else {
				put(c, mp, id, step)
				ref[mp][id] = step
			}
		}
		for mp, want := range ref {
			if c.Len(mp) != len(want) {
				t.Fatalf("round %d %s: %d entities, want %d", round, mp, c.Len(mp), len(want))
			}
			for i := range universe {
				id := fmt.Sprintf("id-%d", i)
				v, _, ok := c.Get(mp, id)
				n, exists := want[id]
				if ok != exists || ok && v.N != n {
					t.Fatalf("round %d %s %s: %v %v, want %d %v", round, mp, id, v, ok, n, exists)
				}
				if exists {
					if gid, gv, _, ok := c.ByNum(mp, nums[mp+"/"+id]); !ok || gid != id || gv.N != n {
						t.Fatalf("round %d %s %s: ByNum %s %v %v", round, mp, id, gid, gv, ok)
					}
				}
			}
			seen := 0
			c.Each(mp, func(id string, v idThing) bool {
				if want[id] != v.N {
					t.Fatalf("round %d %s: Each gives %s %v", round, mp, id, v)
				}
				seen++
				return true
			})
			ids, _, _ := c.Page(mp, "", universe+1, nil)
			if seen != len(want) || len(ids) != len(want) || !sort.StringsAreSorted(ids) {
				t.Fatalf("round %d %s: Each %d, Page %d, want %d", round, mp, seen, len(ids), len(want))
			}
		}
	}
}
