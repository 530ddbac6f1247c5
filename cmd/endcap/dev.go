//go:build dev

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/endcap/endcap/app"
	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/gomem"
	"github.com/endcap/endcap/internal/masterkey"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/users"
)

// credentials is .endcap/dev/credentials.json.
type credentials struct {
	MarketplaceID  string `json:"marketplaceId"`
	MarketplaceKey string `json:"marketplaceKey"`
	AdvancedKey    string `json:"advancedKey"`
	// The console's demo administrator.
	AdminEmail    string `json:"adminEmail,omitempty"`
	AdminPassword string `json:"adminPassword,omitempty"`
}

func readCredentials(path string) (credentials, error) {
	var c credentials
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(b, &c)
}

func portOf(hostport string) (int, error) {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

// cmdDev runs the whole system on the local stack: ClickHouse, Redis and the
// S3 server as child processes, kfake in-process, and every target (or the
// one --target names). With --redis-cluster it starts no Redis and uses the
// cluster --redis-addr names; with --local-redis-cluster it starts one of
// its own (three masters with a replica each) and uses that.
func cmdDev(ctx context.Context, args []string) error {
	var dir string
	var chHTTPPort int
	_, external := os.LookupEnv("ENDCAP_KAFKA_BROKERS")
	var runKfake bool
	var target string
	var chLogs, localCluster bool
	var mailSMTP, mailWeb int
	var noDemo, demoTraffic bool
	cfg, _, err := parse("dev", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&demoTraffic, "demo-traffic", true, "on the demo marketplace's first start, write a week of auctions, impressions, clicks and purchases for it in the background (<dir>/dev/demo-traffic.json records it), so that the console's charts and the first export show something")
		fs.BoolVar(&noDemo, "no-demo", false, "start the stack empty: no demo marketplace, keys or console administrator (a clean start, or a stack to restore a backup into)")
		fs.IntVar(&mailSMTP, "mail-smtp-port", 11025, "SMTP port of the local inbox (maildev) the console's invitation e-mails go to, unless ENDCAP_SMTP_ADDR is set")
		fs.IntVar(&mailWeb, "mail-web-port", 11080, "port of the local inbox's web page and REST API (maildev)")
		fs.StringVar(&dir, "dir", envOr("ENDCAP_DEV_DIR", ".endcap"), "data directory of the local stack (env ENDCAP_DEV_DIR)")
		fs.IntVar(&chHTTPPort, "clickhouse-http-port", 18123, "HTTP port of the local ClickHouse")
		fs.BoolVar(&chLogs, "clickhouse-system-logs", envOr("ENDCAP_DEV_CLICKHOUSE_LOGS", "") == "1",
			"the local ClickHouse records every query in system.query_log and every part it writes or merges in system.part_log, for diagnosis (env ENDCAP_DEV_CLICKHOUSE_LOGS=1)")
		fs.BoolVar(&runKfake, "kfake", !external, "run Kafka in-process (kfake) on the port of --kafka-brokers; default true unless ENDCAP_KAFKA_BROKERS is set")
		fs.BoolVar(&localCluster, "local-redis-cluster", envOr("ENDCAP_DEV_REDIS_CLUSTER", "") == "1",
			"run Redis as a local Redis Cluster of three masters and three replicas, on the port of --redis-addr and the five after it, data in <dir>/redis-cluster, and Endcap on it in cluster mode (env ENDCAP_DEV_REDIS_CLUSTER=1)")
		fs.StringVar(&target, "target", "all", "what the Endcap process runs on the stack: all, or api alone (events then wait in Kafka until a process with every target starts: deploy/local/bench-projectors.sh CATCHUP=1)")
	})
	if err != nil {
		return err
	}
	t := app.Target(target)
	if t != app.TargetAll && t != app.TargetAPI {
		return fmt.Errorf("--target %q: endcap dev runs all or api", target)
	}
	log := newLogger(cfg, cfg.LogLevel)
	gomem.Tune(memoryRole(t), log)
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}

	chPort, err := portOf(cfg.ClickHouseAddr)
	if err != nil {
		return fmt.Errorf("--clickhouse-addr: %w", err)
	}
	var redisPort int
	switch {
	case localCluster && cfg.RedisCluster:
		return errors.New("--local-redis-cluster starts a cluster of its own; --redis-cluster names one that runs already: give one of them")
	case !cfg.RedisCluster:
		// The first address's port: the local Redis, or the first node of the local cluster.
		if redisPort, err = portOf(strings.Split(cfg.RedisAddr, ",")[0]); err != nil {
			return fmt.Errorf("--redis-addr: %w", err)
		}
	}
	s3u, err := url.Parse(cfg.S3Endpoint)
	if err != nil || s3u.Port() == "" {
		return fmt.Errorf("--s3-endpoint must be http://127.0.0.1:PORT for the local stack, got %q", cfg.S3Endpoint)
	}
	s3Port, _ := strconv.Atoi(s3u.Port())

	opts := localstack.DefaultOptions(dir)
	opts.ClickHousePort, opts.ClickHouseHTTPPort, opts.RedisPort, opts.S3Port = chPort, chHTTPPort, redisPort, s3Port
	if cfg.S3AccessKey == "" && cfg.S3SecretKey == "" {
		// The local S3 server's keys: not defaults of the configuration,
		// so that no other process uses them by omission.
		cfg.S3AccessKey, cfg.S3SecretKey = localstack.DefaultS3AccessKey, localstack.DefaultS3SecretKey
	}
	opts.S3AccessKey, opts.S3SecretKey = cfg.S3AccessKey, cfg.S3SecretKey
	opts.ClickHouseSystemLogs = chLogs
	opts.Logger = log
	// The local inbox: invitation e-mails go there unless another SMTP
	// server is configured.
	_, ownSMTP := os.LookupEnv("ENDCAP_SMTP_ADDR")
	switch {
	case ownSMTP || cfg.SMTPAddr != "":
	case localstack.HasMailDev(dir):
		opts.Mail, opts.MailSMTPPort, opts.MailWebPort = true, mailSMTP, mailWeb
	default:
		log.Warn("maildev is not installed (deploy/local/install.sh): no invitation e-mails; the console's Users page shows the links")
	}
	if cfg.RedisCluster {
		opts.Redis = false // the cluster of --redis-addr
	}
	if localCluster {
		opts.RedisCluster, opts.RedisReplicas, opts.RedisNodeTimeout = 3, 1, 5*time.Second
		for i := range 6 {
			if i > 0 {
				opts.RedisNodePorts = append(opts.RedisNodePorts, redisPort+i)
			}
			opts.RedisBusPorts = append(opts.RedisBusPorts, redisPort+10_000+i) // Redis's default: the port + 10000
		}
	}
	log.Info("starting the local stack", "dir", dir)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	stack, err := localstack.Start(sctx, opts)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		if err := stack.Stop(); err != nil {
			log.Warn("stopping the local stack", "err", err)
		}
	}()
	redisShown := stack.RedisAddr
	switch {
	case localCluster:
		cfg.RedisAddr, cfg.RedisCluster = strings.Join(stack.RedisAddrs, ","), true
		redisShown = "cluster " + cfg.RedisAddr + " (redis-cli -c -p " + strconv.Itoa(redisPort) + ")"
	case cfg.RedisCluster:
		redisShown = "cluster " + cfg.RedisAddr + " (not started by endcap dev)"
	}

	if runKfake {
		cluster, err := startKfake(cfg, dir)
		if err != nil {
			return err
		}
		defer cluster.Close()
		log.Info("kafka (kfake) listening", "addrs", cluster.ListenAddrs(), "data", filepath.Join(dir, "kafka"))
	}

	if cfg.SecretKeyFile == "" && cfg.SecretKey == "" {
		// The demo keeps its signing keys in Redis, wrapped with a master
		// key of its own, as production does.
		if cfg.SecretKeyFile, err = ensureMasterKey(filepath.Join(dir, "dev", "secret.key")); err != nil {
			return err
		}
	}
	if stack.MailSMTPAddr != "" {
		cfg.SMTPAddr = stack.MailSMTPAddr
	}
	if _, set := os.LookupEnv("ENDCAP_CONSOLE_SECURE_COOKIES"); !set {
		// The console is reached over plain http://127.0.0.1 here.
		cfg.ConsoleSecureCookies = false
	}
	if _, set := os.LookupEnv("ENDCAP_PROJECTOR_STATE_DIR"); !set {
		// The events fold's claim store lives with the stack's data.
		cfg.ProjectorStateDir = filepath.Join(dir, "projector-state")
	}
	if _, set := os.LookupEnv("ENDCAP_WEBHOOK_ALLOW_LOOPBACK"); !set {
		// A webhook receiver on this machine is the usual way to try
		// webhooks locally (docs/reference/webhooks.md, Safety).
		cfg.WebhookAllowLoopback = true
	}
	a, err := app.New(cfg, t, log)
	if err != nil {
		return err
	}
	addr, err := a.Listen()
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	rctx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	go func() { runErr <- a.Run(rctx) }()
	// stopAndWait stops the system when the demo cannot be set up: the
	// error that stopped it is the demo's, Run's own is only logged.
	stopAndWait := func() {
		stopApp()
		if err := <-runErr; err != nil {
			log.Warn("endcap stopped", "err", err)
		}
	}

	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	err = a.WaitReady(wctx)
	wcancel()
	if err != nil {
		stopAndWait()
		return fmt.Errorf("entity state did not load: %w", err)
	}
	inbox := "(none: ENDCAP_SMTP_ADDR " + cfg.SMTPAddr + ")"
	if stack.MailWebURL != "" {
		inbox = stack.MailWebURL + "  (maildev; SMTP " + stack.MailSMTPAddr + ")"
	}
	health := "(/readyz, /metrics)"
	if m := a.MetricsAddr(); m != nil {
		health = "(/readyz; /metrics on http://" + m.String() + "/metrics)"
	}
	if noDemo {
		fmt.Printf(`
Endcap is running, empty (Ctrl-C stops everything).
  API             http://%s   %s
  Kafka (kfake)   %s
  ClickHouse      %s  (clickhouse-client --port %d -d %s; HTTP %s)
  Redis           %s
  S3              %s  bucket %s
  Mail inbox      %s
  master key      %s
  Create a marketplace and its keys with endcap admin (docs/design/state.md, Administration),
  or restore a backup into it (docs/operations/operations.md, Backup and restore).
`, cfg.HTTPAddr, health, cfg.KafkaBrokers[0], stack.ClickHouseAddr, chPort, cfg.ClickHouseDatabase, stack.ClickHouseHTTPAddr, redisShown,
			stack.S3Endpoint, cfg.S3Bucket, inbox, masterKeySource(cfg))
		return devWait(runErr, log)
	}
	credPath := filepath.Join(dir, "dev", "credentials.json")
	creds, err := ensureDemo(ctx, a.Accounts, a.Users, credPath)
	if err == nil {
		err = seedDemo(ctx, a, creds.MarketplaceID)
	}
	if err != nil && ctx.Err() != nil {
		// Ctrl-C while the demo was being written: a normal stop (the next
		// start completes the demo).
		stopAndWait()
		return nil
	}
	if err != nil {
		stopAndWait()
		return fmt.Errorf("demo marketplace: %w", err)
	}
	fmt.Printf(`
Endcap is running (Ctrl-C stops everything).
  API             http://%s   %s
  Kafka (kfake)   %s
  ClickHouse      %s  (clickhouse-client --port %d -d %s)
  Redis           %s
  S3              %s  bucket %s
  Mail inbox      %s
  Demo marketplace %s (USD, America/New_York)
  marketplace key %s
  advanced key    %s
  console         http://%s/console
  console admin   %s  password %s
  credentials     %s
  master key      %s
`, cfg.HTTPAddr, health, cfg.KafkaBrokers[0], stack.ClickHouseAddr, chPort, cfg.ClickHouseDatabase, redisShown,
		stack.S3Endpoint, cfg.S3Bucket, inbox, creds.MarketplaceID, creds.MarketplaceKey, creds.AdvancedKey,
		cfg.HTTPAddr, creds.AdminEmail, creds.AdminPassword, credPath, masterKeySource(cfg))
	if !demoTraffic || t != app.TargetAll {
		return devWait(runErr, log)
	}
	// The demo traffic, after the banner: the stack is ready meanwhile.
	seeded := make(chan struct{})
	go func() {
		defer close(seeded)
		if err := seedDemoTraffic(rctx, a, creds, "http://"+addr.String(), filepath.Dir(credPath), log); err != nil && rctx.Err() == nil {
			log.Warn("demo traffic: not written (the next start tries again)", "err", err)
		}
	}()
	err = devWait(runErr, log)
	stopApp()
	<-seeded
	return err
}

