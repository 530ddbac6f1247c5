package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/records"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/testkit/testenv"
)

// Helpers of the vendor-charges tests (vc*).

const vcPath = "/public/v1/billing-service/vendor-charges"

type vcCharge struct {
	InteractionID    string          `json:"interactionId"`
	Timestamp        string          `json:"timestamp"`
	CampaignID       string          `json:"campaignId"`
	ProductID        *string         `json:"productId"`
	VendorID         string          `json:"vendorId"`
	Amount           json.RawMessage `json:"amount"`
	ExternalVendorID string          `json:"externalVendorId"`
	GlobalID         *string         `json:"globalId"`
}

type vcBody struct {
	StartDate    string     `json:"startDate"`
	EndDate      string     `json:"endDate"`
	CurrencyCode string     `json:"currencyCode"`
	HasMore      bool       `json:"hasMore"`
	NextPage     *string    `json:"nextPage"`
	Data         []vcCharge `json:"data"`
}

// vcQuery is the query string of a window (and more parameters).
func vcQuery(start, end string, more ...string) string {
	q := url.Values{}
	q.Set("start_date", start)
	q.Set("end_date", end)
	for i := 0; i+1 < len(more); i += 2 {
		q.Set(more[i], more[i+1])
	}
	return vcPath + "?" + q.Encode()
}

// vcCursorParam is the next_page parameter of a query.
var vcCursorParam = regexp.MustCompile(`next_page=[^&]*`)

// vcGet calls the endpoint and decodes a 200.
func vcGet(t *testing.T, s *system, key, path string) (vcBody, response) {
	t.Helper()
	r := s.request(t, "GET", path, key, nil, nil)
	cpStatus(t, r, 200)
	var b vcBody
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatalf("%s: %v: %s", path, err, r.Body)
	}
	return b, r
}

// vcAll follows a window page by page with limit, checking each page, and
// returns every charge.
func vcAll(t *testing.T, s *system, key, start, end string, limit int) []vcCharge {
	t.Helper()
	var out []vcCharge
	next := ""
	for page := 0; page < 1000; page++ {
		more := []string{"limit", fmt.Sprint(limit)}
		if next != "" {
			more = append(more, "next_page", next)
		}
		b, _ := vcGet(t, s, key, vcQuery(start, end, more...))
		if len(b.Data) > limit {
			t.Fatalf("page of %d, limit %d", len(b.Data), limit)
		}
		out = append(out, b.Data...)
		if !b.HasMore {
			if b.NextPage != nil {
				t.Fatalf("last page with a nextPage %q", *b.NextPage)
			}
			return out
		}
		if b.NextPage == nil || *b.NextPage == "" || len(b.Data) != limit {
			t.Fatalf("hasMore with nextPage %v and %d charges", b.NextPage, len(b.Data))
		}
		next = *b.NextPage
	}
	t.Fatal("pages do not end")
	return nil
}

// vcRat parses an amount's JSON text as an exact rational.
func vcRat(t *testing.T, raw json.RawMessage) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(string(raw))
	if !ok || strings.ContainsAny(string(raw), "eE\"") {
		t.Fatalf("amount %s is not a plain decimal number", raw)
	}
	return r
}

// vcExact is what ClickHouse says the charges of a marketplace in a window
// amount to, exactly: (Σ amount_micros × 1000 + Σ amount_sub_micros) / 10⁹
// currency units, and how many charges there are.
func vcExact(t *testing.T, s *system, mp string, startMs, endMs int64) (*big.Rat, uint64) {
	t.Helper()
	rows := s.query(t, `SELECT toString(sum(amount_micros)), toString(sum(amount_sub_micros)), count() FROM charges
		WHERE marketplace_id = ? AND timestamp_ms >= ? AND timestamp_ms < ?`, mp, startMs, endMs)
	micros, _ := new(big.Int).SetString(rows[0][0], 10)
	sub, _ := new(big.Int).SetString(rows[0][1], 10)
	var n uint64
	fmt.Sscan(rows[0][2], &n)
	nanos := new(big.Int).Add(new(big.Int).Mul(micros, big.NewInt(1000)), sub)
	return new(big.Rat).SetFrac(nanos, big.NewInt(1e9)), n
}

