// Package app is Endcap's composition root: it builds the adapters and
// domain services a target needs and runs them in one process. cmd/endcap
// and the end-to-end tests both start the system through it.
package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/api"
	"github.com/endcap/endcap/api/console"
	"github.com/endcap/endcap/auction/bidtoken"
	"github.com/endcap/endcap/auction/index"
	"github.com/endcap/endcap/ingest"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/internal/idempotency"
	"github.com/endcap/endcap/internal/masterkey"
	"github.com/endcap/endcap/internal/pagination"
	"github.com/endcap/endcap/internal/priority"
	"github.com/endcap/endcap/internal/retry"
	"github.com/endcap/endcap/internal/telemetry"
	"github.com/endcap/endcap/management/accounts"
	"github.com/endcap/endcap/management/audit"
	"github.com/endcap/endcap/management/billing"
	"github.com/endcap/endcap/management/campaigns"
	"github.com/endcap/endcap/management/campaigns/freqcap"
	"github.com/endcap/endcap/management/catalog"
	"github.com/endcap/endcap/management/invitations"
	"github.com/endcap/endcap/management/privacy"
	"github.com/endcap/endcap/management/segments"
	"github.com/endcap/endcap/management/users"
	"github.com/endcap/endcap/management/webhooks"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/reporting/exports"
	"github.com/endcap/endcap/reporting/retention"
	"github.com/endcap/endcap/reporting/rollups"
	"github.com/endcap/endcap/reporting/scoredfiles"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/storage/s3store"
	"github.com/endcap/endcap/storage/spill"
	"github.com/endcap/endcap/storage/statelog"
)

// foregroundGate is the gate at which the events fold gives way to the
// API's requests: only in a process that runs both (docs/design/projector.md,
// Sharing the cores with the API), and not when maxWait is 0.
func foregroundGate(t Target, maxWait time.Duration) *priority.Gate {
	if !t.runs(TargetAPI) || !t.runs(TargetProjector) {
		return nil
	}
	return priority.NewGate(maxWait)
}

// Target names which parts a process runs.
type Target string

const (
	TargetAll       Target = "all"
	TargetAPI       Target = "api"
	TargetProjector Target = "projector"
	TargetExporter  Target = "exporter"
)

// ParseTarget validates a --target value.
func ParseTarget(s string) (Target, error) {
	switch t := Target(s); t {
	case TargetAll, TargetAPI, TargetProjector, TargetExporter:
		return t, nil
	}
	return "", fmt.Errorf("target must be all, api, projector or exporter, got %q", s)
}

func (t Target) runs(x Target) bool { return t == TargetAll || t == x }

// App is one running Endcap process.
type App struct {
	cfg    config.Config
	target Target
	log    *slog.Logger

	Topics kafka.Topics
	Kafka  *kgo.Client
	// auctionsKafka produces auction records only: its own buffer, so that a
	// slow Kafka fills it (and records are dropped) without ever making
	// /v2/events wait for room in the events producer's buffer.
	auctionsKafka *kgo.Client
	kafkaConn     kafka.Conn // how every Kafka client of the process connects (TLS, SASL)
	// capCounts reads the shoppers' frequency cap counts for the auction
	// engines, over connections of its own (freqcap.Store.Send).
	capCounts *freqcap.Store
	// catalogTexts holds the products' names and details on local disk
	// (ENDCAP_CATALOG_DIR), closed after the logs.
	catalogTexts *spill.Store
	ClickHouse   clickhouse.Conn
	Redis        redis.UniversalClient
	S3           *s3store.Store
	StateLog     *statelog.Log // accounts
	Entities     *statelog.Log // catalog, campaigns, billing, segments, webhooks, ...
	Deliveries   *statelog.Log // webhook deliveries (api and exporter only; else nil)
	Accounts     *accounts.Service
	Exports      *exports.Service
	Cursors      *pagination.Signer
	Spend        *spend.Cache      // campaign spend for the auction, refreshed from Redis
	Funds        *spend.FundsCache // vendors out of funds, for the auction (docs/reference/balances.md)
	// AuctionIndex is the auction's index of products, categories,
	// campaigns and bids, fed by the catalog and campaigns views.
	AuctionIndex *index.Index
	BidKeys      atomic.Pointer[bidtoken.Keyring] // resolvedBidId keys, loaded by Prepare
	// master wraps the secrets kept in Redis (nil: none configured).
	master *masterkey.Keys
	// upgradedAt is when Redis moved to campaign keys (spend.Upgrade, in
	// Prepare; zero: it never held the earlier layout).
	upgradedAt time.Time
	// settled: the collection after the entity state loaded has run (settle);
	// the process is not ready before.
	settled atomic.Bool
	// health runs the readiness checks in the background (/readyz).
	health *api.Health
	// foreground counts the API's /v2/events and auction requests in
	// flight, for the events fold to give way to them, when this process
	// runs both (nil otherwise; docs/design/projector.md, Sharing the cores).
	foreground *priority.Gate
	// projectors are the consume loops this process runs, for the stall
	// check of /readyz.
	projectorsMu sync.Mutex
	projectors   []projections.Health

	// Management areas (built in domains.go).
	Catalog   *catalog.Service
	Campaigns *campaigns.Service
	Segments  *segments.Service
	Billing   *billing.Service
	// Balances: vendor balances and their ledger (docs/reference/balances.md).
	Balances *billing.Balances
	Webhooks *webhooks.Service
	Privacy  *privacy.Service

	WebhookDeliveries *webhooks.Deliveries
	dispatcher        *webhooks.Dispatcher // exporter only

	// The console (api target only; nil otherwise): its users, the audit
	// log, the keys' last uses, invitation links and their e-mails, and the
	// health page's sampler (console.go).
	Invitations *invitations.Service
	Users       *users.Service
	Audit       *audit.Log
	KeyUsage    *accounts.Usage
	links       *users.Links
	sso         *users.SSO
	mailer      *users.InviteMailer
	sampler     *console.Sampler

	handler         http.Handler
	listener        net.Listener
	metricsListener net.Listener                // nil: /metrics on the API port
	stopTracing     func(context.Context) error // nil: traces off
}

