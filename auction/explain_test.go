package auction_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction"
	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// The explain tests run the real catalog and campaigns views over a kfake
// log, the auction index they feed, and the engine, with a budget gate and
// a segment view whose answers the test sets.

const exMP = "0193a5b0-0000-7000-8000-0000000000e1"

// exWorld is one marketplace's views and an engine over them.
type exWorld struct {
	t      *testing.T
	cat    *catalog.Service
	camps  *campaigns.Service
	engine *auction.Engine
	market *auction.Market
	gate   exGate
	segs   *exSegments
	ids    map[string]string // campaign name -> id
	names  map[string]string // campaign id -> name
	now    time.Time
}

// exGate answers the budget question per campaign id (BudgetOK when not
// set), and counts its calls.
type exGate map[string]auction.BudgetVerdict

func (g exGate) Check(_ *auction.Market, _ *spend.Slot, campaignID string, _ spend.Limits, _ time.Time) auction.BudgetVerdict {
	return g[campaignID]
}

// exSegments: user -> segments; the user "broken" gets an error.
type exSegments struct{ members map[string][]string }

func (s *exSegments) Memberships(_ context.Context, _, user string, ids []string) ([]bool, error) {
	if user == "broken" {
		return nil, errors.New("segments down")
	}
	out := make([]bool, len(ids))
	for i, id := range ids {
		out[i] = slices.Contains(s.members[user], id)
	}
	return out, nil
}

// exReserves is the marketplace's reserve for the campaigns' eligibility.
type exReserves auction.Reserve

func (r exReserves) Reserve(string) (int64, int64) { return r.CPCMicros, r.CPMMicros }

