package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/api/openapi/openapitest"
	"github.com/endcap/endcap/internal/vendorid"
	"github.com/endcap/endcap/testkit/testenv"
)

// contract sends requests to a running system and checks each exchange,
// every response header included, against the OpenAPI document.
type contract struct {
	s    *system
	v    *openapitest.Validator
	seen map[string]bool // operations answered with a 2xx
}

// do sends the request, checks its status against want (any of them) and
// the exchange against the document: the answer must conform, and so must
// a request that succeeded.
func (c *contract) do(t *testing.T, method, path, key, body string, hdr map[string]string, want ...int) response {
	t.Helper()
	var raw []byte
	if body != "" {
		raw = []byte(body)
	}
	r := c.s.request(t, method, path, key, raw, hdr)
	if !slices.Contains(want, r.Status) {
		t.Fatalf("%s %s: %d, want %v: %.300s", method, path, r.Status, want, r.Body)
	}
	reqHeader := http.Header{"Content-Type": {"application/json"}}
	for k, v := range hdr {
		reqHeader.Set(k, v)
	}
	if raw == nil {
		raw = []byte{}
	}
	c.check(t, openapitest.Exchange{Method: method, Path: path, RequestHeader: reqHeader, RequestBody: raw,
		Status: r.Status, Header: r.Header, Body: r.Body})
	return r
}

func (c *contract) check(t *testing.T, ex openapitest.Exchange) {
	t.Helper()
	reqErr, respErr := c.v.Validate(t.Context(), ex)
	if respErr != nil {
		t.Errorf("%s %s → %d: the answer does not conform to the document: %s\n%.400s", ex.Method, ex.Path, ex.Status, openapitest.Pretty(respErr), ex.Body)
	}
	if ex.Status < 300 {
		if reqErr != nil && !errors.Is(reqErr, openapitest.ErrNoOperation) {
			t.Errorf("%s %s: the request succeeded (%d) but does not conform to the document: %s", ex.Method, ex.Path, ex.Status, openapitest.Pretty(reqErr))
		}
		if route := c.route(ex); route != "" {
			c.seen[route] = true
		}
	}
}

// route is the document's operation of an exchange ("" when none).
func (c *contract) route(ex openapitest.Exchange) string {
	path, _, _ := strings.Cut(ex.Path, "?")
	for p, item := range c.v.Doc.Paths.Map() {
		if item.GetOperation(ex.Method) != nil && pathMatches(p, path) {
			return ex.Method + " " + p
		}
	}
	return ""
}

// pathMatches compares a document path (with {params}) with a request path.
func pathMatches(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if !strings.HasPrefix(ps[i], "{") && ps[i] != xs[i] {
			return false
		}
	}
	return true
}

func jsonField(t *testing.T, r response, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("%s %s: %v: %s", r.Method, r.Path, err, r.Body)
	}
	s, ok := m[field].(string)
	if !ok {
		t.Fatalf("%s %s: no %s in %s", r.Method, r.Path, field, r.Body)
	}
	return s
}

