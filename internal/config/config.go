// Package config holds Endcap's runtime configuration. Every setting is a
// command-line flag and an ENDCAP_* environment variable; a flag given on the
// command line wins over the variable, which wins over the default. Defaults
// are safe for the local stack (everything on 127.0.0.1).
package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is the whole configuration of one process.
type Config struct {
	HTTPAddr string

	// Deadlines of the calls to the object store (storage/s3store).
	S3ConnectTimeout time.Duration
	S3RequestTimeout time.Duration
	S3PartTimeout    time.Duration

	KafkaBrokers       []string
	KafkaTopicPrefix   string
	ExportDailyQuota   int
	ExportWorkers      int
	ExportTimeout      time.Duration
	ExportMaxStaleness time.Duration
	ExportFoldWait     time.Duration
	RollupInterval     time.Duration
	RollupFullInterval time.Duration
	RollupMaxShare     float64

	// Data retention (docs/operations/operations.md, Data retention): ClickHouse's raw
	// tables by group, the files on S3, and how often the exporter applies it.
	RetentionEvents       Age
	RetentionAuctions     Age
	RetentionInteractions Age
	RetentionExportFiles  Age
	RetentionReportFiles  Age
	RetentionInterval     time.Duration

	KafkaAuctionsRetention time.Duration
	KafkaEventsPartitions  int
	KafkaReplicationFactor int
	KafkaEventsRetention   time.Duration
	KafkaLinger            time.Duration
	KafkaSessionTimeout    time.Duration
	KafkaRebalanceTimeout  time.Duration

	// How every Kafka client connects (storage/kafka.Security): TLS, and
	// SASL with one of KafkaSASLMechanisms.
	KafkaTLS              bool
	KafkaTLSCA            string
	KafkaTLSCert          string
	KafkaTLSKey           string
	KafkaSASLMechanism    string
	KafkaSASLUser         string
	KafkaSASLPassword     string
	KafkaSASLPasswordFile string
	KafkaSASLTokenFile    string

	ClickHouseAddr     string
	ClickHouseDatabase string
	ClickHouseUser     string
	ClickHousePassword string
	ClickHouseCluster  string
	ClickHouseTLS      bool
	ClickHouseTLSCA    string
	// ClickHouseHTTPURL is ClickHouse's HTTP interface, which backups use
	// (SELECT and INSERT ... FORMAT Native).
	ClickHouseHTTPURL string

	RedisAddr     string
	RedisPassword string
	RedisDB       int
	RedisCluster  bool
	// RedisWaitReplicas is how many replicas must have a charge before
	// it counts (-1: auto, 1 on a cluster and 0 on one server).
	RedisWaitReplicas int
	// The Redis ACL user, the password read from a file, and TLS.
	RedisUser         string
	RedisPasswordFile string
	RedisTLS          bool
	RedisTLSCA        string

	S3Endpoint  string
	S3Region    string
	S3Bucket    string
	S3AccessKey string
	S3SecretKey string

	ProduceTimeout      time.Duration
	PublicWriteTimeout  time.Duration
	RetryAfter          time.Duration
	MaxBodyBytes        int64
	MaxEventsInFlight   int
	MaxAuctionsInFlight int

	MaxPublicBodyBytes int64
	RateLimitCatalog   string
	RateLimitDefault   string
	RateLimitExplain   string
	// ExplainMaxCandidates bounds the candidates of one explain request.
	ExplainMaxCandidates int
	CursorSecret         string
	BidSigningKeys       string
	SecretKeyFile        string
	SecretKey            string
	// AllowInsecureDefaults lets serve start with development credentials
	// against endpoints off loopback (InsecureDefaults).
	AllowInsecureDefaults bool

	ProjectorBatchRows     int
	EventsBatchRows        int
	ProjectorFlushInterval time.Duration
	ProjectorFlushTimeout  time.Duration
	ProjectorStallTimeout  time.Duration
	ProjectorYield         time.Duration
	DedupeWindow           time.Duration
	ProjectorStateDir      string
	CatalogDir             string
	ProjectorStateCacheMB  int
	BudgetRefresh          time.Duration
	SpendReadTimeout       time.Duration
	FrequencyCapTimeout    time.Duration

	// The invalid-click rules (spend.InvalidRules; docs/design/charges.md, Invalid
	// clicks).
	InvalidClickRequireImpression bool
	InvalidClickMinDelay          time.Duration
	InvalidClickRepeatWindow      time.Duration
	InvalidClickMaxPerHour        int

	ScoredAttributionGrace time.Duration
	ReportURLLifetime      time.Duration

	PrivacyInterval        time.Duration
	PrivacyMutationTimeout time.Duration

	WebhookAllowLoopback bool
	WebhookTimeout       time.Duration
	WebhookRetryBase     time.Duration
	WebhookMaxInFlight   int
	WebhookDisableAfter  time.Duration
	WebhookRetention     time.Duration
	WebhooksPerMarket    int
	WebhookTestsPerHour  int
	WebhookTestsPerDay   int
	WebhookTestsKept     int

	IdempotencyMaxBytes int64

	ConsoleURL           string
	DocURLBase           string
	ConsoleSecureCookies bool
	ConsoleSessionIdle   time.Duration
	// ConsoleDownloads: the downloads a console user runs at once.
	ConsoleDownloads     int
	SMTPAddr             string
	SMTPUser             string
	SMTPPassword         string
	SMTPFrom             string
	SMTPTLS              string
	OIDCIssuer           string
	OIDCClientID         string
	OIDCClientSecretFile string
	OIDCRedirectURL      string
	OIDCScopes           string
	OIDCRoleClaim        string
	OIDCRoleMap          string
	// Segment caps: members and Redis bytes of one segment, and of all
	// the segments of a marketplace (0: no cap).
	SegmentMaxMembers, SegmentMaxBytes, SegmentsMaxMembers, SegmentsMaxBytes int64
	// InvitationMailsPerDay caps a marketplace's invitation e-mails a UTC day.
	InvitationMailsPerDay int

	// TrustedProxies: the addresses (IPs or CIDRs) of the reverse proxies
	// whose X-Forwarded-For and X-Real-IP name the client; nil: none.
	TrustedProxies []string

	// ReadyzDetail: /readyz answers the error text of failing checks.
	ReadyzDetail bool

	MetricsAddr string
	DebugAddr   string
	// OTelEndpoint: the OTLP/HTTP endpoint traces are sent to (empty: no
	// tracing); OTelSampleRatio: the share of new traces kept.
	OTelEndpoint    string
	OTelSampleRatio float64
	ShutdownTimeout time.Duration
	LogLevel        string
	LogFormat       string

	// secrets: the values of the secret settings (Secrets).
	secrets []string
}

// valueNotQuoted is the error of a secret setting that says what is wrong
// without quoting the value (its length, say): shown as it is, where other
// errors of a secret setting are not.
type valueNotQuoted struct{ error }

func (e valueNotQuoted) Unwrap() error { return e.error }

// MinCursorSecret is the shortest ENDCAP_CURSOR_SECRET accepted, in bytes.
const MinCursorSecret = 32

type setting struct {
	flag, env, def, usage string
	set                   func(c *Config, v string) error
}

func str(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *p(c) = v; return nil }
}

func integer(p func(*Config) *int, min int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		if n < min {
			return fmt.Errorf("must be at least %d, got %d", min, n)
		}
		*p(c) = n
		return nil
	}
}

func int64Setting(p func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("must be an integer of 0 or more, got %q", v)
		}
		*p(c) = n
		return nil
	}
}

func duration(p func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration (like 500ms, 2s, 72h): %q", v)
		}
		if d <= 0 {
			return fmt.Errorf("must be positive, got %s", v)
		}
		*p(c) = d
		return nil
	}
}

// nonNegativeDuration is a duration of 0 (off) or more, at most max when
// max > 0.
func nonNegativeDuration(p func(*Config) *time.Duration, max time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || (max > 0 && d > max) {
			if max > 0 {
				return fmt.Errorf("must be a duration from 0 (off) to %s, got %q", max, v)
			}
			return fmt.Errorf("must be a duration of 0 (off) or more (like 250ms), got %q", v)
		}
		*p(c) = d
		return nil
	}
}

