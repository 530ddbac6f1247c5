package attribution_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/reporting/attribution"
)

// P is the purchase time of the scenarios: 23:30 UTC on 28 March 2026 is
// 00:30 on 29 March in Berlin (the marketplace's day_local).
var P = time.Date(2026, 3, 28, 23, 30, 0, 0, time.UTC)

const day = 24 * time.Hour

// TestScenarios runs a hand-computed table of scenarios through the real
// pipeline (kfake → events and interactions projectors → ClickHouse →
// attribution projector) and checks the attribution of every purchased
// item. Each scenario has a user of its own; expectations are
// "reason:credited event id", "none" (computed, not attributed) or absent
// (no row: the purchase is not counted).
func TestScenarios(t *testing.T) {
	s := newStack(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	M := s.marketplace(berlin, attribution.DefaultRules())
	custom := s.marketplace(time.UTC, attribution.RulesOf(&accounts.AttributionSettings{
		Windows: map[string]accounts.AttributionWindow{"banners": {ClickSeconds: 3600, ImpressionSeconds: 0}},
		NoHalo:  true, Revision: 1,
	}))
	s.vendors["C"] = "v3" // the catalog: product C has one vendor
	long := "L" + strings.Repeat("x", 199)
	s.start(t)

	type ev struct {
		kind     records.Kind
		label    string
		at       time.Duration // from P
		auction  *time.Duration
		format   bidtoken.AdFormat
		wtype    bidtoken.WinnerType
		entity   string
		vendor   string
		received time.Duration // after occurring; 0: one second
		aa       *records.Entity
		organic  bool
		user     string // another user than the scenario's
	}
	type buy struct {
		label    string
		at       time.Duration
		received time.Duration
		items    []records.Item
	}
	item := func(product, vendor string) records.Item {
		return records.Item{ProductID: product, UnitPriceMicros: 2_500_000, Quantity: 2, VendorID: vendor}
	}
	click := func(label string, at time.Duration, product, vendor string) ev {
		return ev{kind: records.KindClick, label: label, at: at, entity: product, vendor: vendor}
	}
	imp := func(label string, at time.Duration, product, vendor string) ev {
		return ev{kind: records.KindImpression, label: label, at: at, entity: product, vendor: vendor}
	}
	dur := func(d time.Duration) *time.Duration { return &d }
	cases := []struct {
		name string
		mp   string
		evs  []ev
		buys []buy
		want map[string]string // "purchase/item" → "reason:label" or "none"
	}{
		{name: "click beats a later impression", evs: []ev{imp("i1", -10*time.Minute, "A", "v1"), click("c1", -time.Hour, "A", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "product_click:c1"}},
		{name: "latest click wins", evs: []ev{click("c1", -3*time.Hour, "A", "v1"), click("c2", -time.Hour, "A", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "product_click:c2"}},
		{name: "click at the 14-day edge", evs: []ev{click("c1", -14*day, "A", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "product_click:c1"}},
		{name: "click a second past 14 days", evs: []ev{click("c1", -14*day-time.Second, "A", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "none"}},
		{name: "impression at the 1-day edge", evs: []ev{imp("i1", -day, "A", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "product_impression:i1"}},
		{name: "impression a millisecond past 1 day", evs: []ev{imp("i1", -day-time.Millisecond, "A", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "none"}},
		{name: "another user's click", evs: []ev{{kind: records.KindClick, label: "c1", at: -time.Hour, entity: "A", vendor: "v1", user: "someone-else"}},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "none"}},
		{name: "another product of another vendor", evs: []ev{click("c1", -time.Hour, "B", "v2")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "none"}},
		{name: "halo by the item's vendorId", evs: []ev{click("c1", -time.Hour, "B", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "halo_click:c1"}},
		{name: "halo by the catalog's vendor", evs: []ev{click("c1", -time.Hour, "B", "v3")},
			buys: []buy{{label: "p", items: []records.Item{item("C", "")}}}, want: map[string]string{"p/0": "halo_click:c1"}},
		{name: "same product beats a later halo click", evs: []ev{click("c1", -time.Minute, "B", "v1"), imp("i1", -2*time.Hour, "A", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "product_impression:i1"}},
		{name: "auction or interaction after the purchase", evs: []ev{
			{kind: records.KindClick, label: "c1", at: 0, auction: dur(time.Second), entity: "A", vendor: "v1"},
			click("c2", time.Second, "A", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "none"}},
		{name: "click and auction at the purchase time", evs: []ev{{kind: records.KindClick, label: "c1", at: 0, auction: dur(0), entity: "A", vendor: "v1"}},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "product_click:c1"}},
		{name: "purchase received 31 days late", evs: []ev{click("c1", -time.Hour, "A", "v1")},
			buys: []buy{{label: "p", received: 31 * day, items: []records.Item{item("A", "v1")}}}, want: map[string]string{}},
		{name: "click received 31 days late", evs: []ev{
			{kind: records.KindClick, label: "c1", at: -time.Hour, entity: "A", vendor: "v1", received: 31 * day},
			imp("i1", -2*time.Hour, "A", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "product_impression:i1"}},
		{name: "items independently; one click for several items and purchases", evs: []ev{
			click("c1", -time.Hour, "A", "v1"), imp("i1", -3*time.Hour, "B", "v2")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1"), item("B", "v1"), item("Z", "v1")}},
				{label: "q", at: time.Hour, items: []records.Item{item("A", "")}}},
			want: map[string]string{"p/0": "product_click:c1", "p/1": "product_impression:i1", "p/2": "halo_click:c1", "q/0": "product_click:c1"}},
		{name: "organic click", evs: []ev{{kind: records.KindClick, label: "c1", at: -time.Hour, entity: "A", organic: true}},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "none"}},
		{name: "banner for a vendor with additionalAttribution of the product", evs: []ev{{kind: records.KindClick, label: "c1", at: -time.Hour,
			format: bidtoken.Banners, wtype: bidtoken.WinnerVendor, entity: "v9", vendor: "v9", aa: &records.Entity{Type: "product", ID: "A"}}},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "product_click:c1"}},
		{name: "winner id carried hashed", evs: []ev{click("c1", -time.Hour, long, "v1")},
			buys: []buy{{label: "p", items: []records.Item{item(long, "")}}}, want: map[string]string{"p/0": "product_click:c1"}},
		{name: "custom windows: banner click 1 h, banner impressions never", mp: custom, evs: []ev{
			{kind: records.KindClick, label: "c1", at: -2 * time.Hour, format: bidtoken.Banners, entity: "A", vendor: "v1"},
			{kind: records.KindImpression, label: "i1", at: -time.Minute, format: bidtoken.Banners, entity: "A", vendor: "v1"},
			click("c2", -3*time.Hour, "A", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "product_click:c2"}},
		{name: "custom: halo off", mp: custom, evs: []ev{click("c1", -time.Hour, "B", "v1")},
			buys: []buy{{label: "p", items: []records.Item{item("A", "v1")}}}, want: map[string]string{"p/0": "none"}},
	}

	var all []records.Event
	type expectation struct {
		mp   string
		want map[string]string
	}
	var expect []expectation
	for n, c := range cases {
		mp := c.mp
		if mp == "" {
			mp = M
		}
		user := fmt.Sprintf("user-%02d", n)
		id := func(label string) string { return fmt.Sprintf("s%02d-%s", n, label) }
		for _, e := range c.evs {
			at := P.Add(e.at)
			u := user
			if e.user != "" {
				u = e.user
			}
			x := interaction(e.kind, mp, u, id(e.label), "", at)
			if e.organic {
				x.Entity = &records.Entity{Type: "product", ID: e.entity}
			} else {
				w := winner{format: e.format, winnerType: e.wtype, winnerID: e.entity, vendor: e.vendor, auctionAt: at.Add(-time.Second)}
				if w.format == 0 {
					w.format = bidtoken.Listings
				}
				if w.winnerType == 0 {
					w.winnerType = bidtoken.WinnerProduct
				}
				if e.auction != nil {
					w.auctionAt = P.Add(*e.auction)
				}
				if e.entity == long {
					w.auctionID = uuid.Must(uuid.NewV7())
					s.auctionWinner(t, mp, w)
				}
				x.ResolvedBidID = s.token(t, mp, w)
			}
			x.AdditionalAttribution = e.aa
			if e.received != 0 {
				x.ReceivedAtMs = x.OccurredAtMs + e.received.Milliseconds()
			}
			all = append(all, x)
		}
		for _, b := range c.buys {
			x := purchase(mp, user, id(b.label), P.Add(b.at), b.items...)
			if b.received != 0 {
				x.ReceivedAtMs = x.OccurredAtMs + b.received.Milliseconds()
			}
			all = append(all, x)
		}
		want := map[string]string{}
		for k, v := range c.want {
			want[fmt.Sprintf("s%02d-%s", n, k)] = v
		}
		expect = append(expect, expectation{mp, want})
	}
	// Purchases first, then the interactions, then a few duplicates: every
	// interaction arrives after the purchase it is credited for.
	var purchases, rest []records.Event
	for _, e := range all {
		if e.Kind == records.KindPurchase {
			purchases = append(purchases, e)
		} else {
			rest = append(rest, e)
		}
	}
	s.produce(t, purchases...)
	s.settle(t)
	for k, c := range s.results(t, M) {
		if c.reason != attribution.ReasonNone {
			t.Errorf("%s attributed before any interaction arrived: %+v", k, c)
		}
	}
	s.produce(t, rest...)
	s.produce(t, rest[0], purchases[0], rest[3])
	s.settle(t)

	got := map[string]map[string]computed{M: s.results(t, M), custom: s.results(t, custom)}
	for n, e := range expect {
		prefix := fmt.Sprintf("s%02d-", n)
		for k, w := range e.want {
			c, ok := got[e.mp][k]
			if !ok {
				t.Errorf("%s (%s): no row for %s, want %s", cases[n].name, prefix, k, w)
				continue
			}
			g := c.reason
			if c.reason != attribution.ReasonNone {
				g += ":" + strings.TrimPrefix(c.interaction, prefix)
			}
			if g != w {
				t.Errorf("%s: %s = %s, want %s", cases[n].name, k, g, w)
			}
		}
		for k := range got[e.mp] {
			if _, ok := e.want[k]; !ok && strings.HasPrefix(k, prefix) {
				t.Errorf("%s: unexpected row %s %+v", cases[n].name, k, got[e.mp][k])
			}
		}
	}

	// The columns of two rows.
	c := got[M]["s00-p/0"]
	if c.campaign != campaignOf("v1").String() || c.vendor != "v1" || c.adFormat != "listings" || c.itemVendor != "v1" ||
		c.score != 1 || c.amount != 5_000_000 || c.day != "2026-03-29" {
		t.Errorf("row s00-p/0: %+v", c)
	}
	if c := got[M]["s09-p/0"]; c.itemVendor != "v3" || c.score != 0.25 {
		t.Errorf("halo by the catalog: %+v", c)
	}
	if c := got[M]["s17-p/0"]; c.adFormat != "banners" || c.vendor != "v9" {
		t.Errorf("banner row: %+v", c)
	}

	// The read API: a local day, and a UTC range.
	var local, attributed int
	if err := attribution.LocalDay(s.ctx, s.conn, M, time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), func(r *attribution.Row) error {
		local++
		if r.DayLocal.Format(time.DateOnly) != "2026-03-29" || r.CurrencyCode != "EUR" || r.Score == 0 || r.InteractionEventID == "" {
			t.Errorf("LocalDay row %+v", r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range got[M] {
		if c.reason != attribution.ReasonNone {
			attributed++
		}
	}
	if local != attributed || local == 0 {
		t.Errorf("LocalDay: %d rows, want %d", local, attributed)
	}
	var inRange int
	if err := attribution.Rows(s.ctx, s.conn, M, P.Add(-time.Minute), P.Add(time.Minute), func(r *attribution.Row) error {
		inRange++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inRange != attributed-1 { // q of the multi-item scenario is an hour later
		t.Errorf("Rows around P: %d, want %d", inRange, attributed-1)
	}
	if err := attribution.LocalDay(s.ctx, s.conn, M, time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC), func(r *attribution.Row) error {
		t.Errorf("28 March (Berlin) has row %s", r.PurchaseEventID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// auctionWinner stores the auction record's winner row, where a winner id
// the token carried hashed is found.
func (s *stack) auctionWinner(t testing.TB, mp string, w winner) {
	t.Helper()
	b, err := s.conn.PrepareBatch(s.ctx, "INSERT INTO auction_winners_raw (auction_id, marketplace_id, at, at_ms, kind, rank, type, entity_id, campaign_id, vendor_id)")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(w.auctionID, uuid.MustParse(mp), w.auctionAt.UTC(), w.auctionAt.UnixMilli(), "listings", uint16(1), "product",
		w.winnerID, campaignOf(w.vendor).String(), w.vendor); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// TestSettingsChange: a marketplace shortens its click window. The next
// event of a user recomputes that user's purchase under the new settings,
// and the new row replaces the old one although it is computed from fewer
// qualifying interactions (its version carries the newer revision).
func TestSettingsChange(t *testing.T) {
	s := newStack(t)
	mp := s.marketplace(time.UTC, attribution.DefaultRules())
	s.start(t)
	tok := s.token(t, mp, winner{format: bidtoken.Listings, winnerType: bidtoken.WinnerProduct, winnerID: "A", vendor: "v1", auctionAt: P.Add(-3 * time.Hour)})
	// The click is received an hour after the purchase (a late upload): the
	// row crediting it has a later receipt time than the purchase.
	c1 := interaction(records.KindClick, mp, "u", "c1", tok, P.Add(-2*time.Hour))
	c1.ReceivedAtMs = P.Add(time.Hour).UnixMilli()
	s.produce(t, purchase(mp, "u", "p1", P, records.Item{ProductID: "A", UnitPriceMicros: 1_000_000, Quantity: 1}), c1)
	s.settle(t)
	if got := s.results(t, mp)["p1/0"]; got.reason != attribution.ReasonProductClick || got.interaction != "c1" {
		t.Fatalf("before: %+v", got)
	}

	s.setMarketplace(mp, time.UTC, attribution.RulesOf(&accounts.AttributionSettings{
		Windows: map[string]accounts.AttributionWindow{"listings": {ClickSeconds: 3600, ImpressionSeconds: 86400}}, Revision: 1}))
	// Any sponsored interaction of the user within the window before the
	// purchase makes it recomputed: here an impression of another vendor.
	other := s.token(t, mp, winner{format: bidtoken.Listings, winnerType: bidtoken.WinnerProduct, winnerID: "Q", vendor: "v7", auctionAt: P.Add(-6 * time.Hour)})
	s.produce(t, interaction(records.KindImpression, mp, "u", "i1", other, P.Add(-5*time.Hour)))
	s.settle(t)
	if got := s.results(t, mp)["p1/0"]; got.reason != attribution.ReasonNone {
		t.Errorf("after the window shrank to 1 h: %+v", got)
	}
	var n int
	if err := attribution.Rows(s.ctx, s.conn, mp, P.Add(-day), P.Add(day), func(*attribution.Row) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("Rows still returns %d attributed items", n)
	}
}

// TestDuplicateIDs: a purchase id sent again by another record of its user
// (a retry, or a client bug reusing the id for other items) counts once, as
// the record that claimed the id first says. (The claims are per partition
// of the events topic, keyed by marketplace and user: docs/design/projector.md,
// Claims.)
func TestDuplicateIDs(t *testing.T) {
	s := newStack(t)
	mp := s.marketplace(time.UTC, attribution.DefaultRules())
	s.start(t)
	tok, tokB := s.productsAB(t, mp)
	first := purchase(mp, "u1", "p1", P, records.Item{ProductID: "A", UnitPriceMicros: 1_000_000, Quantity: 1})
	s.produce(t, interaction(records.KindClick, mp, "u1", "c1", tok, P.Add(-time.Hour)), first)
	s.settle(t)
	retry := first
	retry.ReceivedAtMs += 5000
	reuse := purchase(mp, "u1", "p1", P, records.Item{ProductID: "B", UnitPriceMicros: 9_000_000, Quantity: 1})
	s.produce(t, retry, interaction(records.KindClick, mp, "u2", "c2", tokB, P.Add(-time.Hour)), reuse,
		interaction(records.KindClick, mp, "u1", "c1", tok, P.Add(-time.Hour))) // c1 again
	s.settle(t)
	got := s.results(t, mp)
	if len(got) != 1 || got["p1/0"].reason != attribution.ReasonProductClick || got["p1/0"].interaction != "c1" || got["p1/0"].amount != 1_000_000 {
		t.Errorf("results %+v", got)
	}
	if copies := s.copies(t, "attribution_purchases_raw", mp); copies != 1 {
		t.Errorf("%d copies of purchases stored, want 1", copies)
	}
}

// copies counts the rows of mp in one of the projector's copy tables.
func (s *stack) copies(t *testing.T, table, mp string) uint64 {
	t.Helper()
	var n uint64
	if err := s.conn.QueryRow(s.ctx, "SELECT count() FROM "+table+" WHERE marketplace_id = toUUID(?)", mp).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRetryAfterDedupeWindowWithPurchase: a client retry of an interaction
// id arriving after the dedupe window (its claim expired) with other
// content, with purchases it could be credited with. Both copies are stored;
// the computation keeps the one received first.
func TestRetryAfterDedupeWindowWithPurchase(t *testing.T) {
	s := newStack(t)
	s.window = 2 * time.Second
	mp := s.marketplace(time.UTC, attribution.DefaultRules())
	s.start(t)
	tokA, tokB := s.productsAB(t, mp)
	first := interaction(records.KindClick, mp, "u1", "c1", tokA, P.Add(-2*time.Hour))
	s.produce(t, first)
	s.settle(t)
	// The dedupe window passes: a claim is forgotten 1.5 windows after it
	// was made at the latest.
	time.Sleep(3200 * time.Millisecond)
	retry := interaction(records.KindClick, mp, "u1", "c1", tokB, P.Add(-time.Hour)) // same id, other winner, received later
	s.produce(t, retry, purchase(mp, "u1", "p1", P, records.Item{ProductID: "A", UnitPriceMicros: 2_000_000, Quantity: 1}),
		purchase(mp, "u1", "p2", P, records.Item{ProductID: "B", UnitPriceMicros: 3_000_000, Quantity: 1}))
	s.settle(t)
	got := s.results(t, mp)
	if g := got["p1/0"]; g.reason != attribution.ReasonProductClick || g.interaction != "c1" || g.campaign != campaignOf("v1").String() {
		t.Errorf("p1 (product A): %+v, want the first copy of c1 (A, v1)", g)
	}
	if g := got["p2/0"]; g.reason == attribution.ReasonProductClick {
		t.Errorf("p2 (product B) credited to the retry's content: %+v", g)
	}
	if copies := s.copies(t, "attribution_touches_raw", mp); copies != 2 {
		t.Errorf("%d copies of c1 stored, want 2 (one per record)", copies)
	}
}

// productsAB are the tokens of two listings winners of one auction time:
// product A of vendor v1 and product B of vendor v2.
func (s *stack) productsAB(t *testing.T, mp string) (a, b string) {
	t.Helper()
	w := winner{format: bidtoken.Listings, winnerType: bidtoken.WinnerProduct, winnerID: "A", vendor: "v1", auctionAt: P.Add(-3 * time.Hour)}
	a = s.token(t, mp, w)
	w.winnerID, w.vendor = "B", "v2"
	return a, s.token(t, mp, w)
}

// TestBatchOfManyLongUserIDs: a batch whose users' ids take more than
// ClickHouse's default max_query_size (256 KiB) is read in one query that
// says how long it is, and every purchase is attributed.
func TestBatchOfManyLongUserIDs(t *testing.T) {
	s := newStack(t)
	mp := s.marketplace(time.UTC, attribution.DefaultRules())
	s.maxRows = 20_000
	s.start(t)
	tok, _ := s.productsAB(t, mp)
	const users = 4000 // × 90 characters: 360 KB of ids
	evs := make([]records.Event, 0, 2*users)
	for i := range users {
		u := fmt.Sprintf("%090d", i)
		evs = append(evs, interaction(records.KindClick, mp, u, fmt.Sprintf("c%d", i), tok, P.Add(-time.Hour)),
			purchase(mp, u, fmt.Sprintf("p%d", i), P, records.Item{ProductID: "A", UnitPriceMicros: 1_000_000, Quantity: 1}))
	}
	s.produce(t, evs...)
	s.settle(t)
	got := s.results(t, mp)
	if len(got) != users {
		t.Fatalf("%d attributed items, want %d", len(got), users)
	}
	for k, g := range got {
		if want := "c" + strings.TrimPrefix(strings.TrimSuffix(k, "/0"), "p"); g.reason != attribution.ReasonProductClick || g.interaction != want {
			t.Fatalf("%s: %+v, want a product click of %s", k, g, want)
		}
	}
}
