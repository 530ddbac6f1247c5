package auction

import (
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
)

var adFormats = [...]bidtoken.AdFormat{
	KindListings: bidtoken.Listings, KindBanners: bidtoken.Banners, KindSponsoredBrand: bidtoken.SponsoredBrand,
	KindHotels: bidtoken.Hotels, KindFlights: bidtoken.Flights,
}

func (a *auctionEnv) winner(keys *bidtoken.Keyring, auctionID uuid.UUID, pl Placement) (Winner, RecordWinner, error) {
	st := a.st
	b := &st.bids[st.candBid[pl.Cand]]
	c := st.camps[b.camp].c
	p := &st.prods[b.prod]
	cand := &st.cands[pl.Cand]

	campaignID, err := uuid.Parse(c.ID)
	if err != nil {
		return Winner{}, RecordWinner{}, err
	}
	claims := bidtoken.Claims{
		MarketplaceID: a.m.UUID, AuctionID: auctionID, CampaignID: campaignID,
		AuctionTimeMs: a.at.UnixMilli(), ChargeType: bidtoken.CPC, AdFormat: adFormats[a.r.Kind],
		Rank: uint8(pl.Rank), PriceMicros: pl.PriceMicros, WinnerType: bidtoken.WinnerProduct,
		WinnerID: p.id, VendorID: c.VendorID,
	}
	if cand.CPM {
		claims.ChargeType = bidtoken.CPM
	}
	if b.bidID != "" {
		if bid, err := uuid.Parse(b.bidID); err == nil {
			claims.BidID = bid
		}
	}
	tok, err := keys.Encode(claims)
	if err != nil {
		return Winner{}, RecordWinner{}, err
	}
	w := Winner{
		Rank: pl.Rank, Type: "product", ID: p.id, ResolvedBidID: tok, CampaignID: c.ID, VendorID: c.VendorID,
		VariationID: a.variationOf(p),
	}
	switch a.r.Kind {
	case KindBanners:
		if cr, ok := a.e.Catalog.Creative(a.mp, p.id); ok {
			w.AssetURL = cr.ImageURL
		}
	case KindSponsoredBrand:
		w.Headline = c.Name
		if v, ok := a.e.Catalog.Vendor(a.mp, c.VendorID); ok {
			w.BrandName = v.Name
		}
		w.ProductIDs = a.vendorProducts(cand.Group, p.id)
	}
	rw := RecordWinner{
		Rank: pl.Rank, Type: w.Type, EntityID: w.ID, CampaignID: c.ID, VendorID: c.VendorID, BidID: b.bidID,
		BidTarget: specNames[b.spec], ChargeType: claims.ChargeType.String(), BidMicros: b.amount,
		PriceMicros: pl.PriceMicros, QualityPPM: cand.QualityPPM, VariationID: w.VariationID,
	}
	return w, rw, nil
}

// variationOf is the variationID the request gave with p ("" for none).
func (a *auctionEnv) variationOf(p *prod) string {
	if p.variation < 0 {
		return ""
	}
	return a.r.VariationIDs[p.variation]
}

// MaxBrandProducts is how many products a sponsored-brand winner lists.
const MaxBrandProducts = 3

// vendorProducts lists the best products (by score order) of a vendor group
// in this auction, first the winning one.
func (a *auctionEnv) vendorProducts(group int32, first string) []string {
	out := []string{first}
	for i := 0; len(out) < MaxBrandProducts; i++ {
		ci, ok := a.st.rk.at(i)
		if !ok {
			break
		}
		c := &a.st.cands[ci]
		if id := a.st.prods[c.Product].id; c.Group == group && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func newRecord(id uuid.UUID, m *Market, endpoint EndpointKind, r *Request, idx int, at time.Time) Record {
	rec := Record{
		ID: id.String(), MarketplaceID: m.ID, At: at, Endpoint: endpoint.String(), Kind: r.Kind.String(), Index: idx,
		Slots: r.Slots, ProductCount: len(r.ProductIDs), SearchQuery: r.SearchQuery, SlotID: r.SlotID,
		Device: r.Device, PlacementID: r.PlacementID, PlacementName: r.PlacementName, OpaqueUserID: r.OpaqueUserID,
		ExperimentVariant: r.ExperimentVariant, Locations: r.Locations,
	}
	if r.Location != "" {
		rec.Locations = []string{r.Location}
	}
	if r.Category != nil {
		rec.Category = r.Category.String()
	}
	if r.Page != nil {
		rec.PageType, rec.PageID, rec.PageValue = r.Page.Type, r.Page.ID, r.Page.Value
	}
	return rec
}

// String is the category context in canonical text: `id`, `a&b` for ids (in
// all), `(a|b)&(c)` for disjunctions.
func (c *CategoryFilter) String() string {
	switch {
	case c.ID != "":
		return c.ID
	case len(c.IDs) > 0:
		return strings.Join(c.IDs, "&")
	}
	parts := make([]string, len(c.Disjunctions))
	for i, d := range c.Disjunctions {
		parts[i] = "(" + strings.Join(d, "|") + ")"
	}
	return strings.Join(parts, "&")
}
