package app

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/endcap/endcap/config"
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
