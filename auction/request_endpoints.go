package auction

import (
	"github.com/endcap/endcap/internal/jsontext"
)

// auction validates a /v2/auctions item (listings or banners).
func (p *parser) auction(f *[numAuctionFields]jsontext.Span, i int, r *Request) *ValidationError {
	sp := f[aType]
	if !p.Present(sp) || p.emptyString(sp) {
		return fail(CodeMissingPromotionType, i, fld("type"), "is required: listings or banners")
	}
	if p.B[sp.Lo] != '"' {
		return fail(CodeBadRequest, i, fld("type"), "must be a string")
	}
	switch string(p.UnquoteTmp(sp)) {
	case "listings":
		r.Kind = KindListings
	case "banners":
		r.Kind = KindBanners
	case "hotels", "flights":
		return fail(CodeInvalidPromotionType, i, fld("type"), "must be listings or banners (hotels and flights auctions go to /v2/auctions/travel)")
	default:
		return fail(CodeInvalidPromotionType, i, fld("type"), "must be listings or banners")
	}
	if err := p.slots(f[aSlots], i, "slots", &r.Slots); err != nil {
		return err
	}
	if r.Kind == KindBanners {
		sp := f[aSlotID]
		if !p.Present(sp) || p.emptyString(sp) {
			return fail(CodeMissingSlotID, i, fld("slotId"), "is required for a banners auction")
		}
		if err := p.str(sp, i, fld("slotId"), MaxIDLen, CodeBadRequest, &r.SlotID); err != nil {
			return err
		}
		r.Device = "desktop"
		if sp := f[aDevice]; p.Present(sp) {
			if p.B[sp.Lo] != '"' {
				return fail(CodeBadRequest, i, fld("device"), "must be a string")
			}
			switch string(p.UnquoteTmp(sp)) {
			case "desktop":
			case "mobile":
				r.Device = "mobile"
			default:
				return fail(CodeInvalidDevice, i, fld("device"), "must be desktop or mobile")
			}
		}
	}
	if err := p.products(f[aProducts], i, "", r); err != nil {
		return err
	}
	if err := p.category(f[aCategory], i, "", r); err != nil {
		return err
	}
	query, err := p.searchQuery(f[aSearchQuery], i, "", r)
	if err != nil {
		return err
	}
	if r.Kind == KindListings && r.ProductIDs == nil && r.Category == nil {
		return fail(CodeNoProductsOrCategory, i, fld(""), "a listings auction needs products or a category")
	}
	if contexts(r, query) > 2 {
		return fail(CodeInvalidContext, i, fld(""), "at most two of products, searchQuery, category may be given")
	}
	if err := p.geo(f[aGeo], i, r); err != nil {
		return err
	}
	if err := p.placementInt(f[aPlacementID], i, r); err != nil {
		return err
	}
	if err := p.common(f, i, r); err != nil {
		return err
	}
	if r.Kind == KindListings {
		if err := p.filter(f[aFilter], i, r); err != nil {
			return err
		}
	}
	if err := p.experimentVariant(f[aExperimentVariant], i, r); err != nil {
		return err
	}
	return p.demandSources(f[aDemandSources], i, r)
}

