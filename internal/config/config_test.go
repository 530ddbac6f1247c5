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

// TestDocumented keeps docs/operations.md true: every setting has its row.
func TestDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range EnvTable() {
		if !strings.Contains(string(b), "`"+row[0]+"` | `"+row[1]+"`") {
			t.Errorf("docs/operations.md lacks %s / %s: regenerate the table with `endcap config --markdown`", row[0], row[1])
		}
	}
}
