package api

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/internal/telemetry"
)

// TestRequestID: every answer names its request in X-Request-Id (the
// caller's when it is a plain token, else a new one, different per
// request), and a line logged about the request carries the same id.
func TestRequestID(t *testing.T) {
	h := New(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	get := func(id string) string {
		t.Helper()
		r := httptest.NewRequest("GET", "/livez", nil)
		if id != "" {
			r.Header.Set("X-Request-Id", id)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		got := w.Header().Values("X-Request-Id")
		if len(got) != 1 {
			t.Fatalf("X-Request-Id %q, want one", got)
		}
		return got[0]
	}
	generated := regexp.MustCompile(`^[0-9a-f]{12}-[0-9a-z]+$`)
	a, b := get(""), get("")
	if !generated.MatchString(a) || !generated.MatchString(b) || a == b {
		t.Errorf("generated ids %q, %q: want two different ids of the form prefix-number", a, b)
	}
	for _, tc := range []struct {
		in   string
		kept bool
	}{
		{"req-1", true},
		{"3f2c9a1e-0b7d-4c55-9f0e-6f1d2a3b4c5d", true},
		{"trace.abc:42_x", true},
		{strings.Repeat("a", telemetry.MaxRequestIDLen), true},
		{strings.Repeat("a", telemetry.MaxRequestIDLen+1), false},
		{"two words", false},
		{`quote"`, false},
		{"line\x01break", false},
	} {
		got := get(tc.in)
		if kept := got == tc.in; kept != tc.kept {
			t.Errorf("caller's %q answered %q: kept %v, want %v", tc.in, got, kept, tc.kept)
		}
		if !tc.kept && !generated.MatchString(got) {
			t.Errorf("caller's %q replaced by %q, not a generated id", tc.in, got)
		}
	}

	// A line logged while serving (here a panic's) names the request.
	var buf bytes.Buffer
	log := telemetry.NewLogger(&buf, "info", "text")
	r := gin.New()
	r.ContextWithFallback = true // as New sets it: the gin context reaches the request's
	r.Use(requestID, recovery(log))
	r.GET("/boom", func(*gin.Context) { panic("boom") })
	req := httptest.NewRequest("GET", "/boom", nil)
	req.Header.Set("X-Request-Id", "req-77")
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	if w.Code != http.StatusInternalServerError || w.Header().Get("X-Request-Id") != "req-77" {
		t.Errorf("panic answered %d with X-Request-Id %q", w.Code, w.Header().Get("X-Request-Id"))
	}
	if !strings.Contains(buf.String(), "request_id=req-77") {
		t.Errorf("log %q does not name the request", buf.String())
	}
}

// BenchmarkRequestID is what the request id adds to every request (the id,
// the header, the request's context).
func BenchmarkRequestID(b *testing.B) {
	r := gin.New()
	r.Use(requestID)
	r.GET("/x", func(*gin.Context) {})
	req := httptest.NewRequest("GET", "/x", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		clear(w.Header())
		r.ServeHTTP(w, req)
	}
}
