package config

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPrecedence(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(c Config) bool
		wantErr string
	}{
		{"defaults", nil, nil, func(c Config) bool {
			return c.HTTPAddr == "127.0.0.1:8080" && c.KafkaBrokers[0] == "127.0.0.1:19092" && c.ProduceTimeout == time.Second
		}, ""},
		{"env over default", map[string]string{"ENDCAP_KAFKA_BROKERS": "a:1, b:2 ,"}, nil, func(c Config) bool {
			return len(c.KafkaBrokers) == 2 && c.KafkaBrokers[1] == "b:2"
		}, ""},
		{"flag over env", map[string]string{"ENDCAP_HTTP_ADDR": ":1"}, []string{"--http-addr", ":2"}, func(c Config) bool { return c.HTTPAddr == ":2" }, ""},
		{"bad duration", map[string]string{"ENDCAP_PRODUCE_TIMEOUT": "soon"}, nil, nil, "produce-timeout (ENDCAP_PRODUCE_TIMEOUT)"},
		{"negative duration", nil, []string{"--dedupe-window", "-1h"}, nil, "must be positive"},
		{"bad int", nil, []string{"--kafka-events-partitions", "0"}, nil, "at least 1"},
		{"empty brokers", map[string]string{"ENDCAP_KAFKA_BROKERS": " , "}, nil, nil, "at least one broker"},
		{"tiny body limit", nil, []string{"--max-body-bytes", "10"}, nil, "at least 1024"},
		{"bad log level", nil, []string{"--log-level", "loud"}, nil, "debug, info, warn or error"},
		{"redis tls and acl user", map[string]string{"ENDCAP_REDIS_TLS": "true", "ENDCAP_REDIS_TLS_CA": "/ca.pem", "ENDCAP_REDIS_USER": "endcap",
			"ENDCAP_REDIS_PASSWORD_FILE": "/run/secrets/redis"}, nil, func(c Config) bool {
			return c.RedisTLS && c.RedisTLSCA == "/ca.pem" && c.RedisUser == "endcap" && c.RedisPasswordFile == "/run/secrets/redis" && c.RedisPassword == ""
		}, ""},
		{"redis tls not a bool", map[string]string{"ENDCAP_REDIS_TLS": "yes please"}, nil, nil, "redis-tls (ENDCAP_REDIS_TLS)"},
		{"redis password twice", map[string]string{"ENDCAP_REDIS_PASSWORD": "p", "ENDCAP_REDIS_PASSWORD_FILE": "/f"}, nil, nil, "redis-password and redis-password-file"},
		{"redis ca without tls", map[string]string{"ENDCAP_REDIS_TLS_CA": "/ca.pem"}, nil, nil, "redis-tls-ca is set without redis-tls"},
		{"rollup share", map[string]string{"ENDCAP_ROLLUP_MAX_SHARE": "0.5"}, nil, func(c Config) bool {
			return c.RollupMaxShare == 0.5 && c.RollupInterval == time.Minute && c.RollupFullInterval == time.Hour
		}, ""},
		{"rollup share zero", nil, []string{"--rollup-max-share", "0"}, nil, "above 0 and at most 1"},
		{"rollup share above one", nil, []string{"--rollup-max-share", "1.5"}, nil, "above 0 and at most 1"},
		{"rollup share not a number", nil, []string{"--rollup-max-share", "NaN"}, nil, "above 0 and at most 1"},
		{"group timings", map[string]string{"ENDCAP_KAFKA_SESSION_TIMEOUT": "6s"}, []string{"--projector-flush-timeout", "20s"}, func(c Config) bool {
			return c.KafkaSessionTimeout == 6*time.Second && c.ProjectorFlushTimeout == 20*time.Second && c.KafkaRebalanceTimeout == time.Minute && c.ProjectorStallTimeout == time.Minute
		}, ""},
		{"flush timeout not below the rebalance timeout", nil, []string{"--projector-flush-timeout", "60s"}, nil, "must be longer than projector-flush-timeout"},
		{"one redis", nil, nil, func(c Config) bool {
			return c.RedisAddr == "127.0.0.1:16379" && !c.RedisCluster && c.RedisWaitReplicas == -1 && c.WaitReplicas() == 0
		}, ""},
		{"redis cluster", map[string]string{"ENDCAP_REDIS_CLUSTER": "true"}, []string{"--redis-addr", "a:1, b:2,c:3"}, func(c Config) bool {
			return c.RedisCluster && c.RedisAddr == "a:1, b:2,c:3" && c.WaitReplicas() == 1
		}, ""},
		{"wait replicas given", map[string]string{"ENDCAP_REDIS_CLUSTER": "true", "ENDCAP_REDIS_WAIT_REPLICAS": "0"}, nil, func(c Config) bool {
			return c.WaitReplicas() == 0
		}, ""},
		{"wait replicas on one server", nil, []string{"--redis-wait-replicas", "2"}, func(c Config) bool { return c.WaitReplicas() == 2 }, ""},
		{"bad wait replicas", nil, []string{"--redis-wait-replicas", "all"}, nil, "auto or a number from 0 to 16"},
		{"negative wait replicas", nil, []string{"--redis-wait-replicas", "-1"}, nil, "auto or a number from 0 to 16"},
		{"bad cluster flag", nil, []string{"--redis-cluster", "maybe"}, nil, "true or false"},
		{"no redis address", nil, []string{"--redis-addr", " , "}, nil, "at least one address"},
		{"redis address without port", nil, []string{"--redis-addr", "a:1,b"}, nil, `"b" is not a host:port`},
		{"seed nodes without cluster", nil, []string{"--redis-addr", "a:1,b:2"}, nil, "set redis-cluster"},
		{"webhook delivery retention", map[string]string{"ENDCAP_WEBHOOK_DELIVERY_RETENTION": "168h"}, nil, func(c Config) bool { return c.WebhookRetention == 168*time.Hour }, ""},
		{"webhook delivery retention under an hour", nil, []string{"--webhook-delivery-retention", "30m"}, nil, "at least 1h"},
		{"no trusted proxy", nil, nil, func(c Config) bool { return c.TrustedProxies == nil }, ""},
		{"trusted proxies", map[string]string{"ENDCAP_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.1,2001:db8::/32"}, nil, func(c Config) bool {
			return slices.Equal(c.TrustedProxies, []string{"10.0.0.0/8", "192.0.2.1", "2001:db8::/32"})
		}, ""},
		{"a trusted proxy that is no address", nil, []string{"--trusted-proxies", "10.0.0.0/8,proxy.internal"}, nil, `"proxy.internal" is neither an IP nor a CIDR`},
		{"a trusted proxy with a bad mask", nil, []string{"--trusted-proxies", "10.0.0.0/33"}, nil, `"10.0.0.0/33" is neither an IP nor a CIDR`},
		{"trusted proxies as wide as allowed", nil, []string{"--trusted-proxies", "10.0.0.0/8,2001:db8::/32,::ffff:10.0.0.0/104"}, func(c Config) bool { return len(c.TrustedProxies) == 3 }, ""},
		{"every IPv4 address a trusted proxy", nil, []string{"--trusted-proxies", "0.0.0.0/0"}, nil, `"0.0.0.0/0" is too wide`},
		{"every IPv6 address a trusted proxy", nil, []string{"--trusted-proxies", "10.0.0.1,::/0"}, nil, `"::/0" is too wide`},
		{"a trusted IPv4 range wider than a /8", nil, []string{"--trusted-proxies", "10.0.0.0/7"}, nil, `"10.0.0.0/7" is too wide`},
		{"a trusted IPv6 range wider than a /32", nil, []string{"--trusted-proxies", "2001:db8::/31"}, nil, `"2001:db8::/31" is too wide`},
		{"a trusted mapped IPv4 range wider than a /8", nil, []string{"--trusted-proxies", "::ffff:0:0/96"}, nil, `"::ffff:0:0/96" is too wide`},
		{"downloads per user", nil, nil, func(c Config) bool { return c.ConsoleDownloads == 2 }, ""},
		{"no download per user", nil, []string{"--console-downloads-per-user", "0"}, nil, "at least 1"},
		{"cursor secret of 32 bytes", map[string]string{"ENDCAP_CURSOR_SECRET": strings.Repeat("k", 32)}, nil, func(c Config) bool { return len(c.CursorSecret) == 32 }, ""},
		{"short cursor secret", map[string]string{"ENDCAP_CURSOR_SECRET": strings.Repeat("k", 31)}, nil, nil, "cursor-secret (ENDCAP_CURSOR_SECRET): must be at least 32 bytes"},
		{"no cursor secret", nil, nil, func(c Config) bool { return c.CursorSecret == "" && !c.ReadyzDetail }, ""},
		{"readyz detail", nil, []string{"--readyz-detail", "true"}, func(c Config) bool { return c.ReadyzDetail }, ""},
		{"database on a cluster", map[string]string{"ENDCAP_REDIS_CLUSTER": "1"}, []string{"--redis-db", "2"}, nil, "must be 0 with redis-cluster"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			resolve := Register(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := resolve()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(cfg) {
				t.Errorf("unexpected config %+v", cfg)
			}
		})
	}
}

func TestEveryDefaultParses(t *testing.T) {
	_ = Default()
	for _, row := range EnvTable() {
		if !strings.HasPrefix(row[1], "ENDCAP_") {
			t.Errorf("%s: variable %s lacks the ENDCAP_ prefix", row[0], row[1])
		}
	}
}

// TestDocumented keeps docs/operations/operations.md true: every setting has its row.
func TestDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range EnvTable() {
		if !strings.Contains(string(b), "`"+row[0]+"` | `"+row[1]+"`") {
			t.Errorf("docs/operations/operations.md lacks %s / %s: regenerate the table with `endcap config --markdown`", row[0], row[1])
		}
	}
}

// resolveWith resolves the configuration of these variables and arguments.
func resolveWith(t *testing.T, env map[string]string, args []string) (Config, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	resolve := Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return resolve()
}

// Every problem of the configuration is in the one error, each naming its
// setting and where its value came from; a bad value does not bring about a
// second, false problem of settings checked together.
func TestEveryErrorAtOnce(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
		not  []string
	}{
		{"one problem alone", map[string]string{"ENDCAP_PRODUCE_TIMEOUT": "soon"}, nil,
			[]string{"produce-timeout (ENDCAP_PRODUCE_TIMEOUT): not a duration"}, []string{"problems in the configuration"}},
		{"three settings", map[string]string{"ENDCAP_PRODUCE_TIMEOUT": "soon", "ENDCAP_LOG_LEVEL": "loud"}, []string{"--kafka-events-partitions", "0"},
			[]string{"3 problems in the configuration", "produce-timeout (ENDCAP_PRODUCE_TIMEOUT)", "log-level (ENDCAP_LOG_LEVEL)", "kafka-events-partitions (--kafka-events-partitions)"}, nil},
		{"settings and a combination", map[string]string{"ENDCAP_REDIS_CLUSTER": "yes"}, []string{"--projector-flush-timeout", "90s", "--max-body-bytes", "1"},
			[]string{"3 problems", "redis-cluster (ENDCAP_REDIS_CLUSTER)", "max-body-bytes (--max-body-bytes)", "must be longer than projector-flush-timeout (1m30s)"}, nil},
		{"a bad value is not a combination's problem too", nil, []string{"--kafka-rebalance-timeout", "never", "--log-format", "xml"},
			[]string{"2 problems", "kafka-rebalance-timeout (--kafka-rebalance-timeout)", "log-format (--log-format)"}, []string{"must be longer than"}},
		{"retention bounds too short for the rollups", map[string]string{"ENDCAP_RETENTION_EVENTS": "30d", "ENDCAP_RETENTION_AUCTIONS": "2mo", "ENDCAP_RETENTION_INTERACTIONS": "90 days", "ENDCAP_RETENTION_REPORT_FILES": "1d"}, nil,
			[]string{"4 problems", "retention-events (ENDCAP_RETENTION_EVENTS): must be 0 (kept for ever) or at least 65d", "the rollups recompute the last 33 days",
				"retention-auctions (ENDCAP_RETENTION_AUCTIONS): must be 0 (kept for ever) or at least 65d (a month counting 28 days), got 2mo",
				"retention-interactions (ENDCAP_RETENTION_INTERACTIONS): must be 0 (kept for ever), a number of days (90d) or of months (6mo)",
				"retention-report-files (ENDCAP_RETENTION_REPORT_FILES): must be 0 (kept for ever) or at least 7d"}, nil},
		{"several combinations", map[string]string{"ENDCAP_REDIS_ADDR": "a:1,b:2", "ENDCAP_S3_ACCESS_KEY": "AKIA"}, []string{"--projector-flush-timeout", "2m"},
			[]string{"3 problems", "set redis-cluster", "must be longer than", "s3-access-key and s3-secret-key go together"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := resolveWith(t, c.env, c.args)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, n := range c.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("error has %q:\n%v", n, err)
				}
			}
		})
	}
}

