package auction

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/uber/h3-go/v4"

	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/testkit/jsonbody"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/")

// obj holds raw JSON values by key; a value "-" removes the key from a base
// (With).
type obj = jsonbody.Obj

var q = jsonbody.Q

// body wraps auctions into a request.
func body(auctions ...string) string {
	return `{"auctions":[` + strings.Join(auctions, ",") + `]}`
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// jsonList is a JSON array of n items made by f.
var jsonList = jsonbody.List

func ids(n int) string { return jsonList(n, func(i int) string { return fmt.Sprintf(`"p%d"`, i) }) }

const (
	cellA = "8928308280fffff" // res 9, San Francisco
	cellB = "8a2a1072b59ffff" // res 10, New York
	cellC = "85283473fffffff" // res 5
)

var (
	baseListings = obj{"type": `"listings"`, "slots": "3", "products": `{"ids":["p1","p2"]}`}
	baseBanners  = obj{"type": `"banners"`, "slots": "1", "slotId": `"home-top"`}
	baseSB       = obj{"winners": "2", "placementId": `"search-top"`, "triggers": `{"searchQuery":"shoes"}`}
	baseHotels   = obj{"type": `"hotels"`, "slots": "2", "products": `[{"id":"h1"},{"id":"h2"}]`,
		"travelContext": `{"site":"example.com"}`}
	baseFlights = obj{"type": `"flights"`, "slots": "2", "products": `[{"id":"f1","variationID":"v1"}]`,
		"travelContext": `{"site":"example.com","route":"SAO-ORL","flightType":"one_way"}`}
)

func lst(over obj) string { return baseListings.With(over).String() }
func ban(over obj) string { return baseBanners.With(over).String() }
func sb(over obj) string  { return baseSB.With(over).String() }
func hot(over obj) string { return baseHotels.With(over).String() }
func fli(over obj) string { return baseFlights.With(over).String() }

// tctx builds a travelContext with overrides.
func tctx(base string, over obj) string {
	var o obj
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(base), &m); err != nil {
		panic(err)
	}
	o = obj{}
	for k, v := range m {
		o[k] = string(v)
	}
	return o.With(over).String()
}

const hotelCtx = `{"site":"example.com"}`
const flightCtx = `{"site":"example.com","route":"SAO-ORL","flightType":"one_way"}`

type rejectCase struct {
	name string
	kind EndpointKind
	body string
	code string
	msg  string // substring of the message (usually "path: text")
}

