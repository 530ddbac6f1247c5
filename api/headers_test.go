package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestSecurityHeaders: every answer of the handler, health, metrics, 404 and
// 405 included, carries nosniff and no-store; with MetricsElsewhere the API
// handler has no /metrics, and MetricsHandler serves it alone. (The /v2 and
// /public/v1 routes: e2e TestSecurityHeadersAndInputRules.)
func TestSecurityHeaders(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	check := func(t *testing.T, h http.Handler, method, path string, want int) {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		if w.Code != want {
			t.Errorf("%s %s: %d, want %d", method, path, w.Code, want)
		}
		if got := w.Header().Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
			t.Errorf("%s %s: X-Content-Type-Options %q", method, path, got)
		}
		if got := w.Header().Values("Cache-Control"); len(got) != 1 || got[0] != "no-store" {
			t.Errorf("%s %s: Cache-Control %q", method, path, got)
		}
	}
	h := New(Deps{Log: log})
	check(t, h, "GET", "/livez", 200)
	check(t, h, "GET", "/readyz", 200)
	check(t, h, "GET", "/metrics", 200)
	check(t, h, "GET", "/nothing-here", 404)
	check(t, h, "POST", "/livez", 405)
	check(t, h, "POST", "/v2/events", 404) // no /v2 routes without accounts

	h = New(Deps{Log: log, MetricsElsewhere: true})
	check(t, h, "GET", "/metrics", 404)
	check(t, h, "GET", "/livez", 200)
	m := MetricsHandler()
	check(t, m, "GET", "/metrics", 200)
	check(t, m, "GET", "/livez", 404)
	check(t, m, "POST", "/metrics", 405)
}

// TestDocURLBase: an error body's docUrl is the deployment's documentation
// base (Deps.DocURLBase, ENDCAP_DOC_URL_BASE) + /reference/errors.md#<errCode>, by
// default the project's.
func TestDocURLBase(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct{ base, want string }{
		{"", "https://github.com/endcap/endcap/blob/main/docs/reference/errors.md#resource_not_found"},
		{"https://docs.ads.example.com/endcap/", "https://docs.ads.example.com/endcap/reference/errors.md#resource_not_found"},
	} {
		w := httptest.NewRecorder()
		New(Deps{Log: log, DocURLBase: tc.base}).ServeHTTP(w, httptest.NewRequest("GET", "/nothing-here", nil))
		var body struct{ ErrCode, DocURL string }
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 404 || body.DocURL != tc.want {
			t.Errorf("base %q: %d %s, want docUrl %q", tc.base, w.Code, w.Body.Bytes(), tc.want)
		}
	}
}
