package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
			if _, ok := ref[k]; ok && r.IntN(2) == 0 {
				tab.remove(k)
				delete(ref, k)
			} else if !ok {
				ref[k] = tab.add(k)
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

// The products' ids live in the market's arena: after removals that
// outgrow the live ids, they are copied into new chunks, and every entry
// still has its id and is found by it.
func TestProductIDArena(t *testing.T) {
	ix := New()
	const n = 20_000
	id := func(i int) string { return fmt.Sprintf("product-with-a-longish-id-%08d", i) }
	for round := range 4 {
		for i := range n {
			ix.ProductChanged(mp, id(round*n+i), nil, product(t, true, []string{"v"}, nil))
		}
		for i := range n {
			if i%10 != 0 {
				ix.ProductChanged(mp, id(round*n+i), nil, nil)
			}
		}
	}
	m := ix.markets[mp]
	if m.ids.dead >= minRekey+m.ids.live {
		t.Fatalf("no rekey: %d dead bytes, %d live", m.ids.dead, m.ids.live)
	}
	var ids []string
	for round := range 4 {
		for i := 0; i < n; i += 10 {
			ids = append(ids, id(round*n+i))
		}
	}
	refs, _ := m.Products(ids, nil)
	for k, want := range ids {
		p := m.ProductAt(refs[k])
		if p == nil || p.ID != want || m.Product(want) != p || !p.Known {
			t.Fatalf("%s: %+v", want, p)
		}
	}
	if m.products.len() != len(ids) {
		t.Fatalf("%d products, want %d", m.products.len(), len(ids))
	}
}

// A product's bids, through adds and removes, against a slice; the entry
// is 72 bytes.
func TestProductBids(t *testing.T) {
	if s := unsafe.Sizeof(Product{}); s != 72 {
		t.Fatalf("a product entry is %d bytes, want 72", s)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var p Product
	var want []*Bid
	for step := range 3000 {
		if len(want) > 0 && r.IntN(5) < 2 {
			k := r.IntN(len(want))
			p.removeBid(want[k])
			want = append(want[:k], want[k+1:]...)
		} else {
			b := &Bid{B: BidFields{ID: fmt.Sprint(step)}}
			p.addBid(BidRef{Bid: b, ID: b.B.ID})
			want = append(want, b)
		}
		got := p.Bids()
		if len(got) != len(want) {
			t.Fatalf("step %d: %d bids, want %d", step, len(got), len(want))
		}
		for _, b := range want {
			if !slices.ContainsFunc(got, func(r BidRef) bool { return r.Bid == b && r.ID == b.B.ID }) {
				t.Fatalf("step %d: bid %s missing", step, b.B.ID)
			}
		}
	}
	for _, b := range want {
		p.removeBid(b)
	}
	if p.nb != 0 || p.bids != nil {
		t.Fatalf("%d bids left", p.nb)
	}
}