func rejectCases() []rejectCase {
	long := func(n int) string { return q(strings.Repeat("x", n)) }
	words := func(n int) string { return q(strings.TrimSpace(strings.Repeat("w ", n))) }
	A, S, T := Auctions, SponsoredBrand, Travel
	return []rejectCase{
		// body and envelope
		{"empty body", A, ``, CodeEmptyRequest, "request body is empty"},
		{"blank body", S, " \r\n\t", CodeEmptyRequest, "request body is empty"},
		{"syntax error", A, `{"auctions":[}`, CodeInvalidJSON, "not valid JSON"},
		{"truncated", T, `{"auctions":[`, CodeInvalidJSON, "not valid JSON"},
		{"trailing garbage", A, `{"auctions":[]} x`, CodeInvalidJSON, "not valid JSON"},
		{"invalid JSON beats validation", A, `{"auctions":[{"type":5}]`, CodeInvalidJSON, "not valid JSON"},
		{"top-level array", A, `[{"type":"listings"}]`, CodeBadRequest, "request body must be a JSON object"},
		{"top-level null", A, `null`, CodeBadRequest, "must be a JSON object"},
		{"top-level string", S, `"x"`, CodeBadRequest, "must be a JSON object"},
		{"no auctions key", A, `{}`, CodeMissingAuctions, "auctions: is required"},
		{"no auctions key (sponsored brand)", S, `{"foo":1}`, CodeMissingAuctions, "auctions: is required"},
		{"no auctions key (travel)", T, `{}`, CodeMissingAuctions, "auctions: is required"},
		{"auctions null", A, `{"auctions":null}`, CodeMissingAuctions, "auctions: is required"},
		{"auctions empty", A, `{"auctions":[]}`, CodeMissingAuctions, "auctions: must not be empty"},
		{"auctions case-sensitive", A, `{"Auctions":[` + lst(nil) + `]}`, CodeMissingAuctions, "auctions: is required"},
		{"auctions object", A, `{"auctions":{}}`, CodeBadRequest, "auctions: must be an array"},

		// text: invalid UTF-8, unpaired surrogates and NUL are refused in
		// every string of the body, naming it (docs/reference/auctions-request.md).
		{"lone surrogate in a product id", A, body(lst(obj{"products": `{"ids":["p1","p\ud800"]}`})), CodeBadRequest, "auctions[0].products.ids[1]: must not contain an unpaired surrogate escape"},
		{"lone low surrogate in a category", A, body(lst(obj{"products": "-", "category": `{"id":"\udc00"}`})), CodeBadRequest, "auctions[0].category.id: must not contain an unpaired surrogate"},
		{"invalid UTF-8 in a product id", A, body(lst(obj{"products": "{\"ids\":[\"p\xff\"]}"})), CodeBadRequest, "auctions[0].products.ids[0]: must be valid UTF-8"},
		{"NUL in a product id", A, body(lst(obj{"products": `{"ids":["p1","p2","\u0000"]}`})), CodeBadRequest, "auctions[0].products.ids[2]: must not contain the NUL character"},
		{"NUL in a search query", S, body(sb(obj{"triggers": `{"searchQuery":"shoes\u0000"}`})), CodeBadRequest, "auctions[0].triggers.searchQuery: must not contain the NUL"},
		{"invalid UTF-8 in a travel product", T, body(hot(obj{"products": "[{\"id\":\"h\xc3\"}]"})), CodeBadRequest, "auctions[0].products[0].id: must be valid UTF-8"},
		{"NUL in an unknown field", A, body(lst(obj{"extra": `["\u0000"]`})), CodeBadRequest, "auctions[0].extra[0]: must not contain the NUL"},
		{"invalid UTF-8 in a key", A, "{\"auctions\":[{\"ty\xffpe\":1}]}", CodeBadRequest, "auctions[0]: an object key must be valid UTF-8"},
		{"bad string beats a later missing field", A, `{"auctions":[{},` + lst(obj{"slotId": `"\ud83d"`}) + `]}`, CodeBadRequest, "auctions[1].slotId: must not contain an unpaired"},
		{"syntax error beats a bad string", A, "{\"auctions\":[{\"type\":\"\xff\"}]", CodeInvalidJSON, "not valid JSON"},
		{"6 auctions", A, body(repeat(lst(nil), 6)...), CodeTooManyAuctions, "auctions: must have at most 5 auctions"},
		{"6 sponsored brand auctions", S, body(repeat(sb(nil), 6)...), CodeTooManyAuctions, "at most 5"},
		{"6 travel auctions", T, body(repeat(hot(nil), 6)...), CodeTooManyAuctions, "at most 5"},
		{"auction not object", A, body(lst(nil), `[]`), CodeBadRequest, "auctions[1]: must be an object"},
		{"auction null", S, body(`null`), CodeBadRequest, "auctions[0]: must be an object"},

		// type
		{"type missing", A, body(lst(obj{"type": "-"})), CodeMissingPromotionType, "auctions[0].type: is required"},
		{"type null", A, body(lst(obj{"type": "null"})), CodeMissingPromotionType, "auctions[0].type: is required"},
		{"type empty", A, body(lst(obj{"type": `""`})), CodeMissingPromotionType, "auctions[0].type: is required"},
		{"type unknown", A, body(lst(obj{"type": `"videos"`})), CodeInvalidPromotionType, "auctions[0].type: must be listings or banners"},
		{"type wrong case", A, body(lst(obj{"type": `"Listings"`})), CodeInvalidPromotionType, "auctions[0].type"},
		{"type hotels on /v2/auctions", A, body(lst(obj{"type": `"hotels"`})), CodeInvalidPromotionType, "/v2/auctions/travel"},
		{"type number", A, body(lst(obj{"type": `1`})), CodeBadRequest, "auctions[0].type: must be a string"},
		{"travel type unknown", T, body(hot(obj{"type": `"trains"`})), CodeInvalidTravelType, "auctions[0].type: must be hotels or flights"},
		{"travel type listings", T, body(hot(obj{"type": `"listings"`})), CodeInvalidTravelType, "auctions[0].type"},
		{"travel type number", T, body(hot(obj{"type": `2`})), CodeBadRequest, "auctions[0].type: must be a string"},

		// slots / winners
		{"slots missing", A, body(lst(obj{"slots": "-"})), CodeMissingSlots, "auctions[0].slots: is required"},
		{"slots null", A, body(ban(obj{"slots": "null"})), CodeMissingSlots, "auctions[0].slots: is required"},
		{"slots 0", A, body(lst(obj{"slots": "0"})), CodeTooFewSlots, "auctions[0].slots: must be at least 1"},
		{"slots negative", A, body(lst(obj{"slots": "-3"})), CodeTooFewSlots, "auctions[0].slots: must be at least 1"},
		{"slots 41", A, body(lst(obj{"slots": "41"})), CodeBadRequest, "auctions[0].slots: must be at most 40"},
		{"slots huge", A, body(lst(obj{"slots": "1e30"})), CodeBadRequest, "auctions[0].slots: must be at most 40"},
		{"slots fraction", A, body(lst(obj{"slots": "2.5"})), CodeBadRequest, "auctions[0].slots: must be an integer"},
		{"slots string", A, body(lst(obj{"slots": `"3"`})), CodeBadRequest, "auctions[0].slots: must be an integer"},
		{"winners missing", S, body(sb(obj{"winners": "-"})), CodeMissingSlots, "auctions[0].winners: is required"},
		{"winners 0", S, body(sb(obj{"winners": "0"})), CodeTooFewSlots, "auctions[0].winners: must be at least 1"},
		{"winners 41", S, body(sb(obj{"winners": "41"})), CodeBadRequest, "auctions[0].winners: must be at most 40"},
		{"sponsored brand slots is not winners", S, body(sb(obj{"winners": "-", "slots": "2"})), CodeMissingSlots, "auctions[0].winners"},
		{"travel slots missing", T, body(fli(obj{"slots": "-"})), CodeMissingSlots, "auctions[0].slots: is required"},
		{"travel slots 41 (not capped)", T, body(hot(obj{"slots": "41"})), CodeBadRequest, "auctions[0].slots: must be at most 40"},

		// banners
		{"slotId missing", A, body(ban(obj{"slotId": "-"})), CodeMissingSlotID, "auctions[0].slotId: is required"},
		{"slotId empty", A, body(ban(obj{"slotId": `""`})), CodeMissingSlotID, "auctions[0].slotId: is required"},
		{"slotId number", A, body(ban(obj{"slotId": `7`})), CodeBadRequest, "auctions[0].slotId: must be a string"},
		{"slotId too long", A, body(ban(obj{"slotId": long(MaxIDLen + 1)})), CodeBadRequest, "auctions[0].slotId: must be at most 255 characters"},
		{"device unknown", A, body(ban(obj{"device": `"tablet"`})), CodeInvalidDevice, "auctions[0].device: must be desktop or mobile"},
		{"device empty", A, body(ban(obj{"device": `""`})), CodeInvalidDevice, "auctions[0].device"},
		{"device wrong case", A, body(ban(obj{"device": `"Mobile"`})), CodeInvalidDevice, "auctions[0].device"},
		{"device bool", A, body(ban(obj{"device": `true`})), CodeBadRequest, "auctions[0].device: must be a string"},

		// products
		{"products array", A, body(lst(obj{"products": `["p1"]`})), CodeBadRequest, "auctions[0].products: must be an object"},
		{"ids missing", A, body(lst(obj{"products": `{}`})), CodeNoProducts, "auctions[0].products.ids: is required"},
		{"ids null", A, body(lst(obj{"products": `{"ids":null,"qualityScores":[1]}`})), CodeNoProducts, "auctions[0].products.ids: is required"},
		{"ids empty", A, body(lst(obj{"products": `{"ids":[]}`})), CodeNoProducts, "auctions[0].products.ids: must not be empty"},
		{"ids string", A, body(lst(obj{"products": `{"ids":"p1"}`})), CodeBadRequest, "auctions[0].products.ids: must be an array of strings"},
		{"10001 ids", A, body(lst(obj{"products": `{"ids":` + ids(MaxProducts+1) + `}`})), CodeTooManyProducts, "auctions[0].products.ids: must have at most 10000 product ids"},
		{"id number", A, body(lst(obj{"products": `{"ids":["p1",2]}`})), CodeBadRequest, "auctions[0].products.ids[1]: must be a string"},
		{"id null", A, body(lst(obj{"products": `{"ids":[null]}`})), CodeBadRequest, "auctions[0].products.ids[0]: must be a string"},
		{"id empty", A, body(lst(obj{"products": `{"ids":["p1",""]}`})), CodeBadRequest, "auctions[0].products.ids[1]: must not be empty"},
		{"id too long", A, body(lst(obj{"products": `{"ids":["p1",` + long(256) + `]}`})), CodeBadRequest, "auctions[0].products.ids[1]: must be at most 255 characters"},
		{"qualityScores short", A, body(lst(obj{"products": `{"ids":["p1","p2"],"qualityScores":[0.5]}`})), CodeProductInfoMismatch, "auctions[0].products.qualityScores: must have one item per product id (2)"},
		{"qualityScores long", A, body(lst(obj{"products": `{"ids":["p1","p2"],"qualityScores":[0.5,0.5,0.5]}`})), CodeProductInfoMismatch, "auctions[0].products.qualityScores"},
		{"qualityScores empty", A, body(lst(obj{"products": `{"ids":["p1"],"qualityScores":[]}`})), CodeProductInfoMismatch, "auctions[0].products.qualityScores"},
		{"qualityScores object", A, body(lst(obj{"products": `{"ids":["p1"],"qualityScores":{}}`})), CodeBadRequest, "auctions[0].products.qualityScores: must be an array of numbers"},
		{"qualityScore 0", A, body(lst(obj{"products": `{"ids":["p1","p2"],"qualityScores":[0.5,0]}`})), CodeInvalidQualityScore, "auctions[0].products.qualityScores[1]: must be greater than 0 and at most 1"},
		{"qualityScore -0", A, body(lst(obj{"products": `{"ids":["p1"],"qualityScores":[-0.0]}`})), CodeInvalidQualityScore, "qualityScores[0]"},
		{"qualityScore negative", A, body(lst(obj{"products": `{"ids":["p1"],"qualityScores":[-0.5]}`})), CodeInvalidQualityScore, "qualityScores[0]"},
		{"qualityScore above 1", A, body(lst(obj{"products": `{"ids":["p1"],"qualityScores":[1.001]}`})), CodeInvalidQualityScore, "qualityScores[0]"},
		{"qualityScore underflows", A, body(lst(obj{"products": `{"ids":["p1"],"qualityScores":[1e-400]}`})), CodeInvalidQualityScore, "qualityScores[0]"},
		{"qualityScore string", A, body(lst(obj{"products": `{"ids":["p1","p2","p3","p4"],"qualityScores":[1,1,1,"0.5"]}`})), CodeBadRequest, "auctions[0].products.qualityScores[3]: must be a number"},
		{"qualityScore null", A, body(lst(obj{"products": `{"ids":["p1"],"qualityScores":[null]}`})), CodeBadRequest, "auctions[0].products.qualityScores[0]: must be a number"},
		{"qualityScore wrong type in auction 1", A, body(lst(nil), lst(obj{"products": `{"ids":["a","b","c","d"],"qualityScores":[0.1,0.2,0.3,true]}`})), CodeBadRequest, "auctions[1].products.qualityScores[3]: must be a number"},
		{"prices short", A, body(lst(obj{"products": `{"ids":["p1","p2"],"prices":[1]}`})), CodeProductInfoMismatch, "auctions[0].products.prices: must have one item per product id (2)"},
		{"price 0", A, body(lst(obj{"products": `{"ids":["p1","p2"],"prices":[1,0]}`})), CodeNonPositivePrice, "auctions[0].products.prices[1]: must be greater than 0"},
		{"price negative", A, body(lst(obj{"products": `{"ids":["p1"],"prices":[-1.5]}`})), CodeNonPositivePrice, "auctions[0].products.prices[0]"},
		{"price -0", A, body(lst(obj{"products": `{"ids":["p1"],"prices":[-0]}`})), CodeNonPositivePrice, "auctions[0].products.prices[0]"},
		{"price below a micro-unit", A, body(lst(obj{"products": `{"ids":["p1"],"prices":[0.0000004]}`})), CodeBadRequest, "auctions[0].products.prices[0]: must be at least 0.0000005"},
		{"price too large", A, body(lst(obj{"products": `{"ids":["p1"],"prices":[1e10]}`})), CodeBadRequest, "auctions[0].products.prices[0]: must be at most 1000000000"},
		{"price string", A, body(lst(obj{"products": `{"ids":["p1"],"prices":["1.00"]}`})), CodeBadRequest, "auctions[0].products.prices[0]: must be a number"},
		{"mismatch before element errors", A, body(lst(obj{"products": `{"ids":["p1","p2"],"qualityScores":["x"]}`})), CodeProductInfoMismatch, "qualityScores"},
		{"qualityScores before prices", A, body(lst(obj{"products": `{"prices":[0],"qualityScores":[0],"ids":["p1"]}`})), CodeInvalidQualityScore, "qualityScores[0]"},

		// category
		{"category string", A, body(lst(obj{"category": `"c1"`})), CodeBadRequest, "auctions[0].category: must be an object"},
		{"category empty object", A, body(lst(obj{"category": `{}`})), CodeInvalidCategory, "auctions[0].category: exactly one of id, ids, disjunctions must be set"},
		{"category id and ids", A, body(lst(obj{"category": `{"id":"c1","ids":["c2"]}`})), CodeInvalidCategory, "auctions[0].category: exactly one of"},
		{"category all three", A, body(lst(obj{"category": `{"id":"c1","ids":["c2"],"disjunctions":[["c3"]]}`})), CodeInvalidCategory, "exactly one of"},
		{"category only nulls", A, body(lst(obj{"category": `{"id":null,"ids":null}`})), CodeInvalidCategory, "exactly one of"},
		{"category id empty", A, body(lst(obj{"category": `{"id":""}`})), CodeInvalidCategory, "auctions[0].category.id: must not be empty"},
		{"category id number", A, body(lst(obj{"category": `{"id":5}`})), CodeBadRequest, "auctions[0].category.id: must be a string"},
		{"category id too long", A, body(lst(obj{"category": `{"id":` + long(256) + `}`})), CodeBadRequest, "auctions[0].category.id: must be at most 255 characters"},
		{"category ids empty", A, body(lst(obj{"category": `{"ids":[]}`})), CodeInvalidCategory, "auctions[0].category.ids: must not be empty"},
		{"category 6 ids", A, body(lst(obj{"category": `{"ids":["a","b","c","d","e","f"]}`})), CodeInvalidCategory, "auctions[0].category.ids: must have at most 5 category ids"},
		{"category ids element empty", A, body(lst(obj{"category": `{"ids":["a",""]}`})), CodeInvalidCategory, "auctions[0].category.ids[1]: must not be empty"},
		{"category ids element number", A, body(lst(obj{"category": `{"ids":["a",1]}`})), CodeBadRequest, "auctions[0].category.ids[1]: must be a string"},
		{"category ids string", A, body(lst(obj{"category": `{"ids":"a"}`})), CodeBadRequest, "auctions[0].category.ids: must be an array of strings"},
		{"disjunctions empty", A, body(lst(obj{"category": `{"disjunctions":[]}`})), CodeInvalidCategory, "auctions[0].category.disjunctions: must not be empty"},
		{"6 disjunctions", A, body(lst(obj{"category": `{"disjunctions":[["a"],["b"],["c"],["d"],["e"],["f"]]}`})), CodeInvalidCategory, "auctions[0].category.disjunctions: must have at most 5 disjunctions"},
		{"disjunction empty", A, body(lst(obj{"category": `{"disjunctions":[["a"],[]]}`})), CodeInvalidCategory, "auctions[0].category.disjunctions[1]: must not be empty"},
		{"disjunction of 6", A, body(lst(obj{"category": `{"disjunctions":[["a","b","c","d","e","f"]]}`})), CodeInvalidCategory, "auctions[0].category.disjunctions[0]: must have at most 5 category ids"},
		{"disjunction not array", A, body(lst(obj{"category": `{"disjunctions":["a"]}`})), CodeBadRequest, "auctions[0].category.disjunctions[0]: must be an array of strings"},
		{"disjunction element number", A, body(lst(obj{"category": `{"disjunctions":[["a"],["b",2]]}`})), CodeBadRequest, "auctions[0].category.disjunctions[1][1]: must be a string"},
		{"disjunction element empty", A, body(lst(obj{"category": `{"disjunctions":[["a"],["b",""]]}`})), CodeInvalidCategory, "auctions[0].category.disjunctions[1][1]: must not be empty"},
		{"disjunctions object", A, body(lst(obj{"category": `{"disjunctions":{}}`})), CodeBadRequest, "auctions[0].category.disjunctions: must be an array of arrays of strings"},

		// context
		{"listings without products or category", A, body(lst(obj{"products": "-"})), CodeNoProductsOrCategory, "auctions[0]: a listings auction needs products or a category"},
		{"listings with only searchQuery", A, body(lst(obj{"products": "-", "searchQuery": `"shoes"`})), CodeNoProductsOrCategory, "auctions[0]"},
		{"listings with null products", A, body(lst(obj{"products": "null"})), CodeNoProductsOrCategory, "auctions[0]"},
		{"listings with all three", A, body(lst(obj{"category": `{"id":"c"}`, "searchQuery": `"shoes"`})), CodeInvalidContext, "auctions[0]: at most two of products, searchQuery, category"},
		{"banners with all three", A, body(ban(obj{"products": `{"ids":["p"]}`, "category": `{"id":"c"}`, "searchQuery": `"shoes"`})), CodeInvalidContext, "auctions[0]: at most two"},
		{"searchQuery number", A, body(lst(obj{"searchQuery": `5`})), CodeBadRequest, "auctions[0].searchQuery: must be a string"},
		{"searchQuery 21 words", A, body(lst(obj{"searchQuery": words(21)})), CodeTooManySearchQueryWords, "auctions[0].searchQuery: must have at most 20 words"},
		{"searchQuery 21 words, odd spacing", A, body(lst(obj{"searchQuery": q(" a\tb\nc  d e f g h i j k l m n o p q r s t\u00a0u ")})), CodeTooManySearchQueryWords, "at most 20 words"},
		{"searchQuery too long", A, body(lst(obj{"searchQuery": long(MaxStringLen + 1)})), CodeBadRequest, "auctions[0].searchQuery: must be at most 1024 characters"},
		{"sponsored brand triggers missing", S, body(sb(obj{"triggers": "-"})), CodeMissingContext, "auctions[0].triggers: is required"},
		{"sponsored brand triggers null", S, body(sb(obj{"triggers": "null"})), CodeMissingContext, "auctions[0].triggers: is required"},
		{"sponsored brand triggers empty", S, body(sb(obj{"triggers": `{}`})), CodeMissingContext, "auctions[0].triggers: exactly one of products, category, searchQuery is required"},
		{"sponsored brand blank searchQuery", S, body(sb(obj{"triggers": `{"searchQuery":"  "}`})), CodeMissingContext, "auctions[0].triggers"},
		{"sponsored brand two triggers", S, body(sb(obj{"triggers": `{"searchQuery":"shoes","category":{"id":"c"}}`})), CodeInvalidContext, "auctions[0].triggers: exactly one of products, category, searchQuery may be given"},
		{"sponsored brand triggers array", S, body(sb(obj{"triggers": `[]`})), CodeBadRequest, "auctions[0].triggers: must be an object"},
		{"sponsored brand top-level products ignored", S, body(sb(obj{"triggers": `{}`, "products": `{"ids":["p"]}`})), CodeMissingContext, "auctions[0].triggers"},
		{"sponsored brand trigger products empty", S, body(sb(obj{"triggers": `{"products":{"ids":[]}}`})), CodeNoProducts, "auctions[0].triggers.products.ids: must not be empty"},
		{"sponsored brand trigger qualityScore", S, body(sb(obj{"triggers": `{"products":{"ids":["a"],"qualityScores":[2]}}`})), CodeInvalidQualityScore, "auctions[0].triggers.products.qualityScores[0]"},
		{"sponsored brand trigger category", S, body(sb(obj{"triggers": `{"category":{"ids":[]}}`})), CodeInvalidCategory, "auctions[0].triggers.category.ids: must not be empty"},
		{"sponsored brand trigger searchQuery words", S, body(sb(obj{"triggers": `{"searchQuery":` + words(21) + `}`})), CodeTooManySearchQueryWords, "auctions[0].triggers.searchQuery"},

		// geoTargeting
		{"geo empty object", A, body(lst(obj{"geoTargeting": `{}`})), CodeInvalidGeoTargeting, "auctions[0].geoTargeting: exactly one of location or locations must be set"},
		{"geo both", A, body(lst(obj{"geoTargeting": `{"location":"x","locations":["` + cellA + `"]}`})), CodeInvalidGeoTargeting, "auctions[0].geoTargeting: exactly one of"},
		{"geo location empty", A, body(lst(obj{"geoTargeting": `{"location":""}`})), CodeInvalidGeoTargeting, "auctions[0].geoTargeting.location: must not be empty"},
		{"geo location number", A, body(lst(obj{"geoTargeting": `{"location":5}`})), CodeBadRequest, "auctions[0].geoTargeting.location: must be a string"},
		{"geo location too long", A, body(lst(obj{"geoTargeting": `{"location":` + long(MaxStringLen+1) + `}`})), CodeBadRequest, "auctions[0].geoTargeting.location: must be at most 1024 characters"},
		{"geo array", A, body(lst(obj{"geoTargeting": `["x"]`})), CodeBadRequest, "auctions[0].geoTargeting: must be an object"},
		{"geo bare empty string", S, body(sb(obj{"geoTargeting": `""`})), CodeInvalidGeoTargeting, "auctions[0].geoTargeting: must not be empty"},
		{"geo locations empty", A, body(lst(obj{"geoTargeting": `{"locations":[]}`})), CodeInvalidGeoTargeting, "auctions[0].geoTargeting.locations: must not be empty"},
		{"geo 3 locations", A, body(lst(obj{"geoTargeting": `{"locations":["` + cellA + `","` + cellB + `","` + cellC + `"]}`})), CodeTooManyLocations, "auctions[0].geoTargeting.locations: must have at most 2 locations"},
		{"geo locations string", A, body(lst(obj{"geoTargeting": `{"locations":"` + cellA + `"}`})), CodeBadRequest, "auctions[0].geoTargeting.locations: must be an array of strings"},
		{"geo cell number", A, body(lst(obj{"geoTargeting": `{"locations":["` + cellA + `",617700169958293503]}`})), CodeBadRequest, "auctions[0].geoTargeting.locations[1]: must be a string"},
		{"geo cell invalid", A, body(lst(obj{"geoTargeting": `{"locations":["` + cellA + `","8928308280ffffe"]}`})), CodeInvalidLocationCell, "auctions[0].geoTargeting.locations[1]: must be a valid H3 cell"},
		{"geo cell not hex", A, body(lst(obj{"geoTargeting": `{"locations":["santiago"]}`})), CodeInvalidLocationCell, "auctions[0].geoTargeting.locations[0]"},
		{"geo cell 0x prefix", A, body(lst(obj{"geoTargeting": `{"locations":["0x` + cellA + `"]}`})), CodeInvalidLocationCell, "locations[0]"},
		{"geo cell empty", A, body(lst(obj{"geoTargeting": `{"locations":[""]}`})), CodeInvalidLocationCell, "locations[0]"},
		{"geo cell zero", A, body(lst(obj{"geoTargeting": `{"locations":["0"]}`})), CodeInvalidLocationCell, "locations[0]"},
		{"geo cell 17 digits", A, body(lst(obj{"geoTargeting": `{"locations":["0` + "0" + cellA + `"]}`})), CodeInvalidLocationCell, "locations[0]"},
		{"geo cell (sponsored brand)", S, body(sb(obj{"geoTargeting": `{"locations":["zz"]}`})), CodeInvalidLocationCell, "auctions[0].geoTargeting.locations[0]"},

		// placementId
		{"placementId 0", A, body(lst(obj{"placementId": "0"})), CodeInvalidPlacementID, "auctions[0].placementId: must be an integer from 1 to 8"},
		{"placementId 9", A, body(lst(obj{"placementId": "9"})), CodeInvalidPlacementID, "auctions[0].placementId: must be an integer from 1 to 8"},
		{"placementId -1", A, body(ban(obj{"placementId": "-1"})), CodeInvalidPlacementID, "auctions[0].placementId"},
		{"placementId 1.5", A, body(lst(obj{"placementId": "1.5"})), CodeInvalidPlacementID, "auctions[0].placementId"},
		{"placementId string", A, body(lst(obj{"placementId": `"3"`})), CodeBadRequest, "auctions[0].placementId: must be an integer"},
		{"sponsored brand placementId missing", S, body(sb(obj{"placementId": "-"})), CodeBadRequest, "auctions[0].placementId: is required"},
		{"sponsored brand placementId empty", S, body(sb(obj{"placementId": `""`})), CodeBadRequest, "auctions[0].placementId: is required"},
		{"sponsored brand placementId 9", S, body(sb(obj{"placementId": "9"})), CodeInvalidPlacementID, "auctions[0].placementId: must be an integer from 1 to 8"},
		{"sponsored brand placementId bool", S, body(sb(obj{"placementId": "true"})), CodeBadRequest, "auctions[0].placementId: must be a string"},
		{"sponsored brand placementId too long", S, body(sb(obj{"placementId": long(256)})), CodeBadRequest, "auctions[0].placementId: must be at most 255 characters"},

		// opaqueUserId
		{"opaqueUserId 91", A, body(lst(obj{"opaqueUserId": long(91)})), CodeInvalidOpaqueUserID, "auctions[0].opaqueUserId: must be at most 90 characters"},
		{"opaqueUserId 91 multibyte", S, body(sb(obj{"opaqueUserId": q(strings.Repeat("é", 90) + "😀")})), CodeInvalidOpaqueUserID, "auctions[0].opaqueUserId"},
		{"opaqueUserId 91 escaped", T, body(hot(obj{"opaqueUserId": `"` + strings.Repeat(`\u00e9`, 91) + `"`})), CodeInvalidOpaqueUserID, "auctions[0].opaqueUserId"},
		{"opaqueUserId number", A, body(ban(obj{"opaqueUserId": "7"})), CodeBadRequest, "auctions[0].opaqueUserId: must be a string"},
		// consent
		{"consent not an object", A, body(lst(obj{"consent": `false`})), CodeBadRequest, "auctions[0].consent: must be an object"},
		{"consent a string", S, body(sb(obj{"consent": `"CPXxRfAPXxRfAAfKABENB"`})), CodeBadRequest, "auctions[0].consent: must be an object"},
		{"adStorage a string", T, body(hot(obj{"consent": `{"adStorage":"false"}`})), CodeBadRequest, "auctions[0].consent.adStorage: must be true or false"},
		{"personalization a number", A, body(ban(obj{"consent": `{"personalization":0}`})), CodeBadRequest, "auctions[0].consent.personalization: must be true or false"},
		{"consent denied: opaqueUserId still validated", A, body(lst(obj{"consent": `{"adStorage":false}`, "opaqueUserId": long(91)})), CodeInvalidOpaqueUserID, "auctions[0].opaqueUserId: must be at most 90"},
		{"consent before opaqueUserId", A, body(lst(obj{"consent": `{"adStorage":1}`, "opaqueUserId": long(91)})), CodeBadRequest, "auctions[0].consent.adStorage"},
		{"placementId before consent", A, body(lst(obj{"placementId": "9", "consent": `1`})), CodeInvalidPlacementID, "placementId"},

		// page
		{"page string", A, body(lst(obj{"page": `"home"`})), CodeBadRequest, "auctions[0].page: must be an object"},
		{"page type missing", A, body(lst(obj{"page": `{"pageId":"x"}`})), CodeBadRequest, "auctions[0].page.type: is required"},
		{"page type bad", A, body(lst(obj{"page": `{"type":"pdp","pageId":"x"}`})), CodeBadRequest, "auctions[0].page.type: must be one of home, category, PDP, search, cart, other"},
		{"page pageId missing", S, body(sb(obj{"page": `{"type":"home"}`})), CodeBadRequest, "auctions[0].page.pageId: is required"},
		{"page pageId empty", T, body(hot(obj{"page": `{"type":"home","pageId":""}`})), CodeBadRequest, "auctions[0].page.pageId: must not be empty"},
		{"page value number", A, body(lst(obj{"page": `{"type":"cart","pageId":"x","value":1}`})), CodeBadRequest, "auctions[0].page.value: must be a string or a non-empty array of strings"},
		{"page value empty array", A, body(lst(obj{"page": `{"type":"cart","pageId":"x","value":[]}`})), CodeBadRequest, "auctions[0].page.value: must not be empty"},
		{"page value element", A, body(lst(obj{"page": `{"type":"cart","pageId":"x","value":["a",1]}`})), CodeBadRequest, "auctions[0].page.value[1]: must be a string"},

		// filter
		{"filter string", A, body(lst(obj{"filter": `"x"`})), CodeBadRequest, "auctions[0].filter: must be an object"},
		{"filter empty", A, body(lst(obj{"filter": `{}`})), CodeBadRequest, "auctions[0].filter: a filter needs attributes or promotions"},
		{"filter operator only", A, body(lst(obj{"filter": `{"operator":"or"}`})), CodeBadRequest, "a filter needs attributes or promotions"},
		{"filter operator bad", A, body(lst(obj{"filter": `{"operator":"xor","attributes":["a:b"]}`})), CodeBadRequest, "auctions[0].filter.operator: the filter operation must be and or or"},
		{"filter operator number", A, body(lst(obj{"filter": `{"operator":1,"attributes":["a:b"]}`})), CodeBadRequest, "auctions[0].filter.operator: must be a string"},
		{"filter 0 attributes", A, body(lst(obj{"filter": `{"attributes":[]}`})), CodeBadRequest, "auctions[0].filter.attributes: the number of filter attributes must be from 1 to 3"},
		{"filter 4 attributes", A, body(lst(obj{"filter": `{"attributes":["a:1","b:2","c:3","d:4"]}`})), CodeBadRequest, "the number of filter attributes must be from 1 to 3"},
		{"filter attribute no colon", A, body(lst(obj{"filter": `{"attributes":["a:1","color"]}`})), CodeBadRequest, "auctions[0].filter.attributes[1]: a filter attribute must be key:value"},
		{"filter attribute empty key", A, body(lst(obj{"filter": `{"attributes":[":red"]}`})), CodeBadRequest, "auctions[0].filter.attributes[0]: a filter attribute must be key:value"},
		{"filter attribute empty value", A, body(lst(obj{"filter": `{"attributes":["color:"]}`})), CodeBadRequest, "key:value"},
		{"filter attribute key too long", A, body(lst(obj{"filter": `{"attributes":["` + strings.Repeat("k", 41) + `:v"]}`})), CodeBadRequest, "at most 40 characters each"},
		{"filter attribute value too long", A, body(lst(obj{"filter": `{"attributes":["k:` + strings.Repeat("v", 41) + `"]}`})), CodeBadRequest, "at most 40 characters each"},
		{"filter attribute number", A, body(lst(obj{"filter": `{"attributes":[1]}`})), CodeBadRequest, "auctions[0].filter.attributes[0]: must be a string"},
		{"filter 0 promotions", A, body(lst(obj{"filter": `{"promotions":[]}`})), CodeBadRequest, "auctions[0].filter.promotions: the number of filter promotions must be from 1 to 3"},
		{"filter 4 promotions", A, body(lst(obj{"filter": `{"promotions":["a","b","c","d"]}`})), CodeBadRequest, "the number of filter promotions must be from 1 to 3"},
		{"filter promotion empty", A, body(lst(obj{"filter": `{"promotions":[""]}`})), CodeBadRequest, "auctions[0].filter.promotions[0]: must not be empty"},
		{"filter promotions object", A, body(lst(obj{"filter": `{"promotions":{}}`})), CodeBadRequest, "auctions[0].filter.promotions: must be an array of strings"},

		// experimentVariant
		{"experimentVariant 11", A, body(lst(obj{"experimentVariant": long(11)})), CodeExperimentVariantTooLong, "auctions[0].experimentVariant: must be at most 10 characters"},
		{"experimentVariant number", A, body(lst(obj{"experimentVariant": "1"})), CodeBadRequest, "auctions[0].experimentVariant: must be a string"},
		{"experimentVariant on banners", A, body(ban(obj{"experimentVariant": `"B"`})), CodeNoListingExperimentVariant, "auctions[0].experimentVariant: experiment variants are only for sponsored listings auctions"},
		{"experimentVariant too long on banners", A, body(ban(obj{"experimentVariant": long(11)})), CodeNoListingExperimentVariant, "auctions[0].experimentVariant"},
		{"experimentVariant on sponsored brand", S, body(sb(obj{"experimentVariant": `"B"`})), CodeNoListingExperimentVariant, "auctions[0].experimentVariant"},
		{"experimentVariant on hotels", T, body(hot(obj{"experimentVariant": `"B"`})), CodeNoListingExperimentVariant, "auctions[0].experimentVariant"},

		// demandSources
		{"demandSources on listings", A, body(lst(obj{"demandSources": `[{"source":"criteo","bids":[]}]`})), CodeUnauthorizedExternalDemand, "auctions[0].demandSources: external demand is not configured"},
		{"demandSources malformed on listings", A, body(lst(obj{"demandSources": `[1]`})), CodeUnauthorizedExternalDemand, "auctions[0].demandSources"},
		{"demandSources object", A, body(lst(obj{"demandSources": `{}`})), CodeBadRequest, "auctions[0].demandSources: must be an array"},
		{"demandSources on banners", A, body(ban(obj{"demandSources": `[{"source":"criteo","bids":[]}]`})), CodeInvalidExternalDemandAdType, "auctions[0].demandSources: external demand is only for listings auctions"},
		{"demandSources on sponsored brand", S, body(sb(obj{"demandSources": `[{}]`})), CodeInvalidExternalDemandAdType, "auctions[0].demandSources"},
		{"demandSources on flights", T, body(fli(obj{"demandSources": `[{}]`})), CodeInvalidExternalDemandAdType, "auctions[0].demandSources"},

		// travel products
		{"travel products object", T, body(hot(obj{"products": `{"ids":["h1"]}`})), CodeBadRequest, "auctions[0].products: must be an array of objects"},
		{"travel products empty", T, body(hot(obj{"products": `[]`})), CodeNoProducts, "auctions[0].products: must not be empty"},
		{"travel 10001 products", T, body(hot(obj{"products": jsonList(MaxProducts+1, func(i int) string { return fmt.Sprintf(`{"id":"h%d"}`, i) })})), CodeTooManyProducts, "auctions[0].products: must have at most 10000 products"},
		{"travel product string", T, body(hot(obj{"products": `["h1"]`})), CodeBadRequest, "auctions[0].products[0]: must be an object"},
		{"travel product id missing", T, body(hot(obj{"products": `[{"id":"h1"},{"qualityScore":0.5}]`})), CodeBadRequest, "auctions[0].products[1].id: is required"},
		{"travel product id empty", T, body(hot(obj{"products": `[{"id":""}]`})), CodeBadRequest, "auctions[0].products[0].id: must not be empty"},
		{"travel product id number", T, body(hot(obj{"products": `[{"id":1}]`})), CodeBadRequest, "auctions[0].products[0].id: must be a string"},
		{"travel qualityScore 0", T, body(hot(obj{"products": `[{"id":"h1","qualityScore":0}]`})), CodeInvalidQualityScore, "auctions[0].products[0].qualityScore: must be greater than 0 and at most 1"},
		{"travel qualityScore string", T, body(hot(obj{"products": `[{"id":"h1","qualityScore":"1"}]`})), CodeBadRequest, "auctions[0].products[0].qualityScore: must be a number"},
		{"travel qualityScore on some", T, body(hot(obj{"products": `[{"id":"h1","qualityScore":0.5},{"id":"h2"}]`})), CodeProductInfoMismatch, "auctions[0].products[1].qualityScore: must be given for every product or for none"},
		{"travel qualityScore on later", T, body(hot(obj{"products": `[{"id":"h1"},{"id":"h2","qualityScore":0.5}]`})), CodeProductInfoMismatch, "auctions[0].products[1].qualityScore"},
		{"travel price 0", T, body(fli(obj{"products": `[{"id":"f1","variationID":"v","price":0}]`})), CodeNonPositivePrice, "auctions[0].products[0].price: must be greater than 0"},
		{"travel price on some", T, body(fli(obj{"products": `[{"id":"f1","variationID":"v","price":10},{"id":"f2","variationID":"w"}]`})), CodeProductInfoMismatch, "auctions[0].products[1].price"},
		{"flights variationID missing", T, body(fli(obj{"products": `[{"id":"f1","variationID":"v1"},{"id":"f2"}]`})), CodeMissingVariationID, "auctions[0].products[1].variationID: is required for a flights product"},
		{"flights variationID empty", T, body(fli(obj{"products": `[{"id":"f1","variationID":""}]`})), CodeMissingVariationID, "auctions[0].products[0].variationID"},
		{"flights variationID number", T, body(fli(obj{"products": `[{"id":"f1","variationID":7}]`})), CodeBadRequest, "auctions[0].products[0].variationID: must be a string"},
		{"flights variationId spelling", T, body(fli(obj{"products": `[{"id":"f1","variationId":"v1"}]`})), CodeMissingVariationID, "auctions[0].products[0].variationID"},

		// travel category
		{"travel category string", T, body(hot(obj{"category": `"c"`})), CodeBadRequest, "auctions[0].category: must be an object"},
		{"travel category without singleCategory", T, body(hot(obj{"category": `{"id":"c"}`})), CodeInvalidTravelCategory, "auctions[0].category.singleCategory: is required"},
		{"travel category id missing", T, body(hot(obj{"category": `{"singleCategory":{}}`})), CodeInvalidTravelCategory, "auctions[0].category.singleCategory.id: must be a non-empty string"},
		{"travel category id empty", T, body(hot(obj{"category": `{"singleCategory":{"id":""}}`})), CodeInvalidTravelCategory, "auctions[0].category.singleCategory.id"},
		{"travel category id number", T, body(hot(obj{"category": `{"singleCategory":{"id":3}}`})), CodeInvalidTravelCategory, "auctions[0].category.singleCategory.id"},
		{"travel singleCategory string", T, body(hot(obj{"category": `{"singleCategory":"c"}`})), CodeBadRequest, "auctions[0].category.singleCategory: must be an object"},
		{"travel without products or category", T, body(hot(obj{"products": "-"})), CodeNoProductsOrCategory, "auctions[0]: a travel auction needs products or a category"},

		// travelContext
		{"hotels travelContext missing", T, body(hot(obj{"travelContext": "-"})), CodeBadRequest, "auctions[0].travelContext: is required"},
		{"flights travelContext missing", T, body(fli(obj{"travelContext": "-"})), CodeMissingFlightTravelContext, "auctions[0].travelContext: is required"},
		{"travelContext array", T, body(hot(obj{"travelContext": `[]`})), CodeBadRequest, "auctions[0].travelContext: must be an object"},
		{"hotels site missing", T, body(hot(obj{"travelContext": `{}`})), CodeBadRequest, "auctions[0].travelContext.site: is required"},
		{"flights site missing", T, body(fli(obj{"travelContext": tctx(flightCtx, obj{"site": "-"})})), CodeMissingFlightTravelContext, "auctions[0].travelContext.site: is required"},
		{"site too long", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"site": long(65)})})), CodeBadRequest, "auctions[0].travelContext.site: must be at most 64 characters"},
		{"site number", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"site": "1"})})), CodeBadRequest, "auctions[0].travelContext.site: must be a string"},
		{"passengers 10", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"passengers": "10"})})), CodeTooManyPassengers, "auctions[0].travelContext.passengers: must be fewer than 10"},
		{"passengers 0", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"passengers": "0"})})), CodeBadRequest, "auctions[0].travelContext.passengers: must be at least 1"},
		{"passengers 1.5", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"passengers": "1.5"})})), CodeBadRequest, "auctions[0].travelContext.passengers: must be an integer"},
		{"start date format", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelStartDate": `"2026/01/02"`})})), CodeInvalidDateFormat, "auctions[0].travelContext.travelStartDate: must be a date in the form YYYY-MM-DD"},
		{"start date with time", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelStartDate": `"2026-01-02T00:00:00Z"`})})), CodeInvalidDateFormat, "travelStartDate"},
		{"start date Feb 30", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelStartDate": `"2026-02-30"`})})), CodeInvalidDateFormat, "travelStartDate"},
		{"end date short", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelEndDate": `"2026-1-2"`})})), CodeInvalidDateFormat, "auctions[0].travelContext.travelEndDate"},
		{"date number", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelEndDate": `20260102`})})), CodeBadRequest, "auctions[0].travelContext.travelEndDate: must be a string"},
		{"end before start", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelStartDate": `"2026-03-10"`, "travelEndDate": `"2026-03-09"`})})), CodeInvalidTravelDateRange, "auctions[0].travelContext.travelEndDate: must be after travelStartDate"},
		{"end equals start", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelStartDate": `"2026-03-10"`, "travelEndDate": `"2026-03-10"`})})), CodeInvalidTravelDateRange, "travelEndDate"},
		{"end before start across years", T, body(fli(obj{"travelContext": tctx(flightCtx, obj{"travelStartDate": `"2027-01-01"`, "travelEndDate": `"2026-12-31"`})})), CodeInvalidTravelDateRange, "travelEndDate"},
		{"travelerType bad", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelerType": `"business"`})})), CodeInvalidTravelerType, "auctions[0].travelContext.travelerType: must be family, group, solo or couple"},
		{"travelerType wrong case", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelerType": `"Solo"`})})), CodeInvalidTravelerType, "travelerType"},
		{"travelerType number", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelerType": `1`})})), CodeBadRequest, "auctions[0].travelContext.travelerType: must be a string"},
		{"pageName number", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"pageName": `1`})})), CodeBadRequest, "auctions[0].travelContext.pageName: must be a string"},
		{"route missing", T, body(fli(obj{"travelContext": tctx(flightCtx, obj{"route": "-"})})), CodeMissingFlightTravelContext, "auctions[0].travelContext.route: is required for a flights auction"},
		{"route empty", T, body(fli(obj{"travelContext": tctx(flightCtx, obj{"route": `""`})})), CodeMissingFlightTravelContext, "auctions[0].travelContext.route"},
		{"flightType missing", T, body(fli(obj{"travelContext": tctx(flightCtx, obj{"flightType": "-"})})), CodeMissingFlightTravelContext, "auctions[0].travelContext.flightType: is required for a flights auction"},
		{"flightType number", T, body(fli(obj{"travelContext": tctx(flightCtx, obj{"flightType": "1"})})), CodeBadRequest, "auctions[0].travelContext.flightType: must be a string"},
		{"untyped travel with route needs variationID", T, body(fli(obj{"type": "-", "products": `[{"id":"f1"}]`})), CodeMissingVariationID, "auctions[0].products[0].variationID"},

		// order: the first invalid auction wins, then the first field in the documented order
		{"first invalid auction wins", A, body(lst(nil), lst(obj{"slots": "0"}), lst(obj{"type": "-"})), CodeTooFewSlots, "auctions[1].slots"},
		{"type before slots", A, body(lst(obj{"slots": "0", "type": `"x"`})), CodeInvalidPromotionType, "auctions[0].type"},
		{"slots before slotId", A, body(ban(obj{"slots": "-", "slotId": "-"})), CodeMissingSlots, "auctions[0].slots"},
		{"slotId before device", A, body(ban(obj{"slotId": "-", "device": `"tv"`})), CodeMissingSlotID, "auctions[0].slotId"},
		{"products before category", A, body(lst(obj{"products": `{"ids":[]}`, "category": `{}`})), CodeNoProducts, "products.ids"},
		{"category before searchQuery", A, body(lst(obj{"category": `{}`, "searchQuery": words(30)})), CodeInvalidCategory, "category"},
		{"searchQuery before context", A, body(lst(obj{"products": "-", "searchQuery": words(30)})), CodeTooManySearchQueryWords, "searchQuery"},
		{"context before geo", A, body(lst(obj{"products": "-", "geoTargeting": `{}`})), CodeNoProductsOrCategory, "auctions[0]"},
		{"geo before placementId", A, body(lst(obj{"geoTargeting": `{}`, "placementId": "9"})), CodeInvalidGeoTargeting, "geoTargeting"},
		{"placementId before opaqueUserId", A, body(lst(obj{"placementId": "9", "opaqueUserId": long(91)})), CodeInvalidPlacementID, "placementId"},
		{"opaqueUserId before page", A, body(lst(obj{"opaqueUserId": long(91), "page": `1`})), CodeInvalidOpaqueUserID, "opaqueUserId"},
		{"page before filter", A, body(lst(obj{"page": `1`, "filter": `{}`})), CodeBadRequest, "auctions[0].page"},
		{"filter before experimentVariant", A, body(lst(obj{"filter": `{}`, "experimentVariant": long(11)})), CodeBadRequest, "auctions[0].filter"},
		{"experimentVariant before demandSources", A, body(lst(obj{"experimentVariant": long(11), "demandSources": `[{}]`})), CodeExperimentVariantTooLong, "experimentVariant"},
		{"travel products before category", T, body(hot(obj{"products": `[]`, "category": `{}`})), CodeNoProducts, "auctions[0].products"},
		{"travel category before travelContext", T, body(hot(obj{"category": `{}`, "travelContext": "-"})), CodeInvalidTravelCategory, "auctions[0].category"},
		{"travelContext before context rule", T, body(hot(obj{"products": "-", "travelContext": "-"})), CodeBadRequest, "auctions[0].travelContext: is required"},
		{"duplicate key: last wins", A, `{"auctions":[{"type":"listings","slots":3,"slots":0,"products":{"ids":["a"]}}]}`, CodeTooFewSlots, "auctions[0].slots"},
	}
}

func TestParseAuctionsRejects(t *testing.T) {
	for _, tc := range rejectCases() {
		t.Run(tc.name, func(t *testing.T) {
			reqs, err := ParseAuctions([]byte(tc.body), tc.kind)
			if err == nil {
				t.Fatalf("accepted: %+v", reqs)
			}
			if reqs != nil {
				t.Errorf("requests returned with an error")
			}
			if err.Code != tc.code || !strings.Contains(err.Message, tc.msg) {
				t.Fatalf("got %s %q, want %s containing %q", err.Code, err.Message, tc.code, tc.msg)
			}
		})
	}
}

// TestEveryCodeCovered checks that the reject table has a case for every
// code of the auction endpoints.
func TestEveryCodeCovered(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range rejectCases() {
		seen[tc.code] = true
	}
	for _, code := range []string{CodeBadRequest, CodeInvalidJSON, CodeEmptyRequest, CodeMissingAuctions,
		CodeTooManyAuctions, CodeMissingPromotionType, CodeInvalidPromotionType, CodeMissingSlots, CodeTooFewSlots,
		CodeMissingSlotID, CodeInvalidDevice, CodeNoProducts, CodeTooManyProducts, CodeInvalidQualityScore,
		CodeNonPositivePrice, CodeProductInfoMismatch, CodeInvalidCategory, CodeNoProductsOrCategory,
		CodeInvalidContext, CodeMissingContext, CodeTooManySearchQueryWords, CodeInvalidGeoTargeting,
		CodeTooManyLocations, CodeInvalidLocationCell, CodeInvalidPlacementID, CodeInvalidOpaqueUserID,
		CodeExperimentVariantTooLong, CodeNoListingExperimentVariant, CodeUnauthorizedExternalDemand,
		CodeInvalidExternalDemandAdType, CodeInvalidTravelType, CodeInvalidDateFormat, CodeInvalidTravelDateRange,
		CodeTooManyPassengers, CodeInvalidTravelerType, CodeInvalidTravelCategory, CodeMissingVariationID,
		CodeMissingFlightTravelContext} {
		if !seen[code] {
			t.Errorf("no reject case for %s", code)
		}
	}
}

// TestErrorOrderIgnoresKeyOrder checks that the first error does not depend
// on the order of keys in the body.
func TestErrorOrderIgnoresKeyOrder(t *testing.T) {
	bad := map[string]string{"type": `"listings"`, "slots": "0", "products": `{"ids":[]}`, "category": `{}`,
		"geoTargeting": `{}`, "placementId": "9", "opaqueUserId": q(strings.Repeat("x", 91)),
		"experimentVariant": `"12345678901"`}
	keys := make([]string, 0, len(bad))
	for k := range bad {
		keys = append(keys, k)
	}
	build := func(order []string) string {
		var sb strings.Builder
		sb.WriteString(`{"auctions":[{`)
		for i, k := range order {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "%q:%s", k, bad[k])
		}
		sb.WriteString(`}]}`)
		return sb.String()
	}
	sort.Strings(keys)
	for n := range 20 {
		order := append([]string(nil), keys...)
		for i := range order { // a deterministic shuffle per n
			j := (i*7 + n*13) % len(order)
			order[i], order[j] = order[j], order[i]
		}
		_, err := ParseAuctions([]byte(build(order)), Auctions)
		if err == nil || err.Code != CodeTooFewSlots || err.Message != "auctions[0].slots: must be at least 1" {
			t.Fatalf("order %v: %v", order, err)
		}
	}
}

func TestParseAuctionsAcceptsEdges(t *testing.T) {
	A, S, T := Auctions, SponsoredBrand, Travel
	ch := func(c rune, n int) string { return q(strings.Repeat(string(c), n)) }
	tests := []struct {
		name  string
		kind  EndpointKind
		body  string
		check func(t *testing.T, r []Request)
	}{
		{"5 auctions", A, body(repeat(lst(nil), 5)...), func(t *testing.T, r []Request) {
			if len(r) != 5 {
				t.Fatal(len(r))
			}
		}},
		{"5 sponsored brand auctions", S, body(repeat(sb(nil), 5)...), nil},
		{"5 travel auctions", T, body(hot(nil), fli(nil), hot(nil), fli(nil), hot(nil)), func(t *testing.T, r []Request) {
			if r[1].Kind != KindFlights || r[4].Kind != KindHotels {
				t.Fatal(r[1].Kind, r[4].Kind)
			}
		}},
		{"1 and 40 slots", A, body(lst(obj{"slots": "1"}), ban(obj{"slots": "40"})), func(t *testing.T, r []Request) {
			if r[0].Slots != 1 || r[1].Slots != 40 {
				t.Fatal(r[0].Slots, r[1].Slots)
			}
		}},
		{"slots as whole-valued numbers", A, body(lst(obj{"slots": "2.0"}), lst(obj{"slots": "4e1"})), func(t *testing.T, r []Request) {
			if r[0].Slots != 2 || r[1].Slots != 40 {
				t.Fatal(r[0].Slots, r[1].Slots)
			}
		}},
		{"40 winners", S, body(sb(obj{"winners": "40"})), func(t *testing.T, r []Request) {
			if r[0].Slots != 40 {
				t.Fatal(r[0].Slots)
			}
		}},
		{"10000 ids", A, body(lst(obj{"products": `{"ids":` + ids(MaxProducts) + `,"qualityScores":` + jsonList(MaxProducts, func(int) string { return "1" }) + `}`})), func(t *testing.T, r []Request) {
			if len(r[0].ProductIDs) != MaxProducts || r[0].ProductIDs[9999] != "p9999" || len(r[0].QualityScores) != MaxProducts {
				t.Fatal(len(r[0].ProductIDs))
			}
		}},
		{"10000 travel products", T, body(hot(obj{"products": jsonList(MaxProducts, func(i int) string { return fmt.Sprintf(`{"id":"h%d"}`, i) })})), func(t *testing.T, r []Request) {
			if len(r[0].ProductIDs) != MaxProducts {
				t.Fatal(len(r[0].ProductIDs))
			}
		}},
		{"255-character id", A, body(lst(obj{"products": `{"ids":[` + ch('é', 255) + `]}`})), nil},
		{"consent denied drops the shopper", A, body(
			lst(obj{"opaqueUserId": `"u1"`, "consent": `{"adStorage":false,"personalization":true}`}),
			ban(obj{"opaqueUserId": `"u2"`, "consent": `{"personalization":false,"tcf":"CPXxRfAPXxRfAAfKABENB","gpp":"DBABMA~x"}`}),
			lst(obj{"opaqueUserId": `"u3"`, "consent": `{"adStorage":true,"personalization":true}`}),
			lst(obj{"opaqueUserId": `"u4"`, "consent": `{"adStorage":null}`}),
			lst(obj{"opaqueUserId": `"u5"`, "consent": `null`})), func(t *testing.T, r []Request) {
			for i, want := range []string{"", "", "u3", "u4", "u5"} {
				if r[i].OpaqueUserID != want {
					t.Errorf("auction %d: opaqueUserId %q, want %q", i, r[i].OpaqueUserID, want)
				}
			}
		}},
		{"consent denied on every endpoint", S, body(sb(obj{"opaqueUserId": `"u1"`, "consent": `{"adStorage":false}`})), func(t *testing.T, r []Request) {
			if r[0].OpaqueUserID != "" {
				t.Fatal(r[0].OpaqueUserID)
			}
		}},
		{"consent denied, travel", T, body(fli(obj{"opaqueUserId": `"u1"`, "consent": `{"personalization":false}`})), func(t *testing.T, r []Request) {
			if r[0].OpaqueUserID != "" || len(r[0].VariationIDs) != 1 {
				t.Fatal(r[0])
			}
		}},
		{"consent denied without opaqueUserId", A, body(lst(obj{"consent": `{"adStorage":false}`})), nil},
		{"90-character opaqueUserId", A, body(lst(obj{"opaqueUserId": ch('😀', 90)})), func(t *testing.T, r []Request) {
			if utf8.RuneCountInString(r[0].OpaqueUserID) != 90 {
				t.Fatal(r[0].OpaqueUserID)
			}
		}},
		{"2 locations", A, body(lst(obj{"geoTargeting": `{"locations":["` + cellA + `","` + strings.ToUpper(cellB) + `"]}`})), func(t *testing.T, r []Request) {
			if !reflect.DeepEqual(r[0].Locations, []string{cellA, cellB}) {
				t.Fatal(r[0].Locations)
			}
		}},
		{"same cell twice", A, body(lst(obj{"geoTargeting": `{"locations":["` + cellA + `","0` + strings.ToUpper(cellA) + `"]}`})), func(t *testing.T, r []Request) {
			if !reflect.DeepEqual(r[0].Locations, []string{cellA}) {
				t.Fatal(r[0].Locations)
			}
		}},
		{"placementId 1 and 8", A, body(lst(obj{"placementId": "1"}), ban(obj{"placementId": "8"})), func(t *testing.T, r []Request) {
			if r[0].PlacementID != 1 || r[1].PlacementID != 8 {
				t.Fatal(r[0].PlacementID, r[1].PlacementID)
			}
		}},
		{"sponsored brand integer placementId", S, body(sb(obj{"placementId": "8"})), func(t *testing.T, r []Request) {
			if r[0].PlacementID != 8 || r[0].PlacementName != "" {
				t.Fatal(r[0].PlacementID, r[0].PlacementName)
			}
		}},
		{"5 category ids, 5 disjunctions of 5", A, body(lst(obj{"category": `{"ids":["a","b","c","d","e"]}`}), lst(obj{"products": "-", "category": `{"disjunctions":[["a","b","c","d","e"],["f"],["g"],["h"],["i"]]}`})), func(t *testing.T, r []Request) {
			if len(r[0].Category.IDs) != 5 || len(r[1].Category.Disjunctions) != 5 || len(r[1].Category.Disjunctions[0]) != 5 {
				t.Fatal(r[0].Category, r[1].Category)
			}
		}},
		{"20 words", A, body(lst(obj{"searchQuery": q(strings.TrimSpace(strings.Repeat("w ", 20)))})), nil},
		{"blank searchQuery is absent", A, body(lst(obj{"searchQuery": `" \t "`, "category": `{"id":"c"}`})), func(t *testing.T, r []Request) {
			if r[0].SearchQuery != "" {
				t.Fatalf("%q", r[0].SearchQuery)
			}
		}},
		{"searchQuery trimmed", A, body(lst(obj{"searchQuery": `"\u00a0 running  shoes\n"`})), func(t *testing.T, r []Request) {
			if r[0].SearchQuery != "running  shoes" {
				t.Fatalf("%q", r[0].SearchQuery)
			}
		}},
		{"3 filter attributes and promotions", A, body(lst(obj{"filter": `{"operator":"or","attributes":["a:1","b:2:3","c:4"],"promotions":["x","y","z"]}`})), func(t *testing.T, r []Request) {
			f := r[0].Filter
			if f.Operator != "or" || len(f.Attributes) != 3 || f.Attributes[1] != (Attribute{"b", "2:3"}) || len(f.Promotions) != 3 {
				t.Fatal(f)
			}
		}},
		{"filter operator defaults to and", A, body(lst(obj{"filter": `{"attributes":["a:1"]}`})), func(t *testing.T, r []Request) {
			if r[0].Filter.Operator != "and" {
				t.Fatal(r[0].Filter)
			}
		}},
		{"filter on banners ignored", A, body(ban(obj{"filter": `"garbage"`})), func(t *testing.T, r []Request) {
			if r[0].Filter != nil {
				t.Fatal(r[0].Filter)
			}
		}},
		{"10-character experimentVariant", A, body(lst(obj{"experimentVariant": ch('v', 10)})), nil},
		{"empty experimentVariant on banners", A, body(ban(obj{"experimentVariant": `""`})), nil},
		{"empty demandSources", A, body(lst(obj{"demandSources": `[]`}), ban(obj{"demandSources": `null`})), nil},
		{"9 passengers", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"passengers": "9"})})), func(t *testing.T, r []Request) {
			if r[0].Travel.Passengers != 9 {
				t.Fatal(r[0].Travel)
			}
		}},
		{"leap day", T, body(hot(obj{"travelContext": tctx(hotelCtx, obj{"travelStartDate": `"2028-02-28"`, "travelEndDate": `"2028-02-29"`})})), nil},
		{"untyped travel auctions", T, body(hot(obj{"type": "-"}), fli(obj{"type": "-"})), func(t *testing.T, r []Request) {
			if r[0].Kind != KindHotels || r[1].Kind != KindFlights {
				t.Fatal(r[0].Kind, r[1].Kind)
			}
		}},
		{"flightType normalised", T, body(fli(obj{"travelContext": tctx(flightCtx, obj{"flightType": `"round-trip"`})}), fli(obj{"travelContext": tctx(flightCtx, obj{"flightType": `"multi_city"`})})), func(t *testing.T, r []Request) {
			if r[0].Travel.FlightType != "round_trip" || r[1].Travel.FlightType != "multi_city" {
				t.Fatal(r[0].Travel, r[1].Travel)
			}
		}},
		{"travel category only", T, body(hot(obj{"products": "-", "category": `{"singleCategory":{"id":"beach"}}`})), func(t *testing.T, r []Request) {
			if r[0].Category == nil || r[0].Category.ID != "beach" {
				t.Fatal(r[0].Category)
			}
		}},
		{"banners landing page (no context)", A, body(ban(nil)), func(t *testing.T, r []Request) {
			if r[0].Device != "desktop" || r[0].SlotID != "home-top" || r[0].ProductIDs != nil {
				t.Fatal(r[0])
			}
		}},
		{"listings: products and category", A, body(lst(obj{"category": `{"id":"c"}`})), nil},
		{"listings: category and searchQuery", A, body(lst(obj{"products": "-", "category": `{"id":"c"}`, "searchQuery": `"q"`})), nil},
		{"unknown keys and nulls ignored", A, body(lst(obj{"foo": `{"bar":[1,2,{"x":null}]}`, "category": "null", "geoTargeting": "null", "page": "null", "filter": "null", "experimentVariant": "null", "placementId": "null", "opaqueUserId": "null", "slotId": `5`, "device": `7`, "winners": `"x"`, "triggers": `1`})), nil},
		{"escaped keys", A, `{"auction\u0073":[{"typ\u0065":"listings","slots":1,"products":{"ids":["a\"b","\ud83d\ude00"]}}]}`, func(t *testing.T, r []Request) {
			if !reflect.DeepEqual(r[0].ProductIDs, []string{`a"b`, "😀"}) {
				t.Fatal(r[0].ProductIDs)
			}
		}},
		{"geoTargeting bare string on /v2/auctions", A, body(lst(obj{"geoTargeting": `"santiago"`})), func(t *testing.T, r []Request) {
			if r[0].Location != "santiago" {
				t.Fatal(r[0].Location)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reqs, err := ParseAuctions([]byte(tc.body), tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, reqs, tc.kind)
			if tc.check != nil {
				tc.check(t, reqs)
			}
		})
	}
}

