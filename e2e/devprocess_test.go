package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/endcap/endcap/storage/clickhouse"
	"github.com/endcap/endcap/testkit/testenv"
)

// freePorts returns n distinct ports that are free now, picked below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range): a port the
// kernel hands out for a listener on :0 is also one it hands out for
// outgoing connections, and one of the many this package's tests open took
// such a port (maildev's) before the stack could bind it. A port is never
// handed out twice in the process.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	low := ephemeralLow()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 10_000 {
			t.Fatalf("no free port below %d", low)
		}
		p := portsFrom + rand.IntN(low-portsFrom)
		if portsUsed[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = ln.Close()
		portsUsed[p] = true
		ports = append(ports, p)
	}
	return ports
}

// portsFrom is the lowest port freePorts picks: above the local stack's
// fixed ports (8080, 11025, 16379, 18123, 19000…19100).
const portsFrom = 20_000

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	if v, err := strconv.Atoi(f[0]); err == nil && v > portsFrom+1000 {
		return v
	}
	return 32768
}

// newDevStack is a devStack of the test's own: a fresh binary, directory
// and ports. It writes no demo traffic (the tests count their own events
// and time their own load) unless extra has --demo-traffic=true, which
// wins over the default given first.
func newDevStack(t *testing.T, extra ...string) *devStack {
	t.Helper()
	bin := buildBinary(t) // first: the ports are picked just before they are bound
	p := freePorts(t, 8)
	return &devStack{t: t, bin: bin, dir: t.TempDir(), extra: append([]string{"--demo-traffic=false"}, extra...),
		http: p[0], kafka: p[1], ch: p[2], chHTTP: p[3], redis: p[4], s3: p[5], mailSMTP: p[6], mailWeb: p[7]}
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "endcap")
	out, err := exec.Command("go", "build", "-tags", "dev", "-o", bin, "../cmd/endcap").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

type devProc struct {
	cmd  *exec.Cmd
	done chan error
	log  string
}

// args are the flags of the test besides the addresses: the invalid-click
// rules off, as in testenv.Config (these tests send clicks without
// impressions, and many from one shopper at once), except for the tests that
// run as make run does (--demo-traffic=true: the demo traffic and the guide
// must hold under the default rules); then the test's own.
func (d *devStack) args() []string {
	if slices.Contains(d.extra, "--demo-traffic=true") {
		return d.extra
	}
	return append([]string{"--invalid-click-require-impression=false", "--invalid-click-min-delay=0",
		"--invalid-click-repeat-window=0", "--invalid-click-max-per-hour=0"}, d.extra...)
}

type devStack struct {
	t                                  *testing.T
	bin, dir                           string
	http, kafka, ch, chHTTP, redis, s3 int
	mailSMTP, mailWeb                  int
	extra                              []string // more flags of `endcap dev`
}

// devEnv is the test's environment without ENDCAP_* variables: the stack's
// settings come from its flags only.
func devEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ENDCAP_") {
			env = append(env, kv)
		}
	}
	return env
}

