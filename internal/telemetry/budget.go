package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the budget spend cache (package budget, docs/design/budgets.md). One
// cache runs per process; a second one would share these series.
var (
	BudgetRefreshes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_budget_refreshes_total",
		Help: "Loads of one marketplace's spend from Redis into the budget cache, by result (ok, error).",
	}, []string{"result"})
	BudgetRefreshDuration = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "endcap_budget_refresh_duration_seconds",
		Help:    "Duration of one budget cache refresh pass over all cached marketplaces.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	})
	BudgetSnapshotAge = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "endcap_budget_snapshot_max_age_seconds",
		Help: "Age of the oldest marketplace spend snapshot in the budget cache (time since registration for one never loaded), set after each refresh pass.",
	})
	ChargeApplyDuration = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "endcap_budget_charge_apply_seconds",
		Help:    "Duration of applying one batch's charges to the spend counters in Redis (budget.ApplyCharges, from the interactions sink).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
	BudgetMarketplaces = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "endcap_budget_marketplaces",
		Help: "Marketplaces whose spend the budget cache holds.",
	})
	BudgetCampaigns = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "endcap_budget_campaigns",
		Help: "Campaigns whose spend the budget cache holds (read from Redis at every refresh).",
	})
	ChargesUnreplicated = promauto.NewCounter(prometheus.CounterOpts{
		Name: "endcap_budget_charge_calls_unreplicated_total",
		Help: "Charge script calls acknowledged by a Redis master with fewer replicas attached than ENDCAP_REDIS_WAIT_REPLICAS asks for (after a failover, until the failed node is back): lost if that master fails too.",
	})
)

// BudgetSpendReads counts the reads of campaigns' spend for the management
// API (budget.Reader), by result: ok, error (Redis failed or did not answer
// in time), skipped (not sent: a read failed less than a second ago).
var BudgetSpendReads = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "endcap_budget_spend_reads_total",
	Help: "Reads of campaigns' spend for the management API, by result (ok, error, skipped).",
}, []string{"result"})
