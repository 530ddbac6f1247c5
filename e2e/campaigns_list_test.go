package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/testkit/testenv"
)

// Helpers of the marketplace-wide campaign list, the archive and the spend
// tests (cl*).

const clAll = cpBase + "/campaigns"

// clPages follows the marketplace-wide list with query (filters) and limit
// to its end and returns the ids, checking the {hasMore, campaigns,
// nextPage} shape.
func clPages(t *testing.T, s *system, key, query string, limit int) []string {
	t.Helper()
	out := []string{}
	next := ""
	for range 100 {
		u := clAll + "?limit=" + fmt.Sprint(limit)
		if query != "" {
			u += "&" + query
		}
		if next != "" {
			u += "&next_page=" + url.QueryEscape(next)
		}
		r := cpDo(t, s, "GET", u, key, nil, nil)
		cpStatus(t, r, 200)
		var page struct {
			HasMore   *bool             `json:"hasMore"`
			Campaigns *[]map[string]any `json:"campaigns"`
			NextPage  *string           `json:"nextPage"`
		}
		decodeJSONBody(t, r.Body, &page)
		if page.HasMore == nil || page.Campaigns == nil || len(cpObj(t, r.Body)) != 3 {
			t.Fatalf("list body must be {hasMore, campaigns, nextPage}: %s", r.Body)
		}
		if len(*page.Campaigns) > limit {
			t.Fatalf("page of %d, limit %d", len(*page.Campaigns), limit)
		}
		for _, c := range *page.Campaigns {
			out = append(out, c["id"].(string))
		}
		if !*page.HasMore {
			if page.NextPage != nil {
				t.Fatalf("last page with a nextPage: %s", r.Body)
			}
			return out
		}
		if page.NextPage == nil || len(*page.Campaigns) != limit {
			t.Fatalf("hasMore with nextPage %v and %d campaigns", page.NextPage, len(*page.Campaigns))
		}
		next = *page.NextPage
	}
	t.Fatal("the list does not end")
	return nil
}

var clArchivedRE = regexp.MustCompile(`"archivedAt":\s*"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"`)

// clNormalize is cpNormalize, with archivedAt (a current timestamp) as
// "<now>" and the spend's day (the marketplace's local day) as "<today>".
func clNormalize(t *testing.T, s *system, body []byte, ids map[string]string) []byte {
	t.Helper()
	body = bytes.Clone(body)
	body = clArchivedRE.ReplaceAllFunc(body, func(m []byte) []byte {
		at, err := time.Parse(time.RFC3339, string(clArchivedRE.FindSubmatch(m)[1]))
		if d := time.Since(at); err != nil || d < -time.Minute || d > 5*time.Minute {
			t.Errorf("archivedAt %s is not now", m)
		}
		return []byte(`"archivedAt":"<now>"`)
	})
	today := spend.DayOf(time.Now(), s.Marketplace.Location())
	body = bytes.ReplaceAll(body, []byte(`"day":"`+today+`"`), []byte(`"day":"<today>"`))
	return cpNormalize(t, body, ids)
}

// clGolden writes the exchange r as the golden file name: its archivedAt,
// createdAt and updatedAt checked to be now, then normalised as the wire
// golden files are (wireNorm: stand-in UUIDs and timestamps, so that the
// file validates against the OpenAPI document), the marketplace's day a
// stand-in date.
func clGolden(t *testing.T, s *system, name string, r response) {
	t.Helper()
	clNormalize(t, s, r.Body, nil)
	now := time.Now()
	n := &wireNorm{ids: map[string]string{}, now: now,
		fixed: map[string]string{spend.DayOf(now, s.Marketplace.Location()): "2000-01-01"}}
	r.Path = string(n.apply([]byte(r.Path)))
	r.Body = n.apply(r.Body)
	golden(t, name, r)
}

