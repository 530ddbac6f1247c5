package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/endcap/endcap/testkit/testenv"
)

// The error cases of the three auction endpoints. Each case is a pair of
// files in testdata/auctions/<endpoint>/ (endpoint: auctions,
// sponsored-brand, travel), named after the errCode it must produce, with a
// `--variant` suffix when one code has several cases:
//
//	<code>[--variant].request.json   the request body, sent as is (it may be
//	                                 empty or broken JSON on purpose)
//	<code>[--variant].response.json  the answer: {"status": …, "body": …}
//
// Bodies too big to keep in a file are written with macros that the test
// expands before sending: "@ids:N" (an array of N product ids), "@products:N"
// (an array of N travel products) and "@string:N" (a string of N characters).
// `go test ./e2e -run TestAuctionsErrors -update` rewrites the responses.

// auctionCase is one request of TestAuctionsErrors.
type auctionCase struct {
	ep   string // endpoint: auctions, sponsored-brand or travel
	name string // <errCode>[--variant], or "success"
	// at is the JSON path the 400 message must start with ("" when the error
	// is about the body as a whole).
	at string
	// method and path, when not POST /v2/auctions[/<ep>].
	method, path string
}

func (c auctionCase) code() string { code, _, _ := strings.Cut(c.name, "--"); return code }

func (c auctionCase) file(suffix string) string {
	return filepath.Join("auctions", c.ep, c.name+suffix)
}

func (c auctionCase) status() int {
	switch c.code() {
	case "success":
		return 201
	case "invalid_api_key":
		return 401
	case "resource_not_found":
		return 404
	case "method_not_allowed":
		return 405
	case "request_too_large":
		return 413
	}
	return 400
}

func (c auctionCase) url() (method, path string) {
	method, path = "POST", "/v2/auctions"
	if c.ep != "auctions" {
		path += "/" + c.ep
	}
	if c.method != "" {
		method = c.method
	}
	if c.path != "" {
		path = c.path
	}
	return method, path
}

