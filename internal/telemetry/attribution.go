package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the attribution projector (docs/design/attribution.md).
var (
	AttributedItems = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_attribution_items_total",
		Help: "Purchased items (re)computed by the attribution projector, by reason (product_click, product_impression, halo_click, halo_impression, none); every recomputation counts.",
	}, []string{"reason"})
	AttributionSkipped = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "endcap_attribution_skipped_total",
		Help: "Events of the events topic the attribution projector ignored, by reason (too_old, bad_marketplace, bad_token, no_user: consent denied); undecodable records are endcap_projector_undecodable_records_total.",
	}, []string{"reason"})
	AttributionBatchSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "endcap_attribution_batch_seconds",
		Help:    "Time to copy, read, attribute and insert one batch of the attribution projector.",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2, 5, 10, 30},
	})
)