// TestSDKBodies parses the bodies the official clients send (wire-contract
// §7 and §8.2), byte for byte as JSON.stringify writes them.
func TestSDKBodies(t *testing.T) {
	// @topsort/sdk README: createAuction with a listings and a banners auction.
	readme := `{"auctions":[{"type":"listings","slots":3,"category":{"id":"cat123"},"geoTargeting":{"location":"US"}},` +
		`{"type":"banners","slots":1,"device":"desktop","slotId":"slot123","category":{"ids":["cat1","cat2"]},"geoTargeting":{"location":"UK"}}]}`
	reqs, err := ParseAuctions([]byte(readme), Auctions)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{Kind: KindListings, Slots: 3, Category: &CategoryFilter{ID: "cat123"}, Location: "US"},
		{Kind: KindBanners, Slots: 1, SlotID: "slot123", Device: "desktop", Category: &CategoryFilter{IDs: []string{"cat1", "cat2"}}, Location: "UK"},
	}
	if reqs[0].arena == nil {
		t.Fatal("the requests do not own their strings' arena")
	}
	reqs[0].arena = nil // not a field of the request's value
	if !reflect.DeepEqual(reqs, want) {
		t.Fatalf("got %+v", reqs)
	}
	// The README's third auction has type "videos": the whole request is rejected.
	withVideos := strings.TrimSuffix(readme, "]}") + `,{"type":"videos","slots":1,"device":"desktop","slotId":"slot1234","category":{"ids":["cat1","cat2"]},"geoTargeting":{"location":"UK"}}]}`
	if _, err := ParseAuctions([]byte(withVideos), Auctions); err == nil || err.Code != CodeInvalidPromotionType || !strings.HasPrefix(err.Message, "auctions[2].type:") {
		t.Fatalf("videos: %v", err)
	}

	// SDK types at repo HEAD add opaqueUserId and page; products with qualityScores.
	sdk := `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["p_PJbnN","p_ojng4","p_8VKDt"],"qualityScores":[0.75,0.5,0.25]},` +
		`"searchQuery":"running shoes","opaqueUserId":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","page":{"type":"search","pageId":"/search","value":"running shoes"}}]}`
	reqs, err = ParseAuctions([]byte(sdk), Auctions)
	if err != nil {
		t.Fatal(err)
	}
	if r := reqs[0]; r.SearchQuery != "running shoes" || len(r.ProductIDs) != 3 || r.QualityScores[2] != 0.25 ||
		r.Page == nil || r.Page.Value[0] != "running shoes" || r.OpaqueUserID != "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b" {
		t.Fatalf("%+v", r)
	}

	// banners.js buildAuction: type, slots, device, slotId first, then
	// category (id | ids | one disjunction), searchQuery, geoTargeting.
	for _, cat := range []string{`{"id":"shoes"}`, `{"ids":["shoes","sale"]}`, `{"disjunctions":[["shoes","boots"]]}`} {
		b := `{"auctions":[{"type":"banners","slots":1,"device":"mobile","slotId":"home-hero","category":` + cat +
			`,"searchQuery":"red shoes","geoTargeting":{"location":"santiago"}}]}`
		reqs, err := ParseAuctions([]byte(b), Auctions)
		if err != nil {
			t.Fatal(cat, err)
		}
		if r := reqs[0]; r.Device != "mobile" || r.SlotID != "home-hero" || r.Category == nil || r.SearchQuery != "red shoes" || r.Location != "santiago" {
			t.Fatalf("%+v", r)
		}
	}

	// §7.2: a 10,000-id listings auction (~149 KB with UUID-like ids).
	big := `{"auctions":[{"type":"listings","slots":10,"products":{"ids":` +
		jsonList(MaxProducts, func(i int) string { return fmt.Sprintf(`"0190a1b2-%04x-7c3d-8e4f-%012x"`, i%65536, i) }) + `}}]}`
	reqs, err = ParseAuctions([]byte(big), Auctions)
	if err != nil || len(reqs[0].ProductIDs) != MaxProducts {
		t.Fatal(err)
	}
}