func rateLimit(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, per, ok := strings.Cut(v, "/")
		if k, err := strconv.Atoi(n); !ok || err != nil || k < 1 {
			return fmt.Errorf("must look like 10/1s, got %q", v)
		}
		if d, err := time.ParseDuration(per); err != nil || d <= 0 {
			return fmt.Errorf("must look like 10/1s, got %q", v)
		}
		*p(c) = v
		return nil
	}
}

// clusterName is what --clickhouse-cluster accepts: it goes into ON CLUSTER.
var clusterName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var settings = []setting{
	{"http-addr", "ENDCAP_HTTP_ADDR", "127.0.0.1:8080", "address the API listens on", str(func(c *Config) *string { return &c.HTTPAddr })},
	{"trusted-proxies", "ENDCAP_TRUSTED_PROXIES", "", "comma-separated IPs or CIDRs (none wider than a /8 of IPv4 or a /32 of IPv6) of the reverse proxies in front of the API, whose X-Forwarded-For names the client (the console's sign-in throttle, logs); empty: none, the client is the connection's address", func(c *Config, v string) error {
		c.TrustedProxies = nil
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			_, n, err := net.ParseCIDR(p)
			if err != nil && net.ParseIP(p) == nil {
				return fmt.Errorf("%q is neither an IP nor a CIDR", p)
			}
			if n != nil {
				// A range that wide holds clients, whose forwarded
				// addresses would then be believed.
				ones, bits := n.Mask.Size()
				if bits == 128 && n.IP.To4() != nil {
					ones, bits = ones-96, 32 // ::ffff:a.b.c.d/n
				}
				if (bits == 32 && ones < 8) || (bits == 128 && ones < 32) {
					return fmt.Errorf("%q is too wide for a range of reverse proxies (at most a /8 of IPv4, a /32 of IPv6)", p)
				}
			}
			c.TrustedProxies = append(c.TrustedProxies, p)
		}
		return nil
	}},
	{"kafka-brokers", "ENDCAP_KAFKA_BROKERS", "127.0.0.1:19092", "comma-separated Kafka bootstrap brokers", func(c *Config, v string) error {
		c.KafkaBrokers = nil
		for _, b := range strings.Split(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				c.KafkaBrokers = append(c.KafkaBrokers, b)
			}
		}
		if len(c.KafkaBrokers) == 0 {
			return fmt.Errorf("at least one broker is required")
		}
		return nil
	}},
	{"kafka-topic-prefix", "ENDCAP_KAFKA_TOPIC_PREFIX", "endcap.", "prefix of every topic name", str(func(c *Config) *string { return &c.KafkaTopicPrefix })},
	{"kafka-events-partitions", "ENDCAP_KAFKA_EVENTS_PARTITIONS", "6", "partitions of the events topic when it is created", integer(func(c *Config) *int { return &c.KafkaEventsPartitions }, 1)},
	{"kafka-replication-factor", "ENDCAP_KAFKA_REPLICATION_FACTOR", "1", "replication factor of created topics (use 3 in production)", integer(func(c *Config) *int { return &c.KafkaReplicationFactor }, 1)},
	{"kafka-events-retention", "ENDCAP_KAFKA_EVENTS_RETENTION", "168h", "retention (retention.ms) of the events topic (every event: impressions, clicks, purchases, page views) when it is created", duration(func(c *Config) *time.Duration { return &c.KafkaEventsRetention })},
	{"kafka-auctions-retention", "ENDCAP_KAFKA_AUCTIONS_RETENTION", "168h", "retention (retention.ms) of the auctions topic when it is created", duration(func(c *Config) *time.Duration { return &c.KafkaAuctionsRetention })},
	{"kafka-linger", "ENDCAP_KAFKA_LINGER", "1ms", "how long the producer waits to fill a batch (0 = send at once)", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Second {
			return fmt.Errorf("must be a duration from 0 to 1s, got %q", v)
		}
		c.KafkaLinger = d
		return nil
	}},
	{"kafka-session-timeout", "ENDCAP_KAFKA_SESSION_TIMEOUT", "10s", "how long the broker waits for a projector's or exporter's heartbeats before it hands its partitions to the others: the longest a crashed process's partitions wait (the broker must allow it: group.min.session.timeout.ms)", duration(func(c *Config) *time.Duration { return &c.KafkaSessionTimeout })},
	{"kafka-rebalance-timeout", "ENDCAP_KAFKA_REBALANCE_TIMEOUT", "60s", "how long the broker waits for every projector to rejoin its group at a rebalance (must exceed --projector-flush-timeout)", duration(func(c *Config) *time.Duration { return &c.KafkaRebalanceTimeout })},
	{"kafka-tls", "ENDCAP_KAFKA_TLS", "false", "connect to Kafka over TLS; the brokers' certificates are verified", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		c.KafkaTLS = b
		return nil
	}},
	{"kafka-tls-ca", "ENDCAP_KAFKA_TLS_CA", "", "PEM file of the certificate authorities that sign the Kafka brokers' certificates (empty: the system's)", str(func(c *Config) *string { return &c.KafkaTLSCA })},
	{"kafka-tls-cert", "ENDCAP_KAFKA_TLS_CERT", "", "PEM file of the client certificate shown to the Kafka brokers (mutual TLS; with --kafka-tls-key)", str(func(c *Config) *string { return &c.KafkaTLSCert })},
	{"kafka-tls-key", "ENDCAP_KAFKA_TLS_KEY", "", "PEM file of the private key of --kafka-tls-cert", str(func(c *Config) *string { return &c.KafkaTLSKey })},
	{"kafka-sasl-mechanism", "ENDCAP_KAFKA_SASL_MECHANISM", "", "SASL mechanism: plain, scram-sha-256, scram-sha-512 (with the user and password), oauthbearer (a token file), aws-msk-iam (the AWS default credential chain); empty: no SASL", func(c *Config, v string) error {
		v = strings.ToLower(strings.TrimSpace(v))
		if v != "" && !slices.Contains(KafkaSASLMechanisms, v) {
			return fmt.Errorf("must be one of %s (or empty), got %q", strings.Join(KafkaSASLMechanisms, ", "), v)
		}
		c.KafkaSASLMechanism = v
		return nil
	}},
	{"kafka-sasl-user", "ENDCAP_KAFKA_SASL_USER", "", "SASL user (plain and scram-*)", str(func(c *Config) *string { return &c.KafkaSASLUser })},
	secret(setting{"kafka-sasl-password", "ENDCAP_KAFKA_SASL_PASSWORD", "", "SASL password (plain and scram-*; prefer --kafka-sasl-password-file: a variable shows in the process environment)", str(func(c *Config) *string { return &c.KafkaSASLPassword })}),
	{"kafka-sasl-password-file", "ENDCAP_KAFKA_SASL_PASSWORD_FILE", "", "file whose first line is the SASL password, instead of --kafka-sasl-password (read again when it changes, for new connections)", str(func(c *Config) *string { return &c.KafkaSASLPasswordFile })},
	{"kafka-sasl-token-file", "ENDCAP_KAFKA_SASL_TOKEN_FILE", "", "file whose first line is the OAuth bearer token (oauthbearer; read again when it changes, for new connections)", str(func(c *Config) *string { return &c.KafkaSASLTokenFile })},
	{"clickhouse-addr", "ENDCAP_CLICKHOUSE_ADDR", "127.0.0.1:19000", "ClickHouse native-protocol address, or several separated by commas (replicas: the first that answers is used, the next ones when it fails)", str(func(c *Config) *string { return &c.ClickHouseAddr })},
	{"clickhouse-database", "ENDCAP_CLICKHOUSE_DATABASE", "endcap", "ClickHouse database", str(func(c *Config) *string { return &c.ClickHouseDatabase })},
	{"clickhouse-user", "ENDCAP_CLICKHOUSE_USER", "default", "ClickHouse user", str(func(c *Config) *string { return &c.ClickHouseUser })},
	secret(setting{"clickhouse-password", "ENDCAP_CLICKHOUSE_PASSWORD", "", "ClickHouse password", str(func(c *Config) *string { return &c.ClickHousePassword })}),
	{"clickhouse-tls", "ENDCAP_CLICKHOUSE_TLS", "false", "connect to ClickHouse over TLS (the secure native port: 9440 on ClickHouse Cloud); the server's certificate is verified", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		c.ClickHouseTLS = b
		return nil
	}},
	{"clickhouse-tls-ca", "ENDCAP_CLICKHOUSE_TLS_CA", "", "PEM file of the certificate authorities that sign ClickHouse's certificate (empty: the system's)", str(func(c *Config) *string { return &c.ClickHouseTLSCA })},
	{"clickhouse-http-url", "ENDCAP_CLICKHOUSE_HTTP_URL", "http://127.0.0.1:18123", "ClickHouse HTTP interface, used by endcap admin backup only (https:// for TLS: 8443 on ClickHouse Cloud; same user, password and authorities)", str(func(c *Config) *string { return &c.ClickHouseHTTPURL })},
	{"clickhouse-cluster", "ENDCAP_CLICKHOUSE_CLUSTER", "", "ClickHouse cluster (in the servers' remote_servers) on whose every replica migrations create the database and replicated tables, ON CLUSTER (docs/design/clickhouse.md); empty: one server, or ClickHouse Cloud", func(c *Config, v string) error {
		if v != "" && !clusterName.MatchString(v) {
			return fmt.Errorf("must be a plain identifier (letters, digits, _), got %q", v)
		}
		c.ClickHouseCluster = v
		return nil
	}},
	{"redis-addr", "ENDCAP_REDIS_ADDR", "127.0.0.1:16379", "Redis address; with --redis-cluster, seed nodes of the cluster separated by commas (any one that answers is enough)", func(c *Config, v string) error {
		var n int
		for _, a := range strings.Split(v, ",") {
			a = strings.TrimSpace(a)
			if a == "" {
				continue
			}
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("%q is not a host:port", a)
			}
			n++
		}
		if n == 0 {
			return fmt.Errorf("at least one address is required")
		}
		c.RedisAddr = v
		return nil
	}},
	secret(setting{"redis-password", "ENDCAP_REDIS_PASSWORD", "", "Redis password", str(func(c *Config) *string { return &c.RedisPassword })}),
	{"redis-password-file", "ENDCAP_REDIS_PASSWORD_FILE", "", "file whose first line is the Redis password, read again for each new connection (instead of --redis-password)", str(func(c *Config) *string { return &c.RedisPasswordFile })},
	{"redis-user", "ENDCAP_REDIS_USER", "", "Redis ACL user (empty: the default user); the rule it needs is in docs/operations/operations.md, Managed services", str(func(c *Config) *string { return &c.RedisUser })},
	{"redis-tls", "ENDCAP_REDIS_TLS", "false", "connect to Redis (every node of a cluster) over TLS; the server's certificate and host name are verified", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		c.RedisTLS = b
		return nil
	}},
	{"redis-tls-ca", "ENDCAP_REDIS_TLS_CA", "", "PEM file of the certificate authorities that sign Redis's certificate (empty: the system's); needs --redis-tls", str(func(c *Config) *string { return &c.RedisTLSCA })},
	{"redis-db", "ENDCAP_REDIS_DB", "0", "Redis database number (0 on a cluster)", integer(func(c *Config) *int { return &c.RedisDB }, 0)},
	{"redis-cluster", "ENDCAP_REDIS_CLUSTER", "false", "Redis is a Redis Cluster (--redis-addr its seed nodes): every key goes to the master of its slot (docs/operations/operations.md, Redis Cluster)", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		c.RedisCluster = b
		return nil
	}},
	{"redis-wait-replicas", "ENDCAP_REDIS_WAIT_REPLICAS", "auto", "replicas of a Redis master that must hold a batch's charges (WAIT) before the projector stores and commits it, at most as many as are attached; auto: 1 with --redis-cluster, else 0 (docs/operations/operations.md, Redis failover)", func(c *Config, v string) error {
		if v == "auto" {
			c.RedisWaitReplicas = -1
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 16 {
			return fmt.Errorf("must be auto or a number from 0 to 16, got %q", v)
		}
		c.RedisWaitReplicas = n
		return nil
	}},
	{"s3-endpoint", "ENDCAP_S3_ENDPOINT", "http://127.0.0.1:19100", "S3-compatible endpoint URL (empty for AWS S3)", str(func(c *Config) *string { return &c.S3Endpoint })},
	{"s3-region", "ENDCAP_S3_REGION", "us-east-1", "S3 region", str(func(c *Config) *string { return &c.S3Region })},
	{"s3-bucket", "ENDCAP_S3_BUCKET", "endcap", "S3 bucket for exports and reports", str(func(c *Config) *string { return &c.S3Bucket })},
	{"s3-access-key", "ENDCAP_S3_ACCESS_KEY", "", "S3 access key id (empty, with the secret key empty too: the AWS SDK's default credential chain: AWS_* variables, web identity of a Kubernetes service account, instance profile; docs/operations/operations.md, S3)", str(func(c *Config) *string { return &c.S3AccessKey })},
	secret(setting{"s3-secret-key", "ENDCAP_S3_SECRET_KEY", "", "S3 secret access key (with --s3-access-key)", str(func(c *Config) *string { return &c.S3SecretKey })}),
	{"produce-timeout", "ENDCAP_PRODUCE_TIMEOUT", "1s", "how long a request waits for Kafka to acknowledge its records before answering 503", duration(func(c *Config) *time.Duration { return &c.ProduceTimeout })},
	{"public-write-timeout", "ENDCAP_PUBLIC_WRITE_TIMEOUT", "5s", "longest a /public/v1 write (POST, PUT, PATCH, DELETE) waits for Kafka, Redis and the entity view, counted from the end of its body, before answering 503 (the write may or may not have been applied)", duration(func(c *Config) *time.Duration { return &c.PublicWriteTimeout })},
	{"retry-after", "ENDCAP_RETRY_AFTER", "2s", "Retry-After sent with 503 responses", duration(func(c *Config) *time.Duration { return &c.RetryAfter })},
	{"max-body-bytes", "ENDCAP_MAX_BODY_BYTES", "1048576", "largest accepted request body (413 above)", func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1024 {
			return fmt.Errorf("must be an integer of at least 1024, got %q", v)
		}
		c.MaxBodyBytes = n
		return nil
	}},
	{"max-events-in-flight", "ENDCAP_MAX_EVENTS_IN_FLIGHT", "256", "most /v2/events requests one API process works on at once; past it a request is answered 503 with Retry-After at once, unread (0: no bound; the bodies in memory stay under this times max-body-bytes)", integer(func(c *Config) *int { return &c.MaxEventsInFlight }, 0)},
	{"max-auctions-in-flight", "ENDCAP_MAX_AUCTIONS_IN_FLIGHT", "64", "most /v2/auctions requests (every auction route) one API process works on at once; past it a request is answered 503 with Retry-After at once, unread (0: no bound)", integer(func(c *Config) *int { return &c.MaxAuctionsInFlight }, 0)},
	{"max-public-body-bytes", "ENDCAP_MAX_PUBLIC_BODY_BYTES", "16777216", "largest accepted /public/v1 request body (413 above)", func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1024 {
			return fmt.Errorf("must be an integer of at least 1024, got %q", v)
		}
		c.MaxPublicBodyBytes = n
		return nil
	}},
	{"rate-limit-catalog", "ENDCAP_RATE_LIMIT_CATALOG", "10/1s", "requests per period and API key on /public/v1 catalog routes", rateLimit(func(c *Config) *string { return &c.RateLimitCatalog })},
	{"rate-limit-default", "ENDCAP_RATE_LIMIT_DEFAULT", "45/2s", "requests per period and API key on the other /public/v1 routes", rateLimit(func(c *Config) *string { return &c.RateLimitDefault })},
	{"rate-limit-explain", "ENDCAP_RATE_LIMIT_EXPLAIN", "2/1s", "requests per period and advanced API key on POST /v2/auctions/explain", rateLimit(func(c *Config) *string { return &c.RateLimitExplain })},
	{"explain-max-candidates", "ENDCAP_EXPLAIN_MAX_CANDIDATES", "5000", "candidates POST /v2/auctions/explain (and the console's explain page) lists for one request at most, over all its auctions; past it the answer is 422 too_many_candidates (docs/design/auction-ranking.md, Explain)", integer(func(c *Config) *int { return &c.ExplainMaxCandidates }, 1)},
	secret(setting{"cursor-secret", "ENDCAP_CURSOR_SECRET", "", "key that signs list cursors and from which the console's invitation-link key is derived, at least 32 bytes (e.g. `head -c 32 /dev/urandom | base64`; empty: a random key shared through Redis, wrapped with the master key)", func(c *Config, v string) error {
		if v != "" && len(v) < MinCursorSecret {
			return valueNotQuoted{fmt.Errorf("must be at least %d bytes (it derives the key of the console's invitation links; make one with `head -c 32 /dev/urandom | base64`), got %d", MinCursorSecret, len(v))}
		}
		c.CursorSecret = v
		return nil
	}}),
	secret(setting{"bid-signing-keys", "ENDCAP_BID_SIGNING_KEYS", "", "resolvedBidId HMAC keys, \"id:base64url,...\" with the signing key first (empty: one random key shared through Redis, wrapped with the master key); see docs/reference/resolved-bid-id.md", str(func(c *Config) *string { return &c.BidSigningKeys })}),
	{"secret-key-file", "ENDCAP_SECRET_KEY_FILE", "", "file holding the master key (32 random bytes in base64; several lines while rotating, the first wraps) that wraps the secrets kept in Redis; required by the api unless both keys above are set (endcap dev makes one in its data dir); see docs/operations/operations.md, Secrets", str(func(c *Config) *string { return &c.SecretKeyFile })},
	secret(setting{"secret-key", "ENDCAP_SECRET_KEY", "", "the master key itself, instead of --secret-key-file (prefer the file: a variable shows in the process environment)", str(func(c *Config) *string { return &c.SecretKey })}),
	{"allow-insecure-defaults", "ENDCAP_ALLOW_INSECURE_DEFAULTS", "false", "let endcap serve start with the development stack's S3 secret key, or an empty ClickHouse password, against an endpoint that is not on loopback (refused otherwise; docs/operations/operations.md, Secrets)", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		c.AllowInsecureDefaults = b
		return nil
	}},
	{"projector-batch-rows", "ENDCAP_PROJECTOR_BATCH_ROWS", "50000", "records per batch of the entities and auctions projectors at most (one ClickHouse insert per table a batch)", integer(func(c *Config) *int { return &c.ProjectorBatchRows }, 1)},
	{"projector-events-batch-rows", "ENDCAP_PROJECTOR_EVENTS_BATCH_ROWS", "100000", "records per batch of the events fold at most (larger batches: fewer parts for ClickHouse to merge, a larger heap; see docs/design/projector.md, Batching)", integer(func(c *Config) *int { return &c.EventsBatchRows }, 1)},
	{"projector-flush-interval", "ENDCAP_PROJECTOR_FLUSH_INTERVAL", "1s", "longest time a consumed event waits before its batch is inserted", duration(func(c *Config) *time.Duration { return &c.ProjectorFlushInterval })},
	{"projector-flush-timeout", "ENDCAP_PROJECTOR_FLUSH_TIMEOUT", "30s", "longest attempt at folding and committing one batch; a batch that fails or takes longer is read again from the last commit after a backoff", duration(func(c *Config) *time.Duration { return &c.ProjectorFlushTimeout })},
	{"projector-stall-timeout", "ENDCAP_PROJECTOR_STALL_TIMEOUT", "60s", "a process whose projector has neither committed a batch nor been caught up for this long answers /readyz 503 (endcap_projector_stalled_seconds)", duration(func(c *Config) *time.Duration { return &c.ProjectorStallTimeout })},
	{"projector-yield", "ENDCAP_PROJECTOR_YIELD", "20ms", "in a process that serves the API and folds the events (target all, endcap dev): the longest the fold waits, every 1,000 records or insert column, for the /v2/events and auction requests in flight to end, and at most a third of --projector-flush-timeout a batch (0: never waits; docs/design/projector.md, Sharing the cores with the API)", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("must be a duration of 0 or more (like 20ms; 0: off), got %q", v)
		}
		c.ProjectorYield = d
		return nil
	}},
	{"budget-refresh", "ENDCAP_BUDGET_REFRESH", "1s", "how often the auction's in-memory copy of campaign spend is re-read from Redis (a spent budget stops winning within about this long)", duration(func(c *Config) *time.Duration { return &c.BudgetRefresh })},
	{"spend-read-timeout", "ENDCAP_SPEND_READ_TIMEOUT", "150ms", "longest a campaign read waits for the campaigns' spend in Redis; past it the campaigns are answered without their spend (docs/reference/campaigns.md, Delivery)", duration(func(c *Config) *time.Duration { return &c.SpendReadTimeout })},
	{"frequency-cap-timeout", "ENDCAP_FREQUENCY_CAP_TIMEOUT", "20ms", "longest an auction request waits for its shopper's frequency cap counts in Redis (one read a request); past it the capped campaigns follow their capsWithoutShopper (docs/reference/campaigns.md, Restrictions)", duration(func(c *Config) *time.Duration { return &c.FrequencyCapTimeout })},
	{"invalid-click-require-impression", "ENDCAP_INVALID_CLICK_REQUIRE_IMPRESSION", "true", "a CPC click whose winner has no impression recorded when the click is charged is not charged (invalid_no_impression; docs/design/charges.md, Invalid clicks)", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		c.InvalidClickRequireImpression = b
		return nil
	}},
	{"invalid-click-min-delay", "ENDCAP_INVALID_CLICK_MIN_DELAY", "250ms", "a CPC click that occurred less than this after its winner's first impression is not charged (invalid_too_fast; 0: off)", nonNegativeDuration(func(c *Config) *time.Duration { return &c.InvalidClickMinDelay }, 0)},
	{"invalid-click-repeat-window", "ENDCAP_INVALID_CLICK_REPEAT_WINDOW", "1s", "a CPC click of a shopper within this of the shopper's latest click on the same campaign is not charged (invalid_repeat_click; 0: off; at most 1h)", nonNegativeDuration(func(c *Config) *time.Duration { return &c.InvalidClickRepeatWindow }, time.Hour)},
	{"invalid-click-max-per-hour", "ENDCAP_INVALID_CLICK_MAX_PER_HOUR", "10", "the CPC clicks of a shopper on one campaign beyond this many in one UTC hour are not charged (invalid_click_rate; 0: off)", integer(func(c *Config) *int { return &c.InvalidClickMaxPerHour }, 0)},
	{"dedupe-window", "ENDCAP_DEDUPE_WINDOW", "72h", "how long an event id is remembered to drop client retries (the events fold's claims: a claim is kept one to one and a half windows; docs/design/projector.md, Claims)", duration(func(c *Config) *time.Duration { return &c.DedupeWindow })},
	{"projector-state-dir", "ENDCAP_PROJECTOR_STATE_DIR", "", "directory of the events fold's claim store on local disk (empty: a new temporary directory each start, so that every start rebuilds the claims of its partitions from the changelog topic; give a persistent volume in production; docs/design/projector.md, Claims)", str(func(c *Config) *string { return &c.ProjectorStateDir })},
	{"catalog-dir", "ENDCAP_CATALOG_DIR", "", "directory on local disk under which every process keeps the catalog's product names and details, filled from the entities topic at each start and deleted at exit (empty: the system's temporary directory; not a tmpfs, which is memory; docs/operations/operations.md, Memory)", str(func(c *Config) *string { return &c.CatalogDir })},
	{"projector-state-cache-mb", "ENDCAP_PROJECTOR_STATE_CACHE_MB", "256", "block cache of the events fold's claim store in MiB (besides it: at most 64 MiB of memtables and the C allocator's slack; the Bloom filters of the window need not fit, they are read through the OS page cache; docs/operations/operations.md, Capacity per 1,000 events/s)", integer(func(c *Config) *int { return &c.ProjectorStateCacheMB }, 8)},
	{"privacy-interval", "ENDCAP_PRIVACY_INTERVAL", "24h", "how often the exporter applies the pending deletion requests of shoppers, as one batch (docs/operations/privacy.md); endcap admin privacy run applies them at once", duration(func(c *Config) *time.Duration { return &c.PrivacyInterval })},
	{"privacy-mutation-timeout", "ENDCAP_PRIVACY_MUTATION_TIMEOUT", "1h", "longest wait for one table's ClickHouse mutation of a batch of deletions; past it the batch fails and is retried at the next run", duration(func(c *Config) *time.Duration { return &c.PrivacyMutationTimeout })},
	{"scored-attribution-grace", "ENDCAP_SCORED_ATTRIBUTION_GRACE", "3h", "how long after a marketplace-local day ends the exporter first writes its scored-attribution file (late events; see docs/reference/scored-attribution.md)", duration(func(c *Config) *time.Duration { return &c.ScoredAttributionGrace })},
	{"report-url-lifetime", "ENDCAP_REPORT_URL_LIFETIME", "1h", "lifetime of the presigned URLs of report files (1s to 168h)", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 168*time.Hour {
			return fmt.Errorf("must be a duration from 1s to 168h, got %q", v)
		}
		c.ReportURLLifetime = d
		return nil
	}},
	{"webhook-allow-loopback", "ENDCAP_WEBHOOK_ALLOW_LOOPBACK", "false", "let webhook deliveries reach loopback addresses (127.0.0.0/8, ::1), for a receiver on the same machine in development (endcap dev sets it); private, link-local and metadata addresses stay refused (docs/reference/webhooks.md, Safety)", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		c.WebhookAllowLoopback = b
		return nil
	}},
	{"webhook-timeout", "ENDCAP_WEBHOOK_TIMEOUT", "10s", "longest webhook delivery attempt (connection, request, response); a slower endpoint's attempt fails and is retried", duration(func(c *Config) *time.Duration { return &c.WebhookTimeout })},
	{"webhook-retry-base", "ENDCAP_WEBHOOK_RETRY_BASE", "5s", "first delay of the webhook retry schedule; the n-th is base×4^(n−1), at most base×5760, ±20 % jitter, 10 attempts (5s: about 23.6 h; see docs/reference/webhooks.md)", duration(func(c *Config) *time.Duration { return &c.WebhookRetryBase })},
	{"webhook-max-in-flight", "ENDCAP_WEBHOOK_MAX_IN_FLIGHT", "3", "webhook delivery attempts in flight at once per endpoint and exporter process", integer(func(c *Config) *int { return &c.WebhookMaxInFlight }, 1)},
	{"webhooks-per-marketplace", "ENDCAP_WEBHOOKS_PER_MARKETPLACE", "16", "webhooks a marketplace may have (a create past it is a 422); each event becomes a delivery per webhook", integer(func(c *Config) *int { return &c.WebhooksPerMarket }, 1)},
	{"webhook-tests-per-hour", "ENDCAP_WEBHOOK_TESTS_PER_HOUR", "20", "test deliveries (POST …/test) a marketplace may make in any hour (429 with Retry-After past it)", integer(func(c *Config) *int { return &c.WebhookTestsPerHour }, 1)},
	{"webhook-tests-per-day", "ENDCAP_WEBHOOK_TESTS_PER_DAY", "100", "test deliveries a marketplace may make in any 24 hours (429 with Retry-After past it)", integer(func(c *Config) *int { return &c.WebhookTestsPerDay }, 1)},
	{"webhook-tests-kept", "ENDCAP_WEBHOOK_TESTS_KEPT", "100", "test deliveries of a marketplace kept (in memory by every api and exporter process); a new test deletes the oldest finished ones past it; never fewer than the daily cap", integer(func(c *Config) *int { return &c.WebhookTestsKept }, 1)},
	{"idempotency-max-bytes", "ENDCAP_IDEMPOTENCY_MAX_BYTES", "67108864", "bytes of Idempotency-Key results one marketplace may keep in Redis at once (24 h each); a new keyed request past it is a 429 and does not run", func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1<<20 {
			return fmt.Errorf("must be an integer of at least 1048576, got %q", v)
		}
		c.IdempotencyMaxBytes = n
		return nil
	}},
	{"webhook-delivery-retention", "ENDCAP_WEBHOOK_DELIVERY_RETENTION", "720h", "a finished webhook delivery (its log entry, status and body) is deleted this long after it finished; every api and exporter process holds the deliveries kept in memory (docs/reference/webhooks.md, Retention)", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Hour {
			return fmt.Errorf("must be a duration of at least 1h, got %q", v)
		}
		c.WebhookRetention = d
		return nil
	}},
	{"webhook-disable-after", "ENDCAP_WEBHOOK_DISABLE_AFTER", "120h", "a webhook whose delivery attempts have all failed for this long is disabled (its GET says why; PATCH status \"enabled\" turns it on again)", duration(func(c *Config) *time.Duration { return &c.WebhookDisableAfter })},
	{"export-daily-quota", "ENDCAP_EXPORT_DAILY_QUOTA", "50", "exports a marketplace may request per UTC day (429 quota_exceeded above)", integer(func(c *Config) *int { return &c.ExportDailyQuota }, 1)},
	{"export-workers", "ENDCAP_EXPORT_WORKERS", "1", "exports an exporter process runs at once (members of the exporter consumer group; each running export holds up to about 130 MB)", integer(func(c *Config) *int { return &c.ExportWorkers }, 1)},
	{"export-timeout", "ENDCAP_EXPORT_TIMEOUT", "30m", "longest run of one attempt of an export", duration(func(c *Config) *time.Duration { return &c.ExportTimeout })},
	{"s3-connect-timeout", "ENDCAP_S3_CONNECT_TIMEOUT", "5s", "longest wait to open a connection to the object store (TCP and TLS)", duration(func(c *Config) *time.Duration { return &c.S3ConnectTimeout })},
	{"s3-request-timeout", "ENDCAP_S3_REQUEST_TIMEOUT", "30s", "longest run of one request to the object store (its retries included) other than an upload's part, and longest wait for any read of an object's body", duration(func(c *Config) *time.Duration { return &c.S3RequestTimeout })},
	{"s3-part-timeout", "ENDCAP_S3_PART_TIMEOUT", "2m", "longest run of the upload of one part (8 MiB) of an export or a scored-attribution file, its retries included; a hung object store fails the export's attempt within this", duration(func(c *Config) *time.Duration { return &c.S3PartTimeout })},
	{"export-max-staleness", "ENDCAP_EXPORT_MAX_STALENESS", "0s", "an export first recomputes the rollup days of its window (those not final) whose watermark is more than this before it was requested (0: every day that does not count everything acknowledged before the request; docs/reference/exports.md, Freshness)", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("must be a duration of 0 or more, got %q", v)
		}
		c.ExportMaxStaleness = d
		return nil
	}},
	{"export-fold-wait", "ENDCAP_EXPORT_FOLD_WAIT", "30s", "longest wait of an export for the projectors to fold the events acknowledged before it started; past it the export recomputes its days anyway, and its dataAsOf is earlier than its request", duration(func(c *Config) *time.Duration { return &c.ExportFoldWait })},
	{"retention-events", "ENDCAP_RETENTION_EVENTS", "0", "how long ClickHouse keeps events (events_raw, the attribution's purchases): 0 for ever, or 90d, 6mo…; whole months older are dropped by the exporter; at least 65d (docs/operations/operations.md, Data retention)", age(func(c *Config) *Age { return &c.RetentionEvents }, MinRawRetentionDays, "the rollups recompute the last 33 days, each reading the auctions of the 31 days before it")},
	{"retention-auctions", "ENDCAP_RETENTION_AUCTIONS", "0", "how long ClickHouse keeps auctions (auctions_raw; the winners, which vendor charges read, stay): 0 for ever, or at least 65d", age(func(c *Config) *Age { return &c.RetentionAuctions }, MinRawRetentionDays, "the rollups recompute the last 33 days, each reading the auctions of the 31 days before it")},
	{"retention-interactions", "ENDCAP_RETENTION_INTERACTIONS", "0", "how long ClickHouse keeps interactions (impressions and clicks of interactions_raw, the attribution's touches; charges stay): 0 for ever, or at least 65d", age(func(c *Config) *Age { return &c.RetentionInteractions }, MinRawRetentionDays, "the rollups recompute the last 33 days, each reading the auctions of the 31 days before it")},
	{"retention-export-files", "ENDCAP_RETENTION_EXPORT_FILES", "0", "how long export files (exports/ in the bucket) are kept after they were written: 0 for ever, or 7d, 1mo…; the exporter removes older ones", age(func(c *Config) *Age { return &c.RetentionExportFiles }, 1, "")},
	{"retention-report-files", "ENDCAP_RETENTION_REPORT_FILES", "0", "how long scored-attribution files (scored-attribution/ in the bucket) are kept after they were last written: 0 for ever, or at least 7d", age(func(c *Config) *Age { return &c.RetentionReportFiles }, MinReportFilesDays, "the exporter writes again the file of a day among its last closed days")},
	{"retention-interval", "ENDCAP_RETENTION_INTERVAL", "1h", "how often the exporter applies the retention settings (drops old partitions, removes old files)", duration(func(c *Config) *time.Duration { return &c.RetentionInterval })},
	{"rollup-interval", "ENDCAP_ROLLUP_INTERVAL", "1m", "how often the projector recomputes the recent days of the rollups (docs/design/rollups.md)", duration(func(c *Config) *time.Duration { return &c.RollupInterval })},
	{"rollup-full-interval", "ENDCAP_ROLLUP_FULL_INTERVAL", "1h", "how often it recomputes every day that can still change", duration(func(c *Config) *time.Duration { return &c.RollupFullInterval })},
	{"rollup-max-share", "ENDCAP_ROLLUP_MAX_SHARE", "0.25", "largest share of the time the rollup job spends recomputing: a run that took d delays the next by at least d×(1−share)/share (0 < share ≤ 1; 1: no delay)", func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return fmt.Errorf("must be a number above 0 and at most 1, got %q", v)
		}
		c.RollupMaxShare = f
		return nil
	}},
	{"console-url", "ENDCAP_CONSOLE_URL", "", "public URL of the web console (e.g. https://ads.example.com/console), used in the links of invitation e-mails (empty: http://<the API's address>/console); see docs/guide/console.md", func(c *Config, v string) error {
		if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
			return fmt.Errorf("must be an http:// or https:// URL, got %q", v)
		}
		c.ConsoleURL = strings.TrimRight(v, "/")
		return nil
	}},
	{"doc-url-base", "ENDCAP_DOC_URL_BASE", "https://github.com/endcap/endcap/blob/main/docs", "address of the documentation the error bodies point at: every docUrl is <base>/reference/errors.md#<errCode> (a deployment's own copy of docs/, e.g. https://docs.ads.example.com)", func(c *Config, v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("must be an http:// or https:// URL without query or fragment, got %q", v)
		}
		c.DocURLBase = strings.TrimRight(v, "/")
		return nil
	}},
	{"console-secure-cookies", "ENDCAP_CONSOLE_SECURE_COOKIES", "true", "mark the console's cookies Secure (sent over HTTPS only); endcap dev sets false for http://127.0.0.1", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		c.ConsoleSecureCookies = b
		return nil
	}},
	{"console-downloads-per-user", "ENDCAP_CONSOLE_DOWNLOADS_PER_USER", "2", "downloads (exports, scored-attribution files) one console user runs at once, across the API processes; one more is answered 429", integer(func(c *Config) *int { return &c.ConsoleDownloads }, 1)},
	{"console-session-idle", "ENDCAP_CONSOLE_SESSION_IDLE", "12h", "a console session ends after this long without a request (and 7 days after sign-in in any case)", duration(func(c *Config) *time.Duration { return &c.ConsoleSessionIdle })},
	{"oidc-issuer", "ENDCAP_OIDC_ISSUER", "", "issuer URL of the OpenID Connect provider of the console's single sign-on (discovery at <issuer>/.well-known/openid-configuration); empty: no single sign-on; see docs/guide/console.md", func(c *Config, v string) error {
		if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
			return fmt.Errorf("must be an http:// or https:// URL, got %q", v)
		}
		c.OIDCIssuer = v
		return nil
	}},
	{"oidc-client-id", "ENDCAP_OIDC_CLIENT_ID", "", "the console's client id at the OpenID Connect provider", str(func(c *Config) *string { return &c.OIDCClientID })},
	{"oidc-client-secret-file", "ENDCAP_OIDC_CLIENT_SECRET_FILE", "", "file whose first line is the console's client secret at the OpenID Connect provider (empty: a public client, PKCE only)", str(func(c *Config) *string { return &c.OIDCClientSecretFile })},
	{"oidc-redirect-url", "ENDCAP_OIDC_REDIRECT_URL", "", "the callback URL registered at the provider (empty: <ENDCAP_CONSOLE_URL>/sso/callback, or http://<the API's address>/console/sso/callback)", func(c *Config, v string) error {
		if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
			return fmt.Errorf("must be an http:// or https:// URL, got %q", v)
		}
		c.OIDCRedirectURL = v
		return nil
	}},
	{"oidc-scopes", "ENDCAP_OIDC_SCOPES", "openid,email,profile", "comma-separated scopes asked of the provider (add groups, or the scope that brings the role claim, when the provider needs one)", str(func(c *Config) *string { return &c.OIDCScopes })},
	{"oidc-role-claim", "ENDCAP_OIDC_ROLE_CLAIM", "groups", "the claim (a string or a list of strings, from the ID token or the userinfo) whose values ENDCAP_OIDC_ROLE_MAP maps to roles", str(func(c *Config) *string { return &c.OIDCRoleClaim })},
	{"oidc-role-map", "ENDCAP_OIDC_ROLE_MAP", "", "comma-separated rules <claim value>=<marketplace id>:<role>[:<vendor id>], role marketplace_admin, vendor_admin or vendor_analyst (vendor roles name the vendor); of the rules matching a user, the first of each marketplace gives its role there; required with ENDCAP_OIDC_ISSUER", str(func(c *Config) *string { return &c.OIDCRoleMap })},
	{"smtp-addr", "ENDCAP_SMTP_ADDR", "", "host:port of the SMTP server that sends invitation e-mails (empty: none are sent; the console shows each invitation's link to the admin instead)", func(c *Config, v string) error {
		if v != "" {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("must be host:port, got %q", v)
			}
		}
		c.SMTPAddr = v
		return nil
	}},
	{"smtp-user", "ENDCAP_SMTP_USER", "", "SMTP user (empty: no authentication); the password is sent only over TLS, or to a server on loopback", str(func(c *Config) *string { return &c.SMTPUser })},
	secret(setting{"smtp-password", "ENDCAP_SMTP_PASSWORD", "", "SMTP password", str(func(c *Config) *string { return &c.SMTPPassword })}),
	{"smtp-from", "ENDCAP_SMTP_FROM", "Endcap <no-reply@localhost>", "sender of the e-mails (an address, or Name <address>)", func(c *Config, v string) error {
		if _, err := mail.ParseAddress(v); err != nil {
			return fmt.Errorf("must be an e-mail address, got %q", v)
		}
		c.SMTPFrom = v
		return nil
	}},
	{"smtp-tls", "ENDCAP_SMTP_TLS", "starttls", "starttls (upgrade the connection; refused when the server does not offer it, unless it is on loopback), tls (TLS from the start, port 465) or none (a relay on the same host only)", func(c *Config, v string) error {
		switch v {
		case "starttls", "tls", "none":
			c.SMTPTLS = v
			return nil
		}
		return fmt.Errorf("must be starttls, tls or none, got %q", v)
	}},
	{"readyz-detail", "ENDCAP_READYZ_DETAIL", "false", "/readyz gives the error text of a failing check (addresses, the dependency's messages) instead of only \"failing\"; the text is logged either way (docs/operations/operations.md, Health)", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		c.ReadyzDetail = b
		return nil
	}},
	{"segment-max-members", "ENDCAP_SEGMENT_MAX_MEMBERS", "20000000", "members one segment may hold; an upload that would pass it is refused whole, 422 segment_too_large (0: no cap; docs/reference/segments.md, Limits)", int64Setting(func(c *Config) *int64 { return &c.SegmentMaxMembers })},
	{"segment-max-bytes", "ENDCAP_SEGMENT_MAX_BYTES", "1073741824", "bytes of Redis one segment's members may take (Redis's MEMORY USAGE estimate); past it an upload is refused whole (0: no cap)", int64Setting(func(c *Config) *int64 { return &c.SegmentMaxBytes })},
	{"segments-max-members", "ENDCAP_SEGMENTS_MAX_MEMBERS", "100000000", "members all the segments of one marketplace may hold together; past it an upload is refused whole (0: no cap)", int64Setting(func(c *Config) *int64 { return &c.SegmentsMaxMembers })},
	{"segments-max-bytes", "ENDCAP_SEGMENTS_MAX_BYTES", "5368709120", "bytes of Redis all the segments of one marketplace may take together; past it an upload is refused whole (0: no cap)", int64Setting(func(c *Config) *int64 { return &c.SegmentsMaxBytes })},
	{"invitation-emails-per-day", "ENDCAP_INVITATION_EMAILS_PER_DAY", "1000", "invitation e-mails a marketplace may have sent per UTC day when ENDCAP_SMTP_ADDR is set; a request that would pass it creates nothing and is 429 with Retry-After (docs/reference/billing-webhooks-invitations-offsite.md)", integer(func(c *Config) *int { return &c.InvitationMailsPerDay }, 1)},
	{"metrics-addr", "ENDCAP_METRICS_ADDR", "", "address of a listener of its own for /metrics, which the API port then no longer serves (empty: /metrics on the API port; in production give it an address only the monitoring network reaches)", str(func(c *Config) *string { return &c.MetricsAddr })},
	{"otel-endpoint", "ENDCAP_OTEL_ENDPOINT", "", "OTLP/HTTP endpoint (e.g. http://otel-collector:4318) the process sends OpenTelemetry traces to: requests, the Kafka records they produce, the fold's batches, inserts and charges, exports (empty: off, no span is made; the standard OTEL_EXPORTER_OTLP_HEADERS, _CERTIFICATE, _COMPRESSION and _TIMEOUT apply; docs/operations/operations.md, Traces)", func(c *Config, v string) error {
		if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
			return fmt.Errorf("must be an http:// or https:// URL, got %q", v)
		}
		c.OTelEndpoint = v
		return nil
	}},
	{"otel-sample-ratio", "ENDCAP_OTEL_SAMPLE_RATIO", "1", "share of the traces started by this process that are kept (0 ≤ ratio ≤ 1); a request whose traceparent says sampled is always kept", func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return fmt.Errorf("must be a number from 0 to 1, got %q", v)
		}
		c.OTelSampleRatio = f
		return nil
	}},
	{"debug-addr", "ENDCAP_DEBUG_ADDR", "", "address of the pprof debug listener (empty = off; never expose it publicly)", str(func(c *Config) *string { return &c.DebugAddr })},
	{"shutdown-timeout", "ENDCAP_SHUTDOWN_TIMEOUT", "15s", "graceful shutdown limit: for the HTTP requests in flight, then for each projector's batch in flight to be folded and committed", duration(func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
	{"log-level", "ENDCAP_LOG_LEVEL", "info", "debug | info | warn | error", func(c *Config, v string) error {
		switch v {
		case "debug", "info", "warn", "error":
			c.LogLevel = v
			return nil
		}
		return fmt.Errorf("must be debug, info, warn or error, got %q", v)
	}},
	{"log-format", "ENDCAP_LOG_FORMAT", "text", "text | json", func(c *Config, v string) error {
		if v != "text" && v != "json" {
			return fmt.Errorf("must be text or json, got %q", v)
		}
		c.LogFormat = v
		return nil
	}},
}

// secretFlags are the settings secret marks.
var secretFlags = map[string]bool{}

// secret marks a row as a secret: its value never shows (Config.Secrets,
// endcap config), and it gets a file form of its own, --<flag>-file and
// <VARIABLE>_FILE, whose content is the value (a Kubernetes secret mounted
// as a file), unless a row of that name exists already.
func secret(s setting) setting {
	secretFlags[s.flag] = true
	return s
}

// row is a setting as the flag set and the docs see it: the rows of
// settings, each secret followed by its file form (fileOf: the secret).
type row struct {
	setting
	fileOf *setting
}

func rows() []row {
	names := map[string]bool{}
	for _, s := range settings {
		names[s.flag] = true
	}
	out := make([]row, 0, len(settings)+len(secretFlags))
	for i := range settings {
		s := &settings[i]
		out = append(out, row{setting: *s})
		if !secretFlags[s.flag] || names[s.flag+"-file"] {
			continue
		}
		out = append(out, row{setting: setting{
			flag:  s.flag + "-file",
			env:   s.env + "_FILE",
			usage: "file whose content (a final newline dropped) is --" + s.flag + ", instead of it",
		}, fileOf: s})
	}
	return out
}

// Register adds every setting as a flag of fs and returns a function that
// resolves the configuration once fs has been parsed. The function reports
// every problem of the configuration at once, each naming its flag and
// where its value came from.
func Register(fs *flag.FlagSet) func() (Config, error) {
	all := rows()
	vals := make([]*string, len(all))
	for i, s := range all {
		vals[i] = fs.String(s.flag, "", s.usage+" (env "+s.env+", default "+quoteDefault(s.def)+")")
	}
	return func() (Config, error) {
		explicit := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
		source := func(i int) (v, src string) {
			s := all[i]
			v, src = s.def, "default"
			if e, ok := os.LookupEnv(s.env); ok {
				v, src = e, s.env
			}
			if explicit[s.flag] {
				v, src = *vals[i], "--"+s.flag
			}
			return v, src
		}
		var c Config
		var errs []string
		for i, s := range all {
			if s.fileOf != nil {
				continue
			}
			v, src := source(i)
			if i+1 < len(all) && all[i+1].fileOf != nil {
				if fv, fsrc := source(i + 1); fv != "" {
					if src != "default" {
						errs = append(errs, fmt.Sprintf("%s (%s): set twice: give it or %s (%s), not both", s.flag, src, all[i+1].flag, fsrc))
						_ = s.set(&c, s.def)
						continue
					}
					b, err := os.ReadFile(fv)
					if err != nil {
						errs = append(errs, fmt.Sprintf("%s (%s): %v", all[i+1].flag, fsrc, err))
						_ = s.set(&c, s.def)
						continue
					}
					v, src = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), fsrc
					if v == "" {
						errs = append(errs, fmt.Sprintf("%s (%s): the file %s is empty", all[i+1].flag, fsrc, fv))
						continue
					}
				}
			}
			if secretFlags[s.flag] && v != "" {
				c.secrets = append(c.secrets, v)
				for _, part := range strings.Split(v, ",") {
					if _, key, ok := strings.Cut(part, ":"); ok && len(key) >= 8 {
						c.secrets = append(c.secrets, key)
					}
				}
			}
			if err := s.set(&c, v); err != nil {
				msg := err.Error()
				var shown valueNotQuoted
				if secretFlags[s.flag] && !errors.As(err, &shown) {
					msg = "invalid value (not shown: a secret)"
				}
				errs = append(errs, fmt.Sprintf("%s (%s): %s", s.flag, src, msg))
				// The default, so that the checks of several settings
				// together see no problem this one has caused.
				_ = s.set(&c, s.def)
			}
		}
		for _, err := range c.check() {
			errs = append(errs, err.Error())
		}
		if err := joinErrors(errs); err != nil {
			return Config{}, err
		}
		return c, nil
	}
}

