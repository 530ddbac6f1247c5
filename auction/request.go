// Package auction holds the auctions of /v2: parsing and validating the
// requests of POST /v2/auctions, /v2/auctions/sponsored-brand and
// /v2/auctions/travel (this file), and running them.
package auction

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/endcap/endcap/internal/consent"
	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/internal/money"
	"github.com/endcap/endcap/internal/validation"

	"github.com/uber/h3-go/v4"
)

// This file decodes and validates an auction request body. The rules, the
// decisions where the contracts are silent and the order of the checks are in
// docs/reference/auctions-request.md; keep the two in step.
//
// The body is checked once by jsontext.Scanner.Valid (what json.Valid
// accepts, faster, less the strings that break the text rule of
// jsontext.StringProblem), so that a syntax error anywhere is invalid_json
// whatever else is wrong; that pass also records where every array and
// object ends, so that skipping one later costs O(1) instead of a second
// read of, say, 10,000 product ids. After that the parser trusts the JSON
// grammar and walks the bytes with the scanner, as ingest/parse.go does for
// /v2/events: each object is scanned once for the byte spans of its known
// keys (the last of duplicate keys wins, keys are case-sensitive, unknown
// keys are skipped), and the known values are then validated in a fixed
// order, so that the first error reported does not depend on the order of
// keys in the body. Strings are decoded straight from the body into one
// arena, which every string of the request shares and Release hands back for
// the next request. Money is converted exactly from its decimal text. No
// reflection: a 500-id auction costs 4 allocations.

// Kind is the kind of one auction.
type Kind uint8

const (
	KindListings Kind = iota + 1
	KindBanners
	KindSponsoredBrand
	KindHotels
	KindFlights
)

var kindNames = [...]string{"", "listings", "banners", "sponsored_brand", "hotels", "flights"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return "unknown"
}

// MarshalText writes the kind's name (so that a logged Request is readable).
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// EndpointKind says which endpoint a body was posted to.
type EndpointKind uint8

const (
	Auctions       EndpointKind = iota + 1 // POST /v2/auctions: listings and banners, by `type`
	SponsoredBrand                         // POST /v2/auctions/sponsored-brand
	Travel                                 // POST /v2/auctions/travel: hotels and flights
)

func (e EndpointKind) String() string {
	switch e {
	case Auctions:
		return "auctions"
	case SponsoredBrand:
		return "sponsored-brand"
	case Travel:
		return "travel"
	}
	return "unknown"
}

// Limits of an auction request. Lengths are in Unicode code points.
const (
	MaxAuctions             = 5
	MinSlots                = 1
	MaxSlots                = 40
	MaxProducts             = 10_000
	MaxIDLen                = 255 // product, category, variation, slot, promotion and placement ids (the catalog's id rule)
	MaxStringLen            = 1024
	MaxCategoryItems        = 5  // ids, disjunctions, and the categories of one disjunction
	MaxSearchQueryWords     = 20 // words separated by Unicode white space
	MaxLocations            = 2
	MinPlacementID          = 1
	MaxPlacementID          = 8
	MaxOpaqueUserIDLen      = 90
	MaxFilterAttributes     = 3
	MaxFilterPromotions     = 3
	MaxAttributePartLen     = 40 // key and value of a `key:value` filter attribute, each
	MaxExperimentVariantLen = 10
	MaxPageValues           = 500
	MaxSiteLen              = 64
	MaxPassengers           = 9 // "fewer than ten"
	// MaxPriceMicros bounds a product price (one billion currency units).
	MaxPriceMicros = 1_000_000_000 * 1_000_000
)

// Error codes of the auction endpoints (wire-contract.md, spec "Error codes").
const (
	CodeBadRequest                  = validation.CodeBadRequest
	CodeInvalidJSON                 = validation.CodeInvalidJSON
	CodeEmptyRequest                = "empty_request"
	CodeMissingAuctions             = "missing_auctions"
	CodeTooManyAuctions             = "too_many_auctions"
	CodeMissingPromotionType        = "missing_promotion_type"
	CodeInvalidPromotionType        = "invalid_promotion_type"
	CodeMissingSlots                = "missing_slots"
	CodeTooFewSlots                 = "too_few_slots"
	CodeMissingSlotID               = "missing_slot_id"
	CodeInvalidDevice               = "invalid_device"
	CodeNoProducts                  = "no_products"
	CodeTooManyProducts             = "too_many_products"
	CodeInvalidQualityScore         = "invalid_quality_score"
	CodeNonPositivePrice            = "non_positive_price"
	CodeProductInfoMismatch         = "product_info_mismatch"
	CodeInvalidCategory             = "invalid_category"
	CodeNoProductsOrCategory        = "no_products_or_category"
	CodeInvalidContext              = "invalid_context"
	CodeMissingContext              = "missing_context"
	CodeTooManySearchQueryWords     = "too_many_search_query_words"
	CodeInvalidGeoTargeting         = "invalid_geo_targeting"
	CodeTooManyLocations            = "too_many_locations"
	CodeInvalidLocationCell         = "invalid_location_cell"
	CodeInvalidPlacementID          = "invalid_placement_id"
	CodeInvalidOpaqueUserID         = "invalid_opaque_user_id"
	CodeExperimentVariantTooLong    = "experiment_variant_too_long"
	CodeNoListingExperimentVariant  = "no_listing_experiment_variant"
	CodeUnauthorizedExternalDemand  = "unauthorized_external_demand"
	CodeInvalidExternalDemandAdType = "invalid_external_demand_ad_type"
	CodeInvalidTravelType           = "invalid_travel_type"
	CodeInvalidDateFormat           = "invalid_date_format"
	CodeInvalidTravelDateRange      = "invalid_travel_date_range"
	CodeTooManyPassengers           = "too_many_passengers"
	CodeInvalidTravelerType         = "invalid_traveler_type"
	CodeInvalidTravelCategory       = "invalid_travel_category"
	CodeMissingVariationID          = "missing_variation_id"
	CodeMissingFlightTravelContext  = "missing_flight_travel_context"
)

// ValidationError rejects a whole request (validation.Rejection: the wire
// errCode and a message naming the field by its JSON path, such as
// `auctions[1].products.qualityScores[3]: must be a number`).
type ValidationError = validation.Rejection

var invalid = validation.Reject

