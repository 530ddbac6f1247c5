package index

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
)

const mp = "mp-1"

// product decodes a catalog product the way the log does.
func product(t *testing.T, active bool, vendors, categories []string) *catalog.Product {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"name": "n", "vendors": vendors, "categories": categories, "active": active, "qualityScore": 0.5})
	var p catalog.Product
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func camp(id, vendor, typ string) *campaigns.Campaign {
	return &campaigns.Campaign{ID: id, VendorID: vendor, Type: typ, ChargeType: campaigns.ChargeCPC, Active: true}
}

func bid(id, campaign, typ, target string, amount int64) *campaigns.Bid {
	return &campaigns.Bid{ID: id, CampaignID: campaign, TargetType: typ, Target: target, AmountMicros: amount, Active: true}
}

// view summarises the index of mp for comparisons.
func view(ix *Index) map[string][]string {
	out := map[string][]string{}
	ix.Read(mp, func(m *Market) {
		for id, p := range m.products.all() {
			var vs []string
			for _, v := range p.Vendors() {
				vs = append(vs, v.ID)
			}
			for _, r := range p.Bids() {
				out["product "+id] = append(out["product "+id], r.ID)
				if r.Bid.B.ID != r.ID || r.Amount != r.Bid.B.AmountMicros || r.Active != r.Bid.B.Active ||
					(r.Vendor != nil) != r.Camp.Gate.Known || (r.Vendor != nil && r.Vendor != r.Camp.Vendor) {
					out["stale ref "+r.ID] = []string{"stale"}
				}
			}
			if p.Known() {
				out["vendors "+id] = vs
			}
		}
		for id, v := range m.vendors {
			for _, c := range v.Category {
				out["category bids of "+id] = append(out["category bids of "+id], c.Bid.B.ID+"@"+c.Target.Value())
			}
			for _, c := range v.Automated {
				out["automated of "+id] = append(out["automated of "+id], c.C.ID)
			}
		}
		for k, bs := range m.keyword {
			for _, b := range bs {
				out["keyword "+k] = append(out["keyword "+k], b.B.ID)
			}
		}
		for id := range m.banners {
			out["banners"] = append(out["banners"], id)
		}
	})
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

func same(t *testing.T, got map[string][]string, want map[string][]string) {
	t.Helper()
	for k := range got {
		if len(got[k]) == 0 {
			delete(got, k)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("index %v\nwant %v", got, want)
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Fatalf("%s: %v, want %v (index %v)", k, got[k], v, got)
		}
	}
}

func TestIndexFollowsChanges(t *testing.T) {
	ix := New()
	// A bid applied before its campaign (another partition of the log).
	ix.BidChanged(mp, "k-cat", nil, bid("b-cat", "c-1", campaigns.TargetCategory, "shoes", 10))
	same(t, view(ix), map[string][]string{})
	ix.CampaignChanged(mp, "c-1", nil, camp("c-1", "v-1", campaigns.TypeListings))
	same(t, view(ix), map[string][]string{"category bids of v-1": {"b-cat@shoes"}})

	// Product bids before and after the product.
	ix.BidChanged(mp, "k-p", nil, bid("b-p", "c-1", campaigns.TargetProduct, "p-1", 20))
	ix.ProductChanged(mp, "p-1", nil, product(t, true, []string{"v-1", "v-2"}, []string{"shoes"}))
	ix.BidChanged(mp, "k-kw", nil, bid("b-kw", "c-1", campaigns.TargetKeyword, "red shoes", 5))
	ix.CampaignChanged(mp, "c-auto", nil, camp("c-auto", "v-2", campaigns.TypeAutomated))
	ix.CampaignChanged(mp, "c-ban", nil, camp("c-ban", "v-2", campaigns.TypeBanners))
	same(t, view(ix), map[string][]string{
		"category bids of v-1": {"b-cat@shoes"}, "product p-1": {"b-p"}, "vendors p-1": {"v-1", "v-2"},
		"keyword red shoes": {"b-kw"}, "automated of v-2": {"c-auto"}, "banners": {"c-ban"},
	})

	// An amount change is applied in place.
	up := bid("b-p", "c-1", campaigns.TargetProduct, "p-1", 99)
	ix.BidChanged(mp, "k-p", bid("b-p", "c-1", campaigns.TargetProduct, "p-1", 20), up)
	ix.Read(mp, func(m *Market) {
		if got := m.Product("p-1").Bids()[0].Amount; got != 99 {
			t.Fatalf("amount %d after update", got)
		}
	})

	// The campaign moves to another vendor: its category bid follows.
	ix.CampaignChanged(mp, "c-1", camp("c-1", "v-1", campaigns.TypeListings), camp("c-1", "v-3", campaigns.TypeListings))
	// The automated campaign becomes… deleted; the product loses a vendor.
	ix.CampaignChanged(mp, "c-auto", camp("c-auto", "v-2", campaigns.TypeAutomated), nil)
	ix.ProductChanged(mp, "p-1", nil, product(t, true, []string{"v-1"}, []string{"shoes"}))
	same(t, view(ix), map[string][]string{
		"category bids of v-3": {"b-cat@shoes"}, "product p-1": {"b-p"}, "vendors p-1": {"v-1"},
		"keyword red shoes": {"b-kw"}, "banners": {"c-ban"},
	})

	// Deleting bids, the product and the campaigns empties the index.
	ix.BidChanged(mp, "k-kw", bid("b-kw", "c-1", campaigns.TargetKeyword, "red shoes", 5), nil)
	ix.BidChanged(mp, "k-cat", bid("b-cat", "c-1", campaigns.TargetCategory, "shoes", 10), nil)
	ix.ProductChanged(mp, "p-1", nil, nil)
	same(t, view(ix), map[string][]string{"product p-1": {"b-p"}, "banners": {"c-ban"}}) // bids keep a placeholder
	ix.BidChanged(mp, "k-p", up, nil)
	ix.CampaignChanged(mp, "c-1", camp("c-1", "v-3", campaigns.TypeListings), nil)
	ix.CampaignChanged(mp, "c-ban", camp("c-ban", "v-2", campaigns.TypeBanners), nil)
	same(t, view(ix), map[string][]string{})
	ix.Read(mp, func(m *Market) {
		if m.products.len() != 0 || len(m.camps) != 0 {
			t.Fatalf("leftovers: %d products, %d campaigns", m.products.len(), len(m.camps))
		}
	})
}

func TestCategoryPaths(t *testing.T) {
	ix := New()
	ix.CategoryChanged(mp, "shoes", nil, &catalog.Category{Name: "Shoes"})
	ix.CategoryChanged(mp, "running", nil, &catalog.Category{Name: "Running", ParentID: "shoes"})
	ix.CategoryChanged(mp, "trail", nil, &catalog.Category{Name: "Trail", ParentID: "running"})
	ix.CategoryChanged(mp, "loop-a", nil, &catalog.Category{Name: "A", ParentID: "loop-b"})
	ix.CategoryChanged(mp, "loop-b", nil, &catalog.Category{Name: "B", ParentID: "loop-a"})
	ix.Read(mp, func(m *Market) {
		for _, tt := range []struct {
			id   string
			want []string
		}{
			{"trail", []string{"trail", "running", "shoes"}},
			{"shoes", []string{"shoes"}},
			{"unknown", []string{"unknown"}},
			{"loop-a", []string{"loop-a", "loop-b"}},
		} {
			if got := names(m.AppendPath(nil, CatOf(tt.id))); !slices.Equal(got, tt.want) {
				t.Errorf("path of %s: %v, want %v", tt.id, got, tt.want)
			}
		}
	})
	ix.CategoryChanged(mp, "running", nil, &catalog.Category{Name: "Running"}) // moved to the root
	ix.Read(mp, func(m *Market) {
		if got := names(m.AppendPath(nil, CatOf("trail"))); !slices.Equal(got, []string{"trail", "running"}) {
			t.Errorf("after the move: %v", got)
		}
	})
}

func names(cs []Cat) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Value()
	}
	return out
}

