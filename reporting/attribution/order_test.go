package attribution_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/reporting/attribution"
)

// genEvent is one generated event, before it is bound to a marketplace.
type genEvent struct {
	kind                  records.Kind
	id, user              string
	at, received, auction time.Time
	format                bidtoken.AdFormat
	wtype                 bidtoken.WinnerType
	entity, vendor        string
	items                 []records.Item
}

var productVendor = map[string]string{"A": "v1", "B": "v1", "C": "v2", "D": "v2", "E": "v3"}

// generate makes a random history of sponsored interactions and purchases
// of a few users around P: clicks and impressions of listings (product
// winners) and banners (vendor winners), some outside their windows, some
// from auctions after the purchase, some more than 30 days old on arrival;
// purchases of one to three items, some without a vendorId.
func generate(seed uint64) []genEvent {
	r := rand.New(rand.NewPCG(seed, 99))
	users := []string{"u1", "u2", "u3", "u4", "u5"}
	products := slices.Sorted(maps.Keys(productVendor))
	var out []genEvent
	for i := range 70 {
		e := genEvent{id: fmt.Sprintf("x%03d", i), user: users[r.IntN(len(users))], format: bidtoken.Listings, wtype: bidtoken.WinnerProduct}
		e.kind = records.KindImpression
		if r.IntN(4) == 0 {
			e.kind = records.KindClick
		}
		e.at = P.Add(-time.Duration(r.Int64N(int64(16 * day)))).Truncate(time.Millisecond)
		if r.IntN(2) == 0 { // near the purchases: impressions can count
			e.at = P.Add(time.Duration(r.Int64N(int64(4*day))) - 3*day).Truncate(time.Millisecond)
		}
		e.auction = e.at.Add(-time.Duration(r.Int64N(int64(10 * time.Minute))))
		if r.IntN(15) == 0 {
			e.auction = P.Add(time.Duration(r.Int64N(int64(day)))) // after most purchases
		}
		e.entity = products[r.IntN(len(products))]
		e.vendor = productVendor[e.entity]
		if r.IntN(5) == 0 {
			e.format, e.wtype, e.entity = bidtoken.Banners, bidtoken.WinnerVendor, e.vendor
		}
		e.received = e.at.Add(time.Second + time.Duration(r.Int64N(int64(2*day))))
		if r.IntN(20) == 0 {
			e.received = e.at.Add(31 * day)
		}
		out = append(out, e)
	}
	for i := range 18 {
		e := genEvent{kind: records.KindPurchase, id: fmt.Sprintf("p%03d", i), user: users[r.IntN(len(users))]}
		e.at = P.Add(time.Duration(r.Int64N(int64(4*day))) - 2*day).Truncate(time.Millisecond)
		e.received = e.at.Add(time.Second + time.Duration(r.Int64N(int64(time.Hour))))
		if r.IntN(15) == 0 {
			e.received = e.at.Add(31 * day)
		}
		for range 1 + r.IntN(3) {
			p := products[r.IntN(len(products))]
			v := productVendor[p]
			if r.IntN(2) == 0 {
				v = "" // the catalog says
			}
			e.items = append(e.items, records.Item{ProductID: p, UnitPriceMicros: 1_000_000 + r.Int64N(9_000_000), Quantity: 1 + r.Int64N(3), VendorID: v})
		}
		out = append(out, e)
	}
	return out
}

// bind turns generated events into events of marketplace mp.
func (s *stack) bind(t testing.TB, mp string, gen []genEvent) []records.Event {
	out := make([]records.Event, len(gen))
	for i, g := range gen {
		e := records.Event{Kind: g.kind, MarketplaceID: mp, ID: g.id, OccurredAtMs: g.at.UnixMilli(), ReceivedAtMs: g.received.UnixMilli(),
			OpaqueUserID: g.user, Items: g.items}
		if g.kind != records.KindPurchase {
			e.ResolvedBidID = s.token(t, mp, winner{format: g.format, winnerType: g.wtype, winnerID: g.entity, vendor: g.vendor,
				auctionAt: g.auction, auctionID: uuid.NewSHA1(uuid.NameSpaceURL, []byte(mp+g.id))})
		}
		out[i] = e
	}
	return out
}

