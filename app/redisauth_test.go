package app

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/internal/config"
)

// TestRedisSetting: the errors waiting cannot fix name the setting to mend;
// a Redis that is down or slow names none (it is waited for).
func TestRedisSetting(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"wrong password", fmt.Errorf("127.0.0.1:6379: redis INFO server: %w", errors.New("WRONGPASS invalid username-password pair or user is disabled.")), "ENDCAP_REDIS_PASSWORD"},
		{"no password", errors.New("NOAUTH Authentication required."), "ENDCAP_REDIS_PASSWORD"},
		{"untrusted", fmt.Errorf("tls: failed to verify certificate: %w", x509.UnknownAuthorityError{}), "ENDCAP_REDIS_TLS_CA"},
		{"another host", fmt.Errorf("tls: %w", x509.HostnameError{Host: "redis.example", Certificate: &x509.Certificate{}}), "ENDCAP_REDIS_TLS_CA"},
		{"no INFO", errors.New("NOPERM User endcap has no permissions to run the 'info' command"), "ENDCAP_REDIS_USER"},
		{"down", errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"), ""},
		{"nil reply", redis.Nil, ""},
	} {
		got := redisSetting(tc.err)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want one naming %q", tc.name, got, tc.want)
		}
	}
}

// TestRedisOptionsFiles: an unreadable authorities file or an empty
// password file stops the start, naming its setting.
func TestRedisOptionsFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	notPEM := filepath.Join(dir, "not.pem")
	_ = os.WriteFile(empty, []byte("\nsecond line\n"), 0o600)
	_ = os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	for _, tc := range []struct {
		name  string
		tweak func(*config.Config)
		want  string
	}{
		{"missing ca", func(c *config.Config) { c.RedisTLS, c.RedisTLSCA = true, filepath.Join(dir, "none.pem") }, "ENDCAP_REDIS_TLS_CA"},
		{"ca without a certificate", func(c *config.Config) { c.RedisTLS, c.RedisTLSCA = true, notPEM }, "ENDCAP_REDIS_TLS_CA"},
		{"empty password file", func(c *config.Config) { c.RedisPasswordFile = empty }, "ENDCAP_REDIS_PASSWORD_FILE"},
		{"missing password file", func(c *config.Config) { c.RedisPasswordFile = filepath.Join(dir, "none") }, "ENDCAP_REDIS_PASSWORD_FILE"},
	} {
		c := config.Default()
		tc.tweak(&c)
		if _, err := OpenRedis(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	c := config.Default()
	c.RedisTLS = true
	rdb, err := OpenRedis(c)
	if err != nil {
		t.Fatalf("TLS with the system's authorities: %v", err)
	}
	_ = rdb.Close()
}