// New builds every component of target. It makes no network call, so a
// process starts (and answers /livez) while its dependencies come up. The
// configuration is checked before any client is made; a failure after that
// closes the clients made so far.
func New(cfg config.Config, target Target, log *slog.Logger) (_ *App, err error) {
	a := &App{cfg: cfg, target: target, log: log, Topics: kafka.TopicNames(cfg.KafkaTopicPrefix)}
	if cfg.BidSigningKeys != "" {
		// A keyring given in the configuration is checked before anything
		// starts: no retry can mend it.
		if _, err := bidtoken.ParseKeyring(cfg.BidSigningKeys); err != nil {
			return nil, fmt.Errorf("ENDCAP_BID_SIGNING_KEYS: %w", err)
		}
	}
	if a.master, err = masterkey.Load(cfg.SecretKeyFile, cfg.SecretKey); err != nil {
		return nil, err
	}
	if target.runs(TargetAPI) && a.master == nil && (cfg.BidSigningKeys == "" || cfg.CursorSecret == "") {
		return nil, errNoMasterKey
	}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if a.kafkaConn, err = KafkaSecurity(cfg).Conn(context.Background()); err != nil {
		return nil, err
	}
	producerOpts := []kgo.Opt{kgo.ClientID("endcap-" + string(target)), kgo.ProducerLinger(cfg.KafkaLinger)}
	if cfg.OTelEndpoint != "" {
		// Traces (docs/operations/operations.md, Traces): the process's spans, and
		// the records of its main producer carry their trace.
		if a.stopTracing, err = telemetry.StartTracing(telemetry.TracingOptions{Endpoint: cfg.OTelEndpoint,
			Service: "endcap-" + string(target), SampleRatio: cfg.OTelSampleRatio}); err != nil {
			return nil, err
		}
		producerOpts = append(producerOpts, kafka.TraceProduce())
		log.Info("traces sent over OTLP/HTTP", "endpoint", cfg.OTelEndpoint, "sample_ratio", cfg.OTelSampleRatio)
	}
	if a.Kafka, err = kafka.NewClient(cfg.KafkaBrokers, log, a.kafkaConn.With(producerOpts...)...); err != nil {
		return nil, err
	}
	if a.auctionsKafka, err = kafka.NewClient(cfg.KafkaBrokers, log, a.kafkaConn.With(kgo.ClientID("endcap-auction-records"), kgo.ProducerLinger(max(cfg.KafkaLinger, 5*time.Millisecond)),
		kgo.MaxBufferedRecords(100_000), kgo.RecordDeliveryTimeout(30*time.Second))...); err != nil {
		return nil, err
	}
	if a.ClickHouse, err = clickhouse.Open(ClickHouseOptions(cfg)); err != nil {
		return nil, err
	}
	if a.Redis, err = OpenRedis(cfg); err != nil {
		return nil, err
	}
	a.S3 = s3store.Open(S3Options(cfg))
	if a.StateLog, err = statelog.New(a.Topics.Accounts, cfg.KafkaBrokers, a.Kafka, log, a.kafkaConn...); err != nil {
		return nil, err
	}
	a.Accounts = accounts.New(a.StateLog)
	if target.runs(TargetAPI) {
		a.Audit = audit.New(a.StateLog)
	}
	if a.Entities, err = statelog.New(a.Topics.Entities, cfg.KafkaBrokers, a.Kafka, log, a.kafkaConn...); err != nil {
		return nil, err
	}
	a.Entities.SetLocker(redisstore.NewLocker(a.Redis, "ec:lock:", 10*time.Second))
	if a.runsWebhooks() {
		if a.Deliveries, err = statelog.New(a.Topics.WebhookDeliveries, cfg.KafkaBrokers, a.Kafka, log, a.kafkaConn...); err != nil {
			return nil, err
		}
		a.Deliveries.SetLocker(redisstore.NewLocker(a.Redis, "ec:lock:", 10*time.Second))
	}
	a.Cursors = pagination.NewSigner([]byte(cfg.CursorSecret))
	a.Spend = spend.NewCache(a.Redis, spend.Options{Refresh: cfg.BudgetRefresh, Log: log})
	a.Funds = spend.NewFundsCache(a.Redis, spend.Options{Refresh: cfg.BudgetRefresh, Log: log})
	routes, err := a.domains()
	if err != nil {
		return nil, err
	}
	catalogLimit, err := api.ParseLimit(cfg.RateLimitCatalog)
	if err != nil {
		return nil, err
	}
	defaultLimit, err := api.ParseLimit(cfg.RateLimitDefault)
	if err != nil {
		return nil, err
	}
	explainLimit, err := api.ParseLimit(cfg.RateLimitExplain)
	if err != nil {
		return nil, err
	}

	a.health = api.NewHealth(redactChecks(a.checks(), cfg.Secrets()))
	a.health.Detail, a.health.Log = cfg.ReadyzDetail, log
	a.foreground = foregroundGate(target, cfg.ProjectorYield)
	deps := api.Deps{
		Foreground:          a.foreground,
		Health:              a.health,
		MaxBodyBytes:        cfg.MaxBodyBytes,
		MaxEventsInFlight:   cfg.MaxEventsInFlight,
		MaxAuctionsInFlight: cfg.MaxAuctionsInFlight,
		RetryAfter:          cfg.RetryAfter,
		Log:                 log,
		MetricsElsewhere:    cfg.MetricsAddr != "",
		TrustedProxies:      cfg.TrustedProxies,
		DocURLBase:          cfg.DocURLBase,
	}
	if target.runs(TargetAPI) {
		deps.Accounts = a.Accounts
		deps.Events = ingest.NewAppender(a.Kafka, a.Topics.Events, cfg.ProduceTimeout)
		deps.VerifyBid = a.verifyBid
		deps.Auctions = a.auctionEngine()
		deps.ExplainMaxCandidates = cfg.ExplainMaxCandidates
		deps.AuctionRecorder = ingest.NewAuctionPublisher(a.auctionsKafka, a.Topics.Auctions, log)
		deps.Public = &api.Public{
			Limits: api.NewRateLimiter(redis_rate.NewLimiter(a.Redis), map[string]redis_rate.Limit{
				"catalog": catalogLimit, "default": defaultLimit, "explain": explainLimit,
			}, log),
			Cursors:      a.Cursors,
			MaxBodyBytes: cfg.MaxPublicBodyBytes,
			RetryAfter:   cfg.RetryAfter,
			Log:          log,
			WriteTimeout: cfg.PublicWriteTimeout,
			// A claim outlives the write it covers (a process that dies
			// holding one frees the key when it runs out).
			Idempotency: a.idempotencyStore(),
		}
		deps.PublicRoutes = routes
		if err := a.buildConsole(&deps); err != nil {
			return nil, err
		}
	}
	a.handler = api.New(deps)
	return a, nil
}

