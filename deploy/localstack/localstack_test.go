package localstack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/smtp"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireBinaries skips the test when the stack's programs are not installed, unless
// ENDCAP_TEST_REQUIRE_STACK=1 (CI), where that is a failure.
func requireBinaries(t *testing.T, o Options) {
	t.Helper()
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := findBinaries(o); err != nil {
		if os.Getenv("ENDCAP_TEST_REQUIRE_STACK") == "1" {
			t.Fatalf("ENDCAP_TEST_REQUIRE_STACK=1 but %v", err)
		}
		t.Skipf("skipping: %v (install with deploy/local/install.sh; set ENDCAP_TEST_REQUIRE_STACK=1 to fail instead)", err)
	}
}

func testOptions(t *testing.T, dir string) Options {
	o := DefaultOptions(dir)
	o.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	return o
}

func startStack(t *testing.T, o Options) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	s, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("Start returned after %s: clickhouse native=%s http=%s redis=%s s3=%s pids=%v",
		time.Since(t0).Round(time.Millisecond), s.ClickHouseAddr, s.ClickHouseHTTPAddr, s.RedisAddr, s.S3Endpoint, s.PIDs())
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func TestStack(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir)
	requireBinaries(t, o)

	s := startStack(t, o)

	// ClickHouse: HTTP query, a LowCardinality column (needs the users.xml profile), native port open.
	if got := chQuery(t, s, "SELECT 1"); got != "1\n" {
		t.Fatalf("SELECT 1 = %q", got)
	}
	t.Logf("clickhouse version %s", strings.TrimSpace(chQuery(t, s, "SELECT version()")))
	chQuery(t, s, "CREATE TABLE lc_probe (d Date, s LowCardinality(String)) ENGINE = MergeTree PARTITION BY d ORDER BY s")
	chQuery(t, s, "INSERT INTO lc_probe SELECT today(), toString(number % 3) FROM system.numbers LIMIT 10")
	if got := chQuery(t, s, "SELECT toTypeName(s), count() FROM lc_probe GROUP BY toTypeName(s)"); got != "LowCardinality(String)\t10\n" {
		t.Fatalf("LowCardinality probe: %q", got)
	}
	// Without Options.ClickHouseSystemLogs, no query or part log is kept.
	chQuery(t, s, "SYSTEM FLUSH LOGS")
	if got := chQuery(t, s, "SELECT count() FROM system.tables WHERE database = 'system' AND name IN ('query_log', 'part_log', 'query_thread_log')"); got != "0\n" {
		t.Fatalf("system logs without ClickHouseSystemLogs: %q tables", got)
	}
	if c, err := net.DialTimeout("tcp", s.ClickHouseAddr, 2*time.Second); err != nil {
		t.Fatalf("native port: %v", err)
	} else {
		c.Close()
	}

	// A second stack on the same Dir is refused while this one runs.
	if s2, err := Start(context.Background(), o); err == nil {
		_ = s2.Stop()
		t.Fatal("second Start on the same Dir succeeded")
	} else if !strings.Contains(err.Error(), "in use by another running stack (process "+strconv.Itoa(os.Getpid())+")") {
		t.Fatalf("second Start on the same Dir: %v", err)
	}

	// Redis.
	if got := redis(t, s, "PING"); got != "PONG" {
		t.Fatalf("PING = %q", got)
	}
	if got := redis(t, s, "SET", "endcap:persist", "survives-restart"); got != "OK" {
		t.Fatalf("SET = %q", got)
	}

	// S3: unsigned and wrongly signed requests are refused; correctly signed ones work.
	resp, body := s3Do(t, s, http.MethodGet, "/", nil, "")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "AccessDenied") {
		t.Fatalf("unsigned ListBuckets: %s %s", resp.Status, body)
	}
	resp, body = s3Do(t, s, http.MethodGet, "/", nil, s.S3SecretKey+"-wrong")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Fatalf("ListBuckets with wrong secret: %s %s", resp.Status, body)
	}
	if resp, body = s3Do(t, s, http.MethodPut, "/endcap-test", nil, s.S3SecretKey); resp.StatusCode != http.StatusOK {
		t.Fatalf("CreateBucket: %s %s", resp.Status, body)
	}
	if resp, body = s3Do(t, s, http.MethodPut, "/endcap-test/a/b.txt", []byte("hello"), s.S3SecretKey); resp.StatusCode != http.StatusOK {
		t.Fatalf("PutObject: %s %s", resp.Status, body)
	}
	if resp, body = s3Do(t, s, http.MethodGet, "/endcap-test/a/b.txt", nil, ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unsigned GetObject on an existing object: %s %s", resp.Status, body)
	}

	// Stop: every child gone, pid files removed.
	pids := s.PIDs()
	if len(pids) != 3 {
		t.Fatalf("PIDs = %v", pids)
	}
	t0 := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %s", time.Since(t0).Round(time.Millisecond))
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s pid %d still exists after Stop (kill 0: %v)", name, pid, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "run", name+".pid")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s pid file still there (%v)", name, err)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	// Restart on the same Dir: data of all three survived.
	s = startStack(t, o)
	if got := redis(t, s, "GET", "endcap:persist"); got != "survives-restart" {
		t.Fatalf("GET after restart = %q", got)
	}
	if got := chQuery(t, s, "SELECT count() FROM lc_probe"); got != "10\n" {
		t.Fatalf("ClickHouse rows after restart: %q", got)
	}
	if resp, body = s3Do(t, s, http.MethodGet, "/endcap-test/a/b.txt", nil, s.S3SecretKey); resp.StatusCode != http.StatusOK || body != "hello" {
		t.Fatalf("GetObject after restart: %s %q", resp.Status, body)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// TestClickHouseSystemLogs: with ClickHouseSystemLogs the server records an
// insert in system.query_log and the part it wrote in system.part_log.
func TestClickHouseSystemLogs(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.Redis, o.S3 = false, false
	o.ClickHouseSystemLogs = true
	requireBinaries(t, o)
	s := startStack(t, o)

	chQuery(t, s, "CREATE TABLE logged (n UInt64) ENGINE = MergeTree ORDER BY n")
	chQuery(t, s, "INSERT INTO logged SELECT number FROM system.numbers LIMIT 1000")
	// The insert's query_log row is queued as the query ends, which can be
	// after its answer has reached the client: flush and read again until
	// both rows are there, for at most 10 s.
	var part, query string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		chQuery(t, s, "SYSTEM FLUSH LOGS")
		part = chQuery(t, s, "SELECT event_type, rows FROM system.part_log WHERE table = 'logged'")
		query = chQuery(t, s, "SELECT written_rows FROM system.query_log WHERE type = 2 AND query LIKE 'INSERT INTO logged%'")
		if (part != "" && query != "") || time.Now().After(deadline) {
			break
		}
	}
	if part != "NewPart\t1000\n" && part != "NEW_PART\t1000\n" {
		t.Errorf("part_log: %q, want the insert's one new part of 1000 rows", part)
	}
	if query != "1000\n" {
		t.Errorf("query_log: %q, want the insert, finished, with 1000 rows written", query)
	}
	// Partitioned by day; the days older than ClickHouseSystemLogDays are dropped, today's kept.
	today := time.Now().UTC().Format("20060102")
	if got := chQuery(t, s, "SELECT DISTINCT table, partition_id FROM system.parts WHERE database = 'system' AND active ORDER BY table"); got != "part_log\t"+today+"\nquery_log\t"+today+"\n" {
		t.Errorf("system logs' partitions: %q, want today's of part_log and query_log", got)
	}
	chQuery(t, s, "INSERT INTO system.query_log (event_date, event_time) SELECT toDate('2020-01-01'), toDateTime('2020-01-01 00:00:00')")
	chQuery(t, s, "INSERT INTO system.part_log (event_date, event_time) SELECT today() - 4, now() - 4 * 86400")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	dropped, err := pruneSystemLogs(ctx, s.ClickHouseHTTPAddr, time.Now(), 3)
	if want := "[part_log." + time.Now().UTC().AddDate(0, 0, -4).Format("20060102") + " query_log.20200101]"; err != nil || fmt.Sprint(dropped) != want {
		t.Errorf("pruned %v (%v), want %s", dropped, err, want)
	}
	if got := chQuery(t, s, "SELECT DISTINCT table, partition_id FROM system.parts WHERE database = 'system' AND active ORDER BY table"); got != "part_log\t"+today+"\nquery_log\t"+today+"\n" {
		t.Errorf("system logs' partitions after pruning: %q, want today's", got)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestStaleChildIsStoppedAndStrangerIsNot(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir)
	o.ClickHouse, o.S3 = false, false
	requireBinaries(t, o)

	for _, d := range []string{"run", "redis"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(dir, "redis", "stale-marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// deathsig: the process dies with the test's process. Linux delivers it when
	// the OS thread that started the process exits, so it is started by a
	// forker, whose thread lives until the test ends (started from any
	// goroutine, it once died in the middle of the test, under -race and
	// load). The stranger, which must outlive the stack, goes without it and
	// ends on its own (sleep) if the test dies.
	f := newForker()
	t.Cleanup(f.close)
	spawn := func(name string, deathsig bool, args ...string) (*exec.Cmd, chan struct{}) {
		cmd := exec.Command(name, args...)
		start := cmd.Start
		if deathsig {
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			start = func() error { return f.start(cmd) }
		}
		if err := start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		return cmd, done
	}

	// A process whose command line references Dir, as a child of a crashed run would.
	stale, staleDone := spawn("tail", true, "-f", "/dev/null", marker)
	writePid(t, filepath.Join(dir, "run", "redis.pid"), stale.Process.Pid)
	s := startStack(t, o)
	select {
	case <-staleDone:
	case <-time.After(5 * time.Second):
		t.Fatalf("stale process %d was not stopped", stale.Process.Pid)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	// A process that has nothing to do with Dir is left alone, even if a pid file names it.
	stranger, strangerDone := spawn("sleep", false, "300")
	writePid(t, filepath.Join(dir, "run", "redis.pid"), stranger.Process.Pid)
	s = startStack(t, o)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-strangerDone:
		t.Fatalf("unrelated process %d was killed", stranger.Process.Pid)
	default:
	}
}

func TestFixedPortInUse(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.ClickHouse, o.S3 = false, false
	requireBinaries(t, o)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	o.RedisPort = port
	s, err := Start(context.Background(), o)
	if err == nil {
		_ = s.Stop()
		t.Fatal("Start succeeded on a port in use")
	}
	if !strings.Contains(err.Error(), strconv.Itoa(port)) || !strings.Contains(err.Error(), "Options.RedisPort") {
		t.Fatalf("error does not name the port and the setting: %v", err)
	}
	t.Logf("error: %v", err)
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if modulePathOf(filepath.Join(root, "go.mod")) != ModulePath {
		t.Fatalf("RepoRoot = %s", root)
	}
}

func TestReferencesDir(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"clickhouse-server", "--config-file=/x/d/clickhouse/config.xml"}, true},
		{[]string{"redis-server", "--dir", "/x/d/redis"}, true},
		{[]string{"versitygw", "posix", "/x/d"}, true},
		{[]string{"versitygw", "posix", "/x/dd/s3/data"}, false},
		{[]string{"redis-server", "127.0.0.1:6379"}, false},
	} {
		if got := referencesDir(tc.args, "/x/d"); got != tc.want {
			t.Errorf("referencesDir(%q) = %v", tc.args, got)
		}
	}
}

