package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/testkit/testenv"
)

// Helpers of the campaign tests (cp*).

const (
	cpBase = "/public/v1/campaign-service"
	cpAuto = "/public/v1/automation/campaigns"
)

func cpCampaign(id string) string { return cpBase + "/campaigns/" + id }
func cpBids(id string) string     { return cpBase + "/campaigns/" + id + "/bids" }
func cpVendor(id string) string   { return cpBase + "/vendors/" + id + "/campaigns" }

// cpStart starts a system whose rate limits do not get in the way.
func cpStart(t *testing.T) (*system, config.Config) {
	t.Helper()
	return cpStartWith(t, nil)
}

// cpStartWith is cpStart with edit applied to the configuration first.
func cpStartWith(t *testing.T, edit func(*config.Config)) (*system, config.Config) {
	t.Helper()
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault = "5000/1s"
	cfg.RateLimitCatalog = "5000/1s"
	cfg.RateLimitExplain = "5000/1s"
	cfg.SpendReadTimeout = 10 * time.Second // the tests compare spend: a loaded machine must not drop it
	if edit != nil {
		edit(&cfg)
	}
	return startSystem(t, cfg), cfg
}

func cpDo(t *testing.T, s *system, method, path, key string, body any, hdr map[string]string) response {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case nil:
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

func cpStatus(t *testing.T, r response, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
	}
}

func cpETag(t *testing.T, r response, want string) {
	t.Helper()
	if got := r.Header.Get("ETag"); got != `"`+want+`"` {
		t.Fatalf("ETag %q, want %q (status %d: %s)", got, `"`+want+`"`, r.Status, r.Body)
	}
}

func cpObj(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %q", b)
	}
	return m
}

var cpTimeRE = regexp.MustCompile(`"(createdAt|updatedAt)":\s*"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"`)

// cpNormalize replaces generated ids by names and checks that createdAt and
// updatedAt are current ISO 8601 UTC timestamps with milliseconds, replacing
// them by "<now>".
func cpNormalize(t *testing.T, body []byte, ids map[string]string) []byte {
	t.Helper()
	for id, name := range ids {
		body = bytes.ReplaceAll(body, []byte(id), []byte(name))
	}
	return cpTimeRE.ReplaceAllFunc(body, func(m []byte) []byte {
		sub := cpTimeRE.FindSubmatch(m)
		at, err := time.Parse(time.RFC3339, string(sub[2]))
		if d := time.Since(at); err != nil || d < -time.Minute || d > 5*time.Minute {
			t.Errorf("%s = %s is not now", sub[1], sub[2])
		}
		return []byte(`"` + string(sub[1]) + `":"<now>"`)
	})
}

// cpSame fails unless got (normalised) and want are the same JSON value.
func cpSame(t *testing.T, got []byte, ids map[string]string, want string) {
	t.Helper()
	sameJSON(t, cpNormalize(t, got, ids), want)
}

func cp404(t *testing.T, r response) {
	t.Helper()
	if r.Status != 404 {
		t.Fatalf("status %d, want 404: %s", r.Status, r.Body)
	}
	m := cpObj(t, r.Body)
	if m["errCode"] != "resource_not_found" || m["docUrl"] == "" || m["message"] == "" {
		t.Fatalf("404 body: %s", r.Body)
	}
}

func cp409(t *testing.T, r response) {
	t.Helper()
	if r.Status != 409 {
		t.Fatalf("status %d, want 409: %s", r.Status, r.Body)
	}
	if m := cpObj(t, r.Body); m["errCode"] != "invalid_operation" {
		t.Fatalf("409 body: %s", r.Body)
	}
}

// cpPages follows a list to its end with limit and returns the values of
// field of every item, checking the {hasMore, items, nextPage} shape.
func cpPages(t *testing.T, s *system, path, key, items, field string, limit int) []string {
	t.Helper()
	var out []string
	next := ""
	for page := 0; page < 100; page++ {
		u := path + "?limit=" + fmt.Sprint(limit)
		if next != "" {
			u += "&next_page=" + url.QueryEscape(next)
		}
		r := cpDo(t, s, "GET", u, key, nil, nil)
		cpStatus(t, r, 200)
		raw := cpObj(t, r.Body)
		list, ok := raw[items].([]any)
		hasMore, ok2 := raw["hasMore"].(bool)
		if _, ok3 := raw["nextPage"]; !ok || !ok2 || !ok3 || len(raw) != 3 {
			t.Fatalf("list body must be {hasMore, %s, nextPage}: %s", items, r.Body)
		}
		if len(list) > limit {
			t.Fatalf("page of %d items, limit %d", len(list), limit)
		}
		for _, it := range list {
			out = append(out, fmt.Sprint(it.(map[string]any)[field]))
		}
		if !hasMore {
			if raw["nextPage"] != nil {
				t.Fatalf("last page with a nextPage: %s", r.Body)
			}
			return out
		}
		next, _ = raw["nextPage"].(string)
		if next == "" || len(list) != limit {
			t.Fatalf("hasMore with nextPage %v and %d items", raw["nextPage"], len(list))
		}
	}
	t.Fatal("list does not end")
	return nil
}