// Every secret setting has a file form; the value never shows in an error.
func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw := file("pw", "s3cr3t-ch\n")
	s3 := file("s3", "s3cr3t-s3")
	long := file("long", "s3cr3t-"+strings.Repeat("k", 32))
	empty := file("empty", "")
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(c Config) bool
		wantErr string
	}{
		{"variable", map[string]string{"ENDCAP_CLICKHOUSE_PASSWORD_FILE": pw}, nil, func(c Config) bool { return c.ClickHousePassword == "s3cr3t-ch" }, ""},
		{"flag", nil, []string{"--s3-secret-key-file", s3, "--s3-access-key", "AKIA"}, func(c Config) bool { return c.S3SecretKey == "s3cr3t-s3" }, ""},
		{"every kind", map[string]string{"ENDCAP_REDIS_PASSWORD_FILE": pw, "ENDCAP_SMTP_PASSWORD_FILE": pw, "ENDCAP_CURSOR_SECRET_FILE": long, "ENDCAP_BID_SIGNING_KEYS_FILE": s3}, nil, func(c Config) bool {
			return c.RedisPasswordFile == pw && c.SMTPPassword == "s3cr3t-ch" && c.CursorSecret == "s3cr3t-"+strings.Repeat("k", 32) && c.BidSigningKeys == "s3cr3t-s3"
		}, ""},
		{"both forms", map[string]string{"ENDCAP_REDIS_PASSWORD": "x", "ENDCAP_REDIS_PASSWORD_FILE": pw}, nil, nil, "redis-password and redis-password-file are both set: give one"},
		{"both forms by flag", nil, []string{"--smtp-password", "x", "--smtp-password-file", pw}, nil, "not both"},
		{"no such file", map[string]string{"ENDCAP_CLICKHOUSE_PASSWORD_FILE": dir + "/none"}, nil, nil, "clickhouse-password-file (ENDCAP_CLICKHOUSE_PASSWORD_FILE): open"},
		{"an empty file", nil, []string{"--cursor-secret-file", empty}, nil, "is empty"},
		{"the master key keeps its own file setting", map[string]string{"ENDCAP_SECRET_KEY_FILE": pw}, nil, func(c Config) bool { return c.SecretKeyFile == pw && c.SecretKey == "" }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := resolveWith(t, c.env, c.args)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("the error shows a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(cfg) {
				t.Errorf("unexpected config %+v", cfg)
			}
			for _, s := range cfg.Secrets() {
				if !strings.HasPrefix(s, "s3cr3t") {
					t.Errorf("Secrets has %q", s)
				}
			}
			if len(cfg.Secrets()) == 0 && cfg.SecretKeyFile == "" {
				t.Error("Secrets is empty")
			}
		})
	}
}

