package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/testkit/testenv"
)

const sfPath = "/public/v1/reporting-service/file-reports/scored-attribution"

type sfFile struct {
	Date       string    `json:"date"`
	FileURL    string    `json:"fileUrl"`
	ExpiresAt  time.Time `json:"expiresAt"`
	SizeBytes  int64     `json:"sizeBytes"`
	ProducedAt time.Time `json:"producedAt"`
	Final      bool      `json:"final"`
}

func sfList(t *testing.T, s *system, key, date string) ([]sfFile, response) {
	t.Helper()
	r := s.request(t, "GET", sfPath+"?report_date="+date, key, nil, nil)
	if r.Status != 200 {
		return nil, r
	}
	var body struct {
		Files *[]sfFile `json:"files"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Files == nil {
		t.Fatalf("body %s: %v (files must be present)", r.Body, err)
	}
	return *body.Files, r
}

// sfDownload fetches a presigned URL with plain net/http.
func sfDownload(t *testing.T, url string) (int, []byte) {
	t.Helper()
	st, _, b := exDownload(t, url)
	return st, b
}

// TestScoredAttributionFiles: a click and a purchase go through the whole
// pipeline (auction, events, attribution projector); the day's file is
// produced, listed by the endpoint with a presigned URL that downloads with
// plain HTTP, agrees with ClickHouse to the micro-unit, and stops working
// after its lifetime.
func TestScoredAttributionFiles(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "5000/1s", "5000/1s"
	cfg.ReportURLLifetime = 4 * time.Second
	s := startSystem(t, cfg)
	key, mp := s.AdvancedKey, s.Marketplace.ID

	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key, `{"vendors":[{"id":"v1","name":"Vendor One"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[{"id":"p1","name":"P1","vendors":["v1"],"active":true}]}`, nil), 200)
	camp := auCampaign(t, s, "v1", `{"name":"Clicks","type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, camp, "product", "p1", "0.03")
	res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]}}]}`)
	if len(res) != 1 || len(res[0].Winners) != 1 {
		t.Fatalf("auction: %+v", res)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	events := fmt.Sprintf(`{"clicks":[{"id":"sf-clk","occurredAt":%q,"opaqueUserId":"u-sf","resolvedBidId":%q}],
		"purchases":[{"id":"sf-pur","occurredAt":%q,"opaqueUserId":"u-sf","items":[
			{"productId":"p1","unitPrice":19.990001,"quantity":3,"vendorId":"v1"},{"productId":"other","unitPrice":5}]}]}`,
		ts(now.Add(-time.Second)), res[0].Winners[0].ResolvedBidID, ts(now))
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(events), nil), 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := s.count(t, "SELECT count() FROM attributed_purchases WHERE marketplace_id = ?", mp); n != 1 {
			return fmt.Errorf("%d attributed items, want 1", n)
		}
		return nil
	})

	loc := s.Marketplace.Location()
	l := now.In(loc)
	day := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC)
	date := day.Format(time.DateOnly)

	// Not produced yet: an empty list.
	if files, r := sfList(t, s, key, date); r.Status != 200 || len(files) != 0 || !strings.Contains(string(r.Body), `"files":[]`) {
		t.Fatalf("before production: %d %s", r.Status, r.Body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sf := scoredfiles.New(s.App.ClickHouse, s.App.S3, s.App.Redis, testenv.Logger(t))
	if _, err := sf.Produce(ctx, scoredfiles.Marketplace{ID: mp, Location: loc}, day); err != nil {
		t.Fatal(err)
	}

	files, r := sfList(t, s, key, date)
	if r.Status != 200 || len(files) != 1 {
		t.Fatalf("after production: %d %s", r.Status, r.Body)
	}
	f := files[0]
	if f.Date != date || f.Final || f.SizeBytes <= 0 || f.ExpiresAt.After(time.Now().Add(cfg.ReportURLLifetime)) || f.ExpiresAt.Before(time.Now()) {
		t.Fatalf("file entry %+v", f)
	}
	st, data := sfDownload(t, f.FileURL)
	if st != 200 || int64(len(data)) != f.SizeBytes {
		t.Fatalf("download: status %d, %d bytes (listed %d): %.200s", st, len(data), f.SizeBytes, data)
	}
	rd := parquet.NewGenericReader[scoredfiles.Record](bytes.NewReader(data))
	recs := make([]scoredfiles.Record, rd.NumRows())
	if n, err := rd.Read(recs); n != 1 || (err != nil && !errors.Is(err, io.EOF)) {
		t.Fatalf("read %d rows: %v", n, err)
	}
	got := recs[0]
	row := s.query(t, `SELECT purchase_event_id, product_id, quantity, unit_price_micros, amount_micros, score, reason, campaign_id, toString(auction_id)
		FROM attributed_purchases WHERE marketplace_id = ?`, mp)
	want := fmt.Sprint(row[0])
	have := fmt.Sprint([]string{got.PurchaseEventID, got.ProductID, fmt.Sprint(got.Quantity), fmt.Sprint(got.UnitPriceMicros),
		fmt.Sprint(got.AmountMicros), fmt.Sprint(got.Score), got.Reason, got.CampaignID, got.AuctionID})
	if have != want {
		t.Fatalf("file row %s\nClickHouse  %s", have, want)
	}
	if got.AmountMicros != 59_970_003 || got.Amount != "59.970003" || got.CampaignID != camp || got.MarketplaceID != mp {
		t.Fatalf("file row %+v", got)
	}

	// Another marketplace's key sees none of it.
	if files, r := sfList(t, s, otherMarketplace(t, s), date); r.Status != 200 || len(files) != 0 {
		t.Fatalf("other marketplace: %d %s", r.Status, r.Body)
	}
	// Bad and missing dates.
	for _, q := range []string{"?report_date=2026-13-01", "?report_date=yesterday", "?report_date=", ""} {
		r := s.request(t, "GET", sfPath+q, key, nil, nil)
		expect422Locs(t, r, "query.report_date")
	}
	// The marketplace key cannot use /public/v1.
	if r := s.request(t, "GET", sfPath+"?report_date="+date, s.MarketplaceKey, nil, nil); r.Status < 400 {
		t.Fatalf("marketplace key: %d %s", r.Status, r.Body)
	}

	// After its lifetime the URL is refused by the object store.
	time.Sleep(time.Until(f.ExpiresAt) + 1500*time.Millisecond)
	if st, body := sfDownload(t, f.FileURL); st != http.StatusForbidden {
		t.Fatalf("expired URL: status %d: %.300s", st, body)
	}
	// A fresh listing works again.
	files, _ = sfList(t, s, key, date)
	if len(files) != 1 {
		t.Fatal("no file after expiry")
	}
	if st, _ := sfDownload(t, files[0].FileURL); st != 200 {
		t.Fatalf("fresh URL: status %d", st)
	}
}
