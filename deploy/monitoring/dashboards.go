// Package monitoring holds Endcap's monitoring kit: the Prometheus rules
// (endcap.rules.yml, its unit tests endcap.rules.test.yml) and the Grafana
// dashboards (dashboards/*.json), which are written from the definitions
// below by `go test ./deploy/monitoring -run TestDashboards -update`.
package monitoring

import (
	"encoding/json"
	"strings"
)

// Dashboard is one Grafana dashboard: rows of panels.
type Dashboard struct {
	File, UID, Title, Description string
	Rows                          []Row
}

// Row is a titled row of panels, laid out left to right.
type Row struct {
	Title  string
	Panels []Panel
}

// Panel is a time series (or, with Stat, a single figure) of one or more
// PromQL queries.
type Panel struct {
	Title, Description, Unit string
	Stat                     bool
	Queries                  []Query
}

// Query is one PromQL expression and its legend.
type Query struct{ Expr, Legend string }

func q(expr, legend string) Query { return Query{Expr: expr, Legend: legend} }

// Dashboards are the kit's dashboards: an overview and one per tier.
func Dashboards() []Dashboard {
	return []Dashboard{overview(), apiDashboard(), foldDashboard(), exportsDashboard()}
}

func overview() Dashboard {
	return Dashboard{File: "endcap-overview.json", UID: "endcap-overview", Title: "Endcap / Overview",
		Description: "The whole system at a glance: traffic, errors, the fold's lag, dependencies, alerts.",
		Rows: []Row{
			{"Health", []Panel{
				{Title: "Firing alerts", Stat: true, Queries: []Query{q(`count(ALERTS{alertname=~"Endcap.*",alertstate="firing"}) or vector(0)`, "")}},
				{Title: "5xx share", Unit: "percentunit", Stat: true, Queries: []Query{q(`endcap:http_5xx:ratio_rate5m`, "")}},
				{Title: "Events fold lag", Unit: "short", Stat: true, Queries: []Query{q(`endcap:fold_lag:records{group="endcap-projector-events"}`, "")}},
				{Title: "Rollups age", Unit: "s", Stat: true, Queries: []Query{q(`time() - max(endcap_rollup_last_success_timestamp_seconds)`, "")}},
			}},
			{"Traffic", []Panel{
				{Title: "Requests by route", Unit: "reqps", Queries: []Query{q(`sum by (route) (endcap:http_requests:rate5m)`, "{{route}}")}},
				{Title: "Events accepted", Unit: "ops", Queries: []Query{q(`sum by (kind) (rate(endcap_events_accepted_total[5m]))`, "{{kind}}")}},
				{Title: "Auctions", Unit: "ops", Queries: []Query{q(`sum by (kind) (rate(endcap_auctions_total[5m]))`, "{{kind}}")}},
			}},
			{"Dependencies", []Panel{
				{Title: "Readiness checks failing", Description: "Processes whose readiness check fails, by check.", Queries: []Query{q(`count by (check) (endcap_readiness_check_ok == 0)`, "{{check}}")}},
				{Title: "Budget spend snapshot age", Unit: "s", Queries: []Query{q(`max(endcap_budget_snapshot_max_age_seconds)`, "oldest")}},
				{Title: "Rate limiter breaker open", Queries: []Query{q(`max(endcap_rate_limit_breaker_open)`, "open")}},
			}},
			{"Money", []Panel{
				{Title: "Charged per second (micro-units)", Unit: "short", Queries: []Query{q(`sum by (charge_type) (rate(endcap_charged_micros_total[5m]))`, "{{charge_type}}")}},
				{Title: "Charges by outcome", Unit: "ops", Queries: []Query{q(`sum by (outcome) (rate(endcap_charges_total[5m]))`, "{{outcome}}")}},
				{Title: "Event to charge visible, p99", Unit: "s", Queries: []Query{q(`histogram_quantile(0.99, sum by (le) (rate(endcap_charge_visible_seconds_bucket[5m])))`, "p99")}},
			}},
			{"Processes", []Panel{
				{Title: "Resident memory / GOMEMLIMIT", Unit: "percentunit", Queries: []Query{q(`process_resident_memory_bytes / go_gc_gomemlimit_bytes`, "{{instance}}")}},
				{Title: "CPU", Unit: "percentunit", Queries: []Query{q(`rate(process_cpu_seconds_total[5m])`, "{{instance}}")}},
				{Title: "Goroutines", Queries: []Query{q(`go_goroutines`, "{{instance}}")}},
			}},
		}}
}

