// Package localstack starts Endcap's local development stack as child processes: ClickHouse (Debian's
// clickhouse-server 18.16 or newer; optionally a replicated cluster of several servers and the ZooKeeper
// they share), Redis and an S3 endpoint (versitygw, posix backend), each with its data under one
// directory, listening on loopback.
//
// The programs are installed by deploy/local/install.sh. Children are tied to the calling process
// (PR_SET_PDEATHSIG), so they do not outlive it even after a kill -9; a stale child of a crashed run that is
// still found through its pid file is stopped on the next Start. Processes are only ever signalled by PID.
package localstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Service names, used for pid files (run/<name>.pid), log files (logs/<name>.log) and Stack.PIDs.
const (
	ServiceClickHouse = "clickhouse"
	ServiceRedis      = "redis"
	ServiceS3         = "s3"
	ServiceMail       = "mail"
)

// Default values applied by Start when the corresponding Options field is empty.
const (
	DefaultHost        = "127.0.0.1"
	DefaultS3AccessKey = "endcap"
	DefaultS3SecretKey = "endcap-dev-secret"
	DefaultS3Region    = "us-east-1"

	// defaultStartTimeout bounds Start when its context has no deadline.
	defaultStartTimeout = 60 * time.Second
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 10 * time.Second
)

// ErrMissingBinary is wrapped by the error Start returns when a program it needs is not installed.
var ErrMissingBinary = errors.New("localstack: required program not found (run deploy/local/install.sh)")

// Options configures Start. Use DefaultOptions to get one with every service selected.
type Options struct {
	// Dir is the base data directory (for example "<repo>/.endcap" or a test's temp dir). Start creates
	// clickhouse/, redis/, s3/, run/ (pid files) and logs/ under it.
	Dir string
	// Host is the address every service listens on; default 127.0.0.1.
	Host string

	// Ports; 0 picks a free port. A fixed port already in use by a process that is not a child of this
	// stack makes Start fail.
	ClickHousePort     int // native protocol
	ClickHouseHTTPPort int
	RedisPort          int
	S3Port             int

	// Root credentials of the S3 endpoint; defaults DefaultS3AccessKey / DefaultS3SecretKey.
	S3AccessKey, S3SecretKey string

	// Programs. Empty means: VersityGWBin: Dir/bin/versitygw, then <repo root>/.endcap/bin/versitygw,
	// then "versitygw" on PATH; ClickHouseBin: "clickhouse-server" on PATH, then /usr/sbin and /usr/bin;
	// RedisBin: "redis-server" on PATH, then /usr/bin and /usr/sbin.
	VersityGWBin  string
	ClickHouseBin string
	RedisBin      string

	// Logger receives progress messages; nil discards them.
	Logger *slog.Logger

	// ClickHouseSystemLogs makes ClickHouse record every query (system.query_log: its duration, rows and
	// bytes read and written) and every part it writes or merges (system.part_log), for diagnosing where its
	// time goes (deploy/local/bench-projectors.sh CH_LOGS=1). Off by default: both cost CPU and disk.
	ClickHouseSystemLogs bool
	// ClickHouseSystemLogDays is how many days of those logs are kept (the older days' partitions are dropped
	// at start and every hour); 0 means DefaultSystemLogDays.
	ClickHouseSystemLogDays int

	// ClickHouseReplicas, above 0, runs ClickHouse as a cluster (ClickHouseCluster) of one shard of that
	// many replicas, with a ZooKeeper server that they share: replica i has the macros {shard} = 01 and
	// {replica} = r<i>, its own ports (ClickHousePort and ClickHouseHTTPPort are the first replica's; the
	// others, the interserver ports and ZooKeeper's are picked free unless ZooKeeperPort is set) and its own
	// data (Dir/clickhouse, Dir/clickhouse-2...). 0: one server without replication. Needs ClickHouse.
	ClickHouseReplicas int
	// ClickHouseCluster is the cluster's name in every replica's <remote_servers> (what ON CLUSTER names);
	// default DefaultClickHouseCluster.
	ClickHouseCluster string
	// ZooKeeperPort is ZooKeeper's client port (0 picks a free one); ZooKeeperBin its launcher (default
	// Debian's /usr/share/zookeeper/bin/zkServer.sh, then "zkServer.sh" on PATH).
	ZooKeeperPort int
	ZooKeeperBin  string

	// RedisCluster, above 0, runs Redis as a Redis Cluster of that many masters (at least 3), each with
	// RedisReplicas replicas: RedisCluster × (1 + RedisReplicas) nodes, node i (RedisService) on
	// RedisPort for the first, RedisNodePorts[i-2] for the others (0 or missing: a free port), its data
	// in Dir/redis-cluster/<i>. The first start forms the cluster (redis-cli --cluster create); the
	// next ones find it in the nodes' data. RedisNodeTimeout is the cluster-node-timeout (default
	// DefaultRedisNodeTimeout). RedisBusPorts are the cluster bus ports of node 1..N (0 or missing: a
	// free port); the nodes find each other on them again after a restart of the stack only when they
	// are the same. 0: one server without a cluster. Needs Redis.
	RedisCluster     int
	RedisReplicas    int
	RedisNodeTimeout time.Duration
	RedisNodePorts   []int
	RedisBusPorts    []int

	replicaPorts     []replicaPorts // native and HTTP ports of replicas 2..N
	interserverPorts []int          // interserver HTTP port of replicas 1..N

	// Which services to start. DefaultOptions sets the first three; Start fails if none is set.
	ClickHouse bool
	Redis      bool
	S3         bool
	// Mail runs maildev (npm, installed by deploy/local/install.sh into <repo>/.endcap/maildev): an SMTP
	// server on MailSMTPPort that keeps every message (Dir/mail) and shows them, with a REST API
	// (GET /api/email), on MailWebPort. For `endcap dev` and the console's tests.
	Mail         bool
	MailSMTPPort int
	MailWebPort  int
	// MailDevScript is maildev's entry point, run with node; empty: Dir/maildev/..., then
	// <repo root>/.endcap/maildev/node_modules/maildev/dist/bin/maildev.js.
	MailDevScript string
}

// DefaultOptions returns Options for dir with every service selected, free ports and default credentials.
func DefaultOptions(dir string) Options {
	return Options{
		Dir:         dir,
		Host:        DefaultHost,
		S3AccessKey: DefaultS3AccessKey,
		S3SecretKey: DefaultS3SecretKey,
		ClickHouse:  true,
		Redis:       true,
		S3:          true,
	}
}

// Stack is a running local stack. Addresses of services that were not selected are empty.
type Stack struct {
	Dir                string // absolute base data directory
	ClickHouseAddr     string // native protocol, "127.0.0.1:19000"
	ClickHouseHTTPAddr string // "127.0.0.1:19001"
	// With Options.ClickHouseReplicas: the native and HTTP addresses of every replica (the first is
	// ClickHouseAddr and ClickHouseHTTPAddr), the cluster's name and ZooKeeper's address.
	ClickHouseAddrs     []string
	ClickHouseHTTPAddrs []string
	ClickHouseCluster   string
	ZooKeeperAddr       string
	RedisAddr           string // "127.0.0.1:19002"; with Options.RedisCluster, the first node's
	// RedisAddrs are the addresses of every node of a Redis Cluster (Options.RedisCluster), in the order of
	// RedisService; with one server, RedisAddr alone.
	RedisAddrs   []string
	S3Endpoint   string // "http://127.0.0.1:19100"
	S3Region     string
	S3AccessKey  string
	S3SecretKey  string
	MailSMTPAddr string // "127.0.0.1:1025"
	MailWebURL   string // "http://127.0.0.1:1080"

	log      *slog.Logger
	opts     Options
	pruneEnd chan struct{} // closed by Stop: ends the system logs' pruning
	pruned   sync.WaitGroup
	mu       sync.Mutex
	children []*child
	forker   *forker
	lock     *os.File
	stopped  bool
}

// PIDs returns the process IDs of the running children by service name.
func (s *Stack) PIDs() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.children))
	for _, c := range s.children {
		m[c.name] = c.pid
	}
	return m
}

