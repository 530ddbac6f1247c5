package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestClientAddress: the client a handler sees (gin.Context.ClientIP) is
// the connection's address, unless the connection comes from a trusted
// proxy: then it is the last address of X-Forwarded-For that is not a
// trusted proxy itself.
func TestClientAddress(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name    string
		trusted []string
		remote  string
		header  map[string]string
		want    string
	}{
		{"no proxy trusted: the header is ignored", nil, "192.0.2.1:5000", map[string]string{"X-Forwarded-For": "198.51.100.7"}, "192.0.2.1"},
		{"no header", []string{"10.0.0.0/8"}, "10.1.2.3:5000", nil, "10.1.2.3"},
		{"a trusted proxy", []string{"10.0.0.0/8"}, "10.1.2.3:5000", map[string]string{"X-Forwarded-For": "198.51.100.7"}, "198.51.100.7"},
		{"a trusted proxy by its IP", []string{"10.1.2.3"}, "10.1.2.3:5000", map[string]string{"X-Forwarded-For": "198.51.100.7"}, "198.51.100.7"},
		{"a chain: the client's own header entries are not believed", []string{"10.0.0.0/8"}, "10.1.2.3:5000",
			map[string]string{"X-Forwarded-For": "203.0.113.9, 198.51.100.7, 10.9.9.9"}, "198.51.100.7"},
		{"X-Real-IP from a trusted proxy", []string{"10.0.0.0/8"}, "10.1.2.3:5000", map[string]string{"X-Real-IP": "198.51.100.8"}, "198.51.100.8"},
		{"a connection that is not a trusted proxy", []string{"10.0.0.0/8"}, "192.0.2.1:5000", map[string]string{"X-Forwarded-For": "198.51.100.7"}, "192.0.2.1"},
		{"a garbled header from a trusted proxy", []string{"10.0.0.0/8"}, "10.1.2.3:5000", map[string]string{"X-Forwarded-For": "not an address"}, "10.1.2.3"},
		{"IPv6", []string{"2001:db8::/32"}, "[2001:db8::1]:5000", map[string]string{"X-Forwarded-For": "2001:db8:ffff::2, 198.51.100.7"}, "198.51.100.7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := New(Deps{Log: log, TrustedProxies: tc.trusted, Console: func(g *gin.RouterGroup) {
				g.GET("/whoami", func(c *gin.Context) { c.String(http.StatusOK, c.ClientIP()) })
			}})
			r := httptest.NewRequest("GET", "/console/whoami", nil)
			r.RemoteAddr = tc.remote
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK || w.Body.String() != tc.want {
				t.Errorf("%d %q, want %q", w.Code, w.Body.String(), tc.want)
			}
		})
	}
}