// oracle attributes the generated history directly (Attribute over the
// countable events), by "purchase/item": "reason:interaction event id".
func oracle(gen []genEvent) map[string]string {
	rules := attribution.DefaultRules()
	byUser := map[string][]attribution.Touch{}
	for _, g := range gen {
		if g.kind == records.KindPurchase || g.received.Sub(g.at) > attribution.Horizon {
			continue
		}
		kind := attribution.Impression
		if g.kind == records.KindClick {
			kind = attribution.Click
		}
		byUser[g.user] = append(byUser[g.user], attribution.Touch{Kind: kind, EventID: g.id,
			InteractionID: projections.InteractionID("mp", g.kind, g.id), OccurredMs: g.at.UnixMilli(),
			ReceivedMs: g.received.Truncate(time.Second).UnixMilli(), AuctionMs: g.auction.UnixMilli(),
			AdFormat: g.format.String(), VendorID: g.vendor, EntityType: g.wtype.String(), EntityID: g.entity})
	}
	out := map[string]string{}
	for _, g := range gen {
		if g.kind != records.KindPurchase || g.received.Sub(g.at) > attribution.Horizon {
			continue
		}
		p := attribution.Purchase{EventID: g.id, OccurredMs: g.at.UnixMilli(), ReceivedMs: g.received.UnixMilli()}
		for _, it := range g.items {
			v := it.VendorID
			if v == "" {
				v = productVendor[it.ProductID]
			}
			p.Items = append(p.Items, attribution.Item{ProductID: it.ProductID, UnitPriceMicros: it.UnitPriceMicros, Quantity: it.Quantity, VendorID: v})
		}
		for _, r := range attribution.Attribute(&p, byUser[g.user], &rules) {
			v := r.Reason
			if r.Touch != nil {
				v += ":" + r.Touch.EventID
			}
			out[fmt.Sprintf("%s/%d", g.id, r.ItemIndex)] = v
		}
	}
	return out
}

// TestOrderIndependence posts one history in several orders (shuffled, in
// small batches the projectors fold one after the other, with duplicates
// of some events) to fresh pipelines: every order gives the same rows, and
// they are what Attribute says of the whole history. The shuffled round
// reads each user of a batch in a query of its own.
func TestOrderIndependence(t *testing.T) {
	gen := generate(1)
	want := oracle(gen)
	reasons := map[string]int{}
	for _, v := range want {
		reason, _, _ := strings.Cut(v, ":")
		reasons[reason]++
	}
	t.Logf("%d purchased items; the oracle's reasons: %v", len(want), reasons)
	if len(reasons) < 5 {
		t.Fatalf("the generated history does not exercise the rules: %v", reasons)
	}

	var first map[string]computedVersion
	for round := range 3 {
		s := newStack(t)
		mp := s.marketplace(time.UTC, attribution.DefaultRules())
		maps.Copy(s.vendors, productVendor)
		if round == 2 {
			s.queryUsersBytes = 1 // a query per user: the chunked reads
		}
		s.start(t)
		evs := s.bind(t, mp, gen)
		r := rand.New(rand.NewPCG(uint64(round), 5))
		switch round {
		case 0: // in time order of occurrence
			slices.SortStableFunc(evs, func(a, b records.Event) int { return int(a.OccurredAtMs - b.OccurredAtMs) })
		case 1: // reversed: every purchase before its interactions
			slices.SortStableFunc(evs, func(a, b records.Event) int { return int(b.OccurredAtMs - a.OccurredAtMs) })
		default:
			r.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		}
		for range 12 { // client retries: the same event again, anywhere
			evs = slices.Insert(evs, r.IntN(len(evs)+1), evs[r.IntN(len(evs))])
		}
		for len(evs) > 0 {
			n := min(len(evs), 1+r.IntN(8))
			s.produce(t, evs[:n]...)
			evs = evs[n:]
			time.Sleep(time.Duration(r.IntN(60)) * time.Millisecond)
		}
		s.settle(t)
		got := s.versions(t, mp)
		if len(got) != len(want) {
			t.Errorf("round %d: %d rows, want %d", round, len(got), len(want))
		}
		for k, w := range want {
			g := got[k].reason
			if got[k].interaction != "" {
				g += ":" + got[k].interaction
			}
			if g != w {
				t.Errorf("round %d: %s = %q, want %q", round, k, g, w)
			}
		}
		if first == nil {
			first = got
		} else if !maps.Equal(first, got) {
			for k := range first {
				if first[k] != got[k] {
					t.Errorf("round %d: %s = %+v, round 0 had %+v", round, k, got[k], first[k])
				}
			}
		}
	}
}

// computedVersion is what must not depend on the order: the credited
// interaction, the score and the row's version.
type computedVersion struct {
	reason, interaction string
	score               float64
	version             uint64
	day                 string
}

func (s *stack) versions(t testing.TB, mp string) map[string]computedVersion {
	t.Helper()
	rows, err := s.conn.Query(s.ctx, `SELECT purchase_event_id, item_index, reason, interaction_event_id, score, version, toString(day_local)
		FROM attributed_purchases_raw FINAL WHERE marketplace_id = toUUID(?)`, mp)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]computedVersion{}
	for rows.Next() {
		var (
			id  string
			idx uint16
			c   computedVersion
		)
		if err := rows.Scan(&id, &idx, &c.reason, &c.interaction, &c.score, &c.version, &c.day); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s/%d", id, idx)] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
