package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/timestamp"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/testkit/testenv"
)

// Helpers of the exports tests (ex*).

const (
	exPath         = "/public/v1/export-service/exports"
	exDatasetsPath = "/public/v1/export-service/datasets"
)

// exSpecDimensions and exSpecMetrics are the allowed lists of the spec
// (marketplace-ads-api.md, Exports), in its order.
var (
	exSpecDimensions = []string{
		"vendor_id", "campaign_id", "entity_type", "entity_id", "day_local", "device_type", "page_id", "page_type",
		"page_value", "placement_page", "auction_device", "auction_location", "auction_page_type", "auction_page_id",
		"auction_page_value", "auction_search_query", "auction_category", "currency_code", "external_vendor_id",
		"vendor_name", "campaign_name", "external_campaign_id", "status", "campaign_type", "ad_format", "charge_type",
		"is_active",
	}
	exSpecMetrics = []string{
		"impressions", "clicks", "charged_clicks", "charged_impressions", "charged_attributed_purchases", "quantity",
		"purchase_count", "ad_spent_clicks", "ad_spent_impressions", "ad_spent_exclusive_campaign",
		"ad_spent_attributed_purchases", "ad_spend", "total_purchase_amount", "ctr", "conversion_rate", "cpc", "cpm",
		"roas", "acos",
	}
	// exExtensionMetrics are Endcap's own metrics, listed after the spec's.
	exExtensionMetrics = []string{"budget_refused_impressions", "budget_refused_clicks", "invalid_clicks"}
)

// exConfig is a test configuration without rate limits in the way.
func exConfig(t *testing.T) config.Config {
	t.Helper()
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "5000/1s", "5000/1s"
	return cfg
}

// exDay is today (UTC) shifted by n days, as YYYY-MM-DD.
func exDay(n int) string { return time.Now().UTC().AddDate(0, 0, n).Format(time.DateOnly) }

// exRequest is a valid request body: two dimensions, two metrics, the last
// 7 days up to today (UTC).
func exRequest() map[string]any {
	return map[string]any{
		"dataset":     "monitoring_metrics",
		"dimensions":  []string{"day_local", "campaign_id"},
		"metrics":     []string{"impressions", "clicks"},
		"granularity": "day_local",
		"startDate":   exDay(-6),
		"endDate":     exDay(0),
	}
}

// exWith is exRequest with fields set (a nil value removes the field).
func exWith(kv ...any) map[string]any {
	m := exRequest()
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	return m
}

// exCreate posts a body: []byte as is, anything else as JSON.
func exCreate(t *testing.T, s *system, key string, body any) response {
	t.Helper()
	b, ok := body.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	return s.request(t, "POST", exPath, key, b, nil)
}

// exAccepted checks a 202 and its body, exactly {exportId, status: pending,
// dataset, createdAt}, and returns the export id.
func exAccepted(t *testing.T, r response) string {
	t.Helper()
	if r.Status != http.StatusAccepted {
		t.Fatalf("status %d, want 202: %s", r.Status, r.Body)
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("202 body %s: %v", r.Body, err)
	}
	if keys := slices.Sorted(maps.Keys(m)); !slices.Equal(keys, []string{"createdAt", "dataset", "exportId", "status"}) {
		t.Fatalf("202 body keys %v: %s", keys, r.Body)
	}
	id, _ := m["exportId"].(string)
	if _, err := uuid.Parse(id); err != nil || m["status"] != "pending" || (m["dataset"] != "monitoring_metrics" && m["dataset"] != "balance_ledger") {
		t.Fatalf("202 body %s", r.Body)
	}
	created, _ := m["createdAt"].(string)
	at, err := time.Parse(time.RFC3339Nano, created)
	if err != nil || !strings.HasSuffix(created, "Z") || time.Since(at).Abs() > time.Minute {
		t.Fatalf("createdAt %q is not a recent UTC timestamp: %v", created, err)
	}
	return id
}

// exDetail is an entry of an error's details.
type exDetail struct {
	Code    string          `json:"code"`
	Field   string          `json:"field"`
	Message string          `json:"message"`
	Value   json.RawMessage `json:"value"`
}

// String is "code@field", with "=value" (JSON) when the detail has one.
func (d exDetail) String() string {
	s := d.Code + "@" + d.Field
	if d.Value != nil {
		s += "=" + string(d.Value)
	}
	return s
}

// exError checks the status and the shape of an exports error body: exactly
// {error: {code, message, details}}, details an array whose entries have a
// code, a field, a message and at most a value. It returns the code and the
// details.
func exError(t *testing.T, r response, status int) (string, []exDetail) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &top); err != nil || len(top) != 1 || top["error"] == nil {
		t.Fatalf("error body must be exactly {error}: %s", r.Body)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(top["error"], &inner); err != nil {
		t.Fatalf("error is not an object: %s", r.Body)
	}
	if keys := slices.Sorted(maps.Keys(inner)); !slices.Equal(keys, []string{"code", "details", "message"}) {
		t.Fatalf("error keys %v, want code, details, message: %s", keys, r.Body)
	}
	var code, msg string
	if json.Unmarshal(inner["code"], &code) != nil || code == "" || json.Unmarshal(inner["message"], &msg) != nil || msg == "" {
		t.Fatalf("error code and message must be non-empty strings: %s", r.Body)
	}
	var raw []map[string]json.RawMessage
	if !bytes.HasPrefix(bytes.TrimSpace(inner["details"]), []byte("[")) || json.Unmarshal(inner["details"], &raw) != nil {
		t.Fatalf("details must be an array: %s", r.Body)
	}
	details := make([]exDetail, len(raw))
	for i, d := range raw {
		for k := range d {
			if k != "code" && k != "field" && k != "message" && k != "value" {
				t.Fatalf("detail %d has key %q: %s", i, k, r.Body)
			}
		}
		b, _ := json.Marshal(d)
		if err := json.Unmarshal(b, &details[i]); err != nil || details[i].Code == "" || details[i].Field == "" || details[i].Message == "" {
			t.Fatalf("detail %d needs a code, a field and a message (strings): %s", i, r.Body)
		}
	}
	return code, details
}

// exView is the body of GET /export-service/exports/{id}.
type exView = exports.View

func exGet(t *testing.T, s *system, key, id string) (exView, response) {
	t.Helper()
	r := s.request(t, "GET", exPath+"/"+id, key, nil, nil)
	var v exView
	if r.Status == http.StatusOK {
		if err := json.Unmarshal(r.Body, &v); err != nil {
			t.Fatalf("GET %s: %v: %s", id, err, r.Body)
		}
	}
	return v, r
}

