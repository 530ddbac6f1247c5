package projections

import (
	"context"
	"encoding/binary"
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
	"github.com/endcap/endcap/spend"
)

// foldWorkload is a fixed batch of the events topic and the fold's work on
// it that needs no server: decoding, the interactions sink's rows and
// charges (the charges' outcomes made up, as the charge script would answer
// them), the charge rows, the events_raw sink's rows, and the frequency
// caps sink in a marketplace without restrictions. Its records are as the bench's generator makes
// them (deploy/loadgen, ClickLead): per 20 records, 6 impressions of CPC
// winners (recorded for the click rules) and 3 clicks on them 2 s later
// (charged, judged by the click rules), 4 impressions of CPM winners
// (charged), 5 organic impressions, an organic click and a purchase; every
// sponsored winner in an auction of its own, of 8 campaigns with daily
// budgets, of 5,000 shoppers.
type foldWorkload struct {
	batch []*kgo.Record
	fold  *EventFold
	inter *Interactions
	raw   *EventsRaw
	caps  *FrequencyCaps
	// sponsored counts the charges a run made (checked by the tests).
	charges int
}

// foldCampaigns are the workload's campaigns.
var foldCampaigns = func() []string {
	out := make([]string, 8)
	for i := range out {
		out[i] = "c0ffee00-1122-4333-8444-5566778899" + strconv.FormatInt(int64(0xa0+i), 16)
	}
	return out
}()

func newFoldWorkload(tb testing.TB, n int) *foldWorkload {
	tb.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	views := Views{
		Marketplace: func(id string) (MarketplaceDims, bool) {
			return MarketplaceDims{Currency: "EUR", Location: time.UTC}, id == testMP
		},
		Campaign: func(mp, id string, at time.Time) (CampaignDims, bool) {
			return CampaignDims{Name: "Spring", Type: "listings", VendorID: "v-camp", Status: "running", Active: true,
				DailyBudgetMicros: 50_000_000}, true
		},
		Vendor: func(mp, id string) (VendorDims, bool) {
			return VendorDims{Name: "Vendor", GlobalID: "g-" + id}, true
		},
		ProductVendor: func(mp, id string) string { return "v-1" },
	}
	kr, err := bidtoken.NewKeyring(map[uint8][]byte{1: []byte("endcap-test-key-0123456789abcdef")}, 1)
	if err != nil {
		tb.Fatal(err)
	}
	// A fixed clock for the records, recent enough that their winners are
	// charged (spend.ChargeRule) whenever the workload runs.
	now := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
	if now.After(time.Now()) {
		now = now.Add(-time.Hour)
	}
	token := func(i int, ct bidtoken.ChargeType) string {
		var auction [16]byte
		binary.BigEndian.PutUint64(auction[:8], uint64(now.UnixMilli())<<16|0x7000)
		binary.BigEndian.PutUint64(auction[8:], 0x8000_0000_0000_0000|uint64(i))
		c := bidtoken.Claims{MarketplaceID: uuid.MustParse(testMP), AuctionID: auction,
			CampaignID: uuid.MustParse(foldCampaigns[i%len(foldCampaigns)]), BidID: auction,
			AuctionTimeMs: now.Add(-2100 * time.Millisecond).UnixMilli(), ChargeType: ct,
			AdFormat: bidtoken.Listings, Rank: uint8(1 + i%3), PriceMicros: 1_250_000 + int64(i%7)*10_000,
			WinnerType: bidtoken.WinnerProduct, WinnerID: "p-" + strconv.Itoa(i%500), VendorID: "v-" + strconv.Itoa(i%40)}
		tok, err := kr.Encode(c)
		if err != nil {
			tb.Fatal(err)
		}
		return tok
	}
	w := &foldWorkload{batch: make([]*kgo.Record, n), fold: &EventFold{log: log}}
	var cpc []string // the CPC winners' tokens, for their clicks
	for i := range w.batch {
		e := records.Event{MarketplaceID: testMP, ID: "e-" + strconv.Itoa(i), OccurredAtMs: now.Add(-2 * time.Second).UnixMilli(),
			ReceivedAtMs: now.UnixMilli(), OpaqueUserID: "u-" + strconv.Itoa(i*7919%5000), DeviceType: "mobile",
			Placement: &records.Placement{Path: "/search", Position: int32(i%20 + 1), Page: 1, PageSize: 20},
			Page:      &records.Page{Type: "search", ID: "s", Value: []string{"shoes"}}}
		switch r := i % 20; {
		case r < 6:
			e.Kind, e.ResolvedBidID = records.KindImpression, token(i, bidtoken.CPC)
			cpc = append(cpc, e.ResolvedBidID)
		case r < 9:
			e.Kind, e.ResolvedBidID, e.OccurredAtMs = records.KindClick, cpc[len(cpc)-6+(r-6)*2], now.UnixMilli()
		case r < 13:
			e.Kind, e.ResolvedBidID = records.KindImpression, token(i, bidtoken.CPM)
		case r < 18:
			e.Kind, e.Entity = records.KindImpression, &records.Entity{Type: "product", ID: "p-" + strconv.Itoa(i%500)}
		case r < 19:
			e.Kind, e.Entity, e.OccurredAtMs = records.KindClick, &records.Entity{Type: "product", ID: "p-" + strconv.Itoa(i%500)}, now.UnixMilli()
		default:
			e.Kind, e.Page, e.Placement = records.KindPurchase, nil, nil
			e.Items = []records.Item{{ProductID: "p-" + strconv.Itoa(i%500), UnitPriceMicros: 12_990_000, Quantity: 1},
				{ProductID: "p-" + strconv.Itoa((i+1)%500), UnitPriceMicros: 4_500_000, Quantity: 2}}
		}
		v, err := json.Marshal(&e)
		if err != nil {
			tb.Fatal(err)
		}
		w.batch[i] = &kgo.Record{Value: v, Partition: int32(i % 3), Offset: int64(1_000_000 + i)}
	}
	w.inter = &Interactions{views: views, log: log, invalid: spend.DefaultInvalidRules}
	w.raw = NewEventsRaw(nil, w.inter)
	w.caps = NewFrequencyCaps(nil, func(string) bool { return false },
		func(string, string) (bool, bool) { return false, false },
		func(string) (*time.Location, bool) { return time.UTC, true })
	return w
}

