package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/segments"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/testkit/testenv"
)

// Helpers of the auction-explain tests (ex*).

type exCandidate struct {
	ProductID  *string  `json:"productId"`
	CampaignID string   `json:"campaignId"`
	VendorID   string   `json:"vendorId"`
	BidID      *string  `json:"bidId"`
	BidTarget  string   `json:"bidTarget"`
	ChargeType string   `json:"chargeType"`
	Bid        float64  `json:"bid"`
	Quality    *float64 `json:"quality"`
	Score      *string  `json:"score"`
	Outcome    string   `json:"outcome"`
	Reason     *string  `json:"reason"`
	Position   *int     `json:"position"`
	Rank       *int     `json:"rank"`
	Price      *float64 `json:"price"`
}

type exResult struct {
	ResultType       string        `json:"resultType"`
	Slots            int           `json:"slots"`
	Candidates       []exCandidate `json:"candidates"`
	ExcludedProducts []struct {
		ProductID string `json:"productId"`
		Reason    string `json:"reason"`
	} `json:"excludedProducts"`
	Error bool `json:"error"`
}

// exStart starts a system with a marketplace of its own, in a time zone
// where it is now between 01:00 and 21:00, so that a campaign can be ahead
// of its pacing curve without having spent its daily budget.
func exStart(t *testing.T) *system {
	t.Helper()
	s, _ := cpStart(t)
	tz := ""
	for _, z := range []string{"America/New_York", "Europe/Paris", "Asia/Tokyo", "Pacific/Honolulu"} {
		loc, err := time.LoadLocation(z)
		if err != nil {
			t.Fatal(err)
		}
		if h := time.Now().In(loc).Hour(); h >= 1 && h < 21 {
			tz = z
			break
		}
	}
	return ownMarketplace(t, s, "Explain Market", tz)
}

// ownMarketplace returns s with a marketplace of its own, in time zone tz,
// and that marketplace's keys.
func ownMarketplace(t *testing.T, s *system, name, tz string) *system {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := s.App.Accounts.CreateMarketplace(ctx, name, "USD", tz)
	if err != nil {
		t.Fatal(err)
	}
	own := *s
	own.Marketplace = m
	if own.MarketplaceKey, _, err = s.App.Accounts.CreateKey(ctx, m.ID, accounts.KeyMarketplace); err != nil {
		t.Fatal(err)
	}
	if own.AdvancedKey, _, err = s.App.Accounts.CreateKey(ctx, m.ID, accounts.KeyAdvanced); err != nil {
		t.Fatal(err)
	}
	return &own
}