func apiDashboard() Dashboard {
	return Dashboard{File: "endcap-api.json", UID: "endcap-api", Title: "Endcap / API",
		Description: "The API tier: /v2 (events, auctions) and /public/v1.",
		Rows: []Row{
			{"Requests", []Panel{
				{Title: "Requests by route and code", Unit: "reqps", Queries: []Query{q(`endcap:http_requests:rate5m`, "{{route}} {{code}}")}},
				{Title: "5xx share", Unit: "percentunit", Queries: []Query{q(`endcap:http_5xx:ratio_rate5m`, "5xx")}},
				{Title: "/v2 latency p99", Unit: "s", Queries: []Query{q(`endcap:v2_request_duration_seconds:p99_rate5m`, "{{route}}")}},
				{Title: "Latency p50 by route", Unit: "s", Queries: []Query{q(`histogram_quantile(0.5, sum by (route, le) (rate(endcap_http_request_duration_seconds_bucket[5m])))`, "{{route}}")}},
			}},
			{"Events", []Panel{
				{Title: "Events accepted by kind", Unit: "ops", Queries: []Query{q(`sum by (kind) (rate(endcap_events_accepted_total[5m]))`, "{{kind}}")}},
				{Title: "Rejected /v2/events requests by code", Unit: "reqps", Queries: []Query{q(`sum by (code) (rate(endcap_events_rejected_requests_total[5m]))`, "{{code}}")}},
				{Title: "Rejected share", Unit: "percentunit", Queries: []Query{q(`endcap:events_rejected:ratio_rate5m`, "rejected")}},
				{Title: "Shed at the in-flight bound", Unit: "reqps", Queries: []Query{q(`sum by (kind) (rate(endcap_admission_shed_total[5m]))`, "{{kind}}")}},
			}},
			{"Auctions", []Panel{
				{Title: "Auctions by kind and fill", Unit: "ops", Queries: []Query{q(`sum by (kind, filled) (rate(endcap_auctions_total[5m]))`, "{{kind}} filled={{filled}}")}},
				{Title: "Rejected auction requests", Unit: "reqps", Queries: []Query{q(`sum by (code) (rate(endcap_auctions_rejected_requests_total[5m]))`, "{{code}}")}},
				{Title: "Auction records", Unit: "ops", Queries: []Query{q(`sum by (result) (rate(endcap_auction_records_total[5m]))`, "{{result}}")}},
				{Title: "Budget refreshes", Unit: "ops", Queries: []Query{q(`sum by (result) (rate(endcap_budget_refreshes_total[5m]))`, "{{result}}")}},
			}},
			{"Kafka and Redis", []Panel{
				{Title: "Produced records", Unit: "ops", Queries: []Query{q(`sum by (topic, result) (rate(endcap_kafka_produced_records_total[5m]))`, "{{topic}} {{result}}")}},
				{Title: "Records buffered for producing", Queries: []Query{q(`sum by (instance) (endcap_kafka_client_buffered_produce_records_total)`, "{{instance}}")}},
				{Title: "Rate-limit checks skipped", Unit: "reqps", Queries: []Query{q(`sum by (reason) (rate(endcap_rate_limit_skipped_total[5m]))`, "{{reason}}")}},
				{Title: "Spend reads", Unit: "ops", Queries: []Query{q(`sum by (result) (rate(endcap_budget_spend_reads_total[5m]))`, "{{result}}")}},
			}},
		}}
}