// joinErrors is the one error of several problems: the problem itself when
// there is one, else a count and one problem a line.
func joinErrors(errs []string) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errors.New(errs[0])
	}
	return fmt.Errorf("%d problems in the configuration:\n  %s", len(errs), strings.Join(errs, "\n  "))
}

// check lists the problems of settings that are valid alone but not
// together.
func (c Config) check() []error {
	var errs []error
	if c.RedisCluster && c.RedisDB != 0 {
		errs = append(errs, fmt.Errorf("redis-db (%d) must be 0 with redis-cluster: a Redis Cluster has one database", c.RedisDB))
	}
	if !c.RedisCluster && strings.Contains(c.RedisAddr, ",") {
		errs = append(errs, fmt.Errorf("redis-addr %q lists several addresses: give one, or set redis-cluster for the seed nodes of a cluster", c.RedisAddr))
	}
	if c.RedisPassword != "" && c.RedisPasswordFile != "" {
		errs = append(errs, fmt.Errorf("redis-password and redis-password-file are both set: give one"))
	}
	if c.RedisTLSCA != "" && !c.RedisTLS {
		errs = append(errs, fmt.Errorf("redis-tls-ca is set without redis-tls: set ENDCAP_REDIS_TLS=true to connect to Redis over TLS"))
	}
	if err := c.checkKafkaSecurity(); err != nil {
		errs = append(errs, err)
	}
	if c.KafkaRebalanceTimeout <= c.ProjectorFlushTimeout {
		// A member holds rebalances while it folds a batch: the group would
		// drop it at every rebalance that comes during a slow batch.
		errs = append(errs, fmt.Errorf("kafka-rebalance-timeout (%s) must be longer than projector-flush-timeout (%s)", c.KafkaRebalanceTimeout, c.ProjectorFlushTimeout))
	}
	if (c.S3AccessKey == "") != (c.S3SecretKey == "") {
		errs = append(errs, fmt.Errorf("s3-access-key and s3-secret-key go together: give both, or neither for the AWS SDK's default credential chain"))
	}
	return errs
}