// TestCampaignsList: the marketplace-wide list, in creation order, paged,
// with every filter alone and combined; spend, remaining budgets, pacing
// and status reasons of campaigns in every state (spend set in Redis where
// the charge script keeps it, refusal hints included), as a golden file;
// the 422s of bad filters together with a bad limit, and cursors that do
// not belong to the list's filters.
func TestCampaignsList(t *testing.T) {
	s, _ := cpStart(t)
	// A marketplace where it is noon: the day of the spend below is the
	// list's today while the test runs, at whatever hour.
	s = ownMarketplace(t, s, "List Market", testenv.NoonZone(time.Now()))
	A, mp := s.AdvancedKey, s.Marketplace.ID
	cpFixture(t, s, A)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	ids := map[string]string{}
	mk := func(name, vendor, body string) string {
		t.Helper()
		id := auCampaign(t, s, vendor, body)
		ids[id] = "<" + name + ">"
		return id
	}
	const past = `"startDate":"2020-01-01T00:00:00Z"`
	spring := mk("spring", "v-1", `{"name":"Spring Sale","type":"listings","dailyBudget":10,"totalBudget":100,`+past+`}`)
	auBid(t, s, spring, "product", "p-1", "1")
	shoes := mk("shoes", "v-1", `{"name":"spring shoes","type":"banners","totalBudget":5,"isActive":false,`+past+`}`)
	winter := mk("winter", "v-2", `{"name":"Winter","type":"automated","dailyBudget":50,"startDate":"2099-01-01T00:00:00Z"}`)
	ete := mk("ete", "v-2", `{"name":"ÉTÉ promo","type":"listings","dailyBudget":1,`+past+`,"endDate":"2021-01-01T00:00:00Z"}`)
	autumn := mk("autumn", "v-1", `{"name":"Autumn SALE","type":"listings","dailyBudget":10,`+past+`}`)
	spent := mk("spent", "v-2", `{"name":"Total spent","type":"listings","totalBudget":5,`+past+`}`)
	auBid(t, s, spent, "category", "shoes", "1")
	today := mk("today", "v-2", `{"name":"Daily spent","type":"listings","dailyBudget":1,"totalBudget":50,`+past+`}`)
	auBid(t, s, today, "keyword", "boots", "1")
	hinted := mk("hinted", "v-1", `{"name":"Refused click","type":"listings","dailyBudget":2,`+past+`}`)
	auBid(t, s, hinted, "product", "p-2", "1")
	inactive := mk("inactive", "v-1", `{"name":"Inactive product","type":"listings","dailyBudget":2,`+past+`}`)
	auBid(t, s, inactive, "product", "p-3", "1")
	off := mk("off", "v-1", `{"name":"Bids off","type":"listings","dailyBudget":2,`+past+`}`)
	cpStatus(t, cpDo(t, s, "POST", cpBids(off), A, `{"targetType":"keyword","target":"x","bidAmount":1,"isActive":false}`, nil), 201)
	auto := mk("auto", "v-1", `{"name":"Automated","type":"automated","dailyBudget":50,`+past+`}`)
	empty := mk("empty", "v-2", `{"name":"No bids yet","type":"listings","dailyBudget":2,`+past+`}`)
	cpStatus(t, cpDo(t, s, "DELETE", cpCampaign(autumn), A, nil, nil), 200)
	all := []string{spring, shoes, winter, ete, autumn, spent, today, hinted, inactive, off, auto, empty}

	// Spend where the charge script keeps it, in the marketplace's day.
	day := spend.DayOf(time.Now(), s.Marketplace.Location())
	for _, sp := range []struct {
		campaign, day string
		micros        int64
	}{
		{spring, day, 100_000}, // 0.10 of a daily 10: on pace at any hour
		{spring, "2021-06-01", 900_000},
		{shoes, "2021-06-01", 1_000_000},
		{spent, "2021-06-01", 5_000_000},
		{today, day, 1_000_000},
		{hinted, day, 1_450_000},
	} {
		if err := spend.AddSpend(ctx, s.App.Redis, mp, sp.campaign, sp.day, sp.micros); err != nil {
			t.Fatal(err)
		}
	}
	// The refused click of docs/design/budgets.md: 1.45 spent of 2.00, a click of
	// 0.70 refused; the auction stops serving it at 2.15.
	if err := s.App.Redis.HSet(ctx, spend.SpendKey(mp, hinted), "!"+spend.DayField(day), 2_150_000).Err(); err != nil {
		t.Fatal(err)
	}

	// The whole list, one page: the golden wire shape.
	r := cpDo(t, s, "GET", clAll, A, nil, nil)
	cpStatus(t, r, 200)
	clGolden(t, s, "campaigns_list.json", r)
	if got := clPages(t, s, A, "", 100); !slices.Equal(got, all) {
		t.Fatalf("list %v, want %v", got, all)
	}
	// A campaign reads as it does in the list.
	r = cpDo(t, s, "GET", cpCampaign(hinted), A, nil, nil)
	cpStatus(t, r, 200)
	m := cpObj(t, r.Body)
	if m["statusReason"] != "out_of_daily_budget" || fmt.Sprint(m["spend"]) != "map[available:true day:"+day+" pacing:daily_budget_spent remainingDailyBudget:0.55 remainingMonthlyBudget:<nil> remainingTotalBudget:<nil> remainingWeeklyBudget:<nil> thisMonth:1.45 thisWeek:1.45 today:1.45 total:1.45]" {
		t.Errorf("a campaign with a refused click: %s", r.Body)
	}
	// So does it in its vendor's list.
	r = cpDo(t, s, "GET", cpVendor("v-2")+"?limit=1", A, nil, nil)
	cpStatus(t, r, 200)
	if !strings.Contains(string(r.Body), `"statusReason":"scheduled"`) || !strings.Contains(string(r.Body), `"spend":{"day":"`+day+`","today":0,"thisWeek":0,"thisMonth":0,"total":0,`) {
		t.Errorf("the vendor list: %s", r.Body)
	}

	// Filters, alone and together, at several page sizes.
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"vendor_id=v-1", []string{spring, shoes, autumn, hinted, inactive, off, auto}},
		{"vendor_id=v-404", nil},
		{"status=running", []string{spring, spent, today, hinted, inactive, off, auto, empty}},
		{"status=paused,scheduled", []string{shoes, winter}},
		{"status=ended&status=archived", []string{ete, autumn}},
		{"type=automated", []string{winter, auto}},
		{"type=listings,banners&vendor_id=v-2", []string{ete, spent, today, empty}},
		{"name=sale", []string{spring, autumn}},
		{"name=SPRING", []string{spring, shoes}},
		{"name=%C3%A9t%C3%A9", []string{ete}},
		{"name=+spent", []string{spent, today}},
		{"vendor_id=v-1&type=listings&status=running&name=i", []string{spring, hinted, inactive, off}},
	} {
		for _, limit := range []int{1, 2, 50} {
			if got := clPages(t, s, A, tc.query, limit); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("%s (limit %d): %v, want %v", tc.query, limit, cpNames(got, ids), cpNames(tc.want, ids))
			}
		}
	}

	// A cursor continues only the list of its own filters.
	r = cpDo(t, s, "GET", clAll+"?limit=1&status=running", A, nil, nil)
	cpStatus(t, r, 200)
	next := cpObj(t, r.Body)["nextPage"].(string)
	cpStatus(t, cpDo(t, s, "GET", clAll+"?limit=1&status=running&next_page="+url.QueryEscape(next), A, nil, nil), 200)
	cpStatus(t, cpDo(t, s, "GET", clAll+"?limit=1&status=Running,running&next_page="+url.QueryEscape(next), A, nil, nil), 200)
	for _, q := range []string{"", "status=paused", "status=running&name=x"} {
		expect422Typed(t, cpDo(t, s, "GET", clAll+"?"+q+"&next_page="+url.QueryEscape(next), A, nil, nil), "query.next_page:value_error")
	}
	expect422Typed(t, cpDo(t, s, "GET", cpVendor("v-1")+"?next_page="+url.QueryEscape(next), A, nil, nil), "query.next_page:value_error")
	// Bad filters and a bad limit: one 422 naming them all.
	r = cpDo(t, s, "GET", clAll+"?status=live&type=video&vendor_id=&name=%FF&limit=0&next_page=forged", A, nil, nil)
	expect422Typed(t, r, "query.status:enum", "query.type:enum", "query.vendor_id:string_too_short", "query.name:string_unicode", "query.limit:greater_than_equal")
	golden(t, "campaigns_list_422.json", r)
	expect422Typed(t, cpDo(t, s, "GET", clAll+"?limit=101&name="+strings.Repeat("x", 256), A, nil, nil), "query.limit:less_than_equal", "query.name:string_too_long")
	expect422Typed(t, cpDo(t, s, "GET", clAll+"?next_page=forged", A, nil, nil), "query.next_page:value_error")
	// A query string that does not decode is not ignored.
	expect422Typed(t, cpDo(t, s, "GET", clAll+"?name=%ZZ&status=live", A, nil, nil), "query:value_error", "query.status:enum")

	// Another marketplace sees none of it.
	B := otherMarketplace(t, s)
	r = cpDo(t, s, "GET", clAll, B, nil, nil)
	cpStatus(t, r, 200)
	sameJSON(t, r.Body, `{"hasMore":false,"campaigns":[],"nextPage":null}`)
	// A marketplace key is not enough.
	cpStatus(t, cpDo(t, s, "GET", clAll, s.MarketplaceKey, nil, nil), 403)
}

