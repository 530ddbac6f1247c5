package index

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// The table against a map, through random puts and removes (a small table,
// so that probe runs are long and removals shift entries back), checking
// every id, present or not, with get and with lookup.
func TestProductTable(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 50 {
		tab := newProductTable()
		ref := map[string]*Product{}
		universe := 20 + r.IntN(300)
		id := func(i int) string {
			if i%7 == 0 { // some ids too long to be inline
				return fmt.Sprintf("long-product-id-%050d", i)
			}
			return fmt.Sprintf("p-%d", i)
		}
		for range 2000 {
			k := id(r.IntN(universe))
			if p, ok := ref[k]; ok && r.IntN(2) == 0 {
				tab.remove(k)
				delete(ref, k)
				_ = p
			} else if !ok {
				p := newProduct(k)
				tab.put(p)
				ref[k] = p
			}
			if tab.len() != len(ref) {
				t.Fatalf("round %d: %d entries, want %d", round, tab.len(), len(ref))
			}
		}
		var ids []string
		for i := range universe + 10 {
			ids = append(ids, id(i))
		}
		got, _ := tab.lookup(ids, nil)
		for i, k := range ids {
			if want := ref[k]; tab.get(k) != want || tab.at(got[i]) != want {
				t.Fatalf("round %d: %s: get %p, lookup %p, want %p", round, k, tab.get(k), tab.at(got[i]), want)
			}
		}
		n := 0
		for k, p := range tab.all() {
			if ref[k] != p {
				t.Fatalf("round %d: all yields %s → %p, want %p", round, k, p, ref[k])
			}
			n++
		}
		if n != len(ref) {
			t.Fatalf("round %d: all yields %d entries, want %d", round, n, len(ref))
		}
	}
	var empty productTable
	if got, _ := empty.lookup([]string{"a", "b"}, nil); len(got) != 2 || got[0] != 0 || got[1] != 0 || empty.get("a") != nil {
		t.Fatalf("empty table: %v", got)
	}
	empty.remove("a")
}

// An inline id is the map key: the entry's ID points into the entry.
func TestProductIDInline(t *testing.T) {
	short, long := newProduct("p-000000001"), newProduct(fmt.Sprintf("%041d", 1))
	if short.ID != "p-000000001" || unsafeData(short.ID) != &short.idBytes[0] {
		t.Fatalf("short id %q not inline", short.ID)
	}
	if len(long.ID) != 41 || unsafeData(long.ID) == &long.idBytes[0] {
		t.Fatalf("long id %q", long.ID)
	}
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }
