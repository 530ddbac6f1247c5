package testapp_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/testkit/testapp"
	"github.com/endcap/endcap/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) } // goleak: a stopped process leaves nothing running

// TestStartAndStop: Start answers once the process is ready, with its
// marketplace's keys working over HTTP and the configuration changes made;
// Stop ends it (its port no longer answers), and a second Stop does
// nothing.
func TestStartAndStop(t *testing.T) {
	a := testapp.Start(t, testapp.Target(app.TargetAPI), testapp.WithMarketplace("Kit", "EUR", "Europe/Paris"),
		testapp.Configure(func(c *config.Config, brokers []string) {
			if len(brokers) == 0 {
				t.Error("Configure: no brokers")
			}
			c.RateLimitDefault = "777/1s"
		}))
	if a.Cfg.RateLimitDefault != "777/1s" {
		t.Errorf("the change is not in the configuration: %q", a.Cfg.RateLimitDefault)
	}
	for _, key := range []string{a.MarketplaceKey, a.AdvancedKey} {
		req, _ := http.NewRequest("GET", a.URL+"/public/v1/marketplace", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized {
			t.Errorf("key %.8s…: 401", key)
		}
	}
	a.Stop()
	if st, body := testapp.Readyz(a.URL); st != 0 {
		t.Errorf("after Stop: /readyz %d %s", st, body)
	}
	a.Stop()
}

// TestFail: a process that cannot start ends by itself, and Fail returns
// its error (here New's: no master key for the signing keys in Redis).
func TestFail(t *testing.T) {
	cfg, _ := testapp.Config(t)
	cfg.BidSigningKeys, cfg.CursorSecret = "", ""
	err := testapp.Fail(t, cfg, app.TargetAPI, time.Minute)
	if !strings.Contains(err.Error(), "ENDCAP_SECRET_KEY_FILE") {
		t.Errorf("Fail: %v", err)
	}
}