// The gate says running exactly when campaigns.Status does, at every
// millisecond around the dates, whatever their sub-millisecond part.
func TestGateAgreesWithStatus(t *testing.T) {
	base := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	end := func(d time.Duration) *time.Time { e := base.Add(d); return &e }
	cases := []struct {
		name string
		c    campaigns.Campaign
	}{
		{"whole ms dates", campaigns.Campaign{Type: campaigns.TypeListings, Active: true, StartDate: base, EndDate: end(5 * time.Millisecond)}},
		{"sub-ms dates", campaigns.Campaign{Type: campaigns.TypeListings, Active: true, StartDate: base.Add(300 * time.Microsecond), EndDate: end(5*time.Millisecond + 1)}},
		{"no end date", campaigns.Campaign{Type: campaigns.TypeAutomated, Active: true, StartDate: base.Add(999_999)}},
		{"end before start", campaigns.Campaign{Type: campaigns.TypeListings, Active: true, StartDate: base.Add(3 * time.Millisecond), EndDate: end(time.Millisecond)}},
		{"paused", campaigns.Campaign{Type: campaigns.TypeBanners, StartDate: base, EndDate: end(time.Hour)}},
		{"archived", campaigns.Campaign{Type: campaigns.TypeListings, Active: true, StartDate: base, EndDate: end(time.Hour), ArchivedAt: end(-time.Hour)}},
		{"before 1970", campaigns.Campaign{Type: campaigns.TypeListings, Active: true, StartDate: time.Date(1969, 12, 31, 23, 59, 59, 999_500_000, time.UTC), EndDate: end(0)}},
	}
	for _, tc := range cases {
		g := gateOf(&tc.c)
		bounds := []time.Time{tc.c.StartDate}
		if tc.c.EndDate != nil {
			bounds = append(bounds, *tc.c.EndDate)
		}
		for _, b := range bounds {
			for at := time.UnixMilli(b.UnixMilli() - 3).UTC(); at.Before(b.Add(4 * time.Millisecond)); at = at.Add(time.Millisecond) {
				want := campaigns.Status(tc.c, at) == campaigns.StatusRunning
				if got := g.Running(kindOf(tc.c.Type), at.UnixMilli()); got != want {
					t.Errorf("%s at %s: gate says running=%v, Status %q", tc.name, at.Format(time.RFC3339Nano), got, campaigns.Status(tc.c, at))
				}
			}
		}
		if g.Running(^kindOf(tc.c.Type), tc.c.StartDate.Add(time.Millisecond).UnixMilli()) {
			t.Errorf("%s: runs for another campaign type", tc.name)
		}
	}
}

