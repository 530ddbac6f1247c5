package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/testkit/testenv"
)

// TestSecurityHeadersAndInputRules runs the whole system with /metrics on
// a listener of its own and checks, over HTTP: every answer of /v2 and
// /public/v1 (successes, errors, 404, 405, preflights) and of the health
// endpoints carries nosniff and no-store, and the /v2 CORS headers are
// unchanged; ids with invalid UTF-8, unpaired surrogates or NUL are 400
// bad_request on /v2 and 422 on /public/v1 (the catalog's fast decoder
// included), naming the field, and nothing of them is stored; /metrics is
// served on its own port only, and that port closes with the process.
func TestSecurityHeadersAndInputRules(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	cfg.MetricsAddr = "127.0.0.1:0"
	s := startSystem(t, cfg)
	M, A := s.MarketplaceKey, s.AdvancedKey
	now := time.Now().UTC().Format(time.RFC3339)
	event := func(id string) string {
		return `{"impressions":[{"id":"` + id + `","occurredAt":"` + now + `","opaqueUserId":"u","entity":{"type":"product","id":"p-1"}}]}`
	}

	type errBody struct {
		ErrCode string `json:"errCode"`
		Message string `json:"message"`
		Detail  []struct {
			Loc []any  `json:"loc"`
			Msg string `json:"msg"`
		} `json:"detail"`
	}
	for _, tc := range []struct {
		name, method, path, key, body string
		status                        int
		check                         func(t *testing.T, r response, b errBody)
	}{
		{"event accepted", "POST", "/v2/events", M, event("h-ok"), 200, nil},
		{"broken JSON", "POST", "/v2/events", M, `{`, 400, nil},
		{"no key", "POST", "/v2/events", "", event("h-1"), 401, nil},
		{"advanced key on /v2", "POST", "/v2/events", A, event("h-1"), 401, nil},
		{"unknown route", "POST", "/v2/nothing", M, `{}`, 404, nil},
		{"wrong method", "GET", "/v2/events", M, "", 405, nil},
		{"preflight", "OPTIONS", "/v2/events", "", "", 204, func(t *testing.T, r response, _ errBody) {
			if r.Header.Get("Access-Control-Allow-Origin") != "*" || r.Header.Get("Access-Control-Allow-Methods") != "POST, OPTIONS" ||
				r.Header.Get("Access-Control-Max-Age") != "86400" || !strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
				t.Errorf("CORS preflight headers %v", r.Header)
			}
		}},
		{"CORS on an answer", "POST", "/v2/events", M, event("h-ok2"), 200, func(t *testing.T, r response, _ errBody) {
			if r.Header.Get("Access-Control-Allow-Origin") != "*" || r.Header.Get("Access-Control-Expose-Headers") != "Retry-After" {
				t.Errorf("CORS headers %v", r.Header)
			}
		}},
		{"auction", "POST", "/v2/auctions", M, `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["p-1"]}}]}`, 201, nil},
		{"marketplace", "GET", "/public/v1/marketplace", A, "", 200, nil},
		{"marketplace key on /public/v1", "GET", "/public/v1/marketplace", M, "", 403, nil},
		{"public 404", "GET", catProducts + "/nope", A, "", 404, nil},
		{"public 405", "PATCH", "/public/v1/marketplace", A, "", 405, nil},
		{"livez", "GET", "/livez", "", "", 200, nil},
		{"readyz", "GET", "/readyz", "", "", 200, nil},
		{"no /metrics on the API port", "GET", "/metrics", "", "", 404, nil},

		{"event id with a lone surrogate", "POST", "/v2/events", M, event(`a\ud800`), 400, func(t *testing.T, _ response, b errBody) {
			if b.ErrCode != "bad_request" || !strings.HasPrefix(b.Message, "impressions[0].id: must not contain an unpaired surrogate") {
				t.Errorf("%+v", b)
			}
		}},
		{"event id with invalid UTF-8", "POST", "/v2/events", M, event("a\xffb"), 400, func(t *testing.T, _ response, b errBody) {
			if b.ErrCode != "bad_request" || !strings.HasPrefix(b.Message, "impressions[0].id: must be valid UTF-8") {
				t.Errorf("%+v", b)
			}
		}},
		{"event id with NUL", "POST", "/v2/events", M, event(`a\u0000`), 400, func(t *testing.T, _ response, b errBody) {
			if b.ErrCode != "bad_request" || !strings.HasPrefix(b.Message, "impressions[0].id: must not contain the NUL") {
				t.Errorf("%+v", b)
			}
		}},
		{"auction product id with NUL", "POST", "/v2/auctions", M, `{"auctions":[{"type":"listings","slots":2,"products":{"ids":["p-1","p\u0000"]}}]}`, 400, func(t *testing.T, _ response, b errBody) {
			if b.ErrCode != "bad_request" || !strings.HasPrefix(b.Message, "auctions[0].products.ids[1]: must not contain the NUL") {
				t.Errorf("%+v", b)
			}
		}},
		{"catalog product id with a lone surrogate", "PUT", catProducts, A, `{"products":[{"id":"ok-1","name":"x"},{"id":"bad\udc00","name":"y"}]}`, 422, func(t *testing.T, _ response, b errBody) {
			if len(b.Detail) != 1 || !sameLoc(b.Detail[0].Loc, "body", "products", 1, "id") || !strings.Contains(b.Detail[0].Msg, "unpaired surrogate") {
				t.Errorf("%+v", b)
			}
		}},
		{"catalog vendor name with invalid UTF-8", "PUT", catVendors, A, "{\"vendors\":[{\"id\":\"v-1\",\"name\":\"A\xc3\"}]}", 422, func(t *testing.T, _ response, b errBody) {
			if len(b.Detail) != 1 || !sameLoc(b.Detail[0].Loc, "body", "vendors", 0, "name") || !strings.Contains(b.Detail[0].Msg, "UTF-8") {
				t.Errorf("%+v", b)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.request(t, tc.method, tc.path, tc.key, []byte(tc.body), nil)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("headers %v", r.Header)
			}
			var b errBody
			_ = json.Unmarshal(r.Body, &b)
			if tc.check != nil {
				tc.check(t, r, b)
			}
		})
	}
	// Nothing of the refused catalog bodies was stored.
	for _, p := range []string{catProducts + "/ok-1", catVendors + "/v-1"} {
		if st, body := s.do(t, "GET", p, A, nil); st != 404 {
			t.Errorf("GET %s after a refused upsert: %d %s", p, st, body)
		}
	}

	maddr := s.App.MetricsAddr()
	if maddr == nil {
		t.Fatal("no metrics listener")
	}
	resp, err := http.Get("http://" + maddr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(mb), "endcap_http_requests_total") ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("metrics listener: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, err := http.Get("http://" + maddr.String() + "/v2/events"); err != nil || resp.StatusCode != 404 {
		t.Errorf("metrics listener serves more than /metrics: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	s.stop()
	if c, err := net.DialTimeout("tcp", maddr.String(), time.Second); err == nil {
		c.Close()
		t.Error("the metrics listener is still open after the shutdown")
	}
}

func sameLoc(got []any, want ...any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		w := want[i]
		if n, ok := w.(int); ok {
			w = float64(n)
		}
		if got[i] != w {
			return false
		}
	}
	return true
}