// Request is one auction, validated and normalised. Absent optional fields
// are zero; `null` on the wire counts as absent.
type Request struct {
	Kind Kind
	// Slots is `slots` (listings, banners, hotels, flights) or `winners`
	// (sponsored brand): 1..MaxSlots.
	Slots int
	// SlotID and Device are set for banners only; Device is desktop|mobile,
	// desktop by default.
	SlotID string
	Device string
	// ProductIDs are the products of the auction, in request order, as
	// given (duplicates are kept). For travel auctions they are the `id`s of
	// the `products` objects.
	ProductIDs []string
	// idList is ProductIDs' array when it came from idLists (see Release).
	idList *[]string
	// arena, on the first request of a parse only, holds the bytes every
	// string of the requests points into (see Release).
	arena *[]byte
	// QualityScores is nil, or one score in (0, 1] per product.
	QualityScores []float64
	// PricesMicros is nil, or one price > 0 per product in micro-units of
	// the marketplace currency (listings/banners/sponsored brand: our
	// extension `products.prices`; flights: `products[].price`).
	PricesMicros []int64
	// VariationIDs is set for flights only: one non-empty `variationID` per
	// product (the winner echoes it).
	VariationIDs []string
	// Category is nil or exactly one of ID, IDs, Disjunctions. A travel
	// auction's `category.singleCategory.id` is read into ID.
	Category *CategoryFilter
	// SearchQuery is trimmed of surrounding white space; "" when absent or
	// blank. At most MaxSearchQueryWords words.
	SearchQuery string
	// Geo targeting: Locations holds 1..2 distinct H3 cells in canonical
	// lower-case hex (`geoTargeting.locations`), or Location holds the plain
	// string form (`geoTargeting.location`, or a bare-string geoTargeting),
	// or both are empty.
	Locations []string
	Location  string
	// PlacementID is 0 (not given) or 1..8. A sponsored-brand auction's
	// string `placementId` goes to PlacementName (an integer one to
	// PlacementID).
	PlacementID   int
	PlacementName string
	// OpaqueUserID is at most MaxOpaqueUserIDLen characters; "" when absent.
	OpaqueUserID      string
	Page              *Page
	Filter            *Filter // listings only
	ExperimentVariant string  // listings only, at most MaxExperimentVariantLen characters
	Travel            *TravelContext
}

// CategoryFilter is an auction's category context: exactly one field is set.
type CategoryFilter struct {
	ID           string     // `id`: products in this category
	IDs          []string   // `ids`: products in all of these categories (1..5)
	Disjunctions [][]string // `disjunctions`: products in at least one category of each disjunction (1..5 of 1..5)
}

// Page is the page the auction runs for, as in ingest. Value holds the string
// form as one element, or the array form as given.
type Page struct {
	Type  string // home | category | PDP | search | cart | other
	ID    string // `pageId`
	Value []string
}

// Filter is a listings auction's attribute filter.
type Filter struct {
	Operator   string      // and | or (default and)
	Attributes []Attribute // 0..3 (at least one of Attributes, Promotions is set)
	Promotions []string    // 0..3
}

// Attribute is one `key:value` filter attribute, split at the first colon.
type Attribute struct {
	Key, Value string
}

// TravelContext is a travel auction's `travelContext`.
type TravelContext struct {
	Site         string // 1..64 characters
	Passengers   int    // 0 = not given, else 1..9
	StartDate    string // YYYY-MM-DD, "" = not given
	EndDate      string // YYYY-MM-DD, "" = not given; after StartDate when both are given
	TravelerType string // family | group | solo | couple, "" = not given
	PageName     string
	Platform     string
	Route        string // flights: required
	FlightType   string // flights: required; one-way / round-trip are normalised to one_way / round_trip
}

// ---- field tables ----

var (
	topNames = []string{"auctions"}

	auctionNames = []string{"type", "slots", "slotId", "device", "products", "category", "searchQuery",
		"geoTargeting", "placementId", "opaqueUserId", "page", "filter", "experimentVariant", "demandSources",
		"winners", "triggers", "travelContext", "consent"}
	productsNames      = []string{"ids", "qualityScores", "prices"}
	categoryNames      = []string{"id", "ids", "disjunctions"}
	geoNames           = []string{"location", "locations"}
	pageNames          = []string{"type", "pageId", "value"}
	filterNames        = []string{"operator", "attributes", "promotions"}
	triggerNames       = []string{"products", "category", "searchQuery"}
	travelProductNames = []string{"id", "variationID", "qualityScore", "price"}
	travelCatNames     = []string{"singleCategory"}
	singleCatNames     = []string{"id"}
	travelCtxNames     = []string{"site", "passengers", "travelStartDate", "travelEndDate", "travelerType",
		"pageName", "platform", "route", "flightType"}
)

const (
	aType = iota
	aSlots
	aSlotID
	aDevice
	aProducts
	aCategory
	aSearchQuery
	aGeo
	aPlacementID
	aOpaqueUserID
	aPage
	aFilter
	aExperimentVariant
	aDemandSources
	aWinners
	aTriggers
	aTravelContext
	aConsent
	numAuctionFields
)

const (
	tcSite = iota
	tcPassengers
	tcStart
	tcEnd
	tcTravelerType
	tcPageName
	tcPlatform
	tcRoute
	tcFlightType
	numTravelCtxFields
)

var (
	pageTypes     = []string{"home", "category", "PDP", "search", "cart", "other"}
	travelerTypes = []string{"family", "group", "solo", "couple"}
)

// ---- parser ----

// strFixup points a string at its bytes in the request's string arena.
type strFixup struct {
	dst    *string
	lo, hi int
}

// listFixup points the elements of a string slice at the arena ranges
// offs[off+2k], offs[off+2k+1] (a pointer-free list for big id arrays).
type listFixup struct {
	dst []string
	off int
}

