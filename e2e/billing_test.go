package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/testkit/testenv"
)

// Helpers of the billing, invitations, webhooks and offsite tests (bw*).

// bwStart starts a system whose "default" rate limit does not get in the
// way of a test that makes many requests.
func bwStart(t *testing.T) (*system, config.Config) {
	t.Helper()
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault = "5000/1s"
	cfg.RateLimitCatalog = "4000/1s" // distinct from default, so the headers tell the class
	return startSystem(t, cfg), cfg
}

// bwVendors creates catalog vendors through the catalog API.
func bwVendors(t *testing.T, s *system, key string, ids ...string) {
	t.Helper()
	var vs []map[string]string
	for _, id := range ids {
		vs = append(vs, map[string]string{"id": id, "name": "Vendor " + id})
	}
	r := bwDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key, map[string]any{"vendors": vs}, nil)
	if r.Status != 200 {
		t.Fatalf("create vendors: %d %s", r.Status, r.Body)
	}
}

// bwDo sends body (marshalled unless it is a string or []byte).
func bwDo(t *testing.T, s *system, method, path, key string, body any, hdr map[string]string) response {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case nil:
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	return s.request(t, method, path, key, b, hdr)
}

func bwStatus(t *testing.T, r response, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
	}
}

func bwObj(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %q", b)
	}
	return m
}

func bw404(t *testing.T, r response) {
	t.Helper()
	if r.Status != 404 {
		t.Fatalf("status %d, want 404: %s", r.Status, r.Body)
	}
	m := bwObj(t, r.Body)
	if m["errCode"] != "resource_not_found" || m["docUrl"] == "" || m["message"] == "" {
		t.Fatalf("404 body: %s", r.Body)
	}
}

func bw409(t *testing.T, r response) {
	t.Helper()
	if r.Status != 409 || bwObj(t, r.Body)["errCode"] != "invalid_operation" {
		t.Fatalf("want 409 invalid_operation, got %d %s", r.Status, r.Body)
	}
}

func bwETag(t *testing.T, r response, want string) {
	t.Helper()
	if got := r.Header.Get("ETag"); got != `"`+want+`"` {
		t.Fatalf("ETag %q, want %q", got, `"`+want+`"`)
	}
}

var bwTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// bwTimeFormat checks the format of a timestamp field and returns it.
func bwTimeFormat(t *testing.T, m map[string]any, field string) string {
	t.Helper()
	s, _ := m[field].(string)
	if !bwTimeRE.MatchString(s) {
		t.Fatalf("%s = %v, want an ISO 8601 UTC timestamp with milliseconds", field, m[field])
	}
	return s
}

// bwTime checks a timestamp field that must be about now and returns it.
func bwTime(t *testing.T, m map[string]any, field string) string {
	t.Helper()
	s := bwTimeFormat(t, m, field)
	at, _ := time.Parse(time.RFC3339, s)
	if d := time.Since(at); d < -time.Minute || d > 5*time.Minute {
		t.Fatalf("%s = %s is not now", field, s)
	}
	return s
}

