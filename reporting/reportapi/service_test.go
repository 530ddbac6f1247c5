package reportapi_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/reporting/reportapi"
	"github.com/endcap/endcap/reporting/rollups"
	"github.com/endcap/endcap/reporting/vendorcharges"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	mpA = "6f1c3c62-5f0e-4a4c-9a43-7a1f6f1f0a01"
	mpB = "6f1c3c62-5f0e-4a4c-9a43-7a1f6f1f0a02"
	c1  = "11111111-1111-4111-8111-111111111111" // vendor V1
	c2  = "22222222-2222-4222-8222-222222222222" // vendor V2
	c3  = "33333333-3333-4333-8333-333333333333" // vendor V1
)

var (
	d1 = time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	d2 = d1.AddDate(0, 0, 1)
	d3 = d1.AddDate(0, 0, 2)
)

func db(t testing.TB) (context.Context, clickhouse.Conn) {
	t.Helper()
	env := testenv.Get(t)
	cfg := env.Config(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx, testenv.ClickHouse(t, ctx, cfg)
}

type ev struct {
	mp, kind, id, campaign, vendor, product, chargeType string
	at                                                  time.Time
	sponsored, charged                                  uint8
	micros                                              int64
	sub                                                 uint16
}

func insertEvents(t *testing.T, ctx context.Context, conn clickhouse.Conn, rows ...ev) {
	t.Helper()
	b, err := conn.PrepareBatch(ctx, `INSERT INTO interactions_raw (marketplace_id, kind, event_id, interaction_id,
		occurred_at, occurred_at_ms, received_at, day_local, currency_code, sponsored, auction_id, auction_at, rank,
		ad_format, charge_type, campaign_id, campaign_name, campaign_status, campaign_active, external_campaign_id,
		vendor_id, vendor_name, external_vendor_id, entity_type, entity_id, entity_id_hashed, device_type, page_id,
		page_value, placement_page, charged, amount_micros, amount_sub_micros, refused_reason)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(uuid.MustParse(r.mp), r.kind, r.id, uuid.NewSHA1(uuid.NameSpaceOID, []byte(r.kind+r.id)),
			r.at, r.at.UnixMilli(), r.at, dateOf(r.at), "EUR", r.sponsored, uuid.Nil, r.at.Add(-time.Minute), uint8(1),
			"listings", r.chargeType, r.campaign, "name", "active", uint8(1), "",
			r.vendor, "vendor "+r.vendor, r.vendor, "product", r.product, uint8(0), "mobile", "home",
			[]string{}, uint32(1), r.charged, r.micros, r.sub, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// purchase is one attributed item, credited to the interaction event (whose
// winner was entity).
type purchase struct {
	mp, id, event, campaign, vendor, product, entity string
	index                                            uint16
	at                                               time.Time
	qty, micros                                      int64
}

func insertPurchases(t *testing.T, ctx context.Context, conn clickhouse.Conn, rows ...purchase) {
	t.Helper()
	b, err := conn.PrepareBatch(ctx, `INSERT INTO attributed_purchases_raw (marketplace_id, purchase_event_id, item_index,
		purchased_at, purchased_at_ms, day_local, currency_code, product_id, quantity, unit_price_micros, amount_micros,
		attributed, interaction_kind, interaction_event_id, auction_id, ad_format, campaign_id, vendor_id,
		entity_type, entity_id, charge_type, version)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(uuid.MustParse(r.mp), r.id, r.index, r.at, r.at.UnixMilli(), dateOf(r.at), "EUR",
			r.product, r.qty, r.micros/r.qty, r.micros, uint8(1), "click", r.event, uuid.Nil, "listings",
			r.campaign, r.vendor, "product", r.entity, "CPC", uint64(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func dateOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// seed stores known events of marketplace A (and one of B, which no report
// of A counts) and recomputes the rollup of their days.
func seed(t *testing.T, ctx context.Context, conn clickhouse.Conn) {
	t.Helper()
	imp := func(id, campaign, vendor, product string, at time.Time) ev {
		// A CPM impression: 1.5 micro-units (a CPM price of 1,500 micros).
		return ev{mp: mpA, kind: "impression", id: id, campaign: campaign, vendor: vendor, product: product,
			chargeType: "CPM", at: at, sponsored: 1, charged: 1, micros: 1, sub: 500}
	}
	click := func(id, campaign, vendor, product string, at time.Time, micros int64) ev {
		return ev{mp: mpA, kind: "click", id: id, campaign: campaign, vendor: vendor, product: product,
			chargeType: "CPC", at: at, sponsored: 1, charged: 1, micros: micros}
	}
	insertEvents(t, ctx, conn,
		imp("i1", c1, "V1", "P1", d1.Add(9*time.Hour)),
		imp("i2", c1, "V1", "P1", d1.Add(10*time.Hour)),
		imp("i3", c1, "V1", "P2", d2.Add(10*time.Hour)),
		imp("i4", c3, "V1", "P3", d1.Add(11*time.Hour)),
		click("k1", c1, "V1", "P1", d1.Add(9*time.Hour+time.Minute), 250_000),
		click("k2", c2, "V2", "P9", d1.Add(12*time.Hour), 1_005_000),
		click("k3", c2, "V2", "P9", d3.Add(12*time.Hour), 2_000_000),
		// An impression not charged, an organic one (not in any report),
		// another marketplace's click.
		ev{mp: mpA, kind: "impression", id: "i5", campaign: c2, vendor: "V2", product: "P9", chargeType: "CPC",
			at: d1.Add(13 * time.Hour), sponsored: 1},
		ev{mp: mpA, kind: "impression", id: "o1", product: "P1", at: d1.Add(13 * time.Hour)},
		ev{mp: mpB, kind: "click", id: "k9", campaign: c1, vendor: "V1", product: "P1", chargeType: "CPC",
			at: d1.Add(9 * time.Hour), sponsored: 1, charged: 1, micros: 70_000},
	)
	// A replayed click: FINAL keeps one.
	insertEvents(t, ctx, conn, click("k1", c1, "V1", "P1", d1.Add(9*time.Hour+time.Minute), 250_000))
	insertPurchases(t, ctx, conn,
		purchase{mp: mpA, id: "U1", index: 0, event: "k1", campaign: c1, vendor: "V1", product: "P1", entity: "P1", at: d1.Add(15 * time.Hour), qty: 2, micros: 20_000_000},
		purchase{mp: mpA, id: "U1", index: 1, event: "k1", campaign: c1, vendor: "V1", product: "P2", entity: "P1", at: d1.Add(15 * time.Hour), qty: 1, micros: 5_000_000},
		purchase{mp: mpA, id: "U2", index: 0, event: "k2", campaign: c2, vendor: "V2", product: "P9", entity: "P9", at: d2.Add(1 * time.Hour), qty: 3, micros: 3_000_005},
	)
	j, err := rollups.New(rollups.Options{ClickHouse: conn, Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Refresh(ctx, []time.Time{d1, d2, d3}); err != nil {
		t.Fatal(err)
	}
}

func amount(micros int64, sub uint16) vendorcharges.Amount {
	return vendorcharges.Amount{Micros: micros, SubMicros: sub}
}

func TestReports(t *testing.T) {
	ctx, conn := db(t)
	seed(t, ctx, conn)
	svc := reportapi.New(conn)
	all := reportapi.Window{From: d1, To: d3}

	for _, tc := range []struct {
		name string
		f    reportapi.Filter
		w    reportapi.Window
		want reportapi.Metrics
	}{
		{"marketplace", reportapi.Filter{}, all, reportapi.Metrics{
			Impressions: 5, ChargedImpressions: 4, SpentImpressions: amount(6, 0),
			Clicks: 3, ChargedClicks: 3, SpentClicks: amount(3_255_000, 0),
			PurchaseCount: 2, PurchaseQuantity: 6, PurchaseAmount: 28_000_005}},
		{"marketplace, first day", reportapi.Filter{}, reportapi.Window{From: d1, To: d1}, reportapi.Metrics{
			Impressions: 4, ChargedImpressions: 3, SpentImpressions: amount(4, 500),
			Clicks: 2, ChargedClicks: 2, SpentClicks: amount(1_255_000, 0),
			PurchaseCount: 1, PurchaseQuantity: 3, PurchaseAmount: 25_000_000}},
		{"vendor V1", reportapi.Filter{VendorID: "V1"}, all, reportapi.Metrics{
			Impressions: 4, ChargedImpressions: 4, SpentImpressions: amount(6, 0),
			Clicks: 1, ChargedClicks: 1, SpentClicks: amount(250_000, 0),
			PurchaseCount: 1, PurchaseQuantity: 3, PurchaseAmount: 25_000_000}},
		{"campaign c1", reportapi.Filter{VendorID: "V1", CampaignID: c1}, all, reportapi.Metrics{
			Impressions: 3, ChargedImpressions: 3, SpentImpressions: amount(4, 500),
			Clicks: 1, ChargedClicks: 1, SpentClicks: amount(250_000, 0),
			PurchaseCount: 1, PurchaseQuantity: 3, PurchaseAmount: 25_000_000}},
		{"product P1", reportapi.Filter{ProductID: "P1"}, all, reportapi.Metrics{
			Impressions: 2, ChargedImpressions: 2, SpentImpressions: amount(3, 0),
			Clicks: 1, ChargedClicks: 1, SpentClicks: amount(250_000, 0),
			// The purchase of P1 and P2 is credited to the click on P1.
			PurchaseCount: 1, PurchaseQuantity: 3, PurchaseAmount: 25_000_000}},
		{"product P9 seen by vendor V1", reportapi.Filter{ProductID: "P9", VendorID: "V1"}, all, reportapi.Metrics{}},
		{"unknown campaign", reportapi.Filter{CampaignID: "nope"}, all, reportapi.Metrics{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := svc.Totals(ctx, mpA, tc.f, tc.w)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}

	days, err := svc.Daily(ctx, mpA, reportapi.Filter{VendorID: "V2", CampaignID: c2}, reportapi.Window{From: d1.AddDate(0, 0, -1), To: d3})
	if err != nil {
		t.Fatal(err)
	}
	want := []reportapi.Day{
		{Date: d1.AddDate(0, 0, -1)},
		{Date: d1, Metrics: reportapi.Metrics{Impressions: 1, Clicks: 1, ChargedClicks: 1, SpentClicks: amount(1_005_000, 0)}},
		{Date: d2, Metrics: reportapi.Metrics{PurchaseCount: 1, PurchaseQuantity: 3, PurchaseAmount: money.Micros(3_000_005)}},
		{Date: d3, Metrics: reportapi.Metrics{Clicks: 1, ChargedClicks: 1, SpentClicks: amount(2_000_000, 0)}},
	}
	if len(days) != len(want) {
		t.Fatalf("days %+v", days)
	}
	for i := range want {
		if !days[i].Date.Equal(want[i].Date) || days[i].Metrics != want[i].Metrics {
			t.Errorf("day %d: got %+v, want %+v", i, days[i], want[i])
		}
	}
}

func TestInteractionsPages(t *testing.T) {
	ctx, conn := db(t)
	seed(t, ctx, conn)
	svc := reportapi.New(conn)
	all := reportapi.Window{From: d1, To: d3}

	type row struct {
		day           time.Time
		vendor, camp  string
		product       string
		impressions   uint64
		clicks        uint64
		spentClicks   int64
		purchaseCount uint64
	}
	for _, tc := range []struct {
		name   string
		g      reportapi.GroupBy
		vendor string
		want   []row
	}{
		{"by campaign", reportapi.ByCampaign, "", []row{
			{d1, "V1", c1, "", 2, 1, 250_000, 1}, {d1, "V2", c2, "", 1, 1, 1_005_000, 0}, {d1, "V1", c3, "", 1, 0, 0, 0},
			{d2, "V1", c1, "", 1, 0, 0, 0}, {d2, "V2", c2, "", 0, 0, 0, 1},
			{d3, "V2", c2, "", 0, 1, 2_000_000, 0}}},
		{"by vendor", reportapi.ByVendor, "", []row{
			{d1, "V1", "", "", 3, 1, 250_000, 1}, {d1, "V2", "", "", 1, 1, 1_005_000, 0},
			{d2, "V1", "", "", 1, 0, 0, 0}, {d2, "V2", "", "", 0, 0, 0, 1},
			{d3, "V2", "", "", 0, 1, 2_000_000, 0}}},
		{"by product, vendor V1 only", reportapi.ByProduct, "V1", []row{
			{d1, "", "", "P1", 2, 1, 250_000, 1}, {d1, "", "", "P3", 1, 0, 0, 0},
			{d2, "", "", "P2", 1, 0, 0, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Pages of 2 rows; each next page starts after the last row.
			req := reportapi.InteractionsRequest{Window: all, GroupBy: tc.g, Limit: 2}
			var got []reportapi.Interaction
			for page := 0; ; page++ {
				rows, more, err := svc.Interactions(ctx, mpA, reportapi.Filter{VendorID: tc.vendor}, req)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) > 2 || (more && len(rows) != 2) {
					t.Fatalf("page %d: %d rows, more %v", page, len(rows), more)
				}
				got = append(got, rows...)
				if !more {
					break
				}
				req.After = rows[len(rows)-1].Position(tc.g)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d rows, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				r := row{g.Date, g.VendorID, g.CampaignID, g.ProductID, g.Impressions, g.Clicks, g.SpentClicks.Micros, g.PurchaseCount}
				if r != w {
					t.Errorf("row %d: got %+v, want %+v", i, r, w)
				}
			}
		})
	}
}

func TestDataAsOf(t *testing.T) {
	ctx, conn := db(t)
	svc := reportapi.New(conn)
	w := reportapi.Window{From: d1, To: d2}
	if at, err := svc.DataAsOf(ctx, w); err != nil || !at.IsZero() {
		t.Fatalf("days never computed: %v %v", at, err)
	}
	mark := func(day time.Time, at time.Time) {
		b, err := conn.PrepareBatch(ctx, `INSERT INTO rollup_days (day_local, computed_at, rows, data_as_of_ms)`)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Append(day, at, uint64(1), uint64(at.UnixMilli())); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	early, late := d2.Add(5*time.Hour), d2.Add(9*time.Hour)
	mark(d1, late)
	if at, err := svc.DataAsOf(ctx, w); err != nil || !at.IsZero() {
		t.Fatalf("a day unknown: %v %v", at, err)
	}
	mark(d2, early)
	if at, err := svc.DataAsOf(ctx, w); err != nil || !at.Equal(early.Truncate(time.Millisecond)) {
		t.Fatalf("the earliest of the days that can change: %v %v", at, err)
	}
}

func TestUnavailable(t *testing.T) {
	ctx, conn := db(t)
	svc := reportapi.New(conn)
	_ = conn.Close()
	_, err := svc.Totals(ctx, mpA, reportapi.Filter{}, reportapi.Window{From: d1, To: d1})
	if err == nil || !errors.Is(err, reportapi.ErrUnavailable) {
		t.Fatalf("a closed connection: %v", err)
	}
}
