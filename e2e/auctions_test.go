package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/management/segments"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/testkit/testenv"
)

// Helpers of the auction tests (au*).

type auWinner struct {
	Rank          int      `json:"rank"`
	Type          string   `json:"type"`
	ID            string   `json:"id"`
	ResolvedBidID string   `json:"resolvedBidId"`
	CampaignID    string   `json:"campaignId"`
	VariationID   string   `json:"variationID"`
	VendorID      string   `json:"vendorId"`
	ProductIDs    []string `json:"productIds"`
	Asset         []struct {
		URL string `json:"url"`
	} `json:"asset"`
}

type auResult struct {
	ResultType string     `json:"resultType"`
	Winners    []auWinner `json:"winners"`
	Error      bool       `json:"error"`
}

// auRun posts one request body to an auction endpoint and returns its results.
func auRun(t *testing.T, s *system, path, body string) []auResult {
	t.Helper()
	r := s.request(t, "POST", path, s.MarketplaceKey, []byte(body), nil)
	if r.Status != 201 {
		t.Fatalf("%s: status %d: %s", path, r.Status, r.Body)
	}
	var out struct {
		Results []auResult `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, r.Body)
	}
	return out.Results
}

// auWinners runs one listings auction over products and returns "product@campaign-name" per rank.
func auIDs(ws []auWinner, names map[string]string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID + "@" + names[w.CampaignID]
	}
	return out
}

func auCampaign(t *testing.T, s *system, vendor, body string) string {
	t.Helper()
	r := cpDo(t, s, "POST", cpVendor(vendor), s.AdvancedKey, body, nil)
	cpStatus(t, r, 201)
	return cpID(t, r)
}

func auBid(t *testing.T, s *system, campaign, targetType, target, amount string) {
	t.Helper()
	r := cpDo(t, s, "POST", cpBids(campaign), s.AdvancedKey,
		fmt.Sprintf(`{"targetType":%q,"target":%q,"bidAmount":%s}`, targetType, target, amount), nil)
	cpStatus(t, r, 201)
}

func auSame(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: winners %v, want %v", what, got, want)
	}
}

// TestAuctionHandComputed runs the worked example of docs/design/auction-ranking.md
// over HTTP and checks winners, ranks and the prices signed into each
// resolvedBidId.
func TestAuctionHandComputed(t *testing.T) {
	s, _ := cpStart(t)
	key := s.AdvancedKey
	ctx := context.Background()
	if _, err := s.App.Accounts.SetReserve(ctx, s.Marketplace.ID, 100_000, 1_000_000); err != nil {
		t.Fatal(err)
	}
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
		`{"vendors":[{"id":"v1","name":"V1"},{"id":"v2","name":"V2"},{"id":"v3","name":"V3"},{"id":"v4","name":"V4"},{"id":"v5","name":"V5"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[
		{"id":"P1","name":"P1","vendors":["v1","v3"],"active":true,"quality_score":0.5},
		{"id":"P2","name":"P2","vendors":["v2"],"active":true,"quality_score":0.9},
		{"id":"P3","name":"P3","vendors":["v4"],"active":true},
		{"id":"P4","name":"P4","vendors":["v5"],"active":true}]}`, nil), 200)
	names := map[string]string{}
	camp := func(name, vendor, charge, product, amount string) string {
		id := auCampaign(t, s, vendor, fmt.Sprintf(`{"name":%q,"type":"listings","chargeType":%q,"dailyBudget":1000,"startDate":"2020-01-01T00:00:00Z"}`, name, charge))
		auBid(t, s, id, "product", product, amount)
		names[id] = name
		return id
	}
	camp("c1", "v1", "CPC", "P1", "1.00")
	camp("c2", "v2", "CPC", "P2", "0.80")
	camp("c3", "v3", "CPC", "P1", "0.60")
	camp("c4", "v4", "CPM", "P3", "5.00")
	camp("c5", "v5", "CPC", "P4", "0.05")

	kr := s.App.BidKeys.Load()
	mpID := [16]byte(uuid.MustParse(s.Marketplace.ID))
	check := func(slots int, want ...string) []auWinner {
		t.Helper()
		res := auRun(t, s, "/v2/auctions", fmt.Sprintf(`{"auctions":[{"type":"listings","slots":%d,"products":{"ids":["P1","P2","P3","P4"]}}]}`, slots))
		if len(res) != 1 || res[0].ResultType != "listings" || res[0].Error {
			t.Fatalf("results %+v", res)
		}
		auSame(t, fmt.Sprintf("%d slots", slots), auIDs(res[0].Winners, names), want...)
		return res[0].Winners
	}
	check(2, "P2@c2", "P3@c4")
	ws := check(3, "P2@c2", "P3@c4", "P1@c1")
	wantPrice := []struct {
		micros int64
		charge bidtoken.ChargeType
	}{{555_556, bidtoken.CPC}, {5_000_000, bidtoken.CPM}, {600_000, bidtoken.CPC}}
	for i, w := range ws {
		if w.Rank != i+1 || w.Type != "product" {
			t.Fatalf("winner %d: %+v", i, w)
		}
		c, err := kr.Decode(w.ResolvedBidID, mpID)
		if err != nil {
			t.Fatalf("winner %d: %v", i, err)
		}
		if c.PriceMicros != wantPrice[i].micros || c.ChargeType != wantPrice[i].charge || int(c.Rank) != i+1 || c.WinnerID != w.ID || c.VendorID == "" {
			t.Fatalf("winner %d claims %+v, want price %d %v", i, c, wantPrice[i].micros, wantPrice[i].charge)
		}
	}
	// The request's quality scores replace the products': P2 at 0.1 now
	// scores 0.8e12 and falls behind P1 (5e12) and P3.
	res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":3,"products":{"ids":["P1","P2","P3"],"qualityScores":[0.5,0.1,1]}}]}`)
	auSame(t, "qualityScores", auIDs(res[0].Winners, names), "P3@c4", "P1@c1", "P2@c2")

	// Five auctions in one request: results in request order.
	res = auRun(t, s, "/v2/auctions", `{"auctions":[
		{"type":"listings","slots":1,"products":{"ids":["P4"]}},
		{"type":"listings","slots":1,"products":{"ids":["P1"]}},
		{"type":"listings","slots":1,"products":{"ids":["unknown"]}},
		{"type":"listings","slots":1,"products":{"ids":["P3"]}},
		{"type":"listings","slots":1,"products":{"ids":["P2"]}}]}`)
	var got []string
	for _, r := range res {
		got = append(got, strings.Join(auIDs(r.Winners, names), "+"))
	}
	auSame(t, "request order", got, "", "P1@c1", "", "P3@c4", "P2@c2")

	// Every auction reaches ClickHouse through the auctions topic: 2 + 1
	// + 5 auctions; the doc example's winners with their prices (2 of the
	// 2-slot auction, 3 of the 3-slot one).
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM auctions"); n != 8 {
			return fmt.Errorf("%d auctions in ClickHouse, want 8", n)
		}
		if n := s.count(t, `SELECT count() FROM auction_winners WHERE (rank, entity_id, price_micros, charge_type, bid_target) IN
			((1, 'P2', 555556, 'CPC', 'product'), (2, 'P3', 5000000, 'CPM', 'product'), (3, 'P1', 600000, 'CPC', 'product'))`); n != 5 {
			return fmt.Errorf("%d doc-example winners in ClickHouse, want 5", n)
		}
		return nil
	})
}

