package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/s3store"
)

// CheckResult is what endcap config check found of one dependency.
type CheckResult struct {
	Name   string // kafka, clickhouse, redis, s3, smtp
	Err    error  // nil: reached, with the rights Endcap needs
	Detail string // what was found
}

// CheckDependencies reaches every dependency of cfg at once, each within
// timeout, and says what it found (endcap config check): Kafka, ClickHouse,
// Redis, S3 and, when configured, SMTP, in that order.
func CheckDependencies(ctx context.Context, cfg config.Config, timeout time.Duration, log *slog.Logger) []CheckResult {
	checks := []struct {
		name string
		fn   func(context.Context, config.Config, *slog.Logger) (string, error)
	}{
		{"kafka", checkKafka},
		{"clickhouse", checkClickHouse},
		{"redis", checkRedis},
		{"s3", checkS3},
	}
	if cfg.SMTPAddr != "" {
		checks = append(checks, struct {
			name string
			fn   func(context.Context, config.Config, *slog.Logger) (string, error)
		}{"smtp", checkSMTP})
	}
	out := make([]CheckResult, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			done := make(chan struct{})
			var detail string
			var err error
			go func() {
				defer close(done)
				detail, err = c.fn(cctx, cfg, log)
			}()
			select {
			case <-done:
			case <-cctx.Done():
				// A client that does not keep to its context is not waited
				// for past the deadline (it ends with the process).
				err = fmt.Errorf("no answer within %s", timeout)
			}
			out[i] = CheckResult{Name: c.name, Err: err, Detail: detail}
		}()
	}
	wg.Wait()
	return out
}

func checkKafka(ctx context.Context, cfg config.Config, log *slog.Logger) (string, error) {
	conn, err := KafkaSecurity(cfg).Conn(ctx)
	if err != nil {
		return "", err
	}
	if err := kafka.Check(ctx, cfg.KafkaBrokers, conn, 5*time.Second); err != nil {
		if se := (*kafka.SettingError)(nil); errors.As(err, &se) {
			return "", err
		}
	}
	cl, err := kafka.NewClient(cfg.KafkaBrokers, log, conn...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		return "", fmt.Errorf("metadata of %s: %w", strings.Join(cfg.KafkaBrokers, ","), err)
	}
	if len(md.Brokers) == 0 {
		return "", fmt.Errorf("metadata of %s: no broker", strings.Join(cfg.KafkaBrokers, ","))
	}
	var have, missing []string
	for _, spec := range kafka.Specs(kafka.TopicNames(cfg.KafkaTopicPrefix), int(cfg.KafkaEventsPartitions), cfg.KafkaReplicationFactor, cfg.KafkaEventsRetention, cfg.KafkaAuctionsRetention) {
		t, ok := md.Topics[spec.Name]
		switch {
		case !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, spec.Name)
		case t.Err != nil:
			return "", fmt.Errorf("topic %s: %w", spec.Name, t.Err)
		default:
			have = append(have, fmt.Sprintf("%s %d partitions", spec.Name, len(t.Partitions)))
		}
	}
	detail := fmt.Sprintf("%d brokers, controller %d", len(md.Brokers), md.Controller)
	if len(have) > 0 {
		detail += "; " + strings.Join(have, ", ")
	}
	if len(missing) > 0 {
		detail += "; not created yet (serve creates them): " + strings.Join(missing, ", ")
	}
	return detail, nil
}

// migrationGrants are the privileges endcap migrate and the projectors use.
var migrationGrants = []string{"CREATE", "ALTER", "DROP", "INSERT", "SELECT"}

func checkClickHouse(ctx context.Context, cfg config.Config, _ *slog.Logger) (string, error) {
	o := ClickHouseOptions(cfg)
	o.Database = "default"
	c, err := clickhouse.Open(o)
	if err != nil {
		return "", err
	}
	defer c.Close()
	var version string
	if err := c.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		return "", fmt.Errorf("%s as %s: %w", cfg.ClickHouseAddr, cfg.ClickHouseUser, err)
	}
	var n uint64
	if err := c.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", cfg.ClickHouseDatabase).Scan(&n); err != nil {
		return "", err
	}
	detail := "version " + version + ", database " + cfg.ClickHouseDatabase
	if n == 0 {
		detail += " (not created yet: migrate creates it)"
	}
	rows, err := c.Query(ctx, "SHOW GRANTS")
	if err != nil {
		// Servers before 20.x have no SHOW GRANTS (users.xml grants all).
		return detail + "; grants not shown by this server", nil
	}
	defer rows.Close()
	var grants []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return "", err
		}
		grants = append(grants, g)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	var lacking []string
	all := strings.ToUpper(strings.Join(grants, "\n"))
	if !strings.Contains(all, "GRANT ALL") {
		for _, g := range migrationGrants {
			if !strings.Contains(all, g) {
				lacking = append(lacking, g)
			}
		}
	}
	if len(lacking) > 0 {
		return "", fmt.Errorf("%s; user %s lacks %s on %s (SHOW GRANTS: %s)", detail, cfg.ClickHouseUser, strings.Join(lacking, ", "), cfg.ClickHouseDatabase, strings.Join(grants, "; "))
	}
	return detail + "; grants: " + strings.Join(grants, "; "), nil
}

