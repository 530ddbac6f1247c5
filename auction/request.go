package auction

import (
	"github.com/endcap/endcap/internal/validation"
)

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