// exExplain posts a /v2/auctions body to the explain endpoint and returns
// the answer and its results.
func exExplain(t *testing.T, s *system, body string) (response, []exResult) {
	t.Helper()
	r := s.request(t, "POST", "/v2/auctions/explain", s.AdvancedKey, []byte(body), nil)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("explain: status %d (%s): %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if bytes.Contains(r.Body, []byte("resolvedBidId")) {
		t.Fatalf("explain signed something: %s", r.Body)
	}
	var out struct {
		Results []exResult `json:"results"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("explain: %v: %s", err, r.Body)
	}
	return r, out.Results
}

// exLines is each candidate as "name@product outcome[/reason][ #rank price]".
func exLines(res exResult, names map[string]string) []string {
	out := make([]string, len(res.Candidates))
	for i, c := range res.Candidates {
		p := ""
		if c.ProductID != nil {
			p = *c.ProductID
		}
		s := names[c.CampaignID] + "@" + p + " " + c.Outcome
		if c.Reason != nil {
			s += "/" + *c.Reason
		}
		if c.Rank != nil && c.Price != nil {
			s += fmt.Sprintf(" #%d %v", *c.Rank, *c.Price)
		}
		out[i] = s
	}
	return out
}

// exHas fails unless one of the lines starts with want.
func exHas(t *testing.T, what string, lines []string, want ...string) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, w) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: no %q in\n%s", what, w, strings.Join(lines, "\n"))
		}
	}
}

// exGolden writes the explain exchange r as the golden file
// explain/name.response.json, normalised as the wire golden files are
// (wireNorm: stand-in UUIDs numbered in order of appearance).
func exGolden(t *testing.T, name string, r response) {
	t.Helper()
	n := &wireNorm{ids: map[string]string{}, now: time.Now()}
	r.Body = n.apply(r.Body)
	golden(t, filepath.Join("explain", name+".response.json"), r)
}

// explainRequest is the body of a golden request (testdata/explain/name.request.json),
// which the OpenAPI check validates beside its response.
func explainRequest(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "explain", name+".request.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAuctionExplain: POST /v2/auctions/explain reproduces the worked example
// of docs/design/auction-ranking.md (golden files for the wire shape) and gives each
// filter reason the engine has on a case of its own; it records, charges and
// signs nothing; its bodies are validated as /v2/auctions validates them; and
// the bids' isEligible tells the same story.
func TestAuctionExplain(t *testing.T) {
	s := exStart(t)
	key := s.AdvancedKey
	ctx := context.Background()
	if _, err := s.App.Accounts.SetReserve(ctx, s.Marketplace.ID, 100_000, 1_000_000); err != nil {
		t.Fatal(err)
	}
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
		`{"vendors":[{"id":"v1","name":"V1"},{"id":"v2","name":"V2"},{"id":"v3","name":"V3"},{"id":"v4","name":"V4"},{"id":"v5","name":"V5"},
		{"id":"va","name":"VA"},{"id":"vb","name":"VB"},{"id":"vc","name":"VC"},{"id":"vd","name":"VD"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/categories", key,
		`{"categories":[{"id":"shoes","name":"Shoes"},{"id":"running","name":"Running","parentId":"shoes"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[
		{"id":"P1","name":"P1","vendors":["v1","v3"],"active":true,"quality_score":0.5},
		{"id":"P2","name":"P2","vendors":["v2"],"active":true,"quality_score":0.9},
		{"id":"P3","name":"P3","vendors":["v4"],"active":true},
		{"id":"P4","name":"P4","vendors":["v5"],"active":true},
		{"id":"a1","name":"A1","vendors":["va"],"categories":["running"],"active":true,"imageURL":"https://img.example/a1.png","quality_score":0.9,"metadata":{"color":"red"}},
		{"id":"a2","name":"A2","vendors":["va"],"categories":["shoes"],"active":true,"quality_score":0.5},
		{"id":"off","name":"Off","vendors":["va"],"active":true},
		{"id":"gone","name":"Gone","vendors":["va"],"active":true},
		{"id":"lone","name":"Lone","vendors":[],"active":true},
		{"id":"b1","name":"B1","vendors":["vb"],"active":true},
		{"id":"c2","name":"C2","vendors":["vc"],"active":true},
		{"id":"d1","name":"D1","vendors":["vd"],"active":false}]}`, nil), 200)

	names := map[string]string{} // campaign id -> name
	ids := map[string]string{}   // campaign and bid ids -> "campaign-name", "bid-name-target"
	camp := func(name, vendor, body string, bids ...string) string {
		t.Helper()
		id := auCampaign(t, s, vendor, body)
		names[id], ids[id] = name, "campaign-"+name
		for _, b := range bids { // "type:target:amount", "!…" inactive
			active := !strings.HasPrefix(b, "!")
			parts := strings.Split(strings.TrimPrefix(b, "!"), ":")
			r := cpDo(t, s, "POST", cpBids(id), key, fmt.Sprintf(`{"targetType":%q,"target":%q,"bidAmount":%s,"isActive":%v}`, parts[0], parts[1], parts[2], active), nil)
			cpStatus(t, r, 201)
			ids[cpID(t, r)] = "bid-" + name + "-" + parts[1]
		}
		return id
	}
	listings := func(extra string) string {
		return `{"name":"x","type":"listings","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"` + extra + `}`
	}
	// The worked example.
	camp("c1", "v1", listings(""), "product:P1:1.00")
	camp("c2", "v2", listings(""), "product:P2:0.80")
	camp("c3", "v3", listings(""), "product:P1:0.60")
	camp("c4", "v4", listings(`,"chargeType":"CPM"`), "product:P3:5.00")
	c5 := camp("c5", "v5", listings(""), "product:P4:0.05")
	// A campaign per reason.
	camp("ca", "va", listings(""), "product:a1:1", "category:shoes:0.3")
	camp("inactivebid", "va", listings(""), "!product:a1:2")
	paused := camp("paused", "va", listings(""), "product:a1:2")
	cpStatus(t, cpDo(t, s, "PATCH", cpCampaign(paused), key, `{"isActive":false}`, nil), 200)
	camp("scheduled", "va", `{"name":"x","type":"listings","dailyBudget":100,"startDate":"2099-01-01T00:00:00Z"}`, "product:a1:2")
	camp("ended", "va", listings(`,"endDate":"2021-01-01T00:00:00Z"`), "product:a1:2")
	camp("onoff", "va", listings(""), "product:off:2")
	camp("ongone", "va", listings(""), "product:gone:2")
	vendorgone := camp("vendorgone", "vc", listings(""), "product:c2:2")
	camp("placement", "vb", listings(`,"targeting":{"placementIds":[2]}`), "product:b1:2")
	camp("geo", "vb", listings(`,"targeting":{"locations":["85283473fffffff"]}`), "product:b1:2")
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/segment-service/segments/vip", key, `{"name":"VIP","config":{"type":"user-list"}}`, nil), 201)
	camp("seg", "vb", listings(`,"targeting":{"segments":["vip"]}`), "product:b1:2")
	total := camp("total", "vb", `{"name":"x","type":"listings","dailyBudget":40,"totalBudget":50,"startDate":"2020-01-01T00:00:00Z"}`, "product:b1:4")
	daily := camp("daily", "vb", `{"name":"x","type":"listings","dailyBudget":10,"startDate":"2020-01-01T00:00:00Z"}`, "product:b1:4")
	paced := camp("paced", "vb", `{"name":"x","type":"listings","dailyBudget":10,"startDate":"2020-01-01T00:00:00Z"}`, "product:b1:4")
	banners := func(extra string) string {
		return `{"name":"x","type":"banners","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"` + extra + `}`
	}
	camp("ban", "va", banners(""), "product:a2:1", "product:a1:0.5")
	camp("mobile", "va", banners(`,"targeting":{"devices":["mobile"]}`), "product:a1:0.9")
	camp("kw", "vd", banners(""), "keyword:boots:0.5")

	// The catalog changes under the bids: off deactivated, gone deleted,
	// c2 moved to another vendor.
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[
		{"id":"off","name":"Off","vendors":["va"],"active":false},
		{"id":"c2","name":"C2","vendors":["vb"],"active":true}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "DELETE", "/public/v1/catalog-search-service/catalogs/products", key, `{"ids":["gone"]}`, nil), 200)
	// Spend: total spent yesterday; daily spent today; paced ahead of its
	// curve (what it may have spent an hour from now), below its budget.
	loc := s.Marketplace.Location()
	now := time.Now()
	allowed := spend.Allowed(10_000_000, now.Add(time.Hour), loc)
	if allowed >= 10_000_000 {
		t.Fatalf("the pacing curve allows the whole budget at %v in %v", now, loc)
	}
	for _, sp := range []struct {
		campaign string
		day      time.Time
		micros   int64
	}{{total, now.Add(-24 * time.Hour), 50_000_000}, {daily, now, 10_000_000}, {paced, now, allowed}} {
		if err := spend.AddSpend(ctx, s.App.Redis, s.Marketplace.ID, sp.campaign, spend.DayOf(sp.day, loc), sp.micros); err != nil {
			t.Fatal(err)
		}
	}
	// The cache holds a campaign's spend from the first auction that asks
	// for it on (or from the process's start): these were created since.
	s.App.Spend.Register(s.Marketplace.ID, loc, total, daily, paced)
	if err := s.App.Spend.RefreshNow(ctx); err != nil {
		t.Fatal(err)
	}

	// 1. The worked example, with 3 and with 2 slots: golden files.
	example := explainRequest(t, "worked_example")
	raw, res := exExplain(t, s, example)
	exGolden(t, "worked_example", raw)
	auSame(t, "3 slots", exLines(res[0], names), "c2@P2 won #1 0.555556", "c4@P3 won #2 5", "c1@P1 won #3 0.6",
		"c3@P1 lost/product_won_higher", "c5@P4 lost/below_reserve")
	auSame(t, "2 slots", exLines(res[1], names), "c2@P2 won #1 0.555556", "c4@P3 won #2 5", "c1@P1 lost/outranked",
		"c3@P1 lost/outranked", "c5@P4 lost/below_reserve")
	if c := res[0].Candidates[0]; *c.Score != "7200000000000" || *c.Quality != 0.9 || c.ChargeType != "CPC" || c.Bid != 0.8 || *c.Position != 1 || c.VendorID != "v2" || c.BidTarget != "product" {
		t.Errorf("c2's candidate %+v", c)
	}

	// 2. A filter reason per case, in one listings auction.
	raw, res = exExplain(t, s, explainRequest(t, "reasons"))
	exGolden(t, "reasons", raw)
	lines := exLines(res[0], names)
	exHas(t, "listings", lines,
		"ca@a1 won #1", "ca@a1 filtered/superseded", "ca@a2 won",
		"inactivebid@a1 filtered/bid_inactive", "paused@a1 filtered/campaign_paused", "scheduled@a1 filtered/campaign_scheduled",
		"ended@a1 filtered/campaign_ended", "onoff@off filtered/product_inactive", "ongone@gone filtered/product_not_found",
		"vendorgone@c2 filtered/vendor_not_permitted", "placement@b1 filtered/targeting_placement",
		"geo@b1 filtered/targeting_location", "seg@b1 filtered/targeting_segment", "total@b1 filtered/total_budget_exhausted",
		"daily@b1 filtered/daily_budget_exhausted", "paced@b1 filtered/paced", "ban@a2 filtered/campaign_type")
	if got := fmt.Sprint(res[0].ExcludedProducts); got != "[{off product_inactive} {gone product_not_found} {lone product_without_vendors}]" {
		t.Errorf("excluded products %s", got)
	}
	// Targeting met: placement, location, segment.
	if _, err := s.App.Segments.Upload(ctx, s.Marketplace.ID, "vip", segments.ActionAdd, strings.NewReader("user-1\n"), 0); err != nil {
		t.Fatal(err)
	}
	_, res = exExplain(t, s, `{"auctions":[
		{"type":"listings","slots":1,"products":{"ids":["b1"]},"placementId":2},
		{"type":"listings","slots":1,"products":{"ids":["b1"]},"geoTargeting":{"locations":["89283470003ffff"]}},
		{"type":"listings","slots":1,"products":{"ids":["b1"]},"opaqueUserId":"user-1"},
		{"type":"listings","slots":1,"products":{"ids":["b1"]},"opaqueUserId":"user-2"}]}`)
	exHas(t, "placement 2", exLines(res[0], names), "placement@b1 won #1")
	exHas(t, "location inside", exLines(res[1], names), "geo@b1 won #1")
	exHas(t, "segment member", exLines(res[2], names), "seg@b1 won #1")
	exHas(t, "not a member", exLines(res[3], names), "seg@b1 filtered/targeting_segment")
	// Category, filter; banners: device, image, keyword-only.
	_, res = exExplain(t, s, `{"auctions":[
		{"type":"listings","slots":5,"products":{"ids":["a1","b1"]},"category":{"id":"shoes"}},
		{"type":"listings","slots":5,"products":{"ids":["a1","a2"]},"filter":{"attributes":["color:red"]}},
		{"type":"banners","slots":5,"slotId":"top","products":{"ids":["a1","a2"]}},
		{"type":"banners","slots":5,"slotId":"top","searchQuery":"new boots"}]}`)
	exHas(t, "category", exLines(res[0], names), "placement@b1 filtered/not_in_category", "ca@a1 won #1")
	exHas(t, "filter", exLines(res[1], names), "ca@a2 filtered/filter_mismatch", "ca@a1 won #1")
	exHas(t, "banners", exLines(res[2], names), "mobile@a1 filtered/targeting_device", "ban@a2 filtered/product_without_image",
		"ban@a1 won #1", "ca@a1 filtered/campaign_type")
	exHas(t, "keyword-only", exLines(res[3], names), "kw@ filtered/no_active_product")
	if res[2].ResultType != "banners" || res[3].Candidates[0].ProductID != nil {
		t.Errorf("banners explanations %+v", res[2:])
	}

	// 3. The bids tell the same: c5's bid is below the reserve, the bids
	// on off, gone and c2 not eligible, with their reasons.
	for _, want := range []struct{ campaign, reason, message string }{
		{c5, "below_reserve", "the bid 0.05 is below the marketplace's CPC reserve price 0.1"},
		{vendorgone, "vendor_not_permitted", "vendor vc is not among the vendors of product c2"},
	} {
		r := cpDo(t, s, "GET", cpBids(want.campaign), key, nil, nil)
		cpStatus(t, r, 200)
		var list struct {
			Bids []map[string]any `json:"bids"`
		}
		if err := json.Unmarshal(r.Body, &list); err != nil || len(list.Bids) != 1 {
			t.Fatalf("bids: %s", r.Body)
		}
		if b := list.Bids[0]; b["isEligible"] != false || b["ineligibleReason"] != want.reason || b["ineligibleMessage"] != want.message {
			t.Errorf("bid of %s: %v", names[want.campaign], b)
		}
	}

	// 4. /v2/auctions agrees on the winners and prices of the example.
	res2 := auRun(t, s, "/v2/auctions", example)
	kr := s.App.BidKeys.Load()
	for i := range res2 {
		var got, want []string
		for _, w := range res2[i].Winners {
			c, err := kr.Decode(w.ResolvedBidID, [16]byte(uuid.MustParse(s.Marketplace.ID)))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s@%s #%d %d", names[w.CampaignID], w.ID, w.Rank, c.PriceMicros))
		}
		_, ex := exExplain(t, s, example)
		for _, c := range ex[i].Candidates {
			if c.Outcome == "won" {
				want = append(want, fmt.Sprintf("%s@%s #%d %d", names[c.CampaignID], *c.ProductID, *c.Rank, int64(*c.Price*1e6+0.5)))
			}
		}
		auSame(t, fmt.Sprintf("auction %d: run vs explain", i), got, want...)
	}

	// 5. Nothing recorded or charged: the two auctions of step 4 reach
	// ClickHouse, the explanations (about a dozen auctions) none.
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM auctions WHERE toString(marketplace_id) = ?", s.Marketplace.ID); n != 2 {
			return fmt.Errorf("%d auctions in ClickHouse, want 2", n)
		}
		return nil
	})
	time.Sleep(time.Second)
	if n := s.count(t, "SELECT count() FROM auctions WHERE toString(marketplace_id) = ?", s.Marketplace.ID); n != 2 {
		t.Errorf("%d auctions in ClickHouse, want 2", n)
	}
	if n := s.count(t, "SELECT count() FROM charges"); n != 0 {
		t.Errorf("%d charges", n)
	}
	for _, c := range []string{paced, daily} {
		day, _ := s.App.Spend.Spend(s.Marketplace.ID, loc, c, time.Now())
		if c == paced && day != allowed || c == daily && day != 10_000_000 {
			t.Errorf("spend of %s changed: %d", names[c], day)
		}
	}

	// 6. Validation: every error of POST /v2/auctions, the same on explain.
	// (The advanced key, which explain takes; a missing or unknown key is
	// refused as on /v2/auctions.)
	keys := map[string]string{"missing_key": "", "unknown_key": "ecm_0000000000000000000000000000000000000000"}
	n := 0
	for _, c := range auctionCases {
		if c.ep != "auctions" || c.code() == "success" || c.method != "" || c.path != "" || c.name == "invalid_api_key--advanced_key" {
			continue
		}
		req, err := os.ReadFile(filepath.Join("testdata", c.file(".request.json")))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("testdata", c.file(".response.json")))
		if err != nil {
			t.Fatal(err)
		}
		k := s.AdvancedKey
		if c.code() == "invalid_api_key" {
			_, variant, _ := strings.Cut(c.name, "--")
			k = keys[variant]
		}
		r := s.request(t, "POST", "/v2/auctions/explain", k, expandAuctionBody(req), nil)
		var w struct {
			Status int             `json:"status"`
			Body   json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if r.Status != w.Status {
			t.Errorf("%s: status %d, want %d: %s", c.name, r.Status, w.Status, r.Body)
			continue
		}
		sameJSON(t, r.Body, string(w.Body))
		n++
	}
	if n < 30 {
		t.Fatalf("only %d error cases replayed", n)
	}
	if r := s.request(t, "GET", "/v2/auctions/explain", s.AdvancedKey, nil, nil); r.Status != 405 {
		t.Errorf("GET: %d %s", r.Status, r.Body)
	}
}