func newExWorld(t *testing.T, reserve auction.Reserve) *exWorld {
	t.Helper()
	if testing.Short() {
		t.Skip("needs kfake")
	}
	_, brokers := testenv.Kafka(t)
	w := &exWorld{t: t, gate: exGate{}, segs: &exSegments{members: map[string][]string{}}, ids: map[string]string{}, names: map[string]string{},
		now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	ix := index.New()
	texts := testenv.SpillStore(t)
	testenv.StateLog(t, brokers, testenv.StateLogOptions{Prefix: "explain."}, func(l *statelog.Log) {
		w.cat = catalog.New(l, texts)
		w.camps = campaigns.New(l, w.cat, nil, nil, exReserves(reserve))
		ix.Register(w.cat, w.camps)
	})
	kr, err := bidtoken.NewKeyring(map[uint8][]byte{1: []byte("explain-key-explain-key-explain!!")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	w.engine = &auction.Engine{Catalog: w.cat, Index: ix, Segments: w.segs, Budget: w.gate,
		Keys: func() *bidtoken.Keyring { return kr }, Now: func() time.Time { return w.now }}
	w.market = &auction.Market{ID: exMP, UUID: uuid.MustParse(exMP), Loc: time.UTC, Reserve: reserve}
	return w
}

// catalog upserts categories and products given as JSON arrays.
func (w *exWorld) catalog(categories, products string) {
	w.t.Helper()
	ctx := context.Background()
	if categories != "" {
		var cs []catalog.CategoryInput
		if err := json.Unmarshal([]byte(categories), &cs); err != nil {
			w.t.Fatal(err)
		}
		if _, err := w.cat.UpsertCategories(ctx, exMP, cs, true, statelog.MatchAny); err != nil {
			w.t.Fatal(err)
		}
	}
	var ps []catalog.ProductInput
	if err := json.Unmarshal([]byte(products), &ps); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.cat.UpsertProducts(ctx, exMP, ps, true, statelog.MatchAny); err != nil {
		w.t.Fatal(err)
	}
}

// exBid is a bid of a campaign of campaign(): "product:P1:1.5",
// "keyword:running shoes:0.5", "category:shoes:0.3"; a "!" prefix makes
// it inactive.
type exBid string

// campaign imports a running listings CPC campaign named name of vendor,
// changed by edit, with its bids; it returns the campaign.
func (w *exWorld) campaign(name, vendor string, edit func(*campaigns.Campaign), bids ...exBid) campaigns.Campaign {
	w.t.Helper()
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	c := campaigns.Campaign{ID: uuid.Must(uuid.NewV7()).String(), VendorID: vendor, Name: name, Type: campaigns.TypeListings,
		ChargeType: campaigns.ChargeCPC, StartDate: past, Active: true, CreatedAt: past, UpdatedAt: past}
	if edit != nil {
		edit(&c)
	}
	var bs []campaigns.Bid
	for _, b := range bids {
		s, active := string(b), true
		if strings.HasPrefix(s, "!") {
			s, active = s[1:], false
		}
		parts := strings.Split(s, ":")
		amount, err := campaigns.ParseMoneyText(parts[2])
		if err != nil {
			w.t.Fatal(err)
		}
		bs = append(bs, campaigns.Bid{ID: uuid.Must(uuid.NewV7()).String(), CampaignID: c.ID, TargetType: parts[0], Target: parts[1],
			AmountMicros: amount, Active: active, CreatedAt: past, UpdatedAt: past})
	}
	if err := w.camps.Import(context.Background(), exMP, []campaigns.Campaign{c}, bs); err != nil {
		w.t.Fatal(err)
	}
	w.ids[name], w.names[c.ID] = c.ID, name
	return c
}

// explain parses one request body and explains it.
func (w *exWorld) explain(endpoint auction.EndpointKind, body string) []auction.Explanation {
	w.t.Helper()
	reqs, verr := auction.ParseAuctions([]byte(body), endpoint)
	if verr != nil {
		w.t.Fatalf("%s: %v", body, verr)
	}
	defer auction.Release(reqs)
	out, err := w.engine.Explain(context.Background(), w.market, endpoint, reqs, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	for i := range out { // the requests' strings are released: keep copies
		for j := range out[i].Candidates {
			c := &out[i].Candidates[j]
			c.ProductID, c.CampaignID, c.VendorID, c.BidID = strings.Clone(c.ProductID), strings.Clone(c.CampaignID), strings.Clone(c.VendorID), strings.Clone(c.BidID)
		}
		for j := range out[i].ExcludedProducts {
			out[i].ExcludedProducts[j].ProductID = strings.Clone(out[i].ExcludedProducts[j].ProductID)
		}
	}
	return out
}

// line is a candidate in short: "name@product outcome[/reason] #rank price".
func (w *exWorld) line(c auction.ExplainedCandidate) string {
	s := w.names[c.CampaignID] + "@" + c.ProductID + " " + c.Outcome.String()
	if c.Reason.String() != "" {
		s += "/" + c.Reason.String()
	}
	if c.Outcome == auction.Won {
		s += fmt.Sprintf(" #%d %d", c.Rank, c.PriceMicros)
	}
	return s
}

func (w *exWorld) lines(e auction.Explanation) []string {
	out := make([]string, len(e.Candidates))
	for i, c := range e.Candidates {
		out[i] = w.line(c)
	}
	return out
}

// TestExplainWorkedExample: docs/design/auction-ranking.md's worked example, every
// candidate with its score, order, outcome and price.
func TestExplainWorkedExample(t *testing.T) {
	w := newExWorld(t, auction.Reserve{CPCMicros: 100_000, CPMMicros: 1_000_000})
	w.catalog("", `[{"id":"P1","name":"P1","vendors":["v1","v3"],"active":true,"quality_score":0.5},
		{"id":"P2","name":"P2","vendors":["v2"],"active":true,"quality_score":0.9},
		{"id":"P3","name":"P3","vendors":["v4"],"active":true},
		{"id":"P4","name":"P4","vendors":["v5"],"active":true}]`)
	w.campaign("c1", "v1", nil, "product:P1:1.00")
	w.campaign("c2", "v2", nil, "product:P2:0.80")
	w.campaign("c3", "v3", nil, "product:P1:0.60")
	w.campaign("c4", "v4", func(c *campaigns.Campaign) { c.ChargeType = campaigns.ChargeCPM }, "product:P3:5.00")
	w.campaign("c5", "v5", nil, "product:P4:0.05")

	e := w.explain(auction.Auctions, `{"auctions":[{"type":"listings","slots":3,"products":{"ids":["P1","P2","P3","P4"]}}]}`)[0]
	want := []string{
		"c2@P2 won #1 555556",
		"c4@P3 won #2 5000000",
		"c1@P1 won #3 600000",
		"c3@P1 lost/product_won_higher",
		"c5@P4 lost/below_reserve",
	}
	if got := w.lines(e); !slices.Equal(got, want) {
		t.Fatalf("candidates\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	scores := []string{"7200000000000", "5000000000000", "5000000000000", "3000000000000", "500000000000"}
	quality := []int64{900_000, 1_000_000, 500_000, 500_000, 1_000_000}
	for i, c := range e.Candidates {
		if c.Score != scores[i] || c.QualityPPM != quality[i] || c.BidTarget != "product" || c.BidID == "" {
			t.Errorf("candidate %d: %+v, want score %s quality %d", i, c, scores[i], quality[i])
		}
		if wantPos := i + 1; (i < 4 && c.Position != wantPos) || (i == 4 && c.Position != 0) {
			t.Errorf("candidate %d: position %d", i, c.Position)
		}
	}
	if !e.Candidates[1].CPM || e.Candidates[0].CPM || e.Error || e.Kind != auction.KindListings || e.Slots != 3 || len(e.ExcludedProducts) != 0 {
		t.Errorf("explanation %+v", e)
	}
	// Two slots: c1 is outranked; c3's product did not win, so it is
	// outranked too.
	e = w.explain(auction.Auctions, `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["P1","P2","P3","P4"]}}]}`)[0]
	want = []string{"c2@P2 won #1 555556", "c4@P3 won #2 5000000", "c1@P1 lost/outranked", "c3@P1 lost/outranked", "c5@P4 lost/below_reserve"}
	if got := w.lines(e); !slices.Equal(got, want) {
		t.Fatalf("2 slots\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The request's quality scores.
	e = w.explain(auction.Auctions, `{"auctions":[{"type":"listings","slots":3,"products":{"ids":["P1","P2","P3"],"qualityScores":[0.5,0.1,1]}}]}`)[0]
	want = []string{"c4@P3 won #1 5000000", "c1@P1 won #2 600000", "c3@P1 lost/product_won_higher", "c2@P2 won #3 100000"}
	if got := w.lines(e); !slices.Equal(got, want) {
		t.Fatalf("quality scores\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestExplainReasons: one auction per reason the engine has, each checked
// on the candidate it concerns (and nothing else of it won).
func TestExplainReasons(t *testing.T) {
	w := newExWorld(t, auction.Reserve{CPCMicros: 100_000, CPMMicros: 1_000_000})
	w.catalog(`[{"id":"shoes","name":"Shoes"},{"id":"running","name":"Running","parentId":"shoes"},{"id":"red","name":"Red"}]`,
		`[{"id":"a1","name":"A1","vendors":["va"],"categories":["running"],"active":true,"imageURL":"https://img.example/a1.png","quality_score":0.9,"metadata":{"color":"red"}},
		{"id":"a2","name":"A2","vendors":["va"],"categories":["shoes"],"active":true,"quality_score":0.5},
		{"id":"a3","name":"A3","vendors":["va"],"categories":["red"],"active":true,"imageURL":"https://img.example/a3.png","quality_score":0.2},
		{"id":"off","name":"Off","vendors":["va"],"active":false},
		{"id":"lone","name":"Lone","vendors":[],"active":true},
		{"id":"b1","name":"B1","vendors":["vb"],"categories":["running"],"active":true},
		{"id":"d1","name":"D1","vendors":["vd"],"active":false}]`)
	running := func(c *campaigns.Campaign) {}
	w.campaign("ca", "va", running, "product:a1:1", "product:a3:0.4", "keyword:running shoes:0.5", "category:shoes:0.3")
	w.campaign("paused", "va", func(c *campaigns.Campaign) { c.Active = false }, "product:a1:2")
	w.campaign("scheduled", "va", func(c *campaigns.Campaign) { c.StartDate = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC) }, "product:a1:2")
	w.campaign("ended", "va", func(c *campaigns.Campaign) {
		end := time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
		c.EndDate = &end
	}, "product:a1:2")
	w.campaign("inactive", "va", nil, "!product:a1:2", "!keyword:running:2", "!category:shoes:2")
	w.campaign("notpermitted", "vb", nil, "product:a1:2", "product:lone:2")
	w.campaign("onoff", "va", nil, "product:off:2")
	w.campaign("ghost", "va", nil, "product:ghost:2")
	w.campaign("placement", "vb", func(c *campaigns.Campaign) { c.Targeting.PlacementIDs = []int{2} }, "product:b1:2")
	w.campaign("geo", "vb", func(c *campaigns.Campaign) { c.Targeting.Locations = []string{"85283473fffffff"} }, "product:b1:2")
	w.campaign("seg", "vb", func(c *campaigns.Campaign) { c.Targeting.Segments = []string{"vip"} }, "product:b1:3")
	budgeted := func(c *campaigns.Campaign) { c.DailyBudgetMicros, c.TotalBudgetMicros = 10_000_000, 100_000_000 }
	total := w.campaign("total", "vb", budgeted, "product:b1:4")
	daily := w.campaign("daily", "vb", budgeted, "product:b1:4")
	paced := w.campaign("paced", "vb", budgeted, "product:b1:4")
	w.gate[total.ID], w.gate[daily.ID], w.gate[paced.ID] = auction.BudgetTotalExhausted, auction.BudgetDailyExhausted, auction.BudgetPaced
	w.campaign("low", "vb", nil, "product:b1:0.05")
	w.campaign("auto", "vb", func(c *campaigns.Campaign) { c.Type, c.DailyBudgetMicros = campaigns.TypeAutomated, 50_000_000 })
	w.campaign("ban", "va", func(c *campaigns.Campaign) { c.Type = campaigns.TypeBanners }, "product:a2:1", "product:a1:0.5", "keyword:boots:0.5")
	w.campaign("mobile", "va", func(c *campaigns.Campaign) {
		c.Type, c.Targeting.Devices = campaigns.TypeBanners, []string{"mobile"}
	}, "product:a1:0.9")
	w.campaign("nothing", "vd", func(c *campaigns.Campaign) { c.Type = campaigns.TypeBanners }, "keyword:boots:0.5")
	w.segs.members["u-vip"] = []string{"vip"}

	// find returns the explanation's line of campaign name on product that
	// starts with want (its only line when none does).
	find := func(e auction.Explanation, name, product, want string) string {
		t.Helper()
		var found []string
		for _, c := range e.Candidates {
			if w.names[c.CampaignID] == name && c.ProductID == product {
				if l := w.line(c); strings.HasPrefix(l, want) {
					return l
				} else {
					found = append(found, l)
				}
			}
		}
		if len(found) != 1 {
			t.Fatalf("%s@%s: %v in\n%s", name, product, found, strings.Join(w.lines(e), "\n"))
		}
		return found[0]
	}
	listings := func(extra string) auction.Explanation {
		t.Helper()
		return w.explain(auction.Auctions, `{"auctions":[{"type":"listings","slots":40`+extra+`}]}`)[0]
	}
	all := `,"products":{"ids":["a1","a2","a3","off","lone","ghost","b1"]}`
	e := listings(all)
	for _, c := range []struct{ name, product, want string }{
		{"ca", "a1", "ca@a1 won"},
		{"paused", "a1", "paused@a1 filtered/campaign_paused"},
		{"scheduled", "a1", "scheduled@a1 filtered/campaign_scheduled"},
		{"ended", "a1", "ended@a1 filtered/campaign_ended"},
		{"inactive", "a1", "inactive@a1 filtered/bid_inactive"},
		{"notpermitted", "a1", "notpermitted@a1 filtered/vendor_not_permitted"},
		{"notpermitted", "lone", "notpermitted@lone filtered/vendor_not_permitted"},
		{"onoff", "off", "onoff@off filtered/product_inactive"},
		{"ghost", "ghost", "ghost@ghost filtered/product_not_found"},
		{"placement", "b1", "placement@b1 filtered/targeting_placement"},
		{"geo", "b1", "geo@b1 filtered/targeting_location"},
		{"seg", "b1", "seg@b1 filtered/targeting_segment"},
		{"total", "b1", "total@b1 filtered/total_budget_exhausted"},
		{"daily", "b1", "daily@b1 filtered/daily_budget_exhausted"},
		{"paced", "b1", "paced@b1 filtered/paced"},
		{"low", "b1", "low@b1 lost/below_reserve"},
		{"ban", "a2", "ban@a2 filtered/campaign_type"},
		{"auto", "b1", "auto@b1 won"},
	} {
		if got := find(e, c.name, c.product, c.want); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s@%s: %q, want %q", c.name, c.product, got, c.want)
		}
	}
	if got := fmt.Sprint(e.ExcludedProducts); got != "[{off product_inactive} {lone product_without_vendors} {ghost product_not_found}]" {
		t.Errorf("excluded products %s", got)
	}
	for _, x := range e.ExcludedProducts {
		if x.Reason.String() == "" {
			t.Errorf("excluded %+v has no code", x)
		}
	}
	// The campaign's product bid counts, its category bid on the same
	// product is superseded; with a search query, its keyword bid too.
	e = listings(all + `,"searchQuery":"red running shoes"`)
	superseded := 0
	for _, c := range e.Candidates {
		if w.names[c.CampaignID] == "ca" && c.ProductID == "a1" {
			switch c.BidTarget {
			case "product":
				if c.Outcome != auction.Won {
					t.Errorf("ca's product bid: %s", w.line(c))
				}
			case "keyword", "category":
				if c.Reason != auction.ReasonSuperseded {
					t.Errorf("ca's %s bid: %s", c.BidTarget, w.line(c))
				}
				superseded++
			}
		}
		if w.names[c.CampaignID] == "inactive" && c.ProductID == "a1" && c.Reason != auction.ReasonBidInactive {
			t.Errorf("inactive's %s bid: %s", c.BidTarget, w.line(c))
		}
	}
	if superseded != 2 {
		t.Errorf("%d superseded bids of ca on a1:\n%s", superseded, strings.Join(w.lines(e), "\n"))
	}
	if got := find(e, "ca", "a2", "ca@a2 filtered/superseded"); got != "ca@a2 filtered/superseded" {
		t.Errorf("ca's category bid on a2, under its keyword bid: %s", got)
	}
	// Placement, location, segments, category, filter.
	if got := find(listings(`,"products":{"ids":["b1"]},"placementId":2`), "placement", "b1", "placement@b1 won"); !strings.HasPrefix(got, "placement@b1 won") {
		t.Errorf("placement 2: %s", got)
	}
	if got := find(listings(`,"products":{"ids":["b1"]},"geoTargeting":{"locations":["89283470003ffff"]}`), "geo", "b1", "geo@b1 won"); !strings.HasPrefix(got, "geo@b1 won") {
		t.Errorf("location inside: %s", got)
	}
	if got := find(listings(`,"products":{"ids":["b1"]},"opaqueUserId":"u-vip"`), "seg", "b1", "seg@b1 won"); !strings.HasPrefix(got, "seg@b1 won") {
		t.Errorf("member: %s", got)
	}
	if got := find(listings(`,"products":{"ids":["b1"]},"opaqueUserId":"u-other"`), "seg", "b1", ""); got != "seg@b1 filtered/targeting_segment" {
		t.Errorf("not a member: %s", got)
	}
	if got := find(listings(`,"products":{"ids":["b1"]},"opaqueUserId":"broken"`), "seg", "b1", ""); got != "seg@b1 filtered/segment_unavailable" {
		t.Errorf("segments down: %s", got)
	}
	e = listings(`,"products":{"ids":["a1","a3"]},"category":{"id":"shoes"}`)
	if got := find(e, "ca", "a3", ""); got != "ca@a3 filtered/not_in_category" {
		t.Errorf("outside the category: %s", got)
	}
	if got := fmt.Sprint(e.ExcludedProducts); got != "[{a3 not_in_category}]" {
		t.Errorf("excluded products %s", got)
	}
	e = listings(`,"products":{"ids":["a1","a2"]},"filter":{"attributes":["color:red"]}`)
	if got := find(e, "ca", "a2", ""); got != "ca@a2 filtered/filter_mismatch" {
		t.Errorf("filter: %s", got)
	}
	if got := find(e, "ca", "a1", "ca@a1 won"); !strings.HasPrefix(got, "ca@a1 won") {
		t.Errorf("filter: %s", got)
	}

	// Banners: device, image, keyword-only with no product, campaign type.
	banners := func(extra string) auction.Explanation {
		t.Helper()
		return w.explain(auction.Auctions, `{"auctions":[{"type":"banners","slots":5,"slotId":"top"`+extra+`}]}`)[0]
	}
	e = banners(`,"products":{"ids":["a1","a2"]}`)
	for _, c := range []struct{ name, product, want string }{
		{"mobile", "a1", "mobile@a1 filtered/targeting_device"},
		{"ban", "a2", "ban@a2 filtered/product_without_image"},
		{"ban", "a1", "ban@a1 won"},
		{"ca", "a1", "ca@a1 filtered/campaign_type"},
	} {
		if got := find(e, c.name, c.product, c.want); !strings.HasPrefix(got, c.want) {
			t.Errorf("banners %s@%s: %q, want %q", c.name, c.product, got, c.want)
		}
	}
	if got := find(banners(`,"products":{"ids":["a1"]},"device":"mobile"`), "mobile", "a1", "mobile@a1 won"); !strings.HasPrefix(got, "mobile@a1 won") {
		t.Errorf("mobile: %s", got)
	}
	e = banners(`,"searchQuery":"red boots"`)
	if got := find(e, "nothing", "", ""); got != "nothing@ filtered/no_active_product" {
		t.Errorf("keyword-only, no product: %s", got)
	}
	// ban's keyword bid promotes va's best product, a1 (quality 0.9).
	if got := find(e, "ban", "a1", "ban@a1 won"); !strings.HasPrefix(got, "ban@a1 won") {
		t.Errorf("keyword-only: %s", got)
	}
	// Landing page: product bids of banners campaigns.
	e = banners(``)
	for _, c := range []struct{ name, product, want string }{
		{"ban", "a1", "ban@a1 won"},
		{"ban", "a2", "ban@a2 filtered/product_without_image"},
		{"mobile", "a1", "mobile@a1 filtered/targeting_device"},
	} {
		if got := find(e, c.name, c.product, c.want); !strings.HasPrefix(got, c.want) {
			t.Errorf("landing page %s@%s: %q, want %q", c.name, c.product, got, c.want)
		}
	}

	// Sponsored brand: one winner per vendor.
	e = w.explain(auction.SponsoredBrand, `{"auctions":[{"winners":3,"placementId":"top","triggers":{"products":{"ids":["a1","a3"]}}}]}`)[0]
	if got := find(e, "ca", "a3", ""); got != "ca@a3 lost/vendor_won_higher" {
		t.Errorf("sponsored brand: %s\n%s", got, strings.Join(w.lines(e), "\n"))
	}
}

// TestExplainAgreesWithRun: on the benchmark's world, for random auctions,
// the winners Explain reports are Run's, with the same ranks and prices, and
// the candidates it ranks are the ones Run counted.
func TestExplainAgreesWithRun(t *testing.T) {
	w := smallWorld(t)
	at := time.Now()
	w.engine.Now = func() time.Time { return at }
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 11))
	winners := 0
	for i := range 100 {
		reqs := randomRequest(rng, w.products, 200, 1+i%10)
		if i%3 == 0 {
			reqs[0].SearchQuery = fmt.Sprintf("word%d shoes", i%500)
		}
		res, err := w.engine.Run(ctx, w.market, auction.Auctions, reqs)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := w.engine.Explain(ctx, w.market, auction.Auctions, reqs, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		ranked := 0
		for _, c := range ex[0].Candidates {
			if c.Outcome == auction.Won {
				got = append(got, fmt.Sprintf("%d %s %s %d", c.Rank, c.ProductID, c.CampaignID, c.PriceMicros))
			}
			if c.Outcome != auction.Filtered {
				ranked++
			}
		}
		for _, win := range res[0].Winners {
			want = append(want, fmt.Sprintf("%d %s %s %d", win.Rank, win.ID, win.CampaignID, res[0].Record.Winners[win.Rank-1].PriceMicros))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("auction %d: explain's winners\n%v\nrun's\n%v", i, got, want)
		}
		if ranked != res[0].Record.Candidates {
			t.Fatalf("auction %d: %d ranked candidates, run had %d", i, ranked, res[0].Record.Candidates)
		}
		winners += len(want)
		auction.ReleaseResults(res)
	}
	if winners < 100 {
		t.Fatalf("%d winners in 100 auctions: too few to mean anything", winners)
	}
}

// TestExplainCandidateLimit: the limit counts the candidates the explain
// lists, over every auction of the request: at the count the explanation is
// the unlimited one, one below it is a TooManyCandidatesError naming the
// limit and the auction where the count passed it.
func TestExplainCandidateLimit(t *testing.T) {
	w := smallWorld(t)
	at := time.Now()
	w.engine.Now = func() time.Time { return at }
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	reqs := append(randomRequest(rng, w.products, 200, 3), randomRequest(rng, w.products, 200, 3)...)
	full, err := w.engine.Explain(ctx, w.market, auction.Auctions, reqs, 0)
	if err != nil {
		t.Fatal(err)
	}
	first, total := len(full[0].Candidates), len(full[0].Candidates)+len(full[1].Candidates)
	if first < 10 || total == first {
		t.Fatalf("candidates %d then %d: too few to mean anything", first, total-first)
	}
	for _, c := range []struct {
		limit   int
		auction int // -1: no error
	}{{0, -1}, {total, -1}, {total + 1, -1}, {total - 1, 1}, {first, 1}, {first - 1, 0}, {1, 0}} {
		got, err := w.engine.Explain(ctx, w.market, auction.Auctions, reqs, c.limit)
		var tm *auction.TooManyCandidatesError
		switch {
		case c.auction < 0 && err != nil:
			t.Errorf("limit %d: %v", c.limit, err)
		case c.auction < 0 && (len(got) != 2 || !slices.Equal(got[0].Candidates, full[0].Candidates) || !slices.Equal(got[1].Candidates, full[1].Candidates)):
			t.Errorf("limit %d: another explanation than without a limit", c.limit)
		case c.auction >= 0 && (!errors.As(err, &tm) || tm.Limit != c.limit || tm.Auction != c.auction || got != nil):
			t.Errorf("limit %d: %v %v, want the count past it at auction %d", c.limit, len(got), err, c.auction)
		}
	}
}

// TestEligibilityAgreesWithEngine: a bid that reads eligible
// (campaigns.Service.Eligibility) reaches the ranking of an auction made
// for it, and one that does not never does, filtered or lost for the very
// reason eligibility gives. Campaigns are running, untargeted and without
// budgets: what is left is the bid's own eligibility.
func TestEligibilityAgreesWithEngine(t *testing.T) {
	w := newExWorld(t, auction.Reserve{CPCMicros: 100_000, CPMMicros: 1_000_000})
	w.catalog(`[{"id":"shoes","name":"Shoes"},{"id":"running","name":"Running","parentId":"shoes"},{"id":"red","name":"Red"},
		{"id":"x","name":"X","parentId":"never-upserted"}]`,
		`[{"id":"on","name":"On","vendors":["v1","v2"],"categories":["running"],"active":true,"imageURL":"https://img.example/on.png"},
		{"id":"off","name":"Off","vendors":["v1"],"categories":["red"],"active":false,"imageURL":"https://img.example/off.png"},
		{"id":"plain","name":"Plain","vendors":["v3"],"categories":["shoes"],"active":true},
		{"id":"pic","name":"Pic","vendors":["v3"],"categories":["red"],"active":true,"imageURL":"https://img.example/pic.png"},
		{"id":"under","name":"Under","vendors":["v5"],"categories":["x"],"active":true},
		{"id":"lone","name":"Lone","vendors":[],"active":true}]`)
	products := `"on","off","plain","pic","under","lone","gone"`
	cpm := func(c *campaigns.Campaign) { c.ChargeType = campaigns.ChargeCPM }
	banners := func(c *campaigns.Campaign) { c.Type = campaigns.TypeBanners }
	negPhrase := func(k string) func(*campaigns.Campaign) {
		return func(c *campaigns.Campaign) {
			c.NegativeKeywords = []campaigns.NegativeKeyword{{Keyword: k, MatchType: campaigns.MatchPhrase}}
		}
	}
	cases := []struct {
		vendor string
		edit   func(*campaigns.Campaign)
		bid    exBid
	}{
		{"v1", nil, "product:on:0.5"},
		{"v2", nil, "product:on:0.1"},                          // at the reserve
		{"v2", nil, "product:on:0.099999"},                     // below
		{"v1", cpm, "product:on:1"},                            // at the CPM reserve
		{"v1", cpm, "product:on:0.999999"},                     // below it
		{"v1", nil, "product:off:0.5"},                         // inactive
		{"v2", nil, "product:off:0.05"},                        // inactive and not permitted and below: inactive
		{"v3", nil, "product:on:0.5"},                          // not permitted
		{"v3", nil, "product:lone:0.5"},                        // no vendors at all
		{"v1", nil, "product:gone:0.5"},                        // not in the catalog
		{"v3", banners, "product:plain:0.5"},                   // banner without image
		{"v3", banners, "product:pic:0.5"},                     // with
		{"v3", banners, "product:pic:0.01"},                    // with, below the reserve
		{"v3", nil, "product:plain:0.5"},                       // listings need no image
		{"v1", nil, "keyword:running shoes:0.5"},               // v1 has an active product
		{"v4", nil, "keyword:running shoes:0.5"},               // v4 has none
		{"v1", nil, "keyword:running shoes:0.01"},              // below
		{"v3", banners, "keyword:running shoes:0.5"},           // pic has an image
		{"v1", banners, "keyword:red shoes:0.5"},               // on has one too
		{"v2", nil, "category:shoes:0.5"},                      // on is in running, below shoes
		{"v2", nil, "category:red:0.5"},                        // v2 has nothing in red
		{"v1", nil, "category:red:0.5"},                        // v1's off is in red, inactive
		{"v3", banners, "category:shoes:0.5"},                  // plain is in shoes, without image
		{"v3", banners, "category:red:0.5"},                    // pic is in red, with one
		{"v5", nil, "category:never-upserted:0.5"},             // under is in x, whose parent was never upserted
		{"v5", nil, "category:never-upserted:0.00001"},         // below
		{"v1", negPhrase("shoe"), "keyword:running shoes:0.5"}, // a negative phrase within the keyword
		{"v1", negPhrase("red"), "keyword:running shoes:0.5"},  // one that is not
	}
	type tc struct {
		c   campaigns.Campaign
		b   campaigns.Bid
		ok  bool
		why campaigns.Ineligibility
	}
	var all []tc
	for i, c := range cases {
		camp := w.campaign(fmt.Sprintf("case%d", i), c.vendor, c.edit, c.bid)
		bids := w.camps.BidsOf(exMP, camp.ID)
		if len(bids) != 1 {
			t.Fatalf("case %d: bids %+v", i, bids)
		}
		ok, why := w.camps.Eligibility(exMP, camp, bids[0])
		all = append(all, tc{camp, bids[0], ok, why})
	}
	eligible := 0
	for i, x := range all {
		kind := "listings"
		extra := ""
		if x.c.Type == campaigns.TypeBanners {
			kind, extra = "banners", `,"slotId":"s"`
		}
		var ctxJSON string
		switch x.b.TargetType {
		case campaigns.TargetProduct:
			ctxJSON = `"products":{"ids":[` + products + `]}`
		case campaigns.TargetKeyword: // a keyword-only auction (sponsored brand for listings campaigns)
			ctxJSON = `"searchQuery":"` + x.b.Target + `"`
		case campaigns.TargetCategory:
			ctxJSON = `"category":{"id":"` + x.b.Target + `"}`
		}
		endpoint, body := auction.Auctions, `{"auctions":[{"type":"`+kind+`","slots":40`+extra+`,`+ctxJSON+`}]}`
		if x.b.TargetType == campaigns.TargetKeyword && kind == "listings" {
			endpoint, body = auction.SponsoredBrand, `{"auctions":[{"winners":40,"placementId":"p","triggers":{"searchQuery":"`+x.b.Target+`"}}]}`
		}
		e := w.explain(endpoint, body)[0]
		reached, reasons := false, map[string]bool{}
		for _, c := range e.Candidates {
			if c.CampaignID != x.c.ID {
				continue
			}
			if c.Outcome == auction.Won || (c.Outcome == auction.Lost && c.Reason != auction.ReasonBelowReserve) {
				reached = true
			} else {
				reasons[c.Reason.String()] = true
			}
		}
		if reached != x.ok {
			t.Errorf("case %d %+v: eligibility says %v %+v, the engine %v (%v):\n%s", i, cases[i].bid, x.ok, x.why, reached, reasons, strings.Join(w.lines(e), "\n"))
			continue
		}
		if x.ok {
			eligible++
			continue
		}
		// The engine met the bid and gave the same reason; or never met it:
		// a category bid with no product in the category is never looked
		// at.
		if len(reasons) > 0 && (len(reasons) != 1 || !reasons[x.why.Reason]) {
			t.Errorf("case %d %+v: eligibility's reason %q, the engine's %v", i, cases[i].bid, x.why.Reason, reasons)
		}
		if len(reasons) == 0 && !(x.b.TargetType == campaigns.TargetCategory && x.why.Reason == campaigns.ReasonNoActiveProduct) {
			t.Errorf("case %d %+v: the engine never met the bid (%q)", i, cases[i].bid, x.why.Reason)
		}
		// Run agrees: it never wins.
		reqs, verr := auction.ParseAuctions([]byte(body), endpoint)
		if verr != nil {
			t.Fatal(verr)
		}
		res, err := w.engine.Run(context.Background(), w.market, endpoint, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for _, win := range res[0].Winners {
			if win.CampaignID == x.c.ID {
				t.Errorf("case %d %+v: ineligible, and won", i, cases[i].bid)
			}
		}
		auction.ReleaseResults(res)
		auction.Release(reqs)
	}
	if eligible < 10 || eligible == len(all) {
		t.Fatalf("%d of %d cases eligible: the table no longer tests both sides", eligible, len(all))
	}
}

// TestAutomatedBidCapped: an automated campaign bids 2 % of its daily
// budget times the product's quality, at most its maximum bid, both read
// from the index's copy of the campaign, which follows its changes.
func TestAutomatedBidCapped(t *testing.T) {
	w := newExWorld(t, auction.Reserve{CPCMicros: 10_000, CPMMicros: 100_000})
	w.catalog("", `[{"id":"q5","name":"Q5","vendors":["va"],"active":true,"quality_score":0.5},
		{"id":"q1","name":"Q1","vendors":["va"],"active":true}]`)
	auto := w.campaign("auto", "va", func(c *campaigns.Campaign) {
		c.Type, c.DailyBudgetMicros, c.MaxBidMicros = campaigns.TypeAutomated, 50_000_000, 700_000
	})
	bids := func() map[string]int64 {
		t.Helper()
		e := w.explain(auction.Auctions, `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["q5","q1"]}}]}`)[0]
		out := map[string]int64{}
		for _, c := range e.Candidates {
			out[c.ProductID] = c.BidMicros
		}
		return out
	}
	// 2 % of 50 is 1: × 0.5 is under the cap; × 1 (no score) is capped at 0.7.
	if got := bids(); got["q5"] != 500_000 || got["q1"] != 700_000 || len(got) != 2 {
		t.Fatalf("bids %v, want q5 500000 and q1 700000", got)
	}
	auto.MaxBidMicros, auto.DailyBudgetMicros = 0, 20_000_000
	if err := w.camps.Import(context.Background(), exMP, []campaigns.Campaign{auto}, nil); err != nil {
		t.Fatal(err)
	}
	if got := bids(); got["q5"] != 200_000 || got["q1"] != 400_000 || len(got) != 2 {
		t.Fatalf("after the change: bids %v, want q5 200000 and q1 400000", got)
	}
}