// outcome is what the workload's charge script answers for charge k: an
// impression's record is recorded; of the charges, one in five is refused
// for the daily budget, one click in four as too fast, the others applied.
func (w *foldWorkload) outcome(c *spend.Charge, k int) spend.ChargeOutcome {
	switch {
	case c.Impression:
		return spend.ChargeRecorded
	case k%5 == 4:
		return spend.ChargeRefusedDaily
	case c.Click != nil && k%4 == 1:
		return spend.ChargeInvalidTooFast
	}
	return spend.ChargeApplied
}

// run folds the batch once.
func (w *foldWorkload) run(tb testing.TB) {
	ctx := context.Background()
	events := w.fold.decode(ctx, w.batch)
	evs := w.inter.pick(events)
	rows, pending, err := w.inter.build(ctx, evs)
	if err != nil {
		tb.Fatal(err)
	}
	charges, vendors, err := w.inter.prepare(ctx, rows, pending)
	if err != nil {
		tb.Fatal(err)
	}
	outcomes := make([]spend.ChargeOutcome, len(charges))
	for k := range charges {
		outcomes[k] = w.outcome(&charges[k], k)
	}
	ch := w.inter.decide(rows, pending, vendors, outcomes)
	_ = w.inter.invalidClicks(evs, pending, ch)
	w.charges = ch.n
	if _, err := w.raw.rows(ctx, events); err != nil {
		tb.Fatal(err)
	}
	if err := w.caps.Fold(ctx, events); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkFoldCPU is the fold's own CPU a record without I/O
// (foldWorkload: decoding, the interactions' rows and charges, the charge
// rows, the frequency caps in a marketplace without restrictions), batches
// of 10,000 records.
func BenchmarkFoldCPU(b *testing.B) {
	const n = 10_000
	w := newFoldWorkload(b, n)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.run(b)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
	b.ReportMetric(0, "ns/op")
}
