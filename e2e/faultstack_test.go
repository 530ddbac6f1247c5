package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/endcap/endcap/deploy/localstack"
	"github.com/endcap/endcap/internal/masterkey"
	"github.com/endcap/endcap/projections"
	"github.com/endcap/endcap/spend"
	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/storage/kafka"
	"github.com/endcap/endcap/storage/redisstore"
	"github.com/endcap/endcap/testkit/testenv"
)

// faultStack runs Endcap the way production does, as separate processes,
// so that a test can pause, kill and restart each of them: ClickHouse, Redis
// and the S3 server (deploy/localstack, children of the test), the broker
// (`endcap kafka`, kfake in a process of its own) and any number of
// `endcap serve --target=…` processes, all on free ports in a directory of
// the test's own.
//
// ENDCAP_FAULT_BINARY runs the suite against another build of endcap (an
// older commit, say) instead of building this tree's.
type faultStack struct {
	t     *testing.T
	bin   string
	dir   string
	st    *localstack.Stack
	kport int
	kafka *osProc
	env   []string // the ENDCAP_* settings every serve process gets

	admin *kgo.Client // the test's own Kafka client (offsets, lag)
	ch    clickhouse.Conn
	procs []*osProc // every process started, for the diagnostics of a failure
}

// osProc is one process of the stack.
type osProc struct {
	name string
	args []string
	env  []string
	port int // its HTTP port (serve)
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func newFaultStack(t *testing.T) *faultStack { return newFaultStackWith(t, nil) }

// newFaultStackWith is newFaultStack with the local stack's options changed
// by opts (nil: the defaults).
func newFaultStackWith(t *testing.T, opts func(*localstack.Options)) *faultStack {
	t.Helper()
	testenv.Get(t) // skips or fails like the other integration tests when the stack is not installed
	bin := os.Getenv("ENDCAP_FAULT_BINARY")
	if bin == "" {
		bin = buildBinary(t)
	}
	s := &faultStack{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.keepLogsOnFailure)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	o := localstack.DefaultOptions(filepath.Join(s.dir, "stack"))
	if opts != nil {
		opts(&o)
	}
	st, err := localstack.Start(ctx, o)
	if err != nil {
		t.Fatalf("local stack: %v", err)
	}
	s.st = st
	t.Cleanup(func() { _ = st.Stop() })
	s.kport = freePorts(t, 1)[0]
	s.kafka = s.start("kafka", []string{"kafka", "--dir", s.dir, "--kafka-brokers", s.brokers()}, nil)
	s.waitPort(s.kport, 30*time.Second)
	s.env = []string{
		"ENDCAP_KAFKA_BROKERS=" + s.brokers(),
		"ENDCAP_CLICKHOUSE_ADDR=" + st.ClickHouseAddr,
		"ENDCAP_CLICKHOUSE_DATABASE=endcap",
		"ENDCAP_REDIS_ADDR=" + st.RedisAddr,
		"ENDCAP_S3_ENDPOINT=" + st.S3Endpoint,
		"ENDCAP_S3_ACCESS_KEY=" + st.S3AccessKey,
		"ENDCAP_S3_SECRET_KEY=" + st.S3SecretKey,
		"ENDCAP_S3_REQUEST_TIMEOUT=2s",
		"ENDCAP_S3_PART_TIMEOUT=5s",
		"ENDCAP_PROJECTOR_FLUSH_INTERVAL=200ms",
		"ENDCAP_BUDGET_REFRESH=200ms",
		"ENDCAP_RATE_LIMIT_DEFAULT=5000/1s",
		"ENDCAP_RATE_LIMIT_CATALOG=5000/1s",
		"ENDCAP_LOG_LEVEL=info",
		"ENDCAP_SECRET_KEY=" + masterkey.Generate(),
		// The invalid-click rules off, as in testenv.Config: the load's
		// clicks come without impressions, many from one shopper at once.
		"ENDCAP_INVALID_CLICK_REQUIRE_IMPRESSION=false",
		"ENDCAP_INVALID_CLICK_MIN_DELAY=0",
		"ENDCAP_INVALID_CLICK_REPEAT_WINDOW=0",
		"ENDCAP_INVALID_CLICK_MAX_PER_HOUR=0",
	}
	if s.admin, err = kafka.NewClient([]string{s.brokers()}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.admin.Close)
	if s.ch, err = clickhouse.Open(clickhouse.Options{Addr: st.ClickHouseAddr, Database: "endcap", User: "default"}); err != nil {
		t.Fatal(err)
	}
	ch := s.ch // a test may point s.ch at another server: this one is closed still
	t.Cleanup(func() { _ = ch.Close() })
	return s
}

func (s *faultStack) brokers() string { return fmt.Sprintf("127.0.0.1:%d", s.kport) }

// start runs the binary with args and extra environment, logging to a file
// of the test's directory; it is stopped (SIGTERM, then SIGKILL) at the
// test's end.
func (s *faultStack) start(name string, args, env []string) *osProc {
	s.t.Helper()
	p := &osProc{name: name, args: args, env: env}
	s.run(p)
	s.procs = append(s.procs, p)
	s.t.Cleanup(func() { p.stop(s.t) })
	return p
}

func (s *faultStack) run(p *osProc) {
	s.t.Helper()
	p.log = filepath.Join(s.dir, fmt.Sprintf("%s-%d.log", p.name, time.Now().UnixNano()))
	f, err := os.Create(p.log)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, p.args...)
	cmd.Env = append(devEnv(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
}

// serve starts `endcap serve --target=target` on a free port and waits
// until it answers /livez. env comes after the stack's settings (it may
// override them).
func (s *faultStack) serve(name, target string, env ...string) *osProc {
	s.t.Helper()
	port := freePorts(s.t, 1)[0]
	// A projector keeps its claim store in the test's directory, under its
	// name: a restart finds it again.
	own := []string{fmt.Sprintf("ENDCAP_HTTP_ADDR=127.0.0.1:%d", port), "ENDCAP_PROJECTOR_STATE_DIR=" + filepath.Join(s.dir, name+"-state")}
	p := s.start(name, []string{"serve", "--target", target}, append(append(slicesClone(s.env), own...), env...))
	p.port = port
	s.waitLive(p, 60*time.Second)
	return p
}

func slicesClone(a []string) []string { return append([]string(nil), a...) }

// restart starts p again with the same arguments, port and environment
// (after it exited).
func (s *faultStack) restart(p *osProc) {
	s.t.Helper()
	select {
	case <-p.done:
	default:
		s.t.Fatalf("%s is still running", p.name)
	}
	if p.port != 0 {
		s.waitPortFree(p.port, 15*time.Second)
	} else if p == s.kafka {
		s.waitPortFree(s.kport, 15*time.Second)
	}
	s.run(p)
	if p.port != 0 {
		s.waitLive(p, 60*time.Second)
	}
}

func (s *faultStack) waitLive(p *osProc, d time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		select {
		case <-p.done:
			s.t.Fatalf("%s exited early:\n%s", p.name, tail(p.log, 40))
		default:
		}
		if st, _, _ := p.get("/livez", time.Second); st == 200 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s not live within %s:\n%s", p.name, d, tail(p.log, 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReady waits until p answers /readyz 200.
func (s *faultStack) waitReady(p *osProc, d time.Duration) {
	s.t.Helper()
	testenv.Eventually(s.t, d, func() error {
		if st, b, err := p.get("/readyz", 2*time.Second); st != 200 {
			return fmt.Errorf("%s /readyz: %d %s %v", p.name, st, b, err)
		}
		return nil
	})
}

func (s *faultStack) waitPort(port int, d time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("port %d not open within %s", port, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *faultStack) waitPortFree(port int, d time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			ln.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("port %d still in use after %s", port, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cli runs `endcap <args>` with the stack's settings and returns its
// standard output.
func (s *faultStack) cli(args ...string) []byte {
	s.t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(devEnv(), s.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("endcap %s: %v\n%s%s", strings.Join(args, " "), err, out.Bytes(), errb.Bytes())
	}
	return out.Bytes()
}

// pid is the process id of a service of the local stack (ClickHouse, Redis).
func (s *faultStack) pid(service string) int {
	s.t.Helper()
	pid, ok := s.st.PIDs()[service]
	if !ok || pid == 0 {
		s.t.Fatalf("no pid for %s: %v", service, s.st.PIDs())
	}
	return pid
}

// pause stops a process (SIGSTOP) until the returned function resumes it
// (SIGCONT); the test's end resumes it too.
func (s *faultStack) pause(pid int) (resume func()) {
	s.t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		s.t.Fatal(err)
	}
	var once sync.Once
	resume = func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	s.t.Cleanup(resume)
	return resume
}

func (p *osProc) pid() int { return p.cmd.Process.Pid }

// signal sends sig and, for SIGKILL and SIGTERM, waits for the exit.
func (p *osProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
		return
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30s of %v:\n%s", p.name, sig, tail(p.log, 40))
	}
}

// stop ends the process if it still runs: SIGCONT (it may be paused),
// SIGTERM, SIGKILL after 20 s.
func (p *osProc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *osProc) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", p.port, path) }

func (p *osProc) get(path string, timeout time.Duration) (int, []byte, error) {
	return p.call("GET", path, "", "", timeout, nil)
}

// call makes one request and returns its status and body (0 and the error
// when it got no answer within timeout).
func (p *osProc) call(method, path, key, body string, timeout time.Duration, hdr map[string]string) (int, []byte, error) {
	req, err := http.NewRequest(method, p.url(path), strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, nil
}

// metric returns the sum of the samples of a metric on p's /metrics whose
// labels include every label given ("name" alone: all of them).
func (p *osProc) metric(name string, labels ...string) (float64, bool) {
	st, body, err := p.get("/metrics", 3*time.Second)
	if err != nil || st != 200 {
		return 0, false
	}
	var sum float64
	found := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// offsets returns, per partition of topic, the group's committed offset
// (0 when none) and the end offset, asked of the broker.
func (s *faultStack) offsets(group, topic string) (committed, ends map[int32]int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	adm := kadm.NewClient(s.admin)
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, nil, err
	}
	committed, ends = map[int32]int64{}, map[int32]int64{}
	listed.Each(func(e kadm.ListedOffset) {
		ends[e.Partition] = e.Offset
		committed[e.Partition] = 0
		if o, ok := offs.Lookup(topic, e.Partition); ok && o.At > 0 {
			committed[e.Partition] = o.At
		}
	})
	return committed, ends, nil
}

// keepLogsOnFailure copies every process's log to the test artifacts
// (.endcap/artifacts/faults/<test>-<time>) when the test failed.
func (s *faultStack) keepLogsOnFailure() {
	if !s.t.Failed() {
		return
	}
	dir := filepath.Join(artifacts(s.t, "faults"), strings.ReplaceAll(s.t.Name(), "/", "_")+"-"+time.Now().UTC().Format("20060102T150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Log(err)
		return
	}
	for _, p := range s.procs {
		matches, _ := filepath.Glob(filepath.Join(s.dir, p.name+"-*.log"))
		for _, m := range matches {
			if b, err := os.ReadFile(m); err == nil {
				_ = os.WriteFile(filepath.Join(dir, filepath.Base(m)), b, 0o644)
			}
		}
	}
	s.t.Logf("the processes' logs are in %s", dir)
}

// diagnose logs what a failed wait needs to be understood: per partition of
// the events topic, the projectors' committed offset against the end, and
// the warnings and errors each serve process logged last.
func (s *faultStack) diagnose(t *testing.T) {
	t.Helper()
	committed, ends, err := s.offsets(projections.EventsGroup, "endcap.events")
	if err != nil {
		t.Logf("offsets of %s: %v", projections.EventsGroup, err)
	} else {
		var behind []string
		for p, end := range ends {
			if committed[p] < end {
				behind = append(behind, fmt.Sprintf("%d: %d of %d", p, committed[p], end))
			}
		}
		sort.Strings(behind)
		t.Logf("partitions of endcap.events not committed to their end: %v", behind)
	}
	if rows, err := s.query("SELECT table, toString(count()) FROM system.parts WHERE active AND database = 'endcap' GROUP BY table ORDER BY count() DESC LIMIT 5"); err == nil {
		t.Logf("ClickHouse tables with the most active parts: %v", rows)
	}
	for _, p := range s.procs {
		if p.port == 0 {
			continue
		}
		b, _ := os.ReadFile(p.log)
		var notable []string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				notable = append(notable, line)
			}
		}
		if len(notable) > 25 {
			notable = notable[len(notable)-25:]
		}
		t.Logf("%s: last warnings and errors:\n%s", p.name, strings.Join(notable, "\n"))
	}
}

// redis is a client of the stack's Redis (of its cluster, when it runs one),
// closed when the test ends.
func (s *faultStack) redis() redis.UniversalClient {
	rdb := redisstore.Open(redisstore.Options{Addr: strings.Join(s.st.RedisAddrs, ","), Cluster: len(s.st.RedisAddrs) > 1})
	s.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// redisSpend is a campaign's total spend in Redis.
func (s *faultStack) redisSpend(t *testing.T, mp, campaign string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, total, err := spend.ReadSpend(ctx, s.redis(), mp, campaign, spend.DayOf(time.Now(), time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// query runs a ClickHouse query and returns its rows as strings.
func (s *faultStack) query(q string, args ...any) ([][]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := s.ch.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	n := len(rows.Columns())
	for rows.Next() {
		vals := make([]string, n)
		ptrs := make([]any, n)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// decodeJSON unmarshals b into v or fails the test.
func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// demo is what setUp makes: a marketplace (reserve 0.25 a click), its keys,
// and a campaign of vendor v1 with a large daily budget bidding 0.50 on
// product P1 (P2 is in the catalog too, with no bid).
type demo struct {
	mp, mkKey, advKey, campaign string
}

// setUp creates the demo marketplace through the admin command and the
// API, once the given processes are ready.
func (s *faultStack) setUp(api *osProc, name string, procs ...*osProc) demo {
	t := s.t
	t.Helper()
	var m struct {
		ID string `json:"id"`
	}
	decodeJSON(t, s.cli("admin", "marketplace", "create", "--name", name, "--currency", "USD", "--timezone", "UTC"), &m)
	key := func(typ string) string {
		var k struct {
			Key string `json:"key"`
		}
		decodeJSON(t, s.cli("admin", "key", "create", "--marketplace", m.ID, "--type", typ), &k)
		return k.Key
	}
	d := demo{mp: m.ID, mkKey: key("marketplace"), advKey: key("advanced")}
	// Every click costs at least the reserve: 0.25.
	s.cli("admin", "marketplace", "set-reserve", "--marketplace", m.ID, "--cpc", "0.25")
	for _, p := range procs {
		s.waitReady(p, 90*time.Second)
	}
	s.must(api, d.advKey, "PUT", "/public/v1/catalog-search-service/catalogs/vendors", `{"vendors":[{"id":"v1","name":"V1"}]}`, 200)
	s.must(api, d.advKey, "PUT", "/public/v1/catalog-search-service/catalogs/products", `{"products":[{"id":"P1","name":"P1","vendors":["v1"],"active":true},{"id":"P2","name":"P2","vendors":["v1"],"active":true}]}`, 200)
	var c struct {
		ID string `json:"id"`
	}
	decodeJSON(t, s.must(api, d.advKey, "POST", cpVendor("v1"), `{"name":"always on","type":"listings","chargeType":"CPC","dailyBudget":100000,"startDate":"2020-01-01T00:00:00Z"}`, 201), &c)
	s.must(api, d.advKey, "POST", cpBids(c.ID), `{"targetType":"product","target":"P1","bidAmount":0.50}`, 201)
	d.campaign = c.ID
	return d
}

// must makes a request until it answers want (20 s at most) and returns the
// body.
func (s *faultStack) must(api *osProc, key, method, path, body string, want int) []byte {
	s.t.Helper()
	var b []byte
	testenv.Eventually(s.t, 20*time.Second, func() error {
		var st int
		var err error
		if st, b, err = api.call(method, path, key, body, 10*time.Second, nil); st != want {
			return fmt.Errorf("%s %s: %d %s %v", method, path, st, b, err)
		}
		return nil
	})
	return b
}
