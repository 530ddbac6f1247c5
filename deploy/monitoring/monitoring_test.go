package monitoring

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/endcap/endcap/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite the dashboards' JSON files")

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(testenv.Tool(t, "promtool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The rules load, and each alert fires on its unit test's series, no sooner
// than its `for`, and not on a healthy stack's.
func TestRules(t *testing.T) {
	promtool(t, "check", "rules", "endcap.rules.yml")
	promtool(t, "test", "rules", "endcap.rules.test.yml")
}

// Every alert has a unit test of its own in endcap.rules.test.yml.
func TestEveryAlertTested(t *testing.T) {
	rules, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("endcap.rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		n++
		if !fires[r.Alert] {
			t.Errorf("alert %s: no unit test in endcap.rules.test.yml sees it fire", r.Alert)
		}
	}
	if n == 0 {
		t.Fatal("no alert in endcap.rules.yml")
	}
}

// Each alert has a severity, a `for`, a summary, a description and a
// runbook_url to a section of docs/operations/runbooks.md.
func TestAlertsHaveRunbooks(t *testing.T) {
	rules, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/operations/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,3} (.+)$`).FindAllSubmatch(doc, -1) {
		anchors[anchor(string(m[1]))] = true
	}
	const base = "https://github.com/endcap/endcap/blob/main/docs/operations/runbooks.md#"
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		switch r.Labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
			t.Errorf("%s: for %q", r.Alert, r.For)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: no summary or description", r.Alert)
		}
		u := r.Annotations["runbook_url"]
		if !strings.HasPrefix(u, base) || !anchors[strings.TrimPrefix(u, base)] {
			t.Errorf("%s: runbook_url %q is not a section of docs/operations/runbooks.md", r.Alert, u)
		}
		if want := base + strings.ToLower(r.Alert); u != want {
			t.Errorf("%s: runbook_url %q, want %q (a section named after the alert)", r.Alert, u, want)
		}
	}
}

// anchor is GitHub's anchor of a heading.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// The dashboards' files are what Dashboards defines (-update rewrites
// them), and every query of them parses.
func TestDashboards(t *testing.T) {
	var rules bytes.Buffer
	rules.WriteString("groups:\n  - name: dashboards\n    rules:\n")
	n := 0
	for _, d := range Dashboards() {
		b, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("dashboards", d.File)
		if *update {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s differs from its definition (go test ./deploy/monitoring -run TestDashboards -update): %v", path, err)
		}
		for _, e := range d.Exprs() {
			n++
			q, _ := yaml.Marshal(e)
			fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s", n, q)
		}
	}
	f := filepath.Join(t.TempDir(), "dashboards.rules.yml")
	if err := os.WriteFile(f, rules.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := promtool(t, "check", "rules", f); !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", n)) {
		t.Fatalf("promtool check rules of the dashboards' %d queries:\n%s", n, out)
	}
}

// MetricNames finds the metrics of the rules and the dashboards, and
// nothing else.
func TestMetricNames(t *testing.T) {
	names, err := MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	for _, want := range []string{"endcap_projector_stalled_seconds", "endcap_http_request_duration_seconds_bucket", "go_gc_gomemlimit_bytes", "process_resident_memory_bytes"} {
		if !has[want] {
			t.Errorf("MetricNames lacks %s", want)
		}
	}
	for _, n := range names {
		if strings.Contains(n, ":") || n == "endcap_projector" {
			t.Errorf("MetricNames has %s", n)
		}
	}
}