// vcRow is a charges_raw row inserted directly.
type vcRow struct {
	mp, name  string // name: the interaction id is UUIDv5 of it
	at        time.Time
	micros    int64
	sub       uint16
	product   string
	vendor    string
	globalID  string
	extVendor string
}

func vcID(name string) string { return uuid.NewSHA1(uuid.NameSpaceURL, []byte("vc/"+name)).String() }

// vcGoldenMarketplace stands for a test's marketplace in golden files: the
// vendors' UUIDs depend on the marketplace's id, new in every run.
const vcGoldenMarketplace = "00000000-0000-4000-8000-000000000001"

// vcStableVendors writes the UUIDs of the vendors of mp in body as those of
// the same vendors of vcGoldenMarketplace.
func vcStableVendors(body []byte, mp string, vendors ...string) []byte {
	for _, v := range vendors {
		body = bytes.ReplaceAll(body, []byte(vendorid.String(mp, v)), []byte(vendorid.String(vcGoldenMarketplace, v)))
	}
	return body
}

func vcInsert(t *testing.T, s *system, rows []vcRow) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b, err := s.App.ClickHouse.PrepareBatch(ctx, `INSERT INTO charges_raw (marketplace_id, interaction_id, timestamp, timestamp_ms,
		day_local, kind, event_id, currency_code, campaign_id, product_id, vendor_id, external_vendor_id, global_id, charge_type,
		price_micros, amount_micros, amount_sub_micros, auction_id, rank, auction_at)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		ext := r.extVendor
		if ext == "" {
			ext = r.vendor
		}
		if err := b.Append(uuid.MustParse(r.mp), uuid.MustParse(vcID(r.name)), r.at.UTC().Truncate(time.Second), r.at.UnixMilli(),
			r.at.UTC(), "click", r.name, "USD", vcID("campaign-"+r.vendor), r.product, r.vendor, ext, r.globalID, "CPC",
			r.micros, r.micros, r.sub, uuid.New(), uint8(1), r.at.UTC().Truncate(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func vcTime(t *testing.T, s string) time.Time {
	t.Helper()
	x, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestVendorCharges reads charges inserted straight into charges_raw: the
// marketplace's day across a daylight-saving change, written in three
// offsets (same body, golden), edges at the millisecond (start in, end out),
// exact amounts against ClickHouse, replayed rows shown once, another
// marketplace's charges never shown, one window streamed whole and paged
// (no loss, no duplicate, same order), cursors that do not fit, and every
// 422 with its golden body.
func TestVendorCharges(t *testing.T) {
	s, _ := cpStart(t)
	key := s.AdvancedKey
	mp := s.Marketplace.ID // USD, America/New_York
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	other, err := s.App.Accounts.CreateMarketplace(ctx, "Other Market", "EUR", "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _, err := s.App.Accounts.CreateKey(ctx, other.ID, accounts.KeyAdvanced)
	if err != nil {
		t.Fatal(err)
	}

	// 8 March 2026 in New York: clocks go from 02:00 to 03:00, a 23-hour
	// day from 05:00Z to 04:00Z the next day.
	const dayStart, dayEnd = "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00"
	at := func(s string) time.Time { return vcTime(t, s) }
	day := []vcRow{
		{mp: mp, name: "before", at: at("2026-03-08T04:59:59.999Z"), micros: 1, vendor: "v-1", product: "p-1"},
		{mp: mp, name: "first", at: at("2026-03-08T05:00:00.000Z"), micros: 20_000, vendor: "v-1", product: "p-1", globalID: "G-1"},
		{mp: mp, name: "cpm", at: at("2026-03-08T06:59:59.999Z"), micros: 1234, sub: 567, vendor: "v-2", product: "p-2"},
		{mp: mp, name: "after-the-gap", at: at("2026-03-08T07:00:00.000Z"), micros: 0, sub: 1, vendor: "v-2", extVendor: "ext-2"},
		{mp: mp, name: "same-ms-b", at: at("2026-03-08T12:00:00.123Z"), micros: 999_999, sub: 999, vendor: "v-1", product: "p-1"},
		{mp: mp, name: "same-ms-a", at: at("2026-03-08T12:00:00.123Z"), micros: 123_456_789_012_345, sub: 999, vendor: "v-1", product: "p-3"},
		{mp: mp, name: "last", at: at("2026-03-09T03:59:59.999Z"), micros: 500_000, vendor: "v-3", product: "p-4"},
		{mp: mp, name: "end", at: at("2026-03-09T04:00:00.000Z"), micros: 7, vendor: "v-1", product: "p-1"},
		{mp: other.ID, name: "other-marketplace", at: at("2026-03-08T12:00:00.123Z"), micros: 10_000, vendor: "v-1", product: "p-1"},
	}
	vcInsert(t, s, day)
	vcInsert(t, s, day[1:3]) // replays of two rows: another part, folded by FINAL

	var bodies []string
	var first response
	for _, w := range [][2]string{
		{dayStart, dayEnd},
		{"2026-03-08T05:00:00Z", "2026-03-09T04:00:00.000Z"},
		{"2026-03-08T10:30:00+05:30", "2026-03-08T20:00:00-08:00"},
	} {
		b, r := vcGet(t, s, key, vcQuery(w[0], w[1]))
		if r.Header.Get("X-RateLimit-Limit") == "" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("headers %v", r.Header)
		}
		if b.HasMore || b.NextPage != nil || b.CurrencyCode != "USD" {
			t.Fatalf("body %s", r.Body)
		}
		if bodies = append(bodies, string(r.Body)); len(bodies) == 1 {
			first = r
		}
	}
	if bodies[0] != bodies[1] || bodies[0] != bodies[2] {
		t.Fatalf("the same window in other offsets differs:\n%s\n%s\n%s", bodies[0], bodies[1], bodies[2])
	}
	// vendorId is the vendor's UUID, externalVendorId its catalog id (the
	// charge's vendor, not the event's externalVendorId: "ext-2" is never
	// shown).
	b, _ := vcGet(t, s, key, vcQuery(dayStart, dayEnd))
	for _, c := range b.Data {
		if !strings.HasPrefix(c.ExternalVendorID, "v-") || c.VendorID != vendorid.String(mp, c.ExternalVendorID) {
			t.Fatalf("charge %s: vendorId %s, externalVendorId %s", c.InteractionID, c.VendorID, c.ExternalVendorID)
		}
	}
	first.Body = vcStableVendors(first.Body, mp, "v-1", "v-2", "v-3")
	golden(t, "vendorcharges_dst_day.json", first) // numbers as written: exact amounts

	// The amounts add up to what ClickHouse holds, to the 10⁻⁹ unit.
	sum := new(big.Rat)
	for _, c := range b.Data {
		sum.Add(sum, vcRat(t, c.Amount))
	}
	exact, n := vcExact(t, s, mp, at(dayStart).UnixMilli(), at(dayEnd).UnixMilli())
	if sum.Cmp(exact) != 0 || uint64(len(b.Data)) != n || n != 6 {
		t.Fatalf("API: %d charges, %s; ClickHouse: %d, %s", len(b.Data), sum.FloatString(9), n, exact.FloatString(9))
	}

	// Edges: a window of one millisecond holds the charges of that
	// millisecond; the end is excluded.
	b, _ = vcGet(t, s, key, vcQuery("2026-03-08T12:00:00.123Z", "2026-03-08T12:00:00.124Z"))
	if got := vcIDs(b.Data); !slices.Equal(got, []string{vcID("same-ms-a"), vcID("same-ms-b")}) && !slices.Equal(got, []string{vcID("same-ms-b"), vcID("same-ms-a")}) {
		t.Fatalf("one millisecond: %v", got)
	}
	b, _ = vcGet(t, s, key, vcQuery("2026-03-09T03:59:59.999Z", "2026-03-09T04:00:00Z"))
	if got := vcIDs(b.Data); !slices.Equal(got, []string{vcID("last")}) {
		t.Fatalf("last millisecond: %v", got)
	}

	// The other marketplace sees only its charge, in its currency.
	b, _ = vcGet(t, s, otherKey, vcQuery(dayStart, dayEnd))
	if b.CurrencyCode != "EUR" || !slices.Equal(vcIDs(b.Data), []string{vcID("other-marketplace")}) {
		t.Fatalf("other marketplace: %+v", b)
	}

	// Many charges, many on one millisecond: the stream and every page
	// size give the same list, sorted by timestamp then interaction id.
	var many []vcRow
	for i := 0; i < 600; i++ {
		ms := time.Duration(i%150) * 37 * time.Second // a few share a millisecond
		if i%5 == 0 {
			ms = 0
		}
		many = append(many, vcRow{mp: mp, name: fmt.Sprintf("many-%d", i), at: at("2026-03-10T00:00:00.250Z").Add(ms),
			micros: int64(i) * 1001, sub: uint16(i % 1000), vendor: fmt.Sprintf("v-%d", i%4), product: "p-1"})
		if i%3 == 0 {
			many = append(many, vcRow{mp: other.ID, name: fmt.Sprintf("many-other-%d", i), at: many[len(many)-1].at, micros: 1, vendor: "v-1"})
		}
	}
	vcInsert(t, s, many)
	const from, to = "2026-03-10T00:00:00+01:00", "2026-03-11T00:00:00+01:00"
	whole, _ := vcGet(t, s, key, vcQuery(from, to))
	if len(whole.Data) != 600 {
		t.Fatalf("%d charges, want 600", len(whole.Data))
	}
	sorted := slices.IsSortedFunc(whole.Data, func(a, b vcCharge) int {
		return strings.Compare(a.Timestamp+a.InteractionID, b.Timestamp+b.InteractionID)
	})
	if !sorted {
		t.Fatal("not sorted by timestamp, then interaction id")
	}
	for _, limit := range []int{1, 7, 599, 600, 10_000} {
		got := vcAll(t, s, key, from, to, limit)
		if !slices.Equal(vcIDs(got), vcIDs(whole.Data)) {
			t.Fatalf("pages of %d: %d charges, not the stream's %d in its order", limit, len(got), len(whole.Data))
		}
	}
	sum = new(big.Rat)
	for _, c := range whole.Data {
		sum.Add(sum, vcRat(t, c.Amount))
	}
	if exact, _ := vcExact(t, s, mp, at(from).UnixMilli(), at(to).UnixMilli()); sum.Cmp(exact) != 0 {
		t.Fatalf("sum %s, ClickHouse %s", sum.FloatString(9), exact.FloatString(9))
	}

	// A cursor continues only its own list: same marketplace, same window.
	b, _ = vcGet(t, s, key, vcQuery(from, to, "limit", "5"))
	cursor := *b.NextPage
	for name, r := range map[string]response{
		"vendorcharges_422_cursor_other_window.json": s.request(t, "GET", vcQuery(from, "2026-03-10T22:00:00Z", "next_page", cursor), key, nil, nil),
		"vendorcharges_422_cursor_forged.json":       s.request(t, "GET", vcQuery(from, to, "next_page", cursor[:len(cursor)-2]+"AA"), key, nil, nil),
	} {
		expect422Typed(t, r, "query.next_page:value_error")
		r.Path = vcCursorParam.ReplaceAllString(r.Path, "next_page=CURSOR") // it names the marketplace of the run
		golden(t, name, r)
	}
	expect422Typed(t, s.request(t, "GET", vcQuery(from, to, "next_page", cursor), otherKey, nil, nil), "query.next_page:value_error")
	// The same window written in other offsets keeps its cursors.
	b, _ = vcGet(t, s, key, vcQuery("2026-03-09T23:00:00Z", "2026-03-10T18:00:00-05:00", "next_page", cursor))
	if b.HasMore || !slices.Equal(vcIDs(b.Data), vcIDs(whole.Data[5:])) {
		t.Fatalf("the cursor in other offsets: %d charges (hasMore %v), want the stream's last %d", len(b.Data), b.HasMore, len(whole.Data)-5)
	}

	// Rejections.
	for _, tc := range []struct {
		golden, query string
		want          []string
	}{
		{"vendorcharges_422_missing.json", vcPath, []string{"query.start_date:missing", "query.end_date:missing"}},
		{"vendorcharges_422_naive.json", vcQuery("2026-03-08T00:00:00", "2026-03-09"), []string{"query.start_date:timezone_aware", "query.end_date:timezone_aware"}},
		{"vendorcharges_422_not_a_date.json", vcQuery("last week", "1741392000"), []string{"query.start_date:datetime_parsing", "query.end_date:datetime_parsing"}},
		{"vendorcharges_422_end_before_start.json", vcQuery(dayEnd, dayStart), []string{"query.end_date:value_error"}},
		{"vendorcharges_422_empty_window.json", vcQuery("2026-03-08T01:00:00+01:00", "2026-03-08T00:00:00Z"), []string{"query.end_date:value_error"}},
		{"vendorcharges_422_too_wide.json", vcQuery("2026-01-01T00:00:00Z", "2026-02-02T00:00:00.001Z"), []string{"query.end_date:value_error"}},
		{"vendorcharges_422_limit.json", vcQuery(dayStart, dayEnd, "limit", "0"), []string{"query.limit:greater_than_equal"}},
		{"vendorcharges_422_limit_type.json", vcQuery(dayStart, dayEnd, "limit", "all"), []string{"query.limit:int_parsing"}},
		{"vendorcharges_422_all_wrong.json", vcPath + "?start_date=2026-03-08&limit=10001", []string{"query.start_date:timezone_aware", "query.end_date:missing", "query.limit:less_than_equal"}},
	} {
		r := s.request(t, "GET", tc.query, key, nil, nil)
		expect422Typed(t, r, tc.want...)
		golden(t, tc.golden, r)
	}
	// 32 days is the widest window: a calendar month with its DST hour fits.
	vcGet(t, s, key, vcQuery("2026-10-01T00:00:00+02:00", "2026-11-01T00:00:00+01:00"))
	vcGet(t, s, key, vcQuery("2026-01-01T00:00:00Z", "2026-02-02T00:00:00Z"))
	// An unencoded "+" arrives as a space and is read as "+".
	r := s.request(t, "GET", vcPath+"?start_date=2026-03-08T06:00:00+01:00&end_date=2026-03-09T05:00:00+01:00", key, nil, nil)
	cpStatus(t, r, 200)
	if r.Body == nil || string(r.Body) != bodies[0] {
		t.Fatalf("unencoded +: %s", r.Body)
	}
	// A marketplace key is the wrong key.
	r = s.request(t, "GET", vcQuery(dayStart, dayEnd), s.MarketplaceKey, nil, nil)
	cpStatus(t, r, 403)
}

func vcIDs(cs []vcCharge) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.InteractionID
	}
	return out
}

// TestVendorChargesThroughThePipeline charges through the real path:
// catalog and campaigns over the management API, auctions over
// /v2/auctions, the winners' clicks (CPC) and impressions (CPM) over
// /v2/events, the interactions projector writing `charges`. The endpoint
// then shows each charge with the ids of its event, winner and vendor, a
// product id that only the auction record has (the token carried it
// hashed), and amounts equal to ClickHouse's to the 10⁻⁹ unit: 0.02 a
// click, 1.234567 / 1,000 an impression.
func TestVendorChargesThroughThePipeline(t *testing.T) {
	s, _ := cpStart(t)
	key, mp := s.AdvancedKey, s.Marketplace.ID
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := s.App.Accounts.SetReserve(ctx, mp, 20_000, 1_234_567); err != nil {
		t.Fatal(err)
	}
	longID := "sku-" + strings.Repeat("0123456789", 15) // too long for the token: carried hashed
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
		`{"vendors":[{"id":"v1","name":"Vendor One","globalId":"G-1"},{"id":"v2","name":"Vendor Two"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, fmt.Sprintf(`{"products":[
		{"id":"p1","name":"P1","vendors":["v1"],"active":true},{"id":%q,"name":"Long","vendors":["v2"],"active":true}]}`, longID), nil), 200)
	cpc := auCampaign(t, s, "v1", `{"name":"Clicks","type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, cpc, "product", "p1", "0.03")
	cpm := auCampaign(t, s, "v2", `{"name":"Views","type":"listings","chargeType":"CPM","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, cpm, "product", longID, "2")

	// Three auctions for each product: a lone bidder pays the reserve.
	type want struct {
		kind              records.Kind
		event, campaign   string
		product, vendor   string
		globalID, amount  string
		priceMicros       int64
		hashedWinnerToken bool
	}
	var wants []want
	var events struct {
		Clicks      []map[string]string `json:"clicks"`
		Impressions []map[string]string `json:"impressions"`
	}
	occurred := time.Now().UTC().Truncate(time.Millisecond)
	for i := 0; i < 3; i++ {
		for _, p := range []string{"p1", longID} {
			res := auRun(t, s, "/v2/auctions", fmt.Sprintf(`{"auctions":[{"type":"listings","slots":1,"products":{"ids":[%q]}}]}`, p))
			if len(res) != 1 || len(res[0].Winners) != 1 {
				t.Fatalf("auction for %s: %+v", p, res)
			}
			w := res[0].Winners[0]
			c, err := bidtoken.DecodeUnverified(w.ResolvedBidID)
			if err != nil {
				t.Fatal(err)
			}
			ev := map[string]string{"id": fmt.Sprintf("ev-%s-%d", p[:2], i), "occurredAt": occurred.Format(time.RFC3339Nano),
				"opaqueUserId": "u-1", "resolvedBidId": w.ResolvedBidID}
			if p == "p1" {
				events.Clicks = append(events.Clicks, ev)
				wants = append(wants, want{records.KindClick, ev["id"], cpc, "p1", "v1", "G-1", "0.02", c.PriceMicros, c.WinnerIDHashed})
			} else {
				events.Impressions = append(events.Impressions, ev)
				wants = append(wants, want{records.KindImpression, ev["id"], cpm, longID, "v2", "", "0.001234567", c.PriceMicros, c.WinnerIDHashed})
			}
		}
	}
	for _, w := range wants {
		if w.product == longID && (!w.hashedWinnerToken || w.priceMicros != 1_234_567) {
			t.Fatalf("the CPM winner's token: hashed %v, price %d; the test needs a hashed product and the reserve", w.hashedWinnerToken, w.priceMicros)
		}
		if w.product == "p1" && (w.hashedWinnerToken || w.priceMicros != 20_000) {
			t.Fatalf("the CPC winner's token: hashed %v, price %d", w.hashedWinnerToken, w.priceMicros)
		}
	}
	body, _ := json.Marshal(events)
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, body, nil), 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM charges WHERE marketplace_id = ?", mp); n != 6 {
			return fmt.Errorf("%d charges, want 6", n)
		}
		if n := s.count(t, "SELECT count() FROM auction_winners WHERE marketplace_id = ?", mp); n != 6 {
			return fmt.Errorf("%d auction winners, want 6", n)
		}
		return nil
	})

	loc := s.Marketplace.Location()
	start := occurred.Add(-time.Hour).In(loc).Format(time.RFC3339)
	end := occurred.Add(time.Hour).In(loc).Format(time.RFC3339)
	b, _ := vcGet(t, s, key, vcQuery(start, end))
	if b.CurrencyCode != "USD" || len(b.Data) != 6 {
		t.Fatalf("body %+v", b)
	}
	byID := map[string]vcCharge{}
	for _, c := range b.Data {
		byID[c.InteractionID] = c
	}
	for _, w := range wants {
		id := projections.InteractionID(mp, w.kind, w.event).String()
		c, ok := byID[id]
		if !ok {
			t.Fatalf("no charge for %s (%s)", w.event, id)
		}
		gid := ""
		if c.GlobalID != nil {
			gid = *c.GlobalID
		}
		if c.ProductID == nil || *c.ProductID != w.product || c.VendorID != vendorid.String(mp, w.vendor) || c.ExternalVendorID != w.vendor ||
			c.CampaignID != w.campaign || gid != w.globalID || string(c.Amount) != w.amount || c.Timestamp != ts(occurred) {
			t.Fatalf("charge of %s: %+v (amount %s), want %+v", w.event, c, c.Amount, w)
		}
		row := s.query(t, "SELECT amount_micros, amount_sub_micros FROM charges WHERE marketplace_id = ? AND interaction_id = ?", mp, id)
		if len(row) != 1 || vcRat(t, c.Amount).Cmp(new(big.Rat).SetFrac64(vcInt(t, row[0][0])*1000+vcInt(t, row[0][1]), 1e9)) != 0 {
			t.Fatalf("charge of %s: amount %s, ClickHouse %v", w.event, c.Amount, row)
		}
	}
	sum := new(big.Rat)
	for _, c := range b.Data {
		sum.Add(sum, vcRat(t, c.Amount))
	}
	exact, _ := vcExact(t, s, mp, vcTime(t, start).UnixMilli(), vcTime(t, end).UnixMilli())
	if sum.Cmp(exact) != 0 || sum.FloatString(9) != "0.063703701" {
		t.Fatalf("sum %s, ClickHouse %s, want 3 × 0.02 + 3 × 0.001234567", sum.FloatString(9), exact.FloatString(9))
	}
}

func vcInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