func (d *devStack) start() *devProc {
	t := d.t
	t.Helper()
	logPath := filepath.Join(d.dir, fmt.Sprintf("dev-%d.log", time.Now().UnixNano()))
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(d.bin, append([]string{"dev", "--dir", d.dir,
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", d.http),
		"--kafka-brokers", fmt.Sprintf("127.0.0.1:%d", d.kafka),
		"--clickhouse-addr", fmt.Sprintf("127.0.0.1:%d", d.ch),
		"--clickhouse-http-port", strconv.Itoa(d.chHTTP),
		"--redis-addr", fmt.Sprintf("127.0.0.1:%d", d.redis),
		"--s3-endpoint", fmt.Sprintf("http://127.0.0.1:%d", d.s3),
		"--mail-smtp-port", strconv.Itoa(d.mailSMTP), "--mail-web-port", strconv.Itoa(d.mailWeb)}, d.args()...)...)
	cmd.Env = devEnv()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &devProc{cmd: cmd, done: make(chan error, 1), log: logPath}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
			}
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-p.done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("endcap dev exited early: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("endcap dev not ready within 90s\n%s", b)
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", d.http))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				if _, err := os.Stat(filepath.Join(d.dir, "dev", "credentials.json")); err == nil || slices.Contains(d.extra, "--no-demo") {
					return p
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (d *devStack) creds() credentialsFile {
	d.t.Helper()
	var c credentialsFile
	b, err := os.ReadFile(filepath.Join(d.dir, "dev", "credentials.json"))
	if err != nil {
		d.t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		d.t.Fatal(err)
	}
	return c
}

type credentialsFile struct {
	MarketplaceID  string `json:"marketplaceId"`
	MarketplaceKey string `json:"marketplaceKey"`
	AdvancedKey    string `json:"advancedKey"`
}

func (d *devStack) post(key, body string) (int, error) {
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/v2/events", d.http), strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestDevRestartAndCrash runs `endcap dev` as a user would: it comes up with
// a demo marketplace, Ctrl-C stops it, a restart finds the same data and
// keys; then it is killed with SIGKILL while events are posted, and after the
// next start every event that got a 200 is in ClickHouse exactly once.
func TestDevRestartAndCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack as a subprocess")
	}
	testenv.Get(t) // skips or fails like the other integration tests when the stack is not installed
	d := newDevStack(t)

	p := d.start()
	first := d.creds()
	if first.MarketplaceID == "" || !strings.HasPrefix(first.MarketplaceKey, "ecm_") || !strings.HasPrefix(first.AdvancedKey, "eca_") {
		t.Fatalf("credentials: %+v", first)
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		if err != nil {
			b, _ := os.ReadFile(p.log)
			t.Fatalf("Ctrl-C exit: %v\n%s", err, b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("endcap dev did not stop within 30s of Ctrl-C")
	}

	// The demo's signing keys are wrapped with a master key of its own,
	// kept beside the credentials (the restart below finds it again).
	keyFile := filepath.Join(d.dir, "dev", "secret.key")
	st, err := os.Stat(keyFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("master key file: %v %v", st, err)
	}
	keyText, _ := os.ReadFile(keyFile)

	p = d.start()
	if again := d.creds(); again != first {
		t.Fatalf("credentials changed across restart: %+v vs %+v", again, first)
	}
	if again, _ := os.ReadFile(keyFile); string(again) != string(keyText) {
		t.Fatal("the master key changed across the restart")
	}

	// Post batches from 4 clients until the process is killed.
	var (
		mu    sync.Mutex
		acked []string
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var items []string
				var ids []string
				for i := 0; i < 20; i++ {
					id := fmt.Sprintf("k9-%d-%d-%d", w, n, i)
					ids = append(ids, id)
					items = append(items, fmt.Sprintf(`{"id":%q,"occurredAt":%q,"opaqueUserId":"u-%d","entity":{"type":"product","id":"p-%d"}}`, id, ts(time.Now()), i, n))
				}
				st, err := d.post(first.MarketplaceKey, `{"impressions":[`+strings.Join(items, ",")+`]}`)
				if err == nil && st == 200 {
					mu.Lock()
					acked = append(acked, ids...)
					mu.Unlock()
				}
				if err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no event was acknowledged before the kill")
	}
	t.Logf("%d events acknowledged before SIGKILL", len(acked))

	d.start()
	if again := d.creds(); again != first {
		t.Fatalf("credentials changed across crash: %+v vs %+v", again, first)
	}
	conn, err := clickhouse.Open(clickhouse.Options{Addr: fmt.Sprintf("127.0.0.1:%d", d.ch), Database: "endcap", User: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var seen map[string]int
	testenv.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rows, err := conn.Query(ctx, "SELECT event_id, count() FROM events WHERE startsWith(event_id, 'k9-') GROUP BY event_id")
		if err != nil {
			return err
		}
		defer rows.Close()
		seen = map[string]int{}
		for rows.Next() {
			var id string
			var n uint64
			if err := rows.Scan(&id, &n); err != nil {
				return err
			}
			seen[id] = int(n)
		}
		for _, id := range acked {
			if seen[id] == 0 {
				return testenv.Errorf("acknowledged event %s not in ClickHouse (have %d of %d)", id, len(seen), len(acked))
			}
		}
		return nil
	})
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s seen %d times", id, n)
		}
	}
	t.Logf("all %d acknowledged events in ClickHouse exactly once (%d rows with the prefix in all)", len(acked), len(seen))
}