// sponsoredBrand validates a /v2/auctions/sponsored-brand item.
func (p *parser) sponsoredBrand(f *[numAuctionFields]jsontext.Span, i int, r *Request) *ValidationError {
	r.Kind = KindSponsoredBrand
	if err := p.slots(f[aWinners], i, "winners", &r.Slots); err != nil {
		return err
	}
	// placementId: a string (the public contract), or an integer 1..8 as
	// on /v2/auctions.
	sp := f[aPlacementID]
	switch {
	case !p.Present(sp) || p.emptyString(sp):
		return fail(CodeBadRequest, i, fld("placementId"), "is required")
	case p.B[sp.Lo] == '"':
		if err := p.str(sp, i, fld("placementId"), MaxIDLen, CodeBadRequest, &r.PlacementName); err != nil {
			return err
		}
	case jsontext.IsNumberStart(p.B[sp.Lo]):
		if err := p.placementInt(sp, i, r); err != nil {
			return err
		}
	default:
		return fail(CodeBadRequest, i, fld("placementId"), "must be a string")
	}
	var t [3]jsontext.Span
	given, err := p.object(f[aTriggers], i, fld("triggers"), triggerNames, t[:])
	if err != nil {
		return err
	}
	if !given {
		return fail(CodeMissingContext, i, fld("triggers"), "is required: exactly one of products, category, searchQuery")
	}
	if err := p.products(t[0], i, "triggers.", r); err != nil {
		return err
	}
	if err := p.category(t[1], i, "triggers.", r); err != nil {
		return err
	}
	query, err := p.searchQuery(t[2], i, "triggers.", r)
	if err != nil {
		return err
	}
	switch contexts(r, query) {
	case 0:
		return fail(CodeMissingContext, i, fld("triggers"), "exactly one of products, category, searchQuery is required")
	case 1:
	default:
		return fail(CodeInvalidContext, i, fld("triggers"), "exactly one of products, category, searchQuery may be given")
	}
	if err := p.geo(f[aGeo], i, r); err != nil {
		return err
	}
	if err := p.common(f, i, r); err != nil {
		return err
	}
	if err := p.experimentVariant(f[aExperimentVariant], i, r); err != nil {
		return err
	}
	return p.demandSources(f[aDemandSources], i, r)
}

// travel validates a /v2/auctions/travel item (hotels or flights).
func (p *parser) travel(f *[numAuctionFields]jsontext.Span, i int, r *Request) *ValidationError {
	var tc [numTravelCtxFields]jsontext.Span
	ctx := f[aTravelContext]
	ctxObj := p.Present(ctx) && p.B[ctx.Lo] == '{'
	if ctxObj {
		p.Fields(ctx.Lo, travelCtxNames, tc[:])
	}
	sp := f[aType]
	switch {
	case !p.Present(sp):
		// No discriminator in the public contract: a travelContext with a
		// route or a flightType makes it a flights auction.
		r.Kind = KindHotels
		if p.Present(tc[tcRoute]) || p.Present(tc[tcFlightType]) {
			r.Kind = KindFlights
		}
	case p.B[sp.Lo] != '"':
		return fail(CodeBadRequest, i, fld("type"), "must be a string")
	default:
		switch string(p.UnquoteTmp(sp)) {
		case "hotels":
			r.Kind = KindHotels
		case "flights":
			r.Kind = KindFlights
		default:
			return fail(CodeInvalidTravelType, i, fld("type"), "must be hotels or flights")
		}
	}
	if err := p.slots(f[aSlots], i, "slots", &r.Slots); err != nil {
		return err
	}
	if err := p.travelProducts(f[aProducts], i, r); err != nil {
		return err
	}
	if err := p.travelCategory(f[aCategory], i, r); err != nil {
		return err
	}
	if err := p.travelContext(ctx, ctxObj, &tc, i, r); err != nil {
		return err
	}
	if r.ProductIDs == nil && r.Category == nil {
		return fail(CodeNoProductsOrCategory, i, fld(""), "a travel auction needs products or a category")
	}
	if err := p.common(f, i, r); err != nil {
		return err
	}
	if err := p.experimentVariant(f[aExperimentVariant], i, r); err != nil {
		return err
	}
	return p.demandSources(f[aDemandSources], i, r)
}

// contexts counts the auction contexts given: products, category, search
// query (r.SearchQuery only gets its value when the request is committed).
func contexts(r *Request, query bool) int {
	n := 0
	if r.ProductIDs != nil {
		n++
	}
	if r.Category != nil {
		n++
	}
	if query {
		n++
	}
	return n
}
