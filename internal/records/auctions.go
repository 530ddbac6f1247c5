package records

import (
	"fmt"
	"strconv"
	"time"

	"github.com/endcap/endcap/internal/jsontext"
)

// Auction is one auction as the auctions topic carries it: the request's
// context, every winner and its cleared price. It is JSON on the topic, keyed
// by the marketplace id. The projector folds it into ClickHouse tables
// `auctions` and `auction_winners` (docs/design/auctions-pipeline.md).
//
// A Record is written after the caller got its answer and may be lost (the
// publisher drops it rather than make an auction wait): nothing that moves
// money reads it. Charging reads the resolvedBidId alone, which carries the
// campaign, the price and the charge type; (ID, Rank) joins a charge to the
// winner here when the record exists.
type Auction struct {
	ID            string    `json:"id"` // auction id: a UUIDv7 in canonical text
	MarketplaceID string    `json:"marketplaceId"`
	At            time.Time `json:"at"`       // when the auction ran, UTC, millisecond precision
	Endpoint      string    `json:"endpoint"` // auctions | sponsored-brand | travel (auction.EndpointKind.String)
	Kind          string    `json:"kind"`     // listings | banners | sponsored_brand | hotels | flights (auction.Kind.String)
	Index         int       `json:"index"`    // position of the auction in its request, from 0
	Slots         int       `json:"slots"`

	// The request's context. Products are counted, not listed (a request may
	// name 10,000).
	ProductCount      int      `json:"productCount,omitempty"`
	Category          string   `json:"category,omitempty"` // canonical text, see auction.CategoryFilter.String
	SearchQuery       string   `json:"searchQuery,omitempty"`
	SlotID            string   `json:"slotId,omitempty"`
	Device            string   `json:"device,omitempty"`
	PlacementID       int      `json:"placementId,omitempty"`
	PlacementName     string   `json:"placementName,omitempty"`
	Locations         []string `json:"locations,omitempty"` // H3 cells, or the plain `location` string as one element
	OpaqueUserID      string   `json:"opaqueUserId,omitempty"`
	PageType          string   `json:"pageType,omitempty"`
	PageID            string   `json:"pageId,omitempty"`
	PageValue         []string `json:"pageValue,omitempty"`
	ExperimentVariant string   `json:"experimentVariant,omitempty"`

	// Candidates is the number of eligible bids that competed (after
	// eligibility, before one-winner-per-product and slots).
	Candidates int `json:"candidates"`
	// Error is true when this auction failed at run time (the caller got
	// `error: true` and no winners for it).
	Error   bool            `json:"error,omitempty"`
	Winners []AuctionWinner `json:"winners"`
}

// AuctionWinner is one winner of an auction.
type AuctionWinner struct {
	Rank        int    `json:"rank"`     // 1-based
	Type        string `json:"type"`     // product | vendor | brand | url
	EntityID    string `json:"entityId"` // the winner's `id` on the wire
	CampaignID  string `json:"campaignId"`
	VendorID    string `json:"vendorId"`
	BidID       string `json:"bidId,omitempty"` // empty for automated campaigns
	BidTarget   string `json:"bidTarget"`       // product | category | keyword | automated: which bid applied
	ChargeType  string `json:"chargeType"`      // CPC | CPM
	BidMicros   int64  `json:"bidMicros"`       // the bid, micro-units (CPC: per click; CPM: per 1,000 impressions)
	PriceMicros int64  `json:"priceMicros"`     // the cleared price, same unit as BidMicros
	QualityPPM  int64  `json:"qualityPpm"`      // the quality the score used, parts per million (1..1,000,000)
	VariationID string `json:"variationId,omitempty"`
}

// AppendJSON appends the record's JSON, the auctions topic's form, to b:
// the same document as encoding/json writes for it (same keys, order and
// omissions), without reflection and into a buffer the caller may reuse.
// Strings are escaped as jsontext.AppendString does (<, > and & as
// themselves, where encoding/json writes \u003c…; both decode alike). It
// fails, as encoding/json does, only for a time outside years 0–9999.
func (r *Auction) AppendJSON(b []byte) ([]byte, error) {
	if y := r.At.Year(); y < 0 || y > 9999 {
		return b, fmt.Errorf("auction record %s: time %v outside years 0-9999", r.ID, r.At)
	}
	str := func(key, v string) {
		b = append(b, key...)
		b = jsontext.AppendString(b, v)
	}
	num := func(key string, v int64) {
		b = append(b, key...)
		b = strconv.AppendInt(b, v, 10)
	}
	list := func(key string, vs []string) {
		b = append(b, key...)
		b = append(b, '[')
		for i, v := range vs {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsontext.AppendString(b, v)
		}
		b = append(b, ']')
	}
	str(`{"id":`, r.ID)
	str(`,"marketplaceId":`, r.MarketplaceID)
	b = append(b, `,"at":"`...)
	b = r.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	str(`,"endpoint":`, r.Endpoint)
	str(`,"kind":`, r.Kind)
	num(`,"index":`, int64(r.Index))
	num(`,"slots":`, int64(r.Slots))
	if r.ProductCount != 0 {
		num(`,"productCount":`, int64(r.ProductCount))
	}
	for _, f := range [...]struct{ key, v string }{
		{`,"category":`, r.Category}, {`,"searchQuery":`, r.SearchQuery},
		{`,"slotId":`, r.SlotID}, {`,"device":`, r.Device},
	} {
		if f.v != "" {
			str(f.key, f.v)
		}
	}
	if r.PlacementID != 0 {
		num(`,"placementId":`, int64(r.PlacementID))
	}
	if r.PlacementName != "" {
		str(`,"placementName":`, r.PlacementName)
	}
	if len(r.Locations) > 0 {
		list(`,"locations":`, r.Locations)
	}
	for _, f := range [...]struct{ key, v string }{
		{`,"opaqueUserId":`, r.OpaqueUserID}, {`,"pageType":`, r.PageType}, {`,"pageId":`, r.PageID},
	} {
		if f.v != "" {
			str(f.key, f.v)
		}
	}
	if len(r.PageValue) > 0 {
		list(`,"pageValue":`, r.PageValue)
	}
	if r.ExperimentVariant != "" {
		str(`,"experimentVariant":`, r.ExperimentVariant)
	}
	num(`,"candidates":`, int64(r.Candidates))
	if r.Error {
		b = append(b, `,"error":true`...)
	}
	if r.Winners == nil {
		return append(b, `,"winners":null}`...), nil
	}
	b = append(b, `,"winners":[`...)
	for i := range r.Winners {
		w := &r.Winners[i]
		if i > 0 {
			b = append(b, ',')
		}
		num(`{"rank":`, int64(w.Rank))
		str(`,"type":`, w.Type)
		str(`,"entityId":`, w.EntityID)
		str(`,"campaignId":`, w.CampaignID)
		str(`,"vendorId":`, w.VendorID)
		if w.BidID != "" {
			str(`,"bidId":`, w.BidID)
		}
		str(`,"bidTarget":`, w.BidTarget)
		str(`,"chargeType":`, w.ChargeType)
		num(`,"bidMicros":`, w.BidMicros)
		num(`,"priceMicros":`, w.PriceMicros)
		num(`,"qualityPpm":`, w.QualityPPM)
		if w.VariationID != "" {
			str(`,"variationId":`, w.VariationID)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}
