package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/testkit/testenv"
)

// closedPort is an address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// endcap config check reaches each dependency with the process's settings
// and prints a line each; with any one of them down (nothing on its port,
// or a server that answers nothing) its line says FAIL, the command fails,
// and it ends within the timeout.
func TestConfigCheck(t *testing.T) {
	env := testenv.Get(t)
	_, brokers := testenv.Kafka(t)
	cfg := env.Config(t, brokers)
	_, topics := testenv.Topics(t, t.Context(), cfg, brokers, 3)
	st := s3store.Open(s3store.Options{Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, Bucket: cfg.S3Bucket, AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	hung := testenv.OwnRedis(t)
	if err := hung.Freeze(); err != nil {
		t.Fatal(err)
	}
	narrow := testenv.OwnRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: narrow.Addr})
	if err := rdb.Do(ctx, "ACL", "SETUSER", "default", "-zadd", "-hincrby").Err(); err != nil {
		t.Fatal(err)
	}
	_ = rdb.Close()

	base := map[string]string{
		"ENDCAP_KAFKA_BROKERS":       strings.Join(brokers, ","),
		"ENDCAP_KAFKA_TOPIC_PREFIX":  cfg.KafkaTopicPrefix,
		"ENDCAP_CLICKHOUSE_ADDR":     cfg.ClickHouseAddr,
		"ENDCAP_CLICKHOUSE_DATABASE": cfg.ClickHouseDatabase,
		"ENDCAP_REDIS_ADDR":          cfg.RedisAddr,
		"ENDCAP_REDIS_CLUSTER":       map[bool]string{true: "true", false: "false"}[cfg.RedisCluster],
		"ENDCAP_S3_ENDPOINT":         cfg.S3Endpoint,
		"ENDCAP_S3_BUCKET":           cfg.S3Bucket,
		"ENDCAP_S3_ACCESS_KEY":       cfg.S3AccessKey,
		"ENDCAP_S3_SECRET_KEY":       cfg.S3SecretKey,
	}
	cases := []struct {
		name   string
		env    map[string]string
		failed string // the line that says FAIL; empty: every line ok
		want   []string
	}{
		{"all reached", nil, "", []string{"kafka      ok   1 brokers", topics.Events + " 3 partitions", "clickhouse ok   version ", "redis      ok   PING ok; user default may run", "s3         ok   bucket " + cfg.S3Bucket + ": wrote, read and deleted"}},
		{"kafka down", map[string]string{"ENDCAP_KAFKA_BROKERS": closedPort(t)}, "kafka", nil},
		{"clickhouse down", map[string]string{"ENDCAP_CLICKHOUSE_ADDR": closedPort(t)}, "clickhouse", nil},
		{"redis down", map[string]string{"ENDCAP_REDIS_ADDR": closedPort(t), "ENDCAP_REDIS_CLUSTER": "false"}, "redis", nil},
		{"redis hung", map[string]string{"ENDCAP_REDIS_ADDR": hung.Addr, "ENDCAP_REDIS_CLUSTER": "false"}, "redis", nil},
		{"redis user without a command", map[string]string{"ENDCAP_REDIS_ADDR": narrow.Addr, "ENDCAP_REDIS_CLUSTER": "false"}, "redis", []string{"user default may not run: HINCRBY", "ZADD"}},
		{"s3 down", map[string]string{"ENDCAP_S3_ENDPOINT": "http://" + closedPort(t)}, "s3", nil},
		{"s3 refuses the key", map[string]string{"ENDCAP_S3_SECRET_KEY": cfg.S3SecretKey + "x"}, "s3", nil},
		{"smtp down", map[string]string{"ENDCAP_SMTP_ADDR": closedPort(t)}, "smtp", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range base {
				t.Setenv(k, v)
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			start := time.Now()
			err := cmdConfigCheck(t.Context(), &out, []string{"--timeout", "2s"})
			took := time.Since(start)
			t.Logf("%s(%s, err %v)", out.String(), took.Round(time.Millisecond), err)
			if took > 5*time.Second {
				t.Errorf("took %s with a 2s timeout", took)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if n := 4 + strings.Count(c.name, "smtp"); len(lines) != n {
				t.Fatalf("%d lines, want %d", len(lines), n)
			}
			for _, l := range lines {
				name := strings.Fields(l)[0]
				want := "ok"
				if name == c.failed {
					want = "FAIL"
				}
				if got := strings.Fields(l)[1]; got != want {
					t.Errorf("%s: %s, want %s", name, got, want)
				}
			}
			if (c.failed == "") != (err == nil) {
				t.Errorf("err %v with %q failing", err, c.failed)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if strings.Contains(out.String(), cfg.S3SecretKey) {
				t.Error("the output shows the S3 secret key")
			}
		})
	}
}
