package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/management/accounts"
)

// Helpers of the Reporting API tests (rp*).

const rpBase = "/public/v1/reporting-service"

// rpRow is a rollup_daily row inserted directly (the reports read the
// rollup; reporting/reportapi's tests go from raw events through the
// rollup job).
type rpRow struct {
	mp, day, vendor, campaign, product string
	sponsored                          uint8
	imps, chargedImps                  uint64
	impMicros                          int64
	impSub                             uint64
	clicks, chargedClicks              uint64
	clickMicros                        int64
	purchases                          []string
	qty, amount                        int64
}

func rpInsert(t *testing.T, s *system, rows ...rpRow) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, r := range rows {
		// uniqExactState over the purchase ids (no row: the empty set).
		err := s.App.ClickHouse.Exec(ctx, `INSERT INTO rollup_daily (marketplace_id, day_local, currency_code, sponsored,
			vendor_id, campaign_id, entity_type, entity_id, impressions, clicks, charged_impressions, charged_clicks,
			ad_spent_impressions_micros, ad_spent_impressions_sub_micros, ad_spent_clicks_micros, ad_spent_clicks_sub_micros,
			attributed_items, purchases, quantity, total_purchase_amount_micros)
			SELECT toUUID(?), toDate(?), 'USD', toUInt8(?), ?, ?, 'product', ?, toUInt64(?), toUInt64(?), toUInt64(?), toUInt64(?),
			       toInt64(?), toUInt64(?), toInt64(?), toUInt64(0), toUInt64(?), uniqExactState(p), toInt64(?), toInt64(?)
			FROM (SELECT arrayJoin(CAST(? AS Array(String))) AS p)`,
			r.mp, r.day, r.sponsored, r.vendor, r.campaign, r.product, r.imps, r.clicks, r.chargedImps, r.chargedClicks,
			r.impMicros, r.impSub, r.clickMicros, uint64(len(r.purchases)), r.qty, r.amount, append([]string{}, r.purchases...))
		if err != nil {
			t.Fatal(err)
		}
	}
}