// ClickHouseOptions are the ClickHouse client's options of cfg.
func ClickHouseOptions(cfg config.Config) clickhouse.Options {
	return clickhouse.Options{Addr: cfg.ClickHouseAddr, Database: cfg.ClickHouseDatabase, User: cfg.ClickHouseUser,
		Password: cfg.ClickHousePassword, Cluster: cfg.ClickHouseCluster, TLS: cfg.ClickHouseTLS, TLSCA: cfg.ClickHouseTLSCA}
}

// S3Options are the object store's options of cfg (its bucket's).
func S3Options(cfg config.Config) s3store.Options {
	return s3store.Options{Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, Bucket: cfg.S3Bucket, AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey,
		ConnectTimeout: cfg.S3ConnectTimeout, RequestTimeout: cfg.S3RequestTimeout, PartTimeout: cfg.S3PartTimeout}
}

// Handler is the process's HTTP handler.
func (a *App) Handler() http.Handler { return a.handler }

// checks are the readiness checks of the process's target: only what the
// target needs to do its work (docs/operations/operations.md, Health). The API needs
// its entity state and Kafka (writes); ClickHouse, Redis and S3 serve some
// of its routes only, which answer 503 on their own while they are down, so
// an outage of one of them pulls no API replica from its load balancer. The
// projector needs ClickHouse and Redis (charges) and its consume loops
// moving; the exporter ClickHouse, S3 and Redis (its leases).
func (a *App) checks() []api.Check {
	kafkaCheck := api.Check{Name: "kafka", Fn: func(ctx context.Context) error { return a.Kafka.Ping(ctx) }}
	clickhouseCheck := api.Check{Name: "clickhouse", Fn: func(ctx context.Context) error { return a.ClickHouse.Ping(ctx) }}
	redisCheck := api.Check{Name: "redis", Fn: func(ctx context.Context) error { return a.Redis.Ping(ctx).Err() }}
	s3Check := api.Check{Name: "s3", Fn: func(ctx context.Context) error { return a.S3.Ping(ctx) }}
	stateCheck := api.Check{Name: "state", Fn: func(context.Context) error {
		if !a.StateLog.Ready() || !a.Entities.Ready() || !a.settled.Load() || (a.Deliveries != nil && !a.Deliveries.Ready()) {
			return errors.New("entity state is still loading from Kafka")
		}
		return nil
	}}
	projectorsCheck := api.Check{Name: "projectors", Fn: func(context.Context) error { return a.checkProjectors(time.Now()) }}

	checks := []api.Check{kafkaCheck, stateCheck}
	if a.target.runs(TargetProjector) || a.target.runs(TargetExporter) {
		checks = append(checks, clickhouseCheck, redisCheck)
	}
	if a.target.runs(TargetExporter) {
		checks = append(checks, s3Check)
	}
	if a.target.runs(TargetProjector) {
		checks = append(checks, projectorsCheck)
	}
	return checks
}

// watchProjector adds a consume loop to the projectors /readyz watches.
func (a *App) watchProjector(h projections.Health) {
	a.projectorsMu.Lock()
	a.projectors = append(a.projectors, h)
	a.projectorsMu.Unlock()
}