// TestAuctionExplainAccess: explain lists every advertiser's bids, so the
// marketplace key (the one a storefront ships to browsers) is refused with
// 403 in the authentication shape; no answer carries CORS headers and a
// preflight is not granted; the advanced key is rate-limited (its own
// class, 429 with Retry-After in the /v2 shape); a request whose auctions
// have more candidates than ENDCAP_EXPLAIN_MAX_CANDIDATES is 422
// too_many_candidates, and one at the limit is explained.
func TestAuctionExplainAccess(t *testing.T) {
	s, _ := cpStartWith(t, func(c *config.Config) {
		c.RateLimitExplain = "3/1m"
		c.ExplainMaxCandidates = 4
	})
	key := s.AdvancedKey
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
		`{"vendors":[{"id":"v1","name":"V1"},{"id":"v2","name":"V2"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[
		{"id":"P1","name":"P1","vendors":["v1","v2"],"active":true},{"id":"P2","name":"P2","vendors":["v1","v2"],"active":true}]}`, nil), 200)
	listings := `{"name":"x","type":"listings","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`
	for _, v := range []string{"v1", "v2"} {
		c := auCampaign(t, s, v, listings)
		auBid(t, s, c, "product", "P1", "1")
		auBid(t, s, c, "product", "P2", "1")
	}
	atLimit := `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["P1"]}},{"type":"listings","slots":2,"products":{"ids":["P2"]}}]}`
	over := `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["P1"]}},{"type":"listings","slots":2,"products":{"ids":["P1","P2"]}}]}`
	one := `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["P1"]}}]}`
	origin := map[string]string{"Origin": "https://shop.example"}
	noCORS := func(what string, r response) {
		t.Helper()
		for h := range r.Header {
			if strings.HasPrefix(h, "Access-Control-") {
				t.Errorf("%s: CORS header %s: %s", what, h, r.Header.Get(h))
			}
		}
	}

	// The marketplace key: 403 in the documented shape, before anything
	// is read or limited.
	r := s.request(t, "POST", "/v2/auctions/explain", s.MarketplaceKey, []byte(one), origin)
	var authErr struct{ Error, ErrCode, DocURL, Message string }
	if err := json.Unmarshal(r.Body, &authErr); err != nil || r.Status != 403 || authErr.ErrCode != "wrong_key_type" || authErr.Error != "wrong_key_type" ||
		authErr.DocURL == "" || authErr.Message == "" || r.Header.Get("X-RateLimit-Limit") != "" {
		t.Errorf("marketplace key: %d %v %s", r.Status, r.Header, r.Body)
	}
	noCORS("marketplace key", r)
	// A browser's preflight from another origin is not granted.
	r = s.request(t, "OPTIONS", "/v2/auctions/explain", "", nil, map[string]string{"Origin": "https://shop.example",
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"})
	if r.Status/100 == 2 {
		t.Errorf("preflight granted: %d %v", r.Status, r.Header)
	}
	noCORS("preflight", r)
	// /v2/auctions keeps its CORS.
	if r := s.request(t, "OPTIONS", "/v2/auctions", "", nil, origin); r.Status != 204 || r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("/v2/auctions preflight: %d %v", r.Status, r.Header)
	}

	// The advanced key: at the limit (two auctions, two campaigns on
	// each product: 4 candidates), over it (6), then rate-limited.
	r = s.request(t, "POST", "/v2/auctions/explain", key, []byte(atLimit), origin)
	var ok struct {
		Results []exResult `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &ok); err != nil || r.Status != 200 || r.Header.Get("X-RateLimit-Limit") != "3" ||
		len(ok.Results) != 2 || len(ok.Results[0].Candidates)+len(ok.Results[1].Candidates) != 4 {
		t.Fatalf("advanced key: %d %v %s", r.Status, r.Header, r.Body)
	}
	noCORS("advanced key", r)
	var v2 struct{ ErrCode, DocURL, Message string }
	r = s.request(t, "POST", "/v2/auctions/explain", key, []byte(over), nil)
	if err := json.Unmarshal(r.Body, &v2); err != nil || r.Status != 422 || v2.ErrCode != "too_many_candidates" || v2.DocURL == "" ||
		!strings.Contains(v2.Message, "more than 4 candidates") || !strings.Contains(v2.Message, "auctions[1]") {
		t.Errorf("over the candidate limit: %d %s", r.Status, r.Body)
	}
	if r := s.request(t, "POST", "/v2/auctions/explain", key, []byte(one), nil); r.Status != 200 {
		t.Errorf("one product: %d %s", r.Status, r.Body)
	}
	r = s.request(t, "POST", "/v2/auctions/explain", key, []byte(one), nil)
	if err := json.Unmarshal(r.Body, &v2); err != nil || r.Status != 429 || v2.ErrCode != "too_many_requests" || r.Header.Get("Retry-After") == "" {
		t.Errorf("past the rate limit: %d %v %s", r.Status, r.Header, r.Body)
	}
}