func foldDashboard() Dashboard {
	return Dashboard{File: "endcap-fold.json", UID: "endcap-fold", Title: "Endcap / Fold",
		Description: "The projectors: consumer groups, their lag and steps, ClickHouse inserts, charges, claims, rollups.",
		Rows: []Row{
			{"Consumer groups", []Panel{
				{Title: "Lag by group", Unit: "short", Queries: []Query{q(`endcap:fold_lag:records`, "{{group}}")}},
				{Title: "Stalled for", Unit: "s", Queries: []Query{q(`max by (group) (endcap_projector_stalled_seconds)`, "{{group}}")}},
				{Title: "Consumed records", Unit: "ops", Queries: []Query{q(`sum by (group) (rate(endcap_kafka_consumed_records_total[5m]))`, "{{group}}")}},
				{Title: "Batch retries", Unit: "ops", Queries: []Query{q(`sum by (group) (rate(endcap_projector_batch_retries_total[5m]))`, "{{group}}")}},
			}},
			{"Steps", []Panel{
				{Title: "Step time p99", Unit: "s", Queries: []Query{q(`histogram_quantile(0.99, sum by (group, step, le) (rate(endcap_projector_step_seconds_bucket[5m])))`, "{{group}} {{step}}")}},
				{Title: "Sink time p99", Unit: "s", Queries: []Query{q(`histogram_quantile(0.99, sum by (sink, le) (rate(endcap_projector_sink_batch_seconds_bucket[5m])))`, "{{sink}}")}},
				{Title: "Undecodable records", Unit: "ops", Queries: []Query{q(`sum by (group) (rate(endcap_projector_undecodable_records_total[5m]))`, "{{group}}")}},
				{Title: "Duplicates dropped", Unit: "ops", Queries: []Query{q(`sum by (table) (rate(endcap_projector_duplicates_total[5m]))`, "{{table}}")}},
			}},
			{"ClickHouse", []Panel{
				{Title: "Insert batches", Unit: "ops", Queries: []Query{q(`sum by (table, result) (rate(endcap_clickhouse_insert_batches_total[5m]))`, "{{table}} {{result}}")}},
				{Title: "Inserted rows", Unit: "rowsps", Queries: []Query{q(`sum by (table) (rate(endcap_clickhouse_insert_rows_total[5m]))`, "{{table}}")}},
				{Title: "Insert p99", Unit: "s", Queries: []Query{q(`histogram_quantile(0.99, sum by (table, le) (rate(endcap_clickhouse_insert_duration_seconds_bucket[5m])))`, "{{table}}")}},
			}},
			{"Charges", []Panel{
				{Title: "Charges by outcome", Unit: "ops", Queries: []Query{q(`sum by (charge_type, outcome) (rate(endcap_charges_total[5m]))`, "{{charge_type}} {{outcome}}")}},
				{Title: "Not charged by reason", Unit: "ops", Queries: []Query{q(`sum by (reason) (rate(endcap_charges_refused_total[5m]))`, "{{reason}}")}},
				{Title: "Charge apply p99", Unit: "s", Queries: []Query{q(`histogram_quantile(0.99, sum by (le) (rate(endcap_budget_charge_apply_seconds_bucket[5m])))`, "p99")}},
				{Title: "Unreplicated charge calls", Unit: "ops", Queries: []Query{q(`sum(rate(endcap_budget_charge_calls_unreplicated_total[5m]))`, "unreplicated")}},
			}},
			{"Claims and rollups", []Panel{
				{Title: "Claim store", Unit: "bytes", Queries: []Query{q(`endcap_projector_claim_store_bytes`, "{{instance}} {{kind}}")}},
				{Title: "Claim store volume free", Unit: "percentunit", Queries: []Query{q(`endcap_projector_claim_store_volume_bytes{kind="available"} / ignoring (kind) endcap_projector_claim_store_volume_bytes{kind="size"}`, "{{instance}}")}},
				{Title: "Rollup runs", Unit: "ops", Queries: []Query{q(`sum by (result) (rate(endcap_rollup_runs_total[15m]))`, "{{result}}")}},
				{Title: "Attribution batch p99", Unit: "s", Queries: []Query{q(`histogram_quantile(0.99, sum by (le) (rate(endcap_attribution_batch_seconds_bucket[5m])))`, "p99")}},
			}},
		}}
}

