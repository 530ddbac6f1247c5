package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/testenv"
	"github.com/endcap/endcap/reporting/exports"
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
	exExtensionMetrics = []string{"budget_refused_impressions", "budget_refused_clicks"}
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
	if _, err := uuid.Parse(id); err != nil || m["status"] != "pending" || m["dataset"] != "monitoring_metrics" {
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
		if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Datasets) != 1 {
			t.Fatalf("want one dataset: %v: %s", err, r.Body)
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
// campaign id once both are in ClickHouse.
func exEvents(t *testing.T, s *system) string {
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
	at := ts(time.Now().Add(-time.Second))
	events := fmt.Sprintf(`{"impressions":[{"id":"ex-imp","occurredAt":%q,"opaqueUserId":"u-ex","resolvedBidId":%q}],
		"clicks":[{"id":"ex-clk","occurredAt":%q,"opaqueUserId":"u-ex","resolvedBidId":%q}]}`, at, bid, at, bid)
	cpStatus(t, s.request(t, "POST", "/v2/events", s.MarketplaceKey, []byte(events), nil), 200)
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := s.count(t, "SELECT uniqExact(event_id) FROM interactions_raw WHERE marketplace_id = ?", s.Marketplace.ID); n != 2 {
			return fmt.Errorf("%d interactions, want 2", n)
		}
		return nil
	})
	return camp
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
	camp := exEvents(t, s)
	l := time.Now().In(s.Marketplace.Location())
	localDay := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, time.UTC)

	// Columns in an order of their own (not the dataset's).
	csvReq := exWith("dimensions", []string{"day_local", "campaign_id"}, "metrics", []string{"clicks", "impressions", "ctr"},
		"startDate", exDay(-3), "endDate", exDay(0))
	// Every column; the metrics in reverse.
	revMetrics := slices.Clone(exSpecMetrics)
	slices.Reverse(revMetrics)
	pqReq := exWith("dimensions", exSpecDimensions, "metrics", revMetrics, "format", "parquet",
		"startDate", exDay(-3), "endDate", exDay(1))

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
		if v.Format != "csv" || v.Granularity != "day_local" || v.StartDate != exDay(-3) || v.EndDate != exDay(0) ||
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
