package campaigns

import (
	"slices"

	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/management/entityref"
)

// Ineligibility says why a bid cannot win an auction: Reason is a stable
// code (the Reason* constants), Message a sentence for people.
type Ineligibility struct {
	Reason  string
	Message string
}

// Eligibility reports whether bid b of campaign c can win an auction, as
// far as the bid, its target and the marketplace are concerned, and if not
// why. This is the one place the rule lives (docs/reference/campaigns.md); it says
// what the auction engine does (auction/engine_eligibility.go, docs/design/auction-ranking.md),
// and a test holds the two together. In this order:
//
//   - a product bid needs its product to exist (product_not_found), to be
//     active (product_inactive), to list the campaign's vendor among its
//     vendors (vendor_not_permitted) and, for a banners campaign, to have an
//     imageURL (product_without_image);
//   - a keyword bid needs an active product of the vendor, a category bid
//     one in the category or below it (no_active_product): the products
//     such a bid can promote; for a banners campaign, one of them with an
//     imageURL (product_without_image);
//   - a keyword bid must not contain a negative phrase keyword of its
//     campaign or of its own: every search it matches would be excluded
//     (negative_keyword);
//   - any bid must be at least the marketplace's reserve price of the
//     campaign's charge type (below_reserve).
//
// Not considered: the bid's own isActive flag and the campaign's state
// (status, budgets, targeting), which the API shows beside it.
func (s *Service) Eligibility(mp string, c Campaign, b Bid) (bool, Ineligibility) {
	banners := c.Type == TypeBanners
	switch b.TargetType {
	case TargetProduct:
		p, ok := s.cat.Product(mp, b.Target)
		switch {
		case !ok:
			return false, Ineligibility{ReasonProductNotFound, "product " + b.Target + " is not in the catalog"}
		case !p.Active:
			return false, Ineligibility{ReasonProductInactive, "product " + b.Target + " is not active"}
		case !p.Vendors.Contains(c.VendorID):
			return false, Ineligibility{ReasonVendorNotPermitted, "vendor " + c.VendorID + " is not among the vendors of product " + b.Target}
		case banners && s.cat.ProductImageURL(mp, b.Target) == "":
			return false, Ineligibility{ReasonProductNoImage, "product " + b.Target + " has no imageURL, which a banner shows"}
		}
	case TargetKeyword, TargetCategory:
		active, shown := s.promotable(mp, c.VendorID, b, banners)
		where := ""
		if b.TargetType == TargetCategory {
			where = " in category " + b.Target + " or below it"
		}
		switch {
		case !active:
			return false, Ineligibility{ReasonNoActiveProduct, "vendor " + c.VendorID + " has no active product" + where}
		case !shown:
			return false, Ineligibility{ReasonProductNoImage, "no active product of vendor " + c.VendorID + where + " has an imageURL, which a banner shows"}
		}
		if why, ok := negativeIneligibility(c, b); ok {
			return false, why
		}
	}
	if s.mkt != nil {
		cpc, cpm := s.mkt.Reserve(mp)
		reserve := cpc
		if c.ChargeType == ChargeCPM {
			reserve = cpm
		}
		if b.AmountMicros < reserve {
			return false, Ineligibility{ReasonBelowReserve, "the bid " + money.Micros(b.AmountMicros).String() +
				" is below the marketplace's " + c.ChargeType + " reserve price " + money.Micros(reserve).String()}
		}
	}
	return true, Ineligibility{}
}

// promotable reports whether the vendor has an active product that a
// keyword or category bid can promote: any (keyword), one in the bid's
// category or below it (category); and whether one of them has an
// imageURL, when banners (else shown is active). It stops at the first
// that does.
func (s *Service) promotable(mp, vendorID string, b Bid, banners bool) (active, shown bool) {
	var inCat map[string]bool // category -> it is the bid's category or below it
	s.cat.EachProductOfVendor(mp, vendorID, func(p entityref.ProductRef) bool {
		if !p.Active {
			return true
		}
		if b.TargetType == TargetCategory {
			if inCat == nil {
				inCat = map[string]bool{}
			}
			in := false
			for pc := range p.Categories.All() {
				v, seen := inCat[pc]
				if !seen {
					v = s.inCategory(mp, pc, b.Target)
					inCat[pc] = v
				}
				if in = v; in {
					break
				}
			}
			if !in {
				return true
			}
		}
		active = true
		shown = !banners || s.cat.ProductImageURL(mp, p.ID) != ""
		return !shown
	})
	return active, shown
}

// inCategory reports whether category c is target or below it, following
// parentIds as the auction's index does: c itself, then parents while the
// category is known, at most 64 steps, stopping at a cycle.
func (s *Service) inCategory(mp, c, target string) bool {
	var seen []string
	for c != "" && len(seen) < 64 && !slices.Contains(seen, c) {
		if c == target {
			return true
		}
		seen = append(seen, c)
		parent, known := s.cat.CategoryParent(mp, c)
		if !known {
			return false
		}
		c = parent
	}
	return false
}