// Start starts the selected services as child processes and waits until each answers: ClickHouse's HTTP
// /ping returns "Ok.\n", Redis answers PING with +PONG, the S3 endpoint returns any HTTP response. The
// wait is bounded by ctx (60 s if ctx has no deadline); ctx does not limit the children's lifetime, Stop
// does. On failure everything started is stopped and the error includes the tail of the failing
// child's log.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	log := o.Logger

	for _, d := range []string{"run", "logs"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("localstack: %w", err)
		}
	}
	// One stack per Dir: the lock is held until Stop, and released by the kernel if this process dies, so
	// once we hold it, any child still named in a pid file is a leftover of a crashed run.
	lock, err := lockDir(o.Dir)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			lock.Close()
		}
	}()

	bins, err := findBinaries(o)
	if err != nil {
		return nil, err
	}

	// Children of a crashed earlier run still holding our ports and data go first.
	for _, svc := range o.services() {
		if err := stopStale(svc, o.pidFile(svc), o.Dir, log); err != nil {
			return nil, err
		}
	}

	if err := allocatePorts(o.Host, o.portRequests()); err != nil {
		return nil, err
	}

	// first are started, and answer, before specs: the replicas of a replicated ClickHouse need ZooKeeper
	// from their start (18.16 crashes on its first ON CLUSTER statement if its ZooKeeper was not up when it
	// started).
	var first, specs []childSpec
	if o.ClickHouseReplicas > 0 {
		sp, err := zooKeeperSpec(o, bins.zookeeper)
		if err != nil {
			return nil, err
		}
		first = append(first, sp)
		for i := 1; i <= o.ClickHouseReplicas; i++ {
			sp, err := clickHouseSpec(o, bins.clickhouse, i)
			if err != nil {
				return nil, err
			}
			specs = append(specs, sp)
		}
	} else if o.ClickHouse {
		sp, err := clickHouseSpec(o, bins.clickhouse, 0)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sp)
	}
	if o.RedisCluster > 0 {
		sps, err := redisNodeSpecs(o, bins.redis)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sps...)
	} else if o.Redis {
		sp, err := redisSpec(o, bins.redis)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sp)
	}
	if o.S3 {
		sp, err := s3Spec(o, bins.versitygw)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sp)
	}
	if o.Mail {
		sp, err := mailSpec(o, bins.node, bins.maildev)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sp)
	}

	s := &Stack{Dir: o.Dir, log: log, opts: o, forker: newForker(), lock: lock}
	dial := dialHost(o.Host)
	if o.ClickHouse {
		s.ClickHouseAddr = net.JoinHostPort(dial, strconv.Itoa(o.ClickHousePort))
		s.ClickHouseHTTPAddr = net.JoinHostPort(dial, strconv.Itoa(o.ClickHouseHTTPPort))
		s.ClickHouseAddrs, s.ClickHouseHTTPAddrs = []string{s.ClickHouseAddr}, []string{s.ClickHouseHTTPAddr}
		for _, p := range o.replicaPorts {
			s.ClickHouseAddrs = append(s.ClickHouseAddrs, net.JoinHostPort(dial, strconv.Itoa(p.tcp)))
			s.ClickHouseHTTPAddrs = append(s.ClickHouseHTTPAddrs, net.JoinHostPort(dial, strconv.Itoa(p.http)))
		}
	}
	if o.ClickHouseReplicas > 0 {
		s.ClickHouseCluster = o.ClickHouseCluster
		s.ZooKeeperAddr = net.JoinHostPort(dial, strconv.Itoa(o.ZooKeeperPort))
	}
	if o.Redis {
		s.RedisAddr = net.JoinHostPort(dial, strconv.Itoa(o.RedisPort))
		s.RedisAddrs = []string{s.RedisAddr}
	}
	if o.RedisCluster > 0 {
		s.RedisAddrs = redisClusterAddrs(o)
	}
	if o.S3 {
		s.S3Endpoint = "http://" + net.JoinHostPort(dial, strconv.Itoa(o.S3Port))
		s.S3Region = DefaultS3Region
		s.S3AccessKey = o.S3AccessKey
		s.S3SecretKey = o.S3SecretKey
	}
	if o.Mail {
		s.MailSMTPAddr = net.JoinHostPort(dial, strconv.Itoa(o.MailSMTPPort))
		s.MailWebURL = "http://" + net.JoinHostPort(dial, strconv.Itoa(o.MailWebPort))
	}

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}

	ok = true // from here on, Stop releases the lock
	for _, wave := range [][]childSpec{first, specs} {
		var started []*child
		for _, sp := range wave {
			c, err := startChild(s.forker, sp, o)
			if err != nil {
				_ = s.Stop()
				return nil, err
			}
			s.children = append(s.children, c)
			started = append(started, c)
			log.Debug("localstack: started", "service", c.name, "pid", c.pid, "cmd", c.cmdline)
		}
		if err := s.waitReady(ctx, started); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	if o.ClickHouse && o.ClickHouseSystemLogs {
		s.startPruning(o.ClickHouseSystemLogDays)
	}
	if o.RedisCluster > 0 {
		start := time.Now()
		if err := s.formRedisCluster(ctx, bins.redisCLI); err != nil {
			_ = s.Stop()
			return nil, err
		}
		log.Info("localstack: redis cluster ready", "masters", o.RedisCluster, "replicas", o.RedisReplicas,
			"nodes", s.RedisAddrs, "took", time.Since(start).Round(time.Millisecond))
	}
	return s, nil
}

