package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/endcap/endcap/management/campaigns"
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

// The placeholders' ids live in the market's arena: after removals that
// outgrow the live ids, they are copied into new chunks, and every entry
// still has its id and is found by it.
func TestProductIDArena(t *testing.T) {
	ix := New()
	ix.CampaignChanged(mp, "c-1", nil, camp("c-1", "v", campaigns.TypeListings))
	const n = 20_000
	id := func(i int) string { return fmt.Sprintf("product-with-a-longish-id-%08d", i) }
	b := func(i int) *campaigns.Bid { return bid("b-"+strconv.Itoa(i), "c-1", campaigns.TargetProduct, id(i), 5) }
	for round := range 4 {
		for i := range n {
			ix.BidChanged(mp, "b-"+strconv.Itoa(round*n+i), nil, b(round*n+i))
		}
		for i := range n {
			if i%10 != 0 {
				ix.BidChanged(mp, "b-"+strconv.Itoa(round*n+i), b(round*n+i), nil)
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
		if p == nil || p.ID() != want || m.Product(want) != p || p.Known() || len(p.Bids()) != 1 {
			t.Fatalf("%s: %+v", want, p)
		}
	}
	if m.products.len() != len(ids) {
		t.Fatalf("%d products, want %d", m.products.len(), len(ids))
	}
}

// A known product's entry keeps the id the catalog handed it (the
// catalog's copy, statelog's keyArena), not a copy of its own: an API
// process holds each id once. It takes the catalog's new copy at the
// catalog's rekey, and a copy of its own when it is deleted but keeps bids
// (a placeholder).
func TestKnownProductKeepsCatalogID(t *testing.T) {
	ix := New()
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	catalogCopy := strings.Clone("p-1")
	ix.ProductChanged(mp, catalogCopy, nil, product(t, true, []string{"v-1"}, nil))
	ix.ProductChanged(mp, strings.Clone("p-1"), product(t, true, []string{"v-1"}, nil), product(t, false, []string{"v-1"}, nil)) // an update
	m := ix.markets[mp]
	if p := m.Product("p-1"); p == nil || !same(p.ID(), catalogCopy) || p.Active() || m.ids.live != 0 {
		t.Fatalf("entry %+v, arena %d bytes: not the catalog's copy", p, m.ids.live)
	}
	rekeyed := strings.Clone("p-1")
	ix.ProductsRekeyed(func(yield func(string, string) bool) { yield(mp, rekeyed) })
	if p := m.Product("p-1"); !same(p.ID(), rekeyed) {
		t.Fatal("the entry did not take the catalog's new copy")
	}

	// Bids before the product: a placeholder with its own copy, which the
	// catalog's product replaces.
	ix.CampaignChanged(mp, "c-1", nil, camp("c-1", "v-1", campaigns.TypeListings))
	ix.BidChanged(mp, "b-2", nil, bid("b-2", "c-1", campaigns.TargetProduct, "p-2", 5))
	if p := m.Product("p-2"); p == nil || p.Known() || m.ids.live != len("p-2") {
		t.Fatalf("placeholder %+v, arena %d bytes", p, m.ids.live)
	}
	second := strings.Clone("p-2")
	ix.ProductChanged(mp, second, nil, product(t, true, []string{"v-1"}, nil))
	if p := m.Product("p-2"); !p.Known() || !same(p.ID(), second) || len(p.Bids()) != 1 || m.ids.live != 0 || m.ids.dead != len("p-2") {
		t.Fatalf("entry %+v, arena live %d dead %d", p, m.ids.live, m.ids.dead)
	}
	// Deleted, with its bid: a placeholder again, with a copy of its own.
	ix.ProductChanged(mp, "p-2", product(t, true, []string{"v-1"}, nil), nil)
	if p := m.Product("p-2"); p == nil || p.Known() || same(p.ID(), second) || p.ID() != "p-2" || m.ids.live != len("p-2") {
		t.Fatalf("after delete: %+v, arena %d bytes", p, m.ids.live)
	}
	// A rekey of the catalog leaves placeholders alone.
	ix.ProductsRekeyed(func(yield func(string, string) bool) { yield(mp, second) })
	if p := m.Product("p-2"); same(p.ID(), second) {
		t.Fatal("a placeholder took the catalog's id")
	}
}

// An entry is one cache line: 64 bytes, at an address that is a multiple
// of 64 in the table, so that an auction reads one line of each product.
func TestProductEntryLine(t *testing.T) {
	if s := unsafe.Sizeof(Product{}); s != 64 {
		t.Fatalf("a product entry is %d bytes, want 64", s)
	}
	tb := newProductTable()
	for i := range 3 * productChunk {
		p := tb.add(fmt.Sprintf("p-%d", i))
		if a := uintptr(unsafe.Pointer(p)); a%64 != 0 {
			t.Fatalf("entry %d at %#x: not at the start of a cache line", i, a)
		}
	}
}

// The flags Known and Active beside the bids' count: set and forget keep
// the count, bids added and removed keep the flags.
func TestProductFlags(t *testing.T) {
	var p Product
	p.init("p-1")
	b1, b2 := &Bid{B: BidFields{ID: "b1"}}, &Bid{B: BidFields{ID: "b2"}}
	p.addBid(BidRef{Bid: b1, ID: "b1"})
	p.set(true, 0.5)
	p.addBid(BidRef{Bid: b2, ID: "b2"})
	if !p.Known() || !p.Active() || p.QualityScore != 0.5 || len(p.Bids()) != 2 || p.ID() != "p-1" {
		t.Fatalf("known %v active %v quality %v bids %d id %q", p.Known(), p.Active(), p.QualityScore, len(p.Bids()), p.ID())
	}
	p.set(false, 0.5)
	p.removeBid(b1)
	if !p.Known() || p.Active() || len(p.Bids()) != 1 || p.Bids()[0].Bid != b2 {
		t.Fatalf("known %v active %v bids %d", p.Known(), p.Active(), len(p.Bids()))
	}
	p.forget()
	if p.Known() || p.Active() || len(p.Bids()) != 1 {
		t.Fatalf("after forget: known %v active %v bids %d", p.Known(), p.Active(), len(p.Bids()))
	}
}

// A product's bids, through adds and removes, against a slice.
func TestProductBids(t *testing.T) {
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
	if p.nb() != 0 || p.bids != nil {
		t.Fatalf("%d bids left", p.nb())
	}
}