// TestOpenAPILiveExchanges: a tour of the API through a running system, in
// which every answer (success or error, headers included) is checked
// against the OpenAPI document, and every successful request too. It logs
// the operations it did not see succeed.
func TestOpenAPILiveExchanges(t *testing.T) {
	v, err := openapitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog, cfg.RateLimitExplain = "5000/1s", "5000/1s", "5000/1s"
	cfg.WebhookAllowLoopback = true // the tour's webhook is on loopback; a refused address is a 422 below
	s := startSystem(t, cfg)
	c := &contract{s: s, v: v, seen: map[string]bool{}}
	A, M := s.AdvancedKey, s.MarketplaceKey
	now := time.Now().UTC()

	// Operations.
	c.do(t, "GET", "/livez", "", "", nil, 200)
	c.do(t, "GET", "/readyz", "", "", nil, 200)
	c.do(t, "GET", "/metrics", "", "", nil, 200)
	doc := c.do(t, "GET", "/openapi.json", "", "", nil, 200)
	c.do(t, "GET", "/openapi.json", "", "", map[string]string{"If-None-Match": doc.Header.Get("ETag")}, 304)

	// Catalog (before the auctions and campaigns that use it).
	cat := "/public/v1/catalog-search-service/catalogs"
	c.do(t, "PUT", cat+"/vendors", A, `{"vendors": [{"id": "v-1", "name": "Vendor 1", "globalId": "G-1"}, {"id": "v-2", "name": "Vendor 2"}]}`, nil, 200)
	c.do(t, "PUT", cat+"/categories", A, `{"categories": [{"id": "c-1", "name": "Shoes"}, {"id": "c-2", "name": "Boots", "parentId": "c-1"}]}`, nil, 200)
	c.do(t, "PUT", cat+"/products", A, `{"products": [
		{"id": "p-1", "name": "Red shoe", "vendors": ["v-1"], "categories": ["c-1"], "price": 12.5, "brand": {"id": "b-1", "name": "Brand"},
		 "imageURL": "https://cdn.example.com/p-1.jpg", "gtin": "4003994155486", "quality_score": 0.5, "metadata": {"color": "red"}},
		{"id": "p-2", "name": "`+strings.Repeat("x", 151)+`", "vendors": ["v-1", "v-2"], "ean": "123"}]}`, nil, 200)
	c.do(t, "GET", cat+"/products/p-1", A, "", nil, 200)
	c.do(t, "GET", cat+"/products/p-2", A, "", nil, 200)
	c.do(t, "GET", cat+"/vendors?limit=1", A, "", nil, 200)
	c.do(t, "GET", cat+"/vendors/v-1", A, "", nil, 200)
	c.do(t, "GET", cat+"/categories?parent_id=c-1", A, "", nil, 200)
	c.do(t, "GET", cat+"/categories/c-2", A, "", nil, 200)
	c.do(t, "DELETE", cat+"/products", A, `{"ids": ["p-9"]}`, nil, 200)
	c.do(t, "GET", cat+"/products/p-9", A, "", nil, 404)
	c.do(t, "PUT", cat+"/products", A, `{"products": [{"id": "p-3"}]}`, nil, 422)
	c.do(t, "GET", cat+"/vendors?limit=0", A, "", nil, 422)

	// /v2.
	c.do(t, "OPTIONS", "/v2/events", "", "", map[string]string{"Origin": "https://shop.example", "Access-Control-Request-Method": "POST"}, 204)
	c.do(t, "OPTIONS", "/v2/auctions", "", "", nil, 204)
	c.do(t, "OPTIONS", "/v2/auctions/sponsored-brand", "", "", nil, 204)
	c.do(t, "OPTIONS", "/v2/auctions/travel", "", "", nil, 204)
	c.do(t, "POST", "/v2/events", M, fmt.Sprintf(`{"impressions": [{"id": "live-1", "occurredAt": %q, "opaqueUserId": "u-1", "entity": {"type": "product", "id": "p-1"}}],
		"purchases": [{"id": "live-2", "occurredAt": %q, "opaqueUserId": "u-1", "items": [{"productId": "p-1", "unitPrice": 12.5, "quantity": 2}]}]}`, ts(now), ts(now)), nil, 200)
	c.do(t, "POST", "/v2/events", M, `{}`, nil, 400)
	c.do(t, "POST", "/v2/events", A, `{"pageviews": []}`, nil, 401)
	c.do(t, "POST", "/v2/auctions", M, `{"auctions": [{"type": "listings", "slots": 2, "products": {"ids": ["p-1", "p-2"]}}, {"type": "banners", "slots": 1, "slotId": "top"}]}`, nil, 201)
	c.do(t, "POST", "/v2/auctions", M, `{"auctions": []}`, nil, 400)
	c.do(t, "POST", "/v2/auctions/sponsored-brand", M, `{"auctions": [{"winners": 1, "placementId": "top", "triggers": {"searchQuery": "shoes"}}]}`, nil, 201)
	c.do(t, "POST", "/v2/auctions/travel", M, `{"auctions": [{"type": "hotels", "slots": 1, "products": [{"id": "h-1"}], "travelContext": {"site": "t.example"}}]}`, nil, 201)
	c.do(t, "POST", "/v2/auctions/explain", A, `{"auctions": [{"type": "listings", "slots": 2, "products": {"ids": ["p-1", "p-2", "p-404"]}}, {"type": "banners", "slots": 1, "slotId": "top"}]}`, nil, 200)
	c.do(t, "POST", "/v2/auctions/explain", A, `{"auctions": []}`, nil, 400)
	c.do(t, "POST", "/v2/auctions/explain", M, `{"auctions": []}`, nil, 403)
	c.do(t, "POST", "/v2/auctions/explain", "", `{"auctions": []}`, nil, 401)
	c.do(t, "GET", "/v2/auctions", M, "", nil, 405)
	c.do(t, "POST", "/v2/nothing", M, "{}", nil, 404)

	// Marketplace and keys.
	c.do(t, "GET", "/public/v1/marketplace", A, "", nil, 200)
	c.do(t, "GET", "/public/v1/marketplace", M, "", nil, 403)
	c.do(t, "GET", "/public/v1/marketplace", "", "", nil, 401)

	// Billing contacts.
	bc := "/public/v1/billing-service"
	r := c.do(t, "POST", bc+"/billing-contacts", A, `{"name": "Ann", "email": "ann@example.com", "address": {"city": "Berlin", "country": "de"}}`,
		map[string]string{"Idempotency-Key": "live-contact"}, 201)
	contact := jsonField(t, r, "id")
	c.do(t, "POST", bc+"/billing-contacts", A, `{"name": "Ann", "email": "ann@example.com", "address": {"city": "Berlin", "country": "de"}}`,
		map[string]string{"Idempotency-Key": "live-contact"}, 201) // replayed
	c.do(t, "POST", bc+"/billing-contacts", A, `{"name": "Bob"}`, map[string]string{"Idempotency-Key": "live-contact"}, 422)
	c.do(t, "GET", bc+"/billing-contacts", A, "", nil, 200)
	c.do(t, "GET", bc+"/billing-contacts/"+contact, A, "", nil, 200)
	c.do(t, "PATCH", bc+"/billing-contacts/"+contact, A, `{"company": "ACME"}`, nil, 200)
	c.do(t, "PUT", bc+"/vendors/v-1/vendor-billing-contact/"+contact, A, "", nil, 200)
	c.do(t, "GET", bc+"/vendors/v-1/vendor-billing-contact", A, "", nil, 200)

	// Campaigns and bids.
	cs := "/public/v1/campaign-service"
	r = c.do(t, "POST", cs+"/vendors/v-1/campaigns", A, `{"name": "Spring", "type": "listings", "dailyBudget": 50, "targeting": {"devices": ["mobile"]}}`,
		map[string]string{"Idempotency-Key": "live-campaign"}, 201)
	camp := jsonField(t, r, "id")
	c.do(t, "POST", cs+"/vendors/v-9/campaigns", A, `{"name": "x", "type": "listings", "dailyBudget": 1}`, nil, 404)
	c.do(t, "GET", cs+"/vendors/v-1/campaigns", A, "", nil, 200)
	c.do(t, "GET", cs+"/campaigns/"+camp, A, "", nil, 200)
	c.do(t, "GET", cs+"/campaigns/not-a-uuid", A, "", nil, 422)
	c.do(t, "PATCH", cs+"/campaigns/"+camp, A, `{"totalBudget": 300.25, "endDate": null}`, nil, 200)
	c.do(t, "PATCH", cs+"/campaigns/"+camp, A, `{"name": "Other"}`, map[string]string{"If-Match": `"99"`}, 409)
	c.do(t, "PUT", cs+"/campaigns/"+camp+"/billing-contact", A, fmt.Sprintf(`{"billingContactId": %q}`, contact), nil, 200)
	r = c.do(t, "POST", cs+"/campaigns/"+camp+"/bids", A, `{"targetType": "product", "target": "p-1", "bidAmount": 0.35}`, nil, 201)
	bid := jsonField(t, r, "id")
	c.do(t, "POST", cs+"/campaigns/"+camp+"/bids", A, `{"targetType": "keyword", "target": "  Red   Shoes ", "bidAmount": 0.2}`, nil, 201)
	c.do(t, "GET", cs+"/campaigns/"+camp+"/bids", A, "", nil, 200)
	c.do(t, "GET", cs+"/campaigns/"+camp+"/bids/"+bid, A, "", nil, 200)
	c.do(t, "PATCH", cs+"/campaigns/"+camp+"/bids/"+bid, A, `{"bidAmount": 0.4, "isActive": false}`, nil, 200)
	c.do(t, "DELETE", cs+"/campaigns/"+camp+"/bids/"+bid, A, "", nil, 204)
	r = c.do(t, "POST", cs+"/vendors/v-1/campaigns", A, `{"name": "Auto", "type": "automated", "dailyBudget": 50, "maxBid": 0.8}`, nil, 201)
	c.do(t, "GET", "/public/v1/automation/campaigns/"+jsonField(t, r, "id")+"/bids", A, "", nil, 200)
	c.do(t, "GET", "/public/v1/automation/campaigns/"+camp+"/bids", A, "", nil, 422)
	// The marketplace's list (a vendor by its catalog id or its UUID), then an archive (If-Match honoured, then
	// idempotent), its list filter, a write of an archived campaign, and bad filters.
	c.do(t, "GET", cs+"/campaigns?limit=1", A, "", nil, 200)
	c.do(t, "GET", cs+"/campaigns?vendor_id=v-1&status=running,Paused&type=listings&type=automated&name=SPR", A, "", nil, 200)
	c.do(t, "GET", cs+"/campaigns?vendor_id="+vendorid.String(s.Marketplace.ID, "v-1"), A, "", nil, 200)
	c.do(t, "DELETE", cs+"/campaigns/"+camp, A, "", map[string]string{"If-Match": `"99"`}, 409)
	c.do(t, "DELETE", cs+"/campaigns/"+camp, A, "", nil, 200)
	c.do(t, "DELETE", cs+"/campaigns/"+camp, A, "", map[string]string{"If-Match": `"99"`}, 200)
	c.do(t, "GET", cs+"/campaigns?status=archived", A, "", nil, 200)
	c.do(t, "PATCH", cs+"/campaigns/"+camp, A, `{"name": "Again"}`, nil, 422)
	c.do(t, "DELETE", cs+"/campaigns/not-a-uuid", A, "", nil, 422)
	c.do(t, "GET", cs+"/campaigns?status=live&limit=0", A, "", nil, 422)
	c.do(t, "DELETE", bc+"/vendors/v-1/vendor-billing-contact/"+contact, A, "", nil, 204)

	// Reporting.
	day := now.Format(time.DateOnly)
	c.do(t, "GET", bc+"/vendor-charges?start_date="+day+"T00:00:00Z&end_date="+now.Add(24*time.Hour).Format(time.DateOnly)+"T00:00:00Z", A, "", nil, 200)
	c.do(t, "GET", bc+"/vendor-charges?start_date="+day+"T00:00:00Z&end_date="+now.Add(24*time.Hour).Format(time.DateOnly)+"T00:00:00Z&limit=10&include_refused=true", A, "", nil, 200)
	c.do(t, "GET", bc+"/vendor-charges", A, "", nil, 422)
	c.do(t, "GET", "/public/v1/reporting-service/file-reports/scored-attribution?report_date="+day, A, "", nil, 200)
	c.do(t, "GET", "/public/v1/reporting-service/file-reports/scored-attribution", A, "", nil, 422)

	// Invitations.
	r = c.do(t, "POST", "/public/v1/invitation-service/invitations", A, `{"invites": [{"vendorId": "v-1", "vendorEmail": "ann@example.com", "targetUserRole": "vendor_admin"}]}`, nil, 201)
	var created struct{ Invitations []struct{ ID string } }
	if err := json.Unmarshal(r.Body, &created); err != nil || len(created.Invitations) != 1 {
		t.Fatalf("invitations: %s", r.Body)
	}
	c.do(t, "GET", "/public/v1/invitation-service/invitations?vendor_id=v-1", A, "", nil, 200)
	c.do(t, "GET", "/public/v1/invitation-service/invitations/"+created.Invitations[0].ID, A, "", nil, 200)
	c.do(t, "POST", "/public/v1/invitation-service/invitations", A, `{"invites": []}`, nil, 422)

	// Exports.
	ex := "/public/v1/export-service"
	c.do(t, "GET", ex+"/datasets", A, "", nil, 200)
	r = c.do(t, "POST", ex+"/exports", A, fmt.Sprintf(`{"dataset": "monitoring_metrics", "dimensions": ["vendor_id", "day_local"], "metrics": ["impressions", "clicks"],
		"granularity": "day_local", "startDate": %q, "endDate": %q}`, day, day), nil, 202)
	c.do(t, "GET", ex+"/exports/"+jsonField(t, r, "exportId"), A, "", nil, 200)
	c.do(t, "GET", ex+"/exports/0193e7a2-1111-7222-8333-444455556666", A, "", nil, 404)
	c.do(t, "GET", ex+"/exports?dataset=monitoring_metrics&created_from=2020-01-01T00:00:00Z&limit=10", A, "", nil, 200)
	c.do(t, "GET", ex+"/exports?status=done&limit=0", A, "", nil, 422)
	c.do(t, "POST", ex+"/exports", A, `{"dataset": "nope"}`, nil, 422)

	// Webhooks.
	wh := "/public/v1/webhooks/webhooks"
	c.do(t, "POST", wh, A, `{"url": "https://10.0.0.5/hook", "eventTypes": ["campaign.updated"]}`, nil, 422)
	r = c.do(t, "POST", wh, A, `{"url": "http://127.0.0.1:9/hook", "eventTypes": ["campaign.updated"]}`, nil, 201)
	hook := jsonField(t, r, "id")
	c.do(t, "GET", wh, A, "", nil, 200)
	c.do(t, "GET", wh+"/"+hook, A, "", nil, 200)
	c.do(t, "PATCH", wh+"/"+hook, A, `{"eventTypes": ["campaign.created", "export.failed"]}`, nil, 200)
	c.do(t, "POST", wh+"/"+hook+"/rotate-secret", A, `{"overlapSeconds": 60}`, nil, 200)
	c.do(t, "GET", wh+"/"+hook, A, "", nil, 200) // with previousSecretExpiresAt
	r = c.do(t, "POST", wh+"/"+hook+"/test", A, "", nil, 202)
	delivery := jsonField(t, r, "id")
	c.do(t, "GET", wh+"/"+hook+"/deliveries?status=pending", A, "", nil, 200)
	c.do(t, "GET", wh+"/"+hook+"/deliveries/"+delivery, A, "", nil, 200)
	c.do(t, "POST", wh+"/"+hook+"/deliveries/"+delivery+"/retry", A, "", nil, 202, 409)
	c.do(t, "PATCH", wh+"/"+hook, A, `{"status": "disabled"}`, nil, 200)
	c.do(t, "POST", wh+"/"+hook+"/test", A, "", nil, 409)
	c.do(t, "DELETE", wh+"/"+hook, A, "", nil, 204)
	c.do(t, "GET", wh+"/"+hook, A, "", nil, 404)

	// Segments.
	c.do(t, "PUT", sgPath("vip"), A, `{"name": "VIP", "description": "Bought twice"}`, nil, 201)
	c.do(t, "PUT", sgPath("vip"), A, `{"name": "VIP buyers"}`, nil, 200)
	c.do(t, "GET", sgBase, A, "", nil, 200)
	c.do(t, "GET", sgPath("vip"), A, "", nil, 200)
	up := sgUpload(t, s, A, "vip", "?action=add", sgLines("u1", "u2"), nil)
	if up.Status != 204 {
		t.Fatalf("upload: %d %s", up.Status, up.Body)
	}
	c.check(t, openapitest.Exchange{Method: "POST", Path: up.Path, Status: up.Status, Header: up.Header, Body: up.Body})
	c.do(t, "DELETE", sgPath("vip"), A, "", map[string]string{"If-Match": `"1"`}, 409)
	c.do(t, "DELETE", sgPath("vip"), A, "", nil, 204)

	// Offsite.
	dom := "/public/v1/offsite-ads/ad-network/advertisers/v-1/domain"
	c.do(t, "PUT", dom, A, `{"domain": "Bücher.example"}`, nil, 200)
	c.do(t, "GET", dom, A, "", nil, 200)
	c.do(t, "PUT", dom, A, `{"domain": "https://x.example/"}`, nil, 422)
	c.do(t, "DELETE", dom, A, "", nil, 204)
	c.do(t, "GET", dom, A, "", nil, 404)

	var missing []string
	for _, op := range openapitest.Operations(v.Doc) {
		found := false
		for seen := range c.seen {
			method, path, _ := strings.Cut(seen, " ")
			if op == method+" "+openapitest.RoutePattern(strings.NewReplacer("{", ":", "}", "").Replace(path)) {
				found = true
			}
		}
		if !found {
			missing = append(missing, op)
		}
	}
	t.Logf("%d operations of the document answered a 2xx here; not exercised: %v", len(c.seen), missing)
}
