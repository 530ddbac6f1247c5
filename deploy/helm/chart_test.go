// Package helm tests the Helm chart deploy/helm/endcap: it renders it with
// Helm's own Go SDK (as `helm install --dry-run` / `helm template` do) for
// each values file of testdata/, decodes every object strictly into the
// Kubernetes API types (a field the API does not know fails), checks the
// chart's invariants, and compares the render with testdata/golden/
// (go test -update rewrites them). It is a module of its own so that Helm
// and k8s.io/* stay out of the production module.
package helm

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/ with the renders")

const chartDir = "endcap"

// object is one rendered object, decoded.
type object struct {
	source string // the template it came from
	kind   string
	name   string
	obj    any
	hook   string // helm.sh/hook, "" for a plain object
}

// The kinds the chart may render and their Go types.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                     func() any { return &appsv1.StatefulSet{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"v1/Pod":                                  func() any { return &corev1.Pod{} },
	"batch/v1/Job":                            func() any { return &batchv1.Job{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

// cases are the values files rendered, and what each must hold beyond the
// invariants every render keeps.
var cases = []struct {
	name string
	// rules are Prometheus rule files put in the chart's files/rules/ as
	// `make chart` does (nil: those of deploy/monitoring, if any).
	rules map[string]string
	want  func(t *testing.T, objs []object)
}{
	{name: "minimal", want: func(t *testing.T, objs []object) {
		requireKinds(t, objs, "Deployment/endcap-api", "StatefulSet/endcap-projector", "Deployment/endcap-exporter", "Job/endcap-migrate", "Pod/endcap-config-check")
		forbidKinds(t, objs, "HorizontalPodAutoscaler", "ServiceMonitor", "PrometheusRule", "NetworkPolicy")
	}},
	{name: "production", rules: map[string]string{"endcap.rules.yml": testRules}, want: func(t *testing.T, objs []object) {
		requireKinds(t, objs, "HorizontalPodAutoscaler/endcap-api", "PodDisruptionBudget/endcap-api", "ServiceMonitor/endcap", "PrometheusRule/endcap", "NetworkPolicy/endcap-api")
		for _, o := range objs {
			if pr, ok := o.obj.(*monitoringv1.PrometheusRule); ok {
				if len(pr.Spec.Groups) != 1 || len(pr.Spec.Groups[0].Rules) != 2 || pr.Spec.Groups[0].Rules[0].Alert != "EndcapTestAlert" {
					t.Errorf("PrometheusRule groups %+v, want the rule file's group", pr.Spec.Groups)
				}
			}
			if d, ok := o.obj.(*appsv1.Deployment); ok && o.name == "endcap-api" {
				// Numbers of the values file reach the process as it reads them.
				env := envOf(d.Spec.Template.Spec.Containers[0])
				for k, want := range map[string]string{"ENDCAP_IDEMPOTENCY_MAX_BYTES": "134217728", "ENDCAP_ROLLUP_MAX_SHARE": "0.2", "ENDCAP_KAFKA_TLS": "true", "ENDCAP_MAX_EVENTS_IN_FLIGHT": "512", "ENDCAP_HTTP_ADDR": "0.0.0.0:8080"} {
					if env[k] != want {
						t.Errorf("api: %s=%q, want %q", k, env[k], want)
					}
				}
			}
			if ss, ok := o.obj.(*appsv1.StatefulSet); ok && *ss.Spec.Replicas != 6 {
				t.Errorf("projectors %d, want 6", *ss.Spec.Replicas)
			}
		}
	}},
	{name: "cluster", rules: map[string]string{}, want: func(t *testing.T, objs []object) {
		// PrometheusRule is enabled, but no rule file is packaged: none is rendered.
		forbidKinds(t, objs, "PrometheusRule", "Deployment/endcap-exporter")
		requireKinds(t, objs, "ServiceMonitor/endcap")
	}},
}

// testRules is a rule file as deploy/monitoring writes them.
const testRules = `groups:
  - name: endcap-test
    rules:
      - alert: EndcapTestAlert
        expr: up{job="endcap"} == 0
        for: 5m
        labels: {severity: page}
        annotations:
          summary: a process is down
          runbook_url: https://github.com/endcap/endcap/blob/main/docs/operations/runbooks.md#down
      - record: endcap:up:sum
        expr: sum(up{job="endcap"})
`

func TestChartRenders(t *testing.T) {
	settings := documentedSettings(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			manifest, objs := render(t, c.name, c.rules)
			checkInvariants(t, objs, settings)
			c.want(t, objs)
			golden := filepath.Join("testdata", "golden", c.name+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(manifest), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if string(want) != manifest {
				t.Errorf("the render of %s differs from %s (go test -update rewrites it; read the diff):\n%s", c.name, golden, firstDiff(string(want), manifest))
			}
		})
	}
}

// TestChartRefusesBadValues: values.schema.json refuses what the chart
// cannot render right.
func TestChartRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ name, values, want string }{
		{"a setting that is no ENDCAP_ variable", "settings: {LOG_LEVEL: debug}", "LOG_LEVEL"},
		{"the chart's own setting", "settings: {ENDCAP_HTTP_ADDR: ':9000'}", "ENDCAP_HTTP_ADDR"},
		{"a file setting from nowhere", "fileSettings: [{setting: ENDCAP_REDIS_PASSWORD_FILE, key: password}]", "fileSettings"},
		{"a resource without a memory limit", "api: {resources: {limits: {memory: null, cpu: 2}}}", "memory"},
		{"a misspelt key", "projector: {replica: 3}", "replica"},
		{"a disk size without its unit", "projector: {storage: {size: '10'}}", "size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			vals, err := chartutil.ReadValues([]byte(c.values))
			if err != nil {
				t.Fatal(err)
			}
			_, err = renderValues(t, vals, map[string]string{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("render: %v, want a schema error naming %q", err, c.want)
			}
		})
	}
}

