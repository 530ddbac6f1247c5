// Package attribution attributes purchased items to the sponsored impressions
// and clicks that led to them (docs/design/attribution.md).
//
// The rule (Attribute) is a pure function of one purchase, its user's
// sponsored interactions and the marketplace's settings. The Projector
// recomputes a user's purchases whenever an event of that user is folded and
// stores the results in ClickHouse (attributed_purchases_raw, view
// attributed_purchases); Rows reads them back.
package attribution

import (
	"bytes"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/management/accounts"
)

// Default attribution windows of every ad format.
const (
	DefaultClickWindow      = 14 * 24 * time.Hour
	DefaultImpressionWindow = 24 * time.Hour
)

// Horizon is how late an event may arrive and still count: an event received
// more than this after it occurred is neither charged nor counted
// (records.Event.Countable). A purchase's attribution is final once
// everything received up to Horizon after it has been folded.
const Horizon = 30 * 24 * time.Hour

// Interaction kinds, as the interactions table names them.
const (
	Impression = "impression"
	Click      = "click"
)

// Match is how an interaction relates to a purchased item.
type Match uint8

const (
	// NoMatch: the interaction is not about the item.
	NoMatch Match = iota
	// Halo: the interaction's vendor sold the item (another product of the
	// same vendor, or the vendor itself was advertised).
	Halo
	// SameProduct: the interaction advertised the purchased product.
	SameProduct
)

// Reasons name the rule that attributed an item (column `reason`).
const (
	ReasonProductClick      = "product_click"
	ReasonProductImpression = "product_impression"
	ReasonHaloClick         = "halo_click"
	ReasonHaloImpression    = "halo_impression"
	ReasonNone              = "none" // not attributed
)

// Score is the weight of an attribution by its reason: 1 for a click on the
// purchased product, halving for an impression, and quartering again for a
// same-vendor (halo) match. Exact binary fractions, so that sums are exact.
func Score(reason string) float64 {
	switch reason {
	case ReasonProductClick:
		return 1
	case ReasonProductImpression:
		return 0.5
	case ReasonHaloClick:
		return 0.25
	case ReasonHaloImpression:
		return 0.125
	}
	return 0
}

func reasonOf(m Match, kind string) string {
	switch {
	case m == SameProduct && kind == Click:
		return ReasonProductClick
	case m == SameProduct:
		return ReasonProductImpression
	case m == Halo && kind == Click:
		return ReasonHaloClick
	case m == Halo:
		return ReasonHaloImpression
	}
	return ReasonNone
}

// Window is how long after an interaction a purchase may be attributed to
// it, by kind. 0: never.
type Window struct {
	Click, Impression time.Duration
}

// Rules are one marketplace's attribution settings, defaults applied.
type Rules struct {
	// Windows by ad format (listings, banners, sponsored_brand, hotels,
	// flights). An interaction of another format is never credited.
	Windows map[string]Window
	// Halo: a purchased item may be attributed to an interaction with the
	// item's vendor when no interaction with the product itself qualifies.
	Halo bool
	// Revision of the settings (accounts.AttributionSettings.Revision): the
	// high bits of every row version, so that rows computed under newer
	// settings replace older ones.
	Revision int64
}

// DefaultRules are the rules of a marketplace with no settings.
func DefaultRules() Rules { return RulesOf(nil) }

// RulesOf applies a marketplace's settings over the defaults.
func RulesOf(a *accounts.AttributionSettings) Rules {
	r := Rules{Windows: make(map[string]Window, len(accounts.AttributionAdFormats)), Halo: true}
	for _, f := range accounts.AttributionAdFormats {
		r.Windows[f] = Window{Click: DefaultClickWindow, Impression: DefaultImpressionWindow}
	}
	if a == nil {
		return r
	}
	for f, w := range a.Windows {
		if _, ok := r.Windows[f]; ok {
			r.Windows[f] = Window{Click: time.Duration(w.ClickSeconds) * time.Second, Impression: time.Duration(w.ImpressionSeconds) * time.Second}
		}
	}
	r.Halo, r.Revision = !a.NoHalo, a.Revision
	return r
}

// Window returns the window of an interaction kind of an ad format (0 when
// either is unknown).
func (r Rules) Window(adFormat, kind string) time.Duration {
	w := r.Windows[adFormat]
	switch kind {
	case Click:
		return w.Click
	case Impression:
		return w.Impression
	}
	return 0
}

// MaxWindow is the longest window of any format and kind: how far after an
// interaction a purchase it may be credited for can be.
func (r Rules) MaxWindow() time.Duration {
	var m time.Duration
	for _, w := range r.Windows {
		m = max(m, w.Click, w.Impression)
	}
	return m
}

// Touch is one sponsored impression or click of a user (a row of
// attribution_touches_raw).
type Touch struct {
	Kind          string // Impression or Click
	EventID       string
	InteractionID uuid.UUID
	OccurredMs    int64
	ReceivedMs    int64
	AuctionID     uuid.UUID
	AuctionMs     int64
	Rank          uint8
	AdFormat      string
	ChargeType    string
	CampaignID    string
	VendorID      string // the winner's vendor (the campaign's)
	// The advertised entity (the auction winner) and the event's
	// additionalAttribution; a product among them is "the product" of the
	// interaction.
	EntityType, EntityID string
	AAType, AAID         string
	// EntityHashed: the token carried the winner's id hashed; EntityID is
	// taken from auction_winners (empty while that record is missing).
	EntityHashed bool
}

