package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/reporting/reportapi"
	"github.com/endcap/endcap/storage/clickhouse"
)

// reportingRouter serves the Reporting API's routes over svc, the key
// given by the X-Vendor header (a vendor-scoped key when it is set).
func reportingRouter(t *testing.T, svc *reportapi.Service) *gin.Engine {
	t.Helper()
	gin.SetMode(gin.TestMode)
	p := &Public{Limits: NewRateLimiter(nil, nil, quietLog), Cursors: pagination.NewSigner([]byte("0123456789abcdef0123456789abcdef")),
		Log: quietLog, RetryAfter: 2 * time.Second}
	r := gin.New()
	g := r.Group("/public/v1", func(c *gin.Context) {
		c.Set(principalKey, accounts.Principal{Key: accounts.APIKey{ID: "k", Type: accounts.KeyAdvanced, VendorID: c.GetHeader("X-Vendor")},
			Marketplace: accounts.Marketplace{ID: "6f1c3c62-5f0e-4a4c-9a43-7a1f6f1f0a01", Currency: "EUR", Timezone: "Europe/Paris"}})
	}, vendorKeys(p))
	g.GET("/marketplace", func(c *gin.Context) { c.JSON(200, gin.H{}) })
	ReportingRoutes(svc, nil)(g, p)
	return r
}

func rpServe(r http.Handler, path string, hdr ...string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r.ServeHTTP(w, req)
	return w
}

// TestVendorScopedKeys: a vendor-scoped key is refused (403
// vendor_scoped_key) on every /public/v1 route but the vendor, campaign,
// product and interactions reports, and on POST /v2/auctions/explain
// (vendorKeys(nil)); a key of the whole marketplace is not.
func TestVendorScopedKeys(t *testing.T) {
	r := reportingRouter(t, reportapi.New(nil))
	const window = "?start_date=2026-03-01&end_date=2026-02-01" // 422 once past the key check
	for _, tc := range []struct {
		path   string
		vendor string
		want   int
	}{
		{"/public/v1/marketplace", "", 200},
		{"/public/v1/marketplace", "v-1", 403},
		{"/public/v1/reporting-service/marketplace" + window, "v-1", 403},
		{"/public/v1/reporting-service/marketplace/daily" + window, "v-1", 403},
		{"/public/v1/reporting-service/marketplace" + window, "", 422},
		{"/public/v1/reporting-service/vendors/v-1" + window, "v-1", 422},
		{"/public/v1/reporting-service/vendors/v-1/daily" + window, "v-1", 422},
		{"/public/v1/reporting-service/campaigns/x" + window, "v-1", 422},
		{"/public/v1/reporting-service/campaigns/x/daily" + window, "v-1", 422},
		{"/public/v1/reporting-service/products/p-1" + window, "v-1", 422},
		{"/public/v1/reporting-service/products/p-1/daily" + window, "v-1", 422},
		{"/public/v1/reporting-service/interactions" + window, "v-1", 422},
	} {
		w := rpServe(r, tc.path, "X-Vendor", tc.vendor)
		if w.Code != tc.want {
			t.Errorf("%s (vendor %q): %d %s, want %d", tc.path, tc.vendor, w.Code, w.Body, tc.want)
			continue
		}
		if w.Code == 403 {
			var b authError
			if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.ErrCode != "vendor_scoped_key" || b.Error != "vendor_scoped_key" {
				t.Errorf("%s: body %s", tc.path, w.Body)
			}
		}
	}

	explain := gin.New()
	explain.POST("/v2/auctions/explain", func(c *gin.Context) {
		c.Set(principalKey, accounts.Principal{Key: accounts.APIKey{ID: "k", VendorID: c.GetHeader("X-Vendor")}})
	}, vendorKeys(nil), func(c *gin.Context) { c.JSON(200, gin.H{}) })
	for vendor, want := range map[string]int{"": 200, "v-1": 403} {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v2/auctions/explain", nil)
		req.Header.Set("X-Vendor", vendor)
		explain.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("explain with vendor %q: %d, want %d", vendor, w.Code, want)
		}
	}
}

// TestReportingValidation: every bad query is a 422 at its parameter,
// before any store is read.
func TestReportingValidation(t *testing.T) {
	r := reportingRouter(t, reportapi.New(nil))
	const base = "/public/v1/reporting-service/"
	for _, tc := range []struct {
		path string
		loc  string
		typ  string
	}{
		{base + "marketplace?end_date=2026-03-01", "start_date", "missing"},
		{base + "marketplace?start_date=2026-03-01", "end_date", "missing"},
		{base + "marketplace?start_date=2026-03-02&end_date=2026-03-01", "end_date", "value_error"},
		{base + "marketplace?start_date=2025-01-01&end_date=2026-01-02", "end_date", "value_error"},
		{base + "marketplace?start_date=03/01/2026&end_date=2026-03-01", "start_date", "date_parsing"},
		{base + "marketplace/daily?start_date=2026-03-01&end_date=2026-03-01&limit=101", "limit", "less_than_equal"},
		{base + "marketplace/daily?start_date=2026-03-01&end_date=2026-03-01&next_page=forged", "next_page", "value_error"},
		{base + "campaigns/not-a-uuid?start_date=2026-03-01&end_date=2026-03-01", "campaign-id", "uuid_parsing"},
		{base + "interactions?start_date=2026-03-01&end_date=2026-04-01", "end_date", "value_error"},
		{base + "interactions?start_date=2026-03-01&end_date=2026-03-01&group_by=shop", "group_by", "enum"},
		{base + "interactions?start_date=2026-03-01&end_date=2026-03-01&granularity=hourly", "granularity", "value_error"},
		{base + "interactions?start_date=2026-03-01&end_date=2026-03-01&limit=0", "limit", "greater_than_equal"},
	} {
		w := rpServe(r, tc.path)
		var b struct {
			Detail []struct {
				Loc  []string `json:"loc"`
				Type string   `json:"type"`
			} `json:"detail"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &b); w.Code != 422 || err != nil || len(b.Detail) != 1 ||
			b.Detail[0].Loc[1] != tc.loc || b.Detail[0].Type != tc.typ {
			t.Errorf("%s: %d %s, want 422 at %s (%s)", tc.path, w.Code, w.Body, tc.loc, tc.typ)
		}
	}
}

// TestReportingUnavailable: ClickHouse unreachable is 503 with Retry-After.
func TestReportingUnavailable(t *testing.T) {
	conn, err := clickhouse.Open(clickhouse.Options{Addr: "127.0.0.1:1", Database: "endcap"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	svc := reportapi.New(conn)
	svc.Timeout = 5 * time.Second
	r := reportingRouter(t, svc)
	for _, path := range []string{
		"/public/v1/reporting-service/marketplace?start_date=2026-03-01&end_date=2026-03-31",
		"/public/v1/reporting-service/marketplace/daily?start_date=2026-03-01&end_date=2026-03-31",
		"/public/v1/reporting-service/interactions?start_date=2026-03-01&end_date=2026-03-31",
	} {
		w := rpServe(r, path)
		var b v2Error
		if err := json.Unmarshal(w.Body.Bytes(), &b); w.Code != 503 || err != nil || b.ErrCode != "service_unavailable" || w.Header().Get("Retry-After") != "2" {
			t.Errorf("%s: %d %v %s", path, w.Code, w.Header(), w.Body)
		}
	}
}
