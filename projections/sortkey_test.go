package projections

import (
	"cmp"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
)

// enumKind is a kind's value in the tables' kind Enum8 (by which ClickHouse
// sorts them).
var enumKind = map[string]int{"impression": 1, "click": 2, "purchase": 3, "pageview": 4}

// A batch's rows go to ClickHouse in the order of their table's sorting
// key, (marketplace_id, kind, event_id), whatever the batch's order, so that
// the server writes the block without sorting it; the charges stay in the
// batch's order, in which a campaign's are decided.
func TestFoldRowsInSortingKeyOrder(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := &EventFold{log: log}
	// Ids ("e-0", "e-1", … "e-10", …) and kinds (impressions, clicks,
	// organic impressions, purchases and page views, by 5) out of the key's
	// order, of two marketplaces.
	other := uuid.NewString()
	now := time.Now().UnixMilli()
	var batch []*kgo.Record
	for i := range 300 {
		e := records.Event{MarketplaceID: testMP, ID: "e-" + strconv.Itoa(i), OccurredAtMs: now, ReceivedAtMs: now,
			OpaqueUserID: "u-" + strconv.Itoa(i%7)}
		switch i % 5 {
		case 0, 1:
			e.Kind = records.KindImpression
			if i%5 == 1 {
				e.Kind = records.KindClick
			}
			e.ResolvedBidID = testToken(t, func(c *bidtoken.Claims) { c.AuctionID, c.AuctionTimeMs = uuid.New(), now-1000 })
		case 2:
			e.Kind = records.KindImpression
			e.Entity = &records.Entity{Type: "product", ID: "p-one"}
		case 3:
			e.Kind = records.KindPurchase
		case 4:
			e.Kind = records.KindPageView
		}
		if i%50 == 7 {
			e.MarketplaceID = other
		}
		v, _ := json.Marshal(&e)
		batch = append(batch, &kgo.Record{Value: v, Partition: int32(i % 3), Offset: int64(i)})
	}
	events := f.decode(t.Context(), batch)
	if len(events) != len(batch) {
		t.Fatalf("%d events decoded of %d", len(events), len(batch))
	}
	views := testViews(time.UTC)
	known := views.Marketplace
	views.Marketplace = func(id string) (MarketplaceDims, bool) {
		if id == other {
			return MarketplaceDims{Currency: "EUR", Location: time.UTC}, true
		}
		return known(id)
	}
	p := &Interactions{views: views, log: log}
	evs := p.pick(events)
	rows, charges, err := p.build(t.Context(), evs)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := NewEventsRaw(nil, p).rows(t.Context(), events)
	if err != nil {
		t.Fatal(err)
	}

	tables := []struct {
		table string
		n     int
		mp    func(i int) string
		kind  func(i int) string
		id    func(i int) string
	}{
		{"interactions_raw", rows.n, func(i int) string { return rows.mp[i].String() },
			func(i int) string { return rows.kind.At(i) }, func(i int) string { return rows.eventID.At(i) }},
		{"events_raw", ev.n, func(i int) string { return ev.marketplace.At(i) },
			func(i int) string { return ev.kind.At(i) }, func(i int) string { return ev.id.At(i) }},
	}
	for _, tb := range tables {
		t.Run(tb.table, func(t *testing.T) {
			if tb.n < 3 {
				t.Fatalf("%d rows: the test needs more", tb.n)
			}
			for i := 1; i < tb.n; i++ {
				a := uuid.MustParse(tb.mp(i - 1))
				b := uuid.MustParse(tb.mp(i))
				c := CompareUUID(a, b)
				if c == 0 {
					c = cmp.Compare(enumKind[tb.kind(i-1)], enumKind[tb.kind(i)])
				}
				if c == 0 {
					c = cmp.Compare(tb.id(i-1), tb.id(i))
				}
				if c > 0 {
					t.Fatalf("row %d (%s %s %s) after row %d (%s %s %s): not in the sorting key's order",
						i, tb.mp(i), tb.kind(i), tb.id(i), i-1, tb.mp(i-1), tb.kind(i-1), tb.id(i-1))
				}
			}
		})
	}

	// The charges: in the batch's order, each with its own row.
	pos := map[string]int{}
	for i := range events {
		pos[events[i].E.ID] = i
	}
	if len(charges) < 2 {
		t.Fatalf("%d charges: the test needs more", len(charges))
	}
	last := -1
	for k, c := range charges {
		id := rows.eventID.At(c.row)
		if pos[id] <= last {
			t.Fatalf("charge %d (event %s, batch position %d) after batch position %d: not in the batch's order", k, id, pos[id], last)
		}
		last = pos[id]
		if c.Owner != owner(events[pos[id]].Partition, events[pos[id]].Offset) {
			t.Fatalf("charge %d: owner %s, its row's event %s is at %d/%d", k, c.Owner, id, events[pos[id]].Partition, events[pos[id]].Offset)
		}
	}
}

// TestEventOrder: eventOrder is SortedOrder by compareEventKey, ties (the
// same marketplace, kind and id) in the order given, whatever prefix the
// ids share.
func TestEventOrder(t *testing.T) {
	mps := []uuid.UUID{uuid.MustParse(testMP), uuid.New(), {}}
	kinds := []records.Kind{records.KindImpression, records.KindClick, records.KindPurchase, records.KindPageView}
	for _, n := range []int{0, 1, 2, 50, 1000} {
		evs := make([]*Event, n)
		for i := range evs {
			// Ids with a long common prefix, some of them a prefix of
			// others, some with a zero byte.
			id := "request-0123456789abcdef-" + strconv.Itoa((i*31)%(n/2+1))
			switch i % 9 {
			case 3:
				id = id[:len(id)-1]
			case 5:
				id += "\x00"
			case 7:
				id += "\x00x"
			}
			evs[i] = &Event{E: records.Event{Kind: kinds[(i*7)%len(kinds)], ID: id}, MP: mps[(i*3)%len(mps)]}
		}
		want := SortedOrder(n, func(a, b int) int { return compareEventKey(evs[a], evs[b]) })
		got := eventOrder(evs)
		if len(got) != len(want) {
			t.Fatalf("%d events: %d positions, want %d", n, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%d events: position %d is %d, want %d", n, i, got[i], want[i])
			}
		}
	}
}
