package projections_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/spend"
)

// TestInteractionsBalance: in a marketplace that uses balances, clicks are
// charged while the vendor's balance plus credit limit covers them, to the
// micro-unit, and refused (insufficient_balance) past it; a replay of the
// whole topic after a top-up draws nothing twice and decides nothing
// differently; a new click is charged from the top-up. The vendors drawn
// on are reported once per batch.
func TestInteractionsBalance(t *testing.T) {
	s := newChargeStack(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	camp := uuid.New()
	vendor := "v-" + camp.String()[:4] // the winner's vendor (chargeStack.winner)
	if _, err := spend.ApplyTopUp(s.ctx, s.rdb, s.mp, vendor, "t1", 1_000_000); err != nil {
		t.Fatal(err)
	}
	if _, err := spend.SetCreditLimit(s.ctx, s.rdb, s.mp, vendor, 100_000, 1); err != nil {
		t.Fatal(err)
	}
	views := s.views(time.UTC)
	views.Marketplace = func(id string) (projections.MarketplaceDims, bool) {
		return projections.MarketplaceDims{Currency: "EUR", Location: time.UTC, Balances: true}, id == s.mp
	}
	const price = 300_000
	var evs []records.Event
	for i := range 6 {
		evs = append(evs, records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: "c-" + strconv.Itoa(i), OccurredAtMs: now.UnixMilli(),
			ReceivedAtMs: now.UnixMilli(), OpaqueUserID: "u" + strconv.Itoa(i),
			ResolvedBidID: s.winner(t, uuid.New(), now.Add(-time.Minute), 1, camp, bidtoken.CPC, price)})
	}
	s.produce(t, evs...)
	var mu sync.Mutex
	drawnOn := map[string]int{}
	fold := func(want int64) {
		t.Helper()
		sink, err := projections.NewInteractions(projections.InteractionsOptions{ClickHouse: s.conn, Redis: s.rdb, Views: views, Log: quiet,
			Replicas: replicas(), OnDrawn: func(_ context.Context, vs []projections.VendorDrawn) error {
				mu.Lock()
				defer mu.Unlock()
				for _, v := range vs {
					drawnOn[v.MarketplaceID+"/"+v.VendorID]++
				}
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := projections.NewEventFold(projections.EventFoldOptions{
			Brokers: s.brokers, Topic: s.topics.Events, Claims: openClaims(t, s.brokers, s.topics, time.Hour),
			Sinks: []projections.EventSink{sink}, MaxRows: 50_000, FlushInterval: 100 * time.Millisecond, Log: quiet,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, want))
	}
	check := func(when string, charged, refused uint64, drawn int64) {
		t.Helper()
		gotCharged := s.uint64(t, "SELECT count() FROM interactions WHERE marketplace_id = ? AND charged = 1", s.mp)
		gotRefused := s.uint64(t, "SELECT count() FROM interactions WHERE marketplace_id = ? AND refused_reason = 'insufficient_balance'", s.mp)
		f, err := spend.ReadFunds(s.ctx, s.rdb, s.mp, vendor)
		if err != nil {
			t.Fatal(err)
		}
		_, total := s.spend(t, camp.String(), spend.DayOf(now, time.UTC))
		sum := s.chargedSum(t, camp.String())
		if gotCharged != charged || gotRefused != refused || f.Drawn != drawn || total != drawn || sum != drawn {
			t.Errorf("%s: %d charged, %d refused, drawn %d, campaign spent %d, charges sum %d; want %d, %d, %d",
				when, gotCharged, gotRefused, f.Drawn, total, sum, charged, refused, drawn)
		}
		// The charges_raw rows marked drawn add up to the vendor's drawn funds.
		if got := s.uint64(t, "SELECT toUInt64(sum(amount_micros)) FROM charges_raw FINAL WHERE marketplace_id = ? AND drawn = 1", s.mp); got != uint64(drawn) {
			t.Errorf("%s: charges marked drawn add up to %d, the vendor drew %d", when, got, drawn)
		}
	}
	fold(int64(len(evs)))
	// 1.00 + 0.10 of credit: three clicks of 0.30 (0.90); a fourth would
	// draw 1.20.
	check("first pass", 3, 3, 900_000)
	mu.Lock()
	if len(drawnOn) != 1 || drawnOn[s.mp+"/"+vendor] == 0 {
		t.Errorf("vendors reported: %v", drawnOn)
	}
	mu.Unlock()

	if _, err := spend.ApplyTopUp(s.ctx, s.rdb, s.mp, vendor, "t2", 5_000_000); err != nil {
		t.Fatal(err)
	}
	s.rewind(t, projections.EventsGroup, s.topics.Events)
	s.produce(t, records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: "c-new", OccurredAtMs: now.UnixMilli(), ReceivedAtMs: now.UnixMilli(),
		OpaqueUserID: "u", ResolvedBidID: s.winner(t, uuid.New(), now.Add(-time.Minute), 1, camp, bidtoken.CPC, price)})
	fold(int64(len(evs) + 1))
	check("after a top-up and a replay", 4, 3, 1_200_000)
}

// TestInteractionsBalanceCrashMidBatch: 300 clicks of two campaigns of one
// vendor whose funds cover 123 of them; the first projector's charges insert
// fails after Redis drew the funds and the interactions were inserted (a
// crash), and the next one replays the batch. The vendor is drawn exactly
// the sum of the charges, never beyond its balance plus credit limit, and
// the campaigns' spend is that sum.
func TestInteractionsBalanceCrashMidBatch(t *testing.T) {
	s := newChargeStack(t)
	now := time.Now().UTC()
	camps := []uuid.UUID{uuid.New(), uuid.New()}
	vendor := "v-shared"
	const clicks, price, credited, limit = 300, 10_000, 1_200_000, 35_000 // 123 clicks fit (1,230,000 ≤ 1,235,000)
	if _, err := spend.ApplyTopUp(s.ctx, s.rdb, s.mp, vendor, "t", credited); err != nil {
		t.Fatal(err)
	}
	if _, err := spend.SetCreditLimit(s.ctx, s.rdb, s.mp, vendor, limit, 1); err != nil {
		t.Fatal(err)
	}
	var evs []records.Event
	for i := range clicks {
		tok, err := s.kr.Encode(bidtoken.Claims{
			MarketplaceID: uuid.MustParse(s.mp), AuctionID: uuid.New(), CampaignID: camps[i%2], AuctionTimeMs: now.Add(-time.Minute).UnixMilli(),
			ChargeType: bidtoken.CPC, AdFormat: bidtoken.Listings, Rank: 1, PriceMicros: price, WinnerType: bidtoken.WinnerProduct,
			WinnerID: "sku", VendorID: vendor,
		})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, records.Event{Kind: records.KindClick, MarketplaceID: s.mp, ID: "c-" + strconv.Itoa(i),
			OccurredAtMs: now.UnixMilli(), ReceivedAtMs: now.UnixMilli(), OpaqueUserID: "u" + strconv.Itoa(i%17), ResolvedBidID: tok})
	}
	s.produce(t, evs...)
	views := s.views(time.UTC)
	views.Marketplace = func(id string) (projections.MarketplaceDims, bool) {
		return projections.MarketplaceDims{Currency: "EUR", Location: time.UTC, Balances: true}, id == s.mp
	}
	drawn := func() int64 {
		f, err := spend.ReadFunds(s.ctx, s.rdb, s.mp, vendor)
		if err != nil {
			t.Fatal(err)
		}
		return f.Drawn
	}
	const want = 123 * price
	p := s.projector(t, failingConn{Conn: s.conn, table: "charges_raw"}, views, 100*time.Millisecond)
	s.run(t, p, 30*time.Second, func() error {
		if d := drawn(); d != want {
			return fmt.Errorf("drawn %d", d)
		}
		if n := s.uint64(t, "SELECT count() FROM interactions WHERE marketplace_id = ?", s.mp); n != clicks {
			return fmt.Errorf("%d interactions", n)
		}
		return nil
	})
	if n := s.committed(projections.EventsGroup); n > 0 {
		t.Fatalf("the failing projector committed %d offsets", n)
	}
	p = s.projector(t, s.conn, views, 100*time.Millisecond)
	s.run(t, p, 30*time.Second, s.committedIs(projections.EventsGroup, clicks))
	day := spend.DayOf(now, time.UTC)
	var spent, charged int64
	for _, c := range camps {
		_, total := s.spend(t, c.String(), day)
		spent += total
		charged += s.chargedSum(t, c.String())
	}
	refused := s.uint64(t, "SELECT count() FROM interactions WHERE marketplace_id = ? AND refused_reason = 'insufficient_balance'", s.mp)
	if d := drawn(); d != want || spent != want || charged != want || refused != clicks-123 || d > credited+limit {
		t.Errorf("after the replay: drawn %d, campaigns spent %d, charges %d, %d refused; want %d, %d, %d, %d",
			d, spent, charged, refused, want, want, want, clicks-123)
	}
}