func loadChart(t *testing.T, rules map[string]string) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if rules == nil {
		// What `make chart` packages: the rule files of deploy/monitoring.
		rules = map[string]string{}
		paths, _ := filepath.Glob(filepath.Join("..", "monitoring", "*.rules.yml"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			rules[filepath.Base(p)] = string(b)
		}
	}
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ch.Files = append(ch.Files, &chart.File{Name: "files/rules/" + n, Data: []byte(rules[n])})
	}
	return ch
}

func renderValues(t *testing.T, vals map[string]any, rules map[string]string) (*release.Release, error) {
	t.Helper()
	ch := loadChart(t, rules)
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.ReleaseName = "endcap"
	install.Namespace = "ads"
	install.Replace = true
	// The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion).
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.25.0", Major: "1", Minor: "25"}
	return install.Run(ch, vals)
}

// render renders the chart with testdata/<name>.yaml and returns the
// manifest (objects and hooks, in the order Helm gives) and its objects.
func render(t *testing.T, name string, rules map[string]string) (string, []object) {
	t.Helper()
	vals, err := chartutil.ReadValuesFile(filepath.Join("testdata", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := renderValues(t, vals, rules)
	if err != nil {
		t.Fatalf("render %s: %v", name, err)
	}
	var b strings.Builder
	b.WriteString(rel.Manifest)
	hooks := slices.Clone(rel.Hooks)
	sort.Slice(hooks, func(i, j int) bool { return hooks[i].Path < hooks[j].Path })
	for _, h := range hooks {
		fmt.Fprintf(&b, "\n---\n# Source: %s\n%s\n", h.Path, strings.TrimSpace(h.Manifest))
	}
	manifest := b.String()
	return manifest, decodeAll(t, manifest)
}

var sourceLine = regexp.MustCompile(`(?m)^# Source: (.*)$`)

// decodeAll decodes each document strictly into its Kubernetes type.
func decodeAll(t *testing.T, manifest string) []object {
	t.Helper()
	var objs []object
	for _, doc := range strings.Split(manifest, "\n---") {
		doc = strings.TrimSpace(strings.TrimPrefix(doc, "---"))
		if doc == "" || strings.Trim(doc, "# \n") == "" {
			continue
		}
		source := ""
		if m := sourceLine.FindStringSubmatch(doc); m != nil {
			source = m[1]
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: not YAML: %v\n%s", source, err, doc)
		}
		if string(js) == "null" {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(js, &meta); err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		newObj, ok := kinds[meta.APIVersion+"/"+meta.Kind]
		if !ok {
			t.Errorf("%s: kind %s/%s is not one the chart should render", source, meta.APIVersion, meta.Kind)
			continue
		}
		obj := newObj()
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			t.Errorf("%s: %s %s does not decode strictly into the API type: %v", source, meta.Kind, meta.Metadata.Name, err)
			continue
		}
		objs = append(objs, object{source: source, kind: meta.Kind, name: meta.Metadata.Name, obj: obj, hook: meta.Metadata.Annotations["helm.sh/hook"]})
	}
	if len(objs) == 0 {
		t.Fatal("the render holds no object")
	}
	return objs
}

// documentedSettings are the ENDCAP_* variables of the configuration table
// of docs/operations/operations.md (generated from internal/config by
// deploy/local/gen-config-doc.sh, which a test of the main module keeps
// true).
func documentedSettings(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `--[a-z0-9-]+` \\| `(ENDCAP_[A-Z0-9_]+)` \\|")
	set := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		set[m[1]] = true
	}
	if len(set) < 50 {
		t.Fatalf("docs/operations/operations.md's configuration table lists %d settings: the table was not found", len(set))
	}
	return set
}

type podOwner struct {
	o      object
	labels map[string]string
	spec   corev1.PodSpec
	claims []string // a StatefulSet's volumeClaimTemplates, volumes of its pods too
}

func checkInvariants(t *testing.T, objs []object, settings map[string]bool) {
	t.Helper()
	var pods []podOwner
	services := map[string]*corev1.Service{}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			checkSelector(t, o, v.Spec.Selector.MatchLabels, v.Spec.Template.Labels)
			pods = append(pods, podOwner{o: o, labels: v.Spec.Template.Labels, spec: v.Spec.Template.Spec})
		case *appsv1.StatefulSet:
			checkSelector(t, o, v.Spec.Selector.MatchLabels, v.Spec.Template.Labels)
			p := podOwner{o: o, labels: v.Spec.Template.Labels, spec: v.Spec.Template.Spec}
			for _, c := range v.Spec.VolumeClaimTemplates {
				p.claims = append(p.claims, c.Name)
			}
			pods = append(pods, p)
			checkProjectorDisk(t, o, v)
		case *batchv1.Job:
			pods = append(pods, podOwner{o: o, labels: v.Spec.Template.Labels, spec: v.Spec.Template.Spec})
			if !slices.Contains(strings.Split(o.hook, ","), "pre-install") || !slices.Contains(strings.Split(o.hook, ","), "pre-upgrade") {
				t.Errorf("%s: the migrations Job is hook %q, want pre-install,pre-upgrade", o.name, o.hook)
			}
			if args := v.Spec.Template.Spec.Containers[0].Args; !slices.Equal(args, []string{"migrate"}) {
				t.Errorf("%s: args %q, want migrate", o.name, args)
			}
			if v.Spec.ActiveDeadlineSeconds == nil {
				t.Errorf("%s: no activeDeadlineSeconds: a migration that hangs would hold the upgrade", o.name)
			}
		case *corev1.Pod:
			pods = append(pods, podOwner{o: o, labels: v.Labels, spec: v.Spec})
			if o.hook != "test" {
				t.Errorf("%s: a bare Pod that is not the test hook", o.name)
			}
			if args := v.Spec.Containers[0].Args; len(args) < 2 || args[0] != "config" || args[1] != "check" {
				t.Errorf("%s: args %q, want config check", o.name, args)
			}
		case *corev1.Service:
			services[o.name] = v
		}
	}
	matchesPods := func(sel map[string]string) []podOwner {
		var out []podOwner
		for _, p := range pods {
			if len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(p.labels)) {
				out = append(out, p)
			}
		}
		return out
	}
	for _, p := range pods {
		checkPod(t, p, settings)
	}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *corev1.Service:
			m := matchesPods(v.Spec.Selector)
			if len(m) == 0 {
				t.Errorf("Service %s selects no pod of the chart", o.name)
			}
			for _, port := range v.Spec.Ports {
				for _, p := range m {
					if !hasPort(p.spec, port.TargetPort.String()) {
						t.Errorf("Service %s: target port %s is not a port of %s", o.name, port.TargetPort.String(), p.o.name)
					}
				}
			}
		case *policyv1.PodDisruptionBudget:
			if len(matchesPods(v.Spec.Selector.MatchLabels)) == 0 {
				t.Errorf("PodDisruptionBudget %s selects no pod", o.name)
			}
		case *networkingv1.NetworkPolicy:
			if len(matchesPods(v.Spec.PodSelector.MatchLabels)) == 0 {
				t.Errorf("NetworkPolicy %s selects no pod", o.name)
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			if !hasObject(objs, v.Spec.ScaleTargetRef.Kind, v.Spec.ScaleTargetRef.Name) {
				t.Errorf("HorizontalPodAutoscaler %s scales %s/%s, which the chart does not render", o.name, v.Spec.ScaleTargetRef.Kind, v.Spec.ScaleTargetRef.Name)
			}
			for _, d := range objs {
				if dep, ok := d.obj.(*appsv1.Deployment); ok && d.name == v.Spec.ScaleTargetRef.Name && dep.Spec.Replicas != nil {
					t.Errorf("Deployment %s sets replicas while %s scales it: each upgrade would reset the autoscaler's count", d.name, o.name)
				}
			}
		case *monitoringv1.ServiceMonitor:
			n := 0
			for name, s := range services {
				if labels.SelectorFromSet(v.Spec.Selector.MatchLabels).Matches(labels.Set(s.Labels)) {
					n++
					for _, ep := range v.Spec.Endpoints {
						if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
							t.Errorf("ServiceMonitor %s scrapes port %q, which Service %s lacks", o.name, ep.Port, name)
						}
					}
				}
			}
			if n == 0 {
				t.Errorf("ServiceMonitor %s selects no Service", o.name)
			}
		case *appsv1.StatefulSet:
			if s, ok := services[v.Spec.ServiceName]; !ok || s.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("StatefulSet %s: serviceName %q is not a headless Service of the chart", o.name, v.Spec.ServiceName)
			}
		}
	}
}