// waitReady polls the children concurrently until each answers, one exits, or ctx ends.
func (s *Stack) waitReady(ctx context.Context, children []*child) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(children))
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() {
			err := c.waitReady(ctx)
			if err != nil {
				errs[i] = err
				cancel() // no point waiting for the others
				return
			}
			s.log.Info("localstack: ready", "service", c.name, "addr", c.addr, "pid", c.pid,
				"startup", time.Since(c.started).Round(time.Millisecond))
		})
	}
	wg.Wait()
	// Report the child that actually failed rather than the ones cancelled because of it.
	var first, cancelled error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if errors.Is(err, errCancelledBySibling) {
			if cancelled == nil {
				cancelled = err
			}
			continue
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return cancelled
}

// Stop sends SIGTERM to every child by PID, waits up to 10 s for each, then SIGKILLs what is left, and
// removes the pid files. It is safe to call more than once. The error reports children that had already
// exited on their own or could not be stopped.
func (s *Stack) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if s.pruneEnd != nil {
		close(s.pruneEnd)
		s.pruned.Wait()
	}
	errs := make([]error, len(s.children))
	var wg sync.WaitGroup
	for i, c := range s.children {
		wg.Go(func() { errs[i] = c.stop(s.log) })
	}
	wg.Wait()
	if s.forker != nil {
		s.forker.close()
	}
	if s.lock != nil {
		s.lock.Close() // releases the flock
	}
	return errors.Join(errs...)
}

// normalize applies defaults and makes Dir absolute.
func (o *Options) normalize() error {
	if o.Dir == "" {
		return errors.New("localstack: Options.Dir is empty")
	}
	if !o.ClickHouse && !o.Redis && !o.S3 && !o.Mail {
		return errors.New("localstack: no service selected (set Options.ClickHouse/Redis/S3, or start from DefaultOptions)")
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("localstack: %w", err)
	}
	o.Dir = abs
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.S3AccessKey == "" {
		o.S3AccessKey = DefaultS3AccessKey
	}
	if o.S3SecretKey == "" {
		o.S3SecretKey = DefaultS3SecretKey
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"ClickHousePort", o.ClickHousePort}, {"ClickHouseHTTPPort", o.ClickHouseHTTPPort}, {"RedisPort", o.RedisPort}, {"S3Port", o.S3Port},
		{"MailSMTPPort", o.MailSMTPPort}, {"MailWebPort", o.MailWebPort}} {
		if p.v < 0 || p.v > 65535 {
			return fmt.Errorf("localstack: Options.%s = %d is not a valid port", p.name, p.v)
		}
	}
	if err := o.normalizeRedisCluster(); err != nil {
		return err
	}
	return o.normalizeCluster()
}

func (o *Options) services() []string {
	var s []string
	if o.ClickHouseReplicas > 0 {
		s = append(s, ServiceZooKeeper)
		for i := 1; i <= o.ClickHouseReplicas; i++ {
			s = append(s, clickHouseService(i))
		}
	} else if o.ClickHouse {
		s = append(s, ServiceClickHouse)
	}
	if o.RedisCluster > 0 {
		for i := 1; i <= o.redisNodes(); i++ {
			s = append(s, RedisService(i))
		}
	} else if o.Redis {
		s = append(s, ServiceRedis)
	}
	if o.S3 {
		s = append(s, ServiceS3)
	}
	if o.Mail {
		s = append(s, ServiceMail)
	}
	return s
}

func (o *Options) pidFile(service string) string {
	return filepath.Join(o.Dir, "run", service+".pid")
}

func (o *Options) logFile(service string) string {
	return filepath.Join(o.Dir, "logs", service+".log")
}

func (o *Options) portRequests() []portRequest {
	var r []portRequest
	if o.ClickHouse {
		r = append(r,
			portRequest{"ClickHouse native", "ClickHousePort", &o.ClickHousePort},
			portRequest{"ClickHouse HTTP", "ClickHouseHTTPPort", &o.ClickHouseHTTPPort})
	}
	if o.Redis {
		r = append(r, portRequest{"Redis", "RedisPort", &o.RedisPort})
	}
	if o.S3 {
		r = append(r, portRequest{"S3", "S3Port", &o.S3Port})
	}
	if o.Mail {
		r = append(r, portRequest{"maildev SMTP", "MailSMTPPort", &o.MailSMTPPort}, portRequest{"maildev web", "MailWebPort", &o.MailWebPort})
	}
	r = append(r, o.redisClusterPortRequests()...)
	return append(r, o.clusterPortRequests()...)
}

// dialHost is the address clients use to reach a service listening on host.
func dialHost(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			return "127.0.0.1"
		}
		return "::1"
	}
	return host
}