// TestProductListsInline changes a product's vendors and categories across
// the sizes kept inline and beyond: the entry always lists exactly the
// catalog's, and holds nothing of an earlier, longer list.
func TestProductListsInline(t *testing.T) {
	ix := New()
	lists := [][]string{{"a"}, {"a", "b"}, {"a", "b", "c", "d"}, {}, {"b"}, {"c", "d", "e"}, {"e", "f"}, {"a"}}
	for _, vs := range lists {
		for _, cs := range lists {
			ix.ProductChanged(mp, "p", nil, product(t, true, vs, cs))
			ix.Read(mp, func(m *Market) {
				p := m.Product("p")
				var gotV, gotC []string
				for _, v := range p.Vendors() {
					gotV = append(gotV, v.ID)
				}
				for _, c := range p.Categories() {
					gotC = append(gotC, c.Value())
				}
				if !slices.Equal(gotV, vs) || !slices.Equal(gotC, cs) {
					t.Fatalf("vendors %v categories %v; want %v %v", gotV, gotC, vs, cs)
				}
				if n := len(vs) + len(cs); n <= inlineRefs {
					for _, r := range p.refs[n:] {
						if r != nil {
							t.Fatalf("vendors %v categories %v: a stale inline pointer", vs, cs)
						}
					}
				}
			})
		}
	}
	ix.ProductChanged(mp, "p", nil, nil)
	ix.Read(mp, func(m *Market) {
		if p := m.Product("p"); p != nil {
			t.Fatalf("deleted product without bids still indexed: %+v", p)
		}
	})
}