// cpNames names ids for messages.
func cpNames(list []string, names map[string]string) []string {
	out := make([]string, len(list))
	for i, id := range list {
		out[i] = names[id]
	}
	return out
}

// TestCampaignsArchive: DELETE archives. The campaign wins an auction
// before, none after; the click on the ad it won before is accepted and
// charged; the answer is the archived campaign, the same for every DELETE
// after it (whatever If-Match says); neither the campaign nor its bids can
// be changed; it stays readable and listed; campaign.archived reaches a
// subscribed webhook once.
func TestCampaignsArchive(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "5000/1s", "5000/1s"
	cfg.WebhookAllowLoopback = true
	cfg.WebhookRetryBase = 100 * time.Millisecond
	cfg.SpendReadTimeout = 10 * time.Second // the test compares spend: a loaded machine must not drop it
	s := startSystem(t, cfg)
	A := s.AdvancedKey
	contact, _ := cpFixture(t, s, A)
	rc := newHookReceiver(t)
	cpStatus(t, cpDo(t, s, "POST", bwWhPath, A, fmt.Sprintf(`{"url": %q, "eventTypes": ["campaign.archived"]}`, rc.srv.URL+"/hooks"), nil), 201)

	c := auCampaign(t, s, "v-1", `{"name":"Going","type":"listings","dailyBudget":10,"totalBudget":20,"startDate":"2020-01-01T00:00:00Z"}`)
	ids := map[string]string{c: "<c>"}
	r := cpDo(t, s, "POST", cpBids(c), A, `{"targetType":"product","target":"p-1","bidAmount":1}`, nil)
	cpStatus(t, r, 201)
	bid := cpID(t, r)
	ids[bid] = "<bid>"
	win := func() []auWinner {
		res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p-1"]}}]}`)
		if len(res) != 1 {
			t.Fatalf("results %+v", res)
		}
		return res[0].Winners
	}
	before := win()
	if len(before) != 1 || before[0].CampaignID != c {
		t.Fatalf("winners before the archive: %+v", before)
	}

	cp409(t, cpDo(t, s, "DELETE", cpCampaign(c), A, nil, map[string]string{"If-Match": `"7"`}))
	r = cpDo(t, s, "DELETE", cpCampaign(c), A, nil, map[string]string{"If-Match": `"1"`})
	cpStatus(t, r, 200)
	cpETag(t, r, "2")
	archived := r.Body
	clGolden(t, s, "campaigns_archived.json", r)
	// At once: no auction serves it.
	if after := win(); len(after) != 0 {
		t.Fatalf("winners after the archive: %+v", after)
	}
	// Again, with any If-Match: the same answer.
	for _, hdr := range []map[string]string{nil, {"If-Match": `"1"`}, {"If-Match": `"2"`}, {"If-Match": `"9"`}} {
		r := cpDo(t, s, "DELETE", cpCampaign(c), A, nil, hdr)
		cpStatus(t, r, 200)
		cpETag(t, r, "2")
		sameJSON(t, r.Body, string(archived))
	}
	r = cpDo(t, s, "GET", cpCampaign(c), A, nil, nil)
	cpStatus(t, r, 200)
	cpETag(t, r, "2")
	sameJSON(t, r.Body, string(archived))
	// Read-only, it and its bids.
	for _, w := range []struct{ method, path, body string }{
		{"PATCH", cpCampaign(c), `{"isActive":true}`},
		{"PUT", cpCampaign(c) + "/billing-contact", `{"billingContactId":"` + contact + `"}`},
		{"POST", cpBids(c), `{"targetType":"keyword","target":"x","bidAmount":1}`},
		{"PATCH", cpBids(c) + "/" + bid, `{"bidAmount":2}`},
		{"DELETE", cpBids(c) + "/" + bid, ``},
	} {
		expect422Typed(t, cpDo(t, s, w.method, w.path, A, w.body, nil), "path.campaign_id:value_error")
	}
	r = cpDo(t, s, "GET", cpBids(c)+"/"+bid, A, nil, nil)
	cpStatus(t, r, 200)
	cpETag(t, r, "1")
	if got := clPages(t, s, A, "status=archived", 10); !slices.Equal(got, []string{c}) {
		t.Errorf("archived campaigns %v", got)
	}
	if got := clPages(t, s, A, "status=running", 10); len(got) != 0 {
		t.Errorf("running campaigns %v", got)
	}
	// Unknown, malformed, another marketplace's.
	cp404(t, cpDo(t, s, "DELETE", cpCampaign("0193a000-0000-7000-8000-000000000000"), A, nil, nil))
	expect422Typed(t, cpDo(t, s, "DELETE", cpCampaign("nope"), A, nil, nil), "path.campaign_id:uuid_parsing")
	cp404(t, cpDo(t, s, "DELETE", cpCampaign(c), otherMarketplace(t, s), nil, nil))

	// The ad it won before the archive: its click is accepted and charged.
	bcSendClicks(t, s, []bcClick{{ID: "click-before", OccurredAt: time.Now().UTC().Format(time.RFC3339Nano), OpaqueUserID: "u-1", ResolvedBidID: before[0].ResolvedBidID}})
	testenv.Eventually(t, 60*time.Second, func() error {
		m := cpObj(t, cpDo(t, s, "GET", cpCampaign(c), A, nil, nil).Body)
		sp, _ := m["spend"].(map[string]any)
		if total, _ := sp["total"].(float64); total <= 0 {
			return fmt.Errorf("spend %v", m["spend"])
		}
		if n := s.count(t, "SELECT count() FROM charges WHERE marketplace_id = ? AND campaign_id = ?", s.Marketplace.ID, c); n != 1 {
			return fmt.Errorf("%d charges of the click on the ad served before the archive", n)
		}
		return nil
	})

	// campaign.archived, once, with the archived campaign.
	testenv.Eventually(t, 15*time.Second, func() error {
		if n := len(rc.ofType("campaign.archived")); n != 1 {
			return fmt.Errorf("%d campaign.archived", n)
		}
		return nil
	})
	ev := cpObj(t, rc.ofType("campaign.archived")[0].msg.Data)
	want := cpObj(t, archived)
	for _, k := range []string{"id", "status", "statusReason", "archivedAt", "updatedAt", "name"} {
		if fmt.Sprint(ev[k]) != fmt.Sprint(want[k]) {
			t.Errorf("event data %s = %v, the API answered %v", k, ev[k], want[k])
		}
	}
	time.Sleep(time.Second) // a second delivery would have come by now
	if n := len(rc.ofType("campaign.archived")); n != 1 {
		t.Errorf("%d campaign.archived deliveries", n)
	}
}