// checkProjectors fails when a projector of this process has neither
// committed a batch nor been caught up for longer than the stall timeout:
// its dependency has been down that long, or it cannot make progress.
func (a *App) checkProjectors(now time.Time) error {
	a.projectorsMu.Lock()
	defer a.projectorsMu.Unlock()
	var errs []error
	for _, p := range a.projectors {
		if d := p.StalledFor(now); d > a.cfg.ProjectorStallTimeout {
			errs = append(errs, fmt.Errorf("consumer group %s has not committed for %s", p.Group(), d.Round(time.Second)))
		}
	}
	return errors.Join(errs...)
}

// groupOptions are the consumer-group timings of the projectors.
func (a *App) groupOptions() projections.GroupOptions {
	return projections.GroupOptions{Conn: a.kafkaConn, SessionTimeout: a.cfg.KafkaSessionTimeout,
		RebalanceTimeout: a.cfg.KafkaRebalanceTimeout, FlushTimeout: a.cfg.ProjectorFlushTimeout, StopGrace: a.cfg.ShutdownTimeout}
}

// Prepare creates what the process needs to exist (topics, the ClickHouse
// database and schema, the bucket), retrying until it succeeds or ctx ends.
func (a *App) Prepare(ctx context.Context) error {
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		// Redis and Kafka first: a refused password or an untrusted
		// certificate ends the process at once, whatever the others do.
		{"redis server", a.checkRedis},
		{"kafka connection", func(ctx context.Context) error {
			// Credentials the brokers refuse, or brokers whose certificate
			// is not trusted, end the process, naming the setting.
			err := kafka.Check(ctx, a.cfg.KafkaBrokers, a.kafkaConn, 5*time.Second)
			if se := (*kafka.SettingError)(nil); errors.As(err, &se) {
				return permanentError{err}
			}
			return err
		}},
		{"kafka topics", func(ctx context.Context) error {
			return kafka.EnsureTopics(ctx, a.Kafka, kafka.Specs(a.Topics, a.cfg.KafkaEventsPartitions, a.cfg.KafkaReplicationFactor, a.cfg.KafkaEventsRetention, a.cfg.KafkaAuctionsRetention))
		}},
		{"clickhouse schema", func(ctx context.Context) error {
			if err := clickhouse.EnsureDatabase(ctx, ClickHouseOptions(a.cfg)); err != nil {
				return err
			}
			_, err := ClickHouseOptions(a.cfg).Schema().Migrate(ctx, a.ClickHouse, a.log)
			return err
		}},
		// The bucket is the exporter's, which writes it: an API process
		// that starts while S3 is down serves all but its downloads.
		{"s3 bucket", func(ctx context.Context) error {
			if !a.target.runs(TargetExporter) {
				return nil
			}
			return a.S3.EnsureBucket(ctx)
		}},
		{"redis key layout", func(ctx context.Context) error {
			at, err := spend.Upgrade(ctx, a.Redis, a.log)
			a.upgradedAt = at
			return err
		}},
		{"bid signing keys", a.loadBidKeys},
		{"cursor key", func(ctx context.Context) error {
			if a.cfg.CursorSecret != "" || !a.target.runs(TargetAPI) {
				return nil
			}
			key, err := a.sharedSecret(ctx, cursorKeyName, "list cursor")
			if err != nil {
				return err
			}
			a.Cursors.SetKey(key)
			return nil
		}},
		{"console link key", a.loadLinkKey},
	}
	for _, s := range steps {
		backoff := retry.New(250*time.Millisecond, 5*time.Second)
		for attempt := 1; ; attempt++ {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := s.fn(sctx)
			cancel()
			if err == nil {
				break
			}
			if pe := (permanentError{}); errors.As(err, &pe) {
				return fmt.Errorf("%s: %w", s.name, pe.error)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if attempt == 1 || attempt%10 == 0 {
				a.log.Warn("waiting for a dependency", "step", s.name, "attempt", attempt, "err", err)
			}
			if _, err := backoff.Wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// permanentError is a Prepare step's failure that waiting cannot fix.
type permanentError struct{ error }

// checkRedis refuses a Redis older than Endcap needs, and says loudly when
// Redis would evict keys: an evicted event claim or charge marker lets an
// event count twice or a winner be charged twice (docs/operations/operations.md). On a
// cluster it checks every master.
func (a *App) checkRedis(ctx context.Context) error {
	servers, err := redisstore.Servers(ctx, a.Redis)
	if err != nil {
		if setting := redisSetting(err); setting != "" {
			return permanentError{fmt.Errorf("%s: %w", setting, err)}
		}
		return err
	}
	for _, s := range servers {
		if err := s.Supported(); err != nil {
			return permanentError{fmt.Errorf("%s: %w", s.Addr, err)}
		}
		if s.Evicts() {
			a.log.Error("redis evicts keys at its memory limit: an evicted event claim or charge marker lets an event count twice or a winner be charged twice; run it with maxmemory-policy noeviction",
				"addr", s.Addr, "maxmemory_policy", s.MaxmemoryPolicy, "redis_version", s.Version)
		}
	}
	return nil
}

// redisSetting names the settings to mend when err is a failure that
// waiting cannot fix: Redis refused the user or password, its certificate
// is not trusted, or the ACL user may not run a command Endcap needs. It is empty for any other error.
func redisSetting(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	msg := err.Error()
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &badHost), errors.As(err, &invalid), errors.As(err, &verify):
		return "ENDCAP_REDIS_TLS_CA (Redis's certificate is not trusted, or is not for its address)"
	case strings.HasPrefix(msg, "WRONGPASS") || strings.Contains(msg, " WRONGPASS") || strings.Contains(msg, "NOAUTH") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password"):
		return "ENDCAP_REDIS_USER, ENDCAP_REDIS_PASSWORD or ENDCAP_REDIS_PASSWORD_FILE (Redis refused them)"
	case strings.Contains(msg, "NOPERM"):
		return "ENDCAP_REDIS_USER (its ACL rule lacks a command or key Endcap needs; docs/operations/operations.md, Managed services)"
	}
	return ""
}

// upgradeSegmentKeys renames the segments' member sets kept under the keys
// of earlier builds (segments.UpgradeKeys), once the entity state is
// loaded, retrying while Redis fails.
func (a *App) upgradeSegmentKeys(ctx context.Context) error {
	if err := a.StateLog.WaitReady(ctx); err != nil {
		return err
	}
	if err := a.Entities.WaitReady(ctx); err != nil {
		return err
	}
	for _, m := range a.Accounts.Marketplaces() {
		for backoff := retry.New(time.Second, 15*time.Second); ; {
			n, err := a.Segments.UpgradeKeys(ctx, m.ID)
			if n > 0 {
				a.log.Info("segments: member sets renamed to this build's keys", "marketplace", m.ID, "segments", n)
			}
			if err == nil {
				break
			}
			wait := backoff.Next()
			a.log.Warn("segments: renaming member sets to this build's keys", "marketplace", m.ID, "err", err, "retry_in", wait)
			if err := retry.Sleep(ctx, wait); err != nil {
				return err
			}
		}
	}
	return nil
}

// KafkaSecurity is how cfg's Kafka clients connect (TLS, SASL).
func KafkaSecurity(cfg config.Config) kafka.Security {
	return kafka.Security{TLS: cfg.KafkaTLS, TLSCA: cfg.KafkaTLSCA, TLSCert: cfg.KafkaTLSCert, TLSKey: cfg.KafkaTLSKey,
		Mechanism: cfg.KafkaSASLMechanism, User: cfg.KafkaSASLUser, Password: cfg.KafkaSASLPassword,
		PasswordFile: cfg.KafkaSASLPasswordFile, TokenFile: cfg.KafkaSASLTokenFile}
}

// RedisOptions are the Redis client options of cfg; an error names the
// setting it comes from (ENDCAP_REDIS_TLS_CA).
func RedisOptions(cfg config.Config) (redisstore.Options, error) {
	o := redisstore.Options{Addr: cfg.RedisAddr, Username: cfg.RedisUser, Password: cfg.RedisPassword, PasswordFile: cfg.RedisPasswordFile,
		DB: cfg.RedisDB, Cluster: cfg.RedisCluster}
	if cfg.RedisTLS {
		tc, err := redisstore.TLSConfig(cfg.RedisTLSCA)
		if err != nil {
			return o, fmt.Errorf("ENDCAP_REDIS_TLS_CA: %w", err)
		}
		o.TLS = tc
	}
	if cfg.RedisPasswordFile != "" {
		if _, err := redisstore.ReadPasswordFile(cfg.RedisPasswordFile); err != nil {
			return o, fmt.Errorf("ENDCAP_REDIS_PASSWORD_FILE: %w", err)
		}
	}
	return o, nil
}

// OpenRedis returns the Redis client of cfg (redisstore.Open).
func OpenRedis(cfg config.Config) (redis.UniversalClient, error) {
	o, err := RedisOptions(cfg)
	if err != nil {
		return nil, err
	}
	return redisstore.Open(o), nil
}

// Listen binds the HTTP address, and the metrics address when one is
// configured (so that callers learn the ports early).
func (a *App) Listen() (net.Addr, error) {
	ln, err := net.Listen("tcp", a.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", a.cfg.HTTPAddr, err)
	}
	if a.cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("metrics listener on %s: %w", a.cfg.MetricsAddr, err)
		}
		a.metricsListener = mln
	}
	a.listener = ln
	a.setConsoleURL(ln.Addr())
	return ln.Addr(), nil
}

