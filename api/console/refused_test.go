package console_test

import (
	"context"
	"fmt"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// refusedCharge writes a charges_raw row of vendor's campaign at at: a
// refused one (amount 0) when reason is set.
func (s *sys) refusedCharge(t *testing.T, vendor, campaign, kind, reason string, at time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	amount := 0
	if reason == "" {
		amount = 250_000
	}
	if err := s.a.ClickHouse.Exec(ctx, fmt.Sprintf(`INSERT INTO charges_raw (marketplace_id, interaction_id, timestamp, timestamp_ms, day_local, kind,
		event_id, currency_code, campaign_id, product_id, vendor_id, external_vendor_id, global_id, charge_type, price_micros,
		amount_micros, amount_sub_micros, auction_id, rank, auction_at, refused_reason)
		SELECT toUUID('%s'), toUUID('%s'), toDateTime(%d, 'UTC'), %d, toDate('%s'), '%s', 'e', 'EUR', '%s', 'p-%s', '%s', '%s', '', 'CPC', 250000,
		%d, 0, toUUID('%s'), 1, toDateTime(%d, 'UTC'), '%s'`,
		s.mp.ID, uuid.NewString(), at.Unix(), at.UnixMilli(), at.UTC().Format(time.DateOnly), kind, campaign, vendor, vendor, vendor,
		amount, uuid.NewString(), at.Unix(), reason)); err != nil {
		t.Fatal(err)
	}
}

// TestRefusedChargesPage: a vendor's refused charges of a window of local
// days, counted per reason (its charges, other vendors' and other days'
// refusals not), the newest listed with their campaign and reason in
// words; bad windows said on the page (422); an admin reads any vendor's,
// a vendor user its own only.
func TestRefusedChargesPage(t *testing.T) {
	s := start(t)
	cp := s.campaign(t, "v-1", "Clicked")
	now := time.Now()
	for _, r := range []struct{ vendor, kind, reason string }{
		{"v-1", "click", "invalid_too_fast"}, {"v-1", "click", "invalid_too_fast"}, {"v-1", "click", "invalid_no_impression"},
		{"v-1", "click", "insufficient_balance"}, {"v-1", "impression", "daily_budget"}, {"v-1", "click", ""},
		{"v-2", "click", "invalid_click_rate"},
	} {
		s.refusedCharge(t, r.vendor, cp.ID, r.kind, r.reason, now.Add(-time.Minute))
	}
	s.refusedCharge(t, "v-1", cp.ID, "click", "invalid_repeat_click", now.AddDate(0, 0, -20)) // outside the default window
	c := s.admin(t)
	r := c.do("GET", "/console/vendors/v-1/refused", nil)
	body := html.UnescapeString(r.body)
	if r.status != 200 {
		t.Fatalf("refused charges: %d %s", r.status, errorOf(r.body))
	}
	lacks(t, body,
		`<tr data-reason="invalid_too_fast"><td>Invalid click: it came too soon after its impression <span class="reason">invalid_too_fast</span></td><td class="num">2</td><td class="num">0</td>`,
		`<tr data-reason="daily_budget"><td>Not charged: it would have taken the campaign over its daily budget <span class="reason">daily_budget</span></td><td class="num">0</td><td class="num">1</td>`,
		`data-reason="invalid_no_impression"`, `data-reason="insufficient_balance"`, "Not charged: the vendor's funds did not cover it",
		">Clicked</a>", "p-v-1",
	)
	if n := strings.Count(body, "data-interaction="); n != 5 || strings.Contains(body, "invalid_click_rate") || strings.Contains(body, "invalid_repeat_click") {
		t.Errorf("%d refused charges listed, want 5 (of v-1, in the window)", n)
	}
	// A window of 30 days takes the older one in.
	day := func(d time.Time) string { return d.In(s.mp.Location()).Format(time.DateOnly) }
	r = c.do("GET", "/console/vendors/v-1/refused?from="+day(now.AddDate(0, 0, -29))+"&to="+day(now), nil)
	if !strings.Contains(r.body, `data-reason="invalid_repeat_click"`) || strings.Count(r.body, "data-interaction=") != 6 {
		t.Errorf("30 days: %d", r.status)
	}
	for _, tc := range []struct{ q, want string }{
		{"from=yesterday", "From: the first day must be a date (YYYY-MM-DD)"},
		{"from=" + day(now) + "&to=" + day(now.AddDate(0, 0, -1)), "To: the last day must not be before the first"},
		{"from=" + day(now.AddDate(0, 0, -40)) + "&to=" + day(now), "The window may be at most 32 days"},
	} {
		r = c.do("GET", "/console/vendors/v-1/refused?"+tc.q, nil)
		if r.status != 422 || !strings.Contains(html.UnescapeString(r.body), tc.want) || strings.Contains(r.body, "data-interaction=") {
			t.Errorf("%s: %d, want 422 with %q", tc.q, r.status, tc.want)
		}
	}
	if r = c.do("GET", "/console/vendors/nobody/refused", nil); r.status != 404 {
		t.Errorf("an unknown vendor: %d", r.status)
	}
	if r = c.do("GET", "/console/refused", nil); r.status != 303 {
		t.Errorf("an admin's /console/refused: %d", r.status)
	}
	// A vendor user: its own.
	two := s.vendorUser(t, "v-2", "refused@two.test")
	r = two.do("GET", "/console/refused?vendor=v-1", nil)
	if r.status != 200 || !strings.Contains(r.body, `data-reason="invalid_click_rate"`) || strings.Count(r.body, "data-interaction=") != 1 || strings.Contains(r.body, "invalid_too_fast") {
		t.Errorf("vendor user's refused charges: %d", r.status)
	}
	if r = two.do("GET", "/console/vendors/v-1/refused", nil); r.status != 403 {
		t.Errorf("vendor user, another vendor's: %d", r.status)
	}
}
