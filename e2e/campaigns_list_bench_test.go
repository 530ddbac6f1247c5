package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/testkit/testenv"
)

// BenchmarkCampaignList measures GET /public/v1/campaign-service/campaigns
// over HTTP on a marketplace of 100,000 campaigns (1,000 vendors, every
// type and status, one bid each, spend in Redis for a third of them), with
// the filters a console uses: each request reads a page of up to 100, its
// status reasons and, in one Redis round trip, its spend. The time is the
// client's (loopback), an upper bound of the server's; p50, p95 and p99 are
// reported per query.
//
//	ENDCAP_TEST_REQUIRE_STACK=1 go test ./e2e -run x -bench CampaignList -benchtime 200x
func BenchmarkCampaignList(b *testing.B) {
	const n, vendors = 100_000, 1_000
	env := testenv.Get(b)
	_, brokers := testenv.Kafka(b)
	cfg := env.Config(b, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "1000000/1s", "1000000/1s"
	s := startSystem(b, cfg)
	mp := s.Marketplace.ID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	now := time.Now().UTC().Truncate(time.Millisecond)
	past, future := now.Add(-48*time.Hour), now.Add(48*time.Hour)
	words := []string{"Spring", "Summer", "Autumn", "Winter", "Sale", "Shoes", "Deals", "Promo", "Brand", "Launch"}
	cs := make([]campaigns.Campaign, n)
	bs := make([]campaigns.Bid, n)
	for i := range cs {
		c := campaigns.Campaign{
			ID: uuid.Must(uuid.NewV7()).String(), VendorID: fmt.Sprintf("vendor-%04d", i%vendors),
			Name: fmt.Sprintf("%s %s %d", words[i%len(words)], words[(i/len(words))%len(words)], i),
			Type: []string{campaigns.TypeListings, campaigns.TypeBanners}[i%2], ChargeType: campaigns.ChargeCPC,
			DailyBudgetMicros: 10_000_000, TotalBudgetMicros: 500_000_000,
			StartDate: past, Active: i%10 != 0, CreatedAt: now, UpdatedAt: now,
		}
		switch i % 50 {
		case 1:
			c.StartDate = future
		case 2:
			c.EndDate = &past
		case 3:
			c.ArchivedAt = &past
		}
		cs[i] = c
		bs[i] = campaigns.Bid{ID: uuid.Must(uuid.NewV7()).String(), CampaignID: c.ID, TargetType: campaigns.TargetKeyword,
			Target: "kw " + fmt.Sprint(i%500), AmountMicros: 500_000, Active: true, CreatedAt: now, UpdatedAt: now}
	}
	began := time.Now()
	if err := s.App.Campaigns.Import(ctx, mp, cs, bs); err != nil {
		b.Fatal(err)
	}
	day := spend.DayOf(time.Now(), s.Marketplace.Location())
	pipe := s.App.Redis.Pipeline()
	for i := 0; i < n; i += 3 {
		pipe.HSet(ctx, spend.SpendKey(mp, cs[i].ID), spend.DayField(day), 1_000_000+i, spend.TotalField, 50_000_000+i)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d campaigns and bids imported, spend written, in %s", n, time.Since(began).Round(time.Millisecond))

	reads := func(result string) float64 {
		return testutil.ToFloat64(telemetry.BudgetSpendReads.WithLabelValues(result))
	}
	for _, q := range []string{
		"",
		"vendor_id=vendor-0042",
		"status=running",
		"status=archived",
		"type=banners&status=scheduled",
		"name=summer+sale",
		"name=no+such+campaign",
	} {
		b.Run("q="+q, func(b *testing.B) {
			var took []time.Duration
			var last response
			failed := reads("error") + reads("skipped")
			for b.Loop() {
				start := time.Now()
				last = s.request(b, "GET", clAll+"?limit=100&"+q, s.AdvancedKey, nil, nil)
				took = append(took, time.Since(start))
				if last.Status != 200 {
					b.Fatalf("%d %s", last.Status, last.Body)
				}
			}
			var page struct {
				Campaigns []struct {
					Spend struct{ Available bool } `json:"spend"`
				} `json:"campaigns"`
			}
			if err := json.Unmarshal(last.Body, &page); err != nil {
				b.Fatalf("%v: %.300s", err, last.Body)
			}
			b.ReportMetric(float64(len(page.Campaigns)), "campaigns/page")
			// Pages answered without spend: Redis did not answer within
			// ENDCAP_SPEND_READ_TIMEOUT (a loaded machine).
			b.ReportMetric(reads("error")+reads("skipped")-failed, "spendless-pages")
			slices.Sort(took)
			at := func(p float64) float64 {
				return float64(took[min(len(took)-1, int(p*float64(len(took))))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.95), "p95-ms")
			b.ReportMetric(at(0.99), "p99-ms")
		})
	}
}