type parser struct {
	jsontext.Scanner
	arena []byte      // decoded strings of the request, *box's array
	box   *[]byte     // from stringArenas; nil once commit handed it to requests
	fix   []strFixup  // invariant: fix[len(fix):cap(fix)] is zeroed
	lists []listFixup // invariant: lists[len(lists):cap(lists)] is zeroed
	offs  []int
	list  []jsontext.Span // element spans of an array
	list2 []jsontext.Span // element spans of a nested array
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// idLists holds the arrays of Request.ProductIDs between requests (an
// auction of 500 products would otherwise allocate 8 KB for the list, which
// the engine copies and nothing keeps).
var idLists = sync.Pool{New: func() any { return new([]string) }}

// maxPooledIDList is the longest list idLists keeps.
const maxPooledIDList = MaxProducts

// stringArenas holds, between requests, the arenas that requests' strings
// point into. A 500-product auction's strings are about 6 KB, a third of the
// garbage an auction makes over HTTP, and garbage is what sets how often the
// API collects (docs/design/performance.md). The strings are not copied out of the
// arena: the requests own it until Release hands it back.
var stringArenas = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledArena is the largest arena stringArenas keeps.
const maxPooledArena = 1 << 20

// Release hands what ParseAuctions allocated for reqs back for reuse: the
// lists of product ids and the bytes of every string of the requests. Call
// it last, once nothing reads the requests nor anything made from them:
// the results and records of Engine.Run share their strings (a winner's id
// is the request's). It clears the bytes, so that a string read after its
// release reads zeros, never another request's data. Not calling it is
// safe: the garbage collector then frees them.
func Release(reqs []Request) {
	if len(reqs) > 0 && reqs[0].arena != nil {
		a := reqs[0].arena
		reqs[0].arena = nil
		clear(*a)
		if cap(*a) <= maxPooledArena {
			*a = (*a)[:0]
			stringArenas.Put(a)
		}
	}
	for i := range reqs {
		r := &reqs[i]
		if l := r.idList; l != nil {
			clear(r.ProductIDs) // keep no request's strings alive
			*l = r.ProductIDs[:0]
			idLists.Put(l)
		}
		r.ProductIDs, r.idList = nil, nil
	}
}

func (p *parser) release() {
	clear(p.fix) // do not keep the caller's requests alive
	p.fix = p.fix[:0]
	clear(p.lists)
	p.lists = p.lists[:0]
	p.Scanner.Release()
	if p.box != nil { // not handed to requests (an invalid one): keep it
		*p.box = p.arena[:0]
		if cap(p.arena) > maxPooledArena {
			*p.box = nil
		}
	}
	p.arena = nil
	if cap(p.fix) > 1<<16 {
		p.fix = nil
	}
	if cap(p.list) > 1<<16 {
		p.list = nil
	}
	if cap(p.offs) > 1<<17 {
		p.offs = nil
	}
	parserPool.Put(p)
}

// commit gives every string of the requests its final value, a range of
// the arena, and hands the arena to reqs (see Release).
func (p *parser) commit(reqs []Request) {
	if len(p.arena) == 0 || len(p.fix) == 0 && len(p.lists) == 0 {
		return
	}
	s := unsafe.String(unsafe.SliceData(p.arena), len(p.arena))
	*p.box = p.arena
	reqs[0].arena, p.box, p.arena = p.box, nil, nil
	for _, f := range p.fix {
		*f.dst = s[f.lo:f.hi]
	}
	clear(p.fix)
	p.fix = p.fix[:0]
	for _, l := range p.lists {
		offs := p.offs[l.off : l.off+2*len(l.dst)]
		for k := range l.dst {
			l.dst[k] = s[offs[2*k]:offs[2*k+1]]
		}
	}
	clear(p.lists)
	p.lists = p.lists[:0]
}

// ParseAuctions decodes and validates the body of one of the three auction
// endpoints. On success it returns one Request per auction, in request order.
// Any invalid part rejects the whole request with a *ValidationError whose
// Message names the field by its JSON path; the first error in the order of
// docs/reference/auctions-request.md is reported.
func ParseAuctions(body []byte, kind EndpointKind) ([]Request, *ValidationError) {
	if kind != Auctions && kind != SponsoredBrand && kind != Travel {
		return nil, invalid(CodeBadRequest, "", "unknown auction endpoint")
	}
	start := jsontext.SkipWS(body, 0)
	if start == len(body) {
		return nil, invalid(CodeEmptyRequest, "", "request body is empty")
	}
	p := parserPool.Get().(*parser)
	defer p.release()
	if p.box == nil {
		p.box = stringArenas.Get().(*[]byte)
	}
	if cap(*p.box) < len(body) { // decoded, the strings are never longer than the body
		*p.box = make([]byte, 0, len(body))
	}
	p.arena, p.offs = (*p.box)[:0], p.offs[:0]
	if !p.Valid(body) {
		return nil, validation.RejectJSON(body)
	}
	if body[start] != '{' {
		return nil, invalid(CodeBadRequest, "", "request body must be a JSON object")
	}

	var top [1]jsontext.Span
	p.Fields(start, topNames, top[:])
	sp := top[0]
	if !p.Present(sp) {
		return nil, invalid(CodeMissingAuctions, "auctions", "is required: at least one auction")
	}
	if body[sp.Lo] != '[' {
		return nil, invalid(CodeBadRequest, "auctions", "must be an array")
	}
	var elems [MaxAuctions]jsontext.Span
	list, over := p.Elements(sp.Lo, elems[:0], MaxAuctions)
	if over {
		return nil, invalid(CodeTooManyAuctions, "auctions", "must have at most %d auctions", MaxAuctions)
	}
	if len(list) == 0 {
		return nil, invalid(CodeMissingAuctions, "auctions", "must not be empty: at least one auction")
	}
	reqs := make([]Request, len(list))
	for i, asp := range list {
		if body[asp.Lo] != '{' {
			return nil, fail(CodeBadRequest, i, fld(""), "must be an object")
		}
		var f [numAuctionFields]jsontext.Span
		p.Fields(asp.Lo, auctionNames, f[:])
		var err *ValidationError
		switch kind {
		case Auctions:
			err = p.auction(&f, i, &reqs[i])
		case SponsoredBrand:
			err = p.sponsoredBrand(&f, i, &reqs[i])
		case Travel:
			err = p.travel(&f, i, &reqs[i])
		}
		if err != nil {
			return nil, err
		}
	}
	p.commit(reqs)
	return reqs, nil
}

// fpath is the JSON path of a value below auctions[i]: pre+field, then [k1],
// then .sub, then [k2] (an index < 0 and an empty string are left out). It is
// a value, so passing one costs nothing: the string is only built by at(),
// when an error is reported.
type fpath struct {
	pre, field string
	k1         int
	sub        string
	k2         int
}

// fld is the path of a field of the auction ("" for the auction itself).
func fld(field string) fpath { return fpath{field: field, k1: -1, k2: -1} }

// el is the path of element k of the array at f.
func (f fpath) el(k int) fpath {
	if f.k1 < 0 && f.sub == "" {
		f.k1 = k
	} else {
		f.k2 = k
	}
	return f
}

// dot is the path of field sub of the object at f (one level only).
func (f fpath) dot(sub string) fpath {
	f.sub = sub
	return f
}

func (f fpath) at(i int) string {
	var sb strings.Builder
	sb.WriteString("auctions[")
	sb.WriteString(strconv.Itoa(i))
	sb.WriteByte(']')
	if f.pre != "" || f.field != "" {
		sb.WriteByte('.')
		sb.WriteString(f.pre)
		sb.WriteString(f.field)
	}
	if f.k1 >= 0 {
		sb.WriteByte('[')
		sb.WriteString(strconv.Itoa(f.k1))
		sb.WriteByte(']')
	}
	if f.sub != "" {
		sb.WriteByte('.')
		sb.WriteString(f.sub)
	}
	if f.k2 >= 0 {
		sb.WriteByte('[')
		sb.WriteString(strconv.Itoa(f.k2))
		sb.WriteByte(']')
	}
	return sb.String()
}

// fail builds the error of auction i at path f.
func fail(code string, i int, f fpath, format string, args ...any) *ValidationError {
	return invalid(code, f.at(i), format, args...)
}

// ---- the three endpoints ----

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
	sp = f[aTriggers]
	if !p.Present(sp) {
		return fail(CodeMissingContext, i, fld("triggers"), "is required: exactly one of products, category, searchQuery")
	}
	if p.B[sp.Lo] != '{' {
		return fail(CodeBadRequest, i, fld("triggers"), "must be an object")
	}
	var t [3]jsontext.Span
	p.Fields(sp.Lo, triggerNames, t[:])
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

// ---- fields shared by the endpoints ----

// slots validates a required slot count (`slots` or `winners`).
func (p *parser) slots(sp jsontext.Span, i int, field string, dst *int) *ValidationError {
	if !p.Present(sp) {
		return fail(CodeMissingSlots, i, fld(field), "is required")
	}
	v, integral, ok := p.integer(sp)
	switch {
	case !ok || !integral:
		return fail(CodeBadRequest, i, fld(field), "must be an integer")
	case v < MinSlots:
		return fail(CodeTooFewSlots, i, fld(field), "must be at least %d", MinSlots)
	case v > MaxSlots:
		return fail(CodeBadRequest, i, fld(field), "must be at most %d", MaxSlots)
	}
	*dst = int(v)
	return nil
}

// placementInt validates an integer placementId (1..8).
func (p *parser) placementInt(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	v, integral, ok := p.integer(sp)
	switch {
	case !ok:
		return fail(CodeBadRequest, i, fld("placementId"), "must be an integer")
	case !integral || v < MinPlacementID || v > MaxPlacementID:
		return fail(CodeInvalidPlacementID, i, fld("placementId"), "must be an integer from %d to %d", MinPlacementID, MaxPlacementID)
	}
	r.PlacementID = int(v)
	return nil
}

// common validates consent, opaqueUserId and page. When the shopper's
// consent denies ad storage or personalisation, opaqueUserId is validated and
// dropped: the auction runs and is recorded without its shopper, so that no
// per-shopper targeting (segments) applies and nothing of it is stored.
func (p *parser) common(f *[numAuctionFields]jsontext.Span, i int, r *Request) *ValidationError {
	denied, bad := consent.Denied(&p.Scanner, f[aConsent])
	if bad != nil {
		path := fld("consent")
		if bad.Field != "" {
			path = fld("consent." + bad.Field)
		}
		return fail(CodeBadRequest, i, path, "%s", bad.Message)
	}
	dst := &r.OpaqueUserID
	if denied {
		dst = nil
	}
	if err := p.str(f[aOpaqueUserID], i, fld("opaqueUserId"), MaxOpaqueUserIDLen, CodeInvalidOpaqueUserID, dst); err != nil {
		return err
	}
	return p.page(f[aPage], i, r)
}

func (p *parser) experimentVariant(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '"' {
		return fail(CodeBadRequest, i, fld("experimentVariant"), "must be a string")
	}
	if p.emptyString(sp) {
		return nil
	}
	if r.Kind != KindListings {
		return fail(CodeNoListingExperimentVariant, i, fld("experimentVariant"), "experiment variants are only for sponsored listings auctions")
	}
	return p.str(sp, i, fld("experimentVariant"), MaxExperimentVariantLen, CodeExperimentVariantTooLong, &r.ExperimentVariant)
}

func (p *parser) demandSources(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '[' {
		return fail(CodeBadRequest, i, fld("demandSources"), "must be an array")
	}
	if p.emptyArray(sp) {
		return nil
	}
	if r.Kind != KindListings {
		return fail(CodeInvalidExternalDemandAdType, i, fld("demandSources"), "external demand is only for listings auctions")
	}
	return fail(CodeUnauthorizedExternalDemand, i, fld("demandSources"), "external demand is not configured for this marketplace (Endcap does not run external demand)")
}

// products validates a Products object (`ids`, `qualityScores`, `prices`);
// pre is "" or "triggers.".
func (p *parser) products(sp jsontext.Span, i int, pre string, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '{' {
		return fail(CodeBadRequest, i, fpath{pre: pre, field: "products", k1: -1, k2: -1}, "must be an object")
	}
	var f [3]jsontext.Span
	p.Fields(sp.Lo, productsNames, f[:])

	idsPath := fpath{pre: pre, field: "products.ids", k1: -1, k2: -1}
	ids := f[0]
	if !p.Present(ids) {
		return fail(CodeNoProducts, i, idsPath, "is required: at least one product id")
	}
	if p.B[ids.Lo] != '[' {
		return fail(CodeBadRequest, i, idsPath, "must be an array of strings")
	}
	var over bool
	p.list, over = p.Elements(ids.Lo, p.list[:0], MaxProducts)
	if over {
		return fail(CodeTooManyProducts, i, idsPath, "must have at most %d product ids", MaxProducts)
	}
	n := len(p.list)
	if n == 0 {
		return fail(CodeNoProducts, i, idsPath, "must not be empty: at least one product id")
	}
	l := idLists.Get().(*[]string)
	if cap(*l) < n || n > maxPooledIDList {
		*l = make([]string, 0, n)
	}
	out := (*l)[:n]
	if n <= maxPooledIDList {
		r.idList = l
	}
	off := len(p.offs)
	for k, esp := range p.list {
		if p.B[esp.Lo] != '"' {
			return fail(CodeBadRequest, i, idsPath.el(k), "must be a string")
		}
		lo, hi := p.decode(esp)
		if lo == hi {
			return fail(CodeBadRequest, i, idsPath.el(k), "must not be empty")
		}
		if err := p.checkLen(lo, hi, MaxIDLen, CodeBadRequest, i, idsPath, k); err != nil {
			return err
		}
		p.offs = append(p.offs, lo, hi)
	}
	p.lists = append(p.lists, listFixup{out, off})
	r.ProductIDs = out

	if sp := f[1]; p.Present(sp) {
		path := fpath{pre: pre, field: "products.qualityScores", k1: -1, k2: -1}
		if err := p.sameLength(sp, i, path, n); err != nil {
			return err
		}
		qs := make([]float64, n)
		for k, esp := range p.list {
			if !jsontext.IsNumberStart(p.B[esp.Lo]) {
				return fail(CodeBadRequest, i, path.el(k), "must be a number")
			}
			v, ok := p.qualityScore(esp)
			if !ok {
				return fail(CodeInvalidQualityScore, i, path.el(k), "must be greater than 0 and at most 1")
			}
			qs[k] = v
		}
		r.QualityScores = qs
	}
	if sp := f[2]; p.Present(sp) {
		path := fpath{pre: pre, field: "products.prices", k1: -1, k2: -1}
		if err := p.sameLength(sp, i, path, n); err != nil {
			return err
		}
		pr := make([]int64, n)
		for k, esp := range p.list {
			if err := p.price(esp, i, path.el(k), &pr[k]); err != nil {
				return err
			}
		}
		r.PricesMicros = pr
	}
	return nil
}

// sameLength checks that the value at sp is an array of n elements and leaves
// their spans in p.list.
func (p *parser) sameLength(sp jsontext.Span, i int, path fpath, n int) *ValidationError {
	if p.B[sp.Lo] != '[' {
		return fail(CodeBadRequest, i, path, "must be an array of numbers")
	}
	var over bool
	p.list, over = p.Elements(sp.Lo, p.list[:0], n)
	if over || len(p.list) != n {
		return fail(CodeProductInfoMismatch, i, path, "must have one item per product id (%d)", n)
	}
	return nil
}

// qualityScore converts a JSON number and checks it is in (0, 1] (after
// rounding to the nearest float64).
func (p *parser) qualityScore(sp jsontext.Span) (float64, bool) {
	num := p.B[sp.Lo:sp.Hi]
	if num[0] == '-' {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(num), 64)
	if err != nil || !(v > 0 && v <= 1) {
		return 0, false
	}
	return v, true
}

// price converts a price exactly from its decimal text to micro-units,
// rounding half away from zero after the sixth decimal.
func (p *parser) price(sp jsontext.Span, i int, path fpath, dst *int64) *ValidationError {
	if !jsontext.IsNumberStart(p.B[sp.Lo]) {
		return fail(CodeBadRequest, i, path, "must be a number")
	}
	d := money.Scale(p.B[sp.Lo:sp.Hi], 6, MaxPriceMicros)
	switch {
	case d.Zero || d.Neg:
		return fail(CodeNonPositivePrice, i, path, "must be greater than 0")
	case d.Over:
		return fail(CodeBadRequest, i, path, "must be at most %d", MaxPriceMicros/1_000_000)
	case d.Mag == 0:
		return fail(CodeBadRequest, i, path, "must be at least 0.0000005 (prices are kept to the micro-unit)")
	}
	*dst = int64(d.Mag)
	return nil
}

// category validates an AuctionCategory: exactly one of id, ids,
// disjunctions; pre is "" or "triggers.".
func (p *parser) category(sp jsontext.Span, i int, pre string, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	path := fpath{pre: pre, field: "category", k1: -1, k2: -1}
	if p.B[sp.Lo] != '{' {
		return fail(CodeBadRequest, i, path, "must be an object")
	}
	var f [3]jsontext.Span
	p.Fields(sp.Lo, categoryNames, f[:])
	n := 0
	for _, s := range f {
		if p.Present(s) {
			n++
		}
	}
	if n != 1 {
		return fail(CodeInvalidCategory, i, path, "exactly one of id, ids, disjunctions must be set")
	}
	c := new(CategoryFilter)
	switch {
	case p.Present(f[0]):
		path.field = "category.id"
		if p.B[f[0].Lo] != '"' {
			return fail(CodeBadRequest, i, path, "must be a string")
		}
		if err := p.categoryID(f[0], i, path, &c.ID); err != nil {
			return err
		}
	case p.Present(f[1]):
		path.field = "category.ids"
		ids, err := p.categoryList(f[1], i, path, &p.list)
		if err != nil {
			return err
		}
		c.IDs = ids
	default:
		path.field = "category.disjunctions"
		sp := f[2]
		if p.B[sp.Lo] != '[' {
			return fail(CodeBadRequest, i, path, "must be an array of arrays of strings")
		}
		var over bool
		p.list2, over = p.Elements(sp.Lo, p.list2[:0], MaxCategoryItems)
		if over {
			return fail(CodeInvalidCategory, i, path, "must have at most %d disjunctions", MaxCategoryItems)
		}
		if len(p.list2) == 0 {
			return fail(CodeInvalidCategory, i, path, "must not be empty")
		}
		ds := make([][]string, len(p.list2))
		for k, dsp := range p.list2 {
			ids, err := p.categoryList(dsp, i, path.el(k), &p.list)
			if err != nil {
				return err
			}
			ds[k] = ids
		}
		c.Disjunctions = ds
	}
	r.Category = c
	return nil
}

// categoryList validates an array of 1..5 category ids.
func (p *parser) categoryList(sp jsontext.Span, i int, path fpath, list *[]jsontext.Span) ([]string, *ValidationError) {
	if p.B[sp.Lo] != '[' {
		return nil, fail(CodeBadRequest, i, path, "must be an array of strings")
	}
	var over bool
	*list, over = p.Elements(sp.Lo, (*list)[:0], MaxCategoryItems)
	if over {
		return nil, fail(CodeInvalidCategory, i, path, "must have at most %d category ids", MaxCategoryItems)
	}
	if len(*list) == 0 {
		return nil, fail(CodeInvalidCategory, i, path, "must not be empty")
	}
	out := make([]string, len(*list))
	for k, esp := range *list {
		if p.B[esp.Lo] != '"' {
			return nil, fail(CodeBadRequest, i, path.el(k), "must be a string")
		}
		if err := p.categoryID(esp, i, path.el(k), &out[k]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// categoryID validates one category id (at sp, known to be a string).
func (p *parser) categoryID(sp jsontext.Span, i int, path fpath, dst *string) *ValidationError {
	lo, hi := p.decode(sp)
	if lo == hi {
		return fail(CodeInvalidCategory, i, path, "must not be empty")
	}
	if err := p.checkLen(lo, hi, MaxIDLen, CodeBadRequest, i, path, -1); err != nil {
		return err
	}
	p.keep(dst, lo, hi)
	return nil
}

// searchQuery validates a search query: trimmed of white space, blank counts
// as absent, at most MaxSearchQueryWords words and MaxStringLen characters.
// pre is "" or "triggers.".
// given reports a non-blank query.
func (p *parser) searchQuery(sp jsontext.Span, i int, pre string, r *Request) (given bool, err *ValidationError) {
	if !p.Present(sp) {
		return false, nil
	}
	path := fpath{pre: pre, field: "searchQuery", k1: -1, k2: -1}
	if p.B[sp.Lo] != '"' {
		return false, fail(CodeBadRequest, i, path, "must be a string")
	}
	lo, hi := p.decode(sp)
	for lo < hi {
		c, size := utf8.DecodeRune(p.arena[lo:hi])
		if !unicode.IsSpace(c) {
			break
		}
		lo += size
	}
	for hi > lo {
		c, size := utf8.DecodeLastRune(p.arena[lo:hi])
		if !unicode.IsSpace(c) {
			break
		}
		hi -= size
	}
	if lo == hi {
		return false, nil
	}
	words, inWord := 0, false
	for j := lo; j < hi; {
		c, size := utf8.DecodeRune(p.arena[j:hi])
		j += size
		if unicode.IsSpace(c) {
			inWord = false
		} else if !inWord {
			inWord = true
			if words++; words > MaxSearchQueryWords {
				return false, fail(CodeTooManySearchQueryWords, i, path, "must have at most %d words", MaxSearchQueryWords)
			}
		}
	}
	if err := p.checkLen(lo, hi, MaxStringLen, CodeBadRequest, i, path, -1); err != nil {
		return false, err
	}
	p.keep(&r.SearchQuery, lo, hi)
	return true, nil
}

// geo validates geoTargeting: an object with exactly one of location or
// locations, or a bare string (read as location).
func (p *parser) geo(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	var f [2]jsontext.Span
	locPath := fld("geoTargeting.location")
	switch p.B[sp.Lo] {
	case '"':
		f[0] = sp
		locPath = fld("geoTargeting")
	case '{':
		p.Fields(sp.Lo, geoNames, f[:])
	default:
		return fail(CodeBadRequest, i, fld("geoTargeting"), "must be an object")
	}
	hasLoc, hasLocs := p.Present(f[0]), p.Present(f[1])
	if hasLoc == hasLocs {
		return fail(CodeInvalidGeoTargeting, i, fld("geoTargeting"), "exactly one of location or locations must be set")
	}
	if hasLoc {
		if p.B[f[0].Lo] != '"' {
			return fail(CodeBadRequest, i, locPath, "must be a string")
		}
		if p.emptyString(f[0]) {
			return fail(CodeInvalidGeoTargeting, i, locPath, "must not be empty")
		}
		return p.str(f[0], i, locPath, MaxStringLen, CodeBadRequest, &r.Location)
	}
	path := fld("geoTargeting.locations")
	ls := f[1]
	if p.B[ls.Lo] != '[' {
		return fail(CodeBadRequest, i, path, "must be an array of strings")
	}
	var over bool
	p.list, over = p.Elements(ls.Lo, p.list[:0], MaxLocations)
	if over {
		return fail(CodeTooManyLocations, i, path, "must have at most %d locations", MaxLocations)
	}
	if len(p.list) == 0 {
		return fail(CodeInvalidGeoTargeting, i, path, "must not be empty")
	}
	var cells [MaxLocations]uint64
	out := make([]string, 0, len(p.list))
	for k, esp := range p.list {
		if p.B[esp.Lo] != '"' {
			return fail(CodeBadRequest, i, path.el(k), "must be a string")
		}
		c, ok := parseCell(p.UnquoteTmp(esp))
		if !ok {
			return fail(CodeInvalidLocationCell, i, path.el(k), "must be a valid H3 cell index in hexadecimal")
		}
		cells[k] = c
		if k > 0 && cells[0] == c {
			continue // the same cell twice
		}
		out = out[:len(out)+1]
		lo := len(p.arena)
		p.arena = strconv.AppendUint(p.arena, c, 16)
		p.keep(&out[len(out)-1], lo, len(p.arena))
	}
	r.Locations = out
	return nil
}

// parseCell parses an H3 cell index written in 1..16 hexadecimal digits
// (either case, no prefix) and checks that it is a valid cell.
func parseCell(s []byte) (uint64, bool) {
	if len(s) == 0 || len(s) > 16 {
		return 0, false
	}
	var x uint64
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		x = x<<4 | uint64(c)
	}
	return x, h3.Cell(x).IsValid()
}

func (p *parser) page(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '{' {
		return fail(CodeBadRequest, i, fld("page"), "must be an object")
	}
	var f [3]jsontext.Span
	p.Fields(sp.Lo, pageNames, f[:])
	pg := new(Page)
	if !p.Present(f[0]) {
		return fail(CodeBadRequest, i, fld("page.type"), "is required")
	}
	t, err := p.enum(f[0], i, fld("page.type"), pageTypes)
	if err != nil {
		return err
	}
	pg.Type = t
	if !p.Present(f[1]) {
		return fail(CodeBadRequest, i, fld("page.pageId"), "is required")
	}
	if p.emptyString(f[1]) {
		return fail(CodeBadRequest, i, fld("page.pageId"), "must not be empty")
	}
	if err := p.str(f[1], i, fld("page.pageId"), MaxStringLen, CodeBadRequest, &pg.ID); err != nil {
		return err
	}
	if v := f[2]; p.Present(v) {
		path := fld("page.value")
		switch p.B[v.Lo] {
		case '"':
			pg.Value = make([]string, 1)
			if err := p.str(v, i, path, MaxStringLen, CodeBadRequest, &pg.Value[0]); err != nil {
				return err
			}
		case '[':
			var over bool
			p.list, over = p.Elements(v.Lo, p.list[:0], MaxPageValues)
			if over {
				return fail(CodeBadRequest, i, path, "must have at most %d items", MaxPageValues)
			}
			if len(p.list) == 0 {
				return fail(CodeBadRequest, i, path, "must not be empty")
			}
			pg.Value = make([]string, len(p.list))
			for k, esp := range p.list {
				if p.B[esp.Lo] != '"' {
					return fail(CodeBadRequest, i, path.el(k), "must be a string")
				}
				lo, hi := p.decode(esp)
				if err := p.checkLen(lo, hi, MaxStringLen, CodeBadRequest, i, path, k); err != nil {
					return err
				}
				p.keep(&pg.Value[k], lo, hi)
			}
		default:
			return fail(CodeBadRequest, i, path, "must be a string or a non-empty array of strings")
		}
	}
	r.Page = pg
	return nil
}

func (p *parser) filter(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '{' {
		return fail(CodeBadRequest, i, fld("filter"), "must be an object")
	}
	var f [3]jsontext.Span
	p.Fields(sp.Lo, filterNames, f[:])
	fl := &Filter{Operator: "and"}
	if s := f[0]; p.Present(s) {
		if p.B[s.Lo] != '"' {
			return fail(CodeBadRequest, i, fld("filter.operator"), "must be a string")
		}
		switch string(p.UnquoteTmp(s)) {
		case "and":
		case "or":
			fl.Operator = "or"
		default:
			return fail(CodeBadRequest, i, fld("filter.operator"), "the filter operation must be and or or")
		}
	}
	if s := f[1]; p.Present(s) {
		path := fld("filter.attributes")
		if p.B[s.Lo] != '[' {
			return fail(CodeBadRequest, i, path, "must be an array of strings")
		}
		var over bool
		p.list, over = p.Elements(s.Lo, p.list[:0], MaxFilterAttributes)
		if over || len(p.list) == 0 {
			return fail(CodeBadRequest, i, path, "the number of filter attributes must be from 1 to %d", MaxFilterAttributes)
		}
		fl.Attributes = make([]Attribute, len(p.list))
		for k, esp := range p.list {
			if p.B[esp.Lo] != '"' {
				return fail(CodeBadRequest, i, path.el(k), "must be a string")
			}
			lo, hi := p.decode(esp)
			colon := lo + bytes.IndexByte(p.arena[lo:hi], ':')
			if colon <= lo || colon == hi-1 {
				return fail(CodeBadRequest, i, path.el(k), "a filter attribute must be key:value with a non-empty key and value")
			}
			if utf8.RuneCount(p.arena[lo:colon]) > MaxAttributePartLen || utf8.RuneCount(p.arena[colon+1:hi]) > MaxAttributePartLen {
				return fail(CodeBadRequest, i, path.el(k), "the key and the value of a filter attribute must be at most %d characters each", MaxAttributePartLen)
			}
			p.keep(&fl.Attributes[k].Key, lo, colon)
			p.keep(&fl.Attributes[k].Value, colon+1, hi)
		}
	}
	if s := f[2]; p.Present(s) {
		path := fld("filter.promotions")
		if p.B[s.Lo] != '[' {
			return fail(CodeBadRequest, i, path, "must be an array of strings")
		}
		var over bool
		p.list, over = p.Elements(s.Lo, p.list[:0], MaxFilterPromotions)
		if over || len(p.list) == 0 {
			return fail(CodeBadRequest, i, path, "the number of filter promotions must be from 1 to %d", MaxFilterPromotions)
		}
		fl.Promotions = make([]string, len(p.list))
		for k, esp := range p.list {
			if p.B[esp.Lo] != '"' {
				return fail(CodeBadRequest, i, path.el(k), "must be a string")
			}
			lo, hi := p.decode(esp)
			if lo == hi {
				return fail(CodeBadRequest, i, path.el(k), "must not be empty")
			}
			if err := p.checkLen(lo, hi, MaxIDLen, CodeBadRequest, i, path, k); err != nil {
				return err
			}
			p.keep(&fl.Promotions[k], lo, hi)
		}
	}
	if fl.Attributes == nil && fl.Promotions == nil {
		return fail(CodeBadRequest, i, fld("filter"), "a filter needs attributes or promotions")
	}
	r.Filter = fl
	return nil
}

// ---- travel ----

// travelProducts validates a travel `products` array of objects.
func (p *parser) travelProducts(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	path := fld("products")
	if p.B[sp.Lo] != '[' {
		return fail(CodeBadRequest, i, path, "must be an array of objects")
	}
	var over bool
	p.list, over = p.Elements(sp.Lo, p.list[:0], MaxProducts)
	if over {
		return fail(CodeTooManyProducts, i, path, "must have at most %d products", MaxProducts)
	}
	n := len(p.list)
	if n == 0 {
		return fail(CodeNoProducts, i, path, "must not be empty: at least one product")
	}
	flights := r.Kind == KindFlights
	ids := make([]string, n)
	off := len(p.offs)
	var vars []string
	if flights {
		vars = make([]string, n)
	}
	var qs []float64
	var pr []int64
	for k, esp := range p.list {
		ep := path.el(k)
		if p.B[esp.Lo] != '{' {
			return fail(CodeBadRequest, i, ep, "must be an object")
		}
		var f [4]jsontext.Span
		p.Fields(esp.Lo, travelProductNames, f[:])
		if !p.Present(f[0]) {
			return fail(CodeBadRequest, i, ep.dot("id"), "is required")
		}
		if p.B[f[0].Lo] != '"' {
			return fail(CodeBadRequest, i, ep.dot("id"), "must be a string")
		}
		lo, hi := p.decode(f[0])
		if lo == hi {
			return fail(CodeBadRequest, i, ep.dot("id"), "must not be empty")
		}
		if err := p.checkLen(lo, hi, MaxIDLen, CodeBadRequest, i, ep.dot("id"), -1); err != nil {
			return err
		}
		p.offs = append(p.offs, lo, hi)
		if flights {
			v := f[1]
			if !p.Present(v) || p.emptyString(v) {
				return fail(CodeMissingVariationID, i, ep.dot("variationID"), "is required for a flights product")
			}
			if err := p.str(v, i, ep.dot("variationID"), MaxIDLen, CodeBadRequest, &vars[k]); err != nil {
				return err
			}
		}
		// qualityScore and price: given for every product or for none.
		has := p.Present(f[2])
		if k > 0 && has != (qs != nil) {
			return fail(CodeProductInfoMismatch, i, ep.dot("qualityScore"), "must be given for every product or for none")
		}
		if has {
			if qs == nil {
				qs = make([]float64, n)
			}
			if !jsontext.IsNumberStart(p.B[f[2].Lo]) {
				return fail(CodeBadRequest, i, ep.dot("qualityScore"), "must be a number")
			}
			v, ok := p.qualityScore(f[2])
			if !ok {
				return fail(CodeInvalidQualityScore, i, ep.dot("qualityScore"), "must be greater than 0 and at most 1")
			}
			qs[k] = v
		}
		has = p.Present(f[3])
		if k > 0 && has != (pr != nil) {
			return fail(CodeProductInfoMismatch, i, ep.dot("price"), "must be given for every product or for none")
		}
		if has {
			if pr == nil {
				pr = make([]int64, n)
			}
			if err := p.price(f[3], i, ep.dot("price"), &pr[k]); err != nil {
				return err
			}
		}
	}
	p.lists = append(p.lists, listFixup{ids, off})
	r.ProductIDs, r.VariationIDs, r.QualityScores, r.PricesMicros = ids, vars, qs, pr
	return nil
}

// travelCategory validates `{singleCategory: {id}}`.
func (p *parser) travelCategory(sp jsontext.Span, i int, r *Request) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '{' {
		return fail(CodeBadRequest, i, fld("category"), "must be an object")
	}
	var f [1]jsontext.Span
	p.Fields(sp.Lo, travelCatNames, f[:])
	sc := f[0]
	if !p.Present(sc) {
		return fail(CodeInvalidTravelCategory, i, fld("category.singleCategory"), "is required")
	}
	if p.B[sc.Lo] != '{' {
		return fail(CodeBadRequest, i, fld("category.singleCategory"), "must be an object")
	}
	f[0] = jsontext.Span{}
	p.Fields(sc.Lo, singleCatNames, f[:])
	id := f[0]
	if !p.Present(id) || p.B[id.Lo] != '"' || p.emptyString(id) {
		return fail(CodeInvalidTravelCategory, i, fld("category.singleCategory.id"), "must be a non-empty string")
	}
	c := new(CategoryFilter)
	if err := p.str(id, i, fld("category.singleCategory.id"), MaxIDLen, CodeBadRequest, &c.ID); err != nil {
		return err
	}
	r.Category = c
	return nil
}

func (p *parser) travelContext(sp jsontext.Span, isObj bool, f *[numTravelCtxFields]jsontext.Span, i int, r *Request) *ValidationError {
	flights := r.Kind == KindFlights
	missing := CodeBadRequest
	if flights {
		missing = CodeMissingFlightTravelContext
	}
	if !p.Present(sp) {
		return fail(missing, i, fld("travelContext"), "is required")
	}
	if !isObj {
		return fail(CodeBadRequest, i, fld("travelContext"), "must be an object")
	}
	tc := new(TravelContext)
	s := f[tcSite]
	if !p.Present(s) || p.emptyString(s) {
		return fail(missing, i, fld("travelContext.site"), "is required")
	}
	if err := p.str(s, i, fld("travelContext.site"), MaxSiteLen, CodeBadRequest, &tc.Site); err != nil {
		return err
	}
	if s := f[tcPassengers]; p.Present(s) {
		path := fld("travelContext.passengers")
		v, integral, ok := p.integer(s)
		switch {
		case !ok || !integral:
			return fail(CodeBadRequest, i, path, "must be an integer")
		case v < 1:
			return fail(CodeBadRequest, i, path, "must be at least 1")
		case v > MaxPassengers:
			return fail(CodeTooManyPassengers, i, path, "must be fewer than %d", MaxPassengers+1)
		}
		tc.Passengers = int(v)
	}
	var start, end int64
	if err := p.date(f[tcStart], i, fld("travelContext.travelStartDate"), &tc.StartDate, &start); err != nil {
		return err
	}
	if err := p.date(f[tcEnd], i, fld("travelContext.travelEndDate"), &tc.EndDate, &end); err != nil {
		return err
	}
	if p.Present(f[tcStart]) && p.Present(f[tcEnd]) && end <= start {
		return fail(CodeInvalidTravelDateRange, i, fld("travelContext.travelEndDate"), "must be after travelStartDate")
	}
	if s := f[tcTravelerType]; p.Present(s) {
		path := fld("travelContext.travelerType")
		if p.B[s.Lo] != '"' {
			return fail(CodeBadRequest, i, path, "must be a string")
		}
		v := p.UnquoteTmp(s)
		for _, t := range travelerTypes {
			if string(v) == t {
				tc.TravelerType = t
			}
		}
		if tc.TravelerType == "" {
			return fail(CodeInvalidTravelerType, i, path, "must be family, group, solo or couple")
		}
	}
	if err := p.str(f[tcPageName], i, fld("travelContext.pageName"), MaxStringLen, CodeBadRequest, &tc.PageName); err != nil {
		return err
	}
	if err := p.str(f[tcPlatform], i, fld("travelContext.platform"), MaxStringLen, CodeBadRequest, &tc.Platform); err != nil {
		return err
	}
	if flights {
		s := f[tcRoute]
		if !p.Present(s) || p.emptyString(s) {
			return fail(CodeMissingFlightTravelContext, i, fld("travelContext.route"), "is required for a flights auction")
		}
		if err := p.str(s, i, fld("travelContext.route"), MaxStringLen, CodeBadRequest, &tc.Route); err != nil {
			return err
		}
		s = f[tcFlightType]
		path := fld("travelContext.flightType")
		if !p.Present(s) || p.emptyString(s) {
			return fail(CodeMissingFlightTravelContext, i, path, "is required for a flights auction")
		}
		if p.B[s.Lo] != '"' {
			return fail(CodeBadRequest, i, path, "must be a string")
		}
		switch string(p.UnquoteTmp(s)) {
		case "one_way", "one-way":
			tc.FlightType = "one_way"
		case "round_trip", "round-trip":
			tc.FlightType = "round_trip"
		default:
			if err := p.str(s, i, path, MaxStringLen, CodeBadRequest, &tc.FlightType); err != nil {
				return err
			}
		}
	}
	r.Travel = tc
	return nil
}

// date validates an optional YYYY-MM-DD date; *day gets its day number.
func (p *parser) date(sp jsontext.Span, i int, path fpath, dst *string, day *int64) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '"' {
		return fail(CodeBadRequest, i, path, "must be a string")
	}
	s := p.UnquoteTmp(sp)
	y, m, d, ok := parseDate(s)
	if !ok {
		return fail(CodeInvalidDateFormat, i, path, "must be a date in the form YYYY-MM-DD")
	}
	*day = jsontext.DaysFromCivil(y, m, d)
	lo := len(p.arena)
	p.arena = append(p.arena, s...)
	p.keep(dst, lo, len(p.arena))
	return nil
}

// parseDate parses a calendar date YYYY-MM-DD (proleptic Gregorian).
func parseDate(s []byte) (y, m, d int, ok bool) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return 0, 0, 0, false
	}
	num := func(a, b int) int {
		n := 0
		for _, c := range s[a:b] {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	y, m, d = num(0, 4), num(5, 7), num(8, 10)
	if y < 0 || m < 1 || m > 12 || d < 1 || d > jsontext.DaysIn(m, y) {
		return 0, 0, 0, false
	}
	return y, m, d, true
}

// ---- scalar helpers ----

// emptyString reports whether the value at sp is "".
func (p *parser) emptyString(sp jsontext.Span) bool {
	return sp.Hi-sp.Lo == 2 && p.B[sp.Lo] == '"'
}

// emptyArray reports whether the array at sp has no elements.
func (p *parser) emptyArray(sp jsontext.Span) bool { return p.B[jsontext.SkipWS(p.B, sp.Lo+1)] == ']' }

// decode appends the decoded string at sp (known to be a string) to the arena
// and returns its range there.
func (p *parser) decode(sp jsontext.Span) (lo, hi int) {
	lo = len(p.arena)
	p.arena = p.Unquote(p.arena, sp)
	return lo, len(p.arena)
}

// keep arranges for *dst to get arena[lo:hi] when the request is committed.
func (p *parser) keep(dst *string, lo, hi int) {
	if lo == hi {
		return
	}
	p.fix = append(p.fix, strFixup{dst, lo, hi})
}

// checkLen checks that arena[lo:hi] has at most max code points; k >= 0 is
// the index of the element of path, for the message.
func (p *parser) checkLen(lo, hi, max int, code string, i int, path fpath, k int) *ValidationError {
	if hi-lo <= max || utf8.RuneCount(p.arena[lo:hi]) <= max {
		return nil
	}
	if k >= 0 {
		path = path.el(k)
	}
	return fail(code, i, path, "must be at most %d characters", max)
}

// str validates an optional string field of at most max characters (maxCode
// when longer) and keeps it in *dst; "" leaves *dst empty.
func (p *parser) str(sp jsontext.Span, i int, path fpath, max int, maxCode string, dst *string) *ValidationError {
	if !p.Present(sp) {
		return nil
	}
	if p.B[sp.Lo] != '"' {
		return fail(CodeBadRequest, i, path, "must be a string")
	}
	lo, hi := p.decode(sp)
	if err := p.checkLen(lo, hi, max, maxCode, i, path, -1); err != nil {
		return err
	}
	if dst != nil { // nil: validated only
		p.keep(dst, lo, hi)
	}
	return nil
}

// enum validates a string against its allowed values and returns the
// matching constant (no allocation).
func (p *parser) enum(sp jsontext.Span, i int, path fpath, values []string) (string, *ValidationError) {
	if p.B[sp.Lo] != '"' {
		return "", fail(CodeBadRequest, i, path, "must be a string")
	}
	raw := p.UnquoteTmp(sp)
	for _, v := range values {
		if string(raw) == v {
			return v, nil
		}
	}
	return "", fail(CodeBadRequest, i, path, "must be one of %s", strings.Join(values, ", "))
}

// integerLimit bounds the magnitude integer() reports exactly; anything
// larger is reported as ±(integerLimit+1).
const integerLimit = 1 << 40

// integer converts the JSON number at sp: ok is false when it is not a
// number; integral is false when it has a fractional part.
func (p *parser) integer(sp jsontext.Span) (v int64, integral, ok bool) {
	if !jsontext.IsNumberStart(p.B[sp.Lo]) {
		return 0, false, false
	}
	d := money.Scale(p.B[sp.Lo:sp.Hi], 0, integerLimit)
	if !d.Integral {
		return 0, false, true
	}
	v = int64(d.Mag)
	if d.Over {
		v = integerLimit + 1
	}
	if d.Neg {
		v = -v
	}
	return v, true, true
}
