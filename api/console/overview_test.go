package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/webhooks"
	"github.com/endcap/endcap/storage/statelog"
)

// bidOf creates a bid on a campaign.
func (s *sys) bidOf(t *testing.T, campaign, body string) campaigns.Bid {
	t.Helper()
	var in campaigns.BidInput
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, b, _, err := s.a.Campaigns.CreateBid(ctx, s.mp.ID, campaign, in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// products puts products of a vendor in the catalog.
func (s *sys) products(t *testing.T, vendor string, ids ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	str := func(s string) *string { return &s }
	yes := true
	var in []catalog.ProductInput
	for _, id := range ids {
		in = append(in, catalog.ProductInput{ID: str(id), Name: str("Product " + id), Vendors: []string{vendor}, Active: &yes})
	}
	if _, err := s.a.Catalog.UpsertProducts(ctx, s.mp.ID, in, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
}

// rollupMoney writes a day's rollup row of a vendor's campaign with spend
// and attributed sales (micro-units).
func (s *sys) rollupMoney(t *testing.T, day, vendor, campaign, name string, imps, clicks int, spend, sales int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.a.ClickHouse.Exec(ctx, fmt.Sprintf(`INSERT INTO rollup_daily (marketplace_id, day_local, currency_code, sponsored, vendor_id, campaign_id, campaign_name,
		impressions, clicks, ad_spent_clicks_micros, total_purchase_amount_micros) SELECT toUUID('%s'), toDate('%s'), 'EUR', 1, '%s', '%s', '%s', %d, %d, %d, %d`,
		s.mp.ID, day, vendor, campaign, name, imps, clicks, spend, sales)); err != nil {
		t.Fatal(err)
	}
}

// TestCampaignBidEligibility: a campaign's page shows each bid's
// eligibility as the API says it (isEligible, ineligibleReason and its
// sentence), and its status reason and pacing in words.
func TestCampaignBidEligibility(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.a.Accounts.SetReserve(ctx, s.mp.ID, 250_000, 0); err != nil {
		t.Fatal(err)
	}
	s.products(t, "v-1", "p-1", "p-2")
	cp := s.campaign(t, "v-1", "Low bids")
	low := s.bidOf(t, cp.ID, `{"targetType":"product","target":"p-1","bidAmount":0.10}`)
	ok := s.bidOf(t, cp.ID, `{"targetType":"product","target":"p-2","bidAmount":0.30}`)
	r := s.admin(t).do("GET", "/console/campaigns/"+cp.ID, nil)
	if r.status != 200 {
		t.Fatalf("campaign page: %d", r.status)
	}
	body := html.UnescapeString(r.body)
	rowOf := func(id string) string {
		m := regexp.MustCompile(`(?s)<tr data-bid="` + id + `"[^>]*>.*?</tr>`).FindString(body)
		if m == "" {
			t.Fatalf("no row of bid %s:\n%s", id, body)
		}
		return m
	}
	lowRow, okRow := rowOf(low.ID), rowOf(ok.ID)
	for _, want := range []string{`data-eligible="false"`, "The bid 0.1 is below the marketplace's CPC reserve price 0.25.", "below_reserve"} {
		if !strings.Contains(lowRow, want) {
			t.Errorf("the bid below the reserve: %q lacks %q", lowRow, want)
		}
	}
	if !strings.Contains(okRow, `data-eligible="true"`) || strings.Contains(okRow, "below_reserve") {
		t.Errorf("the bid above the reserve: %q", okRow)
	}
	// The same as the API's view of the bid.
	if j := s.a.Campaigns.BidJSON(s.mp.ID, cp, low); j.IsEligible || j.IneligibleReason == nil || *j.IneligibleReason != campaigns.ReasonBelowReserve {
		t.Fatalf("the API's view of the bid: %+v", j)
	}
	// The status reason and the pacing in words, the codes beside.
	lacks(t, body, "Serving: it takes part in auctions", `<span class="reason">serving</span>`, "On pace</span>")
	// Times in the marketplace's zone, named: the start (2024-01-01 00:00 UTC) in Paris.
	if !strings.Contains(body, ">2024-01-01 01:00 CET</time>") || strings.Contains(body, " UTC</") {
		t.Errorf("the start date is not in the marketplace's zone: %s", regexp.MustCompile(`<dt>Start</dt><dd>.*?</dd>`).FindString(body))
	}
}

// TestOverview: the admin's landing page has the marketplace's results
// today and over 7 and 30 days, the top campaigns and vendors, and what
// needs attention (campaigns that do not serve, bids that cannot win,
// webhooks failing or disabled).
func TestOverview(t *testing.T) {
	s := startAtNoon(t) // the page's today is the day of the rows written as today's below
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.a.Accounts.SetReserve(ctx, s.mp.ID, 250_000, 0); err != nil {
		t.Fatal(err)
	}
	s.products(t, "v-1", "p-1")
	s.products(t, "v-2", "p-2")
	top := s.campaign(t, "v-1", "Big spender")
	s.bidOf(t, top.ID, `{"targetType":"product","target":"p-1","bidAmount":0.50}`)
	low := s.campaign(t, "v-2", "Under the reserve")
	s.bidOf(t, low.ID, `{"targetType":"product","target":"p-2","bidAmount":0.10}`)
	u, events := "https://hooks.example.com/endcap", []string{"campaign.updated"}
	h, ver, err := s.a.Webhooks.Create(ctx, s.mp.ID, webhooks.Input{URL: &u, EventTypes: &events})
	if err != nil {
		t.Fatal(err)
	}
	off := "disabled"
	if _, _, err := s.a.Webhooks.Update(ctx, s.mp.ID, h.ID, statelog.IfMatch(ver), webhooks.Input{Status: &off}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().In(s.mp.Location())
	today, earlier := now.Format(time.DateOnly), now.AddDate(0, 0, -10).Format(time.DateOnly)
	s.rollupMoney(t, today, "v-1", top.ID, "Big spender", 1000, 40, 12_500_000, 50_000_000)
	s.rollupMoney(t, earlier, "v-1", top.ID, "Big spender", 500, 10, 7_500_000, 0)
	s.rollupMoney(t, today, "v-2", low.ID, "Under the reserve", 10, 1, 500_000, 0)

	c := s.client(t)
	r := c.login(adminEmail, adminPassword)
	if loc := r.header.Get("Location"); loc != "/console" {
		t.Fatalf("sign-in sends to %q", loc)
	}
	if r := c.do("GET", "/console", nil); r.header.Get("Location") != "/console/overview" {
		t.Fatalf("the admin's first page: %d %q", r.status, r.header.Get("Location"))
	}
	r = c.do("GET", "/console/overview", nil)
	if r.status != 200 {
		t.Fatalf("overview: %d", r.status)
	}
	body := html.UnescapeString(r.body)
	periods := regexp.MustCompile(`(?s)<table data-testid="overview-periods">.*?</table>`).FindString(body)
	for _, want := range []string{
		`<th scope="row">Today</th><td class="num">13.00</td><td class="num">50.00</td><td class="num">3.85</td><td class="num">1,010</td><td class="num">41</td>`,
		`<th scope="row">Last 7 days</th><td class="num">13.00</td>`,
		`<th scope="row">Last 30 days</th><td class="num">20.50</td><td class="num">50.00</td><td class="num">2.44</td><td class="num">1,510</td><td class="num">51</td>`,
	} {
		if !strings.Contains(periods, want) {
			t.Errorf("the periods lack %q:\n%s", want, periods)
		}
	}
	camps := regexp.MustCompile(`(?s)<table data-testid="top-campaigns">.*?</table>`).FindString(body)
	if i, j := strings.Index(camps, "Big spender"), strings.Index(camps, "Under the reserve"); i < 0 || j < i {
		t.Errorf("top campaigns, largest spend first:\n%s", camps)
	}
	vendors := regexp.MustCompile(`(?s)<table data-testid="top-vendors">.*?</table>`).FindString(body)
	if i, j := strings.Index(vendors, ">One<"), strings.Index(vendors, ">Two<"); i < 0 || j < i || !strings.Contains(vendors, "12.50") {
		t.Errorf("top vendors (last 7 days), largest spend first:\n%s", vendors)
	}
	section := func(kind string) string {
		return regexp.MustCompile(`(?s)<section class="card attention" data-attention="` + kind + `">.*?</section>`).FindString(body)
	}
	if a := section(campaigns.ReasonNoEligibleProducts); !strings.Contains(a, "Under the reserve") || !strings.Contains(a, ": 1</h3>") || strings.Contains(a, "Big spender") {
		t.Errorf("campaigns that cannot serve: %q", a)
	}
	if a := section("ineligible_bids"); !strings.Contains(a, "Under the reserve · product p-2") || !strings.Contains(a, "is below the marketplace's CPC reserve price 0.25") {
		t.Errorf("ineligible bids: %q", a)
	}
	if a := section("webhooks"); !strings.Contains(a, u) || !strings.Contains(a, "disabled") {
		t.Errorf("webhooks: %q", a)
	}
	if !strings.Contains(body, `id="chart-spend"`) || !strings.Contains(body, `"id":"chart-sales"`) {
		t.Error("the overview's charts are missing")
	}
	// A vendor's page: its campaigns' days in the marketplace's zone (the
	// start, 2024-01-01 00:00 UTC, is 2023-12-31 west of UTC).
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).In(s.mp.Location()).Format(time.DateOnly)
	if r := c.do("GET", "/console/vendors/v-1", nil); r.status != 200 || !strings.Contains(r.body, "<td>"+start+"</td>") {
		t.Errorf("the vendor's page: %d, without the start %s", r.status, start)
	}
	// A vendor user has no overview: its first page is its performance.
	v := s.vendorUser(t, "v-1", "analyst@one.test")
	if r := v.do("GET", "/console", nil); r.header.Get("Location") != "/console/performance" {
		t.Fatalf("the vendor user's first page: %q", r.header.Get("Location"))
	}
}

// TestWebhookButtons: a webhook's page sends a test event and sends a
// delivery again, as the API's POST …/test and …/retry do; a disabled
// webhook's refusal is shown on the page, an unknown delivery is 404, a
// form without the token 403.
func TestWebhookButtons(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, events := "https://hooks.example.com/endcap", []string{"campaign.updated"}
	h, ver, err := s.a.Webhooks.Create(ctx, s.mp.ID, webhooks.Input{URL: &u, EventTypes: &events})
	if err != nil {
		t.Fatal(err)
	}
	c := s.admin(t)
	page := "/console/webhooks/" + h.ID
	token := c.csrf(page)
	r := c.do("POST", page+"/test", url.Values{"csrf": {token}})
	if r.status != 303 || r.header.Get("Location") != page+"?done=webhook-test" {
		t.Fatalf("test: %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	ds, _, err := s.a.WebhookDeliveries.List(s.mp.ID, h.ID, "", "", 10)
	if err != nil || len(ds) != 1 || ds[0].EventType != webhooks.TypeTest {
		t.Fatalf("deliveries after the test: %+v %v", ds, err)
	}
	r = c.do("GET", page+"?done=webhook-test", nil)
	if !strings.Contains(r.body, "A test event was sent") || !strings.Contains(r.body, `data-delivery="`+ds[0].ID+`"`) {
		t.Fatalf("the page after the test lacks the notice or the delivery:\n%s", r.body)
	}
	retry := page + "/deliveries/" + ds[0].ID + "/retry"
	if !strings.Contains(r.body, `action="`+retry+`"`) {
		t.Fatalf("no retry button for the delivery")
	}
	r = c.do("POST", retry, url.Values{"csrf": {token}})
	if r.status != 303 || r.header.Get("Location") != page+"?done=webhook-retry" {
		t.Fatalf("retry: %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	x, err := s.a.WebhookDeliveries.Get(s.mp.ID, h.ID, ds[0].ID)
	if err != nil || x.Status != webhooks.DeliveryPending || x.NextAttemptAt == nil || x.NextAttemptAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("the delivery after the retry: %+v %v", x, err)
	}
	if r := c.do("POST", page+"/deliveries/no-such-delivery/retry", url.Values{"csrf": {token}}); r.status != 404 {
		t.Fatalf("retry of an unknown delivery: %d", r.status)
	}
	if r := c.do("POST", page+"/test", url.Values{}); r.status != 403 {
		t.Fatalf("test without the form's token: %d", r.status)
	}
	// A disabled webhook: the API's refusal on the page (409), nothing sent.
	off := "disabled"
	if _, _, err := s.a.Webhooks.Update(ctx, s.mp.ID, h.ID, statelog.IfMatch(ver), webhooks.Input{Status: &off}); err != nil {
		t.Fatal(err)
	}
	r = c.do("POST", page+"/test", url.Values{"csrf": {token}})
	if r.status != 409 || !strings.Contains(html.UnescapeString(r.body), "The webhook is disabled") {
		t.Fatalf("test of a disabled webhook: %d %s", r.status, r.body)
	}
	if ds, _, _ := s.a.WebhookDeliveries.List(s.mp.ID, h.ID, "", "", 10); len(ds) != 1 {
		t.Fatalf("%d deliveries after the refused test", len(ds))
	}
}

// TestProductSearch: every page has an icon; the products page finds, without a vendor, the
// products whose id or name contains the text, whatever the case.
func TestProductSearch(t *testing.T) {
	s := start(t)
	s.products(t, "v-1", "p-1", "p-2")
	s.products(t, "v-2", "x-3")
	c := s.client(t)
	// Every page names its icon, which is served.
	icon := regexp.MustCompile(`<link rel="icon" type="image/svg\+xml" href="([^"]+)">`).FindStringSubmatch(c.do("GET", "/console/login", nil).body)
	if icon == nil {
		t.Fatal("the sign-in page has no icon")
	}
	if r := c.do("GET", html.UnescapeString(icon[1]), nil); r.status != 200 || r.header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(r.body, "<svg") {
		t.Fatalf("the icon: %d %q", r.status, r.header.Get("Content-Type"))
	}
	c.login(adminEmail, adminPassword)
	for _, tc := range []struct{ q, vendor, want string }{
		{"PRODUCT P-", "", "p-1 p-2"},
		{"x-3", "", "x-3"},
		{"product", "v-2", "x-3"},
		{"nothing", "", ""},
	} {
		r := c.do("GET", "/console/products?"+url.Values{"q": {tc.q}, "vendor": {tc.vendor}}.Encode(), nil)
		var ids []string
		for _, m := range regexp.MustCompile(`<tr><td class="mono">([^<]+)</td>`).FindAllStringSubmatch(r.body, -1) {
			ids = append(ids, m[1])
		}
		if r.status != 200 || strings.Join(ids, " ") != tc.want {
			t.Errorf("search %q (vendor %q): %d %q, want %q", tc.q, tc.vendor, r.status, ids, tc.want)
		}
	}
}
