package projections_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/ingest"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

func skippedAuctionRecords() float64 {
	var m dto.Metric
	if err := telemetry.AuctionRecordsSkipped.(prometheus.Metric).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// TestAuctionsProjector: records published by the AuctionPublisher land in
// the views `auctions` and `auction_winners` with every value intact; a
// record on the topic twice and a replay of the whole topic (offsets
// rewound, as after a crash between insert and commit) still show one
// auction and one row per winner; undecodable records are skipped.
func TestAuctionsProjector(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	cl, topics := testenv.Topics(t, ctx, cfg, brokers, 3)
	conn := testenv.ClickHouse(t, ctx, cfg)

	full := &records.Auction{
		ID: "01920000-0000-7000-8000-0000000000a1", MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001",
		At: time.Date(2025, 3, 4, 5, 6, 7, 891e6, time.UTC), Endpoint: "auctions", Kind: "listings", Index: 2, Slots: 3,
		ProductCount: 10_000, Category: "c1|c2", SearchQuery: "red shoes", SlotID: "slot-1", Device: "mobile",
		PlacementID: 8, Locations: []string{"8928308280fffff", "8928308280bffff"}, OpaqueUserID: "u-1",
		PageType: "search", PageID: "p-9", PageValue: []string{"shoes", "red"}, ExperimentVariant: "B",
		Candidates: 17,
		Winners: []records.AuctionWinner{
			{Rank: 1, Type: "product", EntityID: "sku-1", CampaignID: "c-1", VendorID: "v-1", BidID: "b-1", BidTarget: "product",
				ChargeType: "CPC", BidMicros: 1_500_000, PriceMicros: 1_230_001, QualityPPM: 850_000, VariationID: "var-1"},
			{Rank: 2, Type: "product", EntityID: "sku-2", CampaignID: "c-2", VendorID: "v-2", BidTarget: "automated",
				ChargeType: "CPM", BidMicros: 9_223_372_036_854_775_807, PriceMicros: 3_999_999, QualityPPM: 1_000_000},
		},
	}
	failed := &records.Auction{
		ID: "01920000-0000-7000-8000-0000000000a2", MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000002",
		At: time.Date(2025, 4, 30, 23, 59, 59, 999e6, time.UTC), Endpoint: "sponsored-brand", Kind: "sponsored_brand",
		Slots: 1, PlacementName: "home-top", Error: true,
	}
	banner := &records.Auction{
		ID: "01920000-0000-7000-8000-0000000000a3", MarketplaceID: "6f1c3b5e-0000-4000-8000-000000000001",
		At: time.Date(2025, 3, 4, 5, 6, 8, 0, time.UTC), Endpoint: "auctions", Kind: "banners", Slots: 1, SlotID: "hero",
		Candidates: 1,
		Winners: []records.AuctionWinner{{Rank: 1, Type: "vendor", EntityID: "v-7", CampaignID: "c-7", VendorID: "v-7",
			BidTarget: "category", ChargeType: "CPM", BidMicros: 2_000_000, PriceMicros: 2_000_000, QualityPPM: 1}},
	}
	want := []*records.Auction{full, failed, banner}

	pub := ingest.NewAuctionPublisher(cl, topics.Auctions, quiet)
	for _, r := range want {
		pub.Record(r)
	}
	pub.Record(full) // the same record twice on the topic
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Records this version cannot store: skipped, never blocking the rest.
	badAt := *banner
	badAt.ID, badAt.At = "01920000-0000-7000-8000-0000000000a4", time.Time{}
	bad := []*kgo.Record{
		{Topic: topics.Auctions, Value: []byte("not json")},
		{Topic: topics.Auctions, Value: []byte(`{"id":"not-a-uuid","marketplaceId":"6f1c3b5e-0000-4000-8000-000000000001","at":"2025-03-04T05:06:07Z"}`)},
		{Topic: topics.Auctions, Value: []byte(`{"id":"01920000-0000-7000-8000-0000000000a5","marketplaceId":"6f1c3b5e-0000-4000-8000-000000000001","at":"2025-03-04T05:06:07Z","slots":70000}`)},
	}
	if err := cl.ProduceSync(ctx, bad...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pub.Record(&badAt)
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	const total = 3 + 1 + 3 + 1 // records on the topic
	const skipped = 4

	committed := func() int64 {
		offs, err := kadm.NewClient(cl).FetchOffsets(ctx, projections.AuctionsGroup)
		if err != nil {
			return 0
		}
		var n int64
		offs.Each(func(o kadm.OffsetResponse) { n += o.At })
		return n
	}
	runProjector := func() {
		t.Helper()
		p, err := projections.NewAuctionsProjector(projections.AuctionsOptions{Brokers: brokers, Topic: topics.Auctions,
			ClickHouse: conn, MaxRows: 1000, FlushInterval: 100 * time.Millisecond, Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Run(pctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
		}()
		testenv.Eventually(t, 20*time.Second, func() error {
			if n := committed(); n != total {
				return testenv.Errorf("committed %d of %d records", n, total)
			}
			return nil
		})
		cancel()
		wg.Wait()
		p.Close()
	}
	count := func(q string) uint64 {
		t.Helper()
		var n uint64
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	check := func(pass string) {
		t.Helper()
		if n := count("SELECT count() FROM auctions"); n != uint64(len(want)) {
			t.Errorf("%s: %d auctions visible, want %d", pass, n, len(want))
		}
		if n := count("SELECT count() FROM auction_winners"); n != 3 {
			t.Errorf("%s: %d winners visible, want 3", pass, n)
		}
		for _, w := range want {
			got, err := readAuction(ctx, conn, w.ID)
			if err != nil {
				t.Errorf("%s: read auction %s: %v", pass, w.ID, err)
				continue
			}
			if !reflect.DeepEqual(got, w) {
				t.Errorf("%s: auction %s in ClickHouse\n %+v\nwant\n %+v", pass, w.ID, *got, *w)
			}
		}
		t.Logf("%s: physical rows auctions_raw %d, auction_winners_raw %d", pass,
			count("SELECT count() FROM auctions_raw"), count("SELECT count() FROM auction_winners_raw"))
	}

	skipped0 := skippedAuctionRecords()
	runProjector()
	check("first pass")
	if d := skippedAuctionRecords() - skipped0; d != skipped {
		t.Errorf("%v records counted as skipped, want %d", d, skipped)
	}

	// Rewind the group: every record is inserted again.
	var rewind kadm.Offsets
	for p := int32(0); p < 3; p++ {
		rewind.Add(kadm.Offset{Topic: topics.Auctions, Partition: p, At: 0, LeaderEpoch: -1})
	}
	if _, err := kadm.NewClient(cl).CommitOffsets(ctx, projections.AuctionsGroup, rewind); err != nil {
		t.Fatal(err)
	}
	if committed() != 0 {
		t.Fatal("rewind did not take")
	}
	runProjector()
	check("after replay")
	if n := count("SELECT count() FROM auctions_raw"); n < uint64(len(want)) {
		t.Errorf("auctions_raw holds %d rows, fewer than the auctions", n)
	}
}

// readAuction rebuilds a Record from the views.
func readAuction(ctx context.Context, conn clickhouse.Conn, id string) (*records.Auction, error) {
	var (
		r                      records.Auction
		at                     time.Time
		atMs                   int64
		idx, placementID, fail uint8
		slots, winners         uint16
		products, candidates   uint32
	)
	err := conn.QueryRow(ctx, `SELECT toString(auction_id), toString(marketplace_id), at, at_ms, endpoint, kind, idx, slots,
		product_count, category, search_query, slot_id, device, placement_id, placement_name, locations, opaque_user_id,
		page_type, page_id, page_value, experiment_variant, candidates, error, winners
		FROM auctions WHERE auction_id = toUUID(?)`, id).Scan(
		&r.ID, &r.MarketplaceID, &at, &atMs, &r.Endpoint, &r.Kind, &idx, &slots,
		&products, &r.Category, &r.SearchQuery, &r.SlotID, &r.Device, &placementID, &r.PlacementName, &r.Locations, &r.OpaqueUserID,
		&r.PageType, &r.PageID, &r.PageValue, &r.ExperimentVariant, &candidates, &fail, &winners)
	if err != nil {
		return nil, err
	}
	r.At = time.UnixMilli(atMs).UTC()
	if !at.Equal(r.At.Truncate(time.Second)) {
		return nil, testenv.Errorf("at %v does not match at_ms %d", at, atMs)
	}
	r.Index, r.PlacementID, r.Error = int(idx), int(placementID), fail == 1
	r.Slots, r.ProductCount, r.Candidates = int(slots), int(products), int(candidates)
	if len(r.Locations) == 0 {
		r.Locations = nil
	}
	if len(r.PageValue) == 0 {
		r.PageValue = nil
	}

	rows, err := conn.Query(ctx, `SELECT toString(marketplace_id), at_ms, kind, rank, type, entity_id, campaign_id, vendor_id,
		bid_id, bid_target, charge_type, bid_micros, price_micros, quality_ppm, variation_id
		FROM auction_winners WHERE auction_id = toUUID(?) ORDER BY rank`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			w          records.AuctionWinner
			mp, kind   string
			wAtMs      int64
			rank       uint16
			qualityPPM uint32
		)
		if err := rows.Scan(&mp, &wAtMs, &kind, &rank, &w.Type, &w.EntityID, &w.CampaignID, &w.VendorID,
			&w.BidID, &w.BidTarget, &w.ChargeType, &w.BidMicros, &w.PriceMicros, &qualityPPM, &w.VariationID); err != nil {
			return nil, err
		}
		if mp != r.MarketplaceID || wAtMs != atMs || kind != r.Kind {
			return nil, testenv.Errorf("winner %d: marketplace %s, at_ms %d, kind %s differ from its auction", rank, mp, wAtMs, kind)
		}
		w.Rank, w.QualityPPM = int(rank), int64(qualityPPM)
		r.Winners = append(r.Winners, w)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if int(winners) != len(r.Winners) {
		return nil, testenv.Errorf("winners column %d, %d winner rows", winners, len(r.Winners))
	}
	return &r, nil
}
