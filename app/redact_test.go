package app

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/endcap/endcap/api"
	"github.com/endcap/endcap/internal/config"
)

// /readyz shows the checks' errors: none shows a secret of the
// configuration, however the dependency's client words its error.
func TestReadyzShowsNoSecret(t *testing.T) {
	t.Setenv("ENDCAP_REDIS_PASSWORD", "r3dis-pa55")
	t.Setenv("ENDCAP_S3_ACCESS_KEY", "AKIAEXAMPLE")
	t.Setenv("ENDCAP_S3_SECRET_KEY", "s3-s3cret-key")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	resolve := config.Register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := resolve()
	if err != nil {
		t.Fatal(err)
	}
	checks := redactChecks([]api.Check{
		{Name: "redis", Fn: func(context.Context) error { return errors.New("AUTH r3dis-pa55: WRONGPASS") }},
		{Name: "s3", Fn: func(context.Context) error { return errors.New("signature of s3-s3cret-key does not match") }},
		{Name: "kafka", Fn: func(context.Context) error { return nil }},
	}, cfg.Secrets())
	for _, c := range checks {
		err := c.Fn(t.Context())
		if c.Name == "kafka" {
			if err != nil {
				t.Errorf("kafka: %v", err)
			}
			continue
		}
		if err == nil || strings.Contains(err.Error(), "r3dis-pa55") || strings.Contains(err.Error(), "s3-s3cret-key") || !strings.Contains(err.Error(), "[redacted]") {
			t.Errorf("%s: /readyz would show %v", c.Name, err)
		}
	}
}