// TestNoAliasing checks that the requests do not share memory with the body.
func TestNoAliasing(t *testing.T) {
	b := []byte(body(lst(obj{"searchQuery": `"shoes"`, "opaqueUserId": `"u1"`, "page": `{"type":"home","pageId":"h","value":["v"]}`})))
	reqs, err := ParseAuctions(b, Auctions)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(reqs)
	for i := range b {
		b[i] = 'X'
	}
	after, _ := json.Marshal(reqs)
	if !bytes.Equal(before, after) {
		t.Fatalf("requests changed with the body:\n%s\n%s", before, after)
	}
}

func TestConcurrentParses(t *testing.T) {
	bodies := []string{
		body(lst(obj{"products": `{"ids":` + ids(300) + `}`})),
		body(ban(obj{"searchQuery": `"x"`}), lst(obj{"category": `{"disjunctions":[["a"],["b"]]}`})),
		body(lst(obj{"slots": "0"})),
	}
	want := make([][]byte, len(bodies))
	for i, b := range bodies {
		r, err := ParseAuctions([]byte(b), Auctions)
		want[i], _ = json.Marshal(struct {
			R []Request
			E *ValidationError
		}{r, err})
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 200 {
				i := (g + n) % len(bodies)
				r, err := ParseAuctions([]byte(bodies[i]), Auctions)
				got, _ := json.Marshal(struct {
					R []Request
					E *ValidationError
				}{r, err})
				if !bytes.Equal(got, want[i]) {
					t.Errorf("body %d: %s", i, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestMoneyIsExact(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0.1", 100_000}, {"19.99", 19_990_000}, {"1e-6", 1}, {"0.0000005", 1}, {"1.0000004", 1_000_000},
		{"1.0000005", 1_000_001}, {"123456.789012", 123_456_789_012}, {"1000000000", MaxPriceMicros},
		{"2.50E+1", 25_000_000}, {"0.30000000000000004", 300_000},
	}
	for _, tc := range tests {
		reqs, err := ParseAuctions([]byte(body(lst(obj{"products": `{"ids":["a"],"prices":[` + tc.in + `]}`}))), Auctions)
		if err != nil {
			t.Fatal(tc.in, err)
		}
		if got := reqs[0].PricesMicros[0]; got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.in, got, tc.want)
		}
	}
}

// ---- golden files ----

// TestGolden parses testdata/<endpoint>_<name>.json and compares the parsed
// requests with <name>.golden.json (go test -run Golden -update rewrites them).
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".golden.json") {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			kind := goldenKind(t, filepath.Base(f))
			reqs, verr := ParseAuctions(in, kind)
			if verr != nil {
				t.Fatal(verr)
			}
			// The API reuses the body's buffer once ParseAuctions returned:
			// the requests must keep nothing of it.
			for i := range in {
				in[i] = 'x'
			}
			checkInvariants(t, reqs, kind)
			got, err := json.MarshalIndent(reqs, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			gf := strings.TrimSuffix(f, ".json") + ".golden.json"
			if *updateGolden {
				if err := os.WriteFile(gf, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(gf)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs:\n%s", gf, got)
			}
		})
	}
	if n < 6 {
		t.Fatalf("only %d golden inputs", n)
	}
}