// exCompleted polls an export until it is completed (failing on failed or
// an unknown status) and returns that view, whose URL is fresh.
func exCompleted(t *testing.T, s *system, id string) exView {
	t.Helper()
	var v exView
	testenv.Eventually(t, 60*time.Second, func() error {
		var r response
		v, r = exGet(t, s, s.AdvancedKey, id)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: status %d: %s", id, r.Status, r.Body)
		}
		switch v.Status {
		case "completed":
			return nil
		case "pending", "running":
			return fmt.Errorf("export %s is %s", id, v.Status)
		}
		t.Fatalf("export %s: %s", id, r.Body)
		return nil
	})
	if v.ExportID != id || v.RowCount == nil || v.SizeBytes == nil || v.URL == "" || v.URLExpiresAt == nil || v.CompletedAt == nil || v.Error != nil {
		t.Fatalf("completed export %+v", v)
	}
	return v
}

// exDownload fetches a presigned URL with plain net/http (no credentials).
func exDownload(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// exExpectNotFound checks a 404 export_not_found.
func exExpectNotFound(t *testing.T, s *system, key, id string) {
	t.Helper()
	_, r := exGet(t, s, key, id)
	if code, details := exError(t, r, http.StatusNotFound); code != "export_not_found" || len(details) != 0 {
		t.Fatalf("GET %q: %s", id, r.Body)
	}
}

// TestExportsValidation: every rule of the request answers 422 with its
// code and the fields at fault, in the exports error shape; the boundaries
// are accepted; the datasets endpoint lists exactly the spec's columns,
// then the metrics Endcap adds.
func TestExportsValidation(t *testing.T) {
	s := startSystem(t, exConfig(t))
	key := s.AdvancedKey

	// 28 dimensions: the 27 allowed plus one; 20 metrics: the 19 plus one.
	dims28 := append(slices.Clone(exSpecDimensions), "country")
	metrics20 := append(slices.Clone(exSpecMetrics), "revenue")

	cases := []struct {
		name string
		body func() any
		code string   // top-level error.code; "" for an accepted request
		want []string // details as "code@field[=value]", in order
	}{
		{"missing dataset", func() any { return exWith("dataset", nil) }, "invalid_dataset", []string{"invalid_dataset@dataset"}},
		{"null dataset", func() any { return exWith("dataset", json.RawMessage("null")) }, "invalid_dataset", []string{"invalid_dataset@dataset"}},
		{"wrong dataset", func() any { return exWith("dataset", "monitoring") }, "invalid_dataset", []string{`invalid_dataset@dataset="monitoring"`}},
		{"no dimensions", func() any { return exWith("dimensions", []string{}) }, "invalid_dimensions", []string{"invalid_dimensions@dimensions"}},
		{"missing dimensions", func() any { return exWith("dimensions", nil) }, "invalid_dimensions", []string{"invalid_dimensions@dimensions"}},
		{"28 dimensions", func() any { return exWith("dimensions", dims28) }, "invalid_dimensions",
			[]string{"invalid_dimensions@dimensions", `unknown_dimension@dimensions[27]="country"`}},
		{"duplicate dimension", func() any { return exWith("dimensions", []string{"day_local", "entity_id", "vendor_id", "day_local"}) },
			"duplicate_value", []string{`duplicate_value@dimensions[3]="day_local"`}},
		{"unknown dimension", func() any { return exWith("dimensions", []string{"day_local", "country"}) },
			"unknown_dimension", []string{`unknown_dimension@dimensions[1]="country"`}},
		{"metric as dimension", func() any { return exWith("dimensions", []string{"clicks"}) },
			"unknown_dimension", []string{`unknown_dimension@dimensions[0]="clicks"`}},
		{"no metrics", func() any { return exWith("metrics", []string{}) }, "invalid_metrics", []string{"invalid_metrics@metrics"}},
		{"missing metrics", func() any { return exWith("metrics", nil) }, "invalid_metrics", []string{"invalid_metrics@metrics"}},
		{"20 metrics", func() any { return exWith("metrics", metrics20) }, "invalid_metrics",
			[]string{"invalid_metrics@metrics", `unknown_metric@metrics[19]="revenue"`}},
		{"duplicate metric", func() any { return exWith("metrics", []string{"impressions", "clicks", "impressions"}) },
			"duplicate_value", []string{`duplicate_value@metrics[2]="impressions"`}},
		{"unknown metric", func() any { return exWith("metrics", []string{"clicks", "revenue"}) },
			"unknown_metric", []string{`unknown_metric@metrics[1]="revenue"`}},
		{"granularity day", func() any { return exWith("granularity", "day") }, "invalid_granularity", []string{`invalid_granularity@granularity="day"`}},
		{"granularity hour_local", func() any { return exWith("granularity", "hour_local") }, "invalid_granularity", []string{`invalid_granularity@granularity="hour_local"`}},
		{"missing granularity", func() any { return exWith("granularity", nil) }, "invalid_granularity", []string{"invalid_granularity@granularity"}},
		{"startDate 2026-1-5", func() any { return exWith("startDate", "2026-1-5") }, "invalid_date", []string{`invalid_date@startDate="2026-1-5"`}},
		{"endDate 2026-13-01", func() any { return exWith("endDate", "2026-13-01") }, "invalid_date", []string{`invalid_date@endDate="2026-13-01"`}},
		{"startDate empty", func() any { return exWith("startDate", "") }, "invalid_date", []string{"invalid_date@startDate"}},
		{"endDate missing", func() any { return exWith("endDate", nil) }, "invalid_date", []string{"invalid_date@endDate"}},
		{"startDate with a time", func() any { return exWith("startDate", exDay(-1)+"T00:00:00Z") }, "invalid_date",
			[]string{fmt.Sprintf(`invalid_date@startDate=%q`, exDay(-1)+"T00:00:00Z")}},
		{"32-day window", func() any { return exWith("startDate", exDay(-31), "endDate", exDay(0)) }, "date_range_too_long",
			[]string{fmt.Sprintf(`date_range_too_long@endDate=%q`, exDay(0))}},
		{"31-day window", func() any { return exWith("startDate", exDay(-30), "endDate", exDay(0)) }, "", nil},
		{"start 121 days ago", func() any { return exWith("startDate", exDay(-121), "endDate", exDay(-100)) }, "start_date_too_old",
			[]string{fmt.Sprintf(`start_date_too_old@startDate=%q`, exDay(-121))}},
		{"start 120 days ago", func() any { return exWith("startDate", exDay(-120), "endDate", exDay(-100)) }, "", nil},
		{"end before start", func() any { return exWith("startDate", exDay(-1), "endDate", exDay(-2)) }, "end_date_before_start_date",
			[]string{fmt.Sprintf(`end_date_before_start_date@endDate=%q`, exDay(-2))}},
		{"one-day window", func() any { return exWith("startDate", exDay(-2), "endDate", exDay(-2)) }, "", nil},
		{"start after tomorrow", func() any { return exWith("startDate", exDay(2), "endDate", exDay(2)) }, "start_date_in_future",
			[]string{fmt.Sprintf(`start_date_in_future@startDate=%q`, exDay(2))}},
		{"start tomorrow", func() any { return exWith("startDate", exDay(1), "endDate", exDay(1)) }, "", nil},
		{"format xlsx", func() any { return exWith("format", "xlsx") }, "invalid_format", []string{`invalid_format@format="xlsx"`}},
		{"format csv", func() any { return exWith("format", "csv") }, "", nil},
		{"format parquet", func() any { return exWith("format", "parquet") }, "", nil},
		{"all 27 dimensions and 19 metrics", func() any { return exWith("dimensions", exSpecDimensions, "metrics", exSpecMetrics) }, "", nil},
		{"dimensions as a string", func() any { return exWith("dimensions", "day_local") }, "invalid_request", []string{"invalid_request@dimensions"}},
		{"startDate as a number", func() any { return exWith("startDate", 20260105) }, "invalid_request", []string{"invalid_request@startDate"}},
		{"two wrong types", func() any { return exWith("metrics", map[string]int{"clicks": 1}, "format", true) }, "invalid_request",
			[]string{"invalid_request@metrics", "invalid_request@format"}},
		{"not JSON", func() any { return []byte("dataset=monitoring_metrics") }, "invalid_request", []string{"invalid_request@body"}},
		{"truncated JSON", func() any { return []byte(`{"dataset": "monitoring_metrics"`) }, "invalid_request", []string{"invalid_request@body"}},
		{"JSON array", func() any { return []byte(`[]`) }, "invalid_request", []string{"invalid_request@body"}},
		{"JSON null", func() any { return []byte(`null`) }, "invalid_request", []string{"invalid_request@body"}},
		{"empty body", func() any { return []byte(``) }, "invalid_request", []string{"invalid_request@body"}},
		{"empty object", func() any { return map[string]any{} }, "invalid_dataset", []string{
			"invalid_dataset@dataset", "invalid_dimensions@dimensions", "invalid_metrics@metrics",
			"invalid_granularity@granularity", "invalid_date@startDate", "invalid_date@endDate"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := exCreate(t, s, key, c.body())
			if c.code == "" {
				exAccepted(t, r)
				return
			}
			code, details := exError(t, r, http.StatusUnprocessableEntity)
			got := make([]string, len(details))
			for i, d := range details {
				got[i] = d.String()
			}
			if code != c.code || !slices.Equal(got, c.want) {
				t.Fatalf("code %q details %q\nwant code %q details %q\nbody %s", code, got, c.code, c.want, r.Body)
			}
		})
	}

	t.Run("keys", func(t *testing.T) {
		body, _ := json.Marshal(exRequest())
		if r := s.request(t, "POST", exPath, "", body, nil); r.Status != http.StatusUnauthorized {
			t.Fatalf("no key: %d %s", r.Status, r.Body)
		}
		if r := s.request(t, "POST", exPath, s.MarketplaceKey, body, nil); r.Status != http.StatusForbidden {
			t.Fatalf("marketplace key: %d %s", r.Status, r.Body)
		}
		if r := s.request(t, "GET", exDatasetsPath, s.MarketplaceKey, nil, nil); r.Status != http.StatusForbidden {
			t.Fatalf("marketplace key on datasets: %d %s", r.Status, r.Body)
		}
	})

	t.Run("datasets", func(t *testing.T) {
		r := s.request(t, "GET", exDatasetsPath, key, nil, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		type column struct{ Name, Type, Description string }
		var body struct {
			Datasets []struct {
				Name          string   `json:"name"`
				Description   string   `json:"description"`
				Granularities []string `json:"granularities"`
				Dimensions    []column `json:"dimensions"`
				Metrics       []column `json:"metrics"`
			} `json:"datasets"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Datasets) != 2 {
			t.Fatalf("want two datasets: %v: %s", err, r.Body)
		}
		ds := body.Datasets[0]
		if ds.Name != "monitoring_metrics" || ds.Description == "" || !slices.Equal(ds.Granularities, []string{"day_local"}) {
			t.Fatalf("dataset %s %q %v", ds.Name, ds.Description, ds.Granularities)
		}
		names := func(what string, cols []column) []string {
			out := make([]string, len(cols))
			for i, c := range cols {
				if c.Type == "" || c.Description == "" {
					t.Errorf("%s %q has no type or description", what, c.Name)
				}
				out[i] = c.Name
			}
			return out
		}
		if got := names("dimension", ds.Dimensions); !slices.Equal(got, exSpecDimensions) {
			t.Errorf("dimensions\n got %q\nwant %q (spec)", got, exSpecDimensions)
		}
		if got, want := names("metric", ds.Metrics), append(slices.Clone(exSpecMetrics), exExtensionMetrics...); !slices.Equal(got, want) {
			t.Errorf("metrics\n got %q\nwant %q (spec, then Endcap's extensions)", got, want)
		}
		lg := body.Datasets[1]
		if lg.Name != "balance_ledger" || lg.Description == "" || !slices.Equal(lg.Granularities, []string{"movement"}) {
			t.Fatalf("dataset %s %q %v", lg.Name, lg.Description, lg.Granularities)
		}
		if got := names("dimension", lg.Dimensions); !slices.Equal(got, ledgerDimensions) {
			t.Errorf("ledger dimensions %q, want %q", got, ledgerDimensions)
		}
		if got := names("metric", lg.Metrics); !slices.Equal(got, ledgerMetrics) {
			t.Errorf("ledger metrics %q, want %q", got, ledgerMetrics)
		}
	})
}

// TestExportsQuota: each marketplace may have ExportDailyQuota exports
// accepted per UTC day; rejected requests do not count, and the next one
// is 429 quota_exceeded with a Retry-After up to the next UTC midnight.
func TestExportsQuota(t *testing.T) {
	cfg := exConfig(t)
	cfg.ExportDailyQuota = 3
	s := startSystem(t, cfg)

	// Invalid requests first: none of them counts.
	invalid := []any{
		[]byte("not json"),
		exWith("format", "xlsx"),
		exWith("dimensions", []string{}),
		exWith("startDate", exDay(-40)),
		exWith("granularity", "hour"),
	}
	for _, b := range invalid {
		exError(t, exCreate(t, s, s.AdvancedKey, b), http.StatusUnprocessableEntity)
	}
	checkQuota := func(key string) {
		t.Helper()
		for range cfg.ExportDailyQuota {
			exAccepted(t, exCreate(t, s, key, exRequest()))
		}
		for range 2 {
			r := exCreate(t, s, key, exRequest())
			code, details := exError(t, r, http.StatusTooManyRequests)
			if code != "quota_exceeded" || len(details) != 0 {
				t.Fatalf("over quota: %s", r.Body)
			}
			ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
			now := time.Now().UTC()
			untilMidnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now)
			if err != nil || ra < 1 || time.Duration(ra)*time.Second-untilMidnight > 5*time.Second || untilMidnight-time.Duration(ra)*time.Second > 5*time.Second {
				t.Fatalf("Retry-After %q, want about %s (next UTC midnight)", r.Header.Get("Retry-After"), untilMidnight)
			}
		}
		// Validation still comes first once the quota is used.
		if code, _ := exError(t, exCreate(t, s, key, exWith("format", "xlsx")), http.StatusUnprocessableEntity); code != "invalid_format" {
			t.Fatalf("invalid request over quota: code %q", code)
		}
	}
	checkQuota(s.AdvancedKey)
	// Another marketplace has a quota of its own.
	checkQuota(otherMarketplace(t, s))
}

// exEvents runs one CPC auction with a winner in a new marketplace's
// catalog and posts an impression and a click on it; it returns the
// campaign id and the instant the events carry once both are in ClickHouse.
func exEvents(t *testing.T, s *system) (string, time.Time) {
	t.Helper()
	key := s.AdvancedKey
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key, `{"vendors":[{"id":"v1","name":"Vendor One"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[{"id":"p1","name":"P1","vendors":["v1"],"active":true}]}`, nil), 200)
	camp := auCampaign(t, s, "v1", `{"name":"Exported","type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`)
	auBid(t, s, camp, "product", "p1", "0.03")
	res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]}}]}`)
	if len(res) != 1 || len(res[0].Winners) != 1 {
		t.Fatalf("auction: %+v", res)
	}
	bid := res[0].Winners[0].ResolvedBidID
	occurred := time.Now().Add(-time.Second)
	at := ts(occurred)
	events := fmt.Sprintf(`{"impressions":[{"id":"ex-imp","occurredAt":%q,"opaqueUserId":"u-ex","resolvedBidId":%q}],
		"clicks":[{"id":"ex-clk","occurredAt":%q,"opaqueUserId":"u-ex","resolvedBidId":%q}]}`, at, bid, at, bid)
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(events), nil), 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := s.count(t, "SELECT uniqExact(event_id) FROM interactions_raw WHERE marketplace_id = ?", s.Marketplace.ID); n != 2 {
			return fmt.Errorf("%d interactions, want 2", n)
		}
		return nil
	})
	return camp, occurred
}

// exParquet reads a Parquet file: its column names and its rows.
func exParquet(t *testing.T, data []byte) ([]string, []parquet.Row) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("not a Parquet file: %v", err)
	}
	var cols []string
	for _, fd := range f.Schema().Fields() {
		cols = append(cols, fd.Name())
	}
	var rows []parquet.Row
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		buf := make([]parquet.Row, rg.NumRows())
		n, err := rr.ReadRows(buf)
		rr.Close()
		if int64(n) != rg.NumRows() || (err != nil && err != io.EOF) {
			t.Fatalf("read %d of %d rows: %v", n, rg.NumRows(), err)
		}
		rows = append(rows, buf[:n]...)
	}
	return cols, rows
}

// TestExportsLifecycle: a CSV and a Parquet export of a window with one
// sponsored impression and click are completed; their files download with
// plain HTTP, hold the requested columns in the order sent and the
// interactions; only the owning marketplace sees the exports.
func TestExportsLifecycle(t *testing.T) {
	cfg := exConfig(t)
	// Every export recomputes its days: the events just posted are in it.
	cfg.ExportMaxStaleness = 0
	s := startSystem(t, cfg)
	key := s.AdvancedKey
	// The events' local day is that of the instant they carry (not of a
	// later now, which may be past the marketplace's midnight).
	camp, occurred := exEvents(t, s)
	l := occurred.In(s.Marketplace.Location())
	localDay := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC)

	// Columns in an order of their own (not the dataset's).
	// The window's dates, taken once: the checks below compare with these,
	// not with dates of a later now (past midnight UTC).
	start, end := exDay(-3), exDay(0)
	csvReq := exWith("dimensions", []string{"day_local", "campaign_id"}, "metrics", []string{"clicks", "impressions", "ctr"},
		"startDate", start, "endDate", end)
	// Every column; the metrics in reverse.
	revMetrics := slices.Clone(exSpecMetrics)
	slices.Reverse(revMetrics)
	pqReq := exWith("dimensions", exSpecDimensions, "metrics", revMetrics, "format", "parquet",
		"startDate", start, "endDate", exDay(1))

	before := time.Now()
	csvID := exAccepted(t, exCreate(t, s, key, csvReq))
	pqID := exAccepted(t, exCreate(t, s, key, pqReq))

	// The pending export is visible at once.
	if v, r := exGet(t, s, key, csvID); r.Status != http.StatusOK || v.ExportID != csvID || v.Dataset != "monitoring_metrics" ||
		!slices.Contains([]exports.Status{exports.StatusPending, exports.StatusRunning, exports.StatusCompleted}, v.Status) {
		t.Fatalf("GET after create: %d %s", r.Status, r.Body)
	}

	t.Run("csv", func(t *testing.T) {
		v := exCompleted(t, s, csvID)
		if v.Format != "csv" || v.Granularity != "day_local" || v.StartDate != start || v.EndDate != end ||
			!slices.Equal(v.Dimensions, []string{"day_local", "campaign_id"}) || !slices.Equal(v.Metrics, []string{"clicks", "impressions", "ctr"}) {
			t.Fatalf("completed export %+v", v)
		}
		if *v.SizeBytes <= 0 || *v.RowCount != 1 {
			t.Fatalf("rowCount %d sizeBytes %d, want 1 row and some bytes", *v.RowCount, *v.SizeBytes)
		}
		if v.URLExpiresAt.Before(before.Add(cfg.ReportURLLifetime).Add(-time.Second)) || v.URLExpiresAt.After(time.Now().Add(cfg.ReportURLLifetime)) {
			t.Fatalf("urlExpiresAt %s, want about now + %s", v.URLExpiresAt, cfg.ReportURLLifetime)
		}
		st, hdr, data := exDownload(t, v.URL)
		if st != http.StatusOK || int64(len(data)) != *v.SizeBytes {
			t.Fatalf("download: status %d, %d bytes (sizeBytes %d): %.300s", st, len(data), *v.SizeBytes, data)
		}
		if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
			t.Errorf("Content-Type %q", ct)
		}
		want := "day_local,campaign_id,clicks,impressions,ctr\n" + localDay.Format(time.DateOnly) + "," + camp + ",1,1,1\n"
		if string(data) != want {
			t.Fatalf("file\n%s\nwant\n%s", data, want)
		}
	})

	t.Run("parquet", func(t *testing.T) {
		v := exCompleted(t, s, pqID)
		if v.Format != "parquet" || !slices.Equal(v.Dimensions, exSpecDimensions) || !slices.Equal(v.Metrics, revMetrics) {
			t.Fatalf("completed export %+v", v)
		}
		st, _, data := exDownload(t, v.URL)
		if st != http.StatusOK || *v.SizeBytes <= 0 || int64(len(data)) != *v.SizeBytes {
			t.Fatalf("download: status %d, %d bytes (sizeBytes %d)", st, len(data), *v.SizeBytes)
		}
		cols, rows := exParquet(t, data)
		if want := append(slices.Clone(exSpecDimensions), revMetrics...); !slices.Equal(cols, want) {
			t.Fatalf("columns\n got %q\nwant %q", cols, want)
		}
		if int64(len(rows)) != *v.RowCount || len(rows) == 0 {
			t.Fatalf("%d rows, rowCount %d", len(rows), *v.RowCount)
		}
		// Every row is the campaign's on the local day; the rows add up to
		// one impression and one click.
		col := func(name string) int { return slices.Index(cols, name) }
		var clicks, impressions int64
		for _, row := range rows {
			for _, val := range row {
				switch val.Column() {
				case col("campaign_id"):
					if val.String() != camp {
						t.Errorf("campaign_id %q, want %q", val.String(), camp)
					}
				case col("day_local"):
					if got := time.Unix(int64(val.Int32())*86400, 0).UTC(); !got.Equal(localDay) {
						t.Errorf("day_local %s, want %s", got, localDay)
					}
				case col("clicks"):
					clicks += val.Int64()
				case col("impressions"):
					impressions += val.Int64()
				}
			}
		}
		if clicks != 1 || impressions != 1 {
			t.Fatalf("clicks %d impressions %d, want 1 and 1", clicks, impressions)
		}
	})

	t.Run("not found", func(t *testing.T) {
		other := otherMarketplace(t, s)
		exExpectNotFound(t, s, other, csvID)
		exExpectNotFound(t, s, other, pqID)
		exExpectNotFound(t, s, key, uuid.NewString())
		exExpectNotFound(t, s, key, "not-a-uuid")
		// The owner still sees it.
		if _, r := exGet(t, s, key, csvID); r.Status != http.StatusOK {
			t.Fatalf("owner: %d %s", r.Status, r.Body)
		}
	})
}

// TestExportsURLExpiry: a completed export's URL stops working after
// urlExpiresAt (the object store checks the signature); a new GET of the
// export hands out a new URL that works.
func TestExportsURLExpiry(t *testing.T) {
	cfg := exConfig(t)
	cfg.ReportURLLifetime = 2 * time.Second
	s := startSystem(t, cfg)
	id := exAccepted(t, exCreate(t, s, s.AdvancedKey, exWith("startDate", exDay(0), "endDate", exDay(0))))

	v := exCompleted(t, s, id)
	if until := time.Until(v.URLExpiresAt.Time); until > cfg.ReportURLLifetime || until < -time.Second {
		t.Fatalf("urlExpiresAt %s is %s away, want at most %s", v.URLExpiresAt, until, cfg.ReportURLLifetime)
	}
	st, _, first := exDownload(t, v.URL)
	if st != http.StatusOK || int64(len(first)) != *v.SizeBytes {
		t.Fatalf("fresh URL: status %d, %d bytes (sizeBytes %d): %.300s", st, len(first), *v.SizeBytes, first)
	}

	time.Sleep(time.Until(v.URLExpiresAt.Time) + time.Second)
	if st, _, body := exDownload(t, v.URL); st != http.StatusForbidden {
		t.Fatalf("expired URL: status %d, want 403: %.300s", st, body)
	}

	again := exCompleted(t, s, id)
	if again.URL == v.URL || !again.URLExpiresAt.After(v.URLExpiresAt.Time) {
		t.Fatalf("GET after expiry gave the same URL or expiry: %s %s", again.URL, again.URLExpiresAt)
	}
	st, _, data := exDownload(t, again.URL)
	if st != http.StatusOK || !bytes.Equal(data, first) {
		t.Fatalf("new URL: status %d, %d bytes, want the same %d bytes", st, len(data), len(first))
	}
}

// exListBody is the body of GET /export-service/exports.
type exListBody struct {
	HasMore  bool     `json:"hasMore"`
	Exports  []exView `json:"exports"`
	NextPage *string  `json:"nextPage"`
}

// exList gets a page of the list (query: the query string, without "?").
func exList(t *testing.T, s *system, key, query string) (exListBody, response) {
	t.Helper()
	path := exPath
	if query != "" {
		path += "?" + query
	}
	r := s.request(t, "GET", path, key, nil, nil)
	var b exListBody
	if r.Status == http.StatusOK {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(r.Body, &raw); err != nil {
			t.Fatalf("list: %v: %s", err, r.Body)
		}
		if keys := slices.Sorted(maps.Keys(raw)); !slices.Equal(keys, []string{"exports", "hasMore", "nextPage"}) ||
			!bytes.HasPrefix(raw["exports"], []byte("[")) {
			t.Fatalf("list body keys %v: %s", keys, r.Body)
		}
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatalf("list: %v: %s", err, r.Body)
		}
		if b.HasMore != (b.NextPage != nil) {
			t.Fatalf("hasMore %v with nextPage %v", b.HasMore, b.NextPage)
		}
	}
	return b, r
}

// exIDs are the ids of a page.
func exIDs(vs []exView) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ExportID
	}
	return out
}

// exNorm normalises golden exchanges of exports: the values that change
// from run to run are checked, then replaced by stand-ins of the same kind
// (so that the golden exchange still conforms to the OpenAPI document):
// ids (UUIDs) by numbered stand-in UUIDs, in the body and the path alike,
// timestamps (in internal/timestamp's one form) by one instant, dates
// (YYYY-MM-DD) by one date, presigned URLs by one URL, counts and
// latencies by 0.
type exNorm struct{ ids map[string]string }

const (
	exStandInTime = "2000-01-01T00:00:00.000Z"
	exStandInDate = "2000-01-01"
	exStandInURL  = "https://s3.example.com/endcap/object?X-Amz-Signature=…"
)

// exchange is r with its body and path normalised.
func (n *exNorm) exchange(t *testing.T, r response) response {
	t.Helper()
	var v any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	v = n.value(t, "", v)
	r.Body, _ = json.Marshal(v)
	for id, standIn := range n.ids {
		r.Path = strings.ReplaceAll(r.Path, id, standIn)
	}
	return r
}

func (n *exNorm) id(s string) string {
	if n.ids == nil {
		n.ids = map[string]string{}
	}
	standIn, ok := n.ids[s]
	if !ok {
		standIn = fmt.Sprintf("00000000-0000-4000-8000-%012d", len(n.ids)+1)
		n.ids[s] = standIn
	}
	return standIn
}

// value normalises v, the value of the property k.
func (n *exNorm) value(t *testing.T, k string, v any) any {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) { // stand-ins numbered in the golden file's order
			v[k] = n.value(t, k, v[k])
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = n.value(t, k, e)
		}
		return v
	case nil:
		return nil
	}
	s, _ := v.(string)
	switch k {
	case "exportId", "id", "webhookId", "eventId":
		if _, err := uuid.Parse(s); err != nil {
			t.Errorf("%s %q is not a UUID", k, s)
		}
		return n.id(s)
	case "createdAt", "startedAt", "completedAt", "failedAt", "dataAsOf", "urlExpiresAt",
		"timestamp", "eventTimestamp", "lastAttemptAt", "nextAttemptAt", "finishedAt":
		if !timestamp.Valid(s) {
			t.Errorf("%s %q is not a timestamp in the form %s", k, s, timestamp.Layout)
		}
		return exStandInTime
	case "startDate", "endDate":
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			t.Errorf("%s %q is not a date", k, s)
		}
		return exStandInDate
	case "url":
		if !strings.HasPrefix(s, "http") {
			t.Errorf("url %q", s)
		}
		return exStandInURL
	case "rowCount", "sizeBytes", "lastLatencyMs":
		if _, ok := v.(float64); !ok {
			t.Errorf("%s %v is not a number", k, v)
		}
		return 0
	}
	return v
}

// exSameJSON reports whether a and b are the same JSON value.
func exSameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// exSameExport fails unless two bodies of one export are the same but for
// its presigned URL, made afresh each time.
func exSameExport(t *testing.T, what string, got, want []byte) {
	t.Helper()
	strip := func(b []byte) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v: %s", what, err, b)
		}
		delete(m, "url")
		delete(m, "urlExpiresAt")
		return m
	}
	if g, w := strip(got), strip(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s\n got %v\nwant %v", what, g, w)
	}
}

// TestExportsList: GET /export-service/exports lists a marketplace's
// exports newest first, pages with signed cursors that continue only their
// own list, filters by status, dataset and a created range, and refuses
// bad parameters with every problem in the exports error shape.
func TestExportsList(t *testing.T) {
	s := startSystem(t, exConfig(t))
	key := s.AdvancedKey

	// Empty: no export yet.
	b, r := exList(t, s, key, "")
	if r.Status != http.StatusOK || b.HasMore || len(b.Exports) != 0 {
		t.Fatalf("empty list: %d %s", r.Status, r.Body)
	}
	golden(t, "exports_list_empty.json", r)

	// Seven exports, some a few milliseconds apart, some in the same one.
	var created []string
	for i := range 7 {
		body := exWith("startDate", exDay(-i), "endDate", exDay(0))
		if i%3 == 1 {
			body["format"] = "parquet"
		}
		created = append(created, exAccepted(t, exCreate(t, s, key, body)))
	}
	views := map[string]exView{}
	bodies := map[string][]byte{}
	for _, id := range created {
		views[id] = exCompleted(t, s, id)
		_, r := exGet(t, s, key, id)
		bodies[id] = r.Body
	}
	// The order: createdAt, then exportId, both descending.
	want := slices.Clone(created)
	slices.SortFunc(want, func(a, b string) int {
		if c := views[b].CreatedAt.Compare(views[a].CreatedAt.Time); c != 0 {
			return c
		}
		return strings.Compare(b, a)
	})

	t.Run("pages", func(t *testing.T) {
		var got []string
		query := "limit=3"
		for pages := 0; ; pages++ {
			b, r := exList(t, s, key, query)
			if r.Status != http.StatusOK || pages > 3 {
				t.Fatalf("page %d: %d %s", pages, r.Status, r.Body)
			}
			if n := len(b.Exports); (b.HasMore && n != 3) || n == 0 {
				t.Fatalf("page %d: %d exports, hasMore %v", pages, n, b.HasMore)
			}
			var raw struct{ Exports []json.RawMessage }
			if err := json.Unmarshal(r.Body, &raw); err != nil {
				t.Fatal(err)
			}
			for i, v := range b.Exports {
				exSameExport(t, "list entry "+v.ExportID, raw.Exports[i], bodies[v.ExportID])
			}
			got = append(got, exIDs(b.Exports)...)
			if !b.HasMore {
				break
			}
			query = "limit=3&next_page=" + url.QueryEscape(*b.NextPage)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("paged list %v\nwant %v", got, want)
		}
		// The default page holds them all; 100 is the largest page.
		if b, _ := exList(t, s, key, ""); !slices.Equal(exIDs(b.Exports), want) || b.HasMore {
			t.Fatalf("default page %v, want %v", exIDs(b.Exports), want)
		}
		if b, _ := exList(t, s, key, "limit=100"); !slices.Equal(exIDs(b.Exports), want) {
			t.Fatalf("limit 100: %v", exIDs(b.Exports))
		}
		b, r := exList(t, s, key, "limit=1")
		if !slices.Equal(exIDs(b.Exports), want[:1]) || !b.HasMore {
			t.Fatalf("limit 1: %v", exIDs(b.Exports))
		}
		r = (&exNorm{}).exchange(t, r)
		r.Body = bytes.Replace(r.Body, []byte(`"nextPage":"`+*b.NextPage+`"`), []byte(`"nextPage":"CURSOR"`), 1) // it names the run's marketplace
		golden(t, "exports_list_page.json", r)
	})

	t.Run("filters", func(t *testing.T) {
		at := func(id string) string { return url.QueryEscape(views[id].CreatedAt.Format(time.RFC3339Nano)) }
		oldest, newest := want[len(want)-1], want[0]
		var after []string // created at or after want[3]'s createdAt
		for _, id := range want {
			if !views[id].CreatedAt.Before(views[want[3]].CreatedAt.Time) {
				after = append(after, id)
			}
		}
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"status=completed", want},
			{"status=pending", nil},
			{"status=failed", nil},
			{"dataset=monitoring_metrics", want},
			{"status=completed&dataset=monitoring_metrics", want},
			{"created_from=" + at(want[3]), after},
			{"created_to=" + at(want[3]), want[len(after):]},
			{"created_from=" + at(oldest) + "&created_to=" + url.QueryEscape(views[newest].CreatedAt.Add(time.Millisecond).Format(time.RFC3339Nano)), want},
			{"created_from=" + url.QueryEscape(views[newest].CreatedAt.Add(time.Millisecond).Format(time.RFC3339Nano)), nil},
			// The same instant in another offset.
			{"created_from=" + url.QueryEscape(views[want[3]].CreatedAt.In(time.FixedZone("", -5*3600)).Format(time.RFC3339Nano)), after},
			// Empty values are absent.
			{"status=&dataset=&created_from=&created_to=&limit=&next_page=", want},
		} {
			b, r := exList(t, s, key, tc.query)
			if r.Status != http.StatusOK || !slices.Equal(exIDs(b.Exports), tc.want) || b.HasMore {
				t.Errorf("%s: %d %v, want %v", tc.query, r.Status, exIDs(b.Exports), tc.want)
			}
		}
		// A cursor of a filtered list continues it.
		b, _ := exList(t, s, key, "status=completed&limit=4")
		if !b.HasMore {
			t.Fatal("no next page")
		}
		rest, r := exList(t, s, key, "status=completed&limit=4&next_page="+url.QueryEscape(*b.NextPage))
		if r.Status != http.StatusOK || !slices.Equal(exIDs(rest.Exports), want[4:]) {
			t.Fatalf("second page of a filtered list: %d %v", r.Status, exIDs(rest.Exports))
		}
	})

	t.Run("rejected", func(t *testing.T) {
		b, _ := exList(t, s, key, "limit=2")
		cursor := *b.NextPage
		forged := []byte(cursor)
		forged[len(forged)/2] ^= 'A' ^ 'B'
		if forged[len(forged)/2] == cursor[len(cursor)/2] {
			forged[len(forged)/2] = 'x'
		}
		for _, tc := range []struct {
			golden, query string
			want          []string // code@field
		}{
			{"exports_list_422_all_wrong.json", "status=done&dataset=monitoring&created_from=yesterday&created_to=2026-01-01&limit=0",
				[]string{`invalid_status@status="done"`, `invalid_dataset@dataset="monitoring"`, `invalid_datetime@created_from="yesterday"`,
					`invalid_datetime@created_to="2026-01-01"`, `invalid_limit@limit="0"`}},
			{"exports_list_422_range.json", "created_from=2026-01-02T00:00:00Z&created_to=2026-01-02T01:00:00%2B01:00",
				[]string{`invalid_created_range@created_to="2026-01-02T01:00:00+01:00"`}},
			{"exports_list_422_limit.json", "limit=101", []string{`invalid_limit@limit="101"`}},
			{"exports_list_422_cursor_forged.json", "limit=2&next_page=" + url.QueryEscape(string(forged)), []string{"invalid_cursor@next_page"}},
			{"exports_list_422_cursor_other_filters.json", "status=completed&next_page=" + url.QueryEscape(cursor), []string{"invalid_cursor@next_page"}},
			{"", "limit=ten", []string{`invalid_limit@limit="ten"`}},
			{"", "limit=-5", []string{`invalid_limit@limit="-5"`}},
			{"", "status=completed&status=failed", []string{"invalid_request@status"}},
			{"", "created_from=2026-01-01T00:00:00", []string{`invalid_datetime@created_from="2026-01-01T00:00:00"`}},
			{"", "next_page=" + url.QueryEscape(cursor[:len(cursor)-4]), []string{"invalid_cursor@next_page"}},
			{"", "next_page=" + strings.Repeat("A", 3000), []string{"invalid_cursor@next_page"}},
			{"", "next_page=%C3%28", []string{"invalid_cursor@next_page"}},
		} {
			r := s.request(t, "GET", exPath+"?"+tc.query, key, nil, nil)
			code, details := exError(t, r, http.StatusUnprocessableEntity)
			got := make([]string, len(details))
			for i, d := range details {
				got[i] = d.String()
			}
			if code != details[0].Code || !slices.Equal(got, tc.want) {
				t.Errorf("%s: code %s details %q, want %q", tc.query, code, got, tc.want)
			}
			if tc.golden != "" {
				r.Path = strings.Replace(r.Path, url.QueryEscape(cursor), "CURSOR", 1) // it names the run's marketplace
				r.Path = strings.Replace(r.Path, url.QueryEscape(string(forged)), "CURSOR", 1)
				golden(t, tc.golden, r)
			}
		}
		// Another marketplace's cursor, and its list.
		other := otherMarketplace(t, s)
		r := s.request(t, "GET", exPath+"?limit=2&next_page="+url.QueryEscape(cursor), other, nil, nil)
		if code, _ := exError(t, r, http.StatusUnprocessableEntity); code != "invalid_cursor" {
			t.Errorf("another marketplace's cursor: %s", r.Body)
		}
		if b, r := exList(t, s, other, ""); r.Status != http.StatusOK || len(b.Exports) != 0 {
			t.Errorf("another marketplace sees %d exports: %s", len(b.Exports), r.Body)
		}
		// Keys.
		if r := s.request(t, "GET", exPath, "", nil, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("no key: %d %s", r.Status, r.Body)
		}
		if r := s.request(t, "GET", exPath, s.MarketplaceKey, nil, nil); r.Status != http.StatusForbidden {
			t.Errorf("marketplace key: %d %s", r.Status, r.Body)
		}
		if r := s.request(t, "DELETE", exPath, key, nil, nil); r.Status != http.StatusMethodNotAllowed {
			t.Errorf("DELETE: %d %s", r.Status, r.Body)
		}
	})
}

// TestExportsFreshRequest: events are acknowledged and an export of their
// day is requested at once, with the default settings (the rollup job
// refreshes every minute; it has just run). The completed export either
// holds the events' rows, or says that its data stops before them
// (partial, with a dataAsOf before the events): never a silent 0 rows.
// Its export.completed webhook carries the export as GET answers it.
// exOneWinner makes vendor v1 with product p1, a CPC campaign named name
// bidding on it, and an auction that p1 wins: the campaign's id and the
// winner's resolvedBidId.
func exOneWinner(t *testing.T, s *system, key, name string) (camp, bid string) {
	t.Helper()
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", key, `{"vendors":[{"id":"v1","name":"Vendor One"}]}`, nil), 200)
	cpStatus(t, cpDo(t, s, "PUT", "/public/v1/catalog-search-service/catalogs/products", key, `{"products":[{"id":"p1","name":"P1","vendors":["v1"],"active":true}]}`, nil), 200)
	camp = auCampaign(t, s, "v1", fmt.Sprintf(`{"name":%q,"type":"listings","chargeType":"CPC","dailyBudget":100,"startDate":"2020-01-01T00:00:00Z"}`, name))
	auBid(t, s, camp, "product", "p1", "0.03")
	res := auRun(t, s, "/v2/auctions", `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["p1"]}}]}`)
	if len(res) != 1 || len(res[0].Winners) != 1 {
		t.Fatalf("auction: %+v", res)
	}
	return camp, res[0].Winners[0].ResolvedBidID
}

func TestExportsFreshRequest(t *testing.T) {
	cfg := exConfig(t)
	cfg.WebhookAllowLoopback = true
	// A marketplace where it is noon: the export's day (today) does not
	// end while the test runs, at whatever hour it starts.
	s := ownMarketplace(t, startSystem(t, cfg), "Fresh Market", testenv.NoonZone(time.Now()))
	key := s.AdvancedKey
	rc := newHookReceiver(t)
	r := cpDo(t, s, "POST", bwWhPath, key, fmt.Sprintf(`{"url": %q, "eventTypes": ["export.completed"]}`, rc.srv.URL+"/hooks"), nil)
	cpStatus(t, r, 201)
	hook := bwObj(t, r.Body)["id"].(string)
	camp, bid := exOneWinner(t, s, key, "Fresh")

	// Wait for a run of the rollup job that started less than 20 s ago:
	// the next one is at least 40 s away.
	l := time.Now().In(s.Marketplace.Location())
	day := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
	testenv.Eventually(t, 2*time.Minute, func() error {
		since := time.Now().Add(-20 * time.Second).Unix()
		if n := s.count(t, "SELECT count() FROM rollup_days WHERE day_local = toDate(?) AND computed_at >= toDateTime(?)", day, since); n == 0 {
			return fmt.Errorf("no run of the rollup job since %d", since)
		}
		return nil
	})

	at := ts(time.Now().Add(-time.Second))
	events := fmt.Sprintf(`{"impressions":[{"id":"fr-imp","occurredAt":%q,"opaqueUserId":"u-fr","resolvedBidId":%q}],
		"clicks":[{"id":"fr-clk","occurredAt":%q,"opaqueUserId":"u-fr","resolvedBidId":%q}]}`, at, bid, at, bid)
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(events), nil), 200)
	acked := time.Now()
	id := exAccepted(t, exCreate(t, s, key, exWith("dimensions", []string{"day_local", "campaign_id"},
		"metrics", []string{"impressions", "clicks"}, "startDate", day, "endDate", day)))

	v := exCompleted(t, s, id)
	if v.DataAsOf == nil || v.Partial == nil {
		t.Fatalf("completed export without dataAsOf or partial: %+v", v)
	}
	_, _, data := exDownload(t, v.URL)
	want := "day_local,campaign_id,impressions,clicks\n" + day + "," + camp + ",1,1\n"
	switch {
	case string(data) == want:
		t.Logf("complete: the events' row, dataAsOf %s (events acknowledged at %s), completed %s after the request",
			v.DataAsOf, acked, v.CompletedAt.Sub(v.CreatedAt.Time).Round(time.Millisecond))
	case !v.DataAsOf.Before(acked):
		t.Fatalf("dataAsOf %s is after the events were acknowledged (%s), but the file is\n%s\nwant\n%s", v.DataAsOf, acked, data, want)
	case !*v.Partial:
		t.Fatalf("dataAsOf %s is before the events, and the export does not say partial: %+v", v.DataAsOf, v)
	default:
		t.Logf("partial: dataAsOf %s before the events (%s)", v.DataAsOf, acked)
	}
	// The window's day has not ended: the export says so, whatever it holds.
	if !*v.Partial {
		t.Errorf("an export of today is not partial: %+v", v)
	}
	_, r = exGet(t, s, key, id)
	golden(t, "exports_get_completed.json", (&exNorm{}).exchange(t, r))

	testenv.Eventually(t, 30*time.Second, func() error {
		if n := len(rc.ofType("export.completed")); n != 1 {
			return fmt.Errorf("%d export.completed", n)
		}
		return nil
	})
	g := rc.ofType("export.completed")[0]
	if g.err != nil {
		t.Fatal(g.err)
	}
	exSameExport(t, "export.completed data", g.msg.Data, r.Body)
	// The payload as the delivery log keeps it: {type, timestamp, data}.
	var d response
	testenv.Eventually(t, 15*time.Second, func() error {
		var list struct {
			Deliveries []struct{ ID, EventID, Status string }
		}
		r := s.request(t, "GET", bwWhPath+"/"+hook+"/deliveries", key, nil, nil)
		if err := json.Unmarshal(r.Body, &list); err != nil || len(list.Deliveries) != 1 {
			return fmt.Errorf("deliveries (%v): %s", err, r.Body)
		}
		if x := list.Deliveries[0]; x.EventID != g.id || x.Status != "delivered" {
			return fmt.Errorf("delivery %+v, want event %s delivered", x, g.id)
		}
		d = s.request(t, "GET", bwWhPath+"/"+hook+"/deliveries/"+list.Deliveries[0].ID, key, nil, nil)
		return nil
	})
	var sent struct{ Payload json.RawMessage }
	if err := json.Unmarshal(d.Body, &sent); err != nil || !exSameJSON(sent.Payload, g.body) {
		t.Errorf("the delivery's payload is not the body sent (%v):\n%s\n%s", err, sent.Payload, g.body)
	}
	golden(t, "exports_webhook_completed.json", (&exNorm{}).exchange(t, d))
}

// TestExportsProjectorBehind: while the events fold cannot commit (the
// broker refuses its offset commits: its inserts may land, but nothing
// says they are complete), an export of events acknowledged just before it
// waits ENDCAP_EXPORT_FOLD_WAIT and completes partial, with a dataAsOf
// before the events. Once the fold commits again, the next export holds
// the events, with a dataAsOf after them.
func TestExportsProjectorBehind(t *testing.T) {
	env := testenv.Get(t)
	kc, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.RateLimitDefault, cfg.RateLimitCatalog = "5000/1s", "5000/1s"
	cfg.ExportFoldWait = 2 * time.Second
	cfg.ExportDailyQuota = 1000
	var refuse atomic.Bool
	kc.ControlKey(kmsg.OffsetCommit.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kr.(*kmsg.OffsetCommitRequest)
		if req.Group != projections.EventsGroup || !refuse.Load() {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.RebalanceInProgress.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	// A marketplace where it is noon: the export's day (today) does not
	// end while the test runs, at whatever hour it starts.
	s := ownMarketplace(t, startSystem(t, cfg), "Behind Market", testenv.NoonZone(time.Now()))
	key := s.AdvancedKey
	camp, bid := exOneWinner(t, s, key, "Behind")
	l := time.Now().In(s.Marketplace.Location())
	day := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
	exportDay := exWith("dimensions", []string{"day_local", "campaign_id"}, "metrics", []string{"impressions", "clicks"}, "startDate", day, "endDate", day)
	// A first export while the fold keeps up: the day has a watermark.
	first := exCompleted(t, s, exAccepted(t, exCreate(t, s, key, exportDay)))
	if first.DataAsOf == nil || *first.RowCount != 0 {
		t.Fatalf("first export: %+v", first)
	}

	refuse.Store(true)
	at := ts(time.Now().Add(-time.Second))
	events := fmt.Sprintf(`{"impressions":[{"id":"bh-imp","occurredAt":%q,"opaqueUserId":"u-bh","resolvedBidId":%q}],
		"clicks":[{"id":"bh-clk","occurredAt":%q,"opaqueUserId":"u-bh","resolvedBidId":%q}]}`, at, bid, at, bid)
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(events), nil), 200)
	acked := time.Now()
	v := exCompleted(t, s, exAccepted(t, exCreate(t, s, key, exportDay)))
	if v.DataAsOf == nil || !v.DataAsOf.Before(acked) || v.Partial == nil || !*v.Partial {
		t.Fatalf("export while the fold cannot commit: dataAsOf %v partial %v, want partial before %s", v.DataAsOf, v.Partial, acked)
	}
	if took := v.CompletedAt.Sub(v.StartedAt.Time); took < cfg.ExportFoldWait {
		t.Errorf("the export took %s, less than the fold wait %s", took, cfg.ExportFoldWait)
	}

	refuse.Store(false)
	testenv.Eventually(t, 60*time.Second, func() error {
		v := exCompleted(t, s, exAccepted(t, exCreate(t, s, key, exportDay)))
		_, _, data := exDownload(t, v.URL)
		if want := "day_local,campaign_id,impressions,clicks\n" + day + "," + camp + ",1,1\n"; string(data) != want || v.DataAsOf == nil || v.DataAsOf.Before(acked) {
			return fmt.Errorf("dataAsOf %v, file %q", v.DataAsOf, data)
		}
		return nil
	})
}
