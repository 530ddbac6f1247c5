package attribution_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/reporting/attribution"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestAttributionLoad (ENDCAP_TEST_LOAD=1) measures the attribution
// projector's rate: a history of 200,000 events of 20,000 users over 10
// days (65 % impressions, 20 % clicks, 10 % purchases, 5 % page views),
// produced first, then folded with production batch settings and timed to
// the last commit. Interactions arrive in random time order, so purchases
// are recomputed often (the worst case: in time order a new interaction
// rarely precedes a purchase already folded).
func TestAttributionLoad(t *testing.T) {
	if os.Getenv("ENDCAP_TEST_LOAD") != "1" {
		t.Skip("load test: set ENDCAP_TEST_LOAD=1")
	}
	s := newStack(t)
	mp := s.marketplace(time.UTC, attribution.DefaultRules())
	const (
		total = 200_000
		users = 20_000
	)
	now := time.Now().UTC()
	r := rand.New(rand.NewPCG(3, 4))
	var evs []records.Event
	purchases := 0
	for i := range total {
		user := fmt.Sprintf("user-%05d", r.IntN(users))
		product := fmt.Sprintf("sku-%03d", r.IntN(300))
		vendor := fmt.Sprintf("v%02d", r.IntN(30))
		id := fmt.Sprintf("e%07d", i)
		at := now.Add(-time.Duration(r.Int64N(int64(10 * day))))
		switch k := r.IntN(100); {
		case k < 85:
			kind := records.KindImpression
			if k >= 65 {
				kind = records.KindClick
			}
			tok := s.token(t, mp, winner{format: bidtoken.Listings, winnerType: bidtoken.WinnerProduct, winnerID: product, vendor: vendor,
				auctionAt: at.Add(-time.Second), auctionID: uuid.Must(uuid.NewV7())})
			evs = append(evs, interaction(kind, mp, user, id, tok, at))
		case k < 95:
			purchases++
			items := []records.Item{{ProductID: product, UnitPriceMicros: 1_000_000, Quantity: 1, VendorID: vendor}}
			for range r.IntN(3) {
				items = append(items, records.Item{ProductID: fmt.Sprintf("sku-%03d", r.IntN(300)), UnitPriceMicros: 2_000_000, Quantity: 2})
			}
			evs = append(evs, purchase(mp, user, id, at, items...))
		default:
			evs = append(evs, records.Event{Kind: records.KindPageView, MarketplaceID: mp, ID: id, OccurredAtMs: at.UnixMilli(),
				ReceivedAtMs: at.UnixMilli() + 1000, OpaqueUserID: user, Page: &records.Page{Type: "home", ID: "h"}})
		}
	}
	for i := 0; i < len(evs); i += 5000 {
		s.produce(t, evs[i:min(i+5000, len(evs))]...)
	}

	adm := kadm.NewClient(s.cl)
	committed := func(group string) func() error {
		return func() error {
			offs, err := adm.FetchOffsets(s.ctx, group)
			if err != nil {
				return err
			}
			var n int64
			offs.Each(func(o kadm.OffsetResponse) { n += o.At })
			if n != total {
				return fmt.Errorf("%s committed %d of %d", group, n, total)
			}
			return nil
		}
	}
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	sink, err := attribution.NewProjector(attribution.Options{ClickHouse: s.conn, Marketplace: s.lookup, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ap := s.fold(t, sink, 50_000, time.Second)
	start := time.Now()
	go func() {
		defer close(done)
		defer ap.Close()
		if err := ap.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	testenv.Eventually(t, 10*time.Minute, committed(projections.EventsGroup))
	el := time.Since(start)
	var items, attributed uint64
	if err := s.conn.QueryRow(s.ctx, "SELECT count(), countIf(attributed = 1) FROM attributed_purchases_raw FINAL WHERE marketplace_id = toUUID(?)", mp).Scan(&items, &attributed); err != nil {
		t.Fatal(err)
	}
	var physical uint64
	if err := s.conn.QueryRow(s.ctx, "SELECT count() FROM attributed_purchases_raw WHERE marketplace_id = toUUID(?)", mp).Scan(&physical); err != nil {
		t.Fatal(err)
	}
	t.Logf("attribution projector: %d events (%d purchases) in %s = %.0f events/s; %d items, %d attributed; %d rows written (recomputations)",
		total, purchases, el.Round(time.Millisecond), float64(total)/el.Seconds(), items, attributed, physical)
}