// TestProductEntriesReused: an entry removed from the products (a deleted
// product without bids, a bid-only placeholder whose last bid went) is reused
// for the next new product, with nothing of its previous product left, and
// every id still finds its own entry; entries come out of chunks.
func TestProductEntriesReused(t *testing.T) {
	ix := New()
	ids := make([]string, 3000) // more than one chunk
	for i := range ids {
		ids[i] = "p-" + string(rune('a'+i%26)) + "-" + time.Duration(i).String()
		ix.ProductChanged(mp, ids[i], nil, product(t, true, []string{"v1", "v2", "v3"}, []string{"c1"}))
	}
	ix.CampaignChanged(mp, "c-1", nil, camp("c-1", "v1", campaigns.TypeListings))
	ix.BidChanged(mp, "b-1", nil, bid("b-1", "c-1", campaigns.TargetProduct, "only-bids", 5))
	for _, id := range ids[:1000] {
		ix.ProductChanged(mp, id, nil, nil)
	}
	ix.BidChanged(mp, "b-1", bid("b-1", "c-1", campaigns.TargetProduct, "only-bids", 5), nil) // the placeholder goes
	ix.Read(mp, func(m *Market) {
		if len(m.products.free) != 1001 {
			t.Fatalf("%d entries kept for reuse, want 1001", len(m.products.free))
		}
	})
	fresh := make([]string, 1500)
	for i := range fresh {
		fresh[i] = "n-" + time.Duration(i).String()
		if i%2 == 0 {
			ix.ProductChanged(mp, fresh[i], nil, product(t, false, []string{"v9"}, nil))
		} else { // a placeholder: bids on a product the catalog does not have
			ix.BidChanged(mp, "nb-"+fresh[i], nil, bid("nb-"+fresh[i], "c-1", campaigns.TargetProduct, fresh[i], 7))
		}
	}
	ix.Read(mp, func(m *Market) {
		if len(m.products.free) != 0 {
			t.Errorf("%d entries left unused, want 0 (1001 reused)", len(m.products.free))
		}
		if m.products.len() != 2000+1500 {
			t.Errorf("%d products, want 3500", m.products.len())
		}
		for _, id := range ids[:1000] {
			if m.Product(id) != nil {
				t.Fatalf("deleted product %s still found", id)
			}
		}
		for _, id := range ids[1000:] {
			if p := m.Product(id); p == nil || p.ID() != id || !p.Known() || len(p.Vendors()) != 3 || len(p.Bids()) != 0 {
				t.Fatalf("product %s: %+v", id, p)
			}
		}
		for i, id := range fresh {
			p := m.Product(id)
			switch {
			case p == nil || p.ID() != id:
				t.Fatalf("new product %s not found as itself: %+v", id, p)
			case i%2 == 0 && (!p.Known() || p.Active() || len(p.Vendors()) != 1 || p.Vendors()[0].ID != "v9" || len(p.Categories()) != 0 || len(p.Bids()) != 0):
				t.Fatalf("new product %s has another's state: %+v", id, p)
			case i%2 == 1 && (p.Known() || len(p.Vendors()) != 0 || len(p.Bids()) != 1 || p.Bids()[0].ID != "nb-"+id):
				t.Fatalf("new placeholder %s has another's state: %+v", id, p)
			}
		}
	})
}