// bwPages follows a list to its end with limit and returns every item's
// id, checking hasMore/nextPage on each page.
func bwPages(t *testing.T, s *system, path, key, items string, limit int) []string {
	t.Helper()
	var ids []string
	next := ""
	for page := 0; ; page++ {
		u := path + bwSep(path) + "limit=" + fmt.Sprint(limit)
		if next != "" {
			u += "&next_page=" + url.QueryEscape(next)
		}
		r := bwDo(t, s, "GET", u, key, nil, nil)
		bwStatus(t, r, 200)
		var body struct {
			HasMore  *bool   `json:"hasMore"`
			NextPage *string `json:"nextPage"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || body.HasMore == nil {
			t.Fatalf("list body: %s", r.Body)
		}
		raw := bwObj(t, r.Body)
		if _, ok := raw["nextPage"]; !ok || len(raw) != 3 {
			t.Fatalf("list body must be {hasMore, %s, nextPage}: %s", items, r.Body)
		}
		list, ok := raw[items].([]any)
		if !ok {
			t.Fatalf("list body without %q array: %s", items, r.Body)
		}
		if len(list) > limit {
			t.Fatalf("page of %d items, limit %d", len(list), limit)
		}
		for _, it := range list {
			ids = append(ids, it.(map[string]any)["id"].(string))
		}
		if *body.HasMore != (body.NextPage != nil) {
			t.Fatalf("hasMore and nextPage disagree: %s", r.Body)
		}
		if !*body.HasMore {
			return ids
		}
		if len(list) != limit {
			t.Fatalf("a page before the last has %d items, limit %d", len(list), limit)
		}
		next = *body.NextPage
		if page > 1000 {
			t.Fatalf("list does not end: %d ids, last page %.500s", len(ids), r.Body)
		}
	}
}

func bwSep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

// bwListQueryErrors checks the 422s of a list's query parameters.
func bwListQueryErrors(t *testing.T, s *system, path, key string) {
	t.Helper()
	expect422Locs(t, bwDo(t, s, "GET", path+bwSep(path)+"limit=0", key, nil, nil), "query.limit")
	expect422Locs(t, bwDo(t, s, "GET", path+bwSep(path)+"limit=101", key, nil, nil), "query.limit")
	expect422Locs(t, bwDo(t, s, "GET", path+bwSep(path)+"limit=x", key, nil, nil), "query.limit")
	expect422Locs(t, bwDo(t, s, "GET", path+bwSep(path)+"next_page=not-a-cursor", key, nil, nil), "query.next_page")
}

// bwRateLimited checks that a response went through the "default" limit.
func bwRateLimited(t *testing.T, r response) {
	t.Helper()
	if r.Header.Get("X-RateLimit-Limit") != "5000" || r.Header.Get("X-RateLimit-Remaining") == "" || r.Header.Get("X-RateLimit-Reset") == "" {
		t.Fatalf("missing X-RateLimit-* headers of the default class: %v", r.Header)
	}
}

const bwBcPath = "/public/v1/billing-service/billing-contacts"

func bwBvPath(vendor string) string {
	return "/public/v1/billing-service/vendors/" + vendor + "/vendor-billing-contact"
}

// TestBillingContacts: create, read, list with pages, update, link, unlink
// (the spec's four rules), every 422 and 404, isolation between
// marketplaces, and the rebuild of everything from Kafka.
func TestBillingContacts(t *testing.T) {
	s, cfg := bwStart(t)
	A := s.AdvancedKey
	B := otherMarketplace(t, s)
	bwVendors(t, s, A, "v-1", "v-2", "v-3")
	bwVendors(t, s, B, "v-1")

	// Every route of this area and of invitations, webhooks and offsite
	// takes only an advanced key.
	for _, rt := range []struct{ method, path string }{
		{"POST", bwBcPath}, {"GET", bwBcPath}, {"GET", bwBcPath + "/x"}, {"PATCH", bwBcPath + "/x"},
		{"GET", bwBvPath("v-1")}, {"PUT", bwBvPath("v-1") + "/x"}, {"DELETE", bwBvPath("v-1") + "/x"},
		{"POST", bwInvPath}, {"GET", bwInvPath}, {"GET", bwInvPath + "/x"},
		{"POST", bwWhPath}, {"GET", bwWhPath}, {"GET", bwWhPath + "/x"}, {"PATCH", bwWhPath + "/x"}, {"DELETE", bwWhPath + "/x"},
		{"PUT", bwAdPath("v-1")}, {"GET", bwAdPath("v-1")}, {"DELETE", bwAdPath("v-1")},
	} {
		if r := bwDo(t, s, rt.method, rt.path, s.MarketplaceKey, `{}`, nil); r.Status != 403 {
			t.Fatalf("%s %s with a marketplace key: %d %s", rt.method, rt.path, r.Status, r.Body)
		}
		if r := bwDo(t, s, rt.method, rt.path, "", `{}`, nil); r.Status != 401 {
			t.Fatalf("%s %s without a key: %d %s", rt.method, rt.path, r.Status, r.Body)
		}
	}

	// Create: exact shape.
	r := bwDo(t, s, "POST", bwBcPath, A, `{"name": " Ann Example ", "email": "ann@example.com", "company": "ACME GmbH", "taxId": "DE123456789",
		"address": {"line1": "Hauptstr. 1", "line2": "", "city": "Berlin", "postalCode": "10115", "region": "BE", "country": "de"}}`, nil)
	bwStatus(t, r, 201)
	bwETag(t, r, "1")
	bwRateLimited(t, r)
	m := bwObj(t, r.Body)
	c1 := m["id"].(string)
	created := bwTime(t, m, "createdAt")
	if m["updatedAt"] != created {
		t.Fatalf("updatedAt %v != createdAt %v", m["updatedAt"], created)
	}
	c1JSON := fmt.Sprintf(`{"id": %q, "name": "Ann Example", "email": "ann@example.com", "company": "ACME GmbH", "taxId": "DE123456789",
		"address": {"line1": "Hauptstr. 1", "line2": null, "city": "Berlin", "postalCode": "10115", "region": "BE", "country": "DE"},
		"createdAt": %q, "updatedAt": %q}`, c1, created, created)
	sameJSON(t, r.Body, c1JSON)

	r = bwDo(t, s, "POST", bwBcPath, A, `{"name": "Bob", "email": "bob@example.org"}`, nil)
	bwStatus(t, r, 201)
	m = bwObj(t, r.Body)
	c2 := m["id"].(string)
	sameJSON(t, r.Body, fmt.Sprintf(`{"id": %q, "name": "Bob", "email": "bob@example.org", "company": null, "taxId": null, "address": null, "createdAt": %q, "updatedAt": %q}`,
		c2, m["createdAt"], m["createdAt"]))
	r = bwDo(t, s, "POST", bwBcPath, A, `{"name": "Cid", "email": "cid@example.net"}`, nil)
	bwStatus(t, r, 201)
	c3 := bwObj(t, r.Body)["id"].(string)

	// 422s.
	expect422Locs(t, bwDo(t, s, "POST", bwBcPath, A, `{}`, nil), "body.name", "body.email")
	expect422Locs(t, bwDo(t, s, "POST", bwBcPath, A, ``, nil), "body")
	expect422Locs(t, bwDo(t, s, "POST", bwBcPath, A, `{"name": "A", "email": "A <a@example.com>"}`, nil), "body.email")
	expect422Locs(t, bwDo(t, s, "POST", bwBcPath, A, `{"name": "A", "email": "no-at-sign"}`, nil), "body.email")
	expect422Locs(t, bwDo(t, s, "POST", bwBcPath, A, `{"name": 5, "email": "a@example.com"}`, nil), "body.name")
	expect422Locs(t, bwDo(t, s, "POST", bwBcPath, A, `{"name": "`+strings.Repeat("n", 256)+`", "email": "a@example.com", "taxId": "`+strings.Repeat("t", 65)+`"}`, nil), "body.name", "body.taxId")
	expect422Locs(t, bwDo(t, s, "POST", bwBcPath, A, `{"name": "A", "email": "a@example.com", "company": "`+strings.Repeat("c", 256)+`"}`, nil), "body.company")
	expect422Locs(t, bwDo(t, s, "POST", bwBcPath, A, `{"name": "A", "email": "a@example.com", "address": {"country": "XX", "postalCode": "`+strings.Repeat("1", 33)+`", "city": "`+strings.Repeat("c", 256)+`"}}`, nil),
		"body.address.country", "body.address.postalCode", "body.address.city")
	expect422Locs(t, bwDo(t, s, "POST", bwBcPath, A, `{"name": "A", "email": "a@example.com"} x`, nil), "body")

	// Read.
	r = bwDo(t, s, "GET", bwBcPath+"/"+c1, A, nil, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "1")
	sameJSON(t, r.Body, c1JSON)
	bw404(t, bwDo(t, s, "GET", bwBcPath+"/nope", A, nil, nil))

	// List with pages.
	if ids := bwPages(t, s, bwBcPath, A, "billingContacts", 2); fmt.Sprint(ids) != fmt.Sprint([]string{c1, c2, c3}) {
		t.Fatalf("contacts %v, want %v", ids, []string{c1, c2, c3})
	}
	r = bwDo(t, s, "GET", bwBcPath, A, nil, nil)
	bwStatus(t, r, 200)
	if l := bwObj(t, r.Body); len(l["billingContacts"].([]any)) != 3 || l["hasMore"] != false || l["nextPage"] != nil {
		t.Fatalf("default page: %s", r.Body)
	}
	bwListQueryErrors(t, s, bwBcPath, A)

	// Update.
	bw409(t, bwDo(t, s, "PATCH", bwBcPath+"/"+c2, A, `{"name": "Robert"}`, map[string]string{"If-Match": `"2"`}))
	expect422Locs(t, bwDo(t, s, "PATCH", bwBcPath+"/"+c2, A, `{"email": "bad", "name": ""}`, nil), "body.email", "body.name")
	bw404(t, bwDo(t, s, "PATCH", bwBcPath+"/nope", A, `{"name": "X"}`, nil))
	r = bwDo(t, s, "PATCH", bwBcPath+"/"+c2, A, `{"name": "Robert", "company": "Bob & Co", "address": {"country": "FR"}}`, map[string]string{"If-Match": `"1"`})
	bwStatus(t, r, 200)
	bwETag(t, r, "2")
	m = bwObj(t, r.Body)
	sameJSON(t, r.Body, fmt.Sprintf(`{"id": %q, "name": "Robert", "email": "bob@example.org", "company": "Bob & Co", "taxId": null,
		"address": {"line1": null, "line2": null, "city": null, "postalCode": null, "region": null, "country": "FR"}, "createdAt": %q, "updatedAt": %q}`,
		c2, m["createdAt"], bwTime(t, m, "updatedAt")))
	r = bwDo(t, s, "PATCH", bwBcPath+"/"+c2, A, `{"company": "", "address": {}}`, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "3")
	if m := bwObj(t, r.Body); m["company"] != nil || m["address"] != nil || m["name"] != "Robert" {
		t.Fatalf("cleared fields: %s", r.Body)
	}

	// Link c1 and c2 to v-1, c1 to v-2.
	r = bwDo(t, s, "PUT", bwBvPath("v-1")+"/"+c1, A, nil, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "1")
	m = bwObj(t, r.Body)
	linkedAt := bwTime(t, m, "linkedAt")
	sameJSON(t, r.Body, fmt.Sprintf(`{"vendorId": "v-1", "billingContactId": %q, "linkedAt": %q}`, c1, linkedAt))
	r = bwDo(t, s, "PUT", bwBvPath("v-1")+"/"+c1, A, nil, nil) // idempotent
	bwStatus(t, r, 200)
	bwETag(t, r, "1")
	sameJSON(t, r.Body, fmt.Sprintf(`{"vendorId": "v-1", "billingContactId": %q, "linkedAt": %q}`, c1, linkedAt))
	bwStatus(t, bwDo(t, s, "PUT", bwBvPath("v-1")+"/"+c2, A, nil, nil), 200)
	bwStatus(t, bwDo(t, s, "PUT", bwBvPath("v-2")+"/"+c1, A, nil, nil), 200)
	bw404(t, bwDo(t, s, "PUT", bwBvPath("v-9")+"/"+c1, A, nil, nil))
	bw404(t, bwDo(t, s, "PUT", bwBvPath("v-1")+"/nope", A, nil, nil))
	expect422Locs(t, bwDo(t, s, "PUT", bwBvPath("%20")+"/%20", A, nil, nil), "path.external_vendor_id", "path.billing_contact_id")
	expect422Locs(t, bwDo(t, s, "DELETE", bwBvPath("%20")+"/"+c1, A, nil, nil), "path.external_vendor_id")
	expect422Locs(t, bwDo(t, s, "GET", bwBvPath("%20"), A, nil, nil), "path.external_vendor_id")

	if ids := bwPages(t, s, bwBvPath("v-1"), A, "billingContacts", 1); fmt.Sprint(ids) != fmt.Sprint([]string{c1, c2}) {
		t.Fatalf("v-1 contacts %v", ids)
	}
	r = bwDo(t, s, "GET", bwBvPath("v-2"), A, nil, nil)
	bwStatus(t, r, 200)
	sameJSON(t, r.Body, `{"hasMore": false, "billingContacts": [`+c1JSON+`], "nextPage": null}`)
	sameJSON(t, bwDo(t, s, "GET", bwBvPath("v-3"), A, nil, nil).Body, `{"hasMore": false, "billingContacts": [], "nextPage": null}`)
	bw404(t, bwDo(t, s, "GET", bwBvPath("v-9"), A, nil, nil))
	bwListQueryErrors(t, s, bwBvPath("v-1"), A)
	// A cursor of one vendor's list does not continue another list.
	r = bwDo(t, s, "GET", bwBvPath("v-1")+"?limit=1", A, nil, nil)
	cur := bwObj(t, r.Body)["nextPage"].(string)
	expect422Locs(t, bwDo(t, s, "GET", bwBvPath("v-2")+"?next_page="+url.QueryEscape(cur), A, nil, nil), "query.next_page")
	expect422Locs(t, bwDo(t, s, "GET", bwBcPath+"?next_page="+url.QueryEscape(cur), A, nil, nil), "query.next_page")

	// Isolation: B sees and changes nothing of A, even with a vendor of the
	// same id.
	bw404(t, bwDo(t, s, "GET", bwBcPath+"/"+c1, B, nil, nil))
	bw404(t, bwDo(t, s, "PATCH", bwBcPath+"/"+c1, B, `{"name": "Mallory"}`, nil))
	sameJSON(t, bwDo(t, s, "GET", bwBcPath, B, nil, nil).Body, `{"hasMore": false, "billingContacts": [], "nextPage": null}`)
	sameJSON(t, bwDo(t, s, "GET", bwBvPath("v-1"), B, nil, nil).Body, `{"hasMore": false, "billingContacts": [], "nextPage": null}`)
	bw404(t, bwDo(t, s, "GET", bwBvPath("v-2"), B, nil, nil))
	bw404(t, bwDo(t, s, "PUT", bwBvPath("v-1")+"/"+c1, B, nil, nil))
	bw404(t, bwDo(t, s, "DELETE", bwBvPath("v-1")+"/"+c1, B, nil, nil))
	bw404(t, bwDo(t, s, "DELETE", bwBvPath("v-2")+"/"+c1, B, nil, nil))
	expect422Locs(t, bwDo(t, s, "GET", bwBvPath("v-1")+"?next_page="+url.QueryEscape(cur), B, nil, nil), "query.next_page")
	sameJSON(t, bwDo(t, s, "GET", bwBcPath+"/"+c1, A, nil, nil).Body, c1JSON)

	// A campaign of v-1 uses c1 (the assignment is the campaigns area's).
	r = bwDo(t, s, "POST", "/public/v1/campaign-service/vendors/v-1/campaigns", A, `{"name": "Spring", "type": "listings", "dailyBudget": 10}`, nil)
	bwStatus(t, r, 201)
	campaign := "/public/v1/campaign-service/campaigns/" + bwObj(t, r.Body)["id"].(string)
	bwStatus(t, bwDo(t, s, "PUT", campaign+"/billing-contact", A, map[string]string{"billingContactId": c1}, nil), 200)
	expect422Locs(t, bwDo(t, s, "PUT", campaign+"/billing-contact", A, map[string]string{"billingContactId": c3}, nil), "body.billingContactId")

	// Unlink c1 from v-1 (rules 1, 3, 4).
	bw404(t, bwDo(t, s, "DELETE", bwBvPath("v-9")+"/"+c1, A, nil, nil))
	bw404(t, bwDo(t, s, "DELETE", bwBvPath("v-1")+"/nope", A, nil, nil))
	bw409(t, bwDo(t, s, "DELETE", bwBvPath("v-1")+"/"+c1, A, nil, map[string]string{"If-Match": `"7"`}))
	r = bwDo(t, s, "DELETE", bwBvPath("v-1")+"/"+c1, A, nil, map[string]string{"If-Match": `"1"`})
	bwStatus(t, r, 204)
	if len(r.Body) != 0 {
		t.Fatalf("204 with a body: %q", r.Body)
	}
	bwStatus(t, bwDo(t, s, "DELETE", bwBvPath("v-1")+"/"+c1, A, nil, nil), 204) // not linked: no-op
	bwStatus(t, bwDo(t, s, "DELETE", bwBvPath("v-3")+"/"+c1, A, nil, nil), 204)
	if ids := bwPages(t, s, bwBvPath("v-1"), A, "billingContacts", 10); fmt.Sprint(ids) != fmt.Sprint([]string{c2}) {
		t.Fatalf("v-1 contacts after unlink %v", ids)
	}
	if ids := bwPages(t, s, bwBvPath("v-2"), A, "billingContacts", 10); fmt.Sprint(ids) != fmt.Sprint([]string{c1}) {
		t.Fatalf("v-2 contacts after unlink %v", ids)
	}
	sameJSON(t, bwDo(t, s, "GET", bwBcPath+"/"+c1, A, nil, nil).Body, c1JSON)
	// Rule 2: the campaign keeps c1, but c1 can no longer be assigned to v-1's campaigns.
	r = bwDo(t, s, "GET", campaign, A, nil, nil)
	bwStatus(t, r, 200)
	if got := bwObj(t, r.Body)["billingContactId"]; got != c1 {
		t.Fatalf("campaign's billing contact after unlink: %v, want %s", got, c1)
	}
	expect422Locs(t, bwDo(t, s, "PUT", campaign+"/billing-contact", A, map[string]string{"billingContactId": c1}, nil), "body.billingContactId")
	// Linking again works and starts a new version of the link.
	r = bwDo(t, s, "PUT", bwBvPath("v-1")+"/"+c1, A, nil, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "3")
	bwStatus(t, bwDo(t, s, "DELETE", bwBvPath("v-1")+"/"+c1, A, nil, nil), 204)

	// Restart: a second process on the same Kafka rebuilds everything.
	s2 := startSystem(t, cfg)
	r = bwDo(t, s2, "GET", bwBcPath+"/"+c1, A, nil, nil)
	bwStatus(t, r, 200)
	bwETag(t, r, "1")
	sameJSON(t, r.Body, c1JSON)
	r = bwDo(t, s2, "GET", bwBcPath+"/"+c2, A, nil, nil)
	bwETag(t, r, "3")
	if ids := bwPages(t, s2, bwBcPath, A, "billingContacts", 2); fmt.Sprint(ids) != fmt.Sprint([]string{c1, c2, c3}) {
		t.Fatalf("rebuilt contacts %v", ids)
	}
	if ids := bwPages(t, s2, bwBvPath("v-1"), A, "billingContacts", 10); fmt.Sprint(ids) != fmt.Sprint([]string{c2}) {
		t.Fatalf("rebuilt v-1 contacts %v", ids)
	}
	if ids := bwPages(t, s2, bwBvPath("v-2"), A, "billingContacts", 10); fmt.Sprint(ids) != fmt.Sprint([]string{c1}) {
		t.Fatalf("rebuilt v-2 contacts %v", ids)
	}
	sameJSON(t, bwDo(t, s2, "GET", bwBcPath, B, nil, nil).Body, `{"hasMore": false, "billingContacts": [], "nextPage": null}`)
}