// TestDevWithSeparateKafka runs Kafka as its own process (`endcap kafka`)
// under `endcap dev --kfake=false`, the layout bench-auctions.sh SPLIT=1
// uses: the stack comes up, takes events, and after both processes stop
// and start again it finds the same marketplace in the broker's data.
func TestDevWithSeparateKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack as subprocesses")
	}
	testenv.Get(t)
	d := newDevStack(t, "--kfake=false")
	startKafka := func() (*exec.Cmd, chan error) {
		t.Helper()
		f, err := os.Create(filepath.Join(d.dir, fmt.Sprintf("kafka-%d.log", time.Now().UnixNano())))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(d.bin, "kafka", "--dir", d.dir, "--kafka-brokers", fmt.Sprintf("127.0.0.1:%d", d.kafka))
		cmd.Env = devEnv()
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait(); f.Close() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				<-done
			}
		})
		return cmd, done
	}
	stop := func(what string, cmd *exec.Cmd, done chan error) {
		t.Helper()
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: Ctrl-C exit: %v", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop within 30s of Ctrl-C", what)
		}
	}

	kcmd, kdone := startKafka()
	p := d.start()
	first := d.creds()
	body := fmt.Sprintf(`{"impressions":[{"id":"sep-1","occurredAt":%q,"opaqueUserId":"u-1","entity":{"type":"product","id":"p-1"}}]}`, ts(time.Now()))
	if code, err := d.post(first.MarketplaceKey, body); err != nil || code != 200 {
		t.Fatalf("post: %d %v", code, err)
	}
	stop("endcap dev", p.cmd, p.done)
	stop("endcap kafka", kcmd, kdone)
	if _, err := os.Stat(filepath.Join(d.dir, "kafka")); err != nil {
		t.Fatalf("the broker kept no data in <dir>/kafka: %v", err)
	}

	kcmd, kdone = startKafka()
	// The demo's signing keys are wrapped with a master key of its own,
	// kept beside the credentials (the restart below finds it again).
	keyFile := filepath.Join(d.dir, "dev", "secret.key")
	st, err := os.Stat(keyFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("master key file: %v %v", st, err)
	}
	keyText, _ := os.ReadFile(keyFile)

	p = d.start()
	if again := d.creds(); again != first {
		t.Fatalf("credentials changed across restart: %+v vs %+v", again, first)
	}
	if again, _ := os.ReadFile(keyFile); string(again) != string(keyText) {
		t.Fatal("the master key changed across the restart")
	}
	// The marketplace key still authenticates: the accounts came back from the broker's data.
	if code, err := d.post(first.MarketplaceKey, strings.Replace(body, "sep-1", "sep-2", 1)); err != nil || code != 200 {
		t.Fatalf("post after restart: %d %v", code, err)
	}
	stop("endcap dev", p.cmd, p.done)
	stop("endcap kafka", kcmd, kdone)
}