// Removed bids' entries are reused; no list keeps one, and every list holds
// exactly the live bids with their own fields.
func TestBidEntriesReused(t *testing.T) {
	ix := New()
	ix.CampaignChanged(mp, "c-1", nil, camp("c-1", "v-1", campaigns.TypeListings))
	ix.ProductChanged(mp, "p-1", nil, product(t, true, []string{"v-1"}, nil))
	ix.ProductChanged(mp, "p-2", nil, product(t, true, []string{"v-1"}, nil))
	kinds := []string{campaigns.TargetProduct, campaigns.TargetKeyword, campaigns.TargetCategory}
	targets := map[string][]string{campaigns.TargetProduct: {"p-1", "p-2"}, campaigns.TargetKeyword: {"red", "blue"}, campaigns.TargetCategory: {"c-a", "c-b"}}
	type live struct{ id, kind, target string }
	bids := map[string]live{} // by key
	add := func(key string, i int) {
		l := live{"id-" + key, kinds[i%3], targets[kinds[i%3]][i%2]}
		ix.BidChanged(mp, key, nil, bid(l.id, "c-1", l.kind, l.target, int64(i)))
		bids[key] = l
	}
	remove := func(key string) {
		l := bids[key]
		ix.BidChanged(mp, key, bid(l.id, "c-1", l.kind, l.target, 0), nil)
		delete(bids, key)
	}
	for i := range 1200 { // more than two chunks
		add(fmt.Sprint("k-", i), i)
	}
	for i := 0; i < 1200; i += 2 {
		remove(fmt.Sprint("k-", i))
	}
	ix.Read(mp, func(m *Market) {
		if len(m.freeBids) != 600 {
			t.Fatalf("%d bid entries kept for reuse, want 600", len(m.freeBids))
		}
	})
	for i := range 700 {
		add(fmt.Sprint("n-", i), i+1)
	}
	// A bid that moves to another target is removed and added again.
	l := bids["k-1"]
	moved := bid(l.id, "c-1", campaigns.TargetKeyword, "green", 42)
	ix.BidChanged(mp, "k-1", bid(l.id, "c-1", l.kind, l.target, 0), moved)
	bids["k-1"] = live{l.id, campaigns.TargetKeyword, "green"}
	ix.Read(mp, func(m *Market) {
		if len(m.freeBids) != 0 {
			t.Fatalf("%d bid entries left unused, want 0", len(m.freeBids))
		}
	})
	want := map[string][]string{"vendors p-1": {"v-1"}, "vendors p-2": {"v-1"}}
	for _, l := range bids {
		switch l.kind {
		case campaigns.TargetProduct:
			want["product "+l.target] = append(want["product "+l.target], l.id)
		case campaigns.TargetKeyword:
			want["keyword "+l.target] = append(want["keyword "+l.target], l.id)
		case campaigns.TargetCategory:
			want["category bids of v-1"] = append(want["category bids of v-1"], l.id+"@"+l.target)
		}
	}
	for _, v := range want {
		sort.Strings(v)
	}
	same(t, view(ix), want)
}

// TestControls: a campaign's timetable and negative keywords, and its bids'
// negative keywords, follow the campaign's and the bids' changes (in either
// order of arrival).
func TestControls(t *testing.T) {
	ix := New()
	neg := []campaigns.NegativeKeyword{{Keyword: "free", MatchType: campaigns.MatchPhrase}}
	b := bid("b-1", "c-1", campaigns.TargetKeyword, "shoe", 1)
	b.NegativeKeywords = neg
	ix.BidChanged(mp, "k-1", nil, b) // before its campaign
	c := camp("c-1", "v-1", campaigns.TypeListings)
	c.Timetables = []campaigns.TimetableDay{{DayOfWeek: 1, StartHour: 9, EndHour: 17}}
	c.NegativeKeywords = neg
	ix.CampaignChanged(mp, "c-1", nil, c)
	state := func() (g Gate, hours, camp, bid bool) {
		ix.Read(mp, func(m *Market) {
			ce := m.camps["c-1"]
			g, hours, camp, bid = ce.Gate, ce.Hours != nil, ce.Negatives != nil, ce.BidNegatives("b-1") != nil
		})
		return
	}
	if g, h, cn, bn := state(); !g.Scheduled || !g.Negative || !g.BidNegative || !h || !cn || !bn {
		t.Fatalf("with controls: %+v hours %v negatives %v bid's %v", g, h, cn, bn)
	}
	// The bid's negatives removed; the campaign's kept.
	nb := *b
	nb.NegativeKeywords = nil
	ix.BidChanged(mp, "k-1", b, &nb)
	if g, _, cn, bn := state(); g.BidNegative || bn || !cn {
		t.Fatalf("bid's removed: %+v %v %v", g, cn, bn)
	}
	// Back, then the bid deleted.
	ix.BidChanged(mp, "k-1", &nb, b)
	if g, _, _, bn := state(); !g.BidNegative || !bn {
		t.Fatalf("bid's again: %+v %v", g, bn)
	}
	ix.BidChanged(mp, "k-1", b, nil)
	if g, _, _, bn := state(); g.BidNegative || bn {
		t.Fatalf("bid deleted: %+v %v", g, bn)
	}
	// The campaign's controls removed.
	plain := camp("c-1", "v-1", campaigns.TypeListings)
	ix.CampaignChanged(mp, "c-1", c, plain)
	if g, h, cn, _ := state(); g.Scheduled || g.Negative || h || cn {
		t.Fatalf("campaign's removed: %+v %v %v", g, h, cn)
	}
}
