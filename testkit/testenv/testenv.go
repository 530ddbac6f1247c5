// Package testenv starts the real servers integration tests run against:
// ClickHouse, Redis and the S3 server (deploy/localstack, on free ports in a
// temporary directory) and an in-process kfake cluster. With
// ENDCAP_TEST_REUSE_STACK=1 it uses the servers of a running `make run`
// instead (addresses from the ENDCAP_* variables or their defaults) and
// isolates each test by database, topic prefix and key prefix.
//
// When the servers are not installed, tests skip, unless
// ENDCAP_TEST_REQUIRE_STACK=1 (as `make test` sets), which makes them fail.
//
// With ENDCAP_TEST_REDIS_CLUSTER=1, the shared Redis is a Redis Cluster of
// three masters and three replicas (deploy/localstack, Options.RedisCluster),
// and every Config and Redis client of the tests uses it in cluster mode.
//
// With ENDCAP_TEST_CHDB=1, every statement a test sends to the database of
// its Config is replayed on ClickHouse 26 (chDB) when the test ends, and one
// that 26 refuses fails the test (testkit/chdb.CheckTest).
package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/internal/config"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/chdb"
)

// Env is the set of running servers of one test binary.
type Env struct {
	ClickHouseAddr string
	// ClickHouseHTTPAddr is the same server's HTTP interface (host:port).
	ClickHouseHTTPAddr string
	// RedisAddr is the shared Redis: one address, or with RedisCluster the
	// cluster's nodes separated by commas (what ENDCAP_REDIS_ADDR takes).
	RedisAddr    string
	RedisCluster bool
	S3Endpoint   string
	S3AccessKey  string
	S3SecretKey  string

	stack *localstack.Stack
	dir   string
}

var (
	once    sync.Once
	shared  *Env
	initErr error
)