// MetricsAddr is the address of the metrics listener once bound (nil when
// /metrics is on the API port).
func (a *App) MetricsAddr() net.Addr {
	if a.metricsListener == nil {
		return nil
	}
	return a.metricsListener.Addr()
}

// Run serves HTTP, prepares dependencies, loads state and runs the target's
// workers until ctx ends, then shuts down gracefully: in-flight requests
// finish (their events reach Kafka) before the clients close.
func (a *App) Run(ctx context.Context) error {
	if a.listener == nil {
		if _, err := a.Listen(); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 16) // more than the goroutines that send to it
	go func() {
		if err := srv.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http server: %w", err)
		}
	}()
	a.log.Info("endcap serving", "target", a.target, "addr", a.listener.Addr().String())
	if a.metricsListener != nil {
		msrv := &http.Server{Handler: api.MetricsHandler(), ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
		go func() {
			if err := msrv.Serve(a.metricsListener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics listener: %w", err)
			}
		}()
		defer msrv.Close()
		a.log.Info("metrics served on a listener of their own", "addr", a.metricsListener.Addr().String())
	}
	if a.cfg.DebugAddr != "" {
		dbg := &http.Server{Addr: a.cfg.DebugAddr, Handler: debugMux(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := dbg.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Warn("debug listener", "addr", a.cfg.DebugAddr, "err", err)
			}
		}()
		defer dbg.Close()
	}

	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	run := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(wctx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	run("health checks", a.health.Run)
	run("prepare", func(ctx context.Context) error {
		if err := a.Prepare(ctx); err != nil {
			return err
		}
		run("state log", a.StateLog.Run)
		run("entities log", a.Entities.Run)
		if a.Deliveries != nil {
			run("webhook deliveries log", a.Deliveries.Run)
		}
		run("settle", a.settle)
		if a.target.runs(TargetAPI) {
			a.runConsole(run)
			run("segment keys", a.upgradeSegmentKeys)
			run("funds cache", a.Funds.Run)
			run("budget cache", func(ctx context.Context) error {
				// Load the spend of every active campaign with a budget
				// before the first auctions need it (else they read 0 for
				// a moment).
				if err := a.StateLog.WaitReady(ctx); err != nil {
					return err
				}
				if err := a.Entities.WaitReady(ctx); err != nil {
					return err
				}
				for _, m := range a.Accounts.Marketplaces() {
					var ids []string
					a.Campaigns.EachCampaign(m.ID, func(c campaigns.Campaign) bool {
						if c.Active && (c.DailyBudgetMicros != 0 || c.WeeklyBudgetMicros != 0 || c.MonthlyBudgetMicros != 0 || c.TotalBudgetMicros != 0) {
							ids = append(ids, c.ID)
						}
						return true
					})
					a.Spend.Register(m.ID, m.Location(), ids...)
				}
				if err := a.Spend.RefreshNow(ctx); err != nil {
					a.log.Warn("budget cache: first load failed; retrying in the background", "err", err)
				}
				return a.Spend.Run(ctx)
			})
		}
		if a.target.runs(TargetProjector) {
			ep, err := projections.NewEntitiesProjector(a.cfg.KafkaBrokers, []string{a.Topics.Accounts, a.Topics.Entities},
				a.ClickHouse, a.cfg.ProjectorBatchRows, a.cfg.ProjectorFlushInterval, a.groupOptions(), a.log)
			if err != nil {
				return err
			}
			a.watchProjector(ep.Health())
			run("balances applier", func(ctx context.Context) error { return a.Balances.Apply(ctx, a.log) })
			run("entities projector", func(ctx context.Context) error {
				defer ep.Close()
				return ep.Run(ctx)
			})
			ap, err := projections.NewAuctionsProjector(projections.AuctionsOptions{
				Brokers: a.cfg.KafkaBrokers, Topic: a.Topics.Auctions, ClickHouse: a.ClickHouse,
				MaxRows: a.cfg.ProjectorBatchRows, FlushInterval: a.cfg.ProjectorFlushInterval, Group: a.groupOptions(), Log: a.log,
			})
			if err != nil {
				return err
			}
			a.watchProjector(ap.Health())
			run("auctions projector", func(ctx context.Context) error {
				defer ap.Close()
				return ap.Run(ctx)
			})
			// The events topic, folded by one consumer group into three
			// sinks (docs/design/projector.md): events_raw; interactions, charges
			// and spend (docs/design/charges.md); purchase attribution
			// (docs/design/attribution.md). The last two read the entity views
			// (time zones, currencies, names, vendors), so the group is
			// joined only once they have caught up.
			run("events fold", func(ctx context.Context) error {
				if err := a.WaitReady(ctx); err != nil {
					return err
				}
				f, err := a.newEventFold(ctx)
				if err != nil {
					return err
				}
				a.watchProjector(f.Health())
				defer f.Close()
				return f.Run(ctx)
			})
			// Daily rollups of the export dataset (docs/design/rollups.md):
			// recent days every minute, the last 33 days every hour (both
			// configurable, and paced so that the job takes at most
			// ENDCAP_ROLLUP_MAX_SHARE of the time), from the FINAL views.
			// A Redis lock per database lets one process refresh at a time,
			// so that the days' watermarks are those of their rows.
			run("rollups", func(ctx context.Context) error {
				rj, err := rollups.New(rollups.Options{ClickHouse: a.ClickHouse, Log: a.log,
					Interval: a.cfg.RollupInterval, FullInterval: a.cfg.RollupFullInterval, MaxShare: a.cfg.RollupMaxShare,
					Lock: a.rollupsLock(), Fold: a.foldWatermark()})
				if err != nil {
					return err
				}
				return rj.Run(ctx)
			})
		}
		if a.target.runs(TargetExporter) {
			// Export jobs (docs/reference/exports.md): a consumer group on the jobs
			// topic; each export first recomputes the stale rollup days of
			// its window.
			run("export workers", func(ctx context.Context) error {
				if err := a.WaitReady(ctx); err != nil {
					return err
				}
				// The exports' recomputations take the rollup job's lock
				// (waiting for a run to end) and wait for the projectors to
				// fold what was acknowledged before them (docs/reference/exports.md,
				// Freshness).
				rj, err := rollups.New(rollups.Options{ClickHouse: a.ClickHouse, Log: a.log,
					Lock: a.rollupsLock(), Fold: a.foldWatermark(), FoldWait: a.cfg.ExportFoldWait})
				if err != nil {
					return err
				}
				// A balance_ledger export waits for the charges the same way.
				ledgerFold := a.foldWatermark()
				return a.Exports.RunWorkers(ctx, exports.WorkerOptions{Brokers: a.cfg.KafkaBrokers, Conn: a.kafkaConn, Workers: a.cfg.ExportWorkers,
					JobTimeout: a.cfg.ExportTimeout, MaxStaleness: a.cfg.ExportMaxStaleness, SessionTimeout: a.cfg.KafkaSessionTimeout,
					Refresh: func(ctx context.Context, days []time.Time) error { _, err := rj.Refresh(ctx, days); return err },
					Folded: func(ctx context.Context) (time.Time, error) {
						at, _, err := ledgerFold.Wait(ctx, a.cfg.ExportFoldWait)
						return at, err
					}})
			})
			// Webhooks (docs/reference/webhooks.md): events into deliveries, sent.
			a.runWebhooks(ctx, run)
			// Deletion requests of shoppers (docs/operations/privacy.md): the pending
			// ones applied as a batch every ENDCAP_PRIVACY_INTERVAL. A Redis
			// lock lets one process apply them at a time.
			run("privacy deletions", func(ctx context.Context) error {
				if err := a.WaitReady(ctx); err != nil {
					return err
				}
				return a.eraser().Run(ctx)
			})
			// Data retention (docs/operations/operations.md, Data retention): old
			// months of the raw tables and old files, every
			// ENDCAP_RETENTION_INTERVAL, each under a Redis lease.
			a.runRetention(run)
			// Daily scored-attribution files (docs/reference/scored-attribution.md):
			// each marketplace-local day once closed plus the grace, again
			// once its attribution is final. A Redis lock per day lets
			// several exporters run.
			run("scored attribution files", func(ctx context.Context) error {
				if err := a.StateLog.WaitReady(ctx); err != nil {
					return err
				}
				sf := scoredfiles.New(a.ClickHouse, a.S3, a.Redis, a.log).WithURLLifetime(a.cfg.ReportURLLifetime)
				return sf.Run(ctx, scoredfiles.Schedule{Grace: a.cfg.ScoredAttributionGrace, Notify: a.announceScoredFile(sf, a.webhookEmitter()), Marketplaces: func() []scoredfiles.Marketplace {
					var out []scoredfiles.Marketplace
					for _, m := range a.Accounts.Marketplaces() {
						out = append(out, scoredfiles.Marketplace{ID: m.ID, Location: m.Location()})
					}
					return out
				}})
			})
		}
		return nil
	})

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		a.log.Error("component failed; shutting down", "err", runErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		a.log.Warn("http shutdown", "err", err)
	}
	stopWorkers()
	wg.Wait()
	a.close()
	return runErr
}

// eraser is the job that applies the deletion requests of shoppers: to
// ClickHouse once the projectors have folded what was acknowledged before
// each request, to the segments' members, to the scored-attribution files.
func (a *App) eraser() *privacy.Eraser {
	fold := a.foldWatermark()
	return a.Privacy.Eraser(privacy.EraserOptions{ClickHouse: a.ClickHouse, Redis: a.Redis, Segments: a.Segments, Caps: freqcap.New(a.Redis),
		Scored: scoredfiles.New(a.ClickHouse, a.S3, a.Redis, a.log), Interval: a.cfg.PrivacyInterval,
		MutationTimeout: a.cfg.PrivacyMutationTimeout, Log: a.log, LockKey: "ec:lock:privacy:" + a.cfg.ClickHouseDatabase,
		Folded: func(ctx context.Context) (time.Time, error) {
			at, _, err := fold.Wait(ctx, 30*time.Second)
			return at, err
		}})
}

// ApplyDeletions applies the pending deletion requests now, in this running
// process (tests; operators use endcap admin privacy run).
func (a *App) ApplyDeletions(ctx context.Context) (privacy.RunResult, error) {
	return a.eraser().RunPending(ctx)
}

// RunPrivacyDeletions applies the pending deletion requests once, now
// (endcap admin privacy run): it prepares the dependencies (Prepare), loads
// the entity state, runs the exporter's job once, and closes the App.
func (a *App) RunPrivacyDeletions(ctx context.Context) (privacy.RunResult, error) {
	defer a.close()
	if err := a.Prepare(ctx); err != nil {
		return privacy.RunResult{}, err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range []*statelog.Log{a.StateLog, a.Entities} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = l.Run(lctx) }()
	}
	defer wg.Wait()
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	for _, l := range []*statelog.Log{a.StateLog, a.Entities} {
		if err := l.WaitReady(wctx); err != nil {
			return privacy.RunResult{}, fmt.Errorf("entity state: %w", err)
		}
	}
	return a.eraser().RunPending(ctx)
}

