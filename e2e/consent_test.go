package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/management/segments"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestConsentDenied: an auction and events whose shopper denied consent run,
// count and charge as any other, and leave the shopper's opaqueUserId in no
// table of ClickHouse; the auction ignores the shopper's segments. The same
// shopper with consent is stored, targeted by segment and attributed (the
// control).
func TestConsentDenied(t *testing.T) {
	s, _ := cpStart(t)
	key, mp := s.AdvancedKey, s.Marketplace.ID
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := s.App.Accounts.SetReserve(ctx, mp, 100_000, 1_000_000); err != nil {
		t.Fatal(err)
	}
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key,
		`{"vendors":[{"id":"v1","name":"Vendor One"},{"id":"v2","name":"Vendor Two"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key,
		`{"products":[{"id":"p1","name":"P1","vendors":["v1","v2"],"active":true}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/segment-service/segments/vip", key, `{"name":"VIP","config":{"type":"user-list"}}`, nil), 201)
	if _, err := s.App.Segments.Upload(ctx, mp, "vip", segments.ActionAdd, strings.NewReader("shopper-ok\nshopper-denied\n"), 0); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	plain := auCampaign(t, s, "v1", `{"name":"plain","type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`)
	names[plain] = "plain"
	auBid(t, s, plain, "product", "p1", "1")
	seg := auCampaign(t, s, "v2", `{"name":"seg","type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z","targeting":{"segments":["vip"]}}`)
	names[seg] = "seg"
	auBid(t, s, seg, "product", "p1", "5")

	auction := func(user, consent string) auWinner {
		t.Helper()
		res := auRun(t, s, "/v2/auctions", fmt.Sprintf(`{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]},"opaqueUserId":%q%s}]}`, user, consent))
		if len(res) != 1 || len(res[0].Winners) != 1 {
			t.Fatalf("auction of %s: %+v", user, res)
		}
		return res[0].Winners[0]
	}
	// The segment's campaign wins for its member with consent; without it
	// the member is nobody's, and the other campaign wins.
	ok := auction("shopper-ok", `,"consent":{"adStorage":true,"personalization":true}`)
	denied := auction("shopper-denied", `,"consent":{"adStorage":true,"personalization":false}`)
	auSame(t, "with consent", auIDs([]auWinner{ok}, names), "p1@seg")
	auSame(t, "consent denied", auIDs([]auWinner{denied}, names), "p1@plain")

	// The auctions folded first: attribution reads a winner carried hashed
	// in its token from auction_winners.
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM auction_winners WHERE marketplace_id = ?", mp); n != 2 {
			return fmt.Errorf("%d of 2 auction winners folded", n)
		}
		return nil
	})
	// Purchases after the clicks, and after the auctions (attribution's rule).
	at, later := ts(time.Now()), ts(time.Now().Add(time.Minute))
	deniedConsent := `"consent":{"adStorage":false}`
	body := fmt.Sprintf(`{
	  "impressions": [
	    {"id":"ok-imp","occurredAt":%[1]q,"opaqueUserId":"shopper-ok","resolvedBidId":%[2]q},
	    {"id":"no-imp","occurredAt":%[1]q,"opaqueUserId":"shopper-denied","resolvedBidId":%[3]q,%[4]s}],
	  "clicks": [
	    {"id":"ok-clk","occurredAt":%[1]q,"opaqueUserId":"shopper-ok","resolvedBidId":%[2]q},
	    {"id":"no-clk","occurredAt":%[1]q,"opaqueUserId":"shopper-denied","resolvedBidId":%[3]q,%[4]s}],
	  "purchases": [
	    {"id":"ok-pur","occurredAt":%[5]q,"opaqueUserId":"shopper-ok","items":[{"productId":"p1","unitPrice":10}]},
	    {"id":"no-pur","occurredAt":%[5]q,"opaqueUserId":"shopper-denied","items":[{"productId":"p1","unitPrice":10}],%[4]s},
	    {"id":"no-pur-anon","occurredAt":%[5]q,"items":[{"productId":"p1","unitPrice":10}],%[4]s}],
	  "pageviews": [
	    {"id":"no-pv","occurredAt":%[1]q,"opaqueUserId":"shopper-denied","page":{"type":"home","pageId":"h"},"consent":{"personalization":false}}]
	}`, at, ok.ResolvedBidID, denied.ResolvedBidID, deniedConsent, later)
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(body), nil), 200)

	// Counted: every event, both impressions and clicks, both clicks charged;
	// the consented purchase attributed to its click.
	testenv.Eventually(t, 60*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM events WHERE marketplace_id = ?", mp); n != 8 {
			return fmt.Errorf("%d of 8 events folded", n)
		}
		if n := s.count(t, "SELECT count() FROM interactions WHERE marketplace_id = ?", mp); n != 4 {
			return fmt.Errorf("%d of 4 interactions folded", n)
		}
		if n := s.count(t, "SELECT count() FROM charges WHERE marketplace_id = ?", mp); n != 2 {
			return fmt.Errorf("%d of 2 clicks charged", n)
		}
		if n := s.count(t, "SELECT count() FROM attributed_purchases WHERE marketplace_id = ? AND purchase_event_id = 'ok-pur' AND interaction_event_id = 'ok-clk'", mp); n != 1 {
			return fmt.Errorf("the consented purchase is not attributed yet (%d rows): %v", n,
				s.query(t, "SELECT purchase_event_id, interaction_event_id, attributed, opaque_user_id FROM attributed_purchases_raw FINAL WHERE marketplace_id = ?", mp))
		}
		return nil
	})
	if n := s.count(t, "SELECT count() FROM charges WHERE marketplace_id = ? AND event_id = 'no-clk' AND campaign_id = ?", mp, plain); n != 1 {
		t.Errorf("the click without consent: %d charges of its campaign, want 1", n)
	}
	if got := s.query(t, "SELECT event_id FROM events WHERE marketplace_id = ? AND opaque_user_id = '' ORDER BY event_id", mp); fmt.Sprint(got) != "[[no-clk] [no-imp] [no-pur] [no-pur-anon] [no-pv]]" {
		t.Errorf("events without a user: %v", got)
	}
	if got := s.query(t, "SELECT opaque_user_id FROM auctions WHERE marketplace_id = ? ORDER BY opaque_user_id", mp); fmt.Sprint(got) != "[[] [shopper-ok]]" {
		t.Errorf("auctions' users: %v", got)
	}
	// Nothing attributed to or from an event without a user.
	if n := s.count(t, "SELECT count() FROM attributed_purchases WHERE marketplace_id = ? AND (purchase_event_id LIKE 'no-%' OR interaction_event_id LIKE 'no-%')", mp); n != 0 {
		t.Errorf("%d attributions of events without consent", n)
	}

	// The shopper who denied is in no row of any table or view; the one who
	// consented is (the query sees them).
	cols := s.query(t, "SELECT table, name FROM system.columns WHERE database = currentDatabase() AND type LIKE '%String%' AND (name LIKE '%user%') ORDER BY table, name")
	if len(cols) < 6 {
		t.Fatalf("user columns: %v", cols)
	}
	seen := 0
	for _, c := range cols {
		if n := s.count(t, fmt.Sprintf("SELECT count() FROM %s WHERE toString(%s) = 'shopper-denied'", c[0], c[1])); n != 0 {
			t.Errorf("%s.%s: %d rows of the shopper who denied consent", c[0], c[1], n)
		}
		seen += int(s.count(t, fmt.Sprintf("SELECT count() FROM %s WHERE toString(%s) = 'shopper-ok'", c[0], c[1])))
	}
	if seen == 0 {
		t.Error("the consented shopper is in no table: the check sees nothing")
	}
}
