package app

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/masterkey"
)

// TestNewRefusesABadKeyring: a resolvedBidId keyring given in the
// configuration that cannot be read stops the process at once, with the
// setting named, rather than being retried at every start-up step.
func TestNewRefusesABadKeyring(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, spec := range []string{"1", "x:abc", "1:not base64!", "1:c2hvcnQ"} {
		cfg := config.Default()
		cfg.SecretKey = masterkey.Generate()
		cfg.BidSigningKeys = spec
		if _, err := New(cfg, TargetAPI, quiet); err == nil || !strings.Contains(err.Error(), "ENDCAP_BID_SIGNING_KEYS") {
			t.Errorf("keyring %q: %v, want an error naming ENDCAP_BID_SIGNING_KEYS", spec, err)
		}
	}
}

// TestNewFailsWithoutLeaks: New refuses an API without a master key (nor
// both keys configured) before it opens a client, and closes what it opened
// when a later step fails; the package's TestMain (goleak) fails the run on
// any client left running.
func TestNewFailsWithoutLeaks(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := config.Default()
	if _, err := New(cfg, TargetAPI, quiet); !errors.Is(err, errNoMasterKey) {
		t.Errorf("API without a master key: %v", err)
	}
	cfg.SecretKey = masterkey.Generate()
	cfg.RateLimitDefault = "many"
	if _, err := New(cfg, TargetAll, quiet); err == nil {
		t.Error("a bad rate limit was accepted")
	}
	cfg.RateLimitDefault = "45/2s"
	a, err := New(cfg, TargetProjector, quiet)
	if err != nil {
		t.Fatal(err)
	}
	a.close()
}