// Secrets returns the values of the secret settings that are set (and the
// parts of those that are lists), for whatever shows text to others (logs,
// /readyz) to blank them out.
func (c Config) Secrets() []string { return slices.Clone(c.secrets) }

// DevS3SecretKey is the S3 secret key of the development stack (endcap dev,
// the tests' stack): known to everyone, so never one of a real endpoint.
const DevS3SecretKey = "endcap-dev-secret"

// InsecureDefaults lists, as one error, the development credentials used
// against an endpoint off loopback: the development stack's S3 secret key,
// an empty ClickHouse password. endcap serve refuses to start with them,
// unless AllowInsecureDefaults.
func (c Config) InsecureDefaults() error {
	if c.AllowInsecureDefaults {
		return nil
	}
	var errs []string
	const how = "; or set ENDCAP_ALLOW_INSECURE_DEFAULTS=true to start anyway"
	if c.S3SecretKey == DevS3SecretKey && !s3Loopback(c.S3Endpoint) {
		errs = append(errs, "s3-secret-key (ENDCAP_S3_SECRET_KEY) is the development stack's known secret, against the S3 endpoint "+s3Shown(c.S3Endpoint)+" that is not on loopback: give the endpoint's own keys, or none for the AWS SDK's default credential chain"+how)
	}
	if c.ClickHousePassword == "" {
		for _, a := range strings.Split(c.ClickHouseAddr, ",") {
			if a = strings.TrimSpace(a); a != "" && !hostLoopback(a) {
				errs = append(errs, "clickhouse-password (ENDCAP_CLICKHOUSE_PASSWORD or ENDCAP_CLICKHOUSE_PASSWORD_FILE) is empty, against the ClickHouse server "+a+" that is not on loopback: give the user's password"+how)
				break
			}
		}
	}
	return joinErrors(errs)
}

