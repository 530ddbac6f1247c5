package campaigns

import (
	"math"
	"math/bits"
	"sort"

	"github.com/endcap/endcap/internal/validation"
	"github.com/endcap/endcap/management/entityref"
)

// The bidding strategy of automated campaigns (docs/reference/campaigns.md):
//
//   - targets: every product of the catalog that lists the campaign's vendor
//     among the vendors allowed to promote it; a bid is active when the
//     product is active. Computed at read time, so new, deactivated and
//     deleted products are reflected at once.
//   - amount: dailyBudget × 2% × qualityScore (1 when the product has none),
//     rounded down to 0.01, at least 0.01, and at most the campaign's maxBid
//     when it has one.
//
// A 2% share means the daily budget pays for about 50 clicks (CPC) or
// 50 000 impressions (CPM) at the full bid; the quality score lowers the
// bid on products the marketplace rates as less relevant.
const (
	autoBudgetSharePercent = 2
	autoRoundingMicros     = 10_000 // 0.01
	autoMinBidMicros       = 10_000 // 0.01
)

// AutomatedBidMicros is the bid amount (micro-units) of an automated
// campaign on a product with the given quality score (0 when not set).
func AutomatedBidMicros(c Campaign, qualityScore float64) int64 {
	return AutomatedBid(c.DailyBudgetMicros, c.MaxBidMicros, qualityScore)
}

// AutomatedBid is AutomatedBidMicros of a campaign with daily budget
// dailyMicros and maximum bid maxBidMicros (0: none): what the auction
// calls with its copies of the two, reading no more of the campaign.
func AutomatedBid(dailyMicros, maxBidMicros int64, qualityScore float64) int64 {
	qs := int64(MicrosPerUnit) // quality score in parts per million
	if qualityScore > 0 && qualityScore <= 1 {
		qs = int64(math.Round(qualityScore * MicrosPerUnit))
	}
	// daily × share% × quality, in 128 bits: daily ≤ 10^15 µ and
	// share × quality ≤ 2 × 10^6, so the product needs up to 71 bits and the
	// quotient fits 64 (it is at most 2% of the daily budget).
	hi, lo := bits.Mul64(uint64(max(dailyMicros, 0)), uint64(autoBudgetSharePercent*qs))
	q, _ := bits.Div64(hi, lo, 100*MicrosPerUnit)
	amount := int64(q) / autoRoundingMicros * autoRoundingMicros
	amount = max(amount, autoMinBidMicros)
	if maxBidMicros > 0 {
		amount = min(amount, maxBidMicros)
	}
	return amount
}

// AutoBidJSON is one bid of an automated campaign on the wire (the spec's
// "target with bid").
type AutoBidJSON struct {
	Target    string `json:"target"`
	BidAmount Micros `json:"bidAmount"`
	IsActive  bool   `json:"isActive"`
}

// vendorProducts returns the products a vendor may promote, by id.
func (s *Service) vendorProducts(mp, vendorID string) []entityref.ProductRef {
	var ps []entityref.ProductRef
	s.cat.EachProductOfVendor(mp, vendorID, func(p entityref.ProductRef) bool {
		if p.Vendors.Contains(vendorID) {
			ps = append(ps, p)
		}
		return true
	})
	sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
	return ps
}

// AutomatedBids returns up to limit bids of an automated campaign, by
// product id after the id after, and whether more follow.
func (s *Service) AutomatedBids(mp, campaignID, after string, limit int) ([]AutoBidJSON, bool, error) {
	c, _, ok := s.campaigns.Get(mp, campaignID)
	if !ok {
		return nil, false, notFoundCampaign(campaignID)
	}
	if c.Type != TypeAutomated {
		return nil, false, validation.New(validation.ValueError,
			"campaign "+campaignID+" is a "+c.Type+" campaign, not an automated one: its bids are at GET /public/v1/campaign-service/campaigns/"+campaignID+"/bids",
			"path", "campaign-id")
	}
	ps := s.vendorProducts(mp, c.VendorID)
	i := sort.Search(len(ps), func(i int) bool { return ps[i].ID > after })
	ps = ps[i:]
	more := len(ps) > limit
	if more {
		ps = ps[:limit]
	}
	out := make([]AutoBidJSON, len(ps))
	for i, p := range ps {
		out[i] = AutoBidJSON{Target: p.ID, BidAmount: Micros(AutomatedBidMicros(c, p.QualityScore)), IsActive: p.Active}
	}
	return out, more, nil
}
