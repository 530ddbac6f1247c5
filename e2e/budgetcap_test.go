package e2e

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/testkit/testenv"
)

// Helpers of the budget-cap test (bc*).

// bcWinners runs n one-slot auctions for product and returns the winners'
// resolvedBidIds (each auction must have one winner).
func bcWinners(t *testing.T, s *system, product string, n int) []string {
	t.Helper()
	var out []string
	for range n {
		res := auRun(t, s, "/v2/auctions", fmt.Sprintf(`{"auctions":[{"type":"listings","slots":1,"products":{"ids":[%q]}}]}`, product))
		if len(res) != 1 || len(res[0].Winners) != 1 {
			t.Fatalf("auction for %s: %+v", product, res)
		}
		out = append(out, res[0].Winners[0].ResolvedBidID)
	}
	return out
}

// bcClick is a click of the events API.
type bcClick struct {
	ID            string `json:"id"`
	OccurredAt    string `json:"occurredAt"`
	OpaqueUserID  string `json:"opaqueUserId"`
	ResolvedBidID string `json:"resolvedBidId"`
}

// bcSendClicks posts the clicks, 25 a request.
func bcSendClicks(t *testing.T, s *system, clicks []bcClick) {
	t.Helper()
	for len(clicks) > 0 {
		n := min(25, len(clicks))
		body, _ := json.Marshal(map[string]any{"clicks": clicks[:n]})
		cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, body, nil), 200)
		clicks = clicks[n:]
	}
}

// bcMoney is micro-units as an exact decimal of currency units.
func bcMoney(micros int64) string { return new(big.Rat).SetFrac64(micros, 1_000_000).FloatString(2) }