// hostLoopback says whether host:port (or a host) names this machine:
// localhost or a loopback IP.
func hostLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func s3Loopback(endpoint string) bool {
	if endpoint == "" {
		return false // AWS S3
	}
	u, err := url.Parse(endpoint)
	return err == nil && u.Host != "" && hostLoopback(u.Host)
}

func s3Shown(endpoint string) string {
	if endpoint == "" {
		return "(AWS S3)"
	}
	return endpoint
}

// KafkaSASLMechanisms are the values --kafka-sasl-mechanism accepts.
var KafkaSASLMechanisms = []string{"plain", "scram-sha-256", "scram-sha-512", "oauthbearer", "aws-msk-iam"}

// checkKafkaSecurity rejects Kafka TLS and SASL settings that cannot work
// together, naming the settings.
func (c Config) checkKafkaSecurity() error {
	if (c.KafkaTLSCert == "") != (c.KafkaTLSKey == "") {
		return fmt.Errorf("kafka-tls-cert and kafka-tls-key go together: set both or neither")
	}
	if !c.KafkaTLS && (c.KafkaTLSCA != "" || c.KafkaTLSCert != "") {
		return fmt.Errorf("kafka-tls-ca, kafka-tls-cert and kafka-tls-key need kafka-tls=true")
	}
	if c.KafkaSASLPassword != "" && c.KafkaSASLPasswordFile != "" {
		return fmt.Errorf("kafka-sasl-password and kafka-sasl-password-file: set one, not both")
	}
	switch c.KafkaSASLMechanism {
	case "":
		if c.KafkaSASLUser != "" || c.KafkaSASLPassword != "" || c.KafkaSASLPasswordFile != "" || c.KafkaSASLTokenFile != "" {
			return fmt.Errorf("kafka-sasl-user, -password and -token-file need kafka-sasl-mechanism")
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		if c.KafkaSASLUser == "" || (c.KafkaSASLPassword == "" && c.KafkaSASLPasswordFile == "") {
			return fmt.Errorf("kafka-sasl-mechanism %s needs kafka-sasl-user and kafka-sasl-password (or kafka-sasl-password-file)", c.KafkaSASLMechanism)
		}
	case "oauthbearer":
		if c.KafkaSASLTokenFile == "" {
			return fmt.Errorf("kafka-sasl-mechanism oauthbearer needs kafka-sasl-token-file")
		}
	case "aws-msk-iam":
		if !c.KafkaTLS {
			return fmt.Errorf("kafka-sasl-mechanism aws-msk-iam needs kafka-tls=true (Amazon MSK takes IAM on its TLS listener, port 9098)")
		}
	}
	return nil
}

// WaitReplicas is RedisWaitReplicas with auto resolved: 1 on a cluster,
// 0 on one server.
func (c Config) WaitReplicas() int {
	if c.RedisWaitReplicas >= 0 {
		return c.RedisWaitReplicas
	}
	if c.RedisCluster {
		return 1
	}
	return 0
}

// Default returns the configuration with every default and no environment.
func Default() Config {
	var c Config
	for _, s := range settings {
		if err := s.set(&c, s.def); err != nil {
			panic("config: bad default for " + s.flag + ": " + err.Error())
		}
	}
	return c
}

// EnvTable lists the settings (flag, variable, default, meaning) for docs.
func EnvTable() [][4]string {
	all := rows()
	out := make([][4]string, 0, len(all))
	for _, s := range all {
		usage := s.usage
		if secretFlags[s.flag] {
			usage += "; a secret: never shown, and --" + s.flag + "-file reads it from a file"
		}
		out = append(out, [4]string{"--" + s.flag, s.env, s.def, usage})
	}
	return out
}

func quoteDefault(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
