package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

var (
	nextLink  = regexp.MustCompile(`href="/console/campaigns\?([^"]+)" rel="next"`)
	chartData = regexp.MustCompile(`(?s)<script type="application/json" id="chart-data">(.*?)</script>`)
)

// chart is a chart of a page's chart data: its times (Unix seconds), zone
// and lines.
type chart struct {
	X      []int64 `json:"x"`
	TZ     string  `json:"tz"`
	Series []struct {
		Label  string     `json:"label"`
		Values []*float64 `json:"values"`
	} `json:"series"`
}

// theChart is the one chart of a page.
func theChart(t *testing.T, body string) chart {
	t.Helper()
	m := chartData.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no chart data")
	}
	var charts []chart
	if err := json.Unmarshal([]byte(m[1]), &charts); err != nil || len(charts) != 1 {
		t.Fatalf("chart data: %v %s", err, m[1])
	}
	return charts[0]
}

// TestCampaignList: the operators' list of the marketplace's campaigns,
// filtered and paged as the API's list is, with each campaign's status
// reason and spend (unavailable when it cannot be read, never a 500); a
// vendor user's list is its own vendor's, whatever the query says.
func TestCampaignList(t *testing.T) {
	s := startAtNoon(t) // today's spend stays the page's while the test runs
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alpha := s.campaign(t, "v-1", "Alpha shoes")
	s.campaign(t, "v-1", "Beta hats")
	gamma := s.campaign(t, "v-2", "Gamma shoes")
	old := s.campaign(t, "v-2", "Old socks")
	if _, _, err := s.a.Campaigns.ArchiveCampaign(ctx, s.mp.ID, old.ID, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 55 { // more than a page
		s.campaign(t, "v-1", "Filler "+string(rune('a'+i/26))+string(rune('a'+i%26)))
	}
	day := spend.DayOf(time.Now(), s.mp.Location())
	if err := spend.AddSpend(ctx, s.a.Redis, s.mp.ID, alpha.ID, day, 2_500_000); err != nil {
		t.Fatal(err)
	}
	admin := s.admin(t)

	for _, tc := range []struct {
		name, query string
		status      int
		want, not   []string
	}{
		{"every campaign, the first page", "", 200, []string{"Alpha shoes", "Gamma shoes", "Old socks", "2.50 / 10.00", "no_bids", `rel="next"`}, nil},
		{"empty fields are no filter", "vendor_id=&name=&status=&type=", 200, []string{"Alpha shoes", "Gamma shoes"}, nil},
		{"by vendor", "vendor_id=v-2", 200, []string{"Gamma shoes", "Old socks"}, []string{"Alpha shoes", `rel="next"`}},
		{"archived", "status=archived", 200, []string{"Old socks", "archived"}, []string{"Gamma shoes", "Alpha shoes"}},
		{"by name, any case", "name=SHOES", 200, []string{"Alpha shoes", "Gamma shoes"}, []string{"Beta hats", "Old socks"}},
		{"name and vendor", "name=shoes&vendor_id=v-1", 200, []string{"Alpha shoes"}, []string{"Gamma shoes"}},
		{"an unknown vendor", "vendor_id=v-404", 200, []string{"No campaign matches these filters"}, []string{"Alpha shoes"}},
		{"a bad status", "status=sleeping", 422, []string{"Status: Input should be"}, []string{"Alpha shoes"}},
		{"a bad type", "type=video", 422, []string{"Type: Input should be"}, nil},
		{"a name too long", "name=" + strings.Repeat("x", 256), 422, []string{"Name: String should have at most 255"}, nil},
		{"a forged cursor", "cursor=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 422, []string{"start again from the first page"}, []string{"Alpha shoes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := admin.do("GET", "/console/campaigns?"+tc.query, nil)
			body := html.UnescapeString(r.body)
			if r.status != tc.status {
				t.Fatalf("%d, want %d", r.status, tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("lacks %q", w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(body, w) {
					t.Errorf("has %q", w)
				}
			}
		})
	}

	// The pages, through the next links: every campaign once.
	seen := map[string]int{}
	q, pages, allCursor := "", 0, ""
	for pages < 5 {
		r := admin.do("GET", "/console/campaigns?"+q, nil)
		if r.status != 200 {
			t.Fatalf("page %d: %d", pages, r.status)
		}
		for _, m := range regexp.MustCompile(`href="/console/campaigns/([0-9a-f-]{36})"`).FindAllStringSubmatch(r.body, -1) {
			seen[m[1]]++
		}
		pages++
		m := nextLink.FindStringSubmatch(r.body)
		if m == nil {
			break
		}
		q = html.UnescapeString(m[1])
		if allCursor == "" {
			v, _ := url.ParseQuery(q)
			allCursor = v.Get("cursor")
		}
	}
	if pages != 2 || len(seen) != 59 {
		t.Fatalf("%d pages, %d campaigns, want 2 and 59", pages, len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("campaign %s listed %d times", id, n)
		}
	}
	// A cursor continues the list of its own filters only.
	first := admin.do("GET", "/console/campaigns?vendor_id=v-1", nil)
	m := nextLink.FindStringSubmatch(first.body)
	if m == nil {
		t.Fatal("no next link of v-1's campaigns")
	}
	cur, _ := url.ParseQuery(html.UnescapeString(m[1]))
	if r := admin.do("GET", "/console/campaigns?vendor_id=v-2&cursor="+url.QueryEscape(cur.Get("cursor")), nil); r.status != 422 {
		t.Fatalf("a cursor of other filters: %d", r.status)
	}

	// Spend that cannot be read: the list and the campaign's page say so.
	if err := s.a.Redis.HSet(ctx, spend.SpendKey(s.mp.ID, gamma.ID), spend.DayField(day), "not a number").Err(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/console/campaigns?vendor_id=v-2", "/console/campaigns/" + gamma.ID} {
		r := admin.do("GET", path, nil)
		if r.status != 200 || !strings.Contains(r.body, `<span class="unavailable">unavailable</span>`) {
			t.Fatalf("%s with unreadable spend: %d", path, r.status)
		}
	}
	if err := s.a.Redis.HDel(ctx, spend.SpendKey(s.mp.ID, gamma.ID), spend.DayField(day)).Err(); err != nil {
		t.Fatal(err)
	}

	// A vendor user: its own campaigns, whatever the query names.
	vu := s.vendorUser(t, "v-1", "list@one.test")
	for _, q := range []string{"", "vendor_id=v-2", "name=shoes&vendor_id=v-2"} {
		r := vu.do("GET", "/console/campaigns?"+q, nil)
		if r.status != 200 || !strings.Contains(r.body, "Alpha shoes") || strings.Contains(r.body, "Gamma shoes") || strings.Contains(r.body, `id="vendor_id"`) {
			t.Fatalf("vendor user, %q: %d", q, r.status)
		}
	}
	// The cursor of the whole marketplace's list does not continue a vendor's.
	if r := vu.do("GET", "/console/campaigns?cursor="+url.QueryEscape(allCursor), nil); r.status != 422 {
		t.Fatalf("vendor user with the cursor of every campaign: %d", r.status)
	}
	for path, want := range map[string]int{"/console/campaigns/" + gamma.ID: 404, "/console/campaigns/" + alpha.ID: 200, "/console/explain": 403} {
		if r := vu.do("GET", path, nil); r.status != want {
			t.Errorf("vendor user, %s: %d, want %d", path, r.status, want)
		}
	}
}

// TestCampaignPacing: a campaign's page shows its spend against its
// budgets, its status reason and today's spend through the day from the
// charges, against the daily budget's even spread and pacing limit.
func TestCampaignPacing(t *testing.T) {
	s := startAtNoon(t) // today's spend stays the page's while the test runs
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cp := s.campaign(t, "v-1", "Paced")
	now := time.Now().UTC()
	loc := s.mp.Location()
	// 0.35 of the daily 10.00: on pace at any hour, the pacing limit
	// running an hour ahead of the even spread (at least 10.00 / 25 at the
	// local midnight of a 25-hour day).
	if err := spend.AddSpend(ctx, s.a.Redis, s.mp.ID, cp.ID, spend.DayOf(now, loc), 350_000); err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(bcancel)
	b, err := s.a.ClickHouse.PrepareBatch(bctx, `INSERT INTO charges_raw (marketplace_id, interaction_id, timestamp, timestamp_ms, day_local, kind,
	event_id, currency_code, campaign_id, product_id, vendor_id, charge_type, price_micros, amount_micros, amount_sub_micros, auction_id, rank, auction_at)`)
	if err != nil {
		t.Fatal(err)
	}
	at := now.Truncate(time.Second)
	id := uuid.New()
	if err := b.Append(uuid.MustParse(s.mp.ID), id, at, at.UnixMilli(), at, "click", "e-1", "EUR", cp.ID, "p-1", "v-1", "CPC", int64(350_000), int64(350_000), uint16(0), uuid.New(), uint8(1), at); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	r := s.admin(t).do("GET", "/console/campaigns/"+cp.ID, nil)
	if r.status != 200 {
		t.Fatalf("campaign page: %d", r.status)
	}
	lacks(t, html.UnescapeString(r.body), "0.35 / 10.00", "no_bids", "Not serving: it has no bid", "On pace</span>", `id="chart-pacing"`, "Pacing limit", "Even pace")
	ch := theChart(t, r.body)
	from, to := spend.DayBounds(now, loc)
	if ch.TZ != s.mp.Timezone || len(ch.X) < 2 || ch.X[0] != from.Unix() || ch.X[len(ch.X)-1] != to.Unix() || len(ch.Series) != 3 {
		t.Fatalf("chart: tz %q, x %d..%d (want %d..%d), %d series", ch.TZ, ch.X[0], ch.X[len(ch.X)-1], from.Unix(), to.Unix(), len(ch.Series))
	}
	var last float64
	for i, v := range ch.Series[0].Values {
		if v != nil {
			last = *v
			if time.Unix(ch.X[i], 0).After(now.Add(5 * time.Minute)) {
				t.Fatalf("spend drawn at %s, after now", time.Unix(ch.X[i], 0))
			}
		}
	}
	if last != 0.35 {
		t.Fatalf("cumulative spend %v, want 0.35", last)
	}
	if e := ch.Series[1].Values; *e[0] != 0 || *e[len(e)-1] != 10 {
		t.Fatalf("even pace from %v to %v, want 0 to 10", *e[0], *e[len(e)-1])
	}
	if a := ch.Series[2].Values; *a[0] <= 0 || *a[len(a)-1] != 10 {
		t.Fatalf("pacing limit from %v to %v", *a[0], *a[len(a)-1])
	}
}

// TestCampaignBudgetForm: the campaign page's budget form sets the budget
// of a period (weekly here) as PATCH does, the page shows it with the
// week's spend, and the pacing chart's lines are today's share of what the
// week has left; a bad amount is refused on the page, nothing changed.
func TestCampaignBudgetForm(t *testing.T) {
	s := startAtNoon(t) // this week's spend stays the page's while the test runs
	cp, c, page, tok := s.campaignPage(t, "Weekly")
	if r := c.do("POST", page+"/budget", url.Values{"csrf": {tok}, "period": {"weekly"}, "amount": {"70"}}); r.status != 303 {
		t.Fatalf("budget: %d %s", r.status, r.body)
	}
	got, _, _ := s.a.Campaigns.Campaign(s.mp.ID, cp.ID)
	if got.WeeklyBudgetMicros != 70_000_000 || got.DailyBudgetMicros != 0 || got.MonthlyBudgetMicros != 0 {
		t.Fatalf("budgets after the form: daily %d, weekly %d, monthly %d", got.DailyBudgetMicros, got.WeeklyBudgetMicros, got.MonthlyBudgetMicros)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	if err := spend.AddSpend(ctx, s.a.Redis, s.mp.ID, cp.ID, spend.DayOf(now, s.mp.Location()), 7_000_000); err != nil {
		t.Fatal(err)
	}
	r := c.do("GET", page, nil)
	lacks(t, html.UnescapeString(r.body), "70.00 EUR a week", "Spent this week", "7.00 / 70.00", `<option value="weekly" selected>`, `name="amount" value="70"`, "weekly budget's share of today")
	ch := theChart(t, r.body)
	if len(ch.Series) != 3 {
		t.Fatalf("%d series, want 3", len(ch.Series))
	}
	// Today's share: what the week has left (70, nothing spent before
	// today) over its days left, at most all of it on Sunday.
	e := ch.Series[1].Values
	if last := *e[len(e)-1]; last <= 0 || last > 70 {
		t.Errorf("even pace ends at %v, want today's share of 70", last)
	}
	// A bad amount: 422 on the page, the budget unchanged; none removes it.
	r = c.do("POST", page+"/budget", url.Values{"csrf": {tok}, "period": {"monthly"}, "amount": {"-3"}})
	if r.status != 422 || !strings.Contains(html.UnescapeString(r.body), "Budget.amount: Input should be greater than 0") {
		t.Errorf("bad amount: %d %s", r.status, regexp.MustCompile(`(?s)<p class="error"[^>]*>.*?</p>`).FindString(r.body))
	}
	if got, _, _ = s.a.Campaigns.Campaign(s.mp.ID, cp.ID); got.WeeklyBudgetMicros != 70_000_000 {
		t.Errorf("a bad form changed the budget: %+v", got)
	}
	if r = c.do("POST", page+"/budget", url.Values{"csrf": {tok}, "period": {"none"}}); r.status != 422 {
		// campaignInput has no total budget: a campaign needs one of them.
		t.Errorf("no budget at all: %d", r.status)
	}
}

// The campaigns list and a vendor's page show each campaign's budget with
// its period, as the API's budget field says it (daily, weekly, monthly),
// and its total budget; the list shows the spend of the budget's period
// against it (today's without one).
func TestCampaignListsBudgetPeriod(t *testing.T) {
	s := startAtNoon(t) // this week's spend stays the page's while the test runs
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	create := func(name, budget string) string {
		var in campaigns.CampaignInput
		body := `{"name":` + strconv.Quote(name) + `,"type":"listings","chargeType":"CPC",` + budget + `,"startDate":"2024-01-01T00:00:00Z"}`
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			t.Fatal(err)
		}
		cp, _, err := s.a.Campaigns.CreateCampaign(ctx, s.mp.ID, "v-1", in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return cp.ID
	}
	daily := create("Daily", `"dailyBudget":10`)
	weekly := create("Weekly", `"budget":{"type":"weekly","amount":70},"totalBudget":900`)
	monthly := create("Monthly", `"budget":{"type":"monthly","amount":300}`)
	total := create("Total only", `"totalBudget":500`)
	if err := spend.AddSpend(ctx, s.a.Redis, s.mp.ID, weekly, spend.DayOf(time.Now(), s.mp.Location()), 7_000_000); err != nil {
		t.Fatal(err)
	}
	c := s.client(t)
	c.login(adminEmail, adminPassword)
	// row is the text of the table row that links to campaign id, tags
	// but data-budget and class="reason" removed.
	tags := regexp.MustCompile(`<(/?)(?:[a-z]+)(?: data-budget="([a-z]*)")?[^>]*>`)
	row := func(body, id string) string {
		i := strings.Index(body, `<a href="/console/campaigns/`+id+`">`)
		if i < 0 {
			return ""
		}
		start := strings.LastIndex(body[:i], "<tr")
		end := strings.Index(body[i:], "</tr>")
		r := tags.ReplaceAllStringFunc(body[start:i+end], func(tag string) string {
			if m := tags.FindStringSubmatch(tag); m[2] != "" {
				return "[" + m[2] + "] "
			}
			return " "
		})
		return strings.Join(strings.Fields(html.UnescapeString(r)), " ")
	}
	list := c.do("GET", "/console/campaigns?vendor_id=v-1", nil)
	vendor := c.do("GET", "/console/vendors/v-1", nil)
	if list.status != 200 || vendor.status != 200 {
		t.Fatalf("campaigns %d, vendor %d", list.status, vendor.status)
	}
	for _, tc := range []struct {
		id, list, vendor string
	}{
		{daily, "[daily] 0.00 / 10.00 today · daily 0.00 / —", "[daily] 10.00 a day daily —"},
		{weekly, "[weekly] 7.00 / 70.00 this week · weekly 7.00 / 900.00", "[weekly] 70.00 a week weekly 900.00"},
		{monthly, "[monthly] 0.00 / 300.00 this month · monthly 0.00 / —", "[monthly] 300.00 a month monthly —"},
		{total, "0.00 / — today · no budget of a period 0.00 / 500.00", "— 500.00"},
	} {
		if got := row(list.body, tc.id); !strings.Contains(got, tc.list) {
			t.Errorf("campaigns list: row %q lacks %q", got, tc.list)
		}
		if got := row(vendor.body, tc.id); !strings.Contains(got, tc.vendor) {
			t.Errorf("vendor page: row %q lacks %q", got, tc.vendor)
		}
	}
}

// TestExplainForm: the operators' explain form runs the auction engine's
// dry run and shows every candidate; bad input is shown on the form.
func TestExplainForm(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	str := func(s string) *string { return &s }
	if _, err := s.a.Catalog.UpsertProducts(ctx, s.mp.ID, []catalog.ProductInput{{ID: str("p-1"), Name: str("Shoe"), Vendors: []string{"v-1"}},
		{ID: str("p-2"), Name: str("Hat"), Vendors: []string{"v-2"}}}, true, statelog.MatchAny); err != nil {
		t.Fatal(err)
	}
	cp := s.campaign(t, "v-1", "Shoe campaign")
	var bid campaigns.BidInput
	if err := json.Unmarshal([]byte(`{"targetType":"product","target":"p-1","bidAmount":0.5}`), &bid); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.a.Campaigns.CreateBid(ctx, s.mp.ID, cp.ID, bid); err != nil {
		t.Fatal(err)
	}
	c := s.admin(t)
	tok := c.csrf("/console/explain")
	testenv.Eventually(t, 20*time.Second, func() error {
		r := c.do("POST", "/console/explain", url.Values{"csrf": {tok}, "type": {"listings"}, "slots": {"2"}, "products": {"p-1, p-2\nnope"}})
		if r.status != 200 || !strings.Contains(r.body, ">won<") || !strings.Contains(r.body, "Shoe campaign") {
			return testenv.Errorf("explain: %d", r.status)
		}
		if !strings.Contains(r.body, "product_not_found") || !strings.Contains(r.body, "1 winner") {
			return testenv.Errorf("explain lacks the left-out product or the winner count")
		}
		return nil
	})
	two := `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p-1"]}},{"type":"listings","slots":1,"products":{"ids":["p-2"]},"searchQuery":"hat","device":"mobile"}]}`
	if r := c.do("POST", "/console/explain", url.Values{"csrf": {tok}, "json": {two}, "slots": {"not used"}}); r.status != 200 || strings.Count(r.body, `data-testid="explain-result"`) != 2 {
		t.Fatalf("two auctions as JSON: %d %s", r.status, errorOf(r.body))
	}
	for _, tc := range []struct {
		name string
		form url.Values
		want string
	}{
		{"slots not a number", url.Values{"type": {"listings"}, "slots": {"three"}}, "Slots must be a whole number"},
		{"too many slots", url.Values{"type": {"listings"}, "slots": {"41"}}, "slots"},
		{"no slots", url.Values{"type": {"listings"}, "slots": {""}}, "Slots must be a whole number"},
		{"an unknown type", url.Values{"type": {"video"}, "slots": {"1"}}, "type"},
		{"a bad device", url.Values{"type": {"listings"}, "slots": {"1"}, "device": {"tv"}}, "device"},
		{"broken JSON", url.Values{"json": {`{"auctions":[`}}, "not valid JSON"},
		{"JSON without auctions", url.Values{"json": {`{}`}}, "auctions"},
		{"JSON of the wrong type", url.Values{"json": {`{"auctions":[{"type":"listings","slots":"2"}]}`}}, "slots"},
		{"JSON too long", url.Values{"json": {`{"auctions":[` + strings.Repeat(" ", 300<<10) + `]}`}}, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.form.Set("csrf", tok)
			r := c.do("POST", "/console/explain", tc.form)
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `class="error"`) || !strings.Contains(html.UnescapeString(r.body), tc.want) {
				t.Fatalf("%d %q, want 422 with %q", r.status, errorOf(r.body), tc.want)
			}
			if !strings.Contains(r.body, `name="csrf"`) {
				t.Fatal("the form is not shown again")
			}
		})
	}
	if r := c.do("POST", "/console/explain", url.Values{"type": {"listings"}, "slots": {"1"}}); r.status != http.StatusForbidden {
		t.Fatalf("without the form's token: %d", r.status)
	}
}