// rpWatermark records the rollup days' watermark.
func rpWatermark(t *testing.T, s *system, at time.Time, days ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel) // see vcInsert
	b, err := s.App.ClickHouse.PrepareBatch(ctx, `INSERT INTO rollup_days (day_local, computed_at, rows, data_as_of_ms)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range days {
		day, _ := time.Parse(time.DateOnly, d)
		if err := b.Append(day, at, uint64(1), uint64(at.UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func rpQuery(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return path + "?" + q.Encode()
}

type rpEvents struct {
	Total, Charged uint64
	AdSpent        int64
	AdSpentDecimal string
}

type rpReport struct {
	Impressions rpEvents
	Clicks      rpEvents
	Purchases   struct {
		Amount        int64
		AmountDecimal string
		Count         uint64
		Quantity      int64
	}
	Date         string
	CurrencyCode string
	DataAsOf     *string
}

type rpDaily struct {
	HasMore  bool
	NextPage *string
	Reports  []rpReport
	DataAsOf *string
}

type rpInteractions struct {
	HasMore      bool
	NextPage     *string
	Interactions []map[string]any
}

// TestReportingAPI: every route of the Reporting API over known rollup rows
// (exact figures, minor units and decimals, a purchase counted once over
// two days, organic rows and another marketplace's never counted), days
// and interactions followed page by page, the freshness of the days, a
// vendor-scoped key's view (its vendor's reports only: another's are 404,
// the marketplace's 403, its interactions and products its own rows only),
// with a golden file per route.
func TestReportingAPI(t *testing.T) {
	s, _ := cpStart(t)
	A, mp := s.AdvancedKey, s.Marketplace.ID // USD, America/New_York
	cpFixture(t, s, A)
	const past = `"startDate":"2020-01-01T00:00:00Z"`
	cA := auCampaign(t, s, "v-1", `{"name":"A","type":"listings","dailyBudget":10,"totalBudget":100,`+past+`}`)
	cB := auCampaign(t, s, "v-2", `{"name":"B","type":"listings","dailyBudget":10,"totalBudget":100,`+past+`}`)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	other, err := s.App.Accounts.CreateMarketplace(ctx, "Other Market", "USD", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	v2Key, _, err := s.App.Accounts.CreateKeyWith(ctx, mp, accounts.KeyAdvanced, accounts.KeyOptions{VendorID: "v-2"})
	if err != nil {
		t.Fatal(err)
	}
	// The same vendor named by its UUID.
	v2UUIDKey, _, err := s.App.Accounts.CreateKeyWith(ctx, mp, accounts.KeyAdvanced, accounts.KeyOptions{VendorID: vendorid.String(mp, "v-2")})
	if err != nil {
		t.Fatal(err)
	}

	rpInsert(t, s,
		rpRow{mp: mp, day: "2026-03-10", sponsored: 1, vendor: "v-1", campaign: cA, product: "p-1",
			imps: 1000, chargedImps: 1000, impMicros: 1_234_567, impSub: 1890, // 1.234568890
			clicks: 20, chargedClicks: 18, clickMicros: 5_405_000,
			purchases: []string{"U1", "U2"}, qty: 3, amount: 45_990_000},
		rpRow{mp: mp, day: "2026-03-11", sponsored: 1, vendor: "v-1", campaign: cA, product: "p-2",
			imps: 10, chargedImps: 10, impMicros: 15, impSub: 0,
			purchases: []string{"U2"}, qty: 1, amount: 5_000_005},
		rpRow{mp: mp, day: "2026-03-10", sponsored: 1, vendor: "v-2", campaign: cB, product: "p-9",
			clicks: 5, chargedClicks: 5, clickMicros: 2_500_000},
		rpRow{mp: mp, day: "2026-03-12", sponsored: 0, vendor: "v-2", product: "p-9", imps: 99},
		rpRow{mp: other.ID, day: "2026-03-10", sponsored: 1, vendor: "v-1", campaign: cA, product: "p-1", imps: 7, clicks: 7},
	)
	asOf := time.Date(2026, 3, 13, 8, 0, 0, 0, time.UTC)
	rpWatermark(t, s, asOf, "2026-03-10", "2026-03-11", "2026-03-12")

	ids := map[string]string{}
	n := &wireNorm{ids: ids, fixed: map[string]string{}, now: time.Now()}
	rpGolden := func(name string, r response) {
		t.Helper()
		var b struct{ NextPage *string }
		if json.Unmarshal(r.Body, &b) == nil && b.NextPage != nil {
			n.fixed[*b.NextPage] = "next-page-cursor"
		}
		r.Path = string(n.apply([]byte(r.Path)))
		r.Body = n.apply(r.Body)
		golden(t, filepath.Join("reporting", name+".json"), r)
	}
	get := func(key, path string, status int) response {
		t.Helper()
		r := s.request(t, "GET", path, key, nil, nil)
		cpStatus(t, r, status)
		return r
	}
	window := []string{"start_date", "2026-03-10", "end_date", "2026-03-12"}

	// The marketplace: every sponsored row of its own, none of the other's.
	r := get(A, rpQuery(rpBase+"/marketplace", window...), 200)
	var total rpReport
	if err := json.Unmarshal(r.Body, &total); err != nil {
		t.Fatal(err)
	}
	if total.Impressions != (rpEvents{1010, 1010, 123, "1.23458389"}) ||
		total.Clicks != (rpEvents{25, 23, 791, "7.905"}) ||
		total.Purchases.Count != 2 || total.Purchases.Quantity != 4 || total.Purchases.Amount != 5099 ||
		total.Purchases.AmountDecimal != "50.990005" || total.CurrencyCode != "USD" ||
		total.DataAsOf == nil || *total.DataAsOf != "2026-03-13T08:00:00.000Z" {
		t.Fatalf("marketplace report %s", r.Body)
	}
	rpGolden("marketplace", r)

	// Days in pages of two: every day, zeros where none.
	r = get(A, rpQuery(rpBase+"/marketplace/daily", append(window, "limit", "2")...), 200)
	var page rpDaily
	if err := json.Unmarshal(r.Body, &page); err != nil || !page.HasMore || page.NextPage == nil || len(page.Reports) != 2 ||
		page.Reports[0].Date != "2026-03-10" || page.Reports[0].Clicks.Total != 25 || page.Reports[1].Impressions.Total != 10 {
		t.Fatalf("first page %s", r.Body)
	}
	rpGolden("marketplace_daily", r)
	cursor := *page.NextPage
	r = get(A, rpQuery(rpBase+"/marketplace/daily", append(window, "limit", "2", "next_page", *page.NextPage)...), 200)
	if err := json.Unmarshal(r.Body, &page); err != nil || page.HasMore || page.NextPage != nil || len(page.Reports) != 1 ||
		page.Reports[0].Date != "2026-03-12" || page.Reports[0].Impressions.Total != 0 {
		t.Fatalf("last page %s", r.Body)
	}
	// A cursor continues its own report only.
	get(A, rpQuery(rpBase+"/vendors/v-1/daily", append(window, "limit", "2", "next_page", cursor)...), 422)

	// A vendor (by catalog id), a campaign, a product.
	for _, tc := range []struct {
		name, path   string
		imps, clicks uint64
		purchases    uint64
	}{
		{"vendor", rpBase + "/vendors/v-1", 1010, 20, 2},
		{"campaign", rpBase + "/campaigns/" + cA, 1010, 20, 2},
		{"product", rpBase + "/products/p-1", 1000, 20, 2},
	} {
		r := get(A, rpQuery(tc.path, window...), 200)
		var rep rpReport
		if err := json.Unmarshal(r.Body, &rep); err != nil || rep.Impressions.Total != tc.imps || rep.Clicks.Total != tc.clicks ||
			rep.Purchases.Count != tc.purchases {
			t.Fatalf("%s: %s", tc.name, r.Body)
		}
		rpGolden(tc.name, r)
		r = get(A, rpQuery(tc.path+"/daily", window...), 200)
		var d rpDaily
		if err := json.Unmarshal(r.Body, &d); err != nil || len(d.Reports) != 3 || d.HasMore || d.Reports[0].Impressions.Total+d.Reports[1].Impressions.Total != tc.imps {
			t.Fatalf("%s daily: %s", tc.name, r.Body)
		}
		rpGolden(tc.name+"_daily", r)
	}
	get(A, rpQuery(rpBase+"/vendors/no-such-vendor", window...), 404)
	get(A, rpQuery(rpBase+"/campaigns/"+uuid.NewString(), window...), 404)

	// Interactions: by campaign (golden), by product one row a page.
	r = get(A, rpQuery(rpBase+"/interactions", append(window, "group_by", "campaign")...), 200)
	var in rpInteractions
	if err := json.Unmarshal(r.Body, &in); err != nil || len(in.Interactions) != 3 || in.HasMore {
		t.Fatalf("interactions %s", r.Body)
	}
	if x := in.Interactions[0]; x["date"] != "2026-03-10" || x["timestamp"] != "2026-03-10T04:00:00.000Z" {
		t.Fatalf("the day's start in New York: %v", x)
	}
	rpGolden("interactions_campaign", r)
	var products []string
	next := ""
	for range 10 {
		q := append(window, "group_by", "product", "limit", "1")
		if next != "" {
			q = append(q, "next_page", next)
		}
		var p rpInteractions
		if err := json.Unmarshal(get(A, rpQuery(rpBase+"/interactions", q...), 200).Body, &p); err != nil || len(p.Interactions) != 1 {
			t.Fatalf("interactions by product: %+v %v", p, err)
		}
		products = append(products, p.Interactions[0]["date"].(string)+"/"+p.Interactions[0]["productId"].(string))
		if !p.HasMore {
			break
		}
		next = *p.NextPage
	}
	if strings.Join(products, " ") != "2026-03-10/p-1 2026-03-10/p-9 2026-03-11/p-2" {
		t.Fatalf("interactions by product, page by page: %v", products)
	}
	rpGolden("interactions_hourly_422", get(A, rpQuery(rpBase+"/interactions", append(window, "granularity", "hourly")...), 422))

	// A key scoped to vendor v-2.
	rpGolden("vendor_key_marketplace_403", get(v2Key, rpQuery(rpBase+"/marketplace", window...), 403))
	get(v2Key, "/public/v1/campaign-service/campaigns/"+cB, 403)
	get(v2Key, rpQuery(rpBase+"/vendors/v-1", window...), 404)
	get(v2Key, rpQuery(rpBase+"/campaigns/"+cA, window...), 404)
	var rep rpReport
	if err := json.Unmarshal(get(v2Key, rpQuery(rpBase+"/campaigns/"+cB, window...), 200).Body, &rep); err != nil ||
		rep.Clicks.Total != 5 || rep.Clicks.AdSpent != 250 || rep.Clicks.AdSpentDecimal != "2.5" {
		t.Fatalf("its own campaign: %+v %v", rep, err)
	}
	if err := json.Unmarshal(get(v2Key, rpQuery(rpBase+"/products/p-1", window...), 200).Body, &rep); err != nil ||
		rep.Impressions.Total != 0 || rep.Clicks.Total != 0 {
		t.Fatalf("another vendor's product: %+v %v", rep, err)
	}
	for _, key := range []string{v2Key, v2UUIDKey} {
		if err := json.Unmarshal(get(key, rpQuery(rpBase+"/interactions", append(window, "group_by", "vendor")...), 200).Body, &in); err != nil ||
			len(in.Interactions) != 1 || in.Interactions[0]["vendorId"] != "v-2" {
			t.Fatalf("its interactions: %+v %v", in, err)
		}
	}
	get(v2UUIDKey, rpQuery(rpBase+"/campaigns/"+cB, window...), 200)
	get(v2UUIDKey, rpQuery(rpBase+"/vendors/v-2", window...), 200)
	get(v2UUIDKey, rpQuery(rpBase+"/campaigns/"+cA, window...), 404)
}