// devWait waits for the system to stop.
func devWait(runErr <-chan error, log *slog.Logger) error {
	err := <-runErr
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	log.Info("endcap stopped; stopping the local stack")
	return err
}

// demoAdmin is the e-mail address of the demo's console administrator.
const demoAdmin = "admin@demo.example"

// ensureDemo reuses the demo marketplace, keys and console administrator of
// the credentials file when the state still has them, and creates what is
// missing (an administrator whose password is no longer the file's gets a
// new one).
func ensureDemo(ctx context.Context, acc *accounts.Service, us *users.Service, path string) (credentials, error) {
	c, _ := readCredentials(path)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	changed := false
	if _, ok := acc.Marketplace(c.MarketplaceID); !ok {
		m, err := acc.CreateMarketplace(ctx, "Demo Marketplace", "USD", "America/New_York")
		if err != nil {
			return c, err
		}
		c = credentials{MarketplaceID: m.ID}
		changed = true
	}
	for _, k := range []struct {
		typ accounts.KeyType
		dst *string
	}{{accounts.KeyMarketplace, &c.MarketplaceKey}, {accounts.KeyAdvanced, &c.AdvancedKey}} {
		if p, ok := acc.Authenticate(*k.dst); ok && p.Key.Type == k.typ && p.Marketplace.ID == c.MarketplaceID {
			continue
		}
		secret, _, err := acc.CreateKey(ctx, c.MarketplaceID, k.typ)
		if err != nil {
			return c, err
		}
		*k.dst = secret
		changed = true
	}
	if c.AdminEmail == "" {
		c.AdminEmail = demoAdmin
	}
	if _, err := us.Authenticate(ctx, c.MarketplaceID, c.AdminEmail, c.AdminPassword); err != nil {
		pw := users.RandomToken()[:20]
		if old, ok := us.Lookup(c.MarketplaceID, c.AdminEmail); ok {
			if _, err := us.SetPassword(ctx, old.ID, pw); err != nil {
				return c, err
			}
		} else if _, err := us.CreateAdmin(ctx, c.MarketplaceID, c.AdminEmail, pw); err != nil {
			return c, err
		}
		c.AdminPassword = pw
		changed = true
	}
	if !changed {
		return c, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return c, err
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return c, err
	}
	return c, os.Rename(tmp, path)
}