// TestRelease: lists handed back by Release are reused by later requests,
// which see their own ids only.
func TestRelease(t *testing.T) {
	body := func(ids ...string) []byte {
		b, _ := json.Marshal(map[string]any{"auctions": []any{map[string]any{
			"type": "listings", "slots": 2, "products": map[string]any{"ids": ids}}}})
		return b
	}
	first, verr := ParseAuctions(body("a", "b", "c"), Auctions)
	if verr != nil {
		t.Fatal(verr)
	}
	Release(first)
	if first[0].ProductIDs != nil || first[0].idList != nil {
		t.Fatalf("released request still holds %v", first[0].ProductIDs)
	}
	Release(first) // a second release is a no-op
	for round := range 50 {
		ids := []string{"x" + strconv.Itoa(round), "y"}
		reqs, verr := ParseAuctions(body(ids...), Auctions)
		if verr != nil {
			t.Fatal(verr)
		}
		other, verr := ParseAuctions(body("z"), Auctions)
		if verr != nil {
			t.Fatal(verr)
		}
		if !slices.Equal(reqs[0].ProductIDs, ids) || !slices.Equal(other[0].ProductIDs, []string{"z"}) {
			t.Fatalf("round %d: ids %v and %v", round, reqs[0].ProductIDs, other[0].ProductIDs)
		}
		Release(reqs)
		Release(other)
	}
}

