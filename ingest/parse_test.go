package ingest

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/endcap/endcap/internal/jsontext"
	"github.com/endcap/endcap/testkit/jsonbody"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/")

// testNow is the server time of every test request: 2024-07-11T14:00:00Z.
var testNow = time.Date(2024, 7, 11, 14, 0, 0, 0, time.UTC).UnixMilli()

const testMarketplace = "mp-test"

func at(d time.Duration) string {
	return time.UnixMilli(testNow).Add(d).UTC().Format(time.RFC3339Nano)
}

// obj holds raw JSON values by key; a value "-" removes the key from a base
// (With).
type obj = jsonbody.Obj

var q = jsonbody.Q

var (
	baseImpression = obj{"id": `"imp-1"`, "occurredAt": q(at(-time.Minute)), "opaqueUserId": `"user-1"`, "resolvedBidId": `"rb-1"`}
	baseClick      = obj{"id": `"clk-1"`, "occurredAt": q(at(-time.Minute)), "opaqueUserId": `"user-1"`, "resolvedBidId": `"rb-1"`}
	basePurchase   = obj{"id": `"pur-1"`, "occurredAt": q(at(-time.Minute)), "opaqueUserId": `"user-1"`,
		"items": `[{"productId":"p1","unitPrice":1}]`}
	basePageView = obj{"id": `"pv-1"`, "occurredAt": q(at(-time.Minute)), "opaqueUserId": `"user-1"`,
		"page": `{"type":"home","pageId":"home"}`}
)

func imp(over obj) string { return baseImpression.With(over).String() }
func clk(over obj) string { return baseClick.With(over).String() }
func pur(over obj) string { return basePurchase.With(over).String() }
func pv(over obj) string  { return basePageView.With(over).String() }

// req builds a body with one array.
func req(array string, items ...string) string {
	return `{"` + array + `":[` + strings.Join(items, ",") + `]}`
}

