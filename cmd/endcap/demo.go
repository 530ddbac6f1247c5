//go:build dev

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/storage/statelog"
)

// The demo marketplace's catalog and campaigns, written through the same
// services as the API, so that `make run` answers auctions with winners at
// once (README). Seeded when the demo marketplace has no product yet.
const (
	demoVendors = `[{"id":"v-acme","name":"Acme Running"},{"id":"v-nimbus","name":"Nimbus Outdoor"},{"id":"v-pico","name":"Pico Kids"}]`

	demoCategories = `[{"id":"shoes","name":"Shoes"},{"id":"running","name":"Running shoes","parentId":"shoes"},
		{"id":"hiking","name":"Hiking shoes","parentId":"shoes"},{"id":"kids","name":"Kids"}]`

	demoProducts = `[
		{"id":"p-1","name":"Acme Road Runner","vendors":["v-acme"],"categories":["running"],"price":89.90,"active":true,"quality_score":0.9,"imageURL":"https://picsum.photos/seed/p1/400"},
		{"id":"p-2","name":"Acme Trail Pro","vendors":["v-acme"],"categories":["running","hiking"],"price":129,"active":true,"quality_score":0.7,"imageURL":"https://picsum.photos/seed/p2/400"},
		{"id":"p-3","name":"Nimbus Summit","vendors":["v-nimbus"],"categories":["hiking"],"price":149,"active":true,"quality_score":0.8,"imageURL":"https://picsum.photos/seed/p3/400"},
		{"id":"p-4","name":"Nimbus Day Hiker","vendors":["v-nimbus","v-acme"],"categories":["hiking"],"price":99,"active":true,"imageURL":"https://picsum.photos/seed/p4/400"},
		{"id":"p-5","name":"Pico Sprint Junior","vendors":["v-pico"],"categories":["running","kids"],"price":49,"active":true,"quality_score":0.6,"imageURL":"https://picsum.photos/seed/p5/400"},
		{"id":"p-6","name":"Pico Puddle Boots","vendors":["v-pico"],"categories":["kids"],"price":39,"active":false}]`
)

type demoCampaign struct {
	vendor string
	body   string
	bids   []string // bid bodies
}

var demoCampaigns = []demoCampaign{
	{"v-acme", `{"name":"Acme spring sale","type":"listings","chargeType":"CPC","dailyBudget":50,"startDate":"2024-01-01T00:00:00Z"}`,
		[]string{`{"targetType":"product","target":"p-1","bidAmount":0.80}`, `{"targetType":"product","target":"p-2","bidAmount":0.60}`,
			`{"targetType":"keyword","target":"running shoes","bidAmount":0.50}`}},
	{"v-nimbus", `{"name":"Nimbus hiking","type":"listings","chargeType":"CPC","dailyBudget":30,"startDate":"2024-01-01T00:00:00Z"}`,
		[]string{`{"targetType":"category","target":"hiking","bidAmount":0.70}`, `{"targetType":"product","target":"p-3","bidAmount":0.90}`}},
	{"v-pico", `{"name":"Pico always on","type":"automated","dailyBudget":20,"maxBid":0.40,"startDate":"2024-01-01T00:00:00Z"}`, nil},
	{"v-acme", `{"name":"Acme banner","type":"banners","chargeType":"CPM","dailyBudget":20,"startDate":"2024-01-01T00:00:00Z"}`,
		[]string{`{"targetType":"keyword","target":"shoes","bidAmount":4}`}},
}

// seedDemo writes the demo catalog when the marketplace has no product, and
// the demo campaigns with a reserve price of 0.05 per click and 0.50 per
// 1,000 impressions when it has no campaign (so a start interrupted half-way
// is completed by the next one, and nothing the user changed is rewritten).
func seedDemo(ctx context.Context, a *app.App, mp string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if a.Catalog.ProductCount(mp) == 0 {
		if err := seedDemoCatalog(ctx, a, mp); err != nil {
			return err
		}
	}
	hasCampaign := false
	a.Campaigns.EachCampaign(mp, func(campaigns.Campaign) bool { hasCampaign = true; return false })
	if hasCampaign {
		return nil
	}
	return seedDemoCampaigns(ctx, a, mp)
}

func seedDemoCatalog(ctx context.Context, a *app.App, mp string) error {
	var vendors []catalog.VendorInput
	var cats []catalog.CategoryInput
	if err := json.Unmarshal([]byte(demoVendors), &vendors); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(demoCategories), &cats); err != nil {
		return err
	}
	products, _, ok := catalog.DecodeProducts([]byte(`{"products":` + demoProducts + `}`))
	if !ok {
		return fmt.Errorf("demo products do not decode")
	}
	if _, err := a.Catalog.UpsertVendors(ctx, mp, vendors, true, statelog.MatchAny); err != nil {
		return err
	}
	if _, err := a.Catalog.UpsertCategories(ctx, mp, cats, true, statelog.MatchAny); err != nil {
		return err
	}
	_, err := a.Catalog.UpsertProducts(ctx, mp, products, true, statelog.MatchAny)
	return err
}

func seedDemoCampaigns(ctx context.Context, a *app.App, mp string) error {
	for _, dc := range demoCampaigns {
		var in campaigns.CampaignInput
		if err := json.Unmarshal([]byte(dc.body), &in); err != nil {
			return err
		}
		c, _, err := a.Campaigns.CreateCampaign(ctx, mp, dc.vendor, in)
		if err != nil {
			return fmt.Errorf("demo campaign %s: %w", dc.body, err)
		}
		for _, b := range dc.bids {
			var bin campaigns.BidInput
			if err := json.Unmarshal([]byte(b), &bin); err != nil {
				return err
			}
			if _, _, _, err := a.Campaigns.CreateBid(ctx, mp, c.ID, bin); err != nil {
				return fmt.Errorf("demo bid %s: %w", b, err)
			}
		}
	}
	_, err := a.Accounts.SetReserve(ctx, mp, 50_000, 500_000)
	return err
}