// redisCommands are the commands Endcap sends, with arguments of the right
// number, for ACL DRYRUN; the key is one of Endcap's (ec:…).
var redisCommands = [][]any{
	{"PING"}, {"INFO"}, {"WAIT", "0", "0"}, {"SCAN", "0"}, {"KEYS", "ec:*"},
	{"GET", "ec:check"}, {"SET", "ec:check", "v"}, {"DEL", "ec:check"}, {"UNLINK", "ec:check"}, {"EXISTS", "ec:check"},
	{"GETDEL", "ec:check"}, {"GETEX", "ec:check"}, {"INCRBY", "ec:check", "1"}, {"DECRBY", "ec:check", "1"},
	{"EXPIREAT", "ec:check", "1"}, {"EXPIRETIME", "ec:check"}, {"PEXPIRE", "ec:check", "1"}, {"PEXPIREAT", "ec:check", "1"},
	{"PTTL", "ec:check"}, {"PERSIST", "ec:check"},
	{"HGET", "ec:check", "f"}, {"HSET", "ec:check", "f", "v"}, {"HSETNX", "ec:check", "f", "v"}, {"HDEL", "ec:check", "f"},
	{"HINCRBY", "ec:check", "f", "1"}, {"HKEYS", "ec:check"}, {"HMGET", "ec:check", "f"}, {"HGETALL", "ec:check"},
	{"SADD", "ec:check", "m"}, {"SREM", "ec:check", "m"}, {"SCARD", "ec:check"}, {"SISMEMBER", "ec:check", "m"},
	{"ZADD", "ec:check", "1", "m"}, {"ZCARD", "ec:check"}, {"ZRANGE", "ec:check", "0", "1"}, {"ZRANGEBYSCORE", "ec:check", "0", "1"},
	{"ZREM", "ec:check", "m"}, {"ZREMRANGEBYSCORE", "ec:check", "0", "1"},
	{"EVAL", "return 1", "1", "ec:check"}, {"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "1", "ec:check"},
}

func checkRedis(ctx context.Context, cfg config.Config, _ *slog.Logger) (string, error) {
	rdb, err := OpenRedis(cfg)
	if err != nil {
		return "", err
	}
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return "", fmt.Errorf("PING %s: %w", cfg.RedisAddr, err)
	}
	user, err := rdb.Do(ctx, "ACL", "WHOAMI").Text()
	if err != nil {
		return "PING ok; ACL not available to this user or server (" + err.Error() + "): commands not checked", nil
	}
	var denied []string
	for _, cmd := range redisCommands {
		res, err := rdb.Do(ctx, append([]any{"ACL", "DRYRUN", user}, cmd...)...).Text()
		switch {
		case err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown subcommand"):
			return "PING ok; this server has no ACL DRYRUN (Redis 7.0+): commands not checked", nil
		case err != nil && strings.HasPrefix(err.Error(), "NOPERM"):
			return "PING ok; user " + user + " may not run ACL DRYRUN: commands not checked", nil
		case err != nil:
			denied = append(denied, fmt.Sprint(cmd[0])+" ("+err.Error()+")")
		case res != "OK":
			denied = append(denied, fmt.Sprint(cmd[0]))
		}
	}
	if len(denied) > 0 {
		return "", fmt.Errorf("user %s may not run: %s", user, strings.Join(denied, ", "))
	}
	return fmt.Sprintf("PING ok; user %s may run the %d commands Endcap sends (ACL DRYRUN)", user, len(redisCommands)), nil
}

func checkS3(ctx context.Context, cfg config.Config, _ *slog.Logger) (string, error) {
	st := s3store.Open(S3Options(cfg))
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := "endcap-config-check/" + hex.EncodeToString(b[:])
	if err := st.Probe(ctx, key); err != nil {
		return "", err
	}
	return "bucket " + cfg.S3Bucket + ": wrote, read and deleted " + key, nil
}

func checkSMTP(ctx context.Context, cfg config.Config, _ *slog.Logger) (string, error) {
	smtp := users.SMTP{Addr: cfg.SMTPAddr, User: cfg.SMTPUser, Password: cfg.SMTPPassword, From: cfg.SMTPFrom, TLS: cfg.SMTPTLS}
	if err := smtp.Probe(ctx); err != nil {
		return "", fmt.Errorf("%s: %w", cfg.SMTPAddr, err)
	}
	detail := cfg.SMTPAddr + ": EHLO ok, TLS " + cfg.SMTPTLS
	if cfg.SMTPUser != "" {
		detail += ", signed in as " + cfg.SMTPUser
	}
	return detail, nil
}
