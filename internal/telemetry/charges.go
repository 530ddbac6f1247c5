package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the interactions projector: the interactions fact table, charges
// and spend (docs/design/charges.md).
var (
	Interactions = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_interactions_total",
		Help: "Impressions and clicks folded into the interactions table, by kind and sponsored (true, false); replays count again.",
	}, []string{"kind", "sponsored"})
	InteractionsSkipped = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_interactions_skipped_total",
		Help: "Events of the events topic the interactions projector did not fold, by reason (too_old, bad_marketplace); undecodable records are endcap_projector_undecodable_records_total.",
	}, []string{"reason"})
	Charges = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_charges_total",
		Help: "Chargeable interactions by outcome: applied (spend moved), replayed (same record again, nothing moved), duplicate (the winner's interaction was charged, or refused, for another event), refused (over the campaign's daily, weekly, monthly or total budget, nothing moved), invalid (refused by an invalid-click rule, nothing moved).",
	}, []string{"charge_type", "outcome"})
	ChargedMicros = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_charged_micros_total",
		Help: "Micro-units added to campaign spend by applied charges, all marketplaces and currencies together (a rate, not an invoice).",
	}, []string{"charge_type"})
	NotCharged = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_charges_refused_total",
		Help: "Sponsored interactions not charged, by reason (kind, before_auction, after_window, bad_token, duplicate, daily_budget, weekly_budget, monthly_budget, total_budget, insufficient_balance, invalid_no_impression, invalid_too_fast, invalid_repeat_click, invalid_click_rate).",
	}, []string{"reason"})
	ChargeLatency = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "endcap_charge_visible_seconds",
		Help:    "Time from an event's receipt by the API to its charge row being inserted into ClickHouse (first application only).",
		Buckets: []float64{.1, .25, .5, 1, 1.5, 2, 3, 5, 10, 30, 60, 300},
	})
)