// TestReleaseArena: the requests' strings point into one arena, not copied
// out of it; Release clears it (a string read after the release reads
// zeros, never another request's bytes) and hands it to the next request,
// so that parsing a 500-id auction allocates no arena of its own.
func TestReleaseArena(t *testing.T) {
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = fmt.Sprintf("product-%06d", i)
	}
	b, _ := json.Marshal(map[string]any{"auctions": []any{
		map[string]any{"type": "listings", "slots": 2, "products": map[string]any{"ids": ids}, "searchQuery": "red shoes"},
		map[string]any{"type": "banners", "slots": 1, "slotId": "top", "searchQuery": "blue"}}})
	reqs, verr := ParseAuctions(b, Auctions)
	if verr != nil {
		t.Fatal(verr)
	}
	if reqs[0].arena == nil || reqs[1].arena != nil {
		t.Fatal("the first request must own the arena, and only it")
	}
	arena := *reqs[0].arena
	inArena := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(arena)))
		return p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(arena))
	}
	for _, s := range []string{reqs[0].ProductIDs[0], reqs[0].ProductIDs[499], reqs[0].SearchQuery, reqs[1].SlotID, reqs[1].SearchQuery} {
		if !inArena(s) {
			t.Fatalf("%q is not in the arena", s)
		}
	}
	kept := reqs[0].ProductIDs[7] // as a result or record would hold it
	if kept != "product-000007" {
		t.Fatalf("id %q", kept)
	}
	Release(reqs)
	if kept != strings.Repeat("\x00", len("product-000007")) {
		t.Fatalf("a string read after Release reads %q, want zeros", kept)
	}
	Release(reqs) // a second release is a no-op

	// With the arena handed back, a parse and release of the same body
	// allocates less than one that keeps its requests (no Release).
	parse := func(release bool) func() {
		return func() {
			r, verr := ParseAuctions(b, Auctions)
			if verr != nil {
				t.Fatal(verr)
			}
			if release {
				Release(r)
			}
		}
	}
	// AllocsPerRun counts the whole process's allocations: another test's
	// goroutine can only add to them, so the least of a few tries is the
	// parse's own.
	least := func(f func()) float64 {
		n := testing.AllocsPerRun(200, f)
		for range 4 {
			n = min(n, testing.AllocsPerRun(200, f))
		}
		return n
	}
	withRelease, without := least(parse(true)), least(parse(false))
	if withRelease > without-2 { // the arena and the id list
		t.Fatalf("%v allocations per parse with Release, %v without", withRelease, without)
	}
}

