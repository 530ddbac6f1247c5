package api

import (
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