func checkSelector(t *testing.T, o object, sel, podLabels map[string]string) {
	t.Helper()
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(podLabels)) {
		t.Errorf("%s %s: selector %v does not match its pods' labels %v", o.kind, o.name, sel, podLabels)
	}
}

// checkPod: non-root, read-only root, no capabilities, RuntimeDefault
// seccomp, requests and a memory limit; a long-running process has its
// probes; every ENDCAP_* variable is a setting, every file setting a file
// the container mounts.
func checkPod(t *testing.T, p podOwner, settings map[string]bool) {
	t.Helper()
	where := p.o.kind + " " + p.o.name
	ps := p.spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v, want runAsNonRoot and seccomp RuntimeDefault", where, ps)
	}
	if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a Kubernetes API token it never uses", where)
	}
	longRunning := p.o.kind == "Deployment" || p.o.kind == "StatefulSet"
	if longRunning && p.spec.TerminationGracePeriodSeconds == nil {
		t.Errorf("%s: no terminationGracePeriodSeconds", where)
	}
	volumes := map[string]bool{}
	for _, v := range p.spec.Volumes {
		volumes[v.Name] = true
	}
	for _, c := range p.claims {
		volumes[c] = true
	}
	for _, c := range p.spec.Containers {
		where := where + " container " + c.Name
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s: no securityContext", where)
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0:
			t.Errorf("%s: may run as root", where)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s: root file system is writable", where)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s: allows privilege escalation", where)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
			t.Errorf("%s: capabilities %+v, want all dropped, none added", where, sc.Capabilities)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			t.Errorf("%s: no memory limit", where)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				t.Errorf("%s: no %s request", where, r)
			}
		}
		if longRunning {
			checkProbe(t, where+" liveness", c.LivenessProbe, "/livez", p.spec)
			checkProbe(t, where+" readiness", c.ReadinessProbe, "/readyz", p.spec)
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" }) {
			t.Errorf("%s: no writable /tmp on a read-only root", where)
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("%s: mounts volume %s, which the pod lacks", where, m.Name)
			}
		}
		for _, e := range c.Env {
			if !strings.HasPrefix(e.Name, "ENDCAP_") {
				continue
			}
			if !settings[e.Name] {
				t.Errorf("%s: %s is not a setting of docs/operations/operations.md's configuration table", where, e.Name)
			}
			if e.ValueFrom != nil {
				t.Errorf("%s: %s comes from valueFrom: secrets are given by their _FILE forms, from mounted files", where, e.Name)
			}
			if strings.HasPrefix(e.Value, "/etc/endcap/files/") && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return strings.HasPrefix(e.Value, m.MountPath+"/")
			}) {
				t.Errorf("%s: %s=%s is under no mounted volume", where, e.Name, e.Value)
			}
		}
	}
}