func goldenKind(t testing.TB, name string) EndpointKind {
	switch {
	case strings.HasPrefix(name, "auctions_"):
		return Auctions
	case strings.HasPrefix(name, "sponsored_brand_"):
		return SponsoredBrand
	case strings.HasPrefix(name, "travel_"):
		return Travel
	}
	t.Fatalf("%s: name must start with auctions_, sponsored_brand_ or travel_", name)
	return 0
}

// ---- invariants (tests and fuzzing) ----

func checkInvariants(t *testing.T, reqs []Request, kind EndpointKind) {
	t.Helper()
	if len(reqs) < 1 || len(reqs) > MaxAuctions {
		t.Fatalf("%d auctions", len(reqs))
	}
	for i := range reqs {
		r := &reqs[i]
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("auction %d: %s\n%+v", i, fmt.Sprintf(format, args...), r)
		}
		switch kind {
		case Auctions:
			if r.Kind != KindListings && r.Kind != KindBanners {
				fail("kind %v", r.Kind)
			}
		case SponsoredBrand:
			if r.Kind != KindSponsoredBrand {
				fail("kind %v", r.Kind)
			}
		case Travel:
			if r.Kind != KindHotels && r.Kind != KindFlights {
				fail("kind %v", r.Kind)
			}
		}
		if r.Slots < MinSlots || r.Slots > MaxSlots {
			fail("slots %d", r.Slots)
		}
		if (r.Kind == KindBanners) != (r.SlotID != "") || (r.Kind == KindBanners) != (r.Device == "desktop" || r.Device == "mobile") {
			fail("slotId %q device %q", r.SlotID, r.Device)
		}
		n := len(r.ProductIDs)
		if r.ProductIDs != nil && (n < 1 || n > MaxProducts) {
			fail("%d products", n)
		}
		for _, id := range r.ProductIDs {
			if id == "" || utf8.RuneCountInString(id) > MaxIDLen {
				fail("product id %q", id)
			}
		}
		if r.QualityScores != nil {
			if len(r.QualityScores) != n {
				fail("%d quality scores", len(r.QualityScores))
			}
			for _, s := range r.QualityScores {
				if !(s > 0 && s <= 1) || math.IsNaN(s) {
					fail("quality score %v", s)
				}
			}
		}
		if r.PricesMicros != nil {
			if len(r.PricesMicros) != n {
				fail("%d prices", len(r.PricesMicros))
			}
			for _, p := range r.PricesMicros {
				if p <= 0 || p > MaxPriceMicros {
					fail("price %d", p)
				}
			}
		}
		if (r.Kind == KindFlights) != (r.VariationIDs != nil) || r.VariationIDs != nil && len(r.VariationIDs) != n {
			fail("variation ids %v", r.VariationIDs)
		}
		for _, v := range r.VariationIDs {
			if v == "" {
				fail("empty variation id")
			}
		}
		if c := r.Category; c != nil {
			set := 0
			if c.ID != "" {
				set++
			}
			if c.IDs != nil {
				set++
				if len(c.IDs) < 1 || len(c.IDs) > MaxCategoryItems {
					fail("category ids %v", c.IDs)
				}
			}
			if c.Disjunctions != nil {
				set++
				if len(c.Disjunctions) < 1 || len(c.Disjunctions) > MaxCategoryItems {
					fail("disjunctions %v", c.Disjunctions)
				}
				for _, d := range c.Disjunctions {
					if len(d) < 1 || len(d) > MaxCategoryItems {
						fail("disjunction %v", d)
					}
				}
			}
			if set != 1 {
				fail("category %+v", c)
			}
		}
		if q := r.SearchQuery; q != "" {
			if strings.TrimFunc(q, unicode.IsSpace) != q || len(strings.FieldsFunc(q, unicode.IsSpace)) > MaxSearchQueryWords {
				fail("search query %q", q)
			}
		}
		ctx := 0
		for _, b := range []bool{r.ProductIDs != nil, r.Category != nil, r.SearchQuery != ""} {
			if b {
				ctx++
			}
		}
		switch r.Kind {
		case KindListings:
			if r.ProductIDs == nil && r.Category == nil || ctx > 2 {
				fail("context")
			}
		case KindBanners:
			if ctx > 2 {
				fail("context")
			}
		case KindSponsoredBrand:
			if ctx != 1 {
				fail("%d triggers", ctx)
			}
			if (r.PlacementName == "") == (r.PlacementID == 0) {
				fail("placement %q %d", r.PlacementName, r.PlacementID)
			}
		case KindHotels, KindFlights:
			if r.ProductIDs == nil && r.Category == nil || r.SearchQuery != "" || r.Travel == nil || r.Travel.Site == "" {
				fail("travel")
			}
			if r.Kind == KindFlights && (r.Travel.Route == "" || r.Travel.FlightType == "") {
				fail("flights context")
			}
		}
		if len(r.Locations) > MaxLocations || r.Locations != nil && r.Location != "" || r.Locations != nil && len(r.Locations) == 0 {
			fail("locations %v %q", r.Locations, r.Location)
		}
		for k, c := range r.Locations {
			x, err := strconv.ParseUint(c, 16, 64)
			if err != nil || !h3.Cell(x).IsValid() || strconv.FormatUint(x, 16) != c || k == 1 && c == r.Locations[0] {
				fail("location %q", c)
			}
		}
		if r.PlacementID < 0 || r.PlacementID > MaxPlacementID {
			fail("placement %d", r.PlacementID)
		}
		if utf8.RuneCountInString(r.OpaqueUserID) > MaxOpaqueUserIDLen {
			fail("opaque user id")
		}
		if r.ExperimentVariant != "" && (r.Kind != KindListings || utf8.RuneCountInString(r.ExperimentVariant) > MaxExperimentVariantLen) {
			fail("experiment variant %q", r.ExperimentVariant)
		}
		if f := r.Filter; f != nil {
			if r.Kind != KindListings || f.Operator != "and" && f.Operator != "or" || len(f.Attributes) > MaxFilterAttributes ||
				len(f.Promotions) > MaxFilterPromotions || f.Attributes == nil && f.Promotions == nil {
				fail("filter %+v", f)
			}
			for _, a := range f.Attributes {
				if a.Key == "" || a.Value == "" || strings.Contains(a.Key, ":") {
					fail("attribute %+v", a)
				}
			}
		}
		if pg := r.Page; pg != nil && (pg.ID == "" || pg.Type == "" || pg.Value != nil && len(pg.Value) == 0) {
			fail("page %+v", pg)
		}
		if tc := r.Travel; tc != nil {
			if r.Kind != KindHotels && r.Kind != KindFlights || tc.Passengers < 0 || tc.Passengers > MaxPassengers ||
				tc.StartDate != "" && tc.EndDate != "" && tc.EndDate <= tc.StartDate {
				fail("travel context %+v", tc)
			}
		}
	}
}