// runRetention starts the jobs of the retention settings that are not
// "for ever": the month partitions of ClickHouse's raw tables (one process
// per database at a time) and the old files of the bucket (one per bucket).
func (a *App) runRetention(run func(string, func(context.Context) error)) {
	c := a.cfg
	if groups := retention.Groups(c.RetentionEvents, c.RetentionAuctions, c.RetentionInteractions); !c.RetentionEvents.Forever() || !c.RetentionAuctions.Forever() || !c.RetentionInteractions.Forever() {
		p := &retention.Partitions{ClickHouse: a.ClickHouse, Groups: groups, Log: a.log}
		run("retention of the raw tables", (&retention.Job{Name: "raw tables", Redis: a.Redis, LockKey: "ec:lock:retention:" + c.ClickHouseDatabase,
			Interval: c.RetentionInterval, Timeout: 30 * time.Minute, Log: a.log,
			Step: func(ctx context.Context) error { _, err := p.Once(ctx); return err }}).Run)
	}
	if !c.RetentionExportFiles.Forever() || !c.RetentionReportFiles.Forever() {
		f := &retention.Files{S3: a.S3, Log: a.log, Rules: []retention.FileRule{
			{Prefix: retention.ExportsPrefix, Keep: c.RetentionExportFiles}, {Prefix: retention.ReportsPrefix, Keep: c.RetentionReportFiles}}}
		run("retention of the files", (&retention.Job{Name: "files", Redis: a.Redis, LockKey: "ec:lock:retention-files:" + c.S3Bucket,
			Interval: c.RetentionInterval, Timeout: 30 * time.Minute, Log: a.log,
			Step: func(ctx context.Context) error { _, err := f.Once(ctx); return err }}).Run)
	}
}

