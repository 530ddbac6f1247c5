package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// discard is a ResponseWriter that keeps nothing, so that only the
// handler's allocations are counted.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// TestRequestAllocations: what every request goes through (the middleware
// of every route: request id, security headers, recovery, metrics, path
// text) allocates no more than a health check and a 404's error body need:
// the documentation base of error bodies is read where the body is built,
// not set on each request.
func TestRequestAllocations(t *testing.T) {
	h := New(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), DocURLBase: "https://docs.example.com"})
	for _, tc := range []struct {
		path string
		max  float64
	}{
		{"/livez", 13},
		{"/nothing-here", 11},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		w := &discard{h: http.Header{}}
		h.ServeHTTP(w, req) // the pools filled
		got := testing.AllocsPerRun(200, func() {
			clear(w.h)
			h.ServeHTTP(w, req)
		})
		t.Logf("GET %s: %.0f allocations", tc.path, got)
		if got > tc.max {
			t.Errorf("GET %s: %.0f allocations a request, want at most %.0f", tc.path, got, tc.max)
		}
	}
}