// Main runs a package's tests with the shared servers, and stops them after.
// Use it from TestMain: `func TestMain(m *testing.M) { testenv.Main(m) }`.
//
// After the tests it fails the run when goroutines that the tests started
// are still running (go.uber.org/goleak): a consumer, a producer, a server
// or a background loop a test did not stop. The connection pools of the
// database clients, which close idle connections on their own schedule,
// are not counted.
func Main(m *testing.M) {
	code := m.Run()
	chdb.CloseShared()
	if shared != nil && shared.stack != nil {
		_ = shared.stack.Stop()
		_ = os.RemoveAll(shared.dir)
	}
	if code == 0 {
		if err := goleak.Find(leakOptions...); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left running after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakOptions are the goroutines goleak does not count: the pools of the
// database and HTTP clients and the runtime's own.
var leakOptions = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/ClickHouse/clickhouse-go/v2.(*clickhouse).startAutoCloseIdleConnections"),
}

func start() (*Env, error) {
	if os.Getenv("ENDCAP_TEST_REUSE_STACK") == "1" {
		d := config.Default()
		fs := func(env, def string) string {
			if v := os.Getenv(env); v != "" {
				return v
			}
			return def
		}
		return &Env{
			ClickHouseAddr:     fs("ENDCAP_CLICKHOUSE_ADDR", d.ClickHouseAddr),
			ClickHouseHTTPAddr: strings.TrimPrefix(fs("ENDCAP_CLICKHOUSE_HTTP_URL", d.ClickHouseHTTPURL), "http://"),
			RedisAddr:          fs("ENDCAP_REDIS_ADDR", d.RedisAddr),
			RedisCluster:       os.Getenv("ENDCAP_REDIS_CLUSTER") == "true",
			S3Endpoint:         fs("ENDCAP_S3_ENDPOINT", d.S3Endpoint),
			S3AccessKey:        fs("ENDCAP_S3_ACCESS_KEY", localstack.DefaultS3AccessKey),
			S3SecretKey:        fs("ENDCAP_S3_SECRET_KEY", localstack.DefaultS3SecretKey),
		}, nil
	}
	dir, err := os.MkdirTemp("", "endcap-test-stack-")
	if err != nil {
		return nil, err
	}
	opts := localstack.DefaultOptions(dir)
	if RedisClusterMode() {
		opts.RedisCluster, opts.RedisReplicas = 3, 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st, err := localstack.Start(ctx, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &Env{
		ClickHouseAddr:     st.ClickHouseAddr,
		ClickHouseHTTPAddr: st.ClickHouseHTTPAddr,
		RedisAddr:          strings.Join(st.RedisAddrs, ","),
		RedisCluster:       opts.RedisCluster > 0,
		S3Endpoint:         st.S3Endpoint,
		S3AccessKey:        st.S3AccessKey,
		S3SecretKey:        st.S3SecretKey,
		stack:              st,
		dir:                dir,
	}, nil
}

// Get returns the shared servers, starting them on first use. It skips the
// test when they are not installed and the stack is not required.
func Get(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs ClickHouse, Redis and the S3 server (not in -short)")
	}
	once.Do(func() { shared, initErr = start() })
	if initErr != nil {
		if errors.Is(initErr, localstack.ErrMissingBinary) && os.Getenv("ENDCAP_TEST_REQUIRE_STACK") != "1" {
			t.Skipf("local stack not installed (run deploy/local/install.sh): %v", initErr)
		}
		t.Fatalf("start test stack: %v", initErr)
	}
	return shared
}

// RedisClusterMode says whether the tests run on a Redis Cluster
// (ENDCAP_TEST_REDIS_CLUSTER=1).
func RedisClusterMode() bool { return os.Getenv("ENDCAP_TEST_REDIS_CLUSTER") == "1" }

// Redis returns a client of the shared Redis (a cluster client on a
// cluster), closed when the test ends.
func (e *Env) Redis(t testing.TB) redis.UniversalClient {
	t.Helper()
	rdb := redisstore.Open(redisstore.Options{Addr: e.RedisAddr, Cluster: e.RedisCluster})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Keys lists the keys matching pattern (KEYS) on every master of rdb, for
// tests that look at what was written.
func Keys(t testing.TB, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	var mu sync.Mutex
	var out []string
	err := redisstore.ForEachMaster(context.Background(), rdb, func(ctx context.Context, m *redis.Client) error {
		ks, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		out = append(out, ks...)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ServerCPU returns the CPU time (user and system) a server of the stack has
// used so far, for benchmarks that measure the server's work rather than the
// client's: service is localstack.ServiceClickHouse or ServiceRedis. ok is
// false when the servers are not this binary's children (a reused stack) or
// /proc cannot be read.
func (e *Env) ServerCPU(service string) (cpu time.Duration, ok bool) {
	if e.stack == nil {
		return 0, false
	}
	pid, found := e.stack.PIDs()[service]
	if !found {
		return 0, false
	}
	return localstack.ProcessCPU(pid)
}

// Kafka starts an in-process kfake cluster for one test and returns its
// bootstrap address. The cluster stops when the test ends.
func Kafka(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, []string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

// HangProduce makes the broker hold every produce request, as a frozen
// broker does (the connection stays open, no answer comes), until the
// returned function is called (or the test ends); the held requests are
// then processed.
func HangProduce(t testing.TB, c *kfake.Cluster) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case <-gate:
			c.DropControl()
		default:
			c.SleepControl(func() { <-gate })
		}
		return nil, nil, false
	})
	t.Cleanup(release)
	return release
}

// Config returns a configuration for one test: these servers, the given
// brokers, and a database, topic prefix and bucket of its own.
func (e *Env) Config(t testing.TB, brokers []string) config.Config {
	t.Helper()
	id := strings.ReplaceAll(uuid.NewString()[:13], "-", "")
	c := config.Default()
	c.HTTPAddr = "127.0.0.1:0"
	c.KafkaBrokers = brokers
	c.KafkaTopicPrefix = "t" + id + "."
	c.KafkaEventsPartitions = 3
	c.ClickHouseAddr = e.ClickHouseAddr
	c.ClickHouseHTTPURL = "http://" + e.ClickHouseHTTPAddr
	c.ClickHouseDatabase = "endcap_test_" + id
	chdb.CheckTest(t, c.ClickHouseDatabase)
	c.RedisAddr = e.RedisAddr
	c.RedisCluster = e.RedisCluster
	c.S3Endpoint = e.S3Endpoint
	c.S3AccessKey = e.S3AccessKey
	c.S3SecretKey = e.S3SecretKey
	c.S3Bucket = "endcap-test-" + id
	c.ProjectorFlushInterval = 200 * time.Millisecond
	c.ShutdownTimeout = 5 * time.Second
	// The signing keys of the test's own, from the configuration: none is
	// kept in Redis (which ENDCAP_TEST_REUSE_STACK shares with `make run`),
	// and no master key is needed. Tests of the keys kept in Redis use a
	// Redis of their own (OwnRedis).
	c.BidSigningKeys = "1:" + randomKey()
	c.CursorSecret = randomKey()
	// The invalid-click rules off: the tests of other features send clicks
	// without impressions, and many from one shopper at once. The tests of
	// the rules, and those through the whole process that keep them, set
	// them again (InvalidClicksDefault).
	c.InvalidClickRequireImpression, c.InvalidClickMinDelay, c.InvalidClickRepeatWindow, c.InvalidClickMaxPerHour = false, 0, 0, 0
	return c
}

func randomKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// InvalidClicksDefault turns the invalid-click rules of c back to their
// defaults (Config turns them off).
func InvalidClicksDefault(c *config.Config) {
	d := config.Default()
	c.InvalidClickRequireImpression, c.InvalidClickMinDelay = d.InvalidClickRequireImpression, d.InvalidClickMinDelay
	c.InvalidClickRepeatWindow, c.InvalidClickMaxPerHour = d.InvalidClickRepeatWindow, d.InvalidClickMaxPerHour
}

// Logger returns a logger that writes to the test log when -v, else discards.
func Logger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Eventually retries fn until it returns nil or the timeout passes.
func Eventually(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = fn(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("not true within %s: %v", timeout, err)
}

// Errorf is fmt.Errorf, for Eventually bodies.
var Errorf = fmt.Errorf

// PrivateRedis is a redis-server of one test's own, which the test may
// freeze (Freeze: SIGSTOP) and thaw (SIGCONT) without disturbing the shared
// servers.
type PrivateRedis struct {
	Addr  string
	PID   int
	stack *localstack.Stack
}

// OwnRedis starts a redis-server for one test on a free port; it is thawed
// and stopped when the test ends. It skips or fails like Get when Redis is
// not installed.
func OwnRedis(t testing.TB) *PrivateRedis {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs redis-server (not in -short)")
	}
	opts := localstack.Options{Dir: t.TempDir(), Host: localstack.DefaultHost, Redis: true}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := localstack.Start(ctx, opts)
	if err != nil {
		if errors.Is(err, localstack.ErrMissingBinary) && os.Getenv("ENDCAP_TEST_REQUIRE_STACK") != "1" {
			t.Skipf("redis-server not installed (run deploy/local/install.sh): %v", err)
		}
		t.Fatalf("start redis-server: %v", err)
	}
	r := &PrivateRedis{Addr: st.RedisAddr, PID: st.PIDs()[localstack.ServiceRedis], stack: st}
	t.Cleanup(func() {
		r.Thaw()
		_ = st.Stop()
	})
	return r
}

// Freeze stops the server's process (SIGSTOP): it keeps its connections and
// accepts new ones, and answers nothing, as a hung server does.
func (r *PrivateRedis) Freeze() error { return freeze(r.PID) }

// Thaw resumes a frozen server (SIGCONT).
func (r *PrivateRedis) Thaw() { _ = syscall.Kill(r.PID, syscall.SIGCONT) }

// PrivateS3 is an S3 server (versitygw, which checks signatures) of one
// test's own, which the test may freeze and thaw like a PrivateRedis.
type PrivateS3 struct {
	Endpoint, Region, AccessKey, SecretKey string
	PID                                    int
	stack                                  *localstack.Stack
}

// OwnS3 starts an S3 server for one test on a free port; it is thawed and
// stopped when the test ends. It skips or fails like Get when versitygw is
// not installed.
func OwnS3(t testing.TB) *PrivateS3 {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs versitygw (not in -short)")
	}
	opts := localstack.Options{Dir: t.TempDir(), Host: localstack.DefaultHost, S3: true}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := localstack.Start(ctx, opts)
	if err != nil {
		if errors.Is(err, localstack.ErrMissingBinary) && os.Getenv("ENDCAP_TEST_REQUIRE_STACK") != "1" {
			t.Skipf("versitygw not installed (run deploy/local/install.sh): %v", err)
		}
		t.Fatalf("start versitygw: %v", err)
	}
	s := &PrivateS3{Endpoint: st.S3Endpoint, Region: st.S3Region, AccessKey: st.S3AccessKey, SecretKey: st.S3SecretKey,
		PID: st.PIDs()[localstack.ServiceS3], stack: st}
	t.Cleanup(func() {
		s.Thaw()
		_ = st.Stop()
	})
	return s
}

// Freeze stops the server's process (SIGSTOP): connections open and are
// accepted by the kernel, and nothing answers, as a hung store does.
func (s *PrivateS3) Freeze() error { return freeze(s.PID) }

// freeze stops process pid (SIGSTOP) and returns once the kernel says it is
// stopped: kill returns when the signal is queued, and a process running on
// another core may answer one more request before it takes it (a frozen S3
// server once answered a HEAD 10 ms after its SIGSTOP was sent).
func freeze(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return nil // no /proc (not Linux): the signal is all there is
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: process %d not stopped 5 s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// Thaw resumes a frozen server (SIGCONT).
func (s *PrivateS3) Thaw() { _ = syscall.Kill(s.PID, syscall.SIGCONT) }

// OwnClickHouseCluster starts, for one test, a replicated ClickHouse: a
// ZooKeeper and one shard of n replicas, cluster
// localstack.DefaultClickHouseCluster (deploy/localstack,
// Options.ClickHouseReplicas), on free ports; it is stopped when the test
// ends. It skips or fails like Get when the programs are not installed.
func OwnClickHouseCluster(t testing.TB, n int) *localstack.Stack {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs ZooKeeper and clickhouse-server (not in -short)")
	}
	opts := localstack.Options{Dir: t.TempDir(), Host: localstack.DefaultHost, ClickHouse: true, ClickHouseReplicas: n}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	st, err := localstack.Start(ctx, opts)
	if err != nil {
		if errors.Is(err, localstack.ErrMissingBinary) && os.Getenv("ENDCAP_TEST_REQUIRE_STACK") != "1" {
			t.Skipf("ZooKeeper or clickhouse-server not installed (run deploy/local/install.sh): %v", err)
		}
		t.Fatalf("start a replicated ClickHouse: %v", err)
	}
	t.Logf("ZooKeeper and %d ClickHouse replicas started in %s", n, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { _ = st.Stop() })
	return st
}

// Tool returns the path of the command name (promtool, prometheus: installed
// by deploy/local/install.sh --test). When it is missing the test is
// skipped, unless ENDCAP_TEST_REQUIRE_STACK=1, which fails it.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("ENDCAP_TEST_REQUIRE_STACK") != "1" {
			t.Skipf("%s is not installed (deploy/local/install.sh --test): %v", name, err)
		}
		t.Fatalf("%s is not installed (deploy/local/install.sh --test installs it): %v", name, err)
	}
	return p
}
