package console

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/storage/statelog"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestSessionWhileStarting: while the users are being read (the view is
// not ready), a request with a live session is answered 503 with
// Retry-After and a page that reloads itself; the session is neither
// deleted nor sent to the sign-in page. Sign-in itself says "starting"
// and counts no failure.
func TestSessionWhileStarting(t *testing.T) {
	rdb := testenv.Get(t).Redis(t)
	// A view that never loads: its broker does not exist.
	log, err := statelog.New("test.accounts", []string{"127.0.0.1:1"}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(log.Close)
	sessions := users.NewSessions(rdb, time.Minute, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	token, _, err := sessions.Create(ctx, users.User{ID: "u-1", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Users: users.New(log, nil), Sessions: sessions, Throttle: users.NewThrottle(rdb, "test-"+users.RandomToken()[:12]+"."), SecureCookies: true})
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	c.Install(r.Group("/console"))
	for _, tc := range []struct {
		method, path string
		refresh      bool
	}{{"GET", "/console/keys", true}, {"GET", "/console", true}, {"POST", "/console/logout", false}} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		req.AddCookie(&http.Cookie{Name: "__Host-endcap_session", Value: token})
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		body := w.Body.String()
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || w.Header().Get("Location") != "" {
			t.Fatalf("%s %s while starting: %d, Retry-After %q, Location %q", tc.method, tc.path, w.Code, w.Header().Get("Retry-After"), w.Header().Get("Location"))
		}
		if strings.Contains(w.Header().Get("Set-Cookie"), "endcap_session") {
			t.Fatalf("%s %s while starting touched the session's cookie: %s", tc.method, tc.path, w.Header().Get("Set-Cookie"))
		}
		if strings.Contains(body, `http-equiv="refresh"`) != tc.refresh || !strings.Contains(body, "still signed in") {
			t.Fatalf("%s %s while starting: the page %s", tc.method, tc.path, body)
		}
	}
	// Sign-in: no password is checked, no failure counted.
	anon := users.RandomToken()
	for i := 0; i < 8; i++ {
		req := httptest.NewRequest("POST", "/console/login", strings.NewReader("csrf="+anon+"&email=a%40b.test&password=whatever+it+is"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: "__Host-endcap_csrf", Value: anon})
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("sign-in %d while starting: %d %q", i+1, w.Code, w.Header().Get("Retry-After"))
		}
	}
	if _, ok, err := sessions.Get(ctx, token); !ok || err != nil {
		t.Fatalf("the session after the start: %v %v", ok, err)
	}
}