// cpFixture creates, through the other areas' APIs, vendors v-1 and v-2;
// products p-1 (v-1), p-2 (v-1 and v-2, quality score 0.5), p-3 (v-1,
// inactive), p-9 (v-2); billing contacts linked to v-1 and to v-2; segment
// seg-1. It returns the two contact ids.
func cpFixture(t *testing.T, s *system, key string) (contactV1, contactV2 string) {
	t.Helper()
	r := cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
		`{"vendors":[{"id":"v-1","name":"Vendor 1"},{"id":"v-2","name":"Vendor 2"}]}`, nil)
	cpStatus(t, r, 200)
	r = cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[
		{"id":"p-1","name":"Product 1","vendors":["v-1"],"active":true,"price":10},
		{"id":"p-2","name":"Product 2","vendors":["v-1","v-2"],"active":true,"quality_score":0.5},
		{"id":"p-3","name":"Product 3","vendors":["v-1"],"active":false},
		{"id":"p-9","name":"Product 9","vendors":["v-2"],"active":true}]}`, nil)
	cpStatus(t, r, 200)
	contact := func(name, vendor string) string {
		r := cpDo(t, s, "POST", "/public/v1/billing-service/billing-contacts", key, map[string]string{"name": name, "email": "billing@example.com"}, nil)
		cpStatus(t, r, 201)
		id, _ := cpObj(t, r.Body)["id"].(string)
		cpStatus(t, cpDo(t, s, "PUT", "/public/v1/billing-service/vendors/"+vendor+"/vendor-billing-contact/"+id, key, nil, nil), 200)
		return id
	}
	contactV1, contactV2 = contact("Billing 1", "v-1"), contact("Billing 2", "v-2")
	r = cpDo(t, s, "PUT", "/public/v1/segment-service/segments/seg-1", key, `{"name":"Segment 1","config":{"type":"user-list"}}`, nil)
	if r.Status != 200 && r.Status != 201 {
		t.Fatalf("segment: %d %s", r.Status, r.Body)
	}
	return contactV1, contactV2
}

func cpID(t *testing.T, r response) string {
	t.Helper()
	id, _ := cpObj(t, r.Body)["id"].(string)
	if len(id) != 36 {
		t.Fatalf("no uuid id in %s", r.Body)
	}
	return id
}

const cpSpring = `{"name":" Spring sale ","type":"listings","chargeType":"cpc","dailyBudget":10.5,"totalBudget":300.25,
	"startDate":"2020-01-01T01:00:00+01:00","endDate":"2099-01-01T00:00:00.123456Z",
	"targeting":{"placementIds":[2,1,2],"devices":["mobile"],"locations":["85283473FFFFFFF"],"segments":["seg-1"]}}`

// TestCampaignsLifecycle: create → read → list with pages → update →
// billing contact → bids (create, read, list with pages, update, delete),
// with exact bodies and ETags; two concurrent updates with one If-Match give
// one 200 and one 409; a second process on the same Kafka rebuilds it all.
func TestCampaignsLifecycle(t *testing.T) {
	s, cfg := cpStart(t)
	A := s.AdvancedKey
	contact1, _ := cpFixture(t, s, A)

	r := cpDo(t, s, "POST", cpVendor("v-1"), A, cpSpring, nil)
	cpStatus(t, r, 201)
	cpETag(t, r, "1")
	c1 := cpID(t, r)
	if loc := r.Header.Get("Location"); loc != cpCampaign(c1) {
		t.Errorf("Location %q", loc)
	}
	ids := map[string]string{c1: "<c1>", contact1: "<contact1>"}
	day := spend.DayOf(time.Now(), s.Marketplace.Location())
	c1JSON := `{"id":"<c1>","vendorId":"v-1","name":"Spring sale","type":"listings","chargeType":"CPC",
		"dailyBudget":10.5,"totalBudget":300.25,"budget":{"type":"daily","amount":10.5},"maxBid":null,
		"startDate":"2020-01-01T00:00:00.000Z","endDate":"2099-01-01T00:00:00.123Z","isActive":true,"status":"running","statusReason":"no_bids",
		"spend":{"day":"` + day + `","today":0,"thisWeek":0,"thisMonth":0,"total":0,"remainingDailyBudget":10.5,"remainingWeeklyBudget":null,
			"remainingMonthlyBudget":null,"remainingTotalBudget":300.25,"pacing":"on_pace","available":true},
		"targeting":{"placementIds":[1,2],"devices":["mobile"],"locations":["85283473fffffff"],"segments":["seg-1"]},
		"billingContactId":null,"createdAt":"<now>","updatedAt":"<now>","archivedAt":null}`
	cpSame(t, r.Body, ids, c1JSON)

	// A write is visible to the next read at once.
	r = cpDo(t, s, "GET", cpCampaign(c1), A, nil, nil)
	cpStatus(t, r, 200)
	cpETag(t, r, "1")
	cpSame(t, r.Body, ids, c1JSON)
	// The minimal campaign takes the defaults.
	r = cpDo(t, s, "POST", cpVendor("v-1"), A, `{"name":"Minimal","type":"banners","totalBudget":5}`, nil)
	cpStatus(t, r, 201)
	c2 := cpID(t, r)
	m := cpObj(t, r.Body)
	if m["chargeType"] != "CPC" || m["isActive"] != true || m["status"] != "running" || m["dailyBudget"] != nil || m["endDate"] != nil ||
		m["startDate"] != m["createdAt"] || fmt.Sprint(m["targeting"]) != "map[devices:[] locations:[] placementIds:[] segments:[]]" {
		t.Errorf("defaults: %s", r.Body)
	}
	r = cpDo(t, s, "POST", cpVendor("v-1"), A, `{"name":"Later","type":"automated","dailyBudget":50,"maxBid":0.8,"chargeType":"CPM","startDate":"2098-01-01T00:00:00Z"}`, nil)
	cpStatus(t, r, 201)
	c3 := cpID(t, r)
	if m := cpObj(t, r.Body); m["status"] != "scheduled" || m["maxBid"] != 0.8 || m["chargeType"] != "CPM" {
		t.Errorf("automated: %s", r.Body)
	}
	r = cpDo(t, s, "POST", cpVendor("v-2"), A, `{"name":"Other vendor","type":"listings","dailyBudget":1}`, nil)
	cpStatus(t, r, 201)
	c4 := cpID(t, r)

	// Lists by vendor, in creation order, with pages.
	if got := cpPages(t, s, cpVendor("v-1"), A, "campaigns", "id", 2); fmt.Sprint(got) != fmt.Sprint([]string{c1, c2, c3}) {
		t.Fatalf("v-1 campaigns %v", got)
	}
	if got := cpPages(t, s, cpVendor("v-2"), A, "campaigns", "id", 50); fmt.Sprint(got) != fmt.Sprint([]string{c4}) {
		t.Fatalf("v-2 campaigns %v", got)
	}
	r = cpDo(t, s, "GET", cpVendor("v-1")+"?limit=1", A, nil, nil)
	cpStatus(t, r, 200)
	page := cpObj(t, r.Body)
	first, _ := json.Marshal(page["campaigns"].([]any)[0])
	cpSame(t, first, ids, c1JSON)
	// A cursor of another list (vendor) is rejected; so are bad limits.
	next := page["nextPage"].(string)
	expect422Typed(t, cpDo(t, s, "GET", cpVendor("v-2")+"?next_page="+url.QueryEscape(next), A, nil, nil), "query.next_page:value_error")
	expect422Typed(t, cpDo(t, s, "GET", cpBids(c1)+"?next_page="+url.QueryEscape(next), A, nil, nil), "query.next_page:value_error")
	expect422Typed(t, cpDo(t, s, "GET", cpVendor("v-1")+"?limit=101", A, nil, nil), "query.limit:less_than_equal")
	expect422Typed(t, cpDo(t, s, "GET", cpVendor("v-1")+"?limit=0", A, nil, nil), "query.limit:greater_than_equal")

	// Update: only what is sent changes (also inside targeting); null
	// clears; the ETag moves on.
	r = cpDo(t, s, "PATCH", cpCampaign(c1), A, `{"name":"Spring sale 2","isActive":false,"totalBudget":null,"chargeType":"CPM","targeting":{"devices":["desktop"]}}`, map[string]string{"If-Match": `"1"`})
	cpStatus(t, r, 200)
	cpETag(t, r, "2")
	c1JSON = strings.NewReplacer(`"Spring sale"`, `"Spring sale 2"`, `"isActive":true,"status":"running","statusReason":"no_bids"`, `"isActive":false,"status":"paused","statusReason":"paused"`,
		`"totalBudget":300.25`, `"totalBudget":null`, `"remainingTotalBudget":300.25`, `"remainingTotalBudget":null`, `"chargeType":"CPC"`, `"chargeType":"CPM"`,
		`"devices":["mobile"]`, `"devices":["desktop"]`).Replace(c1JSON)
	cpSame(t, r.Body, ids, c1JSON)
	r = cpDo(t, s, "GET", cpCampaign(c1), A, nil, nil)
	cpETag(t, r, "2")
	cpSame(t, r.Body, ids, c1JSON)
	// A stale If-Match is a 409 and changes nothing.
	cp409(t, cpDo(t, s, "PATCH", cpCampaign(c1), A, `{"name":"stale"}`, map[string]string{"If-Match": `"1"`}))
	// An update that changes nothing keeps the version.
	r = cpDo(t, s, "PATCH", cpCampaign(c1), A, `{"name":"Spring sale 2"}`, nil)
	cpStatus(t, r, 200)
	cpETag(t, r, "2")

	// Billing contact.
	r = cpDo(t, s, "PUT", cpCampaign(c1)+"/billing-contact", A, map[string]string{"billingContactId": contact1}, map[string]string{"If-Match": `"2"`})
	cpStatus(t, r, 200)
	cpETag(t, r, "3")
	c1JSON = strings.Replace(c1JSON, `"billingContactId":null`, `"billingContactId":"<contact1>"`, 1)
	cpSame(t, r.Body, ids, c1JSON)
	// Unlinking the contact from the vendor leaves the campaign as it is.
	cpStatus(t, cpDo(t, s, "DELETE", "/public/v1/billing-service/vendors/v-1/vendor-billing-contact/"+contact1, A, nil, nil), 204)
	r = cpDo(t, s, "GET", cpCampaign(c1), A, nil, nil)
	cpETag(t, r, "3")
	cpSame(t, r.Body, ids, c1JSON)

	// Two concurrent updates with the version read: one 200, one 409.
	for round := 0; round < 3; round++ {
		r := cpDo(t, s, "GET", cpCampaign(c4), A, nil, nil)
		etag := r.Header.Get("ETag")
		statuses := make([]int, 2)
		var wg sync.WaitGroup
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = cpDo(t, s, "PATCH", cpCampaign(c4), A, fmt.Sprintf(`{"name":"round %d writer %d"}`, round, i), map[string]string{"If-Match": etag}).Status
			}()
		}
		wg.Wait()
		sort.Ints(statuses)
		if statuses[0] != 200 || statuses[1] != 409 {
			t.Fatalf("round %d: statuses %v, want one 200 and one 409", round, statuses)
		}
	}
	cpETag(t, cpDo(t, s, "GET", cpCampaign(c4), A, nil, nil), "4")

	// Bids: product, keyword (normalised), category (no product of the
	// vendor is in it: not eligible).
	r = cpDo(t, s, "POST", cpBids(c1), A, `{"targetType":"product","target":"p-1","bidAmount":0.35}`, nil)
	cpStatus(t, r, 201)
	cpETag(t, r, "1")
	b1 := cpID(t, r)
	ids[b1] = "<b1>"
	if loc := r.Header.Get("Location"); loc != cpBids(c1)+"/"+b1 {
		t.Errorf("Location %q", loc)
	}
	b1JSON := `{"id":"<b1>","campaignId":"<c1>","targetType":"product","target":"p-1","bidAmount":0.35,"isActive":true,
		"isEligible":true,"ineligibleReason":null,"ineligibleMessage":null,"createdAt":"<now>","updatedAt":"<now>"}`
	cpSame(t, r.Body, ids, b1JSON)
	r = cpDo(t, s, "POST", cpBids(c1), A, `{"targetType":"keyword","target":"  Running   SHOES ","bidAmount":1,"isActive":false}`, nil)
	cpStatus(t, r, 201)
	b2 := cpID(t, r)
	ids[b2] = "<b2>"
	b2JSON := `{"id":"<b2>","campaignId":"<c1>","targetType":"keyword","target":"running shoes","bidAmount":1,"isActive":false,
		"isEligible":true,"ineligibleReason":null,"ineligibleMessage":null,"createdAt":"<now>","updatedAt":"<now>"}`
	cpSame(t, r.Body, ids, b2JSON)
	r = cpDo(t, s, "POST", cpBids(c1), A, `{"targetType":"category","target":"shoes","bidAmount":0.000001}`, nil)
	cpStatus(t, r, 201)
	b3 := cpID(t, r)
	ids[b3] = "<b3>"
	r = cpDo(t, s, "GET", cpBids(c1)+"/"+b1, A, nil, nil)
	cpStatus(t, r, 200)
	cpETag(t, r, "1")
	cpSame(t, r.Body, ids, b1JSON)
	if got := cpPages(t, s, cpBids(c1), A, "bids", "id", 2); fmt.Sprint(got) != fmt.Sprint([]string{b1, b2, b3}) {
		t.Fatalf("bids %v", got)
	}
	r = cpDo(t, s, "GET", cpBids(c1), A, nil, nil)
	cpStatus(t, r, 200)
	cpSame(t, r.Body, ids, `{"hasMore":false,"nextPage":null,"bids":[`+b1JSON+`,`+b2JSON+`,
		{"id":"<b3>","campaignId":"<c1>","targetType":"category","target":"shoes","bidAmount":0.000001,"isActive":true,
		 "isEligible":false,"ineligibleReason":"no_active_product",
		 "ineligibleMessage":"vendor v-1 has no active product in category shoes or below it","createdAt":"<now>","updatedAt":"<now>"}]}`)
	// Update a bid.
	r = cpDo(t, s, "PATCH", cpBids(c1)+"/"+b2, A, `{"bidAmount":"1.25","isActive":true}`, nil)
	expect422Typed(t, r, "body.bidAmount:decimal_type")
	r = cpDo(t, s, "PATCH", cpBids(c1)+"/"+b2, A, `{"bidAmount":1.25,"isActive":true}`, map[string]string{"If-Match": `"1"`})
	cpStatus(t, r, 200)
	cpETag(t, r, "2")
	b2JSON = strings.NewReplacer(`"bidAmount":1,"isActive":false`, `"bidAmount":1.25,"isActive":true`).Replace(b2JSON)
	cpSame(t, r.Body, ids, b2JSON)
	cp409(t, cpDo(t, s, "PATCH", cpBids(c1)+"/"+b2, A, `{"bidAmount":2}`, map[string]string{"If-Match": `"1"`}))
	// Delete a bid: 204, then it is gone.
	cp409(t, cpDo(t, s, "DELETE", cpBids(c1)+"/"+b3, A, nil, map[string]string{"If-Match": `"7"`}))
	r = cpDo(t, s, "DELETE", cpBids(c1)+"/"+b3, A, nil, map[string]string{"If-Match": `"1"`})
	cpStatus(t, r, 204)
	if len(r.Body) != 0 {
		t.Errorf("204 with a body: %q", r.Body)
	}
	cp404(t, cpDo(t, s, "GET", cpBids(c1)+"/"+b3, A, nil, nil))
	cp404(t, cpDo(t, s, "DELETE", cpBids(c1)+"/"+b3, A, nil, nil))
	cp404(t, cpDo(t, s, "PATCH", cpBids(c1)+"/"+b3, A, `{"bidAmount":1}`, nil))

	// Restart: a second process on the same Kafka rebuilds everything.
	s2 := startSystem(t, cfg)
	r = cpDo(t, s2, "GET", cpCampaign(c1), A, nil, nil)
	cpStatus(t, r, 200)
	cpETag(t, r, "3")
	cpSame(t, r.Body, ids, c1JSON)
	cpETag(t, cpDo(t, s2, "GET", cpCampaign(c4), A, nil, nil), "4")
	if got := cpPages(t, s2, cpVendor("v-1"), A, "campaigns", "id", 2); fmt.Sprint(got) != fmt.Sprint([]string{c1, c2, c3}) {
		t.Fatalf("rebuilt v-1 campaigns %v", got)
	}
	r = cpDo(t, s2, "GET", cpBids(c1)+"/"+b2, A, nil, nil)
	cpETag(t, r, "2")
	cpSame(t, r.Body, ids, b2JSON)
	if got := cpPages(t, s2, cpBids(c1), A, "bids", "id", 1); fmt.Sprint(got) != fmt.Sprint([]string{b1, b2}) {
		t.Fatalf("rebuilt bids %v", got)
	}
	// The rebuilt process still enforces one bid per target.
	expect422Typed(t, cpDo(t, s2, "POST", cpBids(c1), A, `{"targetType":"keyword","target":"running shoes","bidAmount":1}`, nil), "body.target:value_error")
}

// TestCampaignsRejected: every validation rule answers 422 with its loc,
// unknown ids 404, and marketplace B can neither see nor change anything
// of A on any route.
func TestCampaignsRejected(t *testing.T) {
	s, _ := cpStart(t)
	A := s.AdvancedKey
	_, contact2 := cpFixture(t, s, A)
	r := cpDo(t, s, "POST", cpVendor("v-1"), A, cpSpring, nil)
	cpStatus(t, r, 201)
	c1 := cpID(t, r)
	r = cpDo(t, s, "POST", cpBids(c1), A, `{"targetType":"product","target":"p-1","bidAmount":1}`, nil)
	cpStatus(t, r, 201)
	b1 := cpID(t, r)
	r = cpDo(t, s, "POST", cpVendor("v-1"), A, `{"name":"Auto","type":"automated","dailyBudget":10}`, nil)
	cpStatus(t, r, 201)
	auto := cpID(t, r)
	r = cpDo(t, s, "POST", cpVendor("v-1"), A, `{"name":"Other","type":"listings","dailyBudget":10}`, nil)
	cpStatus(t, r, 201)
	other := cpID(t, r)

	// The full 422 body of one request.
	r = cpDo(t, s, "POST", cpVendor("v-1"), A, `{"type":"video","dailyBudget":0}`, nil)
	cpStatus(t, r, 422)
	cpSame(t, r.Body, nil, `{"detail":[
		{"loc":["body","name"],"msg":"Field required","type":"missing"},
		{"loc":["body","type"],"msg":"Input should be 'listings', 'banners' or 'automated'","type":"enum"},
		{"loc":["body","dailyBudget"],"msg":"Input should be greater than 0","type":"greater_than"}]}`)

	// Campaign create rules.
	create := map[string][]string{
		``:                               {"body:missing"},
		`[]`:                             {"body:type_error"},
		`{"name":"a","type":"listings"}`: {"body.dailyBudget:missing"},
		`{"name":1,"type":"listings","dailyBudget":1}`:                                                                       {"body.name:type_error"},
		`{"name":"","type":"listings","dailyBudget":1}`:                                                                      {"body.name:string_too_short"},
		`{"name":"` + strings.Repeat("n", 256) + `","type":"listings","dailyBudget":1}`:                                      {"body.name:string_too_long"},
		`{"name":"a","type":"automated","totalBudget":1}`:                                                                    {"body.dailyBudget:missing"},
		`{"name":"a","type":"listings","dailyBudget":-1,"totalBudget":0}`:                                                    {"body.dailyBudget:greater_than", "body.totalBudget:greater_than"},
		`{"name":"a","type":"listings","dailyBudget":"1"}`:                                                                   {"body.dailyBudget:decimal_type"},
		`{"name":"a","type":"listings","dailyBudget":0.0000001}`:                                                             {"body.dailyBudget:decimal_max_places"},
		`{"name":"a","type":"listings","dailyBudget":1000000001}`:                                                            {"body.dailyBudget:less_than_equal"},
		`{"name":"a","type":"listings","dailyBudget":11,"totalBudget":10}`:                                                   {"body.dailyBudget:value_error"},
		`{"name":"a","type":"listings","dailyBudget":1,"maxBid":1}`:                                                          {"body.maxBid:value_error"},
		`{"name":"a","type":"listings","dailyBudget":1,"chargeType":"CPA"}`:                                                  {"body.chargeType:enum"},
		`{"name":"a","type":"listings","dailyBudget":1,"startDate":"2026-01-01"}`:                                            {"body.startDate:datetime_parsing"},
		`{"name":"a","type":"listings","dailyBudget":1,"endDate":"tomorrow"}`:                                                {"body.endDate:datetime_parsing"},
		`{"name":"a","type":"listings","dailyBudget":1,"startDate":"2030-01-01T00:00:00Z","endDate":"2029-12-31T23:59:59Z"}`: {"body.endDate:value_error"},
		`{"name":"a","type":"listings","dailyBudget":1,"isActive":"yes"}`:                                                    {"body.isActive:type_error"},
		`{"name":"a","type":"listings","dailyBudget":1,"vendorId":"v-2"}`:                                                    {"body.vendorId:value_error"},
		`{"name":"a","type":"listings","dailyBudget":1,"targeting":{"placementIds":[0,9]}}`: {
			"body.targeting.placementIds.0:greater_than_equal", "body.targeting.placementIds.1:less_than_equal"},
		`{"name":"a","type":"listings","dailyBudget":1,"targeting":{"placementIds":[1.5]}}`:           {"body.targeting.placementIds:type_error"},
		`{"name":"a","type":"listings","dailyBudget":1,"targeting":{"devices":["desktop","tablet"]}}`: {"body.targeting.devices.1:enum"},
		`{"name":"a","type":"listings","dailyBudget":1,"targeting":{"locations":["85283473fffffff","8528347ffffffff","x"]}}`: {
			"body.targeting.locations.1:value_error", "body.targeting.locations.2:value_error"},
		`{"name":"a","type":"listings","dailyBudget":1,"targeting":{"segments":["seg-1","seg-404"]}}`: {"body.targeting.segments.1:not_found"},
	}
	for body, want := range create {
		expect422Typed(t, cpDo(t, s, "POST", cpVendor("v-1"), A, body, nil), want...)
	}
	cp404(t, cpDo(t, s, "POST", cpVendor("v-404"), A, `{"name":"a","type":"listings","dailyBudget":1}`, nil))
	cp404(t, cpDo(t, s, "GET", cpVendor("v-404"), A, nil, nil))

	// Campaign update rules (on the campaign as it would become).
	update := map[string][]string{
		`{"type":"banners"}`:                      {"body.type:value_error"},
		`{"dailyBudget":null,"totalBudget":null}`: {"body.dailyBudget:missing"},
		`{"dailyBudget":400}`:                     {"body.dailyBudget:value_error"},
		`{"startDate":"2099-06-01T00:00:00Z"}`:    {"body.endDate:value_error"},
		`{"startDate":null}`:                      {"body.startDate:datetime_type"},
		`{"name":null}`:                           {"body.name:string_type"},
		`{"isActive":null}`:                       {"body.isActive:bool_type"},
	}
	for body, want := range update {
		expect422Typed(t, cpDo(t, s, "PATCH", cpCampaign(c1), A, body, nil), want...)
	}
	expect422Typed(t, cpDo(t, s, "PATCH", cpCampaign(auto), A, `{"dailyBudget":null}`, nil), "body.dailyBudget:missing")
	cpETag(t, cpDo(t, s, "GET", cpCampaign(c1), A, nil, nil), "1")

	// Billing contact rules.
	bc := map[string][]string{
		`{}`:                          {"body.billingContactId:missing"},
		`{"billingContactId":" "}`:    {"body.billingContactId:string_too_short"},
		`{"billingContactId":"nope"}`: {"body.billingContactId:not_found"},
		`{"billingContactId":"` + contact2 + `"}`: {"body.billingContactId:value_error"}, // linked to v-2 only
	}
	for body, want := range bc {
		expect422Typed(t, cpDo(t, s, "PUT", cpCampaign(c1)+"/billing-contact", A, body, nil), want...)
	}

	// Bid rules.
	bids := map[string][]string{
		`{}`: {"body.targetType:missing", "body.target:missing", "body.bidAmount:missing"},
		`{"targetType":"brand","target":"x","bidAmount":1}`:                                  {"body.targetType:enum"},
		`{"targetType":"product","target":"p-404","bidAmount":1}`:                            {"body.target:not_found"},
		`{"targetType":"product","target":"p-9","bidAmount":1}`:                              {"body.target:value_error"}, // v-1 may not promote it
		`{"targetType":"product","target":"p-1","bidAmount":2}`:                              {"body.target:value_error"}, // one bid per target
		`{"targetType":"keyword","target":" \t ","bidAmount":1}`:                             {"body.target:string_too_short"},
		`{"targetType":"keyword","target":"` + strings.Repeat("k", 101) + `","bidAmount":1}`: {"body.target:string_too_long"},
		`{"targetType":"category","target":"","bidAmount":1}`:                                {"body.target:string_too_short"},
		`{"targetType":"category","target":"c","bidAmount":0}`:                               {"body.bidAmount:greater_than"},
		`{"targetType":"category","target":"c","bidAmount":1.0000001}`:                       {"body.bidAmount:decimal_max_places"},
		`{"targetType":"category","target":"c","bidAmount":1,"isActive":1}`:                  {"body.isActive:type_error"},
	}
	for body, want := range bids {
		expect422Typed(t, cpDo(t, s, "POST", cpBids(c1), A, body, nil), want...)
	}
	expect422Typed(t, cpDo(t, s, "POST", cpBids(auto), A, `{"targetType":"category","target":"c","bidAmount":1}`, nil), "path.campaign_id:value_error")
	for body, want := range map[string][]string{
		`{"target":"p-2"}`:         {"body.target:value_error"},
		`{"targetType":"keyword"}`: {"body.targetType:value_error"},
		`{"bidAmount":-0.5}`:       {"body.bidAmount:greater_than"},
		`{"bidAmount":null}`:       {"body.bidAmount:decimal_type"},
	} {
		expect422Typed(t, cpDo(t, s, "PATCH", cpBids(c1)+"/"+b1, A, body, nil), want...)
	}

	// Automated bids: limits and type.
	expect422Typed(t, cpDo(t, s, "GET", cpAuto+"/"+auto+"/bids?limit=101", A, nil, nil), "query.limit:less_than_equal")
	expect422Typed(t, cpDo(t, s, "GET", cpAuto+"/"+auto+"/bids?limit=0", A, nil, nil), "query.limit:greater_than_equal")
	expect422Typed(t, cpDo(t, s, "GET", cpAuto+"/"+auto+"/bids?limit=x", A, nil, nil), "query.limit:int_parsing")
	expect422Typed(t, cpDo(t, s, "GET", cpAuto+"/"+auto+"/bids?next_page=forged", A, nil, nil), "query.next_page:value_error")
	expect422Typed(t, cpDo(t, s, "GET", cpAuto+"/"+c1+"/bids", A, nil, nil), "path.campaign-id:value_error")

	// Malformed ids are 422 at their path parameter; unknown ones 404.
	expect422Typed(t, cpDo(t, s, "GET", cpCampaign("nope"), A, nil, nil), "path.campaign_id:uuid_parsing")
	expect422Typed(t, cpDo(t, s, "GET", cpBids(c1)+"/nope", A, nil, nil), "path.bid_id:uuid_parsing")
	expect422Typed(t, cpDo(t, s, "GET", cpAuto+"/nope/bids", A, nil, nil), "path.campaign-id:uuid_parsing")
	unknown := "0190a5b4-0000-7000-8000-000000000000"
	for _, rq := range [][3]string{
		{"GET", cpCampaign(unknown), ""},
		{"PATCH", cpCampaign(unknown), `{"name":"x"}`},
		{"PUT", cpCampaign(unknown) + "/billing-contact", `{"billingContactId":"x"}`},
		{"POST", cpBids(unknown), `{"targetType":"category","target":"c","bidAmount":1}`},
		{"GET", cpBids(unknown), ""},
		{"GET", cpBids(unknown) + "/" + b1, ""},
		{"GET", cpBids(c1) + "/" + unknown, ""},
		{"PATCH", cpBids(c1) + "/" + unknown, `{"bidAmount":1}`},
		{"DELETE", cpBids(c1) + "/" + unknown, ""},
		{"GET", cpAuto + "/" + unknown + "/bids", ""},
		// A bid through another campaign of the same vendor.
		{"GET", cpBids(other) + "/" + b1, ""},
		{"PATCH", cpBids(other) + "/" + b1, `{"bidAmount":9}`},
		{"DELETE", cpBids(other) + "/" + b1, ""},
	} {
		var body any
		if rq[2] != "" {
			body = rq[2]
		}
		cp404(t, cpDo(t, s, rq[0], rq[1], A, body, nil))
	}

	// Marketplace B sees and changes nothing of A's, on every route.
	B := otherMarketplace(t, s)
	for _, rq := range [][3]string{
		{"GET", cpVendor("v-1"), ""},
		{"POST", cpVendor("v-1"), `{"name":"a","type":"listings","dailyBudget":1}`},
		{"GET", cpCampaign(c1), ""},
		{"PATCH", cpCampaign(c1), `{"name":"stolen"}`},
		{"PUT", cpCampaign(c1) + "/billing-contact", `{"billingContactId":"x"}`},
		{"POST", cpBids(c1), `{"targetType":"category","target":"c","bidAmount":1}`},
		{"GET", cpBids(c1), ""},
		{"GET", cpBids(c1) + "/" + b1, ""},
		{"PATCH", cpBids(c1) + "/" + b1, `{"bidAmount":9}`},
		{"DELETE", cpBids(c1) + "/" + b1, ""},
		{"GET", cpAuto + "/" + auto + "/bids", ""},
	} {
		var body any
		if rq[2] != "" {
			body = rq[2]
		}
		cp404(t, cpDo(t, s, rq[0], rq[1], B, body, nil))
	}
	// B's own vendor v-1 has no campaigns; A's are untouched.
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", B, `{"vendors":[{"id":"v-1","name":"B's v-1"}]}`, nil), 200)
	r = cpDo(t, s, "GET", cpVendor("v-1"), B, nil, nil)
	cpStatus(t, r, 200)
	cpSame(t, r.Body, nil, `{"hasMore":false,"campaigns":[],"nextPage":null}`)
	r = cpDo(t, s, "GET", cpCampaign(c1), A, nil, nil)
	cpETag(t, r, "1")
	if m := cpObj(t, r.Body); m["name"] != "Spring sale" {
		t.Fatalf("A's campaign changed: %s", r.Body)
	}
	r = cpDo(t, s, "GET", cpBids(c1)+"/"+b1, A, nil, nil)
	cpETag(t, r, "1")
	// A cursor of A's list is foreign to B.
	r = cpDo(t, s, "GET", cpVendor("v-1")+"?limit=1", A, nil, nil)
	next, _ := cpObj(t, r.Body)["nextPage"].(string)
	expect422Typed(t, cpDo(t, s, "GET", cpVendor("v-1")+"?next_page="+url.QueryEscape(next), B, nil, nil), "query.next_page:value_error")
	// The marketplace key cannot use these routes.
	if st := cpDo(t, s, "GET", cpCampaign(c1), s.MarketplaceKey, nil, nil).Status; st != 403 {
		t.Errorf("marketplace key: %d", st)
	}
	if st := cpDo(t, s, "GET", cpAuto+"/"+auto+"/bids", "", nil, nil).Status; st != 401 {
		t.Errorf("no key: %d", st)
	}
}

// TestCampaignsFollowTheCatalog: deactivating or deleting a product takes
// it out of every campaign at once: manual bids on it show as not eligible,
// and automated campaigns bid on the catalog as it is now.
func TestCampaignsFollowTheCatalog(t *testing.T) {
	s, _ := cpStart(t)
	A := s.AdvancedKey
	cpFixture(t, s, A)
	r := cpDo(t, s, "POST", cpVendor("v-1"), A, `{"name":"Manual","type":"listings","dailyBudget":10}`, nil)
	cpStatus(t, r, 201)
	manual := cpID(t, r)
	r = cpDo(t, s, "POST", cpBids(manual), A, `{"targetType":"product","target":"p-1","bidAmount":0.5}`, nil)
	cpStatus(t, r, 201)
	bid := cpID(t, r)
	// A bid on an inactive product may be created; it is not eligible.
	r = cpDo(t, s, "POST", cpBids(manual), A, `{"targetType":"product","target":"p-3","bidAmount":0.5}`, nil)
	cpStatus(t, r, 201)
	if m := cpObj(t, r.Body); m["isEligible"] != false || m["ineligibleReason"] != "product_inactive" {
		t.Fatalf("bid on inactive product: %s", r.Body)
	}
	r = cpDo(t, s, "POST", cpVendor("v-1"), A, `{"name":"Auto","type":"automated","dailyBudget":50,"maxBid":0.8}`, nil)
	cpStatus(t, r, 201)
	auto := cpID(t, r)

	// The strategy: 2% of the daily budget (1.00), × quality score, capped by maxBid.
	autoPath := cpAuto + "/" + auto + "/bids"
	r = cpDo(t, s, "GET", autoPath+"?limit=2", A, nil, nil)
	cpStatus(t, r, 200)
	page := cpObj(t, r.Body)
	next, _ := page["nextPage"].(string)
	if page["hasMore"] != true || next == "" {
		t.Fatalf("page 1: %s", r.Body)
	}
	cpSame(t, r.Body, map[string]string{next: "<next>"}, `{"hasMore":true,"nextPage":"<next>","bids":[
		{"target":"p-1","bidAmount":0.8,"isActive":true},{"target":"p-2","bidAmount":0.5,"isActive":true}]}`)
	r = cpDo(t, s, "GET", autoPath+"?limit=2&next_page="+url.QueryEscape(next), A, nil, nil)
	cpStatus(t, r, 200)
	cpSame(t, r.Body, nil, `{"hasMore":false,"nextPage":null,"bids":[{"target":"p-3","bidAmount":0.8,"isActive":false}]}`)
	expect422Typed(t, cpDo(t, s, "GET", cpBids(manual)+"?next_page="+url.QueryEscape(next), A, nil, nil), "query.next_page:value_error")

	// Deactivate p-1: the manual bid is no longer eligible, the automated
	// bid on it inactive — on the next read.
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", A,
		`{"products":[{"id":"p-1","name":"Product 1","vendors":["v-1"],"active":false}]}`, nil), 200)
	r = cpDo(t, s, "GET", cpBids(manual)+"/"+bid, A, nil, nil)
	cpStatus(t, r, 200)
	if m := cpObj(t, r.Body); m["isActive"] != true || m["isEligible"] != false || m["ineligibleReason"] != "product_inactive" {
		t.Fatalf("bid on deactivated product: %s", r.Body)
	}
	r = cpDo(t, s, "GET", autoPath, A, nil, nil)
	cpSame(t, r.Body, nil, `{"hasMore":false,"nextPage":null,"bids":[
		{"target":"p-1","bidAmount":0.8,"isActive":false},{"target":"p-2","bidAmount":0.5,"isActive":true},{"target":"p-3","bidAmount":0.8,"isActive":false}]}`)

	// Reactivate p-1 but without v-1 among its vendors.
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", A,
		`{"products":[{"id":"p-1","name":"Product 1","vendors":["v-2"],"active":true}]}`, nil), 200)
	r = cpDo(t, s, "GET", cpBids(manual)+"/"+bid, A, nil, nil)
	if m := cpObj(t, r.Body); m["isEligible"] != false || m["ineligibleReason"] != "vendor_not_permitted" {
		t.Fatalf("bid on a product v-1 may no longer promote: %s", r.Body)
	}

	// Delete p-1 and p-3; add p-0 with a quality score.
	cpStatus(t, cpDo(t, s, "DELETE", "/public/v1/catalog-search-service/catalogs/products", A, `{"ids":["p-1","p-3"]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", A,
		`{"products":[{"id":"p-0","name":"Product 0","vendors":["v-1"],"active":true,"quality_score":0.25}]}`, nil), 200)
	r = cpDo(t, s, "GET", cpBids(manual), A, nil, nil)
	cpStatus(t, r, 200)
	var list struct {
		Bids []map[string]any `json:"bids"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil || len(list.Bids) != 2 {
		t.Fatalf("bids after delete: %s", r.Body)
	}
	for _, b := range list.Bids {
		if b["isEligible"] != false || b["ineligibleReason"] != "product_not_found" {
			t.Fatalf("bid on deleted product: %v", b)
		}
	}
	r = cpDo(t, s, "GET", autoPath, A, nil, nil)
	cpSame(t, r.Body, nil, `{"hasMore":false,"nextPage":null,"bids":[
		{"target":"p-0","bidAmount":0.25,"isActive":true},{"target":"p-2","bidAmount":0.5,"isActive":true}]}`)
	// The strategy follows the campaign: a new daily budget changes every bid.
	cpStatus(t, cpDo(t, s, "PATCH", cpCampaign(auto), A, `{"dailyBudget":10,"maxBid":null}`, nil), 200)
	r = cpDo(t, s, "GET", autoPath, A, nil, nil)
	cpSame(t, r.Body, nil, `{"hasMore":false,"nextPage":null,"bids":[
		{"target":"p-0","bidAmount":0.05,"isActive":true},{"target":"p-2","bidAmount":0.1,"isActive":true}]}`)
}
