package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/endcap/endcap/internal/config"
)

// endcap config shows no secret: not the environment's, not the
// development stack's; every secret setting shows its file form.
func TestConfigShowsNoSecret(t *testing.T) {
	t.Setenv("ENDCAP_CLICKHOUSE_PASSWORD", "ch-pa55word")
	t.Setenv("ENDCAP_S3_SECRET_KEY", "s3-s3cret-key")
	for _, args := range [][]string{nil, {"--markdown"}} {
		var b bytes.Buffer
		printConfig(&b, args)
		out := b.String()
		for _, s := range []string{"ch-pa55word", "s3-s3cret-key", config.DevS3SecretKey} {
			if strings.Contains(out, s) {
				t.Errorf("endcap config %v shows %q", args, s)
			}
		}
		for _, v := range []string{"ENDCAP_CLICKHOUSE_PASSWORD_FILE", "ENDCAP_REDIS_PASSWORD_FILE", "ENDCAP_S3_SECRET_KEY_FILE", "ENDCAP_SMTP_PASSWORD_FILE", "ENDCAP_CURSOR_SECRET_FILE", "ENDCAP_BID_SIGNING_KEYS_FILE", "ENDCAP_SECRET_KEY_FILE"} {
			if !strings.Contains(out, v) {
				t.Errorf("endcap config %v lacks %s", args, v)
			}
		}
	}
}

// endcap serve stops before it connects anywhere when it would use the
// development credentials off loopback, naming the settings.
func TestServeRefusesDevCredentials(t *testing.T) {
	t.Setenv("ENDCAP_S3_ENDPOINT", "")
	t.Setenv("ENDCAP_S3_ACCESS_KEY", "endcap")
	t.Setenv("ENDCAP_S3_SECRET_KEY", config.DevS3SecretKey)
	t.Setenv("ENDCAP_CLICKHOUSE_ADDR", "clickhouse.internal:9000")
	err := cmdServe(t.Context(), []string{"--target", "api"})
	if err == nil || !strings.Contains(err.Error(), "s3-secret-key (ENDCAP_S3_SECRET_KEY)") || !strings.Contains(err.Error(), "clickhouse-password (ENDCAP_CLICKHOUSE_PASSWORD") {
		t.Fatalf("serve: %v", err)
	}
}