// TestDevNoDemo: `endcap dev --no-demo` starts the stack empty: no demo
// marketplace, keys or credentials file; endcap admin sees no marketplace.
func TestDevNoDemo(t *testing.T) {
	testenv.Get(t)
	d := newDevStack(t, "--no-demo")
	p := d.start()
	if _, err := os.Stat(filepath.Join(d.dir, "dev", "credentials.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("credentials.json: %v, want none", err)
	}
	cmd := exec.Command(d.bin, "admin", "marketplace", "list", "--kafka-brokers", fmt.Sprintf("127.0.0.1:%d", d.kafka))
	cmd.Env = devEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("admin marketplace list: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "[]" && got != "null" {
		t.Fatalf("marketplaces of an empty stack: %s", got)
	}
	log, _ := os.ReadFile(p.log)
	if !strings.Contains(string(log), "Endcap is running, empty") {
		t.Fatalf("the banner of an empty stack is missing:\n%s", log)
	}
}

// TestDevDemoTraffic: on its first start `endcap dev` writes a week of
// demo traffic for the demo marketplace (auctions in the past, their
// impressions, clicks and purchases through POST /v2/events): each of the
// seven local days before today has impressions, clicks and spend in the
// daily rollup, the week has attributed purchases, and an export of the
// week has rows. The next start writes none again.
func TestDevDemoTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack as a subprocess")
	}
	testenv.Get(t)
	d := newDevStack(t, "--demo-traffic=true")
	p := d.start()
	creds := d.creds()
	marker := filepath.Join(d.dir, "dev", "demo-traffic.json")
	var done struct {
		SeededAt  time.Time `json:"seededAt"`
		Auctions  int       `json:"auctions"`
		Clicks    int       `json:"clicks"`
		Purchases int       `json:"purchases"`
	}
	testenv.Eventually(t, 2*time.Minute, func() error {
		b, err := os.ReadFile(marker)
		if err != nil {
			return testenv.Errorf("no %s yet: %v", marker, err)
		}
		return json.Unmarshal(b, &done)
	})
	if b, err := os.ReadFile(p.log); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "demo traffic: written") {
				t.Log(line) // its counts and how long it took
			}
		}
	}
	if done.Auctions < 1000 || done.Clicks == 0 || done.Purchases == 0 {
		t.Fatalf("demo traffic counts: %+v", done)
	}

	conn, err := clickhouse.Open(clickhouse.Options{Addr: fmt.Sprintf("127.0.0.1:%d", d.ch), Database: "endcap", User: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The days before the seeding's today (not the test's: New York's
	// midnight may have passed since).
	ny, _ := time.LoadLocation("America/New_York")
	now := done.SeededAt.In(ny)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	type dayRow struct{ impressions, clicks, spend, purchases uint64 }
	days := map[string]dayRow{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, `SELECT toString(day_local), sum(impressions), sum(clicks),
		toUInt64(sum(ad_spent_clicks_micros) + sum(ad_spent_impressions_micros)), toUInt64(uniqExactMerge(purchases))
		FROM rollup_daily WHERE marketplace_id = toUUID(?) GROUP BY day_local`, creds.MarketplaceID)
	if err != nil {
		t.Fatal(err)
	}
	var weekPurchases uint64
	for rows.Next() {
		var day string
		var r dayRow
		if err := rows.Scan(&day, &r.impressions, &r.clicks, &r.spend, &r.purchases); err != nil {
			t.Fatal(err)
		}
		days[day] = r
		weekPurchases += r.purchases
	}
	rows.Close()
	for i := 1; i <= 7; i++ {
		day := today.AddDate(0, 0, -i).Format(time.DateOnly)
		r := days[day]
		t.Logf("%s: %d impressions, %d clicks, spend %d micros, %d purchases", day, r.impressions, r.clicks, r.spend, r.purchases)
		if r.impressions == 0 || r.clicks == 0 || r.spend == 0 {
			t.Errorf("local day %s of the demo week: %+v in rollup_daily", day, r)
		}
	}
	if weekPurchases == 0 {
		t.Error("no attributed purchase in the demo week's rollup")
	}

	// The first export of the README: the last 7 days, per day and campaign.
	base := fmt.Sprintf("http://127.0.0.1:%d", d.http)
	body := fmt.Sprintf(`{"dataset":"monitoring_metrics","dimensions":["day_local","campaign_name"],"metrics":["impressions","clicks","ad_spend"],
		"granularity":"day_local","startDate":%q,"endDate":%q,"format":"csv"}`, today.AddDate(0, 0, -7).Format(time.DateOnly), today.Format(time.DateOnly))
	var exp struct {
		ExportID, Status, URL string
		RowCount              int
	}
	code, b := devJSON(t, "POST", base+"/public/v1/export-service/exports", creds.AdvancedKey, body, &exp)
	if code != 202 {
		t.Fatalf("POST export: %d %s", code, b)
	}
	testenv.Eventually(t, time.Minute, func() error {
		code, b := devJSON(t, "GET", base+"/public/v1/export-service/exports/"+exp.ExportID, creds.AdvancedKey, "", &exp)
		if code != 200 || exp.Status != "completed" {
			return testenv.Errorf("export: %d %s", code, b)
		}
		return nil
	})
	resp, err := http.Get(exp.URL)
	if err != nil {
		t.Fatal(err)
	}
	csv, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if resp.StatusCode != 200 || exp.RowCount < 7 || len(lines) != exp.RowCount+1 {
		t.Fatalf("export file: %s, rowCount %d\n%s", resp.Status, exp.RowCount, csv)
	}
	t.Logf("export of the demo week: %d rows, first %q", exp.RowCount, lines[1])

	// The next start finds it done.
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("endcap dev did not stop within 30s of Ctrl-C")
	}
	before, _ := os.ReadFile(marker)
	p = d.start()
	testenv.Eventually(t, 30*time.Second, func() error {
		if b, _ := os.ReadFile(p.log); !strings.Contains(string(b), "Endcap is running") {
			return testenv.Errorf("no banner yet")
		}
		return nil
	})
	log, _ := os.ReadFile(p.log)
	if strings.Contains(string(log), "demo traffic: writing") {
		t.Errorf("the second start writes the demo traffic again:\n%s", log)
	}
	if after, _ := os.ReadFile(marker); string(after) != string(before) {
		t.Errorf("demo-traffic.json changed across the restart: %s, then %s", before, after)
	}
}

// devJSON sends a request with the key and decodes a JSON answer into out.
func devJSON(t *testing.T, method, url, key, body string, out any) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		_ = json.Unmarshal(b, out)
	}
	return resp.StatusCode, b
}
