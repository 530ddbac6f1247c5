package monitoring

import (
	_ "embed"
	"fmt"
	"regexp"
	"slices"

	"github.com/goccy/go-yaml"
)

// RulesYAML is endcap.rules.yml.
//
//go:embed endcap.rules.yml
var RulesYAML []byte

// RuleFile is the structure of a Prometheus rules file.
type RuleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []Rule `yaml:"rules"`
	} `yaml:"groups"`
}

// Rule is one recording or alerting rule.
type Rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// Rules decodes endcap.rules.yml.
func Rules() ([]Rule, error) {
	var f RuleFile
	if err := yaml.Unmarshal(RulesYAML, &f); err != nil {
		return nil, fmt.Errorf("endcap.rules.yml: %w", err)
	}
	var out []Rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// metricName matches the names of the metrics Endcap's processes export
// (its own, the Go runtime's and the process's), as they appear in a
// query: recording rules (endcap:…) and Prometheus's own series (ALERTS)
// do not match.
var metricName = regexp.MustCompile(`\b(?:endcap|go|process)_[a-zA-Z0-9_]+\b`)

// MetricNames returns, sorted, the names of the exported metrics that the
// rules and the dashboards query: a histogram's as its _bucket, _sum or
// _count series.
func MetricNames() ([]string, error) {
	rules, err := Rules()
	if err != nil {
		return nil, err
	}
	var exprs []string
	for _, r := range rules {
		exprs = append(exprs, r.Expr)
	}
	for _, d := range Dashboards() {
		exprs = append(exprs, d.Exprs()...)
	}
	var names []string
	for _, e := range exprs {
		names = append(names, metricName.FindAllString(e, -1)...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
