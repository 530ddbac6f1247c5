package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/endcap/endcap/deploy/monitoring"
	"github.com/endcap/endcap/testkit/testenv"
)

// TestMonitoring runs the system as production does (an API, a projector,
// an exporter, each a process of its own) and, after some traffic:
//   - every metric the monitoring kit's rules and dashboards name is on the
//     /metrics of one of the processes (deploy/monitoring);
//   - Debian's Prometheus, a child process scraping the three with the
//     kit's rules loaded, fires no alert of the fold while it is healthy,
//     and fires EndcapFoldStalled within the time its rule documents (30 s
//     after the last projector stops being scraped, plus a scrape and an
//     evaluation interval) once the projector is stopped.
func TestMonitoring(t *testing.T) {
	promBin := testenv.Tool(t, "prometheus")
	began := time.Now()
	s := newFaultStack(t)
	api := s.serve("api", "api")
	projector := s.serve("projector", "projector", "ENDCAP_ROLLUP_INTERVAL=1s")
	exporter := s.serve("exporter", "exporter")
	d := s.setUp(api, "Monitoring", projector, exporter)

	// Traffic: events (one twice: a duplicate), a rejected event, an
	// auction and a click on its winner, a rejected auction, a campaign
	// read (its spend), an export.
	ev := fmt.Sprintf(`{"impressions":[{"id":"mon-1","occurredAt":%q,"opaqueUserId":"u1","entity":{"type":"product","id":"P1"}}]}`, ts(time.Now()))
	s.must(api, d.mkKey, "POST", "/v2/events", ev, 200)
	s.must(api, d.mkKey, "POST", "/v2/events", ev, 200)
	s.must(api, d.mkKey, "POST", "/v2/events", `{"impressions":[{"id":""}]}`, 400)
	s.must(api, d.mkKey, "POST", "/v2/auctions", `{"auctions":[{"type":"nope"}]}`, 400)
	var au struct {
		Results []auResult `json:"results"`
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		decodeJSON(t, s.must(api, d.mkKey, "POST", "/v2/auctions", `{"auctions":[{"type":"listings","slots":1,"products":{"ids":["P1"]}}]}`, 201), &au)
		if len(au.Results) != 1 || len(au.Results[0].Winners) != 1 {
			return fmt.Errorf("no winner yet: %+v", au)
		}
		return nil
	})
	s.must(api, d.mkKey, "POST", "/v2/events", fmt.Sprintf(`{"clicks":[{"id":"mon-click","occurredAt":%q,"opaqueUserId":"u1","resolvedBidId":%q}]}`,
		ts(time.Now()), au.Results[0].Winners[0].ResolvedBidID), 200)
	s.must(api, d.advKey, "GET", cpCampaign(d.campaign), "", 200)
	exportID, err := retryExport(api, d.advKey)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		b := s.must(api, d.advKey, "GET", "/public/v1/export-service/exports/"+exportID, "", 200)
		if !bytes.Contains(b, []byte(`"completed"`)) {
			return fmt.Errorf("export %s: %s", exportID, b)
		}
		return nil
	})
	// The click is charged and the rollups have run.
	testenv.Eventually(t, 60*time.Second, func() error {
		if v, _ := projector.metric("endcap_charges_total", `outcome="applied"`); v < 1 {
			return fmt.Errorf("no charge applied yet")
		}
		if v, _ := projector.metric("endcap_rollup_runs_total", `result="ok"`); v < 1 {
			return fmt.Errorf("no rollup run yet")
		}
		return nil
	})

	t.Logf("stack up with traffic after %s", time.Since(began).Round(100*time.Millisecond))
	// Every metric of the kit is exported.
	names, err := monitoring.MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, p := range []*osProc{api, projector, exporter} {
		for _, n := range exportedNames(t, p) {
			exported[n] = true
		}
	}
	for _, n := range names {
		if !exported[n] {
			t.Errorf("%s is named by deploy/monitoring but exported by no process of the stack", n)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Prometheus scrapes the three with the rules loaded.
	prom := startPrometheus(t, promBin, []*osProc{api, projector, exporter})
	testenv.Eventually(t, 30*time.Second, func() error {
		up, err := prom.query(`count(up == 1)`)
		if err != nil || up != "3" {
			return fmt.Errorf("targets up: %q %v", up, err)
		}
		return nil
	})
	// Healthy: once the rules have been evaluated over three scrapes of the
	// projector, EndcapFoldStalled is neither pending nor firing.
	upAt := time.Now()
	testenv.Eventually(t, 30*time.Second, func() error {
		if last := prom.lastEvaluation(t, "endcap-fold"); !last.After(upAt.Add(3 * time.Second)) {
			return fmt.Errorf("endcap-fold last evaluated at %s", last)
		}
		return nil
	})
	if a := prom.alerts(t); slices.ContainsFunc(a, func(x promAlert) bool { return x.Name == "EndcapFoldStalled" }) {
		t.Fatalf("EndcapFoldStalled while the fold is healthy: %+v", a)
	}

	// The projector stops: EndcapFoldStalled fires within its documented
	// time (for: 30s after the last scrape of the projector), plus a scrape
	// and an evaluation interval (1 s each here) and a margin for a loaded
	// machine.
	t.Logf("prometheus scraping, fold healthy, after %s", time.Since(began).Round(100*time.Millisecond))
	projector.stop(t)
	stopped := time.Now()
	const documented = 30*time.Second + 2*time.Second
	deadline := stopped.Add(documented + 15*time.Second)
	for {
		a := prom.alerts(t)
		i := slices.IndexFunc(a, func(x promAlert) bool { return x.Name == "EndcapFoldStalled" && x.State == "firing" })
		if i >= 0 {
			t.Logf("EndcapFoldStalled fired %s after the projector stopped (documented: %s): %+v", time.Since(stopped).Round(100*time.Millisecond), documented, a[i])
			if a[i].Labels["group"] != "endcap-projector-events" || a[i].Labels["severity"] != "critical" {
				t.Errorf("labels: %v", a[i].Labels)
			}
			if time.Since(stopped) < 30*time.Second {
				t.Errorf("fired %s after the stop: sooner than its for: 30s", time.Since(stopped))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("EndcapFoldStalled not firing %s after the projector stopped; alerts: %+v", time.Since(stopped).Round(time.Second), a)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// exportedNames returns the names of the samples on p's /metrics.
func exportedNames(t *testing.T, p *osProc) []string {
	t.Helper()
	st, body, err := p.get("/metrics", 5*time.Second)
	if err != nil || st != 200 {
		t.Fatalf("%s /metrics: %d %v", p.name, st, err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out = append(out, line[:i])
		}
	}
	return out
}

type promProc struct {
	url string
}

type promAlert struct {
	Name   string
	State  string
	Labels map[string]string
}

// startPrometheus runs Prometheus on a free port with temporary storage,
// scraping targets every second and evaluating deploy/monitoring's rules
// every second; it is stopped (SIGTERM, then SIGKILL) at the test's end.
func startPrometheus(t *testing.T, bin string, targets []*osProc) *promProc {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs("../deploy/monitoring/endcap.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tg []string
	for _, p := range targets {
		tg = append(tg, fmt.Sprintf("'127.0.0.1:%d'", p.port))
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nrule_files: ['%s']\n"+
		"scrape_configs:\n  - job_name: endcap\n    static_configs:\n      - targets: [%s]\n", rules, strings.Join(tg, ", "))
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePorts(t, 1)[0]
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", tail(string(b), 40))
		}
	})
	p := &promProc{url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	testenv.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("prometheus /-/ready: %d", resp.StatusCode)
		}
		return nil
	})
	return p
}

var promClient = &http.Client{Timeout: 5 * time.Second}

// query returns the value of an instant query's single sample ("" when
// the result is empty).
func (p *promProc) query(q string) (string, error) {
	resp, err := promClient.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Status != "success" {
		return "", fmt.Errorf("query %s: %s %v", q, out.Status, err)
	}
	if len(out.Data.Result) == 0 {
		return "", nil
	}
	v, _ := out.Data.Result[0].Value[1].(string)
	return v, nil
}

// alerts returns the pending and firing alerts.
func (p *promProc) alerts(t *testing.T) []promAlert {
	t.Helper()
	resp, err := promClient.Get(p.url + "/api/v1/alerts")
	if err != nil {
		t.Fatalf("prometheus alerts: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("prometheus alerts: %v", err)
	}
	var a []promAlert
	for _, x := range out.Data.Alerts {
		a = append(a, promAlert{Name: x.Labels["alertname"], State: x.State, Labels: x.Labels})
	}
	return a
}

// lastEvaluation returns when the rule group was last evaluated.
func (p *promProc) lastEvaluation(t *testing.T, group string) time.Time {
	t.Helper()
	resp, err := promClient.Get(p.url + "/api/v1/rules")
	if err != nil {
		t.Fatalf("prometheus rules: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Groups []struct {
				Name           string    `json:"name"`
				LastEvaluation time.Time `json:"lastEvaluation"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("prometheus rules: %v", err)
	}
	for _, g := range out.Data.Groups {
		if g.Name == group {
			return g.LastEvaluation
		}
	}
	t.Fatalf("prometheus has no rule group %s", group)
	return time.Time{}
}
