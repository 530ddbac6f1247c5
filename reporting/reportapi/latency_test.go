package reportapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/endcap/endcap/reporting/reportapi"
	"github.com/endcap/endcap/storage/clickhouse"
)

// envInt is the environment variable name when it is a positive number,
// else def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// campaignID is the id of generated campaign c (a UUID's text, as real ids).
func campaignID(c int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", c) }

// genRollup fills rollup_daily directly with one row per campaign and day
// (campaigns of 20 each per vendor, every day from start): the size of a
// marketplace whose every campaign has results every day. A row in 20
// holds an attributed purchase. One INSERT … SELECT FROM numbers() per day.
func genRollup(t testing.TB, ctx context.Context, conn clickhouse.Conn, mp string, campaigns, days int, start time.Time) {
	t.Helper()
	for d := range days {
		day := start.AddDate(0, 0, d).Format(time.DateOnly)
		err := conn.Exec(ctx, `INSERT INTO rollup_daily (marketplace_id, day_local, currency_code, sponsored, vendor_id,
			campaign_id, entity_type, entity_id, impressions, clicks, charged_impressions, charged_clicks,
			ad_spent_impressions_micros, ad_spent_impressions_sub_micros, ad_spent_clicks_micros, ad_spent_clicks_sub_micros,
			attributed_items, purchases, quantity, total_purchase_amount_micros)
		SELECT toUUID(?), toDate(?), 'EUR', 1, concat('v-', toString(intDiv(number, 20))),
		       concat('00000000-0000-4000-8000-', substring(toString(1000000000000 + number), 2, 12)),
		       'product', concat('p-', toString(number)),
		       100 + number % 50, number % 7, 100 + number % 50, number % 7,
		       toInt64(1500 * (100 + number % 50)), toUInt64(500 * (number % 3)), toInt64(250000 * (number % 7)), toUInt64(0),
		       toUInt64(number % 20 = 0),
		       arrayReduce('uniqExactState', if(number % 20 = 0, [concat(?, '-', toString(number))], emptyArrayString())),
		       toInt64(number % 20 = 0), toInt64(if(number % 20 = 0, 19990000, 0))
		FROM numbers(?)`, mp, day, day, campaigns)
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := conn.PrepareBatch(ctx, `INSERT INTO rollup_days (day_local, computed_at, rows, data_as_of_ms)`)
	if err != nil {
		t.Fatal(err)
	}
	for d := range days {
		day := start.AddDate(0, 0, d)
		at := day.AddDate(0, 0, 40)
		if err := b.Append(day, at, uint64(campaigns), uint64(at.UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// TestReportLatency measures what the handlers of the campaign report and
// of the interactions report grouped by campaign read (the window's
// watermark, then the report), request after request, over a generated
// rollup: ENDCAP_TEST_CAMPAIGNS campaigns (default 200) with results every
// day for ENDCAP_TEST_DAYS days (default 10), ENDCAP_TEST_REQUESTS requests
// of each kind (default 20). The defaults check the figures and keep the
// test to seconds; docs/design/performance.md (Reporting API) has the command of
// the figure (100,000 campaigns, a year) and its result.
func TestReportLatency(t *testing.T) {
	_, conn := db(t)
	// Generating a year of 100,000 campaigns takes longer than db's deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Minute)
	defer cancel()
	campaigns, days, requests := envInt("ENDCAP_TEST_CAMPAIGNS", 200), envInt("ENDCAP_TEST_DAYS", 10), envInt("ENDCAP_TEST_REQUESTS", 20)
	start := time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC)
	last := start.AddDate(0, 0, days-1)
	t0 := time.Now()
	genRollup(t, ctx, conn, mpA, campaigns, days, start)
	t.Logf("generated %d campaigns × %d days (%d rows) in %v", campaigns, days, campaigns*days, time.Since(t0).Round(time.Millisecond))
	svc := reportapi.New(conn)
	rng := rand.New(rand.NewPCG(1, 2))

	measure := func(name string, n int, fn func() error) {
		var ds []time.Duration
		for range n {
			t0 := time.Now()
			if err := fn(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ds = append(ds, time.Since(t0))
		}
		t.Logf("%-45s %d requests: p50 %v  p95 %v  max %v", name, len(ds), quantile(ds, 0.5).Round(100*time.Microsecond),
			quantile(ds, 0.95).Round(100*time.Microsecond), slices.Max(ds).Round(100*time.Microsecond))
	}
	campaignReport := func(w reportapi.Window) func() error {
		return func() error {
			c := rng.IntN(campaigns)
			if _, err := svc.DataAsOf(ctx, w); err != nil {
				return err
			}
			m, err := svc.Totals(ctx, mpA, reportapi.Filter{VendorID: "v-" + strconv.Itoa(c/20), CampaignID: campaignID(c)}, w)
			if err != nil {
				return err
			}
			if want := uint64(100+c%50) * uint64(w.Days()); m.Impressions != want {
				return fmt.Errorf("campaign %d: %d impressions, want %d", c, m.Impressions, want)
			}
			return nil
		}
	}
	measure("campaign report, 30 days", requests, campaignReport(reportapi.Window{From: last.AddDate(0, 0, -min(days, 30)+1), To: last}))
	// The whole generated window: a fifth as many requests (each reads a
	// granule of every day).
	measure(fmt.Sprintf("campaign report, %d days", days), max(requests/5, 5), campaignReport(reportapi.Window{From: start, To: last}))
	measure("campaign daily report, 30 days", requests, func() error {
		c := rng.IntN(campaigns)
		w := reportapi.Window{From: last.AddDate(0, 0, -min(days, 30)+1), To: last}
		if _, err := svc.DataAsOf(ctx, w); err != nil {
			return err
		}
		ds, err := svc.Daily(ctx, mpA, reportapi.Filter{VendorID: "v-" + strconv.Itoa(c/20), CampaignID: campaignID(c)}, w)
		if err == nil && ds[0].Impressions != uint64(100+c%50) {
			err = fmt.Errorf("campaign %d: %+v", c, ds[0])
		}
		return err
	})
	// A page of 1,000 rows of the interactions by campaign, from a random
	// place of a 31-day window (as a client paging through it gets them).
	win := reportapi.Window{From: last.AddDate(0, 0, -min(days, 31)+1), To: last}
	measure("interactions by campaign, a page of 1,000", requests, func() error {
		req := reportapi.InteractionsRequest{Window: win, GroupBy: reportapi.ByCampaign, Limit: 1000,
			After: reportapi.Position{Day: win.From.AddDate(0, 0, rng.IntN(win.Days())), Key: campaignID(rng.IntN(campaigns))}}
		rows, more, err := svc.Interactions(ctx, mpA, reportapi.Filter{}, req)
		if err != nil {
			return err
		}
		if _, err := svc.DataAsOf(ctx, reportapi.Window{From: req.After.Day, To: win.To}); err != nil {
			return err
		}
		if more && len(rows) != 1000 {
			return fmt.Errorf("a page of %d rows with more", len(rows))
		}
		return nil
	})
}