// rollupsLock is the lock of the rollup recomputations of the database
// (docs/design/rollups.md): one at a time, across processes.
func (a *App) rollupsLock() func(context.Context) (func(), error) {
	lk := redisstore.NewLocker(a.Redis, "ec:lock:rollups:", 15*time.Minute)
	return func(ctx context.Context) (func(), error) { return lk.Lock(ctx, a.cfg.ClickHouseDatabase) }
}

// foldWatermark follows the projectors whose tables the rollups read: the
// events fold (interactions, attributed purchases) and the auctions
// projector (auction context, hashed winners).
func (a *App) foldWatermark() *rollups.Watermark {
	return rollups.NewWatermark(kafka.NewProgress(a.Kafka,
		kafka.Fold{Group: projections.EventsGroup, Topic: a.Topics.Events},
		kafka.Fold{Group: projections.AuctionsGroup, Topic: a.Topics.Auctions}), 0)
}

// settle collects once, and returns what it freed to the OS, when the entity
// state has loaded and before the process reports ready. Loading a
// million-product catalog leaves gigabytes of garbage behind; without this,
// the collection that frees it would come in the first minutes of traffic,
// seconds of marking on a serving process (docs/operations/operations.md, Memory). With
// GOGC=off and GOMEMLIMIT, the next collection then comes only when traffic
// has filled the limit again.
func (a *App) settle(ctx context.Context) error {
	if err := a.WaitReady(ctx); err != nil {
		return err
	}
	start := time.Now()
	debug.FreeOSMemory()
	a.settled.Store(true)
	a.log.Info("entity state loaded; memory settled before serving", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// WaitReady blocks until the entity state has caught up.
func (a *App) WaitReady(ctx context.Context) error {
	if err := a.StateLog.WaitReady(ctx); err != nil {
		return err
	}
	return a.Entities.WaitReady(ctx)
}

// close closes every client the process made (New may have made only some).
func (a *App) close() {
	for _, l := range []*statelog.Log{a.StateLog, a.Entities, a.Deliveries} {
		if l != nil {
			l.Close()
		}
	}
	if a.Catalog != nil {
		a.Catalog.Close() // its names file, beside catalogTexts
	}
	if a.catalogTexts != nil {
		if err := a.catalogTexts.Close(); err != nil {
			a.log.Warn("catalog: closing its store on disk", "err", err)
		}
	}
	if a.auctionsKafka != nil {
		// Give buffered auction records a moment to reach Kafka.
		fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = a.auctionsKafka.Flush(fctx)
		cancel()
		a.auctionsKafka.Close()
	}
	if a.Kafka != nil {
		a.Kafka.Close()
	}
	if a.ClickHouse != nil {
		_ = a.ClickHouse.Close()
	}
	if a.capCounts != nil {
		_ = a.capCounts.Close()
	}
	if a.Redis != nil {
		_ = a.Redis.Close()
	}
	if a.stopTracing != nil {
		// The spans still buffered are sent, for a few seconds at most.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := a.stopTracing(sctx); err != nil {
			a.log.Warn("traces: the last spans were not sent", "err", err)
		}
		cancel()
	}
}

func debugMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return m
}