// auctionCases lists every case; each has its two files.
var auctionCases = []auctionCase{
	// POST /v2/auctions: listings and banners.
	{ep: "auctions", name: "success"},
	{ep: "auctions", name: "invalid_api_key--missing_key"},
	{ep: "auctions", name: "invalid_api_key--unknown_key"},
	{ep: "auctions", name: "invalid_api_key--advanced_key"},
	{ep: "auctions", name: "request_too_large"},
	{ep: "auctions", name: "resource_not_found--unknown_path", path: "/v2/auctions/xyz"},
	{ep: "auctions", name: "method_not_allowed--get", method: "GET"},
	{ep: "auctions", name: "empty_request"},
	{ep: "auctions", name: "invalid_json"},
	{ep: "auctions", name: "bad_request--body_not_object"},
	{ep: "auctions", name: "bad_request--slots_not_integer", at: "auctions[0].slots"},
	{ep: "auctions", name: "bad_request--filter_operator", at: "auctions[0].filter.operator"},
	{ep: "auctions", name: "missing_auctions", at: "auctions"},
	{ep: "auctions", name: "too_many_auctions", at: "auctions"},
	{ep: "auctions", name: "missing_promotion_type", at: "auctions[1].type"},
	{ep: "auctions", name: "invalid_promotion_type", at: "auctions[0].type"},
	{ep: "auctions", name: "missing_slots", at: "auctions[0].slots"},
	{ep: "auctions", name: "too_few_slots", at: "auctions[0].slots"},
	{ep: "auctions", name: "missing_slot_id", at: "auctions[0].slotId"},
	{ep: "auctions", name: "invalid_device", at: "auctions[0].device"},
	{ep: "auctions", name: "no_products", at: "auctions[0].products.ids"},
	{ep: "auctions", name: "too_many_products", at: "auctions[0].products.ids"},
	{ep: "auctions", name: "invalid_quality_score", at: "auctions[0].products.qualityScores[1]"},
	{ep: "auctions", name: "non_positive_price", at: "auctions[0].products.prices[1]"},
	{ep: "auctions", name: "product_info_mismatch", at: "auctions[0].products.qualityScores"},
	{ep: "auctions", name: "invalid_category", at: "auctions[0].category"},
	{ep: "auctions", name: "no_products_or_category", at: "auctions[0]"},
	{ep: "auctions", name: "invalid_context", at: "auctions[0]"},
	{ep: "auctions", name: "too_many_search_query_words", at: "auctions[0].searchQuery"},
	{ep: "auctions", name: "invalid_geo_targeting", at: "auctions[0].geoTargeting"},
	{ep: "auctions", name: "too_many_locations", at: "auctions[0].geoTargeting.locations"},
	{ep: "auctions", name: "invalid_location_cell", at: "auctions[0].geoTargeting.locations[1]"},
	{ep: "auctions", name: "invalid_placement_id", at: "auctions[0].placementId"},
	{ep: "auctions", name: "invalid_opaque_user_id", at: "auctions[0].opaqueUserId"},
	{ep: "auctions", name: "experiment_variant_too_long", at: "auctions[0].experimentVariant"},
	{ep: "auctions", name: "no_listing_experiment_variant", at: "auctions[1].experimentVariant"},
	{ep: "auctions", name: "unauthorized_external_demand", at: "auctions[0].demandSources"},
	{ep: "auctions", name: "invalid_external_demand_ad_type", at: "auctions[0].demandSources"},

	// POST /v2/auctions/sponsored-brand.
	{ep: "sponsored-brand", name: "success"},
	{ep: "sponsored-brand", name: "invalid_api_key--missing_key"},
	{ep: "sponsored-brand", name: "invalid_api_key--unknown_key"},
	{ep: "sponsored-brand", name: "invalid_api_key--advanced_key"},
	{ep: "sponsored-brand", name: "request_too_large"},
	{ep: "sponsored-brand", name: "empty_request"},
	{ep: "sponsored-brand", name: "invalid_json"},
	{ep: "sponsored-brand", name: "bad_request--winners_not_integer", at: "auctions[0].winners"},
	{ep: "sponsored-brand", name: "bad_request--missing_placement_id", at: "auctions[0].placementId"},
	{ep: "sponsored-brand", name: "missing_auctions", at: "auctions"},
	{ep: "sponsored-brand", name: "too_many_auctions", at: "auctions"},
	{ep: "sponsored-brand", name: "missing_slots", at: "auctions[0].winners"},
	{ep: "sponsored-brand", name: "too_few_slots", at: "auctions[0].winners"},
	{ep: "sponsored-brand", name: "no_products", at: "auctions[0].triggers.products.ids"},
	{ep: "sponsored-brand", name: "too_many_products", at: "auctions[0].triggers.products.ids"},
	{ep: "sponsored-brand", name: "invalid_quality_score", at: "auctions[0].triggers.products.qualityScores[0]"},
	{ep: "sponsored-brand", name: "non_positive_price", at: "auctions[0].triggers.products.prices[1]"},
	{ep: "sponsored-brand", name: "product_info_mismatch", at: "auctions[0].triggers.products.prices"},
	{ep: "sponsored-brand", name: "invalid_category", at: "auctions[0].triggers.category.disjunctions"},
	{ep: "sponsored-brand", name: "missing_context", at: "auctions[0].triggers"},
	{ep: "sponsored-brand", name: "invalid_context", at: "auctions[0].triggers"},
	{ep: "sponsored-brand", name: "too_many_search_query_words", at: "auctions[0].triggers.searchQuery"},
	{ep: "sponsored-brand", name: "invalid_geo_targeting", at: "auctions[0].geoTargeting"},
	{ep: "sponsored-brand", name: "too_many_locations", at: "auctions[0].geoTargeting.locations"},
	{ep: "sponsored-brand", name: "invalid_location_cell", at: "auctions[0].geoTargeting.locations[0]"},
	{ep: "sponsored-brand", name: "invalid_placement_id", at: "auctions[0].placementId"},
	{ep: "sponsored-brand", name: "invalid_opaque_user_id", at: "auctions[0].opaqueUserId"},
	{ep: "sponsored-brand", name: "no_listing_experiment_variant", at: "auctions[0].experimentVariant"},
	{ep: "sponsored-brand", name: "invalid_external_demand_ad_type", at: "auctions[0].demandSources"},

	// POST /v2/auctions/travel: hotels and flights.
	{ep: "travel", name: "success"},
	{ep: "travel", name: "invalid_api_key--missing_key"},
	{ep: "travel", name: "invalid_api_key--unknown_key"},
	{ep: "travel", name: "invalid_api_key--advanced_key"},
	{ep: "travel", name: "request_too_large"},
	{ep: "travel", name: "empty_request"},
	{ep: "travel", name: "invalid_json"},
	{ep: "travel", name: "bad_request--missing_travel_context", at: "auctions[0].travelContext"},
	{ep: "travel", name: "bad_request--passengers_zero", at: "auctions[0].travelContext.passengers"},
	{ep: "travel", name: "missing_auctions", at: "auctions"},
	{ep: "travel", name: "too_many_auctions", at: "auctions"},
	{ep: "travel", name: "invalid_travel_type", at: "auctions[0].type"},
	{ep: "travel", name: "missing_slots", at: "auctions[0].slots"},
	{ep: "travel", name: "too_few_slots", at: "auctions[0].slots"},
	{ep: "travel", name: "no_products", at: "auctions[0].products"},
	{ep: "travel", name: "too_many_products", at: "auctions[0].products"},
	{ep: "travel", name: "invalid_quality_score", at: "auctions[0].products[1].qualityScore"},
	{ep: "travel", name: "non_positive_price", at: "auctions[0].products[0].price"},
	{ep: "travel", name: "product_info_mismatch", at: "auctions[0].products[1].qualityScore"},
	{ep: "travel", name: "missing_variation_id", at: "auctions[0].products[1].variationID"},
	{ep: "travel", name: "invalid_travel_category", at: "auctions[0].category.singleCategory.id"},
	{ep: "travel", name: "missing_flight_travel_context", at: "auctions[0].travelContext.route"},
	{ep: "travel", name: "too_many_passengers", at: "auctions[0].travelContext.passengers"},
	{ep: "travel", name: "invalid_date_format", at: "auctions[0].travelContext.travelStartDate"},
	{ep: "travel", name: "invalid_travel_date_range", at: "auctions[0].travelContext.travelEndDate"},
	{ep: "travel", name: "invalid_traveler_type", at: "auctions[0].travelContext.travelerType"},
	{ep: "travel", name: "no_products_or_category", at: "auctions[0]"},
	{ep: "travel", name: "invalid_opaque_user_id", at: "auctions[0].opaqueUserId"},
	{ep: "travel", name: "no_listing_experiment_variant", at: "auctions[0].experimentVariant"},
	{ep: "travel", name: "invalid_external_demand_ad_type", at: "auctions[0].demandSources"},
}