func exportsDashboard() Dashboard {
	return Dashboard{File: "endcap-exports-webhooks.json", UID: "endcap-exports-webhooks", Title: "Endcap / Exports and webhooks",
		Description: "The exporter: exports (queue, duration, outcome) and webhook deliveries.",
		Rows: []Row{
			{"Exports", []Panel{
				{Title: "Exports by outcome", Unit: "ops", Queries: []Query{q(`sum by (outcome) (rate(endcap_exports_total[15m]))`, "{{outcome}}")}},
				{Title: "Queue p90", Unit: "s", Queries: []Query{q(`histogram_quantile(0.9, sum by (le) (rate(endcap_export_queue_seconds_bucket[15m])))`, "p90")}},
				{Title: "Attempt p90", Unit: "s", Queries: []Query{q(`histogram_quantile(0.9, sum by (format, le) (rate(endcap_export_seconds_bucket[15m])))`, "{{format}}")}},
				{Title: "Rows written", Unit: "rowsps", Queries: []Query{q(`sum by (format) (rate(endcap_export_rows_total[15m]))`, "{{format}}")}},
			}},
			{"Webhooks", []Panel{
				{Title: "Attempts by outcome", Unit: "ops", Queries: []Query{q(`sum by (outcome) (rate(endcap_webhook_attempts_total[5m]))`, "{{outcome}}")}},
				{Title: "Deliveries by outcome", Unit: "ops", Queries: []Query{q(`sum by (outcome) (rate(endcap_webhook_deliveries_total[5m]))`, "{{outcome}}")}},
				{Title: "Oldest pending", Unit: "s", Queries: []Query{q(`max(endcap_webhook_oldest_pending_seconds)`, "oldest")}},
				{Title: "Overdue", Unit: "s", Queries: []Query{q(`max(endcap_webhook_overdue_seconds)`, "overdue")}},
				{Title: "Attempt p99", Unit: "s", Queries: []Query{q(`histogram_quantile(0.99, sum by (le) (rate(endcap_webhook_attempt_seconds_bucket[5m])))`, "p99")}},
				{Title: "Event to first attempt p99", Unit: "s", Queries: []Query{q(`histogram_quantile(0.99, sum by (le) (rate(endcap_webhook_first_attempt_delay_seconds_bucket[5m])))`, "p99")}},
			}},
			{"Dependencies", []Panel{
				{Title: "Exporter readiness", Queries: []Query{q(`min by (check) (endcap_readiness_check_ok)`, "{{check}}")}},
			}},
		}}
}

// JSON is the dashboard in Grafana's JSON model (schema 39), its queries on
// a Prometheus data source chosen when it is imported (${DS_PROMETHEUS}).
func (d Dashboard) JSON() ([]byte, error) {
	ds := map[string]any{"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
	var panels []any
	id, y := 1, 0
	for _, r := range d.Rows {
		panels = append(panels, map[string]any{"id": id, "type": "row", "title": r.Title, "collapsed": false,
			"gridPos": map[string]int{"h": 1, "w": 24, "x": 0, "y": y}, "panels": []any{}})
		id++
		y++
		w := 24 / len(r.Panels)
		if w < 6 {
			w = 6
		}
		x := 0
		for _, p := range r.Panels {
			if x+w > 24 {
				x, y = 0, y+8
			}
			var targets []any
			for i, qq := range p.Queries {
				targets = append(targets, map[string]any{"refId": string(rune('A' + i)), "datasource": ds,
					"expr": qq.Expr, "legendFormat": qq.Legend, "range": true})
			}
			typ, h := "timeseries", 8
			if p.Stat {
				typ = "stat"
			}
			unit := p.Unit
			if unit == "" {
				unit = "short"
			}
			panels = append(panels, map[string]any{"id": id, "type": typ, "title": p.Title, "description": p.Description,
				"datasource": ds, "targets": targets, "gridPos": map[string]int{"h": h, "w": w, "x": x, "y": y},
				"fieldConfig": map[string]any{"defaults": map[string]any{"unit": unit}, "overrides": []any{}}})
			id++
			x += w
		}
		y += 8
	}
	out := map[string]any{
		"__inputs": []any{map[string]any{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource",
			"pluginId": "prometheus", "pluginName": "Prometheus"}},
		"uid": d.UID, "title": d.Title, "description": d.Description, "tags": []string{"endcap"},
		"schemaVersion": 39, "editable": true, "timezone": "browser", "refresh": "30s",
		"time":   map[string]string{"from": "now-6h", "to": "now"},
		"panels": panels, "templating": map[string]any{"list": []any{}}, "annotations": map[string]any{"list": []any{}},
		"links": []any{map[string]any{"title": "Endcap", "type": "dashboards", "tags": []string{"endcap"}, "asDropdown": true}},
	}
	b, err := json.MarshalIndent(out, "", "  ")
	return append(b, '\n'), err
}

// Exprs returns every query of the dashboard.
func (d Dashboard) Exprs() []string {
	var out []string
	for _, r := range d.Rows {
		for _, p := range r.Panels {
			for _, qq := range p.Queries {
				out = append(out, strings.TrimSpace(qq.Expr))
			}
		}
	}
	return out
}