// loadBidKeys loads the resolvedBidId keyring from the configuration, or
// uses one random key shared by every API process through Redis (wrapped
// with the master key). Processes that neither sign nor verify tokens
// (projector, exporter) load none.
func (a *App) loadBidKeys(ctx context.Context) error {
	if !a.target.runs(TargetAPI) {
		return nil
	}
	spec := a.cfg.BidSigningKeys
	if spec == "" {
		key, err := a.sharedSecret(ctx, bidKeyName, "resolvedBidId")
		if err != nil {
			return err
		}
		spec = "1:" + base64.RawURLEncoding.EncodeToString(key)
	}
	kr, err := bidtoken.ParseKeyring(spec)
	if err != nil {
		return permanentError{fmt.Errorf("resolvedBidId keyring: %w", err)}
	}
	a.BidKeys.Store(kr)
	return nil
}

func (a *App) verifyBid(marketplaceID, token string) error {
	kr := a.BidKeys.Load()
	if kr == nil {
		return ingest.ErrVerifierUnavailable
	}
	mp, err := uuid.Parse(marketplaceID)
	if err != nil {
		return err
	}
	_, err = kr.Decode(token, mp)
	return err
}

// idempotencyStore keeps the results of Idempotency-Key requests.
func (a *App) idempotencyStore() *idempotency.Store {
	st := idempotency.NewStore(a.Redis, 2*a.cfg.PublicWriteTimeout+5*time.Second)
	st.MaxBytes = a.cfg.IdempotencyMaxBytes
	return st
}