func checkProbe(t *testing.T, where string, p *corev1.Probe, path string, spec corev1.PodSpec) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s: no HTTP probe", where)
		return
	}
	if p.HTTPGet.Path != path {
		t.Errorf("%s: probe path %s, want %s", where, p.HTTPGet.Path, path)
	}
	if !hasPort(spec, p.HTTPGet.Port.String()) {
		t.Errorf("%s: probe port %s is not a port of the container", where, p.HTTPGet.Port.String())
	}
}

// checkProjectorDisk: a projector has one disk of its own (a claim
// template, not a shared volume), mounted where ENDCAP_PROJECTOR_STATE_DIR
// points.
func checkProjectorDisk(t *testing.T, o object, ss *appsv1.StatefulSet) {
	t.Helper()
	if n := len(ss.Spec.VolumeClaimTemplates); n != 1 {
		t.Errorf("StatefulSet %s: %d volumeClaimTemplates, want one disk per projector", o.name, n)
		return
	}
	claim := ss.Spec.VolumeClaimTemplates[0]
	if !slices.Equal(claim.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("StatefulSet %s: claim access modes %v, want ReadWriteOnce", o.name, claim.Spec.AccessModes)
	}
	if _, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		t.Errorf("StatefulSet %s: claim without a size", o.name)
	}
	for _, v := range ss.Spec.Template.Spec.Volumes {
		if v.Name == claim.Name {
			t.Errorf("StatefulSet %s: volume %s shadows the claim template", o.name, v.Name)
		}
	}
	c := ss.Spec.Template.Spec.Containers[0]
	dir := ""
	for _, e := range c.Env {
		if e.Name == "ENDCAP_PROJECTOR_STATE_DIR" {
			dir = e.Value
		}
	}
	if dir == "" {
		t.Errorf("StatefulSet %s: ENDCAP_PROJECTOR_STATE_DIR unset: the claim store would be a new temporary directory each start", o.name)
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == claim.Name && (dir == m.MountPath || strings.HasPrefix(dir, m.MountPath+"/"))
	}) {
		t.Errorf("StatefulSet %s: ENDCAP_PROJECTOR_STATE_DIR=%s is not on the claim %s", o.name, dir, claim.Name)
	}
}

func hasPort(spec corev1.PodSpec, port string) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
				return true
			}
		}
	}
	return false
}

func hasObject(objs []object, kind, name string) bool {
	return slices.ContainsFunc(objs, func(o object) bool { return o.kind == kind && o.name == name })
}

// requireKinds fails unless each "Kind/name" (or "Kind") is rendered.
func requireKinds(t *testing.T, objs []object, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.ContainsFunc(objs, func(o object) bool { return o.kind+"/"+o.name == w || o.kind == w }) {
			t.Errorf("the render lacks %s", w)
		}
	}
}

func forbidKinds(t *testing.T, objs []object, not ...string) {
	t.Helper()
	for _, w := range not {
		if slices.ContainsFunc(objs, func(o object) bool { return o.kind+"/"+o.name == w || o.kind == w }) {
			t.Errorf("the render has %s", w)
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y)
		}
	}
	return ""
}

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}