// TestAuctionEligibility: a deactivated product, a paused or ended campaign,
// a non-matching location or segment, and a campaign of another type never
// win; category, keyword, sponsored-brand and travel contexts pick the
// documented candidates.
func TestAuctionEligibility(t *testing.T) {
	s, _ := cpStart(t)
	key := s.AdvancedKey
	ctx := context.Background()
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
		`{"vendors":[{"id":"va","name":"Vendor A"},{"id":"vb","name":"Vendor B"},{"id":"vc","name":"Vendor C"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/categories", key,
		`{"categories":[{"id":"shoes","name":"Shoes"},{"id":"running","name":"Running","parentId":"shoes"},{"id":"red","name":"Red things"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[
		{"id":"a1","name":"A1","vendors":["va"],"categories":["running","red"],"active":true,"imageURL":"https://img.example/a1.png","quality_score":0.9},
		{"id":"a2","name":"A2","vendors":["va"],"categories":["shoes"],"active":true,"quality_score":0.5},
		{"id":"b1","name":"B1","vendors":["vb"],"categories":["running"],"active":true,"imageURL":"https://img.example/b1.png"},
		{"id":"c1","name":"C1","vendors":["vc"],"categories":["red"],"active":true,"metadata":{"color":"red","promotions":["bf"]}}]}`, nil), 200)
	names := map[string]string{}
	newCamp := func(name, vendor, extra string) string {
		id := auCampaign(t, s, vendor, fmt.Sprintf(`{"name":%q,"type":"listings","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"%s}`, name, extra))
		names[id] = name
		return id
	}
	ca := newCamp("ca", "va", "")
	auBid(t, s, ca, "product", "a1", "1")
	cb := newCamp("cb", "vb", "")
	auBid(t, s, cb, "product", "b1", "0.8")
	cc := newCamp("cc", "vc", "")
	auBid(t, s, cc, "category", "red", "0.5")
	listing := func(slots int, ctxJSON string) []string {
		t.Helper()
		res := auRun(t, s, "/v2/auctions", fmt.Sprintf(`{"auctions":[{"type":"listings","slots":%d,%s}]}`, slots, ctxJSON))
		return auIDs(res[0].Winners, names)
	}
	all := `"products":{"ids":["a1","a2","b1","c1"]}`
	auSame(t, "baseline", listing(5, all), "a1@ca", "b1@cb", "c1@cc")

	// Category context: products in the category or its descendants.
	auSame(t, "category id", listing(5, `"category":{"id":"shoes"}`), "a1@ca", "b1@cb")
	auSame(t, "category ids (in all)", listing(5, `"category":{"ids":["shoes","red"]}`), "a1@ca")
	auSame(t, "category disjunctions", listing(5, `"category":{"disjunctions":[["red"],["running","shoes"]]}`), "a1@ca")
	auSame(t, "products in a category", listing(5, `"products":{"ids":["a1","b1","c1"]},"category":{"id":"red"}`), "a1@ca", "c1@cc")
	// Filter: attributes from metadata.
	auSame(t, "filter", listing(5, all+`,"filter":{"operator":"and","attributes":["color:red"]}`), "c1@cc")
	auSame(t, "filter promotions", listing(5, all+`,"filter":{"promotions":["bf"]}`), "c1@cc")

	// A deactivated product never wins.
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key,
		`{"products":[{"id":"a1","name":"A1","vendors":["va"],"categories":["running","red"],"active":false}]}`, nil), 200)
	auSame(t, "deactivated product", listing(5, all), "b1@cb", "c1@cc")
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key,
		`{"products":[{"id":"a1","name":"A1","vendors":["va"],"categories":["running","red"],"active":true,"quality_score":0.9,"imageURL":"https://img.example/a1.png"}]}`, nil), 200)
	// A paused campaign never wins; resumed, it does.
	cpStatus(t, cpDo(t, s, "PATCH", cpCampaign(cb), key, `{"isActive":false}`, nil), 200)
	auSame(t, "paused campaign", listing(5, all), "a1@ca", "c1@cc")
	cpStatus(t, cpDo(t, s, "PATCH", cpCampaign(cb), key, `{"isActive":true}`, nil), 200)
	// An ended campaign never wins.
	ended := newCamp("ended", "va", `,"endDate":"2021-01-01T00:00:00Z"`)
	auBid(t, s, ended, "product", "a2", "9")
	auSame(t, "ended campaign", listing(5, `"products":{"ids":["a2"]}`))
	// An inactive bid never wins.
	inactive := newCamp("inactive", "va", "")
	r := cpDo(t, s, "POST", cpBids(inactive), key, `{"targetType":"product","target":"a2","bidAmount":9,"isActive":false}`, nil)
	cpStatus(t, r, 201)
	auSame(t, "inactive bid", listing(5, `"products":{"ids":["a2"]}`))

	// Location: a campaign cell matches a request cell inside it.
	geo := newCamp("geo", "vb", `,"targeting":{"locations":["85283473fffffff"]}`)
	auBid(t, s, geo, "product", "b1", "5")
	inside, outside := "89283470003ffff", "8928308280fffff" // resolution 9 cells: inside 85283473f…, elsewhere
	auSame(t, "matching location", listing(1, `"products":{"ids":["b1"]},"geoTargeting":{"locations":["`+inside+`"]}`), "b1@geo")
	auSame(t, "other location", listing(1, `"products":{"ids":["b1"]},"geoTargeting":{"locations":["`+outside+`"]}`), "b1@cb")
	auSame(t, "no location", listing(1, `"products":{"ids":["b1"]}`), "b1@cb")

	// Segment: only members of the campaign's segment see it.
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/segment-service/segments/vip", key, `{"name":"VIP","config":{"type":"user-list"}}`, nil), 201)
	if _, err := s.App.Segments.Upload(ctx, s.Marketplace.ID, "vip", segments.ActionAdd, strings.NewReader("user-1\nuser-2\n"), 0); err != nil {
		t.Fatal(err)
	}
	seg := newCamp("seg", "vc", `,"targeting":{"segments":["vip"]}`)
	auBid(t, s, seg, "product", "c1", "7")
	auSame(t, "segment member", listing(1, `"products":{"ids":["c1"]},"opaqueUserId":"user-2"`), "c1@seg")
	auSame(t, "not a member", listing(1, `"products":{"ids":["c1"]},"opaqueUserId":"user-9"`), "c1@cc")
	auSame(t, "no user", listing(1, `"products":{"ids":["c1"]}`), "c1@cc")

	// Placement: a campaign restricted to placement 2.
	pl := newCamp("pl", "vc", `,"targeting":{"placementIds":[2]}`)
	auBid(t, s, pl, "product", "c1", "8")
	auSame(t, "placement 2", listing(1, `"products":{"ids":["c1"]},"placementId":2`), "c1@pl")
	auSame(t, "placement 1", listing(1, `"products":{"ids":["c1"]},"placementId":1`), "c1@cc")

	// Banners: only banners campaigns, only products with an image; keyword
	// bids match whole words of the query.
	ban := auCampaign(t, s, "va", `{"name":"ban","type":"banners","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`)
	names[ban] = "ban"
	auBid(t, s, ban, "keyword", "Running  Shoes", "0.3")
	res := auRun(t, s, "/v2/auctions", `{"auctions":[
		{"type":"banners","slots":2,"slotId":"top","searchQuery":"red running shoes"},
		{"type":"banners","slots":2,"slotId":"top","searchQuery":"shoes running"},
		{"type":"listings","slots":5,"products":{"ids":["a1","a2"]},"searchQuery":"running shoes"}]}`)
	auSame(t, "keyword banner", auIDs(res[0].Winners, names), "a1@ban")
	if res[0].ResultType != "banners" || len(res[0].Winners[0].Asset) != 1 || res[0].Winners[0].Asset[0].URL != "https://img.example/a1.png" {
		t.Fatalf("banner result %+v", res[0])
	}
	auSame(t, "keyword order matters", auIDs(res[1].Winners, names))
	auSame(t, "banners campaigns stay out of listings", auIDs(res[2].Winners, names), "a1@ca")
	// Landing-page banners (no context): the product bids of banners
	// campaigns; a product without an image cannot be a banner.
	auBid(t, s, ban, "product", "a1", "0.2")
	auBid(t, s, ban, "product", "a2", "0.9")
	res = auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"banners","slots":3,"slotId":"home","device":"mobile"}]}`)
	auSame(t, "landing page", auIDs(res[0].Winners, names), "a1@ban")

	// Sponsored brand: one winner per vendor, with its best products.
	res = auRun(t, s, "/v2/auctions/sponsored-brand", `{"auctions":[{"winners":3,"placementId":"home-top","triggers":{"products":{"ids":["a1","a2","b1"]}}}]}`)
	if res[0].ResultType != "brand" || len(res[0].Winners) != 2 || res[0].Winners[0].VendorID != "va" || res[0].Winners[1].VendorID != "vb" {
		t.Fatalf("sponsored brand %+v", res[0])
	}
	// Flights: the variation is echoed.
	res = auRun(t, s, "/v2/auctions/travel", `{"auctions":[{"type":"flights","slots":2,"products":[{"id":"b1","variationID":"b1-economy"}],
		"travelContext":{"site":"example.com","route":"SAO-ORL","flightType":"one_way"}}]}`)
	if res[0].ResultType != "flights" || len(res[0].Winners) != 1 || res[0].Winners[0].VariationID != "b1-economy" {
		t.Fatalf("flights %+v", res[0])
	}
}

// TestAuctionBudget: a campaign whose daily or total budget is spent (as the
// charging pipeline records it in Redis) stops winning once the spend cache
// refreshed; the others keep winning.
func TestAuctionBudget(t *testing.T) {
	s, _ := cpStart(t)
	// A marketplace where it is noon: the day of the spend below is the
	// auctions' day, at whatever hour the test runs.
	s = ownMarketplace(t, s, "Budget Market", testenv.NoonZone(time.Now()))
	key := s.AdvancedKey
	ctx := context.Background()
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
		`{"vendors":[{"id":"va","name":"A"},{"id":"vb","name":"B"},{"id":"vc","name":"C"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[
		{"id":"pa","name":"PA","vendors":["va"],"active":true},{"id":"pb","name":"PB","vendors":["vb"],"active":true},
		{"id":"pc","name":"PC","vendors":["vc"],"active":true}]}`, nil), 200)
	names := map[string]string{}
	camp := func(name, vendor, budgets, product string) string {
		id := auCampaign(t, s, vendor, fmt.Sprintf(`{"name":%q,"type":"listings",%s,"startDate":"2020-01-01T00:00:00Z"}`, name, budgets))
		auBid(t, s, id, "product", product, "1")
		names[id] = name
		return id
	}
	daily := camp("daily", "va", `"dailyBudget":10`, "pa")
	total := camp("total", "vb", `"dailyBudget":40,"totalBudget":50`, "pb")
	camp("fresh", "vc", `"dailyBudget":10`, "pc")
	run := func() []string {
		res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":5,"products":{"ids":["pa","pb","pc"]}}]}`)
		return auIDs(res[0].Winners, names)
	}
	auSame(t, "before spend", run(), "pa@daily", "pb@total", "pc@fresh")

	loc := s.Marketplace.Location()
	day := spend.DayOf(time.Now(), loc)
	if err := spend.AddSpend(ctx, s.App.Redis, s.Marketplace.ID, daily, day, 10_000_000); err != nil {
		t.Fatal(err)
	}
	yesterday := spend.DayOf(time.Now().Add(-24*time.Hour), loc) // total spent, nothing today
	if err := spend.AddSpend(ctx, s.App.Redis, s.Marketplace.ID, total, yesterday, 50_000_000); err != nil {
		t.Fatal(err)
	}
	if err := s.App.Spend.RefreshNow(ctx); err != nil {
		t.Fatal(err)
	}
	auSame(t, "after spend", run(), "pc@fresh")
}
