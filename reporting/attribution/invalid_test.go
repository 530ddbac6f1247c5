package attribution_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/reporting/attribution"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestInvalidClicksNotCredited: the attribution sink folds behind the
// interactions sink (projections.InteractionsOptions.Then), which tells it
// the clicks an invalid-click rule refused: such a click is never credited.
// u1's click has no impression of its winner: the purchase goes to u1's
// earlier impression of the same product, not to the click (which a click
// would beat). u2's click, a second after its impression, is credited.
func TestInvalidClicksNotCredited(t *testing.T) {
	s := newStack(t)
	mp := s.marketplace(time.UTC, attribution.DefaultRules())
	attr, err := attribution.NewProjector(attribution.Options{ClickHouse: s.conn, Marketplace: s.lookup, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	inter, err := projections.NewInteractions(projections.InteractionsOptions{ClickHouse: s.conn, Redis: s.rdb, Log: testenv.Logger(t),
		Views: projections.Views{Marketplace: func(id string) (projections.MarketplaceDims, bool) {
			return projections.MarketplaceDims{Currency: "EUR", Location: time.UTC}, id == mp
		}},
		InvalidClicks: spend.DefaultInvalidRules, Then: attr})
	if err != nil {
		t.Fatal(err)
	}
	f := s.fold(t, inter, 1000, 50*time.Millisecond)
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		if err := f.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	w := winner{format: bidtoken.Listings, winnerType: bidtoken.WinnerProduct, winnerID: "A", vendor: "v1", auctionAt: P.Add(-3 * time.Hour)}
	seen := s.token(t, mp, w)
	w.auctionID = uuid.Must(uuid.NewV7())
	unseen := s.token(t, mp, w)
	w.auctionID = uuid.Must(uuid.NewV7())
	other := s.token(t, mp, w)
	item := records.Item{ProductID: "A", UnitPriceMicros: 1_000_000, Quantity: 1}
	s.produce(t,
		interaction(records.KindImpression, mp, "u1", "i1", seen, P.Add(-2*time.Hour)),
		interaction(records.KindClick, mp, "u1", "c1", unseen, P.Add(-time.Hour)), // no impression of its winner
		purchase(mp, "u1", "p1", P, item),
		interaction(records.KindImpression, mp, "u2", "i2", other, P.Add(-time.Hour-time.Second)),
		interaction(records.KindClick, mp, "u2", "c2", other, P.Add(-time.Hour)),
		purchase(mp, "u2", "p2", P, item),
	)
	s.settle(t)
	got := s.results(t, mp)
	if r := got["p1/0"]; r.reason != attribution.ReasonProductImpression || r.interaction != "i1" {
		t.Errorf("u1's purchase credited to %q (%s), want i1 (the click c1 is invalid)", r.interaction, r.reason)
	}
	if r := got["p2/0"]; r.reason != attribution.ReasonProductClick || r.interaction != "c2" {
		t.Errorf("u2's purchase credited to %q (%s), want c2", r.interaction, r.reason)
	}
	var reason string
	if err := s.conn.QueryRow(s.ctx, "SELECT refused_reason FROM interactions WHERE marketplace_id = ? AND event_id = 'c1'", mp).Scan(&reason); err != nil || reason != string(spend.NoChargeInvalidNoImpression) {
		t.Errorf("c1 stored with reason %q (%v), want %s", reason, err, spend.NoChargeInvalidNoImpression)
	}
}