// matches says how t relates to a purchased product sold by vendor.
func (t *Touch) matches(productID, vendor string, halo bool) Match {
	if (t.EntityType == "product" && t.EntityID == productID) || (t.AAType == "product" && t.AAID == productID) {
		return SameProduct
	}
	if halo && vendor != "" && t.VendorID == vendor {
		return Halo
	}
	return NoMatch
}

// Purchase is one purchase event and its items.
type Purchase struct {
	EventID    string
	UserID     string
	OccurredMs int64
	ReceivedMs int64
	Items      []Item
}

// Item is one purchased item.
type Item struct {
	ProductID       string
	UnitPriceMicros int64
	Quantity        int64
	// VendorID is the item's vendorId; when the purchase does not say, the
	// caller may fill it in from the catalog (the product's only vendor).
	VendorID string
}

// Result is the attribution of one purchased item.
type Result struct {
	ItemIndex int
	Reason    string // ReasonNone when not attributed
	Score     float64
	Window    time.Duration // the window the credited interaction was within
	Touch     *Touch        // nil when not attributed
	// Version orders the computations of one item: the settings revision in
	// the high 20 bits, then the latest receipt time (Unix ms) of the
	// purchase and of the interactions that qualified for the item. It never
	// decreases as more events become visible (the qualifying set only
	// grows), so a computation from fewer events never replaces one from
	// more; equal versions keep the row inserted last.
	Version uint64
}

// Attributed says whether the item was credited to an interaction.
func (r *Result) Attributed() bool { return r.Touch != nil }

// candidate is a qualifying interaction for one item.
type candidate struct {
	t      *Touch
	match  Match
	window time.Duration
}

// better says whether a beats b: a same-product match beats a halo one; then
// a click beats an impression; then the later interaction wins; then the
// later auction; then the smaller interaction id (only to make the choice
// total and independent of input order).
func better(a, b *candidate) bool {
	if a.match != b.match {
		return a.match > b.match
	}
	if (a.t.Kind == Click) != (b.t.Kind == Click) {
		return a.t.Kind == Click
	}
	if a.t.OccurredMs != b.t.OccurredMs {
		return a.t.OccurredMs > b.t.OccurredMs
	}
	if a.t.AuctionMs != b.t.AuctionMs {
		return a.t.AuctionMs > b.t.AuctionMs
	}
	return bytes.Compare(a.t.InteractionID[:], b.t.InteractionID[:]) < 0
}

// qualify returns t as a candidate for an item bought at purchaseMs, or
// false: it must have occurred at or before the purchase, within its
// format's window for its kind, from an auction held at or before the
// purchase and at most Horizon before it (as for charging: a token older
// than that is not charged either), and be about the product (or, with
// halo, its vendor).
func qualify(t *Touch, it *Item, purchaseMs int64, r *Rules) (candidate, bool) {
	w := r.Window(t.AdFormat, t.Kind)
	if w <= 0 || t.OccurredMs > purchaseMs || purchaseMs-t.OccurredMs > w.Milliseconds() ||
		t.AuctionMs > purchaseMs || purchaseMs-t.AuctionMs > Horizon.Milliseconds() {
		return candidate{}, false
	}
	m := t.matches(it.ProductID, it.VendorID, r.Halo)
	if m == NoMatch {
		return candidate{}, false
	}
	return candidate{t: t, match: m, window: w}, true
}

// Attribute attributes every item of p to at most one of touches (the
// user's sponsored interactions, in any order), each item independently: an
// interaction may be credited with several items and purchases. The result
// does not depend on the order of touches.
func Attribute(p *Purchase, touches []Touch, r *Rules) []Result {
	out := make([]Result, len(p.Items))
	for i := range p.Items {
		it := &p.Items[i]
		res := Result{ItemIndex: i, Reason: ReasonNone}
		latest := p.ReceivedMs
		var best candidate
		for k := range touches {
			c, ok := qualify(&touches[k], it, p.OccurredMs, r)
			if !ok {
				continue
			}
			latest = max(latest, c.t.ReceivedMs)
			if best.t == nil || better(&c, &best) {
				best = c
			}
		}
		if best.t != nil {
			res.Touch, res.Window = best.t, best.window
			res.Reason = reasonOf(best.match, best.t.Kind)
			res.Score = Score(res.Reason)
		}
		res.Version = version(r.Revision, latest)
		out[i] = res
	}
	return out
}

// versionTimeBits is how many low bits of a version hold the receipt time.
const versionTimeBits = 44 // Unix ms up to the year 2527

func version(revision, receivedMs int64) uint64 {
	return uint64(revision)<<versionTimeBits | uint64(max(receivedMs, 0))&(1<<versionTimeBits-1)
}