// unreachableCodes are the auction.Code* values an endpoint cannot answer,
// with the reason: every other code must have a case on that endpoint.
var unreachableCodes = func() map[string]map[string]string {
	travelOnly := []string{"invalid_travel_type", "invalid_date_format", "invalid_travel_date_range", "too_many_passengers",
		"invalid_traveler_type", "invalid_travel_category", "missing_variation_id", "missing_flight_travel_context"}
	m := map[string]map[string]string{"auctions": {}, "sponsored-brand": {}, "travel": {}}
	for _, c := range travelOnly {
		m["auctions"][c] = "travel fields are not read on /v2/auctions"
		m["sponsored-brand"][c] = "travel fields are not read on sponsored brand"
	}
	m["auctions"]["missing_context"] = "sponsored-brand triggers only; a listings auction without context is no_products_or_category"
	for _, c := range []string{"missing_promotion_type", "invalid_promotion_type", "missing_slot_id", "invalid_device"} {
		m["sponsored-brand"][c] = "listings/banners fields (type, slotId, device) are not read on sponsored brand"
		m["travel"][c] = "listings/banners fields are not read on travel (type has its own code, invalid_travel_type)"
	}
	m["sponsored-brand"]["no_products_or_category"] = "sponsored brand reports a missing trigger as missing_context"
	for _, ep := range []string{"sponsored-brand", "travel"} {
		m[ep]["experiment_variant_too_long"] = "any experimentVariant is no_listing_experiment_variant first"
		m[ep]["unauthorized_external_demand"] = "any demandSources is invalid_external_demand_ad_type first"
	}
	for _, c := range []string{"invalid_category", "missing_context", "invalid_context", "too_many_search_query_words",
		"invalid_geo_targeting", "too_many_locations", "invalid_location_cell", "invalid_placement_id"} {
		m["travel"][c] = "category is {singleCategory} (invalid_travel_category); searchQuery, geoTargeting and placementId are ignored on travel"
	}
	return m
}()

// auctionCodes reads the values of the Code* constants of auction/request.go,
// so that a new code without a case here fails the test.
func auctionCodes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "auction", "request.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					codes = append(codes, v)
				}
			}
		}
	}
	if len(codes) < 30 {
		t.Fatalf("found only %d Code* constants in auction/request.go: %v", len(codes), codes)
	}
	return codes
}

var auctionBodyMacro = regexp.MustCompile(`"@(ids|products|string):(\d+)"`)

// expandAuctionBody replaces the macros of a request file by their values.
func expandAuctionBody(b []byte) []byte {
	return auctionBodyMacro.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := auctionBodyMacro.FindSubmatch(m)
		n, _ := strconv.Atoi(string(sub[2]))
		var out bytes.Buffer
		switch string(sub[1]) {
		case "string":
			out.WriteByte('"')
			out.Write(bytes.Repeat([]byte("x"), n))
			out.WriteByte('"')
		default:
			out.WriteByte('[')
			for k := 0; k < n; k++ {
				if k > 0 {
					out.WriteByte(',')
				}
				if string(sub[1]) == "ids" {
					fmt.Fprintf(&out, `"p-%d"`, k)
				} else {
					fmt.Fprintf(&out, `{"id":"h-%d"}`, k)
				}
			}
			out.WriteByte(']')
		}
		return out.Bytes()
	})
}

