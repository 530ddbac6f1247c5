package campaigns

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// BenchmarkListAll pages a marketplace of 100,000 campaigns (1,000
// vendors, every type and status) with the console's filters, and renders
// a page of 100 with its status reasons (spend from a reader in memory: the
// e2e benchmark BenchmarkCampaignList measures the whole request with
// Redis). The worst case is a filter that matches nothing: every campaign
// is read.
//
//	go test ./management/campaigns -run x -bench ListAll -benchmem
func BenchmarkListAll(b *testing.B) {
	const n, vendors = 100_000, 1_000
	_, brokers := testenv.Kafka(b)
	var s *Service
	f := newFakeRefs()
	testenv.StateLog(b, brokers, testenv.StateLogOptions{Prefix: "bench."}, func(l *statelog.Log) {
		s = New(l, f, f, f, f)
	})
	now := time.Now().UTC()
	past, future := now.Add(-48*time.Hour), now.Add(48*time.Hour)
	words := []string{"Spring", "Summer", "Autumn", "Winter", "Sale", "Shoes", "Deals", "Promo", "Brand", "Launch"}
	cs := make([]Campaign, n)
	for i := range cs {
		c := Campaign{
			ID: uuid.Must(uuid.NewV7()).String(), VendorID: fmt.Sprintf("vendor-%04d", i%vendors),
			Name: fmt.Sprintf("%s %s %d", words[i%len(words)], words[(i/len(words))%len(words)], i),
			Type: Types[i%len(Types)], ChargeType: ChargeCPC, DailyBudgetMicros: 10_000_000,
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
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	if err := s.Import(ctx, mpA, cs, nil); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d campaigns imported in %s", n, time.Since(began).Round(time.Millisecond))
	s.UseSpend(&fakeSpend{spent: map[string]spend.Spent{}})
	loc, _ := time.LoadLocation("Europe/Berlin")

	for _, q := range []string{
		"",
		"vendor_id=vendor-0042",
		"status=running",
		"status=archived",
		"type=banners&status=paused",
		"name=summer+sale",
		"name=no+such+campaign",
		"status=scheduled&name=no+such+campaign",
	} {
		vals, _ := url.ParseQuery(q)
		flt, err := ParseFilter(vals)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("q="+q, func(b *testing.B) {
			var found int
			for b.Loop() {
				page, _ := s.ListAll(mpA, flt, "", 100)
				found = len(page)
				_ = s.View(ctx, mpA, loc, page...)
			}
			b.ReportMetric(float64(found), "campaigns/page")
		})
	}
}