func writePid(t *testing.T, path string, pid int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func chQuery(t *testing.T, s *Stack, q string) string {
	t.Helper()
	resp, err := http.Post("http://"+s.ClickHouseHTTPAddr+"/", "text/plain", strings.NewReader(q))
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s %s", q, resp.Status, b)
	}
	return string(b)
}

func redis(t *testing.T, s *Stack, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := respDo(ctx, s.RedisAddr, args...)
	if err != nil {
		t.Fatalf("redis %v: %v", args, err)
	}
	return r
}

// s3Do sends a path-style request, signed with AWS Signature V4 when secret is not empty.
func s3Do(t *testing.T, s *Stack, method, path string, body []byte, secret string) (*http.Response, string) {
	t.Helper()
	u, err := url.Parse(s.S3Endpoint + path)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, u.String(), strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		signV4(req, body, s.S3AccessKey, secret, s.S3Region, time.Now().UTC())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// signV4 signs a request without query parameters for service s3.
func signV4(req *http.Request, body []byte, accessKey, secret, region string, now time.Time) {
	amzDate := now.Format("20060102T150405Z")
	date := now.Format("20060102")
	payloadHash := sha256Hex(body)
	req.Header.Set("x-amz-date", amzDate)
	req.Header.Set("x-amz-content-sha256", payloadHash)
	canonicalHeaders := fmt.Sprintf("host:%s\nx-amz-content-sha256:%s\nx-amz-date:%s\n", req.URL.Host, payloadHash, amzDate)
	signedHeaders := "host;x-amz-content-sha256;x-amz-date"
	canonicalRequest := strings.Join([]string{req.Method, req.URL.EscapedPath(), "", canonicalHeaders, signedHeaders, payloadHash}, "\n")
	scope := date + "/" + region + "/s3/aws4_request"
	stringToSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + sha256Hex([]byte(canonicalRequest))
	key := hmacSHA256([]byte("AWS4"+secret), date)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, stringToSign))
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s", accessKey, scope, signedHeaders, sig))
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// TestProcessCPU: a process's CPU time grows while it computes, and a pid that
// does not exist is reported as such.
func TestProcessCPU(t *testing.T) {
	before, ok := ProcessCPU(os.Getpid())
	if !ok {
		t.Fatal("ProcessCPU of this process: not ok")
	}
	// Compute until the process has 100 ms more CPU time, within 10 s of
	// wall time: on a busy machine 300 ms of wall time gave it 80 ms.
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	var after time.Duration
	for time.Now().Before(deadline) {
		for range 1_000_000 {
			x++
		}
		if after, ok = ProcessCPU(os.Getpid()); !ok || after-before >= 100*time.Millisecond {
			break
		}
	}
	if !ok || after-before < 100*time.Millisecond {
		t.Errorf("after 10 s of computing (%d loops): %v → %v (ok %v), want at least 100 ms more", x, before, after, ok)
	}
	if _, ok := ProcessCPU(1 << 30); ok {
		t.Error("a pid that does not exist: ok")
	}
}

// TestMail: maildev alone takes a message over SMTP and lists it in its REST API; Stop ends it.
func TestMail(t *testing.T) {
	o := Options{Dir: t.TempDir(), Mail: true}
	requireBinaries(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	if st.MailSMTPAddr == "" || st.MailWebURL == "" || st.RedisAddr != "" {
		t.Fatalf("addresses: %+v", st)
	}
	if err := smtp.SendMail(st.MailSMTPAddr, nil, "from@test.example", []string{"to@test.example"},
		[]byte("To: to@test.example\r\nSubject: hello\r\n\r\nthe body\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(st.MailWebURL + "/api/email")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"subject":"hello"`) || !strings.Contains(string(body), "to@test.example") {
		t.Fatalf("inbox: %d %s", resp.StatusCode, body)
	}
	pid := st.PIDs()[ServiceMail]
	if err := st.Stop(); err != nil {
		t.Fatal(err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("maildev (pid %d) still runs after Stop", pid)
	}
}