// TestAuctionsErrors: every error the three auction endpoints can answer, one
// golden request/response pair per case (status and exact body), plus one
// 201 per endpoint against an empty catalog.
func TestAuctionsErrors(t *testing.T) {
	// The table covers every code each endpoint can answer, and every file
	// in testdata/auctions is a case of the table.
	covered := map[string]map[string]bool{}
	known := map[string]bool{}
	for _, c := range auctionCases {
		if covered[c.ep] == nil {
			covered[c.ep] = map[string]bool{}
		}
		covered[c.ep][c.code()] = true
		known[c.file(".request.json")], known[c.file(".response.json")] = true, true
	}
	for _, code := range auctionCodes(t) {
		for ep, why := range unreachableCodes {
			switch {
			case covered[ep][code] && why[code] != "":
				t.Errorf("%s: %s has a case but is listed as unreachable", ep, code)
			case !covered[ep][code] && why[code] == "":
				t.Errorf("%s: no case for auction.Code %q (add one, or list it in unreachableCodes with the reason)", ep, code)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "auctions", "*", "*"))
	for _, f := range files {
		if rel, _ := filepath.Rel("testdata", f); !known[rel] {
			t.Errorf("%s is not a case of auctionCases", f)
		}
	}

	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	s := startSystem(t, env.Config(t, brokers))
	keys := map[string]string{
		"missing_key":  "",
		"unknown_key":  "ecm_0000000000000000000000000000000000000000",
		"advanced_key": s.AdvancedKey,
	}
	for _, c := range auctionCases {
		t.Run(c.ep+"/"+c.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", c.file(".request.json")))
			if err != nil {
				t.Fatal(err)
			}
			key := s.MarketplaceKey
			if c.code() == "invalid_api_key" {
				_, variant, _ := strings.Cut(c.name, "--")
				key = keys[variant]
			}
			method, path := c.url()
			r := s.request(t, method, path, key, expandAuctionBody(raw), nil)
			if r.Status != c.status() {
				t.Fatalf("%s %s: status %d, want %d: %.500s", method, path, r.Status, c.status(), r.Body)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			checkAuctionBody(t, c, r.Body)
			golden(t, c.file(".response.json"), r)
		})
	}
}

// checkAuctionBody checks the shape of an answer beyond its golden file:
// the /v2 error body {errCode, docUrl, message} with the message naming the
// JSON path, the authentication error body, or the 201 results.
func checkAuctionBody(t *testing.T, c auctionCase, body []byte) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %q", body)
	}
	switch code := c.code(); code {
	case "success":
		var res struct {
			Results []struct {
				ResultType string            `json:"resultType"`
				Winners    []json.RawMessage `json:"winners"`
				Error      *bool             `json:"error"`
			} `json:"results"`
		}
		if err := json.Unmarshal(body, &res); err != nil || len(res.Results) == 0 {
			t.Fatalf("201 body: %s (%v)", body, err)
		}
		for _, r := range res.Results {
			if r.ResultType == "" || r.Winners == nil || len(r.Winners) != 0 || r.Error == nil || *r.Error {
				t.Errorf("result on an empty catalog: %s", body)
			}
		}
	case "invalid_api_key":
		// The spec's {error, message} and the /v2 contract's {errCode,
		// docUrl, message} in one object.
		if len(m) != 4 || m["error"] != code || m["errCode"] != code || m["message"] == "" ||
			m["docUrl"] != "https://github.com/endcap/endcap/blob/main/docs/reference/errors.md#"+code {
			t.Errorf("401 body: %s", body)
		}
	default:
		msg, _ := m["message"].(string)
		if len(m) != 3 || m["errCode"] != code || m["docUrl"] != "https://github.com/endcap/endcap/blob/main/docs/reference/errors.md#"+code || msg == "" {
			t.Errorf("error body, want {errCode: %q, docUrl, message}: %s", code, body)
		}
		if c.at != "" && !strings.HasPrefix(msg, c.at+": ") {
			t.Errorf("message %q does not start with the JSON path %q", msg, c.at)
		}
		if c.at == "" && strings.HasPrefix(msg, "auctions") {
			t.Errorf("message %q names a path; the case expects none", msg)
		}
	}
}