// masterKeySource says where the master key comes from, for the banner.
func masterKeySource(cfg config.Config) string {
	if cfg.SecretKeyFile != "" {
		return cfg.SecretKeyFile
	}
	return "ENDCAP_SECRET_KEY"
}

// ensureMasterKey returns path, writing a new master key there (mode 0600)
// when the file does not exist yet.
func ensureMasterKey(path string) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(masterkey.Generate()+"\n"), 0o600); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// startKfake starts the local stack's Kafka (kfake) on the port of the first
// of --kafka-brokers, keeping its data in dir/kafka.
func startKfake(cfg config.Config, dir string, opts ...kfake.Opt) (*kfake.Cluster, error) {
	kport, err := portOf(cfg.KafkaBrokers[0])
	if err != nil {
		return nil, fmt.Errorf("--kafka-brokers: %w", err)
	}
	cluster, err := kfake.NewCluster(append([]kfake.Opt{
		kfake.Ports(kport),
		kfake.DataDir(filepath.Join(dir, "kafka")),
		kfake.DefaultNumPartitions(cfg.KafkaEventsPartitions),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("start Kafka (kfake) on port %d: %w", kport, err)
	}
	return cluster, nil
}

// cmdKafka runs the local stack's Kafka (kfake) alone, until interrupted:
// for `endcap dev --kfake=false`, so that the broker's work and garbage are
// not in the API's process (as in production, where Kafka runs elsewhere).
func cmdKafka(ctx context.Context, args []string) error {
	var dir, saslUser, tlsCert, tlsKey string
	cfg, _, err := parse("kafka", args, func(fs *flag.FlagSet) {
		fs.StringVar(&dir, "dir", envOr("ENDCAP_DEV_DIR", ".endcap"), "data directory of the local stack (env ENDCAP_DEV_DIR); the broker keeps its data in <dir>/kafka")
		fs.StringVar(&saslUser, "sasl-user", "", "USER:PASSWORD: the broker requires SASL and takes this user with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512")
		fs.StringVar(&tlsCert, "tls-cert", "", "PEM file of the broker's certificate: the broker listens with TLS only (with --tls-key)")
		fs.StringVar(&tlsKey, "tls-key", "", "PEM file of the private key of --tls-cert")
	})
	if err != nil {
		return err
	}
	secure, err := localstack.KafkaSecurity(saslUser, tlsCert, tlsKey)
	if err != nil {
		return err
	}
	log := newLogger(cfg, cfg.LogLevel)
	cluster, err := startKfake(cfg, dir, secure...)
	if err != nil {
		return err
	}
	log.Info("kafka (kfake) listening", "addrs", cluster.ListenAddrs(), "data", filepath.Join(dir, "kafka"),
		"tls", tlsCert != "", "sasl", saslUser != "")
	<-ctx.Done()
	cluster.Close()
	return nil
}