// ---- fuzzing ----

func FuzzParseAuctions(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, file := range files {
		if strings.HasSuffix(file, ".golden.json") {
			continue
		}
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b, uint8(goldenKind(f, filepath.Base(file))-1))
		}
	}
	for _, tc := range rejectCases() {
		if len(tc.body) < 4096 {
			f.Add([]byte(tc.body), uint8(tc.kind-1))
		}
	}
	f.Add([]byte(body(lst(obj{"products": `{"ids":["a","b"],"qualityScores":[0.5,1e-1],"prices":[1.5,2e0]}`, "geoTargeting": `{"locations":["` + cellA + `"]}`}))), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, k uint8) {
		kind := EndpointKind(k%3) + Auctions
		reqs, err := ParseAuctions(b, kind)
		valid := json.Valid(b)
		if err != nil {
			if reqs != nil {
				t.Fatal("requests returned with an error")
			}
			if err.Code == "" || err.Message == "" {
				t.Fatalf("incomplete error %+v", err)
			}
			blank := len(bytes.TrimLeft(b, " \t\r\n")) == 0
			switch {
			case blank && err.Code != CodeEmptyRequest:
				t.Fatalf("blank body: %v", err)
			case !blank && !valid && err.Code != CodeInvalidJSON:
				t.Fatalf("invalid JSON reported as %v", err)
			case valid && err.Code == CodeInvalidJSON:
				t.Fatalf("valid JSON reported as %v", err)
			case valid && !jsontext.TextOK(b) && err.Code != CodeBadRequest:
				t.Fatalf("a string breaking the text rule reported as %v", err)
			}
			return
		}
		if !valid {
			t.Fatal("accepted a body that is not valid JSON")
		}
		if !jsontext.TextOK(b) {
			t.Fatal("accepted a string with invalid UTF-8, an unpaired surrogate or NUL")
		}
		checkInvariants(t, reqs, kind)
		// Compare with encoding/json (case-sensitive keys, last duplicate wins).
		var ref struct {
			Auctions []map[string]json.RawMessage `json:"auctions"`
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatalf("accepted a body encoding/json rejects: %v", err)
		}
		if len(ref.Auctions) != len(reqs) {
			t.Fatalf("%d auctions, encoding/json sees %d", len(reqs), len(ref.Auctions))
		}
		for i, a := range ref.Auctions {
			if kind != Auctions {
				continue
			}
			var prod struct {
				IDs []string `json:"ids"`
			}
			if raw, ok := a["products"]; ok && string(raw) != "null" {
				if err := json.Unmarshal(raw, &prod); err != nil {
					t.Fatalf("auction %d: products: %v", i, err)
				}
			}
			if !reflect.DeepEqual(prod.IDs, reqs[i].ProductIDs) {
				t.Fatalf("auction %d: ids %q, encoding/json %q", i, reqs[i].ProductIDs, prod.IDs)
			}
			var uid *string
			if raw, ok := a["opaqueUserId"]; ok {
				if err := json.Unmarshal(raw, &uid); err != nil {
					t.Fatalf("auction %d: opaqueUserId: %v", i, err)
				}
			}
			var consent struct{ AdStorage, Personalization *bool }
			if raw, ok := a["consent"]; ok {
				if err := json.Unmarshal(raw, &consent); err != nil {
					t.Fatalf("auction %d: consent: %v", i, err)
				}
			}
			if (consent.AdStorage != nil && !*consent.AdStorage) || (consent.Personalization != nil && !*consent.Personalization) {
				if reqs[i].OpaqueUserID != "" {
					t.Fatalf("auction %d: consent denied, opaqueUserId %q kept", i, reqs[i].OpaqueUserID)
				}
			} else if uid != nil && *uid != reqs[i].OpaqueUserID {
				t.Fatalf("auction %d: opaqueUserId %q, encoding/json %q", i, reqs[i].OpaqueUserID, *uid)
			}
		}
	})
}

// ---- benchmarks ----

// listingsBody is one listings auction with n UUID-like product ids, quality
// scores, a search query, a user and a page, as a search page sends it.
func listingsBody(n int, scores bool) []byte {
	var sb strings.Builder
	sb.WriteString(`{"auctions":[{"type":"listings","slots":4,"products":{"ids":`)
	sb.WriteString(jsonList(n, func(i int) string { return fmt.Sprintf(`"0190a1b2-%04x-7c3d-8e4f-%012x"`, i%65536, i*7919) }))
	if scores {
		sb.WriteString(`,"qualityScores":`)
		sb.WriteString(jsonList(n, func(i int) string { return strconv.FormatFloat(float64(i%1000+1)/1000, 'f', -1, 64) }))
	}
	sb.WriteString(`},"searchQuery":"running shoes","opaqueUserId":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",` +
		`"page":{"type":"search","pageId":"/search","value":"running shoes"},"placementId":1}]}`)
	return []byte(sb.String())
}

func benchParse(b *testing.B, body []byte, kind EndpointKind) {
	if _, err := ParseAuctions(body, kind); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() { // as the API does: the requests released once their auctions ran
		reqs, err := ParseAuctions(body, kind)
		if err != nil {
			b.Fatal(err)
		}
		Release(reqs)
	}
}

func BenchmarkListings500(b *testing.B)          { benchParse(b, listingsBody(500, true), Auctions) }
func BenchmarkListings500IDsOnly(b *testing.B)   { benchParse(b, listingsBody(500, false), Auctions) }
func BenchmarkListings10000(b *testing.B)        { benchParse(b, listingsBody(10000, true), Auctions) }
func BenchmarkListings10000IDsOnly(b *testing.B) { benchParse(b, listingsBody(10000, false), Auctions) }

// BenchmarkMixedFive is five small auctions of every /v2/auctions shape.
func BenchmarkMixedFive(b *testing.B) {
	body := []byte(body(
		lst(obj{"products": `{"ids":` + ids(20) + `,"prices":` + jsonList(20, func(i int) string { return fmt.Sprintf("%d.99", i+1) }) + `}`}),
		lst(obj{"products": "-", "category": `{"disjunctions":[["shoes","boots"],["sale"]]}`, "filter": `{"operator":"or","attributes":["color:red"]}`}),
		ban(obj{"device": `"mobile"`, "geoTargeting": `{"locations":["` + cellA + `","` + cellB + `"]}`}),
		ban(obj{"searchQuery": `"red shoes"`, "opaqueUserId": `"u-1"`}),
		lst(obj{"experimentVariant": `"B"`, "placementId": "2"}),
	))
	benchParse(b, body, Auctions)
}

// BenchmarkStdlibListings500 is encoding/json decoding the same 500-id body
// into plain structs, without any validation: the baseline.
func BenchmarkStdlibListings500(b *testing.B) {
	body := listingsBody(500, true)
	type products struct {
		IDs           []string  `json:"ids"`
		QualityScores []float64 `json:"qualityScores"`
	}
	type auction struct {
		Type         string          `json:"type"`
		Slots        int             `json:"slots"`
		Products     *products       `json:"products"`
		SearchQuery  string          `json:"searchQuery"`
		OpaqueUserID string          `json:"opaqueUserId"`
		Page         json.RawMessage `json:"page"`
		PlacementID  int             `json:"placementId"`
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var v struct {
			Auctions []auction `json:"auctions"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func TestKindNames(t *testing.T) {
	for k, want := range map[Kind]string{KindListings: "listings", KindBanners: "banners",
		KindSponsoredBrand: "sponsored_brand", KindHotels: "hotels", KindFlights: "flights", 0: "unknown", 99: "unknown"} {
		if k.String() != want {
			t.Errorf("%d: %q", k, k.String())
		}
	}
	for e, want := range map[EndpointKind]string{Auctions: "auctions", SponsoredBrand: "sponsored-brand", Travel: "travel", 0: "unknown"} {
		if e.String() != want {
			t.Errorf("%d: %q", e, e.String())
		}
	}
	if _, err := ParseAuctions([]byte(body(lst(nil))), 0); err == nil || err.Code != CodeBadRequest {
		t.Fatal(err)
	}
}
