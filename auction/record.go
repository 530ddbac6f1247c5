package auction

import "time"

// Record is one auction as the auctions topic carries it: the request's
// context, every winner and its cleared price. It is JSON on the topic, keyed
// by the marketplace id. The projector folds it into ClickHouse tables
// `auctions` and `auction_winners` (docs/auctions-pipeline.md).
//
// A Record is written after the caller got its answer and may be lost (the
// publisher drops it rather than make an auction wait): nothing that moves
// money reads it. Charging reads the resolvedBidId alone, which carries the
// campaign, the price and the charge type; (ID, Rank) joins a charge to the
// winner here when the record exists.
type Record struct {
	ID            string    `json:"id"` // auction id: a UUIDv7 in canonical text
	MarketplaceID string    `json:"marketplaceId"`
	At            time.Time `json:"at"`       // when the auction ran, UTC, millisecond precision
	Endpoint      string    `json:"endpoint"` // auctions | sponsored-brand | travel (EndpointKind.String)
	Kind          string    `json:"kind"`     // listings | banners | sponsored_brand | hotels | flights (Kind.String)
	Index         int       `json:"index"`    // position of the auction in its request, from 0
	Slots         int       `json:"slots"`

	// The request's context. Products are counted, not listed (a request may
	// name 10,000).
	ProductCount      int      `json:"productCount,omitempty"`
	Category          string   `json:"category,omitempty"` // canonical text, see CategoryFilter.String
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
	Error   bool           `json:"error,omitempty"`
	Winners []RecordWinner `json:"winners"`
}

// RecordWinner is one winner of an auction.
type RecordWinner struct {
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

// Recorder takes auction records without blocking: an implementation
// queues them for the auctions topic and drops (and counts) what it cannot
// queue. It must not keep r nor its strings once Record returns: they
// share the request's bytes, reused after the request (Release).
type Recorder interface {
	Record(r *Record)
}
