package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/endcap/endcap/ingest"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/storage/statelog"
)

// TestHealth: /readyz reports the checks' last results at once, whatever
// a check does: one that fails reads as its error, one that hangs past its
// deadline (and ignores it) reads as "no answer", one never run yet as not
// checked; the answer never waits for a check.
func TestHealth(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	const secret = "dial tcp 10.1.2.3:6379: WRONGPASS invalid username-password pair"
	h := NewHealth([]Check{
		{Name: "ok", Fn: func(context.Context) error { return nil }},
		{Name: "down", Fn: func(context.Context) error { return errors.New(secret) }},
		{Name: "frozen", Fn: func(context.Context) error { <-release; return nil }}, // ignores its deadline
	})
	var logged syncBuffer
	h.Log = slog.New(slog.NewTextHandler(&logged, nil))
	h.interval, h.timeout, h.stale = 20*time.Millisecond, 20*time.Millisecond, 200*time.Millisecond
	if ready, got := h.Report(time.Now()); ready || got["ok"] != "not checked yet" {
		t.Fatalf("before Run: ready=%v %v", ready, got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	time.Sleep(400 * time.Millisecond)
	ready, got := h.Report(time.Now())
	want := map[string]string{"ok": "ok", "down": "failing"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("check %s: %q, want %q", k, got[k], v)
		}
	}
	if !strings.HasPrefix(got["frozen"], "no answer for ") || ready {
		t.Errorf("a frozen check: ready=%v %q", ready, got["frozen"])
	}
	// endcap_readiness_check_ok: 1 for a check that passes, 0 for one that
	// fails or has not answered yet.
	for check, want := range map[string]float64{"ok": 1, "down": 0, "frozen": 0} {
		if v := testutil.ToFloat64(telemetry.ReadyCheck.WithLabelValues(check)); v != want {
			t.Errorf("endcap_readiness_check_ok{check=%q} = %v, want %v", check, v, want)
		}
	}

	srv := New(Deps{Health: h, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	start := time.Now()
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Errorf("/readyz took %s", took)
	}
	var body struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 503 || body.Status != "not_ready" || body.Checks["down"] != "failing" ||
		strings.Contains(w.Body.String(), "10.1.2.3") || strings.Contains(w.Body.String(), "WRONGPASS") {
		t.Errorf("/readyz without detail: %d %s", w.Code, w.Body)
	}
	// The text is logged instead, once (not at every run of the check).
	if l := logged.String(); strings.Count(l, "WRONGPASS") != 1 || !strings.Contains(l, "check=down") {
		t.Errorf("log: %s", l)
	}
	// With ENDCAP_READYZ_DETAIL the answer carries the text.
	h.Detail = true
	w = httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 503 || body.Checks["down"] != secret {
		t.Errorf("/readyz with detail: %d %s", w.Code, w.Body)
	}
	cancel()
	go func() { release <- struct{}{} }() // let the frozen check return so that Run ends
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
}

// TestAuthWhileLoading: until the process has loaded its API keys, every
// authenticated route answers 503 with Retry-After and a JSON body (which
// clients retry), never 401 (which they do not); the exports routes in
// their own error shape.
func TestAuthWhileLoading(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sl, err := statelog.New("accounts", []string{"127.0.0.1:1"}, nil, quiet) // never run: still loading
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	srv := New(Deps{Accounts: accounts.New(sl), Events: &ingest.Appender{}, RetryAfter: 2 * time.Second, Log: quiet,
		Public: &Public{Log: quiet}, PublicRoutes: []RouteSet{ExportRoutes(nil)}})
	for _, path := range []string{"/v2/events", "/public/v1/marketplace"} {
		method := "POST"
		if strings.HasPrefix(path, "/public") {
			method = "GET"
		}
		w := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer ecm_anything")
		srv.ServeHTTP(w, req)
		var body v2Error
		if w.Code != 503 || w.Header().Get("Retry-After") != "2" || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.ErrCode != "service_unavailable" {
			t.Errorf("%s %s while loading: %d %v %s", method, path, w.Code, w.Header(), w.Body)
		}
	}
	for _, path := range []string{"/public/v1/export-service/datasets", "/public/v1/export-service/exports"} {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer eca_anything")
		srv.ServeHTTP(w, req)
		var body exportError
		if w.Code != 503 || w.Header().Get("Retry-After") != "2" || json.Unmarshal(w.Body.Bytes(), &body) != nil ||
			body.Error.Code != "service_unavailable" || body.Error.Details == nil {
			t.Errorf("GET %s while loading: %d %v %s", path, w.Code, w.Header(), w.Body)
		}
	}
}

// TestPathText: a path whose decoded form is not UTF-8 text or holds NUL is
// refused with 400 bad_request before any route; other paths route as usual.
func TestPathText(t *testing.T) {
	srv := New(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, c := range []struct {
		path string
		want int
	}{
		{"/public/v1/segment-service/segments/a%00b", 400},
		{"/public/v1/segment-service/segments/%FF%FE", 400},
		{"/public/v1/segment-service/segments/%ED%A0%80", 400}, // a surrogate, encoded
		{"/public/v1/segment-service/segments/caf%C3%A9", 404}, // no such route here: routed
		{"/livez", 200},
	} {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", c.path, nil))
		var body v2Error
		if w.Code != c.want || json.Unmarshal(w.Body.Bytes(), &body) != nil || (c.want == 400 && body.ErrCode != "bad_request") {
			t.Errorf("GET %s: %d %s, want %d", c.path, w.Code, w.Body, c.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger written from goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