// A secret's bad value is named, not shown.
func TestSecretNotInErrors(t *testing.T) {
	_, err := resolveWith(t, map[string]string{"ENDCAP_S3_SECRET_KEY": "s3cr3t"}, nil)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "go together") {
		t.Fatalf("err %v", err)
	}
}

// Every setting named like a secret is marked secret (secret(...)), so
// that it has its file form and never shows; a new setting has to be too.
func TestSecretsMarked(t *testing.T) {
	for _, s := range settings {
		name := strings.TrimSuffix(s.flag, "-file")
		looks := strings.Contains(name, "password") || strings.Contains(name, "secret") || strings.HasSuffix(name, "-keys") || strings.HasSuffix(name, "-token")
		if looks && name == s.flag && !secretFlags[s.flag] && s.flag != "s3-access-key" {
			t.Errorf("%s looks like a secret: mark its row secret(...)", s.flag)
		}
	}
	for _, row := range EnvTable() {
		if secretFlags[strings.TrimPrefix(row[0], "--")] && row[2] != "" {
			t.Errorf("%s: a secret has no default, got %q", row[0], row[2])
		}
		if strings.Contains(row[2], DevS3SecretKey) {
			t.Errorf("%s: the development S3 secret is a default", row[0])
		}
	}
}

// serve refuses development credentials against endpoints off loopback,
// naming the setting, unless told to allow them.
func TestInsecureDefaults(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string // empty: accepted
	}{
		{"the local stack", map[string]string{"ENDCAP_S3_ACCESS_KEY": "endcap", "ENDCAP_S3_SECRET_KEY": DevS3SecretKey}, nil},
		{"localhost", map[string]string{"ENDCAP_CLICKHOUSE_ADDR": "localhost:9000", "ENDCAP_S3_ENDPOINT": "http://[::1]:9100", "ENDCAP_S3_ACCESS_KEY": "endcap", "ENDCAP_S3_SECRET_KEY": DevS3SecretKey}, nil},
		{"dev S3 secret on AWS", map[string]string{"ENDCAP_S3_ENDPOINT": "", "ENDCAP_S3_ACCESS_KEY": "endcap", "ENDCAP_S3_SECRET_KEY": DevS3SecretKey},
			[]string{"s3-secret-key (ENDCAP_S3_SECRET_KEY) is the development stack's known secret", "(AWS S3)", "ENDCAP_ALLOW_INSECURE_DEFAULTS=true"}},
		{"dev S3 secret on a remote endpoint", map[string]string{"ENDCAP_S3_ENDPOINT": "https://minio.internal:9000", "ENDCAP_S3_ACCESS_KEY": "endcap", "ENDCAP_S3_SECRET_KEY": DevS3SecretKey},
			[]string{"https://minio.internal:9000 that is not on loopback"}},
		{"empty ClickHouse password on a remote server", map[string]string{"ENDCAP_CLICKHOUSE_ADDR": "127.0.0.1:9000,ch-2.internal:9000"},
			[]string{"clickhouse-password (ENDCAP_CLICKHOUSE_PASSWORD or ENDCAP_CLICKHOUSE_PASSWORD_FILE) is empty", "ch-2.internal:9000"}},
		{"both", map[string]string{"ENDCAP_CLICKHOUSE_ADDR": "10.0.0.5:9000", "ENDCAP_S3_ENDPOINT": "", "ENDCAP_S3_ACCESS_KEY": "endcap", "ENDCAP_S3_SECRET_KEY": DevS3SecretKey},
			[]string{"2 problems", "clickhouse-password", "s3-secret-key"}},
		{"a password on a remote server", map[string]string{"ENDCAP_CLICKHOUSE_ADDR": "10.0.0.5:9000", "ENDCAP_CLICKHOUSE_PASSWORD": "pw", "ENDCAP_S3_ENDPOINT": ""}, nil},
		{"allowed", map[string]string{"ENDCAP_CLICKHOUSE_ADDR": "10.0.0.5:9000", "ENDCAP_S3_ENDPOINT": "", "ENDCAP_S3_ACCESS_KEY": "endcap", "ENDCAP_S3_SECRET_KEY": DevS3SecretKey, "ENDCAP_ALLOW_INSECURE_DEFAULTS": "true"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := resolveWith(t, c.env, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.InsecureDefaults()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestRetentionSettings(t *testing.T) {
	now := time.Date(2026, 5, 31, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		env    map[string]string
		events Age
		cutoff time.Time
	}{
		{nil, Age{}, time.Time{}},
		{map[string]string{"ENDCAP_RETENTION_EVENTS": "0"}, Age{}, time.Time{}},
		{map[string]string{"ENDCAP_RETENTION_EVENTS": "65d"}, Age{Days: 65}, time.Date(2026, 3, 27, 10, 0, 0, 0, time.UTC)},
		{map[string]string{"ENDCAP_RETENTION_EVENTS": "3mo"}, Age{Months: 3}, time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC)}, // Feb 31 is Mar 3
		{map[string]string{"ENDCAP_RETENTION_EVENTS": "13mo"}, Age{Months: 13}, time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		cfg, err := resolveWith(t, c.env, nil)
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if cfg.RetentionEvents != c.events || !cfg.RetentionEvents.Cutoff(now).Equal(c.cutoff) {
			t.Errorf("%v: %+v cut-off %s, want %+v %s", c.env, cfg.RetentionEvents, cfg.RetentionEvents.Cutoff(now), c.events, c.cutoff)
		}
		if cfg.RetentionAuctions != (Age{}) || cfg.RetentionExportFiles != (Age{}) || cfg.RetentionInterval != time.Hour {
			t.Errorf("defaults: %+v %+v %s", cfg.RetentionAuctions, cfg.RetentionExportFiles, cfg.RetentionInterval)
		}
	}
}

func TestDocURLBase(t *testing.T) {
	for _, c := range []struct{ v, want string }{
		{"", "https://github.com/endcap/endcap/blob/main/docs"},
		{"https://docs.ads.example.com/endcap/", "https://docs.ads.example.com/endcap"},
		{"ftp://docs.example.com", ""}, {"docs.example.com", ""}, {"https://docs.example.com/?a=b", ""}, {"https:///docs", ""},
	} {
		env := map[string]string{}
		if c.v != "" {
			env["ENDCAP_DOC_URL_BASE"] = c.v
		}
		cfg, err := resolveWith(t, env, nil)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%q accepted", c.v)
		case c.want != "" && (err != nil || cfg.DocURLBase != c.want):
			t.Errorf("%q: %q %v, want %q", c.v, cfg.DocURLBase, err, c.want)
		}
	}
}