// TestBudgetCap is the overspend pattern end to end: winners are collected
// first (auctions are free, and no spend moves until a click), then every
// winner is clicked. Campaign "Daily" (CPC, daily budget 30.00) wins 100
// auctions at the reserve, 0.70; campaign "Total" (CPC, total budget 5.00)
// wins 20. The clicks are charged only up to each budget: 42 × 0.70 = 29.40
// and 7 × 0.70 = 4.90; the 43rd and 8th would cross it and are refused whole,
// as is every click after them. The refused clicks are interactions not
// charged, with the reason (daily_budget, total_budget); Redis spend equals
// the charges in ClickHouse; the vendor-charges list shows the 49 charges,
// and with include_refused the 71 refusals too (amount 0); the export shows
// clicks, charged clicks and budget_refused_clicks per campaign. And the
// auction stops serving both campaigns, although their spend stays below
// their budgets: a refused charge tells it they are at their budgets.
//
// Without the cap (the code before it) every click was charged: 70.00 of the
// daily 30.00 and 14.00 of the total 5.00.
func TestBudgetCap(t *testing.T) {
	cfg := exConfig(t)
	cfg.ExportMaxStaleness = 0 // the export recomputes its days: it sees every click folded before it
	s := startSystem(t, cfg)
	key, mp := s.AdvancedKey, s.Marketplace.ID
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const price = 700_000 // the CPC reserve: what a lone bidder pays
	if _, err := s.App.Accounts.SetReserve(ctx, mp, price, 1_000_000); err != nil {
		t.Fatal(err)
	}
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
		`{"vendors":[{"id":"v1","name":"Vendor One"},{"id":"v2","name":"Vendor Two"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key,
		`{"products":[{"id":"p1","name":"P1","vendors":["v1"],"active":true},{"id":"p2","name":"P2","vendors":["v2"],"active":true}]}`, nil), 200)
	daily := auCampaign(t, s, "v1", `{"name":"Daily","type":"listings","chargeType":"CPC","dailyBudget":30,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, daily, "product", "p1", "1")
	total := auCampaign(t, s, "v2", `{"name":"Total","type":"listings","chargeType":"CPC","totalBudget":5,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, total, "product", "p2", "1")
	const dailyBudget, totalBudget = 30_000_000, 5_000_000

	// Winners first, clicks later.
	dailyTokens := bcWinners(t, s, "p1", 100)
	totalTokens := bcWinners(t, s, "p2", 20)
	occurred := time.Now().UTC().Truncate(time.Millisecond)
	var clicks []bcClick
	for i, tok := range dailyTokens {
		clicks = append(clicks, bcClick{fmt.Sprintf("d-%03d", i), occurred.Format(time.RFC3339Nano), fmt.Sprintf("u-%d", i), tok})
	}
	for i, tok := range totalTokens {
		clicks = append(clicks, bcClick{fmt.Sprintf("t-%03d", i), occurred.Format(time.RFC3339Nano), fmt.Sprintf("u-%d", i), tok})
	}
	bcSendClicks(t, s, clicks)
	// Folded: 120 clicks, each with its row in charges_raw (a charge, or a
	// refused charge); the two tables are written at once.
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM interactions WHERE marketplace_id = ? AND kind = 'click'", mp); n != 120 {
			return fmt.Errorf("%d of 120 clicks folded", n)
		}
		if n := s.count(t, "SELECT count() FROM charges_raw FINAL WHERE marketplace_id = ?", mp); n != 120 {
			return fmt.Errorf("%d of 120 charge rows", n)
		}
		return nil
	})

	// Spend: never above the budget, and equal to the charges.
	day := spend.DayOf(occurred, s.Marketplace.Location())
	spentOf := func(campaign string) (int64, int64) {
		d, tot, err := spend.ReadSpend(ctx, s.App.Redis, mp, campaign, day)
		if err != nil {
			t.Fatal(err)
		}
		return d, tot
	}
	charged := func(campaign string) (int64, uint64) {
		rows := s.query(t, "SELECT toString(sum(amount_micros)), count() FROM charges WHERE marketplace_id = ? AND campaign_id = ?", mp, campaign)
		return vcInt(t, rows[0][0]), uint64(vcInt(t, rows[0][1]))
	}
	dSum, dN := charged(daily)
	tSum, tN := charged(total)
	t.Logf("daily budget %s: charged %s (%d clicks); total budget %s: charged %s (%d clicks)",
		bcMoney(dailyBudget), bcMoney(dSum), dN, bcMoney(totalBudget), bcMoney(tSum), tN)
	if dSum > dailyBudget || tSum > totalBudget {
		t.Fatalf("over budget: %s charged on a daily budget of %s, %s on a total budget of %s",
			bcMoney(dSum), bcMoney(dailyBudget), bcMoney(tSum), bcMoney(totalBudget))
	}
	if dSum != 42*price || dN != 42 || tSum != 7*price || tN != 7 {
		t.Errorf("charged %d clicks for %d and %d for %d; want 42 for 29.40 and 7 for 4.90", dN, dSum, tN, tSum)
	}
	if d, tot := spentOf(daily); d != dSum || tot != dSum {
		t.Errorf("Redis spend of Daily: %d today, %d in total; charges %d", d, tot, dSum)
	}
	if d, tot := spentOf(total); d != tSum || tot != tSum {
		t.Errorf("Redis spend of Total: %d today, %d in total; charges %d", d, tot, tSum)
	}

	// The refused clicks are stored, not charged, with the reason.
	reasons := map[string]string{}
	for _, r := range s.query(t, `SELECT campaign_id, refused_reason, toString(count()) FROM interactions WHERE marketplace_id = ? AND charged = 0
		GROUP BY campaign_id, refused_reason`, mp) {
		reasons[r[0]+"/"+r[1]] = r[2]
	}
	if len(reasons) != 2 || reasons[daily+"/daily_budget"] != "58" || reasons[total+"/total_budget"] != "13" {
		t.Errorf("uncharged clicks by campaign and reason: %v; want 58 daily_budget and 13 total_budget", reasons)
	}

	// The auction no longer serves them (within a cache refresh).
	testenv.Eventually(t, 10*time.Second, func() error {
		for _, p := range []string{"p1", "p2"} {
			res := auRun(t, s, "/v2/auctions", fmt.Sprintf(`{"auctions":[{"type":"listings","slots":1,"products":{"ids":[%q]}}]}`, p))
			if len(res) != 1 || len(res[0].Winners) != 0 {
				return fmt.Errorf("%s still served: %+v", p, res)
			}
		}
		return nil
	})

	// Vendor charges: the charges; with include_refused, the refusals too.
	loc := s.Marketplace.Location()
	start, end := occurred.Add(-time.Hour).In(loc).Format(time.RFC3339), occurred.Add(time.Hour).In(loc).Format(time.RFC3339)
	b, r := vcGet(t, s, key, vcQuery(start, end))
	sum := new(big.Rat)
	for _, c := range b.Data {
		sum.Add(sum, vcRat(t, c.Amount))
	}
	if len(b.Data) != 49 || sum.FloatString(2) != "34.30" || strings.Contains(string(r.Body), "refusedReason") {
		t.Errorf("vendor charges: %d entries for %s, want 49 for 34.30 (and no refusedReason)", len(b.Data), sum.FloatString(2))
	}
	for _, path := range []string{vcQuery(start, end, "include_refused", "true"), vcQuery(start, end, "include_refused", "true", "limit", "10000")} {
		r = s.request(t, "GET", path, key, nil, nil)
		cpStatus(t, r, 200)
		var all struct {
			Data []map[string]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &all); err != nil {
			t.Fatal(err)
		}
		byReason := map[string]int{}
		for _, e := range all.Data {
			reason := ""
			if raw, ok := e["refusedReason"]; ok {
				if err := json.Unmarshal(raw, &reason); err != nil || string(e["amount"]) != "0" {
					t.Errorf("refused entry %v", e)
				}
			} else if string(e["amount"]) != "0.7" {
				t.Errorf("charge entry %v", e)
			}
			var camp string
			_ = json.Unmarshal(e["campaignId"], &camp)
			byReason[camp+"/"+reason]++
		}
		if len(all.Data) != 120 || byReason[daily+"/"] != 42 || byReason[daily+"/daily_budget"] != 58 ||
			byReason[total+"/"] != 7 || byReason[total+"/total_budget"] != 13 {
			t.Errorf("%s: %d entries: %v", path, len(all.Data), byReason)
		}
	}

	// The export: clicks, charged clicks, refused clicks and spend per campaign.
	id := exAccepted(t, exCreate(t, s, key, exWith("dimensions", []string{"campaign_name"},
		"metrics", []string{"clicks", "charged_clicks", "budget_refused_clicks", "ad_spend"},
		"startDate", exDay(-1), "endDate", exDay(1))))
	v := exCompleted(t, s, id)
	st, _, data := exDownload(t, v.URL)
	if st != 200 {
		t.Fatalf("download: %d", st)
	}
	rows, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"campaign_name", "clicks", "charged_clicks", "budget_refused_clicks", "ad_spend"},
		{"Daily", "100", "42", "58", "29.4"},
		{"Total", "20", "7", "13", "4.9"},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("export\n%s\nwant\n%v", data, want)
	}
}