// TestCampaignsSpendRedisFrozen: while Redis hangs, campaign reads answer
// within a second, with their spend unavailable (and the status reasons
// that need none); once it answers again, so does spend.
func TestCampaignsSpendRedisFrozen(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	rs := testenv.OwnRedis(t)
	cfg := env.Config(t, brokers)
	cfg.RedisAddr = rs.Addr
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "5000/1s", "5000/1s"
	s := startSystem(t, cfg)
	A := s.AdvancedKey
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", A, `{"vendors":[{"id":"v-1","name":"Vendor 1"}]}`, nil), 200)
	// An active product of the vendor: its keyword bid is eligible (serving).
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", A,
		`{"products":[{"id":"p-1","name":"Boots","vendors":["v-1"],"active":true}]}`, nil), 200)
	c := auCampaign(t, s, "v-1", `{"name":"Serving","type":"listings","dailyBudget":10,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, c, "keyword", "boots", "1")
	auCampaign(t, s, "v-1", `{"name":"Paused","type":"listings","dailyBudget":10,"isActive":false}`)
	get := func(path string) (response, time.Duration) {
		start := time.Now()
		r := cpDo(t, s, "GET", path, A, nil, nil)
		return r, time.Since(start)
	}
	r, _ := get(cpCampaign(c))
	cpStatus(t, r, 200)
	if m := cpObj(t, r.Body); m["statusReason"] != "serving" {
		t.Fatalf("before the freeze: %s", r.Body)
	}

	if err := rs.Freeze(); err != nil {
		t.Fatal(err)
	}
	defer rs.Thaw()
	for i := range 5 {
		for _, path := range []string{cpCampaign(c), clAll} {
			r, took := get(path)
			if r.Status != 200 || took > time.Second {
				t.Fatalf("GET %s %d while Redis is frozen: %d after %s: %s", path, i, r.Status, took.Round(time.Millisecond), r.Body)
			}
			body := string(r.Body)
			if !strings.Contains(body, `"statusReason":"spend_unavailable"`) ||
				!strings.Contains(body, `"today":null,"thisWeek":null,"thisMonth":null,"total":null,"remainingDailyBudget":null,"remainingWeeklyBudget":null,"remainingMonthlyBudget":null,"remainingTotalBudget":null,"pacing":null,"available":false}`) {
				t.Fatalf("GET %s while Redis is frozen: %s", path, body)
			}
			if path == clAll && !strings.Contains(body, `"statusReason":"paused"`) {
				t.Fatalf("the paused campaign while Redis is frozen: %s", body)
			}
		}
	}
	rs.Thaw()
	testenv.Eventually(t, 15*time.Second, func() error {
		r, _ := get(cpCampaign(c))
		if m := cpObj(t, r.Body); m["statusReason"] != "serving" {
			return fmt.Errorf("after the thaw: %s", r.Body)
		}
		return nil
	})
}