// item builds a purchase with one item.
func item(it string) string { return pur(obj{"items": "[" + it + "]"}) }

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestParseRequestRejects(t *testing.T) {
	long := func(n int) string { return q(strings.Repeat("x", n)) }
	tests := []struct {
		name string
		body string
		code string
		msg  string // substring of the message
	}{
		// body
		{"empty body", ``, CodeEmptyRequest, "empty"},
		{"whitespace body", " \n\t\r ", CodeEmptyRequest, "empty"},
		{"syntax error", `{"impressions":[}`, CodeInvalidJSON, "not valid JSON"},
		{"truncated", `{"impressions":[`, CodeInvalidJSON, "not valid JSON"},
		{"trailing garbage", `{"impressions":[]} x`, CodeInvalidJSON, "after top-level value"},
		{"two objects", `{}{}`, CodeInvalidJSON, "not valid JSON"},
		{"single quotes", `{'impressions':[]}`, CodeInvalidJSON, "not valid JSON"},
		{"invalid JSON beats validation", `{"impressions":[{"id":5}]`, CodeInvalidJSON, "not valid JSON"},
		{"top-level array", `[{"impressions":[]}]`, CodeBadRequest, "must be a JSON object"},
		{"top-level string", `"hello"`, CodeBadRequest, "must be a JSON object"},
		{"top-level number", `42`, CodeBadRequest, "must be a JSON object"},
		{"top-level null", `null`, CodeBadRequest, "must be a JSON object"},
		{"top-level true", `true`, CodeBadRequest, "must be a JSON object"},
		{"no keys", `{}`, CodeEmptyRequest, "at least one of impressions, clicks, purchases, pageviews is required"},
		{"only unknown keys", `{"events":[]}`, CodeEmptyRequest, "at least one of"},
		{"only null arrays", `{"impressions":null,"clicks":null}`, CodeEmptyRequest, "at least one of"},
		{"keys are case-sensitive", `{"Impressions":[]}`, CodeEmptyRequest, "at least one of"},

		// arrays
		{"impressions object", `{"impressions":{}}`, CodeBadRequest, "impressions: must be an array"},
		{"clicks string", `{"clicks":"x"}`, CodeBadRequest, "clicks: must be an array"},
		{"purchases number", `{"purchases":1}`, CodeBadRequest, "purchases: must be an array"},
		{"pageviews bool", `{"pageviews":false}`, CodeBadRequest, "pageviews: must be an array"},
		{"51 impressions", req("impressions", repeat(imp(nil), 51)...), CodeBadRequest, "impressions: must have at most 50 items"},
		{"51 clicks", req("clicks", repeat(clk(nil), 51)...), CodeBadRequest, "clicks: must have at most 50 items"},
		{"51 purchases", req("purchases", repeat(pur(nil), 51)...), CodeBadRequest, "purchases: must have at most 50 items"},
		{"51 pageviews", req("pageviews", repeat(pv(nil), 51)...), CodeBadRequest, "pageviews: must have at most 50 items"},
		{"item not object", `{"impressions":[` + imp(nil) + `,[]]}`, CodeBadRequest, "impressions[1]: must be an object"},
		{"item null", `{"clicks":[null]}`, CodeBadRequest, "clicks[0]: must be an object"},
		{"item string", `{"purchases":["x"]}`, CodeBadRequest, "purchases[0]: must be an object"},

		// id
		{"id missing", req("impressions", imp(obj{"id": "-"})), CodeBadRequest, "impressions[0].id: is required"},
		{"id null", req("clicks", clk(obj{"id": "null"})), CodeBadRequest, "clicks[0].id: is required"},
		{"id empty", req("purchases", pur(obj{"id": `""`})), CodeBadRequest, "purchases[0].id: must not be empty"},
		{"id number", req("pageviews", pv(obj{"id": `12`})), CodeBadRequest, "pageviews[0].id: must be a string"},
		{"id too long", req("impressions", imp(obj{"id": long(MaxEventIDLen + 1)})), CodeBadRequest, "impressions[0].id: must be at most 255 characters"},

		// occurredAt
		{"occurredAt missing", req("impressions", imp(obj{"occurredAt": "-"})), CodeBadRequest, "impressions[0].occurredAt: is required"},
		{"occurredAt null", req("impressions", imp(obj{"occurredAt": "null"})), CodeBadRequest, "impressions[0].occurredAt: is required"},
		{"occurredAt number", req("impressions", imp(obj{"occurredAt": "5"})), CodeBadRequest, "impressions[0].occurredAt: must be a string"},
		{"occurredAt no offset", req("clicks", clk(obj{"occurredAt": `"2024-07-11T13:55:09"`})), CodeBadRequest, "clicks[0].occurredAt: must be an RFC 3339 date-time"},
		{"occurredAt date only", req("clicks", clk(obj{"occurredAt": `"2024-07-11"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt space", req("clicks", clk(obj{"occurredAt": `"2024-07-11 13:55:09Z"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt offset without colon", req("clicks", clk(obj{"occurredAt": `"2024-07-11T13:55:09+0200"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt offset hours only", req("clicks", clk(obj{"occurredAt": `"2024-07-11T13:55:09+02"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt offset 24h", req("clicks", clk(obj{"occurredAt": `"2024-07-11T13:55:09+24:00"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt empty fraction", req("clicks", clk(obj{"occurredAt": `"2024-07-11T13:55:09.Z"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt comma fraction", req("clicks", clk(obj{"occurredAt": `"2024-07-11T13:55:09,5Z"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt Feb 30", req("clicks", clk(obj{"occurredAt": `"2024-02-30T13:55:09Z"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt Feb 29 non-leap", req("clicks", clk(obj{"occurredAt": `"2023-02-29T13:55:09Z"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt hour 24", req("clicks", clk(obj{"occurredAt": `"2024-07-11T24:00:00Z"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt leap second", req("clicks", clk(obj{"occurredAt": `"2016-12-31T23:59:60Z"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt unix millis as string", req("clicks", clk(obj{"occurredAt": `"1720706109123"`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt trailing space", req("clicks", clk(obj{"occurredAt": `"2024-07-11T13:55:09Z "`})), CodeBadRequest, "RFC 3339"},
		{"occurredAt 5m1s ahead", req("impressions", imp(obj{"occurredAt": q(at(5*time.Minute + time.Second))})), CodeInvalidEventTime, "impressions[0].occurredAt: must not be more than 5 minutes in the future"},
		{"occurredAt 5m+1ms ahead", req("impressions", imp(obj{"occurredAt": q(at(5*time.Minute + time.Millisecond))})), CodeInvalidEventTime, "in the future"},
		{"occurredAt 5m+1ns ahead", req("impressions", imp(obj{"occurredAt": q(at(5*time.Minute + time.Nanosecond))})), CodeInvalidEventTime, "in the future"},
		{"occurredAt next year", req("pageviews", pv(obj{"occurredAt": `"2025-07-11T13:55:09Z"`})), CodeInvalidEventTime, "pageviews[0].occurredAt"},
		{"occurredAt before epoch", req("purchases", pur(obj{"occurredAt": `"1969-12-31T23:59:59.999Z"`})), CodeInvalidEventTime, "purchases[0].occurredAt: must not be before 1970-01-01T00:00:00Z"},
		{"occurredAt before epoch by offset", req("purchases", pur(obj{"occurredAt": `"1970-01-01T00:59:59+01:00"`})), CodeInvalidEventTime, "before 1970"},
		{"occurredAt year 0", req("purchases", pur(obj{"occurredAt": `"0000-01-01T00:00:00Z"`})), CodeInvalidEventTime, "before 1970"},

		// opaqueUserId
		{"opaqueUserId missing", req("impressions", imp(obj{"opaqueUserId": "-"})), CodeBadRequest, "impressions[0].opaqueUserId: is required"},
		{"opaqueUserId empty", req("impressions", imp(obj{"opaqueUserId": `""`})), CodeBadRequest, "impressions[0].opaqueUserId: must not be empty"},
		{"opaqueUserId number", req("impressions", imp(obj{"opaqueUserId": `7`})), CodeBadRequest, "impressions[0].opaqueUserId: must be a string"},
		{"opaqueUserId 91", req("impressions", imp(obj{"opaqueUserId": long(91)})), CodeInvalidOpaqueUserID, "impressions[0].opaqueUserId: must be at most 90 characters"},
		{"opaqueUserId 91 multibyte", req("clicks", clk(obj{"opaqueUserId": q(strings.Repeat("é", 90) + "😀")})), CodeInvalidOpaqueUserID, "clicks[0].opaqueUserId: must be at most 90 characters"},
		{"opaqueUserId 91 escaped", req("clicks", clk(obj{"opaqueUserId": `"` + strings.Repeat(`\u00e9`, 91) + `"`})), CodeInvalidOpaqueUserID, "at most 90"},

		// resolvedBidId / entity / externalCampaignId
		{"neither bid nor entity", req("impressions", imp(obj{"resolvedBidId": "-"})), CodeBadRequest, "impressions[0]: one of resolvedBidId or entity is required"},
		{"neither bid nor entity (nulls)", req("clicks", clk(obj{"resolvedBidId": "null", "entity": "null"})), CodeBadRequest, "clicks[0]: one of resolvedBidId or entity is required"},
		{"resolvedBidId empty counts as absent", req("impressions", imp(obj{"resolvedBidId": `""`})), CodeBadRequest, "impressions[0]: one of resolvedBidId or entity is required"},
		{"resolvedBidId too long", req("impressions", imp(obj{"resolvedBidId": long(MaxResolvedBidIDLen + 1)})), CodeInvalidResolvedBidID, "impressions[0].resolvedBidId: must be at most 512 characters"},
		{"resolvedBidId number", req("impressions", imp(obj{"resolvedBidId": `1`})), CodeBadRequest, "impressions[0].resolvedBidId: must be a string"},
		{"bid and externalCampaignId", req("impressions", imp(obj{"externalCampaignId": `"c1"`})), CodeInvalidUseOfExternalCampaignID, "impressions[0].externalCampaignId: must not be set together with resolvedBidId"},
		{"click bid and externalCampaignId", req("clicks", clk(obj{"externalCampaignId": `"c1"`, "entity": `{"id":"p","type":"product"}`})), CodeInvalidUseOfExternalCampaignID, "clicks[0].externalCampaignId"},
		{"externalCampaignId number", req("impressions", imp(obj{"resolvedBidId": "-", "entity": `{"id":"p","type":"product"}`, "externalCampaignId": `1`})), CodeBadRequest, "impressions[0].externalCampaignId: must be a string"},
		{"externalCampaignId too long", req("impressions", imp(obj{"resolvedBidId": "-", "entity": `{"id":"p","type":"product"}`, "externalCampaignId": long(MaxStringFieldLen + 1)})), CodeBadRequest, "externalCampaignId: must be at most 1024 characters"},
		{"externalVendorId object", req("impressions", imp(obj{"externalVendorId": `{}`})), CodeBadRequest, "impressions[0].externalVendorId: must be a string"},
		{"entity string", req("impressions", imp(obj{"resolvedBidId": "-", "entity": `"x"`})), CodeBadRequest, "impressions[0].entity: must be an object"},
		{"entity id missing", req("impressions", imp(obj{"entity": `{"type":"product"}`})), CodeBadRequest, "impressions[0].entity.id: is required"},
		{"entity id empty", req("impressions", imp(obj{"entity": `{"id":"","type":"product"}`})), CodeBadRequest, "impressions[0].entity.id: must not be empty"},
		{"entity type missing", req("impressions", imp(obj{"entity": `{"id":"p"}`})), CodeBadRequest, "impressions[0].entity.type: is required"},
		{"entity type bad", req("impressions", imp(obj{"entity": `{"id":"p","type":"Product"}`})), CodeBadRequest, "impressions[0].entity.type: must be one of product, vendor"},
		{"entity type number", req("impressions", imp(obj{"entity": `{"id":"p","type":1}`})), CodeBadRequest, "impressions[0].entity.type: must be a string"},
		{"additionalAttribution bad type", req("clicks", clk(obj{"additionalAttribution": `{"id":"p","type":"brand"}`})), CodeBadRequest, "clicks[0].additionalAttribution.type: must be one of"},
		{"additionalAttribution array", req("clicks", clk(obj{"additionalAttribution": `[]`})), CodeBadRequest, "clicks[0].additionalAttribution: must be an object"},

		// placement
		{"placement string", req("impressions", imp(obj{"placement": `"/x"`})), CodeBadRequest, "impressions[0].placement: must be an object"},
		{"placement path missing", req("impressions", imp(obj{"placement": `{"position":1}`})), CodeBadRequest, "impressions[0].placement.path: is required"},
		{"placement path empty", req("impressions", imp(obj{"placement": `{"path":""}`})), CodeBadRequest, "impressions[0].placement.path: must not be empty"},
		{"placement path too long", req("impressions", imp(obj{"placement": `{"path":` + long(1025) + `}`})), CodeBadRequest, "placement.path: must be at most 1024 characters"},
		{"placement position float", req("impressions", imp(obj{"placement": `{"path":"/","position":1.5}`})), CodeBadRequest, "impressions[0].placement.position: must be an integer"},
		{"placement position string", req("impressions", imp(obj{"placement": `{"path":"/","position":"1"}`})), CodeBadRequest, "impressions[0].placement.position: must be an integer"},
		{"placement position zero", req("impressions", imp(obj{"placement": `{"path":"/","position":0}`})), CodeBadRequest, "impressions[0].placement.position: must be at least 1"},
		{"placement position negative", req("impressions", imp(obj{"placement": `{"path":"/","position":-3}`})), CodeBadRequest, "placement.position: must be at least 1"},
		{"placement position over int32", req("impressions", imp(obj{"placement": `{"path":"/","position":2147483648}`})), CodeBadRequest, "placement.position: must be at most 2147483647"},
		{"placement page zero", req("clicks", clk(obj{"placement": `{"path":"/","page":0}`})), CodeBadRequest, "clicks[0].placement.page: must be at least 1"},
		{"placement pageSize bool", req("clicks", clk(obj{"placement": `{"path":"/","pageSize":true}`})), CodeBadRequest, "clicks[0].placement.pageSize: must be an integer"},
		{"placement pageSize 1e10", req("clicks", clk(obj{"placement": `{"path":"/","pageSize":1e10}`})), CodeBadRequest, "placement.pageSize: must be at most"},
		{"placement productId empty", req("clicks", clk(obj{"placement": `{"path":"/","productId":""}`})), CodeBadRequest, "clicks[0].placement.productId: must not be empty"},
		{"placement categoryIds empty", req("clicks", clk(obj{"placement": `{"path":"/","categoryIds":[]}`})), CodeBadRequest, "clicks[0].placement.categoryIds: must not be empty"},
		{"placement categoryIds string", req("clicks", clk(obj{"placement": `{"path":"/","categoryIds":"c1"}`})), CodeBadRequest, "placement.categoryIds: must be an array of strings"},
		{"placement categoryIds element empty", req("clicks", clk(obj{"placement": `{"path":"/","categoryIds":["a",""]}`})), CodeBadRequest, "clicks[0].placement.categoryIds[1]: must not be empty"},
		{"placement categoryIds element number", req("clicks", clk(obj{"placement": `{"path":"/","categoryIds":["a",3]}`})), CodeBadRequest, "clicks[0].placement.categoryIds[1]: must be a string"},
		{"placement categoryIds element null", req("clicks", clk(obj{"placement": `{"path":"/","categoryIds":[null]}`})), CodeBadRequest, "clicks[0].placement.categoryIds[0]: must be a string"},
		{"placement categoryIds too many", req("clicks", clk(obj{"placement": `{"path":"/","categoryIds":[` + strings.Join(repeat(`"c"`, maxCategoryIDs+1), ",") + `]}`})), CodeBadRequest, "placement.categoryIds: must have at most 100 items"},
		{"placement searchQuery empty", req("clicks", clk(obj{"placement": `{"path":"/","searchQuery":""}`})), CodeBadRequest, "clicks[0].placement.searchQuery: must not be empty"},

		// page
		{"page string", req("impressions", imp(obj{"page": `"home"`})), CodeBadRequest, "impressions[0].page: must be an object"},
		{"page type missing", req("impressions", imp(obj{"page": `{"pageId":"x"}`})), CodeBadRequest, "impressions[0].page.type: is required"},
		{"page type bad case", req("impressions", imp(obj{"page": `{"type":"pdp","pageId":"x"}`})), CodeBadRequest, "impressions[0].page.type: must be one of home, category, PDP, search, cart, other"},
		{"page pageId missing", req("impressions", imp(obj{"page": `{"type":"home"}`})), CodeBadRequest, "impressions[0].page.pageId: is required"},
		{"page pageId empty", req("impressions", imp(obj{"page": `{"type":"home","pageId":""}`})), CodeBadRequest, "impressions[0].page.pageId: must not be empty"},
		{"page value number", req("impressions", imp(obj{"page": `{"type":"home","pageId":"x","value":1}`})), CodeBadRequest, "impressions[0].page.value: must be a string or a non-empty array of strings"},
		{"page value empty array", req("impressions", imp(obj{"page": `{"type":"cart","pageId":"x","value":[]}`})), CodeBadRequest, "impressions[0].page.value: must not be empty"},
		{"page value element number", req("impressions", imp(obj{"page": `{"type":"cart","pageId":"x","value":["a",1]}`})), CodeBadRequest, "impressions[0].page.value[1]: must be a string"},
		{"page value too many", req("impressions", imp(obj{"page": `{"type":"cart","pageId":"x","value":[` + strings.Join(repeat(`"p"`, maxPageValues+1), ",") + `]}`})), CodeBadRequest, "page.value: must have at most 500 items"},

		// object
		{"object string", req("impressions", imp(obj{"object": `"listing"`})), CodeBadRequest, "impressions[0].object: must be an object"},
		{"object type missing", req("impressions", imp(obj{"object": `{}`})), CodeBadRequest, "impressions[0].object.type: is required"},
		{"object type bad", req("impressions", imp(obj{"object": `{"type":"video"}`})), CodeBadRequest, "impressions[0].object.type: must be one of listing, banner"},
		{"object assetId number", req("impressions", imp(obj{"object": `{"type":"banner","assetId":5}`})), CodeBadRequest, "impressions[0].object.assetId: must be a string"},
		{"object clickType bad", req("clicks", clk(obj{"object": `{"type":"listing","clickType":"share"}`})), CodeBadRequest, "clicks[0].object.clickType: must be one of"},

		// deviceType, channel, clickType
		{"deviceType bad", req("impressions", imp(obj{"deviceType": `"tablet"`})), CodeBadRequest, "impressions[0].deviceType: must be one of desktop, mobile"},
		{"deviceType case", req("impressions", imp(obj{"deviceType": `"Mobile"`})), CodeBadRequest, "impressions[0].deviceType"},
		{"deviceType empty", req("impressions", imp(obj{"deviceType": `""`})), CodeBadRequest, "impressions[0].deviceType: must be one of"},
		{"channel bad", req("clicks", clk(obj{"channel": `"email"`})), CodeBadRequest, "clicks[0].channel: must be one of onsite, offsite, instore"},
		{"channel number", req("pageviews", pv(obj{"channel": `1`})), CodeBadRequest, "pageviews[0].channel: must be a string"},
		{"purchase deviceType bad", req("purchases", pur(obj{"deviceType": `"tv"`})), CodeBadRequest, "purchases[0].deviceType: must be one of"},
		{"pageview deviceType bad", req("pageviews", pv(obj{"deviceType": `"tv"`})), CodeBadRequest, "pageviews[0].deviceType: must be one of"},
		{"clickType bad", req("clicks", clk(obj{"clickType": `"double"`})), CodeBadRequest, "clicks[0].clickType: must be one of product, like, add-to-cart, image, add_to_cart, purchase_now"},
		{"clickType number", req("clicks", clk(obj{"clickType": `1`})), CodeBadRequest, "clicks[0].clickType: must be a string"},

		// purchases
		{"items missing", req("purchases", pur(obj{"items": "-"})), CodeNoPurchaseItems, "purchases[0].items: is required"},
		{"items null", req("purchases", pur(obj{"items": "null"})), CodeNoPurchaseItems, "purchases[0].items"},
		{"items empty", req("purchases", pur(obj{"items": "[]"})), CodeNoPurchaseItems, "purchases[0].items: must not be empty"},
		{"items object", req("purchases", pur(obj{"items": "{}"})), CodeBadRequest, "purchases[0].items: must be an array"},
		{"items too many", req("purchases", pur(obj{"items": "[" + strings.Join(repeat(`{"productId":"p","unitPrice":1}`, MaxItemsPerPurchase+1), ",") + "]"})), CodeBadRequest, "purchases[0].items: must have at most 500 items"},
		{"item not object", req("purchases", pur(obj{"items": `[{"productId":"p","unitPrice":1},"x"]`})), CodeBadRequest, "purchases[0].items[1]: must be an object"},
		{"productId missing", req("purchases", item(`{"unitPrice":1}`)), CodeMissingProductID, "purchases[0].items[0].productId: is required"},
		{"productId null", req("purchases", item(`{"productId":null,"unitPrice":1}`)), CodeMissingProductID, "purchases[0].items[0].productId"},
		{"productId empty", req("purchases", item(`{"productId":"","unitPrice":1}`)), CodeMissingProductID, "purchases[0].items[0].productId: must not be empty"},
		{"productId number", req("purchases", item(`{"productId":12,"unitPrice":1}`)), CodeBadRequest, "purchases[0].items[0].productId: must be a string"},
		{"productId too long", req("purchases", item(`{"productId":`+long(1025)+`,"unitPrice":1}`)), CodeBadRequest, "productId: must be at most 1024 characters"},
		{"unitPrice missing", req("purchases", item(`{"productId":"p"}`)), CodeBadRequest, "purchases[0].items[0].unitPrice: is required"},
		{"unitPrice null", req("purchases", item(`{"productId":"p","unitPrice":null}`)), CodeBadRequest, "purchases[0].items[0].unitPrice: is required"},
		{"unitPrice string", req("purchases", item(`{"productId":"p","unitPrice":"19.99"}`)), CodeBadRequest, "purchases[0].items[0].unitPrice: must be a number"},
		{"unitPrice zero", req("purchases", item(`{"productId":"p","unitPrice":0}`)), CodeBadRequest, "purchases[0].items[0].unitPrice: must be greater than 0"},
		{"unitPrice negative zero", req("purchases", item(`{"productId":"p","unitPrice":-0.0}`)), CodeBadRequest, "unitPrice: must be greater than 0"},
		{"unitPrice negative", req("purchases", item(`{"productId":"p","unitPrice":-1.5}`)), CodeBadRequest, "unitPrice: must be greater than 0"},
		{"unitPrice rounds to zero", req("purchases", item(`{"productId":"p","unitPrice":0.0000004}`)), CodeBadRequest, "purchases[0].items[0].unitPrice: must be at least 0.0000005"},
		{"unitPrice tiny exponent", req("purchases", item(`{"productId":"p","unitPrice":1e-300}`)), CodeBadRequest, "unitPrice: must be at least"},
		{"unitPrice too large", req("purchases", item(`{"productId":"p","unitPrice":1000000000.000001}`)), CodeBadRequest, "unitPrice: must be at most 1000000000"},
		{"unitPrice huge exponent", req("purchases", item(`{"productId":"p","unitPrice":1e308}`)), CodeBadRequest, "unitPrice: must be at most"},
		{"quantity string", req("purchases", item(`{"productId":"p","unitPrice":1,"quantity":"2"}`)), CodeBadRequest, "purchases[0].items[0].quantity: must be an integer"},
		{"quantity fraction", req("purchases", item(`{"productId":"p","unitPrice":1,"quantity":1.5}`)), CodeBadRequest, "purchases[0].items[0].quantity: must be an integer"},
		{"quantity negative fraction", req("purchases", item(`{"productId":"p","unitPrice":1,"quantity":-0.5}`)), CodeBadRequest, "quantity: must be an integer"},
		{"quantity zero", req("purchases", item(`{"productId":"p","unitPrice":1,"quantity":0}`)), CodeQuantityNotPositive, "purchases[0].items[0].quantity: must be greater than 0"},
		{"quantity negative", req("purchases", item(`{"productId":"p","unitPrice":1,"quantity":-2}`)), CodeQuantityNotPositive, "purchases[0].items[0].quantity"},
		{"quantity very negative", req("purchases", item(`{"productId":"p","unitPrice":1,"quantity":-1e30}`)), CodeQuantityNotPositive, "quantity"},
		{"quantity too large", req("purchases", item(`{"productId":"p","unitPrice":1,"quantity":1000001}`)), CodeBadRequest, "purchases[0].items[0].quantity: must be at most 1000000"},
		{"vendorId empty", req("purchases", item(`{"productId":"p","unitPrice":1,"vendorId":""}`)), CodeBadRequest, "purchases[0].items[0].vendorId: must not be empty"},
		{"vendorId number", req("purchases", item(`{"productId":"p","unitPrice":1,"vendorId":7}`)), CodeBadRequest, "purchases[0].items[0].vendorId: must be a string"},
		{"second item", req("purchases", pur(obj{"items": `[{"productId":"p","unitPrice":1},{"productId":"p","unitPrice":1},{"productId":"p","unitPrice":0}]`})), CodeBadRequest, "purchases[0].items[2].unitPrice"},

		// pageviews
		{"pageview page missing", req("pageviews", pv(obj{"page": "-"})), CodeBadRequest, "pageviews[0].page: is required"},
		{"pageview page null", req("pageviews", pv(obj{"page": "null"})), CodeBadRequest, "pageviews[0].page: is required"},
		{"pageview page array", req("pageviews", pv(obj{"page": "[]"})), CodeBadRequest, "pageviews[0].page: must be an object"},
		{"pageview page type bad", req("pageviews", pv(obj{"page": `{"type":"landing","pageId":"x"}`})), CodeBadRequest, "pageviews[0].page.type: must be one of"},

		// paths and order
		{"index in path", req("impressions", imp(nil), imp(nil), imp(nil), imp(obj{"opaqueUserId": long(91)})), CodeInvalidOpaqueUserID, "impressions[3].opaqueUserId: must be at most 90 characters"},
		{"fields in fixed order", `{"impressions":[{"opaqueUserId":` + long(91) + `,"occurredAt":"bad","id":""}]}`, CodeBadRequest, "impressions[0].id: must not be empty"},
		{"occurredAt before opaqueUserId", `{"impressions":[{"opaqueUserId":` + long(91) + `,"occurredAt":"bad","id":"x"}]}`, CodeBadRequest, "impressions[0].occurredAt"},
		{"arrays in fixed order", `{"pageviews":[{}],"purchases":[{}],"clicks":[{}],"impressions":[` + imp(nil) + `,{}]}`, CodeBadRequest, "impressions[1].id: is required"},
		{"earlier item error beats later array shape", `{"clicks":{},"impressions":[{}]}`, CodeBadRequest, "impressions[0].id"},
		{"earlier array shape beats later item", `{"clicks":[{}],"impressions":5}`, CodeBadRequest, "impressions: must be an array"},
		{"duplicate key last wins", `{"impressions":[` + imp(obj{"opaqueUserId": `"ok"`}) + `],"impressions":[{}]}`, CodeBadRequest, "impressions[0].id: is required"},
		{"escaped key matches", `{"\u0069mpressions":[{}]}`, CodeBadRequest, "impressions[0].id: is required"},
		{"unknown key with wrong type ignored, known one checked", req("impressions", imp(obj{"extra": `{"deviceType":5}`, "deviceType": `5`})), CodeBadRequest, "impressions[0].deviceType: must be a string"},

		// text: invalid UTF-8, unpaired surrogates and NUL are refused in
		// every string of the body, naming it.
		{"lone high surrogate in id", req("impressions", imp(obj{"id": `"x\ud800y"`})), CodeBadRequest, "impressions[0].id: must not contain an unpaired surrogate escape"},
		{"lone high surrogate at the end", req("impressions", imp(obj{"id": `"x\uDBFF"`})), CodeBadRequest, "impressions[0].id: must not contain an unpaired surrogate"},
		{"lone low surrogate", req("clicks", clk(obj{"id": `"\udc00x"`})), CodeBadRequest, "clicks[0].id: must not contain an unpaired surrogate"},
		{"reversed pair", req("impressions", imp(obj{"id": `"\ude00\ud83d"`})), CodeBadRequest, "impressions[0].id: must not contain an unpaired surrogate"},
		{"high surrogate then a non-surrogate escape", req("impressions", imp(obj{"id": `"\ud83d\u0041"`})), CodeBadRequest, "impressions[0].id: must not contain an unpaired surrogate"},
		{"two high surrogates", req("impressions", imp(obj{"id": `"\ud83d\ud83d"`})), CodeBadRequest, "impressions[0].id: must not contain an unpaired surrogate"},
		{"invalid UTF-8 in id", "{\"impressions\":[" + imp(obj{"id": "\"a\xffb\""}) + "]}", CodeBadRequest, "impressions[0].id: must be valid UTF-8"},
		{"truncated UTF-8 sequence", "{\"purchases\":[" + pur(obj{"id": "\"a\xc3\""}) + "]}", CodeBadRequest, "purchases[0].id: must be valid UTF-8"},
		{"UTF-8 encoded surrogate", "{\"impressions\":[" + imp(obj{"id": "\"\xed\xa0\x80\""}) + "]}", CodeBadRequest, "impressions[0].id: must be valid UTF-8"},
		{"overlong UTF-8", "{\"impressions\":[" + imp(obj{"id": "\"\xc0\xaf\""}) + "]}", CodeBadRequest, "impressions[0].id: must be valid UTF-8"},
		{"NUL in id", req("impressions", imp(obj{"id": `"a\u0000b"`})), CodeBadRequest, "impressions[0].id: must not contain the NUL character"},
		{"NUL in opaqueUserId", req("pageviews", pv(obj{"opaqueUserId": `"\u0000"`})), CodeBadRequest, "pageviews[0].opaqueUserId: must not contain the NUL"},
		{"NUL in a product id", req("purchases", item(`{"productId":"p\u0000","unitPrice":1}`)), CodeBadRequest, "purchases[0].items[0].productId: must not contain the NUL"},
		{"invalid UTF-8 in a nested list", req("impressions", imp(obj{"placement": "{\"path\":\"/\",\"categoryIds\":[\"a\",\"\xfe\"]}"})), CodeBadRequest, "impressions[0].placement.categoryIds[1]: must be valid UTF-8"},
		{"NUL in an unknown field", req("impressions", imp(obj{"note": `"\u0000"`})), CodeBadRequest, "impressions[0].note: must not contain the NUL"},
		{"invalid UTF-8 in a key", "{\"impressions\":[{\"i\xffd\":\"x\"}]}", CodeBadRequest, "impressions[0]: an object key must be valid UTF-8"},
		{"NUL in a top-level key", `{"\u0000":1,"impressions":[]}`, CodeBadRequest, "an object key must not contain the NUL"},
		{"bad string at the top", "\"\xff\"", CodeBadRequest, "request body: must be valid UTF-8"},
		{"first bad string is named", req("impressions", imp(obj{"id": `"\u0000"`}), imp(obj{"id": `"\ud800"`})), CodeBadRequest, "impressions[0].id: must not contain the NUL"},
		{"bad string beats a missing field", req("impressions", `{}`, imp(obj{"id": `"\ud800"`})), CodeBadRequest, "impressions[1].id: must not contain an unpaired"},
		{"syntax error beats a bad string", "{\"impressions\":[" + imp(obj{"id": "\"\xff\""}) + "]", CodeInvalidJSON, "not valid JSON"},
		{"escaped backslash before u0000 is text", req("impressions", imp(obj{"id": `"\\u0000"`, "opaqueUserId": `"\ud800"`})), CodeBadRequest, "impressions[0].opaqueUserId: must not contain an unpaired"},

		// consent
		{"consent not an object", req("impressions", imp(obj{"consent": `false`})), CodeBadRequest, "impressions[0].consent: must be an object"},
		{"consent an array", req("purchases", pur(obj{"consent": `[]`})), CodeBadRequest, "purchases[0].consent: must be an object"},
		{"adStorage a string", req("clicks", clk(obj{"consent": `{"adStorage":"false"}`})), CodeBadRequest, "clicks[0].consent.adStorage: must be true or false"},
		{"personalization a number", req("pageviews", pv(obj{"consent": `{"personalization":0}`})), CodeBadRequest, "pageviews[0].consent.personalization: must be true or false"},
		{"adStorage checked before personalization", req("impressions", imp(obj{"consent": `{"personalization":1,"adStorage":"no"}`})), CodeBadRequest, "consent.adStorage"},
		{"consent granted: opaqueUserId still required", req("impressions", imp(obj{"consent": `{"adStorage":true,"personalization":true}`, "opaqueUserId": "-"})), CodeBadRequest, "impressions[0].opaqueUserId: is required"},
		{"empty consent: opaqueUserId still required", req("purchases", pur(obj{"consent": `{}`, "opaqueUserId": `""`})), CodeBadRequest, "purchases[0].opaqueUserId: must not be empty"},
		{"consent denied: opaqueUserId still validated", req("clicks", clk(obj{"consent": `{"adStorage":false}`, "opaqueUserId": long(91)})), CodeInvalidOpaqueUserID, "clicks[0].opaqueUserId: must be at most 90"},
		{"consent denied: opaqueUserId a number", req("pageviews", pv(obj{"consent": `{"personalization":false}`, "opaqueUserId": `7`})), CodeBadRequest, "pageviews[0].opaqueUserId: must be a string"},
		{"consent checked before opaqueUserId", req("impressions", imp(obj{"consent": `{"adStorage":null,"personalization":"x"}`, "opaqueUserId": `5`})), CodeBadRequest, "consent.personalization"},
		{"consent after occurredAt", req("impressions", imp(obj{"consent": `1`, "occurredAt": `"x"`})), CodeBadRequest, "impressions[0].occurredAt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events, err := ParseRequest([]byte(tc.body), testMarketplace, testNow)
			if err == nil {
				t.Fatalf("accepted (%d events), want %s %q\nbody: %s", len(events), tc.code, tc.msg, tc.body)
			}
			if events != nil {
				t.Errorf("events = %v with an error, want nil", events)
			}
			if err.Code != tc.code || !strings.Contains(err.Message, tc.msg) {
				t.Errorf("got %s %q\nwant %s containing %q", err.Code, err.Message, tc.code, tc.msg)
			}
		})
	}
}

func TestParseRequestAccepts(t *testing.T) {
	ent := `{"id":"p1","type":"product"}`
	tests := []struct {
		name  string
		body  string
		n     int
		check func(t *testing.T, evs []Event)
	}{
		{"empty arrays", `{"impressions":[],"clicks":[],"purchases":[],"pageviews":[]}`, 0, nil},
		{"consent denied drops the shopper", req("impressions",
			imp(obj{"consent": `{"adStorage":false,"personalization":true}`}),
			imp(obj{"consent": `{"personalization":false}`, "opaqueUserId": "-"}),
			imp(obj{"consent": `{"adStorage":false,"personalization":false,"tcf":"CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA","gpp":"DBABMA~CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA"}`, "opaqueUserId": `""`}),
			imp(obj{"consent": `{"adStorage":true,"personalization":true}`}),
			imp(obj{"consent": `{"adStorage":null}`}),
			imp(obj{"consent": `null`}),
			imp(obj{"consent": `{}`})), 7,
			func(t *testing.T, evs []Event) {
				for i, want := range []string{"", "", "", "user-1", "user-1", "user-1", "user-1"} {
					if evs[i].OpaqueUserID != want {
						t.Errorf("event %d: opaqueUserId %q, want %q", i, evs[i].OpaqueUserID, want)
					}
				}
			}},
		{"consent denied on every kind", `{"impressions":[` + imp(obj{"consent": `{"adStorage":false}`}) + `],"clicks":[` + clk(obj{"consent": `{"adStorage":false}`}) +
			`],"purchases":[` + pur(obj{"consent": `{"adStorage":false}`}) + `],"pageviews":[` + pv(obj{"consent": `{"adStorage":false}`}) + `]}`, 4,
			func(t *testing.T, evs []Event) {
				for i, e := range evs {
					if e.OpaqueUserID != "" || e.ID == "" || e.OccurredAtMs == 0 {
						t.Errorf("event %d: %+v", i, e)
					}
				}
				if len(evs[2].Items) != 1 || evs[3].Page == nil {
					t.Errorf("purchase or page view incomplete: %+v %+v", evs[2], evs[3])
				}
			}},
		{"one empty array", `{"clicks":[]}`, 0, nil},
		{"empty array and nulls", `{"impressions":null,"clicks":[],"purchases":null}`, 0, nil},
		{"whitespace around", " \n{\"pageviews\":[" + pv(nil) + "]}\n ", 1, nil},
		{"unknown keys everywhere", `{"extra":1,"impressions":[` + imp(obj{"foo": `{"bar":[1,2]}`, "placement": `{"path":"/","widget":"x","position":2}`}) + `]}`, 1,
			func(t *testing.T, evs []Event) {
				if evs[0].Placement == nil || evs[0].Placement.Position != 2 {
					t.Errorf("placement = %+v", evs[0].Placement)
				}
			}},
		{"entity only", req("impressions", imp(obj{"resolvedBidId": "-", "entity": ent})), 1,
			func(t *testing.T, evs []Event) {
				if evs[0].Entity == nil || *evs[0].Entity != (Entity{Type: "product", ID: "p1"}) || evs[0].ResolvedBidID != "" {
					t.Errorf("event = %+v", evs[0])
				}
			}},
		{"entity and bid (analytics.js)", req("clicks", clk(obj{"entity": ent})), 1,
			func(t *testing.T, evs []Event) {
				if evs[0].Entity == nil || evs[0].ResolvedBidID != "rb-1" {
					t.Errorf("event = %+v", evs[0])
				}
			}},
		{"entity and externalCampaignId", req("clicks", clk(obj{"resolvedBidId": "-", "entity": ent, "externalCampaignId": `"c"`})), 1,
			func(t *testing.T, evs []Event) {
				if evs[0].ExternalCampaignID != "c" {
					t.Errorf("event = %+v", evs[0])
				}
			}},
		{"bid with empty externalCampaignId", req("clicks", clk(obj{"externalCampaignId": `""`})), 1, nil},
		{"bid with null externalCampaignId", req("clicks", clk(obj{"externalCampaignId": `null`})), 1, nil},
		{"vendor entity", req("impressions", imp(obj{"resolvedBidId": "-", "entity": `{"id":"v","type":"vendor"}`})), 1, nil},
		{"spec click types", req("clicks", clk(obj{"clickType": `"product"`}), clk(obj{"clickType": `"like"`}), clk(obj{"clickType": `"add-to-cart"`})), 3,
			func(t *testing.T, evs []Event) {
				for i, want := range []string{"product", "like", "add-to-cart"} {
					if evs[i].ClickType != want {
						t.Errorf("clickType[%d] = %q", i, evs[i].ClickType)
					}
				}
			}},
		{"SDK click types", req("clicks", clk(obj{"clickType": `"image"`}), clk(obj{"clickType": `"add_to_cart"`}), clk(obj{"clickType": `"purchase_now"`})), 3,
			func(t *testing.T, evs []Event) {
				for i, want := range []string{"image", "add_to_cart", "purchase_now"} {
					if evs[i].ClickType != want {
						t.Errorf("clickType[%d] = %q", i, evs[i].ClickType)
					}
				}
			}},
		{"clickType escaped", req("clicks", clk(obj{"clickType": `"\u006cike"`})), 1,
			func(t *testing.T, evs []Event) {
				if evs[0].ClickType != "like" {
					t.Errorf("clickType = %q", evs[0].ClickType)
				}
			}},
		{"clickType on impression ignored", req("impressions", imp(obj{"clickType": `"bogus"`})), 1,
			func(t *testing.T, evs []Event) {
				if evs[0].ClickType != "" {
					t.Errorf("clickType = %q", evs[0].ClickType)
				}
			}},
		{"all page types", req("pageviews",
			pv(obj{"page": `{"type":"home","pageId":"x"}`}), pv(obj{"page": `{"type":"category","pageId":"x"}`}),
			pv(obj{"page": `{"type":"PDP","pageId":"x"}`}), pv(obj{"page": `{"type":"search","pageId":"x","value":"q"}`}),
			pv(obj{"page": `{"type":"cart","pageId":"x","value":["a","b"]}`}), pv(obj{"page": `{"type":"other","pageId":"x","value":""}`})), 6,
			func(t *testing.T, evs []Event) {
				if v := evs[3].Page.Value; len(v) != 1 || v[0] != "q" {
					t.Errorf("string value = %q", v)
				}
				if v := evs[4].Page.Value; len(v) != 2 || v[1] != "b" {
					t.Errorf("array value = %q", v)
				}
				if v := evs[5].Page.Value; len(v) != 1 || v[0] != "" {
					t.Errorf("empty string value = %q", v)
				}
				if evs[0].Page.Value != nil {
					t.Errorf("absent value = %q", evs[0].Page.Value)
				}
			}},
		{"device and channel values", req("purchases", pur(obj{"deviceType": `"desktop"`, "channel": `"offsite"`}), pur(obj{"deviceType": `"mobile"`, "channel": `"instore"`})), 2,
			func(t *testing.T, evs []Event) {
				if evs[0].DeviceType != "desktop" || evs[0].Channel != "offsite" || evs[1].DeviceType != "mobile" || evs[1].Channel != "instore" {
					t.Errorf("events = %+v", evs)
				}
			}},
		{"purchase ignores placement, page, entity", req("purchases", pur(obj{"placement": `5`, "page": `"x"`, "entity": `[]`, "resolvedBidId": `{}`})), 1,
			func(t *testing.T, evs []Event) {
				e := evs[0]
				if e.Placement != nil || e.Page != nil || e.Entity != nil || e.ResolvedBidID != "" {
					t.Errorf("event = %+v", e)
				}
			}},
		{"quantity default and integral forms", req("purchases", pur(obj{"items": `[{"productId":"a","unitPrice":1},{"productId":"b","unitPrice":1,"quantity":null},{"productId":"c","unitPrice":1,"quantity":3},{"productId":"d","unitPrice":1,"quantity":2.0},{"productId":"e","unitPrice":1,"quantity":1e2},{"productId":"f","unitPrice":1,"quantity":1000000}]`})), 1,
			func(t *testing.T, evs []Event) {
				want := []int64{1, 1, 3, 2, 100, 1000000}
				for i, it := range evs[0].Items {
					if it.Quantity != want[i] {
						t.Errorf("items[%d].Quantity = %d, want %d", i, it.Quantity, want[i])
					}
				}
			}},
		{"placement integers at bounds", req("impressions", imp(obj{"placement": `{"path":"/","position":1,"page":2147483647,"pageSize":5.0}`})), 1,
			func(t *testing.T, evs []Event) {
				pl := evs[0].Placement
				if pl.Position != 1 || pl.Page != math.MaxInt32 || pl.PageSize != 5 {
					t.Errorf("placement = %+v", pl)
				}
			}},
		{"nulls are absent", req("impressions", imp(obj{"entity": "null", "placement": "null", "page": "null", "object": "null", "additionalAttribution": "null",
			"externalVendorId": "null", "deviceType": "null", "channel": "null"})), 1,
			func(t *testing.T, evs []Event) {
				e := evs[0]
				if e.Entity != nil || e.Placement != nil || e.Page != nil || e.Object != nil || e.AdditionalAttribution != nil || e.DeviceType != "" {
					t.Errorf("event = %+v", e)
				}
			}},
		{"string escapes", req("impressions", imp(obj{"id": `"a\"b\\c\/d\n\u00e9\ud83d\ude00"`})), 1,
			func(t *testing.T, evs []Event) {
				if want := "a\"b\\c/d\né😀"; evs[0].ID != want {
					t.Errorf("id = %q, want %q", evs[0].ID, want)
				}
			}},
		{"surrogate pairs and non-ASCII text", req("impressions", imp(obj{"id": `"\ud83d\ude00\uD83D\uDE00"`, "opaqueUserId": "\"日本語-ü-é\"",
			"page": `{"type":"search","pageId":"/s","value":"café ☕"}`})), 1,
			func(t *testing.T, evs []Event) {
				if evs[0].ID != "😀😀" || evs[0].OpaqueUserID != "日本語-ü-é" || evs[0].Page.Value[0] != "café ☕" {
					t.Errorf("event = %+v %+v", evs[0], evs[0].Page)
				}
			}},
		{"other control escapes are kept", req("impressions", imp(obj{"id": `"a\u0001\u001fb\t"`})), 1,
			func(t *testing.T, evs []Event) {
				if evs[0].ID != "a\x01\x1fb\t" {
					t.Errorf("id = %q", evs[0].ID)
				}
			}},
		{"escaped item keys", req("impressions", `{"\u0069d":"x","occurredAt":`+q(at(0))+`,"opaqueUserId":"u","resolvedBidId":"r"}`), 1,
			func(t *testing.T, evs []Event) {
				if evs[0].ID != "x" {
					t.Errorf("id = %q", evs[0].ID)
				}
			}},
		{"occurredAt forms", req("pageviews",
			pv(obj{"occurredAt": `"2024-07-11T13:55:09Z"`}),
			pv(obj{"occurredAt": `"2024-07-11T13:55:09.1Z"`}),
			pv(obj{"occurredAt": `"2024-07-11T15:55:09.123456789+02:00"`}),
			pv(obj{"occurredAt": `"2024-07-11T08:25:09.9999-05:30"`}),
			pv(obj{"occurredAt": `"2024-07-11t13:55:09z"`}),
			pv(obj{"occurredAt": `"2024-07-11T13:55:09-00:00"`}),
			pv(obj{"occurredAt": `"1970-01-01T00:00:00Z"`}),
			pv(obj{"occurredAt": `"2024-02-29T00:00:00Z"`}),
			pv(obj{"occurredAt": `"2024-07-11T13:55:09\u002e5Z"`})), 9,
			func(t *testing.T, evs []Event) {
				base := time.Date(2024, 7, 11, 13, 55, 9, 0, time.UTC).UnixMilli()
				want := []int64{base, base + 100, base + 123, base + 999, base, base, 0,
					time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC).UnixMilli(), base + 500}
				for i, e := range evs {
					if e.OccurredAtMs != want[i] {
						t.Errorf("[%d] OccurredAtMs = %d, want %d", i, e.OccurredAtMs, want[i])
					}
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := ParseRequest([]byte(tc.body), testMarketplace, testNow)
			if err != nil {
				t.Fatalf("rejected: %v\nbody: %s", err, tc.body)
			}
			if evs == nil || len(evs) != tc.n {
				t.Fatalf("got %d events (nil=%v), want %d", len(evs), evs == nil, tc.n)
			}
			for _, e := range evs {
				if e.MarketplaceID != testMarketplace || e.ReceivedAtMs != testNow {
					t.Errorf("MarketplaceID/ReceivedAtMs = %q/%d", e.MarketplaceID, e.ReceivedAtMs)
				}
			}
			if tc.check != nil {
				tc.check(t, evs)
			}
		})
	}
}

func TestParseRequestLimits(t *testing.T) {
	ok := func(t *testing.T, body string) []Event {
		t.Helper()
		evs, err := ParseRequest([]byte(body), testMarketplace, testNow)
		if err != nil {
			t.Fatalf("rejected: %v", err)
		}
		return evs
	}
	rejected := func(t *testing.T, body, code string) {
		t.Helper()
		_, err := ParseRequest([]byte(body), testMarketplace, testNow)
		if err == nil || err.Code != code {
			t.Fatalf("got %v, want %s", err, code)
		}
	}
	t.Run("50 items per array", func(t *testing.T) {
		body := `{"impressions":[` + strings.Join(repeat(imp(nil), 50), ",") + `],"clicks":[` + strings.Join(repeat(clk(nil), 50), ",") +
			`],"purchases":[` + strings.Join(repeat(pur(nil), 50), ",") + `],"pageviews":[` + strings.Join(repeat(pv(nil), 50), ",") + `]}`
		evs := ok(t, body)
		if len(evs) != 200 {
			t.Fatalf("got %d events", len(evs))
		}
		for i, e := range evs {
			if want := Kind(i/50 + 1); e.Kind != want {
				t.Fatalf("events[%d].Kind = %v, want %v", i, e.Kind, want)
			}
		}
		rejected(t, `{"impressions":[`+strings.Join(repeat(imp(nil), 50), ",")+`],"clicks":[`+strings.Join(repeat(clk(nil), 51), ",")+`]}`, CodeBadRequest)
	})
	t.Run("opaqueUserId 90 characters", func(t *testing.T) {
		for _, s := range []string{strings.Repeat("u", 90), strings.Repeat("é", 90), strings.Repeat("😀", 90), strings.Repeat("中", 89) + "a"} {
			evs := ok(t, req("impressions", imp(obj{"opaqueUserId": q(s)})))
			if evs[0].OpaqueUserID != s {
				t.Errorf("opaqueUserId = %q", evs[0].OpaqueUserID)
			}
			rejected(t, req("impressions", imp(obj{"opaqueUserId": q(s + "x")})), CodeInvalidOpaqueUserID)
		}
	})
	t.Run("id length", func(t *testing.T) {
		ok(t, req("impressions", imp(obj{"id": q(strings.Repeat("ü", MaxEventIDLen))})))
		rejected(t, req("impressions", imp(obj{"id": q(strings.Repeat("ü", MaxEventIDLen+1))})), CodeBadRequest)
	})
	t.Run("resolvedBidId length", func(t *testing.T) {
		ok(t, req("impressions", imp(obj{"resolvedBidId": q(strings.Repeat("b", MaxResolvedBidIDLen))})))
		rejected(t, req("impressions", imp(obj{"resolvedBidId": q(strings.Repeat("b", MaxResolvedBidIDLen+1))})), CodeInvalidResolvedBidID)
	})
	t.Run("occurredAt 5 minutes ahead", func(t *testing.T) {
		evs := ok(t, req("clicks", clk(obj{"occurredAt": q(at(5 * time.Minute))})))
		if evs[0].OccurredAtMs != testNow+MaxFutureSkewMillis {
			t.Errorf("OccurredAtMs = %d", evs[0].OccurredAtMs)
		}
		ok(t, req("clicks", clk(obj{"occurredAt": `"2024-07-11T14:05:00.000000000Z"`})))
		ok(t, req("clicks", clk(obj{"occurredAt": `"2024-07-11T16:05:00+02:00"`})))
		rejected(t, req("clicks", clk(obj{"occurredAt": q(at(5*time.Minute + time.Second))})), CodeInvalidEventTime)
		rejected(t, req("clicks", clk(obj{"occurredAt": `"2024-07-11T14:05:00.0000001Z"`})), CodeInvalidEventTime)
	})
	t.Run("40 days old is stored, not countable", func(t *testing.T) {
		evs := ok(t, req("impressions", imp(obj{"occurredAt": q(at(-40 * 24 * time.Hour))})))
		if evs[0].Countable() {
			t.Error("a 40-day-old event is countable")
		}
		evs = ok(t, req("impressions", imp(obj{"occurredAt": q(at(-29 * 24 * time.Hour))})))
		if !evs[0].Countable() {
			t.Error("a 29-day-old event is not countable")
		}
	})
}

func TestUnitPriceConversion(t *testing.T) {
	tests := []struct {
		price  string
		micros int64 // 0: rejected with bad_request
	}{
		{"1", 1_000_000},
		{"0.1", 100_000},
		{"12.345678", 12_345_678},
		{"0.0000005", 1},
		{"0.0000004", 0},
		{"0.00000049999999999999999", 0},
		{"0.0000015", 2},
		{"0.0000025", 3}, // half away from zero, not half to even
		{"1e-3", 1_000},
		{"1E-3", 1_000},
		{"19.99", 19_990_000},
		{"0.29", 290_000}, // 0.29 is 0.28999999999999998 as a float64
		{"1e2", 100_000_000},
		{"1E+2", 100_000_000},
		{"0.5e1", 5_000_000},
		{"123456.7890123", 123_456_789_012},
		{"12.3456785", 12_345_679},
		{"12.34567849999", 12_345_678},
		{"1000000000", 1_000_000_000_000_000},
		{"1000000000.0000004", 1_000_000_000_000_000},
		{"1000000000.0000005", 0},
		{"1e9", 1_000_000_000_000_000},
		{"1e10", 0},
		{"99999999999999999999", 0},
		{"0.000001", 1},
		{"1.0000000000000000000000000001", 1_000_000},
		{"0e5", 0},
		{"0.0", 0},
		{"-1", 0},
		{"0.00000000000000000000000000000000000000000000000000000000000000000000000001e74", 1_000_000},
	}
	for _, tc := range tests {
		t.Run(tc.price, func(t *testing.T) {
			evs, err := ParseRequest([]byte(req("purchases", item(`{"productId":"p","unitPrice":`+tc.price+`}`))), testMarketplace, testNow)
			if tc.micros == 0 {
				if err == nil || err.Code != CodeBadRequest || !strings.Contains(err.Message, "purchases[0].items[0].unitPrice") {
					t.Fatalf("got %v, %v; want bad_request on unitPrice", evs, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if got := evs[0].Items[0].UnitPriceMicros; got != tc.micros {
				t.Errorf("UnitPriceMicros = %d, want %d", got, tc.micros)
			}
		})
	}
}

// TestParseRFC3339AgainstTime checks random valid date-times against the
// time package.
func TestParseRFC3339AgainstTime(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		tm := time.Unix(r.Int64N(253402300799), r.Int64N(1e9)).UTC()
		off := (r.IntN(24*60*2-1) - (24*60 - 1)) * 60
		tm = tm.In(time.FixedZone("", off))
		layout := []string{time.RFC3339, time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.000000000Z07:00"}[r.IntN(4)]
		s := tm.Format(layout)
		ms, subMs, ok := parseRFC3339([]byte(s))
		ref, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !ok {
			t.Fatalf("%q: ok=%v, time.Parse error %v", s, ok, err)
		}
		if ms != ref.UnixMilli() || subMs != (ref.Nanosecond()%1e6 != 0) {
			t.Fatalf("%q: got %d/%v, want %d/%v", s, ms, subMs, ref.UnixMilli(), ref.Nanosecond()%1e6 != 0)
		}
	}
}

func TestAppendUnquotedMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		``, `abc`, `a\"b`, `\\`, `\/`, `\b\f\n\r\t`, `\u0000`, `\u00e9`, `\u20AC`, `\ud83d\ude00`, `\ud83d`, `\ude00`,
		`\ud83dx`, `\ud83d\u0041`, `\ud83d\ud83d\ude00`, `\ude00\ud83d`, "caf\xc3\xa9", "\xff", "a\xc3", "\xed\xa0\x80",
		"\xf4\x90\x80\x80", `\uFFFD`, `\uD834\uDD1E`, "😀x\\n",
	} {
		var want string
		if err := json.Unmarshal([]byte(`"`+s+`"`), &want); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := string(jsontext.AppendUnquoted(nil, []byte(s))); got != want {
			t.Errorf("jsontext.AppendUnquoted(%q) = %q, want %q", s, got, want)
		}
		if jsontext.PlainString([]byte(s)) && s != want {
			t.Errorf("jsontext.PlainString(%q) but it decodes to %q", s, want)
		}
	}
}

func TestParseRequestDoesNotRetainCallerMemory(t *testing.T) {
	body := []byte(req("impressions", imp(obj{"placement": `{"path":"/p","categoryIds":["c"]}`, "page": `{"type":"search","pageId":"s","value":"q"}`})))
	evs, err := ParseRequest(body, testMarketplace, testNow)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(evs)
	for i := range body {
		body[i] = 'X'
	}
	after, _ := json.Marshal(evs)
	if !bytes.Equal(before, after) {
		t.Errorf("events changed when the body was overwritten:\n%s\n%s", before, after)
	}
}

func TestParseRequestGolden(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "mixed_batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	evs, verr := ParseRequest(body, testMarketplace, testNow)
	if verr != nil {
		t.Fatalf("rejected: %v", verr)
	}
	got, err := json.MarshalIndent(evs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "mixed_batch.golden.json")
	if *updateGolden {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("events differ from %s (run with -update after checking):\n%s", golden, got)
	}
	// The round trip through the events topic keeps every field.
	var back []Event
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.MarshalIndent(back, "", "  ")
	if !bytes.Equal(append(again, '\n'), want) {
		t.Error("golden events do not survive a JSON round trip")
	}
	// Spot checks that do not depend on the golden file.
	if len(evs) != 8 {
		t.Fatalf("got %d events", len(evs))
	}
	if evs[1].OpaqueUserID != "café-😀-中" || evs[4].ID != "clk-2-last-wins" || evs[2].Countable() || !evs[0].Countable() {
		t.Errorf("unexpected events: %+v", evs)
	}
	items := evs[5].Items
	if len(items) != 3 || items[0].UnitPriceMicros != 19_990_000 || items[0].Quantity != 2 || items[1].UnitPriceMicros != 1000 ||
		items[1].Quantity != 1 || items[2].UnitPriceMicros != 12_345_679 || items[2].Quantity != 10 {
		t.Errorf("items = %+v", items)
	}
}

// FuzzParseRequest checks that ParseRequest never panics, that its verdict
// agrees with encoding/json on what is JSON, and that accepted events hold
// the invariants the rest of the pipeline relies on.
func FuzzParseRequest(f *testing.F) {
	if body, err := os.ReadFile(filepath.Join("testdata", "mixed_batch.json")); err == nil {
		f.Add(body)
	}
	f.Add(benchBody())
	for _, s := range []string{
		``, ` `, `{}`, `[]`, `null`, `{"impressions":[]}`, `{"impressions":null}`, `{"impressions":[{}]}`,
		req("impressions", imp(nil)), req("clicks", clk(obj{"entity": `{"id":"p","type":"product"}`})),
		req("purchases", pur(nil)), req("pageviews", pv(nil)),
		req("purchases", item(`{"productId":"p","unitPrice":1e-7,"quantity":2.0}`)),
		req("purchases", item(`{"productId":"p","unitPrice":-0,"quantity":1e999999999}`)),
		req("impressions", imp(obj{"id": `"\ud83d\ude00\u0000\\"`, "placement": `{"path":"/","categoryIds":["a"],"position":1E1}`})),
		`{"impressions":[{"id":"x","occurredAt":"2024-07-11T13:55:09Z","opaqueUserId":"u","resolvedBidId":"r"}],"impressions":5}`,
		"{\"impressions\":[{\"id\":\"\xff\"}]}",
		req("impressions", imp(obj{"id": `"\ud800"`})), req("clicks", clk(obj{"id": `"\ud83d\ude00\udc00"`})),
		"{\"pageviews\":[" + pv(obj{"page": "{\"type\":\"home\",\"pageId\":\"\xed\xb0\x80\"}"}) + "]}",
		req("impressions", imp(obj{"consent": `{"adStorage":false,"tcf":"x"}`, "opaqueUserId": "-"})),
		req("purchases", pur(obj{"consent": `{"personalization":true,"adStorage":"x"}`})),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := ParseRequest(body, testMarketplace, testNow)
		valid := json.Valid(body)
		if err != nil {
			if evs != nil {
				t.Fatal("events returned with an error")
			}
			if err.Code == "" || err.Message == "" {
				t.Fatalf("incomplete error %+v", err)
			}
			blank := len(bytes.TrimLeft(body, " \t\r\n")) == 0
			switch {
			case blank && err.Code != CodeEmptyRequest:
				t.Fatalf("blank body: %v", err)
			case !blank && !valid && err.Code != CodeInvalidJSON:
				t.Fatalf("invalid JSON reported as %v", err)
			case valid && err.Code == CodeInvalidJSON:
				t.Fatalf("valid JSON reported as %v", err)
			case valid && !jsontext.TextOK(body) && err.Code != CodeBadRequest:
				t.Fatalf("a string breaking the text rule reported as %v", err)
			}
			return
		}
		if !valid {
			t.Fatal("accepted a body that is not valid JSON")
		}
		if !jsontext.TextOK(body) {
			t.Fatal("accepted a string with invalid UTF-8, an unpaired surrogate or NUL")
		}
		// Compare with encoding/json, which is case-sensitive for map keys
		// and keeps the last of duplicate keys, like ParseRequest.
		var ref map[string]json.RawMessage
		if err := json.Unmarshal(body, &ref); err != nil {
			t.Fatalf("accepted a body that is not an object: %v", err)
		}
		n := 0
		for k, name := range topNames {
			var items []map[string]any
			if raw, ok := ref[name]; ok {
				if err := json.Unmarshal(raw, &items); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			for _, it := range items {
				e := evs[n]
				n++
				if e.Kind != Kind(k+1) || e.MarketplaceID != testMarketplace || e.ReceivedAtMs != testNow {
					t.Fatalf("bad envelope %+v", e)
				}
				wantUser := it["opaqueUserId"]
				if c, _ := it["consent"].(map[string]any); c["adStorage"] == false || c["personalization"] == false {
					wantUser = "" // consent denied: the shopper is dropped
				} else if wantUser == nil || wantUser == "" {
					t.Fatalf("event %+v accepted without its opaqueUserId", e)
				}
				if e.ID == "" || e.ID != it["id"] || e.OpaqueUserID != wantUser {
					t.Fatalf("event %+v does not match %v", e, it)
				}
				if utf8.RuneCountInString(e.OpaqueUserID) > MaxOpaqueUserIDLen || !utf8.ValidString(e.ID) || !utf8.ValidString(e.OpaqueUserID) {
					t.Fatalf("bad strings %+v", e)
				}
				if e.OccurredAtMs < 0 || e.OccurredAtMs > testNow+MaxFutureSkewMillis {
					t.Fatalf("bad time %+v", e)
				}
				switch e.Kind {
				case KindImpression, KindClick:
					if e.ResolvedBidID == "" && e.Entity == nil {
						t.Fatalf("interaction without bid or entity %+v", e)
					}
					if e.ResolvedBidID != "" && e.ExternalCampaignID != "" {
						t.Fatalf("bid and external campaign %+v", e)
					}
				case KindPurchase:
					if len(e.Items) == 0 || len(e.Items) > MaxItemsPerPurchase {
						t.Fatalf("purchase with %d items", len(e.Items))
					}
					for _, it := range e.Items {
						if it.ProductID == "" || it.UnitPriceMicros <= 0 || it.UnitPriceMicros > MaxUnitPriceMicros ||
							it.Quantity < 1 || it.Quantity > MaxQuantity {
							t.Fatalf("bad item %+v", it)
						}
					}
				case KindPageView:
					if e.Page == nil || e.Page.ID == "" || e.Page.Type == "" {
						t.Fatalf("pageview without page %+v", e)
					}
				}
				if pl := e.Placement; pl != nil && (pl.Path == "" || pl.Position < 0 || pl.Page < 0 || pl.PageSize < 0) {
					t.Fatalf("bad placement %+v", pl)
				}
			}
		}
		if n != len(evs) {
			t.Fatalf("got %d events, encoding/json sees %d", len(evs), n)
		}
	})
}

func TestPurchaseTotalBound(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixMilli()
	body := func(items string) []byte {
		return []byte(`{"purchases":[{"id":"p","occurredAt":"2026-11-21T12:00:00Z","opaqueUserId":"u","items":[` + items + `]}]}`)
	}
	// 1e9 × 1e6 units would overflow int64 micros: rejected, not wrapped.
	if _, err := ParseRequest(body(`{"productId":"a","unitPrice":1000000000,"quantity":1000000}`), "m", now); err == nil || err.Code != CodeBadRequest || !strings.Contains(err.Message, "purchase total") {
		t.Fatalf("overflowing item: %v", err)
	}
	// Two items that are fine alone but overflow together.
	if _, err := ParseRequest(body(`{"productId":"a","unitPrice":1000000000,"quantity":5000},{"productId":"b","unitPrice":1000000000,"quantity":5000}`), "m", now); err == nil || !strings.Contains(err.Message, "purchase total") {
		t.Fatalf("overflowing sum: %v", err)
	}
	// Right at the bound is accepted.
	evs, err := ParseRequest(body(`{"productId":"a","unitPrice":1000000000,"quantity":9000}`), "m", now)
	if err != nil || evs[0].Items[0].UnitPriceMicros*evs[0].Items[0].Quantity != MaxPurchaseTotalMicros {
		t.Fatalf("at the bound: %v %+v", err, evs)
	}
}

// An empty resolvedBidId next to an entity is an organic event (analytics.js
// sends "" from an empty data-ts-resolved-bid attribute).
func TestEmptyResolvedBidIDWithEntity(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC).UnixMilli()
	evs, err := ParseRequest([]byte(`{"impressions":[{"id":"i","occurredAt":"2026-11-21T12:00:00Z","opaqueUserId":"u","resolvedBidId":"","externalCampaignId":"x","entity":{"type":"product","id":"p"}}]}`), "m", now)
	if err != nil || len(evs) != 1 || evs[0].ResolvedBidID != "" || evs[0].Entity == nil || evs[0].ExternalCampaignID != "x" {
		t.Fatalf("%v %+v", err, evs)
	}
}
