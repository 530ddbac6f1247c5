package attribution_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/reporting/attribution"
	"github.com/endcap/endcap/testkit/testapp"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestThroughTheApp: the whole process (target all) runs the attribution
// projector, which reads the marketplace's settings from the accounts view.
// Events go through POST /v2/events: a purchase, then the click and the
// impression that preceded it, arriving late. The marketplace's settings
// turn listings impressions off, so the click is credited although the
// impression is later.
func TestThroughTheApp(t *testing.T) {
	key := []byte("endcap-test-key-0123456789abcdef")
	a := testapp.Start(t, testapp.WithMarketplace("Attribution", "EUR", "Asia/Tokyo"), testapp.Configure(func(c *config.Config, _ []string) {
		c.BidSigningKeys = "1:" + base64.RawURLEncoding.EncodeToString(key)
		testenv.InvalidClicksDefault(c) // the process as deployed: its click is judged, and valid
	}))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	m, err := a.Accounts.SetAttribution(ctx, a.Marketplace.ID, map[string]accounts.AttributionWindow{
		"listings": {ClickSeconds: 7 * 86400, ImpressionSeconds: 0}}, false)
	if err != nil {
		t.Fatal(err)
	}
	secret := a.MarketplaceKey
	kr, err := bidtoken.NewKeyring(map[uint8][]byte{1: key}, 1)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	token := func(product string, at time.Time) string {
		tok, err := kr.Encode(bidtoken.Claims{MarketplaceID: uuid.MustParse(m.ID), AuctionID: uuid.Must(uuid.NewV7()),
			CampaignID: campaignOf("v1"), AuctionTimeMs: at.UnixMilli(), ChargeType: bidtoken.CPC, AdFormat: bidtoken.Listings,
			Rank: 1, PriceMicros: 300_000, WinnerType: bidtoken.WinnerProduct, WinnerID: product, VendorID: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	post := func(body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", a.URL+"/v2/events", bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST /v2/events: %d", resp.StatusCode)
		}
	}
	ts := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	post(fmt.Sprintf(`{"purchases":[{"id":"p1","occurredAt":%q,"opaqueUserId":"u1",
		"items":[{"productId":"sku-1","unitPrice":12.5,"quantity":3},{"productId":"sku-9","unitPrice":1}]}]}`, ts(now)))
	posted := time.Now()
	// The click comes after an impression of its winner (a click without
	// one is invalid, and never credited).
	clicked := token("sku-1", now.Add(-time.Hour-time.Second))
	post(fmt.Sprintf(`{"impressions":[{"id":"i0","occurredAt":%q,"opaqueUserId":"u1","resolvedBidId":%q},
		{"id":"i1","occurredAt":%q,"opaqueUserId":"u1","resolvedBidId":%q}],
		"clicks":[{"id":"c1","occurredAt":%q,"opaqueUserId":"u1","resolvedBidId":%q}]}`,
		ts(now.Add(-time.Hour-500*time.Millisecond)), clicked,
		ts(now.Add(-time.Minute)), token("sku-1", now.Add(-time.Minute-time.Second)),
		ts(now.Add(-time.Hour)), clicked))

	var got []attribution.Row
	testenv.Eventually(t, 30*time.Second, func() error {
		got = got[:0]
		err := attribution.Rows(ctx, a.ClickHouse, m.ID, now.Add(-time.Minute), now.Add(time.Minute), func(r *attribution.Row) error {
			got = append(got, *r)
			return nil
		})
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].InteractionEventID != "c1" {
			return fmt.Errorf("rows %+v", got)
		}
		return nil
	})
	t.Logf("the late click's attribution was visible %s after /v2/events answered (polling every 100 ms)", time.Since(posted).Round(10*time.Millisecond))
	r := got[0]
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	wantDay := now.In(tokyo).Format(time.DateOnly)
	if r.PurchaseEventID != "p1" || r.ItemIndex != 0 || r.ProductID != "sku-1" || r.Quantity != 3 || r.UnitPriceMicros != 12_500_000 ||
		r.AmountMicros != 37_500_000 || r.Reason != attribution.ReasonProductClick || r.Score != 1 || r.InteractionKind != "click" ||
		r.CampaignID != campaignOf("v1").String() || r.VendorID != "v1" || r.AdFormat != "listings" || r.ChargeType != "CPC" ||
		r.WindowSeconds != 7*86400 || r.CurrencyCode != "EUR" || r.DayLocal.Format(time.DateOnly) != wantDay ||
		r.InteractionAtMs != now.Add(-time.Hour).UnixMilli() || r.PurchasedAtMs != now.UnixMilli() {
		t.Errorf("row %+v", r)
	}
	// The credited click's charge, by the interaction id.
	testenv.Eventually(t, 30*time.Second, func() error {
		var n uint64
		if err := a.ClickHouse.QueryRow(ctx, "SELECT count() FROM charges WHERE marketplace_id = toUUID(?) AND interaction_id = toUUID(?) AND amount_micros = 300000",
			m.ID, r.InteractionID.String()).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d charges for the credited click", n)
		}
		return nil
	})
}
